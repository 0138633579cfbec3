"""The controller's ZooKeeper writes with SASL GSSAPI (Kerberos) and ACLs, on real parts: an MIT
KDC (tests/support/kerberos.py: krb5kdc unprivileged on loopback, principals zookeeper/localhost,
tarn/localhost and alice with their keytabs) and Debian's ZooKeeper server with SASL: a JAAS
Server section (Krb5LoginModule, the zookeeper/localhost keytab), SASLAuthenticationProvider,
kerberos.removeHostFromPrincipal and kerberos.removeRealmFromPrincipal, SASL not required of
every client (the readers authenticate to no one).

What it proves: tarn.clients.zk_sasl authenticates kazoo as tarn/localhost (the server names it
"tarn"), the Registry creates every znode and parent with registry_acls (the demand znode with
demand_acls) and the ACLs read back are exactly those; an unauthenticated client (and HAProxy's
ZooKeeperSource) reads the znodes and their children but gets NoAuth on any create, set or
delete, except the demand report's data, which the activator writes; alice, authenticated with
the same SASL (the server does know her as "alice"), cannot write either; znodes found open are
given their ACLs; a server name with no zookeeper principal fails with a ConfigError naming it.
About 10 s, most of it the JVM.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, Permissions

from tarn.activator.demand import demand_path
from tarn.clients.zk_sasl import SaslStatus, sasl_options
from tarn.controller.memory import memory_path
from tarn.controller.registry import Registry, demand_acls, registry_acls, znode_data
from tarn.errors import ConfigError
from tarn.haproxy.sources import ZooKeeperSource
from tarn.stdlib.kerberos import KerberosIdentity
from tests.support.kerberos import REALM, Kdc, missing_programs, running_kdc
from tests.support.loopback import free_port

PATH = "/services/triton/instances"
WANTED = {
    f"container_{n}": znode_data({"service": "svc", "ip": "127.0.0.1", "http_port": 8000 + n})
    for n in range(2)
}
SHORT_LIFE_S = 4  # the short-lived principal's max_life (the KDC's clock skew is 1 s)
ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_SIMPLE = "/usr/share/java/slf4j-simple.jar"  # Debian's libslf4j-java, which zookeeper depends on


@dataclass
class Secure:
    kdc: Kdc
    home: Path
    ensemble: str  # localhost:port: the servers' principal is zookeeper/localhost
    port: int
    tarn: KerberosIdentity
    alice: KerberosIdentity
    server: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.server = start_zookeeper(self.home, self.kdc, self.home / "zookeeper.keytab", self.port)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"ZooKeeper did not start:\n{self.log()[-3000:]}")
                time.sleep(0.1)

    def stop(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=30)
            self.server = None

    def client(
        self, identity: KerberosIdentity | None = None, status: SaslStatus | None = None
    ) -> KazooClient:
        options = None if identity is None else sasl_options(identity, status)
        client = KazooClient(hosts=self.ensemble, timeout=10.0, sasl_options=options)
        client.start(timeout=30)
        return client

    def log(self) -> str:
        return (self.home / "zookeeper.log").read_text(errors="replace")


def start_zookeeper(home: Path, kdc: Kdc, keytab: Path, port: int) -> subprocess.Popen[bytes]:
    (home / "jaas.conf").write_text(
        f"""Server {{
    com.sun.security.auth.module.Krb5LoginModule required
    useKeyTab=true
    keyTab="{keytab}"
    storeKey=true
    useTicketCache=false
    isInitiator=false
    principal="zookeeper/localhost@{REALM}";
}};
"""
    )
    (home / "zoo.cfg").write_text(
        f"tickTime=500\ndataDir={home / 'data'}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\nmaxSessionTimeout=60000\n"
        "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n"
        "kerberos.removeHostFromPrincipal=true\nkerberos.removeRealmFromPrincipal=true\n"
    )
    java = [
        "java",
        f"-Djava.security.auth.login.config={home / 'jaas.conf'}",
        f"-Djava.security.krb5.conf={kdc.krb5_conf}",
        "-Dzookeeper.root.logger=INFO,CONSOLE",
        "-XX:TieredStopAtLevel=1",  # a test server: start fast
        "-cp",
        f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}:{SLF4J_SIMPLE}",  # the server's log, on stderr
    ]
    with open(home / "zookeeper.log", "ab") as log:
        return subprocess.Popen(
            [*java, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(home / "zoo.cfg")],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **kdc.env},
        )


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    missing = missing_programs()
    if missing:
        pytest.fail(f"MIT Kerberos programs missing: {', '.join(missing)}; lab/preflight.sh lists them")
    if not Path(ZOOKEEPER_JAR).exists():
        pytest.fail(f"{ZOOKEEPER_JAR} missing: apt-get install zookeeper")
    home = tmp_path_factory.mktemp("zk-sasl")
    with running_kdc(home / "kdc") as kdc, pytest.MonkeyPatch.context() as env:
        for name, value in kdc.env.items():  # this process's GSSAPI: the test's realm only
            env.setenv(name, value)
        kdc.add_principal("zookeeper/localhost", home / "zookeeper.keytab")
        tarn = kdc.add_principal("tarn/localhost", home / "tarn.keytab")
        alice = kdc.add_principal("alice", home / "alice.keytab")
        port = free_port()
        secure = Secure(
            kdc,
            home,
            f"localhost:{port}",
            port,
            KerberosIdentity(tarn, str(home / "tarn.keytab")),
            KerberosIdentity(alice, str(home / "alice.keytab")),
        )
        try:
            secure.start()
            yield secure
        finally:
            secure.stop()
            print(f"---- zookeeper.log (tail)\n{secure.log()[-4000:]}\n---- kdc.log\n{kdc.log()}")


@pytest.fixture(scope="module")
def registry(secure: Secure) -> Iterator[Registry]:
    """The controller's Registry as tarn/localhost: instances registered, its memory saved."""
    registry = Registry(secure.ensemble, PATH, "svc", identity=secure.tarn)
    registry.start(timeout=30)
    registry.sync(WANTED)
    registry.save_memory(b'{"version": 1}')
    try:
        yield registry
    finally:
        registry.stop()


