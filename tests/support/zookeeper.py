"""A real ZooKeeper (Debian's) on loopback, for the integration tests."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient

from tests.support.loopback import free_port


@dataclass(frozen=True)
class ZooKeeperServer:
    ensemble: str  # host:port
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def zookeeper_server(home: Path) -> Iterator[ZooKeeperServer]:
    """A standalone server in ``home``, answering once this yields; stopped afterwards."""
    port = free_port()
    (home / "zoo.cfg").write_text(
        f"tickTime=500\ndataDir={home / 'data'}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\nmaxSessionTimeout=60000\n"
    )
    java = ["java", "-cp", "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"]
    with open(home / "zookeeper.log", "wb") as log:
        server = subprocess.Popen(
            [*java, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(home / "zoo.cfg")],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    ensemble = f"127.0.0.1:{port}"
    client = KazooClient(hosts=ensemble)
    try:
        client.start(timeout=60)
        client.stop()
        yield ZooKeeperServer(ensemble, server)
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=30)
