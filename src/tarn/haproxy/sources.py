"""Where `tarn haproxy-sync` learns the wanted instances (docs/discovery.md has both contracts).

* ZooKeeper (the default, push): a watch on the children of ``--zk-path``; each child's JSON
  gives ``ip``, ``http_port`` and, where the instance runs the OpenAI front, ``openai_port``.
  Every change of the children, and every reconnection, starts a fresh read of the whole set
  (plus a slow periodic read, in case a watch was missed).
* The controller (the seeds' way, pull): ``GET <url>/instances`` every ``--interval`` seconds
  with the token in ``X-TARN-Token``, in JSON (the registered instances' ``ip``, ``http_port``
  and ``openai_port``); a server that answers the seeds' text form (one ``ip:port`` line per
  instance) is understood too, without fronts.

Both give :class:`Instance` values: Triton's endpoint and, where there is one, the front's port.

A source that cannot be read never empties the backend: :class:`LastGoodSet` keeps the last set
read successfully and says once that it does so. Before the first good read the set is unknown
(``None``) and the sync leaves HAProxy as it is.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import requests

from tarn.errors import TarnError
from tarn.haproxy.plan import Endpoint, endpoint, parse_endpoint
from tarn.stdlib.api_token import Secret

LOG = logging.getLogger("tarn.haproxy")


@dataclass(frozen=True, order=True)
class Instance:
    """One instance as discovery announces it: Triton's HTTP endpoint, and its OpenAI front's
    port on the same address where it runs one (docs/discovery.md)."""

    http: Endpoint
    openai_port: int = 0  # 0: no front

    @property
    def openai(self) -> Endpoint | None:
        return Endpoint(self.http.ip, self.openai_port) if self.openai_port else None

    def __str__(self) -> str:
        return f"{self.http} (/v1 on {self.openai_port})" if self.openai_port else str(self.http)


Instances = frozenset[Instance]
Fetch = Callable[[], Instances]


def instance(ip: object, http_port: object, openai_port: object = None) -> Instance:
    """An Instance from untrusted values (a znode, an HTTP reply); ValueError when one is not valid.
    ``openai_port`` None: the instance runs no front."""
    http = endpoint(ip, http_port)
    if openai_port is None:
        return Instance(http)
    if isinstance(openai_port, bool) or not isinstance(openai_port, int):
        raise ValueError(f"openai_port {openai_port!r} is not a port number")
    return Instance(http, endpoint(http.ip, openai_port).port)


def triton_endpoints(instances: Instances) -> frozenset[Endpoint]:
    """Where ``/v2`` (and everything but ``/v1``) goes: every instance's Triton."""
    return frozenset(i.http for i in instances)


def front_endpoints(instances: Instances) -> frozenset[Endpoint]:
    """Where ``/v1`` goes: the OpenAI fronts of the instances that run one."""
    return frozenset(i.openai for i in instances if i.openai is not None)


class SourceError(TarnError):
    """The source of instances could not be read, or answered something that is not an instance list."""


# ---- the last good set


def describe(endpoints: Iterable[Endpoint] | Iterable[Instance]) -> str:
    listed: list[Endpoint | Instance] = sorted(endpoints)
    return ", ".join(map(str, listed)) if listed else "none"


@dataclass
class LastGoodSet:
    """The last instance set a source gave, and whether the source is failing now.

    Its methods return the lines worth logging: a change of the set, a source that fails
    (once, not at every retry), a source that answers again.
    """

    source: str  # for log lines: never carries a token
    endpoints: Instances | None = None
    failing: bool = False

    def succeeded(self, endpoints: Instances) -> list[str]:
        notes = [f"{self.source} answers again"] if self.failing else []
        if endpoints != self.endpoints:
            notes.append(
                f"instances from {self.source}: {describe(endpoints)}{_delta(self.endpoints, endpoints)}"
            )
        self.endpoints, self.failing = endpoints, False
        return notes

    def failed(self, reason: str) -> list[str]:
        if self.failing:
            return []
        self.failing = True
        if self.endpoints is None:
            kept = "no instance set known yet, HAProxy is left as it is"
        else:
            kept = f"keeping the last good set ({len(self.endpoints)} instances: {describe(self.endpoints)})"
        return [f"{self.source} unavailable ({reason}): {kept}"]


def _delta(before: Instances | None, after: Instances) -> str:
    if before is None:
        return ""
    added, removed = after - before, before - after
    parts = [f"+{describe(added)}" if added else "", f"-{describe(removed)}" if removed else ""]
    return f" ({' '.join(p for p in parts if p)})"


# ---- the controller's /instances


def parse_instances_text(text: str) -> Instances:
    """The text form of /instances: one ``ip:port`` per line (Triton's; no fronts); SourceError on
    any other line."""
    found = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            found.add(Instance(parse_endpoint(line)))
        except ValueError as exc:
            raise SourceError(f"/instances line {number} is not ip:port: {exc}") from exc
    return frozenset(found)