def acls(client: KazooClient, path: str) -> list[ACL]:
    return list(client.get_acls(path)[0])


def test_the_registry_authenticates_as_tarn_and_creates_with_its_acls(
    secure: Secure, registry: Registry
) -> None:
    expected = [ACL(Permissions.ALL, Id("sasl", "tarn")), ACL(Permissions.READ, Id("world", "anyone"))]
    assert registry_acls(secure.tarn.principal or "") == expected
    assert demand_acls(secure.tarn.principal or "")[1] == ACL(
        Permissions.READ | Permissions.WRITE, Id("world", "anyone")
    )
    anyone = secure.client()
    try:
        # every znode the controller wrote, parents included, and nothing else in its ACLs
        for path in ("/services", "/services/triton", PATH, memory_path(PATH, "svc")):
            assert acls(anyone, path) == expected, path
        for name in WANTED:
            assert acls(anyone, f"{PATH}/{name}") == expected, name
            assert anyone.get(f"{PATH}/{name}")[1].ephemeralOwner == 0  # persistent: outlives the controller
        assert acls(anyone, demand_path(PATH)) == demand_acls(secure.tarn.principal or "")
        assert "Successfully authenticated client: authenticationID=tarn/localhost@TARN.TEST" in secure.log()
    finally:
        anyone.stop()
        anyone.close()


def test_anyone_reads_and_nobody_else_writes(secure: Secure, registry: Registry) -> None:
    """Unauthenticated: reads all, writes nothing but the demand report's data."""
    anyone = secure.client()
    try:
        assert sorted(anyone.get_children(PATH)) == sorted(WANTED)
        for name, data in WANTED.items():
            assert anyone.get(f"{PATH}/{name}")[0] == data
        assert anyone.get(memory_path(PATH, "svc"))[0] == b'{"version": 1}'
        assert "instances" in anyone.get_children("/services/triton")
        refused(anyone)
        # the activator's report (tarn.activator.command.demand_sender sets the data)
        anyone.set(demand_path(PATH), b'{"held":1}')
        assert anyone.get(demand_path(PATH))[0] == b'{"held":1}'
        with pytest.raises(NoAuthError):
            anyone.delete(demand_path(PATH))
    finally:
        anyone.stop()
        anyone.close()
    # HAProxy's sync and the activator read through ZooKeeperSource, unauthenticated
    source = ZooKeeperSource(secure.ensemble, PATH)
    source.start()
    try:
        assert {str(e) for e in source.fetch()} == {"127.0.0.1:8000", "127.0.0.1:8001"}
    finally:
        source.stop()


def test_another_principal_authenticated_cannot_write(secure: Secure, registry: Registry) -> None:
    status = SaslStatus()
    alice = secure.client(secure.alice, status)
    try:
        assert status.authenticated.wait(10), status.failure
        assert status.principal == f"alice@{REALM}"
        assert sorted(alice.get_children(PATH)) == sorted(WANTED)
        refused(alice)
        # the server does know her as "alice": a znode only "alice" may read is hers to read
        alice.create("/alice-only", b"hers", acl=[ACL(Permissions.ALL, Id("sasl", "alice"))])
        assert alice.get("/alice-only")[0] == b"hers"
        anyone = secure.client()
        try:
            with pytest.raises(NoAuthError):
                anyone.get("/alice-only")
        finally:
            anyone.stop()
            anyone.close()
    finally:
        alice.stop()
        alice.close()


