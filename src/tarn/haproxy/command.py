"""`tarn haproxy-sync`: keep an HAProxy backend's slots equal to the Triton instances.

    tarn haproxy-sync --socket /var/run/haproxy.sock --backend triton_backend \\
        [--openai-backend openai_backend] \\
        (--zk-ensemble H:P[,H:P…] [--zk-path /services/triton/instances]
         | --controller-url http://host:8888 [--interval 30] [--token-file F])

With --openai-backend, a second backend's slots follow the instances' OpenAI fronts (their
``openai_port``), from the same source in the same rounds.

ZooKeeper is the default source when --zk-ensemble is given; --controller-url polls the
controller's /instances like the seeds' update script. The token (controller only) comes from
--token, --token-file or $TARN_TOKEN; it is sent as X-TARN-Token and never logged.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

from tarn.errors import ConfigError
from tarn.haproxy.runtime import RuntimeApi
from tarn.haproxy.sources import ControllerSource, Watcher, ZooKeeperSource, front_endpoints
from tarn.haproxy.sync import BackendSync, run
from tarn.stdlib.api_token import Secret

_BACKEND = re.compile(r"[A-Za-z0-9_.:-]{1,64}")  # HAProxy proxy names
_ZK_PATH = re.compile(r"(/[A-Za-z0-9_.-]+)+")
_ZK_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?(:\d{1,5})?")
# A full re-read besides the watches, so a missed watch costs at most this long. A CI run under
# load once saw the sync keep "none" for 15 s after two znodes appeared (not reproduced since);
# a few znodes every 5 s is cheap.
ZK_REFRESH_S = 5.0


@dataclass(frozen=True)
class SourceOptions:
    """Where the instances are read (the sync's and the activator's flags)."""

    zk_ensemble: str | None = None
    zk_path: str = "/services/triton/instances"
    controller_url: str | None = None
    interval: float = 30.0
    token: Secret | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SyncOptions:
    socket: str
    backend: str
    source: SourceOptions
    repair_interval: float = 1.0
    openai_backend: str | None = None  # the backend of the OpenAI fronts, when HAProxy has one


def add_arguments(parser: argparse.ArgumentParser) -> None:
    haproxy = parser.add_argument_group("HAProxy")
    haproxy.add_argument("--socket", default="/var/run/haproxy.sock", help="stats socket (level admin)")
    haproxy.add_argument("--backend", default="triton_backend", help="backend holding the slots")
    haproxy.add_argument(
        "--openai-backend", help="backend whose slots follow the instances' OpenAI fronts (default: none)"
    )
    haproxy.add_argument(
        "--repair-interval", type=float, default=1.0, help="seconds between checks of HAProxy (default 1)"
    )
    add_source_arguments(parser)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("source of instances (one of)")
    source.add_argument("--zk-ensemble", help="host:port[,host:port…]: watch ZooKeeper (push)")
    source.add_argument("--zk-path", default="/services/triton/instances")
    source.add_argument("--controller-url", help="http://host:am-port: poll the controller's /instances")
    source.add_argument("--interval", type=float, default=30.0, help="controller polling, seconds (30)")
    source.add_argument("--token", help="controller API token (or $TARN_TOKEN)")
    source.add_argument("--token-file", help="a file holding the controller API token")


def options_from(args: argparse.Namespace, environ: Mapping[str, str]) -> SyncOptions:
    """Validated options; ConfigError names the flag."""
    source = source_options(args, environ)
    if not _BACKEND.fullmatch(args.backend):
        raise ConfigError(f"--backend: {args.backend!r} is not an HAProxy backend name")
    if args.openai_backend is not None and not _BACKEND.fullmatch(args.openai_backend):
        raise ConfigError(f"--openai-backend: {args.openai_backend!r} is not an HAProxy backend name")
    if args.openai_backend == args.backend:
        raise ConfigError("--openai-backend: is --backend; give the OpenAI fronts a backend of their own")
    if not args.socket.startswith("/"):
        raise ConfigError(f"--socket: {args.socket!r} is not an absolute path")
    if not 0 < args.repair_interval <= 3600:
        raise ConfigError(f"--repair-interval: {args.repair_interval} is not between 0 and 3600 seconds")
    return SyncOptions(
        socket=args.socket,
        backend=args.backend,
        source=source,
        repair_interval=args.repair_interval,
        openai_backend=args.openai_backend,
    )


def backend_syncs(options: SyncOptions, api: RuntimeApi) -> list[BackendSync]:
    """The backends the sync keeps: Triton's, then the OpenAI fronts' when configured."""
    syncs = [BackendSync(api, options.backend)]
    if options.openai_backend is not None:
        syncs.append(BackendSync(api, options.openai_backend, front_endpoints))
    return syncs


def source_options(args: argparse.Namespace, environ: Mapping[str, str]) -> SourceOptions:
    """The validated source flags; ConfigError names the flag."""
    if bool(args.zk_ensemble) == bool(args.controller_url):
        raise ConfigError("--zk-ensemble / --controller-url: give exactly one source of instances")
    if not 0 < args.interval <= 3600:
        raise ConfigError(f"--interval: {args.interval} is not between 0 and 3600 seconds")
    if args.zk_ensemble:
        return SourceOptions(zk_ensemble=_zk_ensemble(args.zk_ensemble), zk_path=_zk_path(args.zk_path))
    return SourceOptions(
        controller_url=_controller_url(args.controller_url),
        interval=args.interval,
        token=_token(args, environ),
    )


def _zk_ensemble(text: str) -> str:
    hosts = text.split(",")
    if not all(_ZK_HOST.fullmatch(h) for h in hosts):
        raise ConfigError(f"--zk-ensemble: {text!r} is not host:port[,host:port…]")
    return text


def _zk_path(text: str) -> str:
    if not _ZK_PATH.fullmatch(text):
        raise ConfigError(
            f"--zk-path: {text!r} is not an absolute ZooKeeper path like /services/triton/instances"
        )
    return text


def _controller_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--controller-url: {text!r} is not http(s)://host:port")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ConfigError("--controller-url: give the bare URL; the token goes in --token-file")
    return text.rstrip("/")


def _token(args: argparse.Namespace, environ: Mapping[str, str]) -> Secret | None:
    if args.token is not None and args.token_file is not None:
        raise ConfigError("--token / --token-file: give one of them")
    if args.token_file is not None:
        token = Path(args.token_file).read_text().strip()
        if not token:
            raise ConfigError(f"--token-file: {args.token_file} is empty")
        return Secret(token)
    value = args.token if args.token is not None else environ.get("TARN_TOKEN")
    return Secret(value) if value else None


def watcher_for(options: SourceOptions) -> tuple[Watcher, ZooKeeperSource | None]:
    """The source's watcher (not started) and, for ZooKeeper, the client to start and stop."""
    if options.zk_ensemble is not None:
        zookeeper = ZooKeeperSource(options.zk_ensemble, options.zk_path)
        watcher = Watcher(zookeeper.fetch, ZK_REFRESH_S, str(zookeeper))
        zookeeper.on_change = watcher.trigger
        return watcher, zookeeper
    controller = ControllerSource(str(options.controller_url), options.token)
    return Watcher(controller.fetch, options.interval, str(controller)), None


def haproxy_sync(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = options_from(args, environ)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="tarn haproxy-sync: %(levelname)s %(message)s"
    )
    logging.getLogger("kazoo").setLevel(
        logging.ERROR
    )  # each reconnection attempt; the source logs the outage once
    watcher, zookeeper = watcher_for(options.source)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        watcher.changed.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    syncs = backend_syncs(options, RuntimeApi(options.socket))
    logging.getLogger("tarn.haproxy").info(
        "syncing backend %s on %s every %s s",
        " and ".join(sync.backend for sync in syncs),
        options.socket,
        options.repair_interval,
    )
    if zookeeper is not None:
        zookeeper.start()
    watcher.start()
    try:
        run(watcher, syncs, stop, options.repair_interval)
    finally:
        watcher.stop()
        if zookeeper is not None:
            zookeeper.stop()
    return 0
