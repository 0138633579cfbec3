"""TARN's main job on the lab: check the cluster TARN runs on and print what it offers.

Later work replaces the body with a model served through TARN; until then the job proves the
lab is a working YARN cluster: NodeManagers with GPUs, HDFS and ZooKeeper answering.
"""

from __future__ import annotations

import os
import sys
import uuid

from kazoo.client import KazooClient

from tarn.clients.resourcemanager import ResourceManager, node_gpus
from tarn.clients.webhdfs import WebHdfs
from tarn.errors import TarnError

MASTER = os.environ.get("TARN_LAB_MASTER", "master")


def main() -> int:
    rm = ResourceManager([f"http://{MASTER}:8088"], user="tarn")
    hdfs = WebHdfs(f"http://{MASTER}:9870", user="tarn")
    try:
        info = rm.cluster_info()
        print(f"ResourceManager {info['resourceManagerVersion']} is {info['haState']}")
        for node in rm.nodes():
            print(f"  NodeManager {node['nodeHostName']}: {node['state']}, yarn.io/gpu={node_gpus(node)}")
        probe = f"/tmp/tarn-main-job-{uuid.uuid4().hex}"  # noqa: S108 - a path on HDFS
        hdfs.write(probe, b"tarn")
        if hdfs.read(probe) != b"tarn":
            raise TarnError(f"{probe} read back different bytes")
        hdfs.delete(probe)
        print("HDFS: WebHDFS write and read back OK")
    except TarnError as exc:
        print(f"lab check failed: {exc}", file=sys.stderr)
        return 1
    zk = KazooClient(hosts=f"{MASTER}:2181", timeout=10)
    zk.start(timeout=30)
    try:
        print(f"ZooKeeper: {zk.command(b'ruok')}")
    finally:
        zk.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
