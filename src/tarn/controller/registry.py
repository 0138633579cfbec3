"""ZooKeeper registration: one ephemeral znode per serving instance (docs/discovery.md).

The controller is the single writer. Each tick it lists the children of --zk-path and makes
them equal to the wanted set: ``plan_registry`` (pure) decides, ``Registry`` (kazoo) applies.
Znodes of this service left by an earlier controller session (a restart) are replaced so that
this session owns them; other services' znodes under the same path are never touched. Each
reconciliation is one ZooKeeper transaction (multi): a takeover deletes and recreates a znode
atomically, so no reader ever sees the instance missing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tarn.activator.demand import Report, demand_path, parse_report
from tarn.controller.memory import memory_path

log = logging.getLogger("tarn.controller.registry")


@dataclass(frozen=True)
class Present:
    """A child of --zk-path as read from ZooKeeper."""

    owner: int  # the session that owns the ephemeral znode (0: persistent)
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
    session: int,
) -> RegistryPlan:
    """Changes that make this service's znodes equal to ``wanted``.

    ``written``: what this session wrote and still believes is there (data by name).
    """
    create: list[str] = []
    update: list[str] = []
    delete: list[str] = []
    for name, data in sorted(wanted.items()):
        found = present.get(name)
        if found is None:
            create.append(name)
        elif found.owner != session:
            delete.append(name)  # left by an earlier session: take it over
            create.append(name)
        elif written.get(name) != data:
            update.append(name)
    for name, found in sorted(present.items()):
        if name not in wanted and found.service == service:
            delete.append(name)
    return RegistryPlan(tuple(create), tuple(update), tuple(delete))


def znode_data(record: Mapping[str, Any]) -> bytes:
    return json.dumps(dict(record), sort_keys=True, separators=(",", ":")).encode()


class Registry:
    """kazoo's client, used from the control loop's thread only."""

    def __init__(self, ensemble: str, path: str, service: str, session_timeout: float = 10.0) -> None:
        from kazoo.client import KazooClient  # the controller's dependency, not the CLI's

        self._path = path.rstrip("/")
        self._memory = memory_path(path, service)
        self._service = service
        self._client = KazooClient(hosts=ensemble, timeout=session_timeout)
        self._written: dict[str, bytes] = {}
        self._session = 0
        self._known: dict[str, Present] = {}  # znodes read once: owner and service

    def start(self, timeout: float = 10.0) -> None:
        self._client.start(timeout=timeout)

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
            self._client.create(self._memory, data, makepath=True)

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
        """A controller that stops leaves its znodes to its session: the process exits without
        closing the session, so ZooKeeper keeps them until the session times out. A successor
        (a relaunch, an upgrade of the controller) takes them over in one transaction with no gap;
        without one they go at the timeout, and HAProxy's checks have marked dead instances down
        by then. (Ending the session here would withdraw every healthy instance from discovery
        until the successor registers them again.) The number of znodes left."""
        return len(self._written)

    def stop(self) -> None:
        """Remove our znodes now and end the session (tests; a service being removed for good)."""
        try:
            self.sync({})
        finally:
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
        if session != self._session:  # a new session: every ephemeral znode of the old one is gone
            self._session, self._written, self._known = session, {}, {}
        self._client.ensure_path(self._path)
        children = set(self._client.get_children(self._path))
        present = {name: self._present(name) for name in children}
        self._known = {name: p for name, p in self._known.items() if name in children}
        plan = plan_registry(present, self._written, wanted, self._service, session)
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
        """The plan as one transaction: deletes first (a takeover recreates the same name)."""
        transaction = self._client.transaction()
        for name in plan.delete:
            transaction.delete(f"{self._path}/{name}")
        for name in plan.create:
            transaction.create(f"{self._path}/{name}", wanted[name], ephemeral=True)
        for name in plan.update:
            transaction.set_data(f"{self._path}/{name}", wanted[name])
        from kazoo.exceptions import RolledBackError

        failed = [result for result in transaction.commit() if isinstance(result, Exception)]
        if failed:  # ZooKeeper applied none of it; the next tick reads the children again
            self._known = {}
            raise next((f for f in failed if not isinstance(f, RolledBackError)), failed[0])

    def _present(self, name: str) -> Present:
        if name in self._written:
            return Present(owner=self._session, service=self._service)
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
