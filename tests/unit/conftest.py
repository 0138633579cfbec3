"""Tools some unit tests cross-check against: missing ones fail the test, never skip it."""

from __future__ import annotations

import shutil

import pytest


def _require(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is not installed: the cross-check needs it (make deps installs it)")


@pytest.fixture
def require_keytool() -> None:
    _require("keytool")


@pytest.fixture
def require_java() -> None:
    _require("java")


@pytest.fixture
def require_openssl() -> None:
    _require("openssl")
