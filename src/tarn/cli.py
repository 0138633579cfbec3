"""`tarn`: submit, inspect, scale and remove the TARN YARN service.

`tarn submit` takes the seeds' `yarn jar … Client` flags (tarn.stdlib.config). The cluster is found
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
from typing import Any

from tarn import service
from tarn.activator import command as activator_command
from tarn.errors import ConfigError, TarnError
from tarn.hadoop_conf import client_conf_dir
from tarn.haproxy import command as haproxy_command
from tarn.stdlib.api_token import read_token
from tarn.stdlib.config import ConfigArgumentParser, add_config_arguments, config_from_namespace

JSON = dict[str, Any]


# ---- arguments


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
    cluster = parser.add_argument_group("cluster")
    cluster.add_argument("--rm-url", action="append", help="ResourceManager web URL (repeat for RM HA)")
    cluster.add_argument("--webhdfs-url", help="NameNode HTTP URL, e.g. http://nn:9870")
    cluster.add_argument("--conf-dir", help="Hadoop client configuration (default $HADOOP_CONF_DIR)")
    cluster.add_argument(
        "--kerberos", action="store_true", help="SPNEGO (Kerberos): the ticket cache's (kinit) or --keytab's"
    )
    cluster.add_argument(
        "--principal",
        default=os.environ.get("TARN_PRINCIPAL") or None,
        help="Kerberos principal, _HOST for this host's name (default $TARN_PRINCIPAL, the ticket "
        "cache's, or the keytab's first); implies --kerberos",
    )
    cluster.add_argument(
        "--keytab",
        default=os.environ.get("TARN_KEYTAB") or None,
        help="keytab of --principal (default $TARN_KEYTAB): tickets obtained and renewed from it, no kinit; "
        "implies --kerberos",
    )


def _parser() -> argparse.ArgumentParser:
    parser = ConfigArgumentParser(prog="tarn", description="Triton Inference Server on Hadoop YARN")
    commands = parser.add_subparsers(dest="command", required=True)

    submit = commands.add_parser("submit", help="submit the TARN service to YARN")
    add_config_arguments(submit)
    _cluster_arguments(submit)
    submit.add_argument("--dry-run", action="store_true", help="print the service JSON; contact nothing")

    controller = commands.add_parser("controller", help="run the controller (inside YARN)")
    add_config_arguments(controller)
    controller.add_argument("--rm-url", action="append", help="ResourceManager URL (default: yarn-site.xml)")

    for name, text in (
        ("status", "the service's state and components"),
        ("instances", "the Triton instances: host, state, ports"),
        ("stop", "stop every container, keep the service definition"),
        ("start", "start a stopped service again"),
        ("destroy", "remove the service and the files it uploaded"),
    ):
        command = commands.add_parser(name, help=text)
        _service_arguments(command)
    scale = commands.add_parser("scale", help="set the number of Triton instances")
    _service_arguments(scale)
    scale.add_argument("count", type=int, help="instances wanted (>= 0)")
    scale.add_argument("--token", help="the controller's API token, to drain (or $TARN_TOKEN)")
    scale.add_argument("--token-file", help="a file holding the controller's API token")
    sync = commands.add_parser("haproxy-sync", help="keep HAProxy's backend slots on the Triton instances")
    haproxy_command.add_arguments(sync)
    activator = commands.add_parser("activator", help="hold requests while no Triton instance is ready")
    activator_command.add_arguments(activator)
    return parser


def _service_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service-name", default="tarn")
    parser.add_argument("--user", help="YARN user (default $HADOOP_USER_NAME, then $USER)")
    _cluster_arguments(parser)


# ---- where the cluster is (the logic lives in tarn.service, shared with the Ansible modules)


def cluster(args: argparse.Namespace, environ: Mapping[str, str], user: str | None = None) -> service.Cluster:
    return service.connect(
        user=user or args.user,
        rm_urls=args.rm_url,
        webhdfs=args.webhdfs_url,
        conf_dir=args.conf_dir,
        kerberos=args.kerberos,
        principal=args.principal,
        keytab=args.keytab,
        environ=environ,
    )


# ---- submit


def submit(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    config = config_from_namespace(args, environ)
    if not config.user:
        raise ConfigError("--user: no YARN user given; pass --user NAME or set HADOOP_USER_NAME")
    try:
        target = cluster(args, environ, config.user)  # reads the Hadoop configuration, contacts nothing
    except ConfigError:
        if not args.dry_run:
            raise
        target = None  # --dry-run without a cluster: the controller would read $HADOOP_CONF_DIR
    rm_urls = target.rm.configured_urls if target else ()
    realm = target.realm if target else None
    conf_dir = target.conf_dir if target else client_conf_dir(args.conf_dir, environ)
    desired = service.desired_service(  # validates first
        config, config.user, environ, rm_urls, realm, conf_dir, policy_optional=args.dry_run
    )
    for note in desired.notes:
        print(f"tarn: note: {note}", file=sys.stderr)
    if args.dry_run or target is None:
        print(json.dumps(desired.spec, indent=2, sort_keys=True))
        return 0
    reply = service.create(target, desired, service.Options(warn=_warn))
    print(f"submitted service {config.service_name}: {reply.get('diagnostics', reply.get('state', ''))}")
    return 0


def _warn(text: str) -> None:
    print(f"tarn: warning: {text}", file=sys.stderr)


# ---- the other commands

instances_of = service.instances_of  # kept here: the lab's main job and the e2e tests import it


def status(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    found = service.existing(cluster(args, environ).rm, args.service_name)
    print(json.dumps(service.summary(found), indent=2))
    return 0


def instances(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    found = service.existing(cluster(args, environ).rm, args.service_name)
    print(json.dumps(service.instances_of(found), indent=2))
    return 0


def scale(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    service.check_count(args.count)
    token = read_token(args.token or environ.get("TARN_TOKEN"), args.token_file)
    options = service.Options(token=token, log=print)
    print(service.scale(cluster(args, environ).rm, args.service_name, args.count, options))
    return 0


def stop(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    print(service.stop(cluster(args, environ).rm, args.service_name).get("diagnostics", "stopped"))
    return 0


def start(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    answer = service.start(cluster(args, environ).rm, args.service_name)
    print(answer if answer is not None else f"service {args.service_name} is not stopped: nothing to start")
    return 0


def destroy(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    removed = service.destroy(cluster(args, environ), args.service_name)
    print(f"destroyed service {args.service_name}" if removed else f"no service {args.service_name}")
    return 0


def controller(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from tarn.controller.main import run_controller  # only inside YARN: needs kazoo, prometheus_client
    from tarn.controller.shutdown import end_process
    from tarn.stdlib.config import validate

    # a stopped controller ends here, without the interpreter's exit (it joins threads left behind)
    end_process(run_controller(validate(config_from_namespace(args, environ)), args.rm_url, environ))


COMMANDS = {
    "controller": controller,
    "submit": submit,
    "status": status,
    "instances": instances,
    "scale": scale,
    "stop": stop,
    "start": start,
    "destroy": destroy,
    "haproxy-sync": haproxy_command.haproxy_sync,
    "activator": activator_command.activator_command,
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
