"""A local Triton model repository onto HDFS, idempotently, and a new model version loaded in place.

A file is uploaded when HDFS lacks it, or when its size or content differs. Content is compared
with HDFS's own checksum (GETFILECHECKSUM, MD5-of-MD5-of-CRC32C), recomputed over the local file
with the launcher's implementation (tarn.stdlib.hdfs_checksum, also used to verify staged copies):
nothing is downloaded. Where HDFS gives no checksum that can be recomputed, the size decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tarn.clients.triton import Triton
from tarn.errors import ClusterError, ConfigError
from tarn.spec import TRITON, component_of, container_host, read_back
from tarn.stdlib.hdfs_checksum import checksum_block_size, file_md5md5crc
from tarn.stdlib.launcher.staging import RemoteFile, recompute_target
from tarn.stdlib.webhdfs import FileStatus, WebHdfsClient

JSON = dict[str, Any]
Action = Literal["create", "update", "delete", "unchanged"]


@dataclass(frozen=True)
class FileChange:
    relpath: str
    action: Action
    size: int
    reason: str


def local_files(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        raise ConfigError(f"src: {root} is not a directory; give a Triton model repository")
    return {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def same_content(local: Path, remote: RemoteFile) -> tuple[bool, str]:
    """(equal?, why) for a local file against an HDFS file, by size then by HDFS's checksum."""
    size = local.stat().st_size
    if size != remote.status.length:
        return False, f"size {size} != {remote.status.length} on HDFS"
    expected, unverifiable = recompute_target(remote)
    if expected is None:
        return True, f"same size ({unverifiable})"
    block = checksum_block_size(expected, remote.status)
    digest = file_md5md5crc(str(local), expected.crc_type, expected.bytes_per_crc, block)
    if digest != expected.md5:
        return False, "content differs (HDFS checksum)"
    return True, "same size and HDFS checksum"


def plan_repository(hdfs: WebHdfsClient, local: Path, remote: str, purge: bool = False) -> list[FileChange]:
    """What it takes to make ``remote`` hold ``local``'s files (and only them with ``purge``)."""
    mine = local_files(local)
    base = remote.rstrip("/")
    theirs: dict[str, FileStatus] = {s.path[len(base) + 1 :]: s for s in hdfs.walk(base, missing_ok=True)}
    changes: list[FileChange] = []
    for relpath, path in mine.items():
        size = path.stat().st_size
        status = theirs.get(relpath)
        if status is None:
            changes.append(FileChange(relpath, "create", size, "not on HDFS"))
            continue
        remote_file = RemoteFile(relpath, status, hdfs.checksum(status.path))
        equal, why = same_content(path, remote_file)
        changes.append(FileChange(relpath, "unchanged" if equal else "update", size, why))
    if purge:
        changes += [
            FileChange(relpath, "delete", status.length, "not in the local repository")
            for relpath, status in sorted(theirs.items())
            if relpath not in mine
        ]
    return changes


def sync_repository(hdfs: WebHdfsClient, local: Path, remote: str, changes: list[FileChange]) -> None:
    base = remote.rstrip("/")
    for change in changes:
        if change.action in ("create", "update"):
            hdfs.write(f"{base}/{change.relpath}", (local / change.relpath).read_bytes())
        elif change.action == "delete":
            hdfs.delete(f"{base}/{change.relpath}")


# ---- loading a model version in place


@dataclass(frozen=True)
class Endpoint:
    instance: str
    host: str
    http_port: int


def triton_endpoints(service: JSON) -> list[Endpoint]:
    """Each READY Triton instance's host and HTTP port (the ports the service was deployed with)."""
    deployed = read_back(service)
    found = [
        Endpoint(name, container_host(c), deployed.instance_port(name))
        for c in (component_of(service, TRITON) or {}).get("containers") or []
        if c.get("state") == "READY" and (name := str(c.get("component_instance_name")))
    ]
    return sorted(found, key=lambda e: e.instance)


def model_files(model_dir: Path) -> dict[str, bytes]:
    """Every file of a model's directory but config.pbtxt (Triton takes the config as JSON)."""
    files = local_files(model_dir)
    return {relpath: path.read_bytes() for relpath, path in files.items() if relpath != "config.pbtxt"}


def load_in_place(
    endpoints: list[Endpoint],
    model: str,
    model_dir: Path,
    log: Callable[[str], None] = lambda text: None,
    triton: Callable[[Endpoint], Triton] = lambda e: Triton(e.host, http_port=e.http_port),
) -> list[str]:
    """Load ``model`` from the local ``model_dir`` on every instance, one after the other; the
    instances it was loaded on. The files travel in the request (Triton's repository API)."""
    if not endpoints:
        raise ClusterError(f"model {model}: no READY Triton instance to load it on")
    files = model_files(model_dir)
    loaded = []
    for endpoint in endpoints:
        client = triton(endpoint)
        client.load_model(model, files)
        log(f"{endpoint.instance}: {model} loaded ({len(files)} files)")
        loaded.append(endpoint.instance)
    return loaded
