"""The registrations outlive the controller, on a real ZooKeeper (Debian's, on loopback): a new
controller adopts the znodes of the old one and a reader polling the children never sees an
instance missing, whether the old session ends or not; an older TARN's ephemeral znodes are made
persistent the same way; a controller gone for good leaves them standing; a destroyed service's
are withdrawn. The controller's memory outlives the session, and a service submitted again under
the same name does not adopt it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from kazoo.client import KazooClient

from tarn.controller.memory import Memory, decode
from tarn.controller.registry import Registry, znode_data
from tarn.service.registrations import withdraw
from tarn.stdlib.config import TarnConfig
from tests.support.controller import make
from tests.support.zookeeper import zookeeper_server

PATH = "/services/triton/instances"
WANTED = {f"container_{n}": znode_data({"service": "svc", "instance": f"triton-{n}"}) for n in range(3)}


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with zookeeper_server(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server.ensemble


class Poller:
    """Reads the children as fast as it can; counts the reads that miss a wanted znode."""

    def __init__(self, ensemble: str) -> None:
        self.client = KazooClient(hosts=ensemble)
        self.client.start(timeout=30)
        self.reads = 0
        self.gaps: list[list[str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.client.stop()
        self.client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            children = self.client.get_children(PATH)
            self.reads += 1
            if set(WANTED) - set(children):
                self.gaps.append(sorted(children))


def session(ensemble: str) -> Registry:
    registry = Registry(ensemble, PATH, "svc", session_timeout=10.0)
    registry.start(timeout=30)
    return registry


def owners(ensemble: str) -> set[int]:
    client = KazooClient(hosts=ensemble)
    client.start(timeout=30)
    try:
        return {client.get(f"{PATH}/{name}")[1].ephemeralOwner for name in WANTED}
    finally:
        client.stop()
        client.close()


def test_successors_adopt_with_no_gap(ensemble: str) -> None:
    older = KazooClient(hosts=ensemble)  # an older TARN: ephemeral znodes of its session
    older.start(timeout=30)
    for name, data in WANTED.items():
        older.create(f"{PATH}/{name}", data, ephemeral=True, makepath=True)
    current: Registry | None = None
    adoptions = 0
    with Poller(ensemble) as poller:
        first = session(ensemble)
        plan = first.sync(WANTED)
        assert sorted(plan.create) == sorted(WANTED) == sorted(plan.delete)  # made persistent in one go
        older.stop()  # the older session ends: nothing of it is left to go
        older.close()
        current = first
        while adoptions < 25:  # each round: a new controller adopts, the old one is killed
            successor = session(ensemble)
            plan = successor.sync(WANTED)
            assert sorted(plan.update) == sorted(WANTED)
            assert (plan.create, plan.delete) == ((), ())
            current.close()  # the old session ends (as after kill -9 and its timeout)
            current = successor
            adoptions += 1
            time.sleep(0.05)
    print(
        f"\n[registry] {adoptions} adoptions, {poller.reads} reads of the children, {len(poller.gaps)} gaps"
    )
    assert poller.reads > 100
    assert poller.gaps == []
    assert owners(ensemble) == {0}  # persistent
    current.stop()


def test_the_memory_outlives_the_session(ensemble: str) -> None:
    first = session(ensemble)
    assert first.load_memory() is None
    first.save_memory(b'{"version": 1}')
    first.save_memory(b'{"version": 1, "history": []}')  # the second write replaces the first
    first._client.stop()  # killed: the memory is persistent, not ephemeral
    first._client.close()
    second = session(ensemble)
    try:
        assert second.load_memory() == b'{"version": 1, "history": []}'
        assert "controller.svc" not in second._client.get_children(PATH)  # readers of PATH see instances only
        assert "controller.svc" in second._client.get_children("/services/triton")
    finally:
        second.stop()


def test_a_service_submitted_again_ignores_the_old_memory(ensemble: str) -> None:
    """Destroying a service leaves its memory znode; the same name submitted again is another YARN
    application, whose controller must not adopt the old history and drains (its triton-1 is new)."""
    path = "/services/again/instances"  # apart from the other tests' znodes
    old = make(instances=2, cooldown_ms=0)
    old.rm.application = "application_1795785000000_0001"
    old.controller._registry = first = Registry(ensemble, path, "svc", session_timeout=10.0)
    first.start(timeout=30)
    old.ticks(7)  # idle: 2 -> 1, triton-1 drains (not yet done); the memory is saved
    assert old.controller.snapshot.drains["triton-1"].remove
    first.stop()  # destroyed: the instances' znodes go, the memory stays

    new = make(instances=2, cooldown_ms=0)
    new.rm.application = "application_1795785000000_0002"
    new.controller._registry = second = Registry(ensemble, path, "svc", session_timeout=10.0)
    second.start(timeout=30)
    try:
        new.ticks(1)
        assert (new.controller.snapshot.history, new.controller.snapshot.drains) == ((), {})
        assert second.registered() == {"c-triton-0", "c-triton-1"}  # triton-1 is not taken out
        saved = decode(second.load_memory(), 0.0, 0.0)
        assert saved == Memory(application="application_1795785000000_0002")  # the old one replaced
    finally:
        second.stop()


def test_a_controller_gone_for_good_leaves_its_znodes_standing(ensemble: str) -> None:
    """The controller's stop path (detach, then exit), and no successor: the znodes stand after
    the process and its session are gone (the old code's went at the session's timeout, taking
    every healthy instance out of discovery)."""
    script = textwrap.dedent(f"""
        from tarn.controller.registry import Registry, znode_data
        registry = Registry({ensemble!r}, {PATH!r}, "svc-stop", session_timeout=2.0)
        registry.start(timeout=30)
        registry.sync({{"stopping-1": znode_data({{"service": "svc-stop"}})}})
        print(registry.detach())
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "1"
    reader = KazooClient(hosts=ensemble)
    reader.start(timeout=30)
    try:
        time.sleep(6.0)  # past the 2 s session's expiry (ZooKeeper ends it within the timeout x 1.5)
        assert reader.exists(f"{PATH}/stopping-1"), "the znode went with the controller's session"
        reader.delete(f"{PATH}/stopping-1")
    finally:
        reader.stop()
        reader.close()


def test_a_destroyed_services_znodes_are_withdrawn(ensemble: str) -> None:
    """tarn destroy's last step (tarn.service.registrations.withdraw): this service's znodes go,
    another service's under the same path stay."""
    ours, theirs = session(ensemble), Registry(ensemble, PATH, "other", session_timeout=10.0)
    theirs.start(timeout=30)
    try:
        ours.sync({"gone-1": znode_data({"service": "svc"}), "gone-2": znode_data({"service": "svc"})})
        theirs.sync({"kept-1": znode_data({"service": "other"})})
        ours.close()  # the controller is gone with its service
        config = replace(TarnConfig(), service_name="svc", zk_ensemble=ensemble, zk_path=PATH)
        assert withdraw(config, identity=None) is None
        left = set(theirs._client.get_children(PATH))
        assert {"gone-1", "gone-2"}.isdisjoint(left)
        assert "kept-1" in left
        unreachable = replace(config, zk_ensemble="127.0.0.1:9")  # nothing listens: said, not raised
        said = withdraw(unreachable, identity=None, connect_s=1.0)
        assert said is not None
        assert "by hand" in said
        assert PATH in said
    finally:
        theirs.stop()
