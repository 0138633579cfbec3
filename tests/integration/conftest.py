"""Fixtures shared by the integration tests: the stand-in Ranger Admin (lab/ranger_admin.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