def parse_instances_json(document: Any) -> Instances:
    """The JSON form of /instances: the registered instances' ``ip``, ``http_port`` and
    ``openai_port`` (where they run a front)."""
    try:
        rows = document["instances"]
        return frozenset(
            instance(r["ip"], r["http_port"], r.get("openai_port")) for r in rows if r.get("registered", True)
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SourceError(f"/instances JSON without ip and http_port: {exc!r}") from exc


class ControllerSource:
    """Reads the controller's ``/instances``; one request per call."""

    def __init__(self, url: str, token: Secret | None, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.session = requests.Session()

    def __str__(self) -> str:
        return f"the controller at {self.url}"

    def fetch(self) -> Instances:
        headers = {"Accept": "application/json"}
        if self.token is not None:
            headers["X-TARN-Token"] = self.token.reveal()
        try:
            reply = self.session.get(f"{self.url}/instances", headers=headers, timeout=self.timeout)
        except requests.RequestException as exc:
            raise SourceError(type(exc).__name__) from exc
        if reply.status_code in (401, 403):
            raise SourceError(f"HTTP {reply.status_code}: the token was refused")
        if reply.status_code != 200:
            raise SourceError(f"HTTP {reply.status_code}")
        if reply.headers.get("Content-Type", "").startswith("application/json"):
            try:
                return parse_instances_json(reply.json())
            except ValueError as exc:
                raise SourceError("/instances answered invalid JSON") from exc
        return parse_instances_text(reply.text)


# ---- ZooKeeper


def parse_znode(data: bytes) -> Instance:
    """An instance znode's JSON (docs/discovery.md) as an Instance; unknown keys ignored."""
    try:
        document = json.loads(data.decode())
        return instance(document["ip"], document["http_port"], document.get("openai_port"))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SourceError(f"not an instance znode: {exc!r}") from exc


class ZooKeeperSource:
    """Reads the instance znodes under ``path``; calls ``on_change`` whenever they may have changed."""

    def __init__(self, ensemble: str, path: str, timeout: float = 10.0) -> None:
        from kazoo.client import KazooClient  # the controller's zipapp carries kazoo

        self.ensemble = ensemble
        self.path = path.rstrip("/")
        self.timeout = timeout
        self.on_change: Callable[[], None] = _nothing
        self.client = KazooClient(
            hosts=ensemble,
            timeout=timeout,
            read_only=True,
            connection_retry={"max_tries": -1, "max_delay": 5},
        )
        self.client.add_listener(self._state_changed)

    def __str__(self) -> str:
        return f"ZooKeeper {self.ensemble} {self.path}"

    def start(self) -> None:
        """Connect in the background (kazoo retries for ever); wait a little for a first session."""
        self.client.start_async().wait(self.timeout)

    def stop(self) -> None:
        self.client.stop()
        self.client.close()

    def _state_changed(self, state: object) -> None:
        self.on_change()  # connected: read again (watches may be lost); lost: the read says so

    def _watch_fired(self, event: object) -> None:
        self.on_change()

    def fetch(self) -> Instances:
        from kazoo.exceptions import NoNodeError

        if not self.client.connected:
            raise SourceError("no ZooKeeper session")
        try:
            children = self.client.get_children_async(self.path, watch=self._watch_fired).get(
                timeout=self.timeout
            )
        except NoNodeError:
            # Not created yet (the controller creates it): no instances, and a watch for its creation.
            self.client.exists_async(self.path, watch=self._watch_fired).get(timeout=self.timeout)
            return frozenset()
        # A watch on each znode's data too: a record rewritten in place (new address, new models)
        # fires no children watch.
        reads = {
            child: self.client.get_async(f"{self.path}/{child}", watch=self._watch_fired)
            for child in sorted(children)
        }
        found = set()
        for child, read in reads.items():
            try:
                data, _stat = read.get(timeout=self.timeout)
                found.add(parse_znode(data))
            except NoNodeError:
                continue  # removed since the children were listed: the next watch event re-reads
            except SourceError as exc:
                LOG.warning("ignoring znode %s/%s: %s", self.path, child, exc)
        return frozenset(found)


def _nothing() -> None:
    pass


# ---- one thread per source


def failure_reason(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, TarnError) else f"{type(exc).__name__}: {exc}"


class Watcher:
    """Runs a source's fetch in its own thread (a slow source never delays HAProxy's repairs).

    It fetches every ``interval`` seconds and at once after :meth:`trigger`; :attr:`changed` is
    set whenever the known set changes, :meth:`current` returns it (None: nothing read yet).
    """

    def __init__(self, fetch: Fetch, interval: float, source: str) -> None:
        self._fetch = fetch
        self._interval = interval
        self._known = LastGoodSet(source)
        self._lock = threading.Lock()
        self._due = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tarn-source", daemon=True)
        self.changed = threading.Event()

    def current(self) -> Instances | None:
        with self._lock:
            return self._known.endpoints

    def trigger(self) -> None:
        self._due.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._due.set()

    def fetch_once(self) -> None:
        try:
            endpoints = self._fetch()
        except Exception as exc:  # any failure keeps the last good set, and the thread lives on
            reason = failure_reason(exc)
            notes, level = self._record(lambda known: known.failed(reason)), logging.WARNING
        else:
            notes, level = self._record(lambda known: known.succeeded(endpoints)), logging.INFO
        for note in notes:
            LOG.log(level, "%s", note)

    def _record(self, update: Callable[[LastGoodSet], list[str]]) -> list[str]:
        with self._lock:
            before = self._known.endpoints
            notes = update(self._known)
            if self._known.endpoints != before:
                self.changed.set()
        return notes

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._due.clear()
            self.fetch_once()
            self._due.wait(self._interval)
