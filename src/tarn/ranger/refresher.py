"""The controller's Ranger plugin at run time: poll Ranger Admin, keep the last good documents,
write and read the cache (the decisions are tarn.ranger.state's, pure).

Like Ranger's PolicyRefresher: at start the cache (if ``policy.cache.dir`` is set) is read, then a
daemon thread polls Admin at once and every ``policy.pollIntervalMs``. A poll asks for policies,
roles and the user store with the versions held (an unchanged document is a 304); when no Admin
answers, the rest of the poll is skipped. A failed poll keeps what is held (stale); nothing held
means every check is denied.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from tarn.ranger.admin import AdminUnreachable, RangerAdmin
from tarn.ranger.cache import CacheError, PolicyCache
from tarn.ranger.settings import PluginSettings, plugin_id
from tarn.ranger.state import Documents, PolicyState, from_cache, polled

log = logging.getLogger("tarn.ranger")

JSON = dict[str, Any]


class AdminApi(Protocol):
    """What the refresher needs from Ranger Admin (tarn.ranger.admin.RangerAdmin)."""

    def policies(self, last_known_version: int, last_activation_ms: int) -> JSON | None: ...
    def roles(self, last_known_version: int, last_activation_ms: int) -> JSON | None: ...
    def user_store(self, last_known_version: int, last_activation_ms: int) -> JSON | None: ...


class Refresher:
    def __init__(
        self,
        settings: PluginSettings,
        admin: AdminApi,
        cache: PolicyCache | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._admin = admin
        self._cache = cache
        self._wall = wall
        self._state = PolicyState()
        self._cached = Documents()  # what the cache files hold
        self._lock = threading.Lock()  # guards _state: API threads read it, one poll writes it
        self._polling = threading.Lock()  # one poll at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def state(self) -> PolicyState:
        with self._lock:
            return self._state

    def start(self) -> None:
        """Read the cache, then poll in a daemon thread: now, then every poll interval."""
        self.load_cache()
        self._thread = threading.Thread(target=self._run, name="ranger-refresher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def load_cache(self) -> PolicyState:
        """Put the cached documents in force, unless policies are held already."""
        if self._cache is None:
            return self.state
        with self._polling:
            held = self.state
            try:
                found = self._cache.load()
            except CacheError as exc:
                log.warning("Ranger policy cache not used: %s", exc)
                return self._publish(replace(held, cache_problem=f"cache not used: {exc}"))
            if found is None:
                log.info("Ranger policy cache: nothing in %s", self._cache.directory)
                return held
            documents, saved_at = found
            state = from_cache(held, documents, saved_at, self._wall(), *self._super)
            if state.loaded and not held.loaded:
                self._cached = documents
                log.info(
                    "Ranger service %s: policies version %d from the cache (%s)",
                    self.settings.service,
                    documents.policy_version,
                    self._cache.policies_file,
                )
            return self._publish(state)

    def refresh(self) -> PolicyState:
        """One poll of Ranger Admin."""
        with self._polling:
            held = self.state
            activated_ms = int(held.activated_at * 1000)
            docs = held.documents
            sent: dict[str, JSON | None] = {}
            errors: list[str] = []
            for name, download, version in (
                ("policies", self._admin.policies, docs.policy_version),
                ("roles", self._admin.roles, docs.role_version),
                ("user store", self._admin.user_store, docs.user_store_version),
            ):
                try:
                    sent[name] = download(version, activated_ms)
                except AdminUnreachable as exc:
                    errors.append(str(exc))
                    break  # the others would wait for the same timeouts
                except Exception as exc:  # any failure keeps what is held
                    errors.append(f"{name}: {exc}")
            got = Documents(sent.get("policies"), sent.get("roles"), sent.get("user store"))
            state = polled(held, got, errors, self._wall(), *self._super)
            state = self._save(state)
            self._report(held, state)
            return self._publish(state)

    @property
    def _super(self) -> tuple[frozenset[str], frozenset[str]]:
        return self.settings.super_users, self.settings.super_groups

    def _run(self) -> None:
        while True:
            try:
                self.refresh()
            except Exception:  # the refresher must outlive any one bad poll
                log.exception("Ranger refresh failed")
            if self._stop.wait(self.settings.poll_interval_s):
                return

    def _save(self, state: PolicyState) -> PolicyState:
        if self._cache is None or state.documents == self._cached:
            return state
        try:
            self._cache.save(state.documents, self._cached)
        except CacheError as exc:
            if state.cache_problem is None:
                log.warning("Ranger policy cache not written: %s", exc)
            return replace(state, cache_problem=f"cache not written: {exc}")
        self._cached = state.documents
        return replace(state, cache_problem=None)

    def _report(self, held: PolicyState, state: PolicyState) -> None:
        service = self.settings.service
        if state.documents != held.documents:
            d = state.documents
            log.info(
                "Ranger service %s: policies version %d -> %d (roles %d, user store %d)",
                service,
                held.documents.policy_version,
                d.policy_version,
                d.role_version,
                d.user_store_version,
            )
        if state.error and state.error != held.error:
            kept = (
                f"keeping policies version {state.documents.policy_version}"
                if state.loaded
                else "no policies: every check is denied"
            )
            log.warning("Ranger service %s: %s; %s", service, state.error, kept)
        elif held.error and not state.error:
            log.info("Ranger service %s: Admin answers again", service)

    def _publish(self, state: PolicyState) -> PolicyState:
        with self._lock:
            self._state = state
        return state


def connect(settings: PluginSettings, host: str | None = None) -> Refresher:
    """A refresher for ``settings``: Ranger Admin's client and, with ``policy.cache.dir``, the cache."""
    admin = RangerAdmin(
        settings.rest_urls,
        settings.service,
        plugin_id(settings.app_id, host or socket.gethostname(), settings.service),
        settings.cluster_name,
        timeout=(settings.connect_timeout_s, settings.read_timeout_s),
    )
    cache = (
        PolicyCache(Path(settings.cache_dir), settings.app_id, settings.service)
        if settings.cache_dir
        else None
    )
    return Refresher(settings, admin, cache)
