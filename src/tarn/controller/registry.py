"""ZooKeeper registration: one persistent znode per serving instance (docs/discovery.md).

The controller is the single writer. Each tick it lists the children of --zk-path and makes
them equal to the wanted set: ``plan_registry`` (pure) decides, ``Registry`` (kazoo) applies.
The znodes are persistent, not tied to the controller's session: a controller that is absent
(killed, stopped, waiting for a container) leaves every instance discoverable, and the readers'
health checks (HAProxy's, Knox's failover, the activator's skip) take out one that dies
meanwhile. The controller that comes next adopts them: it rewrites what changed and deletes what
is no longer ready. ``tarn destroy`` deletes a removed service's (tarn.service.apply). Other
services' znodes under the same path are never touched. Each reconciliation is one ZooKeeper
transaction (multi); an ephemeral znode of an older TARN is replaced in the same transaction,
so no reader ever sees the instance missing.

On a Kerberized cluster (a ``KerberosIdentity``: the service's --service-principal and keytab) the
client authenticates with SASL GSSAPI (tarn.clients.zk_sasl) and every znode it creates, parents
included, gets ``registry_acls``: everything for the principal's short name as ZooKeeper's
SASLAuthenticationProvider names it (kerberos.removeHostFromPrincipal and
kerberos.removeRealmFromPrincipal true: ``tarn/host@REALM`` is ``tarn``), read for anyone, so that
HAProxy's sync, the activator and Knox read without credentials and only TARN's principal creates,
changes or deletes. The one znode a reader writes, the activator's demand report
(``<--zk-path>.demand``), is created by the controller with ``demand_acls`` (anyone may also
write its data; no one else may delete it). The instances' znode, the memory and the demand znode
found with other ACLs (made before, or by an activator that started first) are given theirs.
Controllers of services that share --zk-path must then share the principal's short name.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tarn.activator.demand import Report, demand_path, parse_report
from tarn.controller.memory import memory_path
from tarn.errors import ConfigError

if TYPE_CHECKING:
    from kazoo.security import ACL

    from tarn.clients.zk_sasl import SaslStatus
    from tarn.stdlib.kerberos import KerberosIdentity

log = logging.getLogger("tarn.controller.registry")


PERSISTENT = 0  # a persistent znode's ephemeralOwner


@dataclass(frozen=True)
class Present:
    """A child of --zk-path as read from ZooKeeper."""

    owner: int  # the session that owns an ephemeral znode (an older TARN's); 0: persistent
    service: str | None  # the "service" of its JSON, None when unreadable


@dataclass(frozen=True)
class RegistryPlan:
    create: tuple[str, ...] = ()
    update: tuple[str, ...] = ()  # ours, but with other data
    delete: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.create or self.update or self.delete)


def plan_registry(
    present: Mapping[str, Present],
    written: Mapping[str, bytes],
    wanted: Mapping[str, bytes],
    service: str,
) -> RegistryPlan:
    """Changes that make this service's znodes equal to ``wanted``, every one persistent.

    ``written``: what this controller wrote and still believes is there (data by name); a
    successor's is empty, so it rewrites each znode it adopts once.
    """
    create: list[str] = []
    update: list[str] = []
    delete: list[str] = []
    for name, data in sorted(wanted.items()):
        found = present.get(name)
        if found is None:
            create.append(name)
        elif found.owner != PERSISTENT:
            delete.append(name)  # an older TARN's ephemeral znode: made persistent
            create.append(name)
        elif written.get(name) != data:
            update.append(name)
    for name, found in sorted(present.items()):
        if name not in wanted and found.service == service:
            delete.append(name)
    return RegistryPlan(tuple(create), tuple(update), tuple(delete))


def znode_data(record: Mapping[str, Any]) -> bytes:
    return json.dumps(dict(record), sort_keys=True, separators=(",", ":")).encode()


def sasl_id(principal: str) -> str:
    """The id ZooKeeper's SASLAuthenticationProvider gives a Kerberos principal when its servers
    run with kerberos.removeHostFromPrincipal=true and kerberos.removeRealmFromPrincipal=true (and
    the default auth_to_local, the principal in their default realm): the first component,
    ``tarn/host@REALM`` -> ``tarn``."""
    return principal.partition("@")[0].partition("/")[0]


def registry_acls(principal: str) -> list[ACL]:
    """The ACLs of TARN's znodes written by ``principal``: all permissions (create, delete, read,
    write, admin) for its SASL id, read for anyone."""
    from kazoo.security import ACL, Id, Permissions

    return [
        ACL(Permissions.ALL, Id("sasl", sasl_id(principal))),
        ACL(Permissions.READ, Id("world", "anyone")),
    ]


def demand_acls(principal: str) -> list[ACL]:
    """The demand znode's: as `registry_acls`, and anyone may write its data (the activator,
    which authenticates to no one, reports there)."""
    from kazoo.security import ACL, Id, Permissions

    everyone = Permissions.READ | Permissions.WRITE
    return [ACL(Permissions.ALL, Id("sasl", sasl_id(principal))), ACL(everyone, Id("world", "anyone"))]


class Registry:
    """kazoo's client, used from the control loop's thread only. With ``identity``, SASL GSSAPI
    as that Kerberos identity and the ACLs of `registry_acls`; without, neither (world-open znodes)."""

    def __init__(
        self,
        ensemble: str,
        path: str,
        service: str,
        session_timeout: float = 10.0,
        identity: KerberosIdentity | None = None,
    ) -> None:
        from kazoo.client import KazooClient  # the controller's dependency, not the CLI's

        self._ensemble = ensemble
        self._path = path.rstrip("/")
        self._memory = memory_path(path, service)
        self._service = service
        self._identity = identity
        self._sasl = None
        options = None
        if identity is not None:
            from tarn.clients.zk_sasl import SaslStatus, sasl_options

            self._sasl = SaslStatus()
            options = sasl_options(identity, self._sasl)
        self._client = KazooClient(hosts=ensemble, timeout=session_timeout, sasl_options=options)
        self._acl: list[ACL] | None = None  # None: kazoo's default, open to all
        self._demand_acl: list[ACL] | None = None
        self._written: dict[str, bytes] = {}
        self._session = 0  # the session the reads below were made in
        self._known: dict[str, Present] = {}  # znodes read once: owner and service

    def start(self, timeout: float = 10.0) -> None:
        """Connect; with an identity, wait for the SASL authentication (a ConfigError naming the
        fix when it fails or does not come within ``timeout``), then secure the znodes."""
        if self._identity is not None:
            self._identity.check()  # a keytab without the principal: said before any connection
        self._client.start(timeout=timeout)
        if self._sasl is None:
            return
        if not self._authenticated(self._sasl, timeout):
            self._client.stop()
            self._client.close()
            why = self._sasl.failure or "no answer; is SASL (a JAAS Server section) set up on the servers?"
            raise ConfigError(
                f"--zk-ensemble: ZooKeeper {self._ensemble} did not authenticate "
                f"{self._identity.resolved_principal() if self._identity else ''} with SASL GSSAPI "
                f"within {timeout:.0f} s: {why}"
            )
        principal = self._sasl.principal or ""
        self._acl, self._demand_acl = registry_acls(principal), demand_acls(principal)
        log.info("ZooKeeper: authenticated as %s (SASL id %s)", principal, sasl_id(principal))
        self.secure()

    def _authenticated(self, sasl: SaslStatus, timeout: float) -> bool:
        """Wait for the SASL authentication; give up early once every server of the ensemble
        failed it once (kazoo goes on trying, but a controller that cannot write should say why
        now rather than after the timeout)."""
        servers = len(self._client.hosts)
        deadline = time.monotonic() + timeout
        while not sasl.authenticated.wait(0.05):
            if sasl.failures >= servers or time.monotonic() >= deadline:
                return False
        return True

    def secure(self) -> None:
        """With an identity: the instances' znode and the demand znode exist, and these and the
        memory carry their ACLs (set again where they differ; a znode this principal may not
        administer is logged and left)."""
        if self._acl is None or self._demand_acl is None:
            return
        from kazoo.exceptions import NodeExistsError, NoNodeError

        self._client.ensure_path(self._path, acl=self._acl)
        demand = demand_path(self._path)
        with contextlib.suppress(NodeExistsError):  # a sibling: its parent is there
            self._client.create(demand, b"", acl=self._demand_acl)
        for path, acl in ((self._path, self._acl), (demand, self._demand_acl), (self._memory, self._acl)):
            try:
                self._set_acls(path, acl)
            except NoNodeError:
                continue

    def _set_acls(self, path: str, acl: list[ACL]) -> None:
        from kazoo.exceptions import NoAuthError

        present, stat = self._client.get_acls(path)
        if set(present) == set(acl):
            return
        try:
            self._client.set_acls(path, acl, version=stat.aversion)
        except NoAuthError:
            log.error(
                "ZooKeeper: %s has ACL %s and this principal may not change it: delete it (as its owner)"
                " for the controller to create it again",
                path,
                present,
            )
            return
        log.warning("ZooKeeper: %s had ACL %s, now %s", path, present, acl)

    # ---- the controller's memory (tarn.controller.memory): one persistent znode
    def load_memory(self) -> bytes | None:
        if not self._client.exists(self._memory):
            return None
        data: bytes = self._client.get(self._memory)[0]
        return data

    def save_memory(self, data: bytes) -> None:
        if self._client.exists(self._memory):
            self._client.set(self._memory, data)
        else:
            self._client.create(self._memory, data, acl=self._acl, makepath=True)

    def watch_demand(self, on_report: Callable[[Report | None], None]) -> None:
        """Call ``on_report`` with each new activator report in ``<--zk-path>.demand`` (kazoo's
        thread). The report found at start is skipped: it may be old, and an activator that holds
        requests now rewrites it within a second."""
        from kazoo.recipe.watchers import DataWatch

        first = [True]

        def changed(data: bytes | None, stat: object) -> None:
            if first[0]:
                first[0] = False
                return
            on_report(parse_report(data))

        DataWatch(self._client, demand_path(self._path), changed)

    def detach(self) -> int:
        """A controller that stops leaves its znodes where they are, for its successor (a
        relaunch, an upgrade of the controller) to adopt, however long it takes to come: the
        znodes are persistent, and withdrawing them would take every healthy instance out of
        discovery meanwhile. The number of znodes left."""
        return len(self._written)

    def stop(self) -> None:
        """Remove this service's znodes now and end the session (a destroyed service, tests)."""
        try:
            self.sync({})
        finally:
            self.close()

    def close(self) -> None:
        """End the session, leaving the znodes."""
        self._client.stop()
        self._client.close()

    @property
    def connected(self) -> bool:
        return bool(self._client.connected)

    def registered(self) -> set[str]:
        return set(self._written)

    def sync(self, wanted: Mapping[str, bytes]) -> RegistryPlan:
        """One reconciliation; raises kazoo's errors (the loop logs them and tries next tick)."""
        session = int(self._client.client_id[0]) if self._client.client_id else 0
        if session != self._session:  # a new session: read everything again, as a successor does
            self._session, self._written, self._known = session, {}, {}
        self._client.ensure_path(self._path, acl=self._acl)
        children = set(self._client.get_children(self._path))
        present = {name: self._present(name) for name in children}
        self._known = {name: p for name, p in self._known.items() if name in children}
        plan = plan_registry(present, self._written, wanted, self._service)
        if plan:
            self._commit(plan, wanted)
        for name in plan.delete:
            self._written.pop(name, None)
            self._known.pop(name, None)
        for name in (*plan.create, *plan.update):
            self._written[name] = wanted[name]
        for name in plan.delete:
            if name not in wanted:
                log.info("deregistered %s", name)
        for name in plan.create:
            log.info("registered %s", name)
        return plan

    def _commit(self, plan: RegistryPlan, wanted: Mapping[str, bytes]) -> None:
        """The plan as one transaction: deletes first (an older TARN's ephemeral znode is recreated
        under the same name)."""
        transaction = self._client.transaction()
        for name in plan.delete:
            transaction.delete(f"{self._path}/{name}")
        for name in plan.create:
            transaction.create(f"{self._path}/{name}", wanted[name], acl=self._acl)
        for name in plan.update:
            transaction.set_data(f"{self._path}/{name}", wanted[name])
        from kazoo.exceptions import RolledBackError

        failed = [result for result in transaction.commit() if isinstance(result, Exception)]
        if failed:  # ZooKeeper applied none of it; the next tick reads the children again
            self._known = {}
            raise next((f for f in failed if not isinstance(f, RolledBackError)), failed[0])

    def _present(self, name: str) -> Present:
        if name in self._written:
            return Present(owner=PERSISTENT, service=self._service)
        if name not in self._known:
            data, stat = self._client.get(f"{self._path}/{name}")
            self._known[name] = Present(owner=int(stat.ephemeralOwner), service=_service_of(data))
        return self._known[name]


def _service_of(data: bytes) -> str | None:
    try:
        record = json.loads(data)
    except ValueError:
        return None
    return record.get("service") if isinstance(record, dict) else None
