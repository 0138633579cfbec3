"""TARN's main job on the lab: serve the example models through TARN on real YARN.

Checks the cluster, puts examples/model_repository on HDFS, submits the TARN service with
`tarn submit` (on a lab with YARN's Docker runtime, Triton runs in Docker containers of the lab's
Triton image; else as processes on the NodeManagers), waits until every Triton
instance is READY and infers both models on each over HTTP and gRPC, then through the edge's
HAProxy and through Knox (HTTPS, as the demo LDAP's alice; on the secure lab also as
alice@TARN.LAB with SPNEGO, through the service's Kerberos topology). Run again, it reuses the running
service. `tarn destroy --service-name tarn-demo …` removes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import lab_client
from kazoo.client import KazooClient

from tarn.cli import instances_of
from tarn.clients.resourcemanager import ResourceManager, node_gpus
from tarn.errors import TarnError
from tarn.service.options import Options
from tarn.service.wait import wait_ready
from tarn.stdlib.webhdfs import WebHdfsClient

ROOT = Path(__file__).resolve().parents[1]
MASTER = os.environ.get("TARN_LAB_MASTER", "master")
USER = "tarn"
SERVICE = "tarn-demo"
MODELS_ON_HDFS = f"/user/{USER}/models"
HAPROXY = "127.0.0.1:18000"  # the edge's frontend, published on loopback (inventories/lab)
KNOX = f"127.0.0.1:18443/gateway/{SERVICE}/triton"  # Knox on the edge, the topology of this service
BUILD = Path(os.environ.get("TARN_BUILD", ROOT / "build"))
# made by site.yml (inventories/lab/group_vars): the service's API token, which Knox's topology holds
TOKEN_FILE = BUILD / "lab-secrets" / "tarn-api-token"
KNOX_CERT = BUILD / "lab" / "edge-knox.pem"  # fetched by the knox role
KNOX_USER = ("alice", "alice-password")  # Knox's demo LDAP (knox_demo_ldap_users)
# The secure lab's SPNEGO twin of the topology (knox_kerberos_topology_suffix), by the name of
# Knox's principal HTTP/edge: a SPNEGO client asks for HTTP/<the URL's host>.
KNOX_SPNEGO = f"edge:8443/gateway/{SERVICE}-kerberos/triton"


def check_cluster(rm: ResourceManager) -> None:
    info = rm.cluster_info()
    security = "Kerberos, realm " + lab_client.REALM if lab_client.secure() else "simple authentication"
    print(f"ResourceManager {info['resourceManagerVersion']} is {info['haState']} ({security})")
    for node in rm.nodes():
        print(f"  NodeManager {node['nodeHostName']}: {node['state']}, yarn.io/gpu={node_gpus(node)}")
    zk = KazooClient(hosts=f"{MASTER}:2181", timeout=10)
    zk.start(timeout=30)
    try:
        print(f"ZooKeeper: {zk.command(b'ruok')}")
    finally:
        zk.stop()


def upload_models(hdfs: WebHdfsClient) -> None:
    count = hdfs.upload_tree(ROOT / "examples" / "model_repository", MODELS_ON_HDFS)
    print(f"HDFS: {count} files of examples/model_repository in {MODELS_ON_HDFS}")


def submit() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tarn", "submit", "--service-name", SERVICE, "--user", USER,
         *lab_client.runtime_args(), "--model-repository", f"hdfs://{MODELS_ON_HDFS}",
         "--model-cache-dir", "/var/lib/tarn/model-cache",  # the yarn_nodemanager role's node cache
         "--min-instances", "2", "--max-instances", "2", "--memory-mb", "1024", "--vcores", "1",
         "--controller-memory-mb", "512", "--zk-ensemble", f"{MASTER}:2181", "--token-file", str(TOKEN_FILE),
         *lab_client.cluster_args()],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise TarnError(done.stderr.strip())
    print(done.stdout.strip())


def ready_hosts(rm: ResourceManager, timeout: float = 300) -> list[str]:
    """The hosts of the two Triton instances once they and the controller are READY (TARN's own
    wait: a service whose AM failed stops it at once, with YARN's reason)."""
    service = wait_ready(rm, SERVICE, 2, Options(timeout=timeout, poll=3))
    return sorted(str(r["host"]) for r in instances_of(service) if r["state"] == "READY")


def infer(hosts: list[str]) -> None:
    for host in hosts:
        for protocol, port in (("http", 8000), ("grpc", 8001)):
            done = subprocess.run(
                [sys.executable, str(ROOT / "examples" / "client.py"), "--url", f"{host}:{port}",
                 "--protocol", protocol, "--wait", "60"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode:
                raise TarnError(f"inference on {host} over {protocol} failed: {done.stdout}{done.stderr}")
            for line in done.stdout.strip().splitlines():
                print(f"  {host}: {line}")


def infer_through(
    entry: str, url: str, *options: str, env: dict[str, str] | None = None, timeout: float = 120
) -> None:
    """An entry published on this machine's loopback (HAProxy, Knox), once it has the instances."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "client.py"), "--url", url, "--protocol", "http",
             "--wait", "10", *options],
            capture_output=True, text=True, check=False, env={**os.environ, **(env or {})},
        )  # fmt: skip
        if done.returncode == 0:
            break
        if time.monotonic() > deadline:
            raise TarnError(f"inference through {entry} at {url} failed: {done.stdout}{done.stderr}")
        time.sleep(2)
    for line in done.stdout.strip().splitlines():
        print(f"  {entry} {url}: {line}")


def main() -> int:
    lab_client.use_lab()  # a secure lab: Kerberos and TLS settings for this process and its children
    rm = lab_client.resource_manager(USER)
    try:
        check_cluster(rm)
        if rm.service(SERVICE) is None:
            upload_models(lab_client.webhdfs(USER))
            submit()
        hosts = ready_hosts(rm)
        print(f"TARN service {SERVICE}: Triton READY on {', '.join(hosts)}")
        infer(hosts)
        infer_through("HAProxy", HAPROXY)
        infer_through(
            "Knox", KNOX, "--ssl", "--ca-certs", str(KNOX_CERT), "--user", KNOX_USER[0],
            env={"TARN_CLIENT_PASSWORD": KNOX_USER[1]},
        )  # fmt: skip
        entries = f"through HAProxy at http://{HAPROXY} and through Knox at https://{KNOX}"
        if lab_client.secure():
            alice = {
                "TARN_PRINCIPAL": f"alice@{lab_client.REALM}",
                "TARN_KEYTAB": str(lab_client.user_keytab("alice")),
            }
            infer_through(
                "Knox (SPNEGO)", KNOX_SPNEGO, "--ssl", "--ca-certs", str(KNOX_CERT), "--kerberos", env=alice
            )
            entries += f" (LDAP) and https://{KNOX_SPNEGO} (SPNEGO)"
    except TarnError as exc:
        print(f"main job failed: {exc}", file=sys.stderr)
        return 1
    print(f"the example models are served through TARN on YARN, {entries}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
