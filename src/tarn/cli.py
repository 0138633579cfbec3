"""`tarn`: submit, inspect, scale and remove the TARN YARN service.

`tarn submit` takes the seeds' `yarn jar … Client` flags (tarn.config). The cluster is found
through --rm-url / --webhdfs-url or, like Hadoop's own clients, the configuration in
$HADOOP_CONF_DIR. Every input is validated before anything is uploaded or submitted, and a
failed submission removes what it uploaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tarn import payload
from tarn.clients.resourcemanager import ResourceManager, spnego
from tarn.clients.webhdfs import WebHdfs
from tarn.config import ConfigArgumentParser, TarnConfig, add_config_arguments, config_from_namespace
from tarn.errors import ClusterError, ConfigError, TarnError
from tarn.hadoop_conf import read_properties, rm_web_urls, webhdfs_url
from tarn.spec import CONTROLLER, TRITON, Artifacts, build_service_spec

JSON = dict[str, Any]


# ---- arguments


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
    cluster = parser.add_argument_group("cluster")
    cluster.add_argument("--rm-url", action="append", help="ResourceManager web URL (repeat for RM HA)")
    cluster.add_argument("--webhdfs-url", help="NameNode HTTP URL, e.g. http://nn:9870")
    cluster.add_argument("--conf-dir", help="Hadoop client configuration (default $HADOOP_CONF_DIR)")
    cluster.add_argument("--kerberos", action="store_true", help="SPNEGO with the ticket from kinit")


def _parser() -> argparse.ArgumentParser:
    parser = ConfigArgumentParser(prog="tarn", description="Triton Inference Server on Hadoop YARN")
    commands = parser.add_subparsers(dest="command", required=True)

    submit = commands.add_parser("submit", help="submit the TARN service to YARN")
    add_config_arguments(submit)
    _cluster_arguments(submit)
    submit.add_argument("--dry-run", action="store_true", help="print the service JSON; contact nothing")

    controller = commands.add_parser("controller", help="run the controller (inside YARN)")
    add_config_arguments(controller)

    for name, text in (
        ("status", "the service's state and components"),
        ("instances", "the Triton instances: host, state, ports"),
        ("stop", "stop every container, keep the service definition"),
        ("destroy", "remove the service and the files it uploaded"),
    ):
        command = commands.add_parser(name, help=text)
        _service_arguments(command)
    scale = commands.add_parser("scale", help="set the number of Triton instances")
    _service_arguments(scale)
    scale.add_argument("count", type=int, help="instances wanted (>= 0)")
    return parser


def _service_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service-name", default="tarn")
    parser.add_argument("--user", help="YARN user (default $HADOOP_USER_NAME, then $USER)")
    _cluster_arguments(parser)


# ---- where the cluster is


def _conf_dir(args: argparse.Namespace, environ: Mapping[str, str]) -> Path:
    return Path(args.conf_dir or environ.get("HADOOP_CONF_DIR") or "/etc/hadoop/conf")


def resource_manager(args: argparse.Namespace, user: str, environ: Mapping[str, str]) -> ResourceManager:
    urls = args.rm_url or rm_web_urls(read_properties(_conf_dir(args, environ) / "yarn-site.xml"))
    return ResourceManager(urls, user=user, auth=spnego() if args.kerberos else None)


def web_hdfs(args: argparse.Namespace, user: str, environ: Mapping[str, str]) -> WebHdfs:
    conf = _conf_dir(args, environ)
    url = args.webhdfs_url or webhdfs_url(
        read_properties(conf / "hdfs-site.xml"), read_properties(conf / "core-site.xml")
    )
    return WebHdfs(url, user=user, auth=spnego() if args.kerberos else None)


def _user(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    return _required_user(args.user or environ.get("HADOOP_USER_NAME") or environ.get("USER"))


def _required_user(user: str | None) -> str:
    if not user:
        raise ConfigError("--user: no YARN user given; pass --user NAME or set HADOOP_USER_NAME")
    return user


# ---- submit


def artifact_dir(user: str, service_name: str) -> str:
    """Where a service's files live on HDFS: private to the service user."""
    return f"/user/{user}/.tarn/{service_name}"


# Hadoop's own variable for a credential store's password (its default password is "none").
STORE_PASSWORD_ENV = "HADOOP_CREDSTORE_PASSWORD"  # noqa: S105 - the name of a variable


def planned_artifacts(config: TarnConfig, user: str, environ: Mapping[str, str]) -> Artifacts:
    """hdfs:/// URIs (the cluster's default file system) of the files `submit` uploads."""
    base = f"hdfs://{artifact_dir(user, config.service_name)}"
    token = f"{base}/token" if config.token is not None or config.token_file is not None else None
    store_password = (
        f"{base}/secrets.password" if config.secrets and environ.get(STORE_PASSWORD_ENV) else None
    )
    return Artifacts(
        payload=f"{base}/tarn.pyz",
        launcher=f"{base}/tarn-launcher.pyz",
        token_file=token,
        secrets_password_file=store_password,
    )


