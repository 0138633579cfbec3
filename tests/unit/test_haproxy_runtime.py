"""The Runtime API client's parsing and the sync round, without HAProxy (captured HAProxy 2.6 replies)."""

from __future__ import annotations

import argparse
import logging

import pytest

from tarn.errors import ConfigError
from tarn.haproxy import command
from tarn.haproxy.plan import AdminState, Command, Endpoint, SetAddress, SetState, Slot
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
from tarn.haproxy.sync import BackendSync

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


# ---- one sync round over a fake API


class FakeApi(RuntimeApi):
    def __init__(self, slots: list[Slot] | Exception) -> None:
        super().__init__("/run/fake.sock")
        self.current = slots
        self.applied: list[Command] = []

    def slots(self, backend: str) -> list[Slot]:
        if isinstance(self.current, Exception):
            raise self.current
        return self.current

    def apply(self, backend: str, planned: Command) -> None:
        self.applied.append(planned)


def test_round_applies_the_plan_and_reports_overflow_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tarn.haproxy")
    api = FakeApi([Slot("triton-1", Endpoint(PLACEHOLDER_IP, 8000), AdminState.MAINT)])
    sync = BackendSync(api, "triton_backend")
    wanted = frozenset({Endpoint("10.0.0.1", 8000), Endpoint("10.0.0.2", 8000)})
    sync.reconcile(wanted)
    sync.reconcile(wanted)
    assert len(api.applied) == 4  # the fake does not change: the same plan twice
    overflow = [r for r in caplog.records if "no free slot" in r.getMessage()]
    assert len(overflow) == 1
    assert "10.0.0.2:8000" in overflow[0].getMessage()


def test_round_survives_haproxy_away(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tarn.haproxy")
    api = FakeApi(HaproxyUnavailable("HAProxy's runtime API at /run/fake.sock: No such file or directory"))
    sync = BackendSync(api, "b")
    assert sync.reconcile(frozenset()) is None
    assert sync.reconcile(frozenset()) is None
    api.current = []
    assert sync.reconcile(frozenset()) is not None
    messages = [r.getMessage() for r in caplog.records]
    assert sum("No such file" in m for m in messages) == 1
    assert messages[-1] == "HAProxy answers again on /run/fake.sock"


# ---- the command line


def namespace(**given: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args([])
    for key, value in given.items():
        setattr(args, key, value)
    return args


@pytest.mark.parametrize(
    ("given", "flag"),
    [
        ({}, "--zk-ensemble / --controller-url"),
        ({"zk_ensemble": "zk:2181", "controller_url": "http://c:8888"}, "--zk-ensemble / --controller-url"),
        ({"zk_ensemble": "zk:2181;rm -rf"}, "--zk-ensemble"),
        ({"zk_ensemble": "zk:2181", "zk_path": "services"}, "--zk-path"),
        ({"controller_url": "ftp://c"}, "--controller-url"),
        ({"controller_url": "http://c:8888/?token=x"}, "--controller-url"),
        ({"controller_url": "http://c:8888", "interval": 0}, "--interval"),
        ({"controller_url": "http://c:8888", "token": "a", "token_file": "/f"}, "--token / --token-file"),
        ({"zk_ensemble": "zk:2181", "backend": "a b"}, "--backend"),
        ({"zk_ensemble": "zk:2181", "socket": "haproxy.sock"}, "--socket"),
        ({"zk_ensemble": "zk:2181", "repair_interval": -1.0}, "--repair-interval"),
    ],
)
def test_bad_options_name_the_flag(given: dict[str, object], flag: str) -> None:
    with pytest.raises(ConfigError, match=f"^{flag}"):
        command.options_from(namespace(**given), {})


def test_token_from_the_environment_or_a_file(tmp_path) -> None:
    options = command.options_from(namespace(controller_url="http://c:8888/"), {"TARN_TOKEN": "s3cret"})
    assert options.source.token is not None
    assert options.source.token.reveal() == "s3cret"
    assert options.source.controller_url == "http://c:8888"
    assert "s3cret" not in repr(options)
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    options = command.options_from(namespace(controller_url="http://c:8888", token_file=str(token_file)), {})
    assert options.source.token is not None
    assert options.source.token.reveal() == "from-file"
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match=r"^--token-file"):
        command.options_from(namespace(controller_url="http://c:8888", token_file=str(empty)), {})


def test_zookeeper_options() -> None:
    options = command.options_from(namespace(zk_ensemble="zk1:2181,zk2:2181"), {})
    assert (options.source.zk_ensemble, options.source.zk_path, options.source.token) == (
        "zk1:2181,zk2:2181",
        "/services/triton/instances",
        None,
    )
