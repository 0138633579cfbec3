"""The Triton launcher: the command of every `triton` container (standard library only).

1. Puts the model repository in place: an hdfs:// repository is staged through WebHDFS into
   ./models, through the node's model cache (``--model-cache-dir``, shared by every instance and
   service on the node; else one in the application's YARN local directory, which outlives
   container restarts), so nothing unchanged is downloaded twice; a /path (an HDFS NFS gateway
   mount) is served in place.
2. Turns the JCEKS secrets into environment variables of the tritonserver process only
   (huggingface.token → HUGGING_FACE_HUB_TOKEN, tarn.env.X → X). Values are never printed.
3. Runs tritonserver with the instance's ports, GPU metrics on, and the model control mode that
   lets TARN load new model versions in place; with tp x pp > 1, ``mpirun`` starting a world of
   tp x pp Triton ranks instead (:mod:`tarn.stdlib.launcher.world`). It runs as this process's
   child, not exec'd: when it ends, nothing it started is left on the node, and the launcher
   exits with its status (:mod:`tarn.stdlib.launcher.supervise`).
4. With ``--openai-port``, runs the OpenAI front (:mod:`tarn.stdlib.openai`) beside it: a sidecar
   in the same process group on the instance's front port and Triton's address, speaking to this
   Triton on loopback, without the secrets; restarted when it ends, the instance stopped when it
   keeps ending (docs/openai.md).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import tarn.stdlib
from tarn.stdlib.config import LAUNCHER_OPTIONS, add_config_arguments, config_from_namespace
from tarn.stdlib.hadoop_site import hadoop_user
from tarn.stdlib.kerberos import service_identity, webhdfs_auth
from tarn.stdlib.launcher import rank, supervise, world
from tarn.stdlib.launcher.secrets import keystore_password, load_environment_from_jceks
from tarn.stdlib.launcher.staging import StagingError, resolve_repository
from tarn.stdlib.webhdfs import Authenticator, WebHdfsClient, namenode_from_conf

log = logging.getLogger("tarn.launcher")
# Longer than the NodeManager's SIGKILL delay (the yarn_nodemanager role's default: 10 s).
PORT_WAIT_S = 30.0
# Shorter than that delay. On YARN's SIGTERM Triton waits for its in-flight requests and for every
# open HTTP connection, the idle keep-alive ones of HAProxy and Knox included, 30 s by default: a
# stop with clients connected ended in the SIGKILL, without the backends' clean-up. The controller
# drains an instance before it stops one, so what a stop finds is idle connections.
TRITON_EXIT_TIMEOUT_S = 5


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The launcher's subset of the TARN options (declared once, in tarn.stdlib.config), then its own."""
    parser = argparse.ArgumentParser(prog="tarn-launcher", description="stage models, then run tritonserver")
    add_config_arguments(parser, only=LAUNCHER_OPTIONS)
    parser.add_argument("--secrets-password-file", help="file holding the keystore password")
    parser.add_argument(
        "--front-token-file",
        help="the service's API token, for the OpenAI front (its /metrics, the user's proof)",
    )
    parser.add_argument("--instance-id", type=int, default=0)
    parser.add_argument("--webhdfs-url", help="NameNode HTTP URL (default: from $HADOOP_CONF_DIR)")
    parser.add_argument("--tritonserver", default="tritonserver")
    parser.add_argument("--mpirun", default="mpirun", help="Open MPI's mpirun, for tp x pp > 1")
    parser.add_argument("--download-workers", type=int, default=4)
    args = parser.parse_args(argv)
    if not args.model_repository:
        parser.error("--model-repository is required")
    config = config_from_namespace(args, {})  # the declared defaults of what was left out
    vars(args).update({name: getattr(config, name) for name in LAUNCHER_OPTIONS})
    return args


# ---- decisions (pure)


def instance_ports(args: argparse.Namespace) -> tuple[int, int, int]:
    """HTTP, gRPC and metrics ports of this instance: the base ports shifted by its stride."""
    shift = args.port_stride * args.instance_id
    return args.port + shift, args.grpc_port + shift, args.metrics_port + shift


def front_port(args: argparse.Namespace) -> int | None:
    """The OpenAI front's port of this instance (shifted like Triton's), None without a front."""
    if args.openai_port is None:
        return None
    return int(args.openai_port + args.port_stride * args.instance_id)