def _hdfs_path(uri: str) -> str:
    return uri.removeprefix("hdfs://")


def submit(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    config = config_from_namespace(args, environ)
    user = _required_user(config.user)
    artifacts = planned_artifacts(config, user, environ)
    spec = build_service_spec(config, artifacts)  # validates everything before any contact
    for note in config.notes:
        print(f"tarn: note: {note}", file=sys.stderr)
    if args.dry_run:
        print(json.dumps(spec, indent=2, sort_keys=True))
        return 0

    rm = resource_manager(args, user, environ)
    if rm.service(config.service_name) is not None:
        raise ClusterError(
            f"--service-name: service {config.service_name!r} already exists; "
            "use `tarn scale`, or `tarn destroy` it first"
        )
    hdfs = web_hdfs(args, user, environ)
    directory = artifact_dir(user, config.service_name)
    try:
        _upload(hdfs, directory, config, artifacts, environ)
        reply = rm.create_service(spec)
    except (TarnError, OSError):
        hdfs.delete(directory, recursive=True)  # nothing half-deployed
        raise
    print(f"submitted service {config.service_name}: {reply.get('diagnostics', reply.get('state', ''))}")
    return 0


def _upload(
    hdfs: WebHdfs, directory: str, config: TarnConfig, artifacts: Artifacts, environ: Mapping[str, str]
) -> None:
    hdfs.mkdirs(directory, permission="700")
    hdfs.write(_hdfs_path(artifacts.payload), payload.controller_zipapp(), permission="600")
    hdfs.write(_hdfs_path(artifacts.launcher), payload.launcher_zipapp(), permission="600")
    if artifacts.token_file is not None:
        hdfs.write(_hdfs_path(artifacts.token_file), _token_bytes(config), permission="600")
    if artifacts.secrets_password_file is not None:
        password = environ[STORE_PASSWORD_ENV].encode()
        hdfs.write(_hdfs_path(artifacts.secrets_password_file), password, permission="600")


def _token_bytes(config: TarnConfig) -> bytes:
    if config.token is not None:
        return config.token.reveal().encode()
    return Path(str(config.token_file)).read_bytes().strip()


# ---- the other commands


def _rm(args: argparse.Namespace, environ: Mapping[str, str]) -> ResourceManager:
    return resource_manager(args, _user(args, environ), environ)


def _existing(rm: ResourceManager, name: str) -> JSON:
    service = rm.service(name)
    if service is None:
        raise ClusterError(f"--service-name: no service {name!r}; submit it with `tarn submit`")
    return service


def instances_of(service: JSON) -> list[JSON]:
    """The Triton containers of a service JSON from the RM, in instance order."""
    triton: JSON = next((c for c in service.get("components", []) if c["name"] == TRITON), {})
    rows = [
        {
            "instance": c.get("component_instance_name"),
            "container": c.get("id"),
            "host": c.get("hostname"),
            "ip": c.get("ip"),
            "state": c.get("state"),
        }
        for c in triton.get("containers", [])
    ]
    return sorted(rows, key=lambda r: str(r["instance"]))


def status(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    service = _existing(_rm(args, environ), args.service_name)
    summary = {
        "name": service["name"],
        "state": service.get("state"),
        "id": service.get("id"),
        "components": {
            c["name"]: {"wanted": c.get("number_of_containers"), "running": len(c.get("containers", []))}
            for c in service.get("components", [])
            if c["name"] in (CONTROLLER, TRITON)
        },
    }
    print(json.dumps(summary, indent=2))
    return 0


def instances(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    print(json.dumps(instances_of(_existing(_rm(args, environ), args.service_name)), indent=2))
    return 0


def scale(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.count < 0:
        raise ConfigError(f"count: {args.count} is negative; give 0 or more instances")
    rm = _rm(args, environ)
    _existing(rm, args.service_name)
    print(rm.flex(args.service_name, TRITON, args.count).get("diagnostics", "ok"))
    return 0


def stop(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    rm = _rm(args, environ)
    _existing(rm, args.service_name)
    print(rm.set_state(args.service_name, "STOPPED").get("diagnostics", "stopped"))
    return 0


def destroy(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    user = _user(args, environ)
    removed = resource_manager(args, user, environ).destroy(args.service_name)
    web_hdfs(args, user, environ).delete(artifact_dir(user, args.service_name), recursive=True)
    print(f"destroyed service {args.service_name}" if removed else f"no service {args.service_name}")
    return 0


def controller(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from tarn.controller.server import serve  # only inside YARN

    serve(config_from_namespace(args, environ))
    return 0


COMMANDS = {
    "controller": controller,
    "submit": submit,
    "status": status,
    "instances": instances,
    "scale": scale,
    "stop": stop,
    "destroy": destroy,
}


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    try:
        args = _parser().parse_args(argv)
        return COMMANDS[args.command](args, env)
    except ConfigError as exc:
        print(f"tarn: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a local file named by a flag (--token-file)
        print(f"tarn: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except TarnError as exc:
        print(f"tarn: error: {exc}", file=sys.stderr)
        return 1
