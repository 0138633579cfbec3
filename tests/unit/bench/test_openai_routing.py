"""bench/openai_routing.py's HAProxy: the haproxy role's haproxy.cfg.j2 rendered by Ansible (as the
bench renders it), and the /v1 backend the bench cuts out of it: the role's directives as rendered,
the bench's two loopback fronts instead of the role's slots; the whole bench cfg passes haproxy -c."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.openai_routing import BACKEND, loopback_cfg, openai_section, render_role, section

FRONTS = [("instance-1", 41001), ("instance-2", 41002)]


@pytest.fixture(scope="module", params=["leastconn", "roundrobin"])
def rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(balance, the role's haproxy.cfg rendered with haproxy_openai_balance=balance)."""
    balance = str(request.param)
    return balance, render_role(balance, tmp_path_factory.mktemp("cfg") / "role")


def test_the_backend_is_the_roles_with_the_benchs_servers(rendered: tuple[str, str]) -> None:
    balance, cfg = rendered
    lines = openai_section(cfg, BACKEND, FRONTS)
    assert lines[0] == "backend openai_backend"
    directives = [line.strip() for line in lines[1:]]
    for role_line in (
        f"balance {balance}",
        "timeout server 10m",
        "timeout tunnel 10m",
        "option http-no-delay",
        "option http-buffer-request",
        "http-request del-header X-TARN-User",
        "option httpchk GET /health",
        "retries 10",
        "option redispatch 1",
        "retry-on conn-failure empty-response 503",
    ):
        assert role_line in directives
    assert [d for d in directives if d.startswith("default-server ")] == [
        "default-server check inter 1s fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down"
    ]
    assert [d for d in directives if d.split()[0] == "server"] == [
        "server instance-1 127.0.0.1:41001",
        "server instance-2 127.0.0.1:41002",
    ]
    assert "openai-slot" not in "\n".join(lines)
    assert "activator" not in "\n".join(lines)
    # nothing of the Triton backend (/v2) that precedes it in the role's cfg
    assert "/v2/health/ready" not in "\n".join(lines)


def test_every_directive_of_the_roles_backend_but_its_servers_is_kept(rendered: tuple[str, str]) -> None:
    _balance, cfg = rendered
    role = section(cfg, f"backend {BACKEND}")
    assert any(line.startswith("server openai-") for line in role)  # the slots were there
    bench = [line.strip() for line in openai_section(cfg, BACKEND, FRONTS)[1:]]
    assert bench[: -len(FRONTS)] == [line for line in role if not line.startswith("server ")]


def test_a_backup_server_line_is_dropped_with_the_slots() -> None:
    cfg = (
        "backend openai_backend\n"
        "    balance leastconn\n"
        "    # a comment\n"
        "    server openai-1 openai-slot:9000 disabled init-addr last,0.0.0.0\n"
        "    server activator 127.0.0.1:8099 backup no-check\n"
        "\n"
        "backend other\n"
        "    server x 10.0.0.1:80\n"
    )
    assert openai_section(cfg, "openai_backend", FRONTS[:1]) == [
        "backend openai_backend",
        "    balance leastconn",
        "    server instance-1 127.0.0.1:41001",
    ]


def test_a_missing_backend_is_named() -> None:
    cfg = "global\n    maxconn 10\nbackend triton_backend\n    balance roundrobin\n"
    with pytest.raises(ValueError, match="backend openai_backend"):
        openai_section(cfg, BACKEND, FRONTS)


def test_the_bench_cfg_keeps_the_roles_defaults_less_the_hosts_and_haproxy_accepts_it(
    rendered: tuple[str, str], tmp_path: Path
) -> None:
    _balance, cfg = rendered
    text = loopback_cfg(cfg, BACKEND, FRONTS, 41000, tmp_path / "haproxy.sock")
    defaults, role_defaults = section(text, "defaults"), section(cfg, "defaults")
    assert defaults == [line for line in role_defaults if line in defaults]  # the role's, in order
    assert {"timeout client 50s", "option idle-close-on-response"} <= set(defaults)
    assert sorted(set(role_defaults) - set(defaults)) == [
        "load-server-state-from-file global",
        "log global",
        "option dontlognull",
        "option httplog",
    ]
    socket = f"stats socket {tmp_path / 'haproxy.sock'} mode 600 level admin"
    global_, role_global = section(text, "global"), section(cfg, "global")
    assert global_ == [*(line for line in role_global if line in global_), socket]
    assert "maxconn 4096" in global_
    assert sorted(line.split()[0] for line in set(role_global) - set(global_)) == [
        "chroot", "group", "log", "server-state-file", "stats", "user",
    ]  # fmt: skip
    assert section(text, "frontend entry")[0] == "bind 127.0.0.1:41000"
    assert section(text, f"backend {BACKEND}") == [
        line.strip() for line in openai_section(cfg, BACKEND, FRONTS)[1:]
    ]
    (tmp_path / "haproxy.cfg").write_text(text)
    checked = subprocess.run(
        ["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "WARNING" not in checked.stderr, checked.stderr
