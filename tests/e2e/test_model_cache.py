"""The node model cache on the lab (issue 14): real HDFS, real YARN, the yarn_nodemanager role's
/var/lib/tarn/model-cache on both workers.

- A second TARN service with the same repository downloads 0 bytes on every node where the first
  one staged it (read in its instances' launcher logs); each served inferences.
- Two launchers staging the same new repository at once on one node (as two instances would) fetch
  each file once between them, and both get every byte (a big file in parallel ranges included);
  two real launchers started at once on one node with a servable repository fetch each file once
  between them, then exec Triton, and both serve.
- A cache file changed on the node (a flipped byte) is fetched again before use.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.payload import launcher_zipapp
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.lab import LAB_MASTER, LAB_USER, container_log, podman_exec, wait_for
from tests.support.lab_service import CLUSTER, MODELS, ready_instances, serves, tarn

CACHE = "/var/lib/tarn/model-cache"
SERVICES = {"tarn-e2e-cache-a": 8700, "tarn-e2e-cache-b": 8710}
MODELS_ON_HDFS = f"/user/{LAB_USER}/e2e-cache-models"
ZK_PATH = "/services/tarn-e2e-cache/instances"  # not the edge's: HAProxy leaves these alone
WORKER = "tarn-lab-worker1"
SCRATCH = "/srv/tarn-e2e-cache"  # on the worker: the tarn sources and the staged trees
# The user YARN runs containers as: the submitter under the LinuxContainerExecutor (a Docker lab), the
# NodeManager's own under the DefaultContainerExecutor. Only it is in the cache's group on a fresh lab.
CONTAINER_USER = LAB_USER if lab_client.docker() else "yarn"
STAGED = re.compile(
    r"staged \S+ into \S+: (\d+) downloaded \(([\d.]+) MiB.*?(\d+) reused from the node cache"
)


def submit(name: str, port: int) -> None:
    done = tarn(
        "submit", "--service-name", name, "--user", LAB_USER, *lab_client.runtime_args(),
        "--model-repository", f"hdfs://{MODELS_ON_HDFS}", "--model-cache-dir", CACHE,
        "--port", str(port), "--grpc-port", str(port + 1), "--metrics-port", str(port + 2),
        "--am-port", str(port + 3), "--min-instances", "2", "--max-instances", "2",
        "--gpus-per-instance", "0", "--memory-mb", "768", "--vcores", "1", "--controller-memory-mb", "512",
        "--zk-ensemble", f"{LAB_MASTER}:2181", "--zk-path", ZK_PATH, *CLUSTER,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def staged(row: dict[str, Any]) -> tuple[int, float, int]:
    """(files downloaded, MiB downloaded, files reused) from the instance's launcher log."""
    worker = f"tarn-lab-{row['host'].split('.')[0]}"
    found = STAGED.search(container_log(worker, row["container"]))
    assert found, f"no staging line in the log of {row['container']} on {worker}"
    return int(found[1]), float(found[2]), int(found[3])


def both_ready(rm: ResourceManager, name: str) -> Callable[[], list[dict[str, Any]] | None]:
    def probe() -> list[dict[str, Any]] | None:
        return ready_instances(rm, name, 2)

    return probe


@pytest.fixture(scope="module")
def services(rm: ResourceManager, hdfs: WebHdfsClient) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """Each service up (2 instances, one per worker), checked to serve, then destroyed before the
    next one starts, so that the two never compete for the lab's vcores."""
    for name in SERVICES:
        tarn("destroy", "--service-name", name, "--user", LAB_USER, *CLUSTER)
    hdfs.upload_tree(MODELS, MODELS_ON_HDFS)
    rows: dict[str, list[dict[str, Any]]] = {}
    try:
        for name, port in SERVICES.items():  # one after the other: the second finds the cache warm
            submit(name, port)
            rows[name] = wait_for(both_ready(rm, name), 300, f"2 ready instances of {name}")
            for row in rows[name]:
                serves(row, port)
            done = tarn("destroy", "--service-name", name, "--user", LAB_USER, *CLUSTER)
            assert done.returncode == 0, done.stderr
        yield rows
    finally:
        for name in SERVICES:
            tarn("destroy", "--service-name", name, "--user", LAB_USER, *CLUSTER)
        hdfs.delete(MODELS_ON_HDFS, recursive=True)


