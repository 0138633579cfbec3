"""The Runtime API client's parsing, without HAProxy (captured HAProxy 2.6 replies)."""

from __future__ import annotations

import pytest

from tarn.haproxy.plan import AdminState, Command, Endpoint, SetAddress, SetState
from tarn.haproxy.runtime import (
    HaproxyUnavailable,
    RuntimeApi,
    RuntimeApiError,
    admin_state,
    check_reply,
    parse_backups,
    parse_servers_state,
    parse_sessions,
    render,
)

PLACEHOLDER_IP = "0.0.0.0"  # noqa: S104 - the cfg's address of a free slot, nothing binds it

SERVERS_STATE = """1
# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight \
srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state \
srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl \
srv_check_port srv_check_addr srv_agent_addr srv_agent_port
3 triton_backend 1 triton-1 127.0.0.2 2 4 1 1 0 1 0 2 6 0 0 0 - 8000 - 0 0 - - 0
3 triton_backend 2 triton-2 127.0.0.3 2 12 1 1 0 6 3 4 6 0 0 0 - 8001 - 0 0 - - 0
3 triton_backend 3 triton-3 0.0.0.0 0 5 1 1 1 1 0 0 14 0 0 0 - 8000 - 0 0 - - 0

"""

SHOW_STAT = (
    "# pxname,svname,qcur,qmax,scur,smax,slim,stot,status\n"
    "triton_backend,triton-1,0,0,2,3,,10,UP\n"
    "triton_backend,triton-2,0,0,1,1,,4,DRAIN\n"
    "triton_backend,triton-3,0,0,0,0,,0,MAINT\n"
    "triton_backend,BACKEND,0,0,3,3,,14,UP\n"
)


def test_servers_state() -> None:
    servers = parse_servers_state(SERVERS_STATE)
    assert [(s.name, s.addr, s.port, s.admin) for s in servers] == [
        ("triton-1", "127.0.0.2", 8000, AdminState.READY),
        ("triton-2", "127.0.0.3", 8001, AdminState.DRAIN),
        ("triton-3", PLACEHOLDER_IP, 8000, AdminState.MAINT),
    ]


def test_servers_state_rejects_an_error_text() -> None:
    with pytest.raises(RuntimeApiError, match="unexpected reply"):
        parse_servers_state("Can't find backend.\n")


def test_sessions() -> None:
    assert parse_sessions(SHOW_STAT) == {"triton-1": 2, "triton-2": 1, "triton-3": 0}


def test_backup_servers_are_found_by_their_bck_column() -> None:
    stat = (
        "# pxname,svname,qcur,qmax,scur,smax,slim,stot,status,bck\n"
        "triton_backend,triton-1,0,0,2,3,,10,UP,0\n"
        "triton_backend,activator,0,0,0,0,,3,UP,1\n"
        "triton_backend,BACKEND,0,0,3,3,,14,UP,\n"
    )
    assert parse_backups(stat) == {"activator"}
    assert parse_backups(SHOW_STAT) == set()  # no bck column: no backups


@pytest.mark.parametrize(
    ("bits", "state"),
    [
        (0, AdminState.READY),
        (4, AdminState.READY),  # "disabled" in the cfg, then set ready: CMAINT stays as a record
        (5, AdminState.MAINT),  # disabled in the cfg
        (1, AdminState.MAINT),
        (8, AdminState.DRAIN),
        (12, AdminState.DRAIN),
        (9, AdminState.MAINT),  # maintenance wins over drain
        (0x20, AdminState.MAINT),
    ],
)
def test_admin_state(bits: int, state: AdminState) -> None:
    assert admin_state(bits) is state


@pytest.mark.parametrize(
    ("planned", "line"),
    [
        (
            SetAddress("triton-1", Endpoint("10.0.0.1", 8000), ""),
            "set server triton_backend/triton-1 addr 10.0.0.1 port 8000",
        ),
        (SetState("triton-2", AdminState.DRAIN, ""), "set server triton_backend/triton-2 state drain"),
        (SetState("triton-2", AdminState.MAINT, ""), "set server triton_backend/triton-2 state maint"),
    ],
)
def test_render(planned: Command, line: str) -> None:
    assert render("triton_backend", planned) == line


ADDR = "set server b/s addr 10.0.0.1 port 8000"
STATE = "set server b/s state ready"


@pytest.mark.parametrize(
    ("line", "reply"),
    [
        (
            ADDR,
            "IP changed from '0.0.0.0' to '10.0.0.1', no need to change the port by 'stats socket command'\n",
        ),
        (ADDR, "no need to change the addr, no need to change the port by 'stats socket command'\n"),
        (STATE, "\n"),
    ],
)
def test_replies_accepted(line: str, reply: str) -> None:
    check_reply(line, reply)


@pytest.mark.parametrize(
    ("line", "reply"),
    [
        (ADDR, "Invalid addr 'bogus' by 'stats socket command'\n"),
        (ADDR, "No such server.\n"),
        (STATE, "No such server.\n"),
        (STATE, "No such backend.\n"),
        (STATE, "Permission denied\n"),
        (ADDR, ""),
    ],
)
def test_replies_refused(line: str, reply: str) -> None:
    with pytest.raises(RuntimeApiError, match="HAProxy refused"):
        check_reply(line, reply)


def test_missing_socket_names_the_socket(tmp_path) -> None:
    api = RuntimeApi(str(tmp_path / "haproxy.sock"))
    with pytest.raises(HaproxyUnavailable, match=r"haproxy\.sock: No such file"):
        api.slots("triton_backend")
