"""A constant inference load for the e2e tests: N threads, each inferring add_one in a loop
against an address chosen per request from a discovery function, counting every outcome.

A failed request is counted, never retried: "zero failed requests" means exactly that.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import requests
import tritonclient.http as triton_http

from tarn.errors import TarnError

# The pause after each request of a paced load (the chaos and HAProxy cases): 4 threads then send
# a few hundred requests a second, always one in flight across a fault, instead of the 1,500 a
# second that took both of CI's cores from the other e2e stream and from YARN (issue 51).
PACED_S = 0.01
INPUT = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
EXPECTED = INPUT + 1


@dataclass
class Tally:
    ok: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    finished_at: list[float] = field(default_factory=list)  # wall clock of every answer, good or not
    by_target: dict[str, int] = field(default_factory=dict)
    failing_since: float | None = None  # monotonic time of the first failure
    failing_until: float | None = None  # and of the last

    @property
    def failing_s(self) -> float:
        """How long requests kept failing: first failure to last (0 without failures)."""
        if self.failing_since is None or self.failing_until is None:
            return 0.0
        return self.failing_until - self.failing_since

    def finished_between(self, since: float, until: float) -> int:
        """Requests answered (or failed) in the wall-clock window (since, until]."""
        return sum(1 for at in list(self.finished_at) if since < at <= until)

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


class Load:
    """``targets()`` returns the addresses (host:port[/base path]) to spread requests over, e.g.
    discovery's. ``client_options`` go to tritonclient's client (``ssl``, ``ssl_options``),
    ``headers`` with every request (a gateway's ``Authorization``)."""

    def __init__(
        self,
        targets: Callable[[], list[str]],
        threads: int,
        pause_s: float = 0.0,
        client_options: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._targets = targets
        self._threads = threads
        self._pause_s = pause_s
        self._client_options = client_options or {}
        self._headers = headers
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []
        self._counter = itertools.count()
        self.tally = Tally()

    def __enter__(self) -> Load:
        for number in range(self._threads):
            worker = threading.Thread(target=self._run, name=f"load-{number}", daemon=True)
            worker.start()
            self._workers.append(worker)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> Tally:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout=30)
        return self.tally

    def _run(self) -> None:
        clients: dict[str, triton_http.InferenceServerClient] = {}
        while not self._stop.is_set():
            targets = self._targets()
            if not targets:
                time.sleep(0.05)
                continue
            target = targets[next(self._counter) % len(targets)]
            client = clients.get(target)
            if client is None:
                client = clients[target] = triton_http.InferenceServerClient(
                    target, connection_timeout=5, network_timeout=30, **self._client_options
                )
            began = time.monotonic()
            try:
                tensor = triton_http.InferInput("INPUT0", list(INPUT.shape), "FP32")
                tensor.set_data_from_numpy(INPUT)
                result = client.infer("add_one", [tensor], headers=self._headers).as_numpy("OUTPUT0")
                good = result is not None and bool(np.array_equal(result, EXPECTED))
                error = None if good else f"{target}: wrong answer {result}"
            except Exception as exc:  # every failure counts, whatever its kind
                good, error = False, f"{target}: {exc.__class__.__name__}: {str(exc)[:160]}"
                clients.pop(target, None)
            with self._lock:
                self.tally.finished_at.append(time.time())
                if good:
                    self.tally.ok += 1
                    self.tally.latencies.append(time.monotonic() - began)
                    self.tally.by_target[target] = self.tally.by_target.get(target, 0) + 1
                else:
                    self.tally.failed += 1
                    self.tally.errors.append(str(error))
                    self.tally.failing_since = self.tally.failing_since or began
                    self.tally.failing_until = time.monotonic()
            if self._pause_s:
                time.sleep(self._pause_s)


class Discovery:
    """What a client does: re-read the controller's /instances?format=text every 0.2 s through
    ``fetch``, keeping the last good list; remembers when each address was first listed (wall
    clock)."""

    def __init__(self, fetch: Callable[[], requests.Response]) -> None:
        self._fetch = fetch
        self._targets: list[str] = []
        self.first_listed: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Discovery:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._targets:
            if time.monotonic() > deadline:
                raise TimeoutError("timed out after 30s waiting for a first discovery answer")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def targets(self) -> list[str]:
        return list(self._targets)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                reply = self._fetch()
                if reply.status_code == 200:
                    now = time.time()
                    self._targets = reply.text.split()
                    for target in self._targets:
                        self.first_listed.setdefault(target, now)
            except (requests.RequestException, TarnError):
                pass  # keep the last good list, as a client would
            self._stop.wait(0.2)
