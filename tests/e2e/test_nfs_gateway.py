"""HDFS through Hadoop's NFS gateway on the lab's master (role tarn.yarn.hdfs_nfs_gateway).

The kernel here has no NFS client, so nothing is mounted: the NFSv3 protocol is driven from this
machine by Debian's userspace client, libnfs (libnfs-utils). A model repository uploaded through
WebHDFS (the example models, a binary file of a few MiB, nested directories, an empty file) is
listed and read back through the gateway, byte for byte equal to what WebHDFS serves; the
command-line tools list the export and cat a file at its top. That a second run of the role changes
nothing is checked with the rest of site.yml: the cluster stream's second converge (lab/e2e_streams.sh).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab import lab_client
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support.lab import LAB_MASTER
from tests.support.nfs import NOBODY, Nfs3Mount

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20


def needs(tool: str) -> str:
    found = shutil.which(tool)
    if not found:
        pytest.fail(
            f"{tool} is missing: apt-get install libnfs-utils (lab/preflight.sh names it)", pytrace=False
        )
    return found


def repository() -> dict[str, bytes]:
    """A model repository: the example models plus weights in nested directories."""
    files = {
        p.relative_to(ROOT / "examples" / "model_repository").as_posix(): p.read_bytes()
        for p in sorted((ROOT / "examples" / "model_repository").rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    files["big_model/config.pbtxt"] = b'name: "big_model"\nbackend: "python"\n'
    # not a multiple of the gateway's 1 MiB read size, so the last READ is a short one
    files["big_model/1/weights/shard-0.bin"] = os.urandom(5 * MIB + 4321)
    files["big_model/1/weights/deeper/still/shard-1.bin"] = os.urandom(MIB)
    files["big_model/1/weights/empty.bin"] = b""
    return files


@pytest.fixture(scope="module")
def uploaded(hdfs: WebHdfsClient) -> Iterator[tuple[str, dict[str, bytes]]]:
    """Where the repository went on HDFS, and its files (relative path -> bytes)."""
    base = f"/user/tarn/e2e-nfs-{uuid.uuid4().hex[:12]}"
    files = repository()
    for relative, data in files.items():
        hdfs.write(f"{base}/{relative}", data)
    yield base, files
    hdfs.delete(base, recursive=True)


def test_every_file_reads_back_through_the_gateway_as_webhdfs_serves_it(
    hdfs: WebHdfsClient, uploaded: tuple[str, dict[str, bytes]]
) -> None:
    needs("nfs-ls")
    base, expected = uploaded
    on_hdfs = {f.path: f.length for f in hdfs.walk(base)}
    assert len(on_hdfs) == len(expected)
    started = time.monotonic()
    with Nfs3Mount(LAB_MASTER, "/") as nfs:
        listed = {e.path: e.size for e in nfs.walk(base)}
        listed_at = time.monotonic()
        assert listed == on_hdfs, "the gateway lists other files or sizes than WebHDFS"
        compared = 0
        for path in sorted(listed):
            over_nfs = nfs.read(path)
            assert over_nfs == hdfs.read_bytes(path), f"{path}: NFS and WebHDFS bytes differ"
            assert over_nfs == expected[path.removeprefix(base + "/")], path
            compared += len(over_nfs)
    took = time.monotonic() - started
    print(
        f"\n[nfs] {len(listed)} files, {compared} bytes read through the NFSv3 gateway on {LAB_MASTER} "
        f"equal to WebHDFS's; listing {listed_at - started:.2f} s, all {took:.2f} s "
        f"({compared / MIB / max(took - (listed_at - started), 1e-9):.1f} MiB/s)"
    )


def test_the_command_line_tools_list_the_export_and_cat_a_file() -> None:
    """nfs-ls / nfs-cat mount the directory part of their URL: with the gateway's one export
    ("/") that is a file at the top of HDFS (written there by the HDFS superuser), named with a
    double slash so that the export parsed from the URL is "/" and not ""."""
    nfs_ls, nfs_cat = needs("nfs-ls"), needs("nfs-cat")
    superuser = lab_client.webhdfs("hdfs")
    path = f"/tarn-e2e-nfs-{uuid.uuid4().hex[:12]}.bin"
    payload = os.urandom(MIB + 7)
    superuser.write(path, payload)
    try:
        listing = subprocess.run(
            [nfs_ls, f"nfs://{LAB_MASTER}/?uid={NOBODY}&gid={NOBODY}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert listing.returncode == 0, listing.stderr
        names = {line.split()[-1] for line in listing.stdout.splitlines() if line.strip()}
        assert {"user", path.lstrip("/")} <= names, listing.stdout
        cat = subprocess.run(
            [nfs_cat, f"nfs://{LAB_MASTER}/{path}?uid={NOBODY}&gid={NOBODY}"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert cat.returncode == 0, cat.stderr
        assert cat.stdout == payload
    finally:
        superuser.delete(path)


def test_a_mount_of_another_directory_is_refused() -> None:
    """Hadoop exports one directory: mountd answers NOENT for any other."""
    with pytest.raises(OSError, match="mount"):
        Nfs3Mount(LAB_MASTER, "/user")