def test_a_second_service_downloads_nothing_where_the_first_staged(
    services: dict[str, list[dict[str, Any]]],
) -> None:
    first, second = services.values()
    files = sum(1 for p in MODELS.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert {r["host"] for r in first} == {r["host"] for r in second}  # anti-affinity: one per worker
    for row in second:
        downloaded, mib, reused = staged(row)
        print(
            f"\n[cache] second service on {row['host']}: {downloaded} downloaded ({mib} MiB), {reused} reused"
        )
        assert (downloaded, mib, reused) == (0, 0.0, files)


# ---- two stagers at once on one node, outside YARN (the launcher's own code, as the container user)

# A secure lab: the launcher's flags for the service's identity (its keytab is on every worker).
SERVICE_IDENTITY = (
    ["--service-principal", lab_client.SERVICE_PRINCIPAL, "--service-keytab", lab_client.SERVICE_KEYTAB]
    if lab_client.secure()
    else []
)

STAGER = """
import json, logging, sys
from pathlib import Path
from tarn.stdlib.launcher.staging import stage_repository
from tarn.stdlib.kerberos import service_identity, webhdfs_auth
from tarn.stdlib.webhdfs import WebHdfsClient
logging.basicConfig(level=logging.INFO, format="%(message)s")
identity = service_identity(*sys.argv[5:7]) if len(sys.argv) > 5 else None  # a secure lab: the service keytab
client = WebHdfsClient(sys.argv[4], webhdfs_auth(identity, "tarn"))
report = stage_repository(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), client, 4)
print(json.dumps({"downloaded": report.downloaded, "waited": report.waited, "refetched": report.refetched,
                  "bytes": report.bytes_downloaded, "reused": report.reused}))
"""


def on_worker(*command: str, user: str = CONTAINER_USER) -> subprocess.CompletedProcess[str]:
    return podman_exec(
        WORKER, "runuser", "-u", user, "--", *command, env={"PYTHONPATH": f"{SCRATCH}/src"}, timeout=300
    )


def stage_at_once(source: str, targets: list[str]) -> list[dict[str, int]]:
    started = [
        subprocess.Popen(
            [
                "podman",
                "exec",
                "-e",
                f"PYTHONPATH={SCRATCH}/src",
                WORKER,
                "runuser",
                "-u",
                CONTAINER_USER,
                "--",
                "python3",
                "-c",
                STAGER,
                source,
                target,
                CACHE,
                lab_client.webhdfs_url(),
                *SERVICE_IDENTITY[1::2],
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for target in targets
    ]
    reports = []
    for process in started:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


@pytest.fixture(scope="module")
def scratch_on_worker() -> Iterator[None]:
    """SCRATCH on the worker, holding this checkout's sources (the launcher's code)."""
    podman_exec(WORKER, "rm", "-rf", SCRATCH, check=True)
    podman_exec(WORKER, "mkdir", "-p", SCRATCH, check=True)
    subprocess.run(["podman", "cp", str(ROOT / "src"), f"{WORKER}:{SCRATCH}/src"], check=True)
    podman_exec(WORKER, "chmod", "-R", "a+rwX", SCRATCH, check=True)
    try:
        yield
    finally:
        podman_exec(WORKER, "rm", "-rf", SCRATCH)


@pytest.fixture(scope="module")
def fresh(hdfs: WebHdfsClient, scratch_on_worker: None) -> Iterator[tuple[str, dict[str, bytes]]]:
    """A repository no cache has seen: 12 small files and one of 40 MiB (read in ranges)."""
    path = f"/user/{LAB_USER}/e2e-cache-fresh-{secrets.token_hex(4)}"
    files = {f"m{i:02d}/1/model.bin": secrets.token_bytes(200_000 + i) for i in range(12)}
    files["big/1/model.bin"] = secrets.token_bytes(40 << 20)
    for relpath, data in files.items():
        hdfs.write(f"{path}/{relpath}", data)
    try:
        yield f"hdfs://{LAB_MASTER}:8020{path}", files
    finally:
        hdfs.delete(path, recursive=True)


def tree_on_worker(target: str) -> dict[str, str]:
    done = on_worker("sh", "-c", f"cd {target} && find . -type f ! -name .tarn-staged -exec sha256sum {{}} +")
    assert done.returncode == 0, done.stderr
    return {line.split()[1].removeprefix("./"): line.split()[0] for line in done.stdout.splitlines()}


def test_two_instances_staging_at_once_fetch_each_file_once(fresh: tuple[str, dict[str, bytes]]) -> None:
    source, files = fresh
    started = time.monotonic()
    reports = stage_at_once(source, [f"{SCRATCH}/a", f"{SCRATCH}/b"])
    took = time.monotonic() - started
    print(f"\n[cache] two stagers at once on {WORKER}: {reports} in {took:.1f} s")
    assert sum(r["downloaded"] for r in reports) == len(files)  # each file fetched once, in all
    assert sum(r["bytes"] for r in reports) == sum(len(d) for d in files.values())
    for report in reports:  # the rest linked from the cache: waited for the other, or found done
        assert report["downloaded"] + report["reused"] == len(files)
    expected = {relpath: hashlib.sha256(data).hexdigest() for relpath, data in files.items()}
    for target in (f"{SCRATCH}/a", f"{SCRATCH}/b"):
        assert tree_on_worker(target) == expected


LAUNCHERS = {"launcher-a": 8740, "launcher-b": 8750}  # HTTP port; gRPC and metrics the next two


def start_launchers(source: str) -> None:
    """TARN's launcher zipapp on the worker, once per LAUNCHERS entry, all started by one shell at
    the same moment, each as the container user in a directory of its own, as in a container: it
    stages `source` through the node cache, then execs tritonserver."""
    each = [
        f"(mkdir -p {SCRATCH}/{name} && cd {SCRATCH}/{name} && exec python3 {SCRATCH}/tarn-launcher.pyz "
        f"--model-repository {source} --model-cache-dir {CACHE} --webhdfs-url {lab_client.webhdfs_url()} "
        f"{' '.join(SERVICE_IDENTITY)} "
        f"--port {port} --grpc-port {port + 1} --metrics-port {port + 2} > {SCRATCH}/{name}.log 2>&1) &"
        for name, port in LAUNCHERS.items()
    ]
    podman_exec(
        WORKER, "runuser", "-u", CONTAINER_USER, "--", "sh", "-c", " ".join([*each, "wait"]),
        env={"HADOOP_USER_NAME": LAB_USER}, detach=True, check=True, timeout=60,
    )  # fmt: skip


def launcher_log(name: str) -> str:
    return on_worker("cat", f"{SCRATCH}/{name}.log").stdout


def test_two_instances_started_at_once_on_one_node_download_once_and_both_serve(
    hdfs: WebHdfsClient, scratch_on_worker: None, tmp_path: Path
) -> None:
    path = f"/user/{LAB_USER}/e2e-cache-servable-{secrets.token_hex(4)}"  # new to every cache
    files = hdfs.upload_tree(MODELS, path)
    zipapp = tmp_path / "tarn-launcher.pyz"  # what tarn submit ships to every container
    zipapp.write_bytes(launcher_zipapp())
    subprocess.run(["podman", "cp", str(zipapp), f"{WORKER}:{SCRATCH}/tarn-launcher.pyz"], check=True)
    podman_exec(WORKER, "chmod", "a+r", f"{SCRATCH}/tarn-launcher.pyz", check=True)
    try:
        start_launchers(f"hdfs://{LAB_MASTER}:8020{path}")
        for port in LAUNCHERS.values():
            serves({"host": WORKER.removeprefix("tarn-lab-")}, port)
        found = {name: STAGED.search(launcher_log(name)) for name in LAUNCHERS}
        for name, line in found.items():
            assert line, f"no staging line in {name}'s log:\n{launcher_log(name)}"
            print(f"\n[cache] {name}, started at once with the other on {WORKER}: {line[0]}")
        counts = [(int(line[1]), int(line[3])) for line in found.values() if line]
        assert sum(downloaded for downloaded, _reused in counts) == files  # each file once, in all
        assert all(downloaded + reused == files for downloaded, reused in counts)
    finally:
        # the launchers, or the tritonservers they became
        on_worker("pkill", "-f", "--", f"{path}|--model-repository={SCRATCH}/launcher-")
        hdfs.delete(path, recursive=True)


def test_a_cache_file_changed_on_the_node_is_fetched_again(fresh: tuple[str, dict[str, bytes]]) -> None:
    source, files = fresh
    stage_at_once(source, [f"{SCRATCH}/c"])  # warm (the test above may not have run)
    on_worker("rm", "-rf", f"{SCRATCH}/c")  # that instance is gone: its files are not in use
    big = hashlib.sha256(files["big/1/model.bin"]).hexdigest()
    # the object of the big file: the one 40 MiB file in the cache that hashes as it should
    find = on_worker("sh", "-c", f"find {CACHE}/objects -size {40 << 20}c -exec sha256sum {{}} +")
    objects = [line.split()[1] for line in find.stdout.splitlines() if line.split()[0] == big]
    assert len(objects) == 1, find.stdout + find.stderr
    flip = (
        "import os, sys; p = sys.argv[1]; os.chmod(p, 0o644); f = open(p, 'r+b'); f.seek(12345678); "
        "b = f.read(1); f.seek(12345678); f.write(bytes([b[0] ^ 1])); f.close(); os.chmod(p, 0o444)"
    )
    assert on_worker("python3", "-c", flip, objects[0]).returncode == 0
    [report] = stage_at_once(source, [f"{SCRATCH}/d"])
    print(f"\n[cache] after a flipped byte in the node cache: {report}")
    assert (report["downloaded"], report["refetched"], report["reused"]) == (1, 1, len(files) - 1)
    assert tree_on_worker(f"{SCRATCH}/d")["big/1/model.bin"] == big
