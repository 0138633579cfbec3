"""The role tarn.yarn.haproxy without a host: haproxy.cfg and the sync's unit rendered with Ansible's
own templating from the role's defaults and vars, for the OpenAI API's part (issue 35): /v1/ to a
backend of the fronts (leastconn, timeouts for long streams, events passed on at once, no client
X-TARN-User) and /v2 as before; the sync's flags parsed by the sync's own parser; the checks of
tasks/validate.yml evaluated as a table; the argument spec against the defaults; haproxy -c.
tests/integration/test_haproxy_sync.py runs the rendered configuration in a real HAProxy."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.template import Templar, trust_as_template

from tarn.haproxy import command
from tarn.haproxy.runtime import RuntimeApi
from tests.support import ROOT
from tests.support.roles import trusted

ROLE = ROOT / "roles" / "haproxy"
Json = dict[str, Any]


def load(relative: str) -> Any:
    return yaml.safe_load((ROLE / relative).read_text())


DEFAULTS: Json = load("defaults/main.yml")
SPECS: Json = load("meta/argument_specs.yml")["argument_specs"]


def templar(**inputs: Any) -> Templar:
    variables = {
        **trusted(DEFAULTS),
        **trusted(load("vars/main.yml")),
        "ansible_managed": "Ansible managed",
        "inventory_hostname": "edge",
        "role_path": str(ROLE),
        "ansible_playbook_python": "/usr/bin/python3",
        "groups": {"zookeeper": ["zk1", "zk2"]},
        **inputs,
    }
    return Templar(variables=variables)


def render(name: str, **inputs: Any) -> str:
    text = templar(**inputs).template(trust_as_template((ROLE / "templates" / name).read_text()))
    assert isinstance(text, str)
    return text


def sections(cfg: str) -> dict[str, list[str]]:
    """'frontend NAME' / 'backend NAME' / 'global' / 'defaults' -> its directives, comments left out."""
    found: dict[str, list[str]] = {}
    current = ""
    for line in cfg.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            current = line.strip()
            found[current] = []
        else:
            found[current].append(line.strip())
    return found


def seconds(haproxy_time: str) -> float:
    """An HAProxy time (``10m``, ``50s``, ``500ms``; a bare number is milliseconds) in seconds."""
    match = re.fullmatch(r"(\d+)(us|ms|s|m|h|d)?", haproxy_time)
    assert match, haproxy_time
    unit = {"us": 1e-6, "ms": 1e-3, None: 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]
    return int(match[1]) * unit


# ---- haproxy.cfg


def test_v1_goes_to_the_fronts_and_everything_else_to_triton() -> None:
    cfg = sections(render("haproxy.cfg.j2"))
    assert cfg["frontend triton_frontend"] == [
        "bind *:80",
        "acl tarn_openai path_beg /v1/",
        "use_backend openai_backend if tarn_openai",
        "default_backend triton_backend",
    ]


def test_the_fronts_backend_suits_long_streams() -> None:
    backend = sections(render("haproxy.cfg.j2", haproxy_slots=3))["backend openai_backend"]
    assert "balance leastconn" in backend  # streams in flight decide, not turns
    timeouts = dict(line.split()[1:] for line in backend if line.startswith("timeout "))
    assert set(timeouts) == {"server", "tunnel"}
    assert all(seconds(value) >= 600 for value in timeouts.values())
    assert "option http-no-delay" in backend  # each event on its way at once
    assert not [line for line in backend if re.match(r"(compression|filter|cache)", line)]  # answers unheld
    assert "option http-buffer-request" in backend  # the request's body held: retry-on 503 can resend it
    assert "http-request del-header X-TARN-User" in backend  # never the client's word
    assert "option httpchk GET /health" in backend
    assert [line for line in backend if line.startswith("server ")] == [
        *(f"server openai-{n} openai-slot:9000 disabled init-addr last,0.0.0.0" for n in (1, 2, 3)),
        "server activator 127.0.0.1:8099 backup no-check",  # holds /v1 at zero too
    ]


@pytest.mark.parametrize(
    ("inputs", "backup"),
    [
        ({}, "server activator 127.0.0.1:8099 backup no-check"),
        ({"haproxy_activator_listen": "127.0.0.1:7000"}, "server activator 127.0.0.1:7000 backup no-check"),
        ({"haproxy_activator_enabled": False}, None),
        ({"haproxy_sync_enabled": False}, None),  # no sync, no activator
    ],
    ids=["default", "its address", "off", "no sync"],
)
def test_both_backends_have_the_same_activator_as_backup(inputs: Json, backup: str | None) -> None:
    cfg = sections(render("haproxy.cfg.j2", **inputs))
    for backend in ("backend triton_backend", "backend openai_backend"):
        backups = [line for line in cfg[backend] if " backup" in line]
        assert backups == ([backup] if backup else []), backend


def test_the_fronts_timeout_is_a_setting() -> None:
    backend = sections(render("haproxy.cfg.j2", haproxy_openai_timeout_server="1h"))["backend openai_backend"]
    assert {"timeout server 1h", "timeout tunnel 1h"} <= set(backend)


def test_v2_is_unchanged_by_the_openai_route() -> None:
    on = sections(render("haproxy.cfg.j2"))
    off = sections(render("haproxy.cfg.j2", haproxy_openai_enabled=False))
    assert set(on) - set(off) == {"backend openai_backend"}
    assert on["backend triton_backend"] == off["backend triton_backend"]
    assert on["defaults"] == off["defaults"]
    assert off["frontend triton_frontend"] == ["bind *:80", "default_backend triton_backend"]
    assert "X-TARN-User" not in " ".join(on["backend triton_backend"] + on["frontend triton_frontend"])


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy is not installed")
@pytest.mark.parametrize("enabled", [True, False], ids=["with /v1", "without /v1"])
def test_haproxy_accepts_the_configuration(tmp_path: Path, enabled: bool) -> None:
    cfg = tmp_path / "haproxy.cfg"
    state = tmp_path / "server-state"
    cfg.write_text(
        render("haproxy.cfg.j2", haproxy_openai_enabled=enabled, haproxy_server_state_file=str(state))
    )
    checked = subprocess.run(["haproxy", "-c", "-f", str(cfg)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


# ---- the sync's unit


def sync_arguments(**inputs: Any) -> argparse.Namespace:
    unit = render("tarn-haproxy-sync.service.j2", **inputs)
    [exec_start] = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    words = shlex.split(exec_start.removeprefix("ExecStart="))
    assert words[2] == "haproxy-sync"
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return parser.parse_args(words[3:])


@pytest.mark.parametrize(
    ("inputs", "backends"),
    [
        ({}, [("triton_backend", "triton_endpoints"), ("openai_backend", "front_endpoints")]),
        (
            {"haproxy_openai_backend_name": "llm"},
            [("triton_backend", "triton_endpoints"), ("llm", "front_endpoints")],
        ),
        ({"haproxy_openai_enabled": False}, [("triton_backend", "triton_endpoints")]),
    ],
    ids=["default", "named", "off"],
)
def test_the_sync_keeps_the_backends_haproxy_has(inputs: Json, backends: list[tuple[str, str]]) -> None:
    options = command.options_from(sync_arguments(**inputs), {})
    syncs = command.backend_syncs(options, RuntimeApi(options.socket))
    assert [(s.backend, s.select.__name__) for s in syncs] == backends


# ---- tasks/validate.yml, evaluated here


def checks() -> list[tuple[str, list[str], str | None]]:
    """(task name, the assert's expressions, its when) of every assert in validate.yml."""
    found = []
    for task in load("tasks/validate.yml"):
        assertion = task["ansible.builtin.assert"]
        found.append((task["name"], assertion["that"], task.get("when")))
    return found


def failing(**inputs: Any) -> list[str]:
    """The expressions of validate.yml that are false for ``inputs`` (asserts whose when holds)."""
    t = templar(**inputs)

    def true(expression: str) -> bool:
        return t.template(trust_as_template("{{ (" + expression + ") | bool }}")) is True

    return [e for _name, that, when in checks() if when is None or true(when) for e in that if not true(e)]


def test_the_defaults_pass_the_checks() -> None:
    assert failing() == []


@pytest.mark.parametrize(
    ("inputs", "expression"),
    [
        ({"haproxy_openai_backend_name": "llm backend"}, "haproxy_openai_backend_name is match"),
        (
            {"haproxy_openai_backend_name": "triton_backend"},
            "haproxy_openai_backend_name != haproxy_backend_name",
        ),
        ({"haproxy_openai_balance": "fastest"}, "haproxy_openai_balance in"),
        ({"haproxy_openai_timeout_server": "ten minutes"}, "haproxy_openai_timeout_server is match"),
        ({"haproxy_openai_health_path": "health"}, "haproxy_openai_health_path is match"),
    ],
    ids=["name", "same as triton's", "balance", "timeout", "health path"],
)
def test_bad_openai_settings_fail_naming_the_variable(inputs: Json, expression: str) -> None:
    [failed] = failing(**inputs)
    assert failed.startswith(expression)
    assert failing(**inputs, haproxy_openai_enabled=False) == []  # not checked when /v1 is off


# ---- the argument spec


def test_the_openai_settings_are_declared_with_their_defaults() -> None:
    names = sorted(name for name in DEFAULTS if name.startswith("haproxy_openai_"))
    assert names == [
        "haproxy_openai_backend_name",
        "haproxy_openai_balance",
        "haproxy_openai_enabled",
        "haproxy_openai_health_path",
        "haproxy_openai_timeout_server",
    ]
    for entry_point in ("main", "validate"):
        options = SPECS[entry_point]["options"]
        for name in names:
            assert options[name]["default"] == DEFAULTS[name], (entry_point, name)
            assert options[name]["description"], (entry_point, name)
    assert SPECS["main"]["options"]["haproxy_openai_balance"]["choices"] == [
        "leastconn",
        "roundrobin",
        "static-rr",
        "first",
        "random",
    ]
