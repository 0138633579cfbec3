"""Processes seen from /proc, as the launcher's tests look at what it started."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie (its state follows the parenthesised command name, which
    may hold spaces)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False
