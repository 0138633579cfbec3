"""`tarn activator`: hold requests while no Triton instance is ready (docs/scale-to-zero.md).

    tarn activator --listen 127.0.0.1:8099 --admin 127.0.0.1:8098 \\
        (--zk-ensemble H:P[,H:P…] [--zk-path /services/triton/instances]
         | --controller-url http://host:8888 [--token-file F])

It reads the ready instances from the same source as `tarn haproxy-sync` (and with the same
flags), holds the requests HAProxy sends to its ``backup`` server, and reports the demand: to
ZooKeeper (``<--zk-path>.demand``, which the controller watches) or to the controller's ``/wake``.
``--admin`` serves ``/metrics`` (Prometheus text) and ``/health``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Mapping

import requests

from tarn.activator.demand import Report, Reporter, demand_path
from tarn.activator.hold import Activator, Limits
from tarn.activator.messages import answer
from tarn.activator.metrics import metrics_text
from tarn.errors import ConfigError
from tarn.haproxy.command import SourceOptions, add_source_arguments, source_options, watcher_for
from tarn.haproxy.sources import ZooKeeperSource
from tarn.stdlib.http1 import Bounds, ClientError, read_request

log = logging.getLogger("tarn.activator")
DEFAULTS = Limits()
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
ADMIN_BOUNDS = Bounds(body_bytes=0, read_s=5.0)  # /metrics and /health: a scraper sends no body


def add_arguments(parser: argparse.ArgumentParser) -> None:
    own = parser.add_argument_group("activator")
    own.add_argument("--listen", default="127.0.0.1:8099", help="HOST:PORT for the requests HAProxy sends")
    own.add_argument("--admin", default="127.0.0.1:8098", help="HOST:PORT for /metrics and /health")
    own.add_argument("--max-held", type=int, default=DEFAULTS.max_held, help="requests held at most")
    own.add_argument(
        "--max-held-mb", type=int, default=DEFAULTS.max_held_bytes // 2**20, help="MiB of held bodies at most"
    )
    own.add_argument(
        "--hold-timeout", type=float, default=DEFAULTS.hold_timeout_s,
        help="seconds a request waits for an instance before its 503 (below HAProxy's timeout server)",
    )  # fmt: skip
    own.add_argument("--retry-after", type=int, default=DEFAULTS.retry_after_s, help="Retry-After of a 503")
    add_source_arguments(parser)


def address(flag: str, text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{flag}: {text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def limits_from(args: argparse.Namespace) -> Limits:
    for flag, value, low in (
        ("--max-held", args.max_held, 1),
        ("--max-held-mb", args.max_held_mb, 1),
        ("--retry-after", args.retry_after, 0),
    ):
        if value < low:
            raise ConfigError(f"{flag}: {value} is below {low}")
    if not 0 < args.hold_timeout <= 3600:
        raise ConfigError(f"--hold-timeout: {args.hold_timeout} is not between 0 and 3600 seconds")
    return Limits(
        max_held=args.max_held,
        max_held_bytes=args.max_held_mb * 2**20,
        hold_timeout_s=args.hold_timeout,
        retry_after_s=args.retry_after,
    )


def demand_sender(source: SourceOptions, zookeeper: ZooKeeperSource | None) -> Callable[[Report], None]:
    """Where reports go: the demand znode beside the instances', or the controller's /wake."""
    if zookeeper is not None:
        path = demand_path(source.zk_path)

        def to_zookeeper(report: Report) -> None:
            from kazoo.exceptions import NoNodeError

            try:
                zookeeper.client.set(path, report.encode())
            except NoNodeError:
                zookeeper.client.create(path, report.encode(), makepath=True)

        return to_zookeeper
    session = requests.Session()
    headers = {} if source.token is None else {"X-TARN-Token": source.token.reveal()}

    def to_controller(report: Report) -> None:
        reply = session.post(
            f"{source.controller_url}/wake",
            params={"held": report.held, "oldest_s": report.oldest_s},
            headers=headers,
            timeout=5,
        )
        reply.raise_for_status()

    return to_controller


async def serve(
    activator: Activator, listen: tuple[str, int], admin: tuple[str, int], stop: asyncio.Event
) -> None:
    held = await asyncio.start_server(activator.handle, *listen, limit=64 * 1024, backlog=4096)

    async def admin_handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await read_request(reader, None, ADMIN_BOUNDS)
            if request is None:
                return
            if request.path == "/metrics":
                text = metrics_text(activator, activator.ready_instances())
                writer.write(answer(200, text.rstrip("\n"), content_type=PROMETHEUS_TEXT))
            elif request.path == "/health":
                writer.write(answer(200, "ok"))
            else:
                writer.write(answer(404, "activator admin: /metrics or /health"))
            await writer.drain()
        except ClientError as exc:
            with contextlib.suppress(ConnectionError):
                writer.write(answer(exc.status, f"activator admin: {exc}"))
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    side = await asyncio.start_server(admin_handle, *admin)
    log.info("holding requests on %s:%d, admin on %s:%d", *listen, *admin)
    async with held, side:
        await stop.wait()


def activator_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    source = source_options(args, environ)
    limits = limits_from(args)
    listen, admin = address("--listen", args.listen), address("--admin", args.admin)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="tarn activator: %(levelname)s %(message)s"
    )
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    watcher, zookeeper = watcher_for(source)
    reporter = Reporter(demand_sender(source, zookeeper))
    activator = Activator(watcher.current, reporter.update, limits)
    if zookeeper is not None:
        zookeeper.start()
    watcher.start()
    reporter.start()

    async def main() -> None:
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await serve(activator, listen, admin, stop)

    try:
        asyncio.run(main())
    finally:
        reporter.stop()
        watcher.stop()
        if zookeeper is not None:
            zookeeper.stop()
    return 0
