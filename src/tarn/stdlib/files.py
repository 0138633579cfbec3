"""Small file helpers shared by the launcher (standard library only) and the controller."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes, mode: int | None = None) -> None:
    """`data` at `path`, complete or not at all (a temporary file in the same directory, renamed
    over it). Not durable: no fsync, so after a crash the file may be old or torn; callers that
    keep caches treat an unreadable file as missing. `mode`: the file's permissions (default:
    mkstemp's 0600)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
