"""Fixtures shared by the integration tests: the stand-in Ranger Admin (lab/ranger_admin.py), and
the HAProxy harness (tests/support/haproxy.py) with the zipapp and the haproxy role's haproxy.cfg."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tarn import payload
from tests.support.haproxy import (
    CONTROLLER,
    INSTANCES,
    Bench,
    ControllerState,
    Namespace,
    TritonStandIn,
    controller_handler,
    render_role_cfg,
)
from tests.support.ranger_admin import SERVICE, Standin, service_def, start, stop


@pytest.fixture
def ranger(tmp_path: Path) -> Iterator[Standin]:
    """A fresh stand-in Ranger Admin on 127.0.0.1, stopped afterwards."""
    standin = start(tmp_path, tmp_path / "state.json")
    yield standin
    stop(standin)


@pytest.fixture
def triton(ranger: Standin) -> Standin:
    """The stand-in with the triton service def and the service triton_prod."""
    client = ranger.client()
    client.create_service_def(service_def())
    client.create_service({"name": SERVICE, "type": "triton", "configs": {}})
    return ranger


# ---- the HAProxy harness


@pytest.fixture(scope="module")
def haproxy_tools() -> None:
    """What the HAProxy harness needs: the programs, and root for the namespaces (the modules that
    use the harness ask for this fixture in their ``pytestmark``)."""
    for tool in ("haproxy", "unshare", "nsenter", "ip", "java"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: make deps installs it")
    if os.geteuid() != 0:
        pytest.fail("these tests make network namespaces: run them as root")


@pytest.fixture(scope="module")
def zipapp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("payload") / "tarn.pyz"
    path.write_bytes(payload.controller_zipapp())
    return path


@pytest.fixture
def bench(tmp_path: Path, zipapp: Path) -> Iterator[Bench]:
    ns = Namespace(tmp_path)
    state = ControllerState()
    try:
        for address in INSTANCES:
            host, port = address.split(":")
            ns.serve((host, int(port)), TritonStandIn)
        ns.serve(CONTROLLER, controller_handler(state))
        yield Bench(ns, tmp_path, zipapp, state)
    finally:
        ns.close()
        for name in ("sync.log", "haproxy.log"):
            if (tmp_path / name).exists():
                print(f"---- {name}\n{(tmp_path / name).read_text()[-4000:]}")


@pytest.fixture(scope="module")
def role_cfg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The haproxy role's haproxy.cfg, rendered by Ansible from the role's defaults and vars."""
    return render_role_cfg(tmp_path_factory.mktemp("role"), haproxy_slots="6")
