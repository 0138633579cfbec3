"""Headless Chromium as the e2e tests drive it: the page's DOM, or a screenshot, after the page's
own fetches and drawing have had virtual time to finish. Screenshots go to build/test-artifacts."""

from __future__ import annotations

import os
import subprocess

from tests.support import ROOT

ARTIFACTS = ROOT / "build" / "test-artifacts"
CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--disable-background-networking", "--disable-component-update"]  # fmt: skip


def browse(*args: str) -> str:
    """Headless Chromium's stdout (``--dump-dom URL``: the DOM as the page left it)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(ARTIFACTS)}
    command = [*CHROMIUM, "--virtual-time-budget=5000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True, env=env).stdout