def listening_ports(args: argparse.Namespace) -> list[int]:
    """Every port this instance listens on: Triton's, and its front's when it has one."""
    front = front_port(args)
    return [*instance_ports(args), *([] if front is None else [front])]


def local_url(address: str, port: int) -> str:
    """Triton's HTTP endpoint as a process of this container reaches it: loopback when Triton
    listens on every address, else the one address it listens on."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(address, address)  # noqa: S104 - Triton's wildcard
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def front_command(args: argparse.Namespace, python: str) -> list[str] | None:
    """The OpenAI front beside this instance's Triton, bound like Triton; None without a front."""
    port = front_port(args)
    if port is None:
        return None
    http, _grpc, _metrics = instance_ports(args)
    return [
        python,
        "-m",
        "tarn.stdlib.openai",
        f"--port={port}",
        f"--host={args.address}",
        f"--triton-url={local_url(args.address, http)}",
        *([f"--token-file={args.front_token_file}"] if args.front_token_file else []),
        f"--max-generations={args.openai_max_generations}",
        f"--admission={args.openai_admission}",
    ]


def front_environment(environ: Mapping[str, str], package_root: str) -> dict[str, str]:
    """The front's environment: the container's (never Triton's secrets), with this package first
    on the path (the launcher's zipapp, or its source tree)."""
    path = [package_root, *filter(None, environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**environ, "PYTHONPATH": os.pathsep.join(path)}


def package_root() -> str:
    """Where the ``tarn`` package is imported from: tarn-launcher.pyz, or a source tree."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(tarn.stdlib.__file__))))


def cache_dir(args: argparse.Namespace, environ: Mapping[str, str]) -> Path:
    """The node's model cache when one is set up here, else one in the application's directory."""
    if args.model_cache_dir:
        node = Path(args.model_cache_dir)
        if node.is_dir() and os.access(node, os.W_OK | os.X_OK):
            return node
        log.warning(
            "model cache %s is not a writable directory on this node: using one per application", node
        )
    local_dirs = [d for d in environ.get("LOCAL_DIRS", "").split(",") if d]
    if local_dirs:  # the application's directory on this node: kept across container restarts
        return Path(local_dirs[0]) / "tarn-model-cache"
    return Path("/tmp") / f"tarn-model-cache-{hdfs_user(environ)}"  # noqa: S108 - outside YARN only


def hdfs_user(environ: Mapping[str, str]) -> str:
    return hadoop_user(None, environ) or "nobody"  # outside YARN only: the NodeManager sets $USER


def hdfs_auth(args: argparse.Namespace, environ: Mapping[str, str]) -> Authenticator:
    """SPNEGO from the service's keytab on a secure cluster; the container's user otherwise."""
    return webhdfs_auth(service_identity(args.service_principal, args.service_keytab), hdfs_user(environ))


def webhdfs_location(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str]:
    conf = Path(environ.get("HADOOP_CONF_DIR", "/etc/hadoop/conf"))
    return namenode_from_conf(args.model_repository, conf, args.webhdfs_url)


def triton_command(args: argparse.Namespace, repository: Path, server_id: str = "") -> list[str]:
    """``server_id``: the container's id, as Triton's --id (its server metadata's name), by which
    the controller tells this Triton from one still stopping on the same port."""
    http, grpc, metrics = instance_ports(args)
    return [
        args.tritonserver,
        *([f"--id={server_id}"] if server_id else []),
        f"--model-repository={repository}",
        f"--http-port={http}",
        f"--grpc-port={grpc}",
        f"--metrics-port={metrics}",
        f"--http-address={args.address}",
        f"--grpc-address={args.address}",
        f"--metrics-address={args.address}",
        "--allow-metrics=true",
        "--allow-gpu-metrics=true",  # the load signal the controller scales on
        "--metrics-config=summary_latencies=true",  # per-model p50/p99 for the controller's figures
        "--model-control-mode=explicit",
        "--load-model=*",
        f"--exit-timeout-secs={TRITON_EXIT_TIMEOUT_S}",
    ]


def launch_command(
    args: argparse.Namespace, repository: Path, environ: Mapping[str, str], world_dir: Path, as_root: bool
) -> tuple[list[str], dict[str, str]]:
    """What to run, and the environment it adds: tritonserver itself, or mpirun and its world."""
    serving = triton_command(args, repository, environ.get("CONTAINER_ID", ""))
    size = world.world_size(args.tp, args.pp)
    if size == 1:
        return serving, world.world_environment([], args.tp, args.pp)
    gpus = world.visible_gpus(environ)
    command = world.mpirun_command(
        mpirun=args.mpirun,
        ranks=world.layout(args.tp, args.pp, gpus),
        rank_launcher=[sys.executable, os.path.abspath(sys.argv[0])],
        tritonserver=args.tritonserver,
        serving=serving[1:],
        world_dir=world_dir,
        container_id=environ.get("CONTAINER_ID", ""),
        as_root=as_root,
    )
    return command, world.world_environment(gpus, args.tp, args.pp)


# ---- steps with I/O


def prepare_repository(args: argparse.Namespace, environ: Mapping[str, str]) -> Path:
    if not args.model_repository.startswith("hdfs://"):
        return resolve_repository(args.model_repository)
    namenode, _path = webhdfs_location(args, environ)
    client = WebHdfsClient(namenode, hdfs_auth(args, environ))
    return resolve_repository(
        args.model_repository,
        target_dir=Path.cwd() / "models",
        cache_dir=cache_dir(args, environ),
        client=client,
        workers=args.download_workers,
        verify=args.model_verify,
        max_cache_bytes=int(args.model_cache_max_gib * 2**30),
    )


def secret_environment(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str]:
    if not args.secrets:
        return {}
    if args.secrets_password_file:
        password = Path(args.secrets_password_file).read_text().strip()
    else:
        password = keystore_password(environ)
    variables = load_environment_from_jceks(args.secrets, password)
    log.info(
        "secrets: %d variable(s) from %s: %s", len(variables), args.secrets, ", ".join(sorted(variables))
    )
    return variables


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(
            socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
        )  # as Triton binds: TIME_WAIT is no obstacle
        try:
            probe.bind(("0.0.0.0", port))  # noqa: S104 - Triton's own address; nothing listens here
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def wait_for_ports(ports: Sequence[int], timeout_s: float = PORT_WAIT_S) -> None:
    """Wait until no process listens on Triton's ports. An instance stopped on this node a moment
    ago (scaled to zero and back, a relaunch) keeps them until the NodeManager's SIGKILL delay
    ends; Triton started now would fail with "address already in use"."""
    deadline = time.monotonic() + timeout_s
    busy = [port for port in ports if port_in_use(port)]
    if busy:
        log.info("port(s) %s in use, by an instance still stopping on this node: waiting", busy)
    while busy and time.monotonic() < deadline:
        time.sleep(0.2)
        busy = [port for port in busy if port_in_use(port)]
    if busy:
        log.warning("port(s) %s still in use after %.0f s; starting Triton anyway", busy, timeout_s)


def fresh_world_dir() -> Path:
    """Where the ranks of this container mark themselves up; emptied, so no mark is stale."""
    path = Path.cwd() / "tarn-world"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    return path


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["rank"]:  # mpirun starting one rank of a world
        return rank.main(argv[1:])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s tarn-launcher %(levelname)s %(message)s")
    env = dict(os.environ if environ is None else environ)
    args = parse_args(argv)
    front = front_command(args, sys.executable)
    sidecar = None
    if front is not None:
        sidecar = supervise.Sidecar("the OpenAI front", tuple(front), front_environment(env, package_root()))
    try:
        repository = prepare_repository(args, env)
        env.update(secret_environment(args, env))
        world_dir = fresh_world_dir() if world.world_size(args.tp, args.pp) > 1 else Path()
        wait_for_ports(listening_ports(args))
        command, world_env = launch_command(args, repository, env, world_dir, as_root=os.geteuid() == 0)
    except (StagingError, OSError, ValueError) as exc:
        log.error("%s", exc)  # messages name paths and aliases, never secret values
        return 1
    env.update(world_env)
    log.info("run %s", " ".join(command))
    sys.stdout.flush()
    sys.stderr.flush()
    return supervise.exit_status(supervise.supervise(command, env, group=True, sidecar=sidecar))