def refused(client: KazooClient) -> None:
    """NoAuth on every write under the controller's znodes."""
    instance = f"{PATH}/{next(iter(WANTED))}"
    memory = memory_path(PATH, "svc")
    writes: dict[str, Callable[[], object]] = {
        "create under --zk-path": lambda: client.create(f"{PATH}/intruder", b"{}", ephemeral=True),
        "create beside it": lambda: client.create("/services/triton/intruder", b""),
        "create under /services": lambda: client.create("/services/intruder", b""),
        "set an instance": lambda: client.set(instance, b"{}"),
        "delete an instance": lambda: client.delete(instance),
        "set the memory": lambda: client.set(memory, b"{}"),
        "delete the memory": lambda: client.delete(memory),
        "set the ACL": lambda: client.set_acls(PATH, [ACL(Permissions.ALL, Id("world", "anyone"))]),
    }
    allowed = []
    for what, write in writes.items():
        try:
            write()
            allowed.append(what)
        except NoAuthError:
            pass
    assert allowed == []


def test_znodes_found_open_are_given_their_acls(secure: Secure) -> None:
    """A path made before (by a controller without Kerberos, or by an activator's report)."""
    path = "/open/triton/instances"
    anyone = secure.client()
    registry = Registry(secure.ensemble, path, "svc2", identity=secure.tarn)
    try:
        anyone.ensure_path(path)
        anyone.create(demand_path(path), b"")
        registry.start(timeout=30)
        principal = secure.tarn.principal or ""
        assert acls(anyone, path) == registry_acls(principal)
        assert acls(anyone, demand_path(path)) == demand_acls(principal)
        assert acls(anyone, "/open") == [ACL(Permissions.ALL, Id("world", "anyone"))]  # not its own
        with pytest.raises(NoAuthError):
            anyone.create(f"{path}/intruder", b"")
    finally:
        registry.stop()
        anyone.stop()
        anyone.close()


def test_without_an_identity_nothing_changes(secure: Secure) -> None:
    path = "/plain/instances"
    registry = Registry(secure.ensemble, path, "svc3")
    registry.start(timeout=30)
    try:
        registry.sync(WANTED)
        anyone = secure.client()
        try:
            for node in ("/plain", path, f"{path}/container_0"):
                assert acls(anyone, node) == [ACL(Permissions.ALL, Id("world", "anyone"))]
            assert not anyone.exists(demand_path(path))
        finally:
            anyone.stop()
            anyone.close()
    finally:
        registry.stop()


def test_a_server_name_without_a_zookeeper_principal(secure: Secure) -> None:
    """The ensemble named by address: no zookeeper/127.0.0.1 in the KDC; said at start."""
    registry = Registry(f"127.0.0.1:{secure.port}", "/nothing", "svc4", identity=secure.tarn)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"no zookeeper/127\.0\.0\.1 principal in the KDC") as err:
        registry.start(timeout=20)
    assert time.monotonic() - started < 10  # every server failed once: no need to wait longer
    assert "did not authenticate tarn/localhost@TARN.TEST" in str(err.value)


def test_keytab_tickets_are_obtained_again_for_zookeeper(secure: Secure) -> None:
    """A principal whose tickets live SHORT_LIFE_S: a connection made after they expired still
    authenticates (one identity, its kept krb5 credential acquired again from the keytab)."""
    principal = secure.kdc.add_principal(
        "short/localhost", secure.home / "short.keytab", max_life=f"{SHORT_LIFE_S} seconds"
    )
    identity = KerberosIdentity(principal, str(secure.home / "short.keytab"))
    for attempt in (1, 2):
        if attempt == 2:
            time.sleep(SHORT_LIFE_S + 1.5)  # past the tickets' end and the 1 s clock skew
        status = SaslStatus()
        client = secure.client(identity, status)
        try:
            assert status.authenticated.wait(10), status.failure
            assert status.principal == principal
            client.create(
                "/short-lived", b"", ephemeral=True, acl=[ACL(Permissions.ALL, Id("sasl", "short"))]
            )
        finally:
            client.stop()
            client.close()
    issued = re.findall(rf"AS_REQ .*ISSUE: .*{re.escape(principal)} for krbtgt", secure.kdc.log(tail=None))
    assert len(issued) >= 2


def test_a_reconnection_authenticates_again(secure: Secure, registry: Registry) -> None:
    """Last (it restarts the server): the session survives a restart of ZooKeeper, kazoo
    reconnects and authenticates again, and the Registry goes on writing with its ACLs."""
    sasl = registry._sasl
    assert sasl is not None
    before = sasl.successes
    secure.stop()
    secure.start()
    deadline = time.monotonic() + 30
    while sasl.successes == before:
        assert time.monotonic() < deadline, f"no new SASL authentication: {sasl.failure}"
        time.sleep(0.1)
    more = {**WANTED, "container_9": znode_data({"service": "svc", "ip": "127.0.0.1", "http_port": 8009})}
    plan = registry.sync(more)
    assert plan.create == ("container_9",)
    anyone = secure.client()
    try:
        assert sorted(anyone.get_children(PATH)) == sorted(more)
        assert acls(anyone, f"{PATH}/container_9") == registry_acls(secure.tarn.principal or "")
    finally:
        anyone.stop()
        anyone.close()
