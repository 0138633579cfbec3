"""``python -m tarn.stdlib.openai --port P [--host H] [--triton-url http://127.0.0.1:8000]``:
the OpenAI front beside one Triton (docs/openai.md). SIGTERM or SIGINT stops it."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

from tarn.errors import ConfigError
from tarn.stdlib.api_token import read_token
from tarn.stdlib.openai.admission import POLICIES, Limits
from tarn.stdlib.openai.server import MAX_BODY, SLOTS_PARAMETER, Front, Triton, serve
from tarn.stdlib.openai.tenancy import TenancyFile


def triton_endpoint(url: str, connect_timeout_s: float) -> Triton:
    """The --triton-url as an endpoint: plain http to a host and port (Triton is local)."""
    parts = urlsplit(url)
    try:
        port = parts.port or 80
    except ValueError:
        port = -1
    if parts.scheme != "http" or not parts.hostname or not 0 < port < 65536 or parts.path not in ("", "/"):
        raise ValueError(f"--triton-url: {url!r} is not http://HOST:PORT; give Triton's HTTP endpoint")
    return Triton(parts.hostname, port, connect_timeout_s)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tarn.stdlib.openai",
        description="OpenAI-compatible /v1 over the generate extension of one Triton",
    )
    parser.add_argument("--port", type=int, required=True, help="port to listen on (0: any free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument(
        "--triton-url", default="http://127.0.0.1:8000", help="Triton's HTTP endpoint (default: %(default)s)"
    )
    parser.add_argument(
        "--connect-timeout", type=float, default=2.0, help="seconds to reach Triton before a 503"
    )
    parser.add_argument(
        "--max-body-mb", type=int, default=MAX_BODY // 2**20, help="largest request body (MiB)"
    )
    parser.add_argument(
        "--token-file",
        help="the service's API token: /metrics needs it, and Knox's X-TARN-User-Proof is checked with it"
        " (without it: /metrics is open and every request counts as anonymous)",
    )
    parser.add_argument(
        "--max-generations",
        type=int,
        default=0,
        help="generations of a model at once on this front, the rest queued (default 0: the model's own"
        f" {SLOTS_PARAMETER} parameter; neither: no queue)",
    )
    parser.add_argument(
        "--admission",
        choices=POLICIES,
        default="fair",
        help="order of the queued: fair (priority bands, fair share, weighted fair queuing across users)"
        " or fifo (default: %(default)s)",
    )
    parser.add_argument(
        "--tenancy-file", help="users' groups, bands and weights (JSON; read again when it changes)"
    )
    args = parser.parse_args(argv)
    if args.max_generations < 0:
        parser.error("--max-generations: 0 (the model's own) or more")
    if not 0 <= args.port < 65536:
        parser.error(f"--port: {args.port} is not a port")
    if args.connect_timeout <= 0 or args.max_body_mb < 1:
        parser.error("--connect-timeout and --max-body-mb must be positive")
    try:
        args.triton = triton_endpoint(args.triton_url, args.connect_timeout)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="tarn openai: %(asctime)s %(levelname)s %(message)s"
    )
    try:
        token = read_token(None, args.token_file)
        tenancy = TenancyFile(args.tenancy_file)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"tarn openai: {exc}", file=sys.stderr)
        return 2
    front = Front(
        args.triton,
        max_body=args.max_body_mb * 2**20,
        token=token,
        admission=Limits(slots=args.max_generations, policy=args.admission),
        tenancy=tenancy,
    )

    async def run() -> None:
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await serve(front, args.host, args.port, stop)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
