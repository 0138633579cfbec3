"""The audit writer: events queued by the API's threads, written by one thread in batches.

A decision never waits for HDFS: ``log`` only queues (bounded; when full the event is dropped and
counted, as Ranger's AuditAsyncQueue drops). Every ``flush_s`` the thread writes what is queued:

- HDFS: one file at a time, Ranger's path (tarn.ranger.audit.hdfs_file); created with the first
  batch (``x.1.log``, ``x.2.log``... when the name is taken, as Ranger does), appended to after,
  and a new one when the rollover time comes. A failed write keeps the batch for the next flush
  and starts a new file, so an append that reached HDFS but whose answer was lost can repeat
  lines (at least once, like Ranger's spool); nothing is dropped while the queue has room.
- log4j's role: one JSON line per event to a Python logger (the controller's log).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from tarn.ranger.audit import AuditSettings, HdfsDestination, Request, event, hdfs_file, numbered
from tarn.ranger.engine import Verdict
from tarn.stdlib.webhdfs import WebHdfsClient, WebHdfsError

log = logging.getLogger("tarn.ranger.audit")

JSON_LINE = {"separators": (",", ":"), "ensure_ascii": False}


@dataclass(frozen=True)
class Identity:
    """Who audits: the fields every event of this controller shares."""

    service: str
    app_id: str
    host: str
    cluster_name: str = ""


class HdfsAuditFile:
    """The HDFS destination: the file in use, its rollover, create-then-append."""

    def __init__(self, client: WebHdfsClient, destination: HdfsDestination, app_id: str, host: str) -> None:
        self._client = client
        self._destination = destination
        self._app_id = app_id
        self._host = host
        self.path: str | None = None
        self._roll_at = 0.0

    def write(self, lines: bytes, now: float) -> None:
        """Append ``lines`` to the current file (a new one when none is open or it is time to roll)."""
        if self.path is not None and now < self._roll_at:
            try:
                self._client.append(self.path, lines)
                return
            except WebHdfsError:
                self.path = None  # the next try starts a new file, as Ranger reopens after an error
                raise
        opened = datetime.fromtimestamp(now)
        base = hdfs_file(self._destination, self._app_id, self._host, opened)
        n = 0
        while self._client.status(numbered(base, n)) is not None:
            n += 1
        path = numbered(base, n)
        self._client.write(path, lines, overwrite=False)
        self.path, self._roll_at = path, next_rollover(opened, self._destination.rollover_s).timestamp()
        log.info("Ranger audit: writing %s", path)


def next_rollover(opened: datetime, every_s: int) -> datetime:
    """When a file opened at ``opened`` closes: RollingTimeUtil's periods start at local midnight, so
    a day's file rolls at the next midnight; periods longer than a day count from the opening."""
    if every_s > 86_400:
        return opened + timedelta(seconds=every_s)
    midnight = opened.replace(hour=0, minute=0, second=0, microsecond=0)
    periods = int((opened - midnight).total_seconds() // every_s) + 1
    return midnight + timedelta(seconds=periods * every_s)


class AuditLog:
    """Queues events from any thread; ``start`` runs the writer, ``stop`` writes what is left."""

    def __init__(
        self,
        settings: AuditSettings,
        identity: Identity,
        hdfs: HdfsAuditFile | None,
        *,
        flush_s: float = 1.0,
        capacity: int = 100_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._identity = identity
        self._hdfs = hdfs
        self._logger = logging.getLogger(settings.logger) if settings.logger else None
        self._flush_s = flush_s
        self._clock = clock
        self._queue: queue.Queue[str] = queue.Queue(maxsize=capacity)
        self._unwritten: list[str] = []  # taken from the queue, not yet written (oldest first)
        self._lock = threading.Lock()
        self._uuid = str(uuid.uuid4())
        self._seq = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ranger-audit", daemon=True)
        self.written = 0  # events on HDFS (or in the log when HDFS is off)
        self.dropped = 0
        self.failures = 0  # HDFS writes that failed (their events were kept)

    def log(self, request: Request, verdict: Verdict, service_type_id: int) -> None:
        """Queue the event of one audited decision; never blocks."""
        with self._lock:
            seq = self._seq
            self._seq += 1
        line = json.dumps(
            event(
                request,
                verdict,
                service=self._identity.service,
                service_type_id=service_type_id,
                app_id=self._identity.app_id,
                host=self._identity.host,
                cluster_name=self._identity.cluster_name,
                event_id=f"{self._uuid}-{seq}",
                seq_num=seq,
                at=datetime.fromtimestamp(self._clock()),
            ),
            **JSON_LINE,  # type: ignore[arg-type]
        )
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            with self._lock:
                self.dropped += 1

    @property
    def pending(self) -> int:
        """Events not yet written, a batch being written included (a test that reads ``written`` once
        this is 0 must see every event logged before on HDFS)."""
        with self._lock:
            return self._queue.qsize() + len(self._unwritten)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stops the writer after its last write, waiting at most ``timeout``; False: it is still
        writing (an HDFS that does not answer) and is left behind."""
        self._stop.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def flush(self) -> None:
        """Write what is queued (the writer thread's step; tests call it directly)."""
        batch = self._take_queued()
        if self._logger is not None:
            for line in batch:
                self._logger.info(line)
        lines = list(self._unwritten)  # the batches HDFS refused first, then this one
        if not lines:
            return
        if self._hdfs is not None:
            try:
                self._hdfs.write("".join(f"{line}\n" for line in lines).encode(), self._clock())
            except WebHdfsError as exc:
                with self._lock:
                    self.failures += 1
                    excess = max(0, len(self._unwritten) - self._queue.maxsize)  # the oldest go
                    del self._unwritten[:excess]
                    self.dropped += excess
                    kept = len(self._unwritten)
                log.warning("Ranger audit: %d events not yet on HDFS (%s); retrying", kept, exc)
                return
        with self._lock:
            del self._unwritten[: len(lines)]
            self.written += len(lines)

    def _take_queued(self) -> list[str]:
        """Move the queued events to ``_unwritten`` under the lock, so ``pending`` never misses one."""
        batch: list[str] = []
        with self._lock:
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._unwritten.extend(batch)
        return batch

    def _run(self) -> None:
        while not self._stop.wait(self._flush_s):
            self._flush_logging()
        self._flush_logging()

    def _flush_logging(self) -> None:
        try:
            self.flush()
        except Exception:  # a bug here must not end the writer: the next flush tries again
            log.exception("Ranger audit: flush failed")
