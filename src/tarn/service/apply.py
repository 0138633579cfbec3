"""Carrying a :class:`~tarn.service.plan.Plan` out: create (upload, then submit; a refused submission
removes the files), rolling upgrade, flex, start, stop, destroy (the service and its HDFS files)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tarn.clients.resourcemanager import ResourceManager, node_gpus
from tarn.errors import ClusterError, ConfigError, TarnError
from tarn.hadoop_conf import client_site
from tarn.service.am_conf import am_conf_file, ha_token_warning, yarn_service_dir
from tarn.service.artifacts import Desired, artifact_dir
from tarn.service.cluster import Cluster
from tarn.service.options import Options
from tarn.service.plan import Plan
from tarn.service.registrations import withdraw
from tarn.service.upgrade import rolling_upgrade
from tarn.service.wait import stable, stopped, until, wait_ready
from tarn.spec import TRITON, read_back
from tarn.stdlib.config import TarnConfig

JSON = dict[str, Any]
log = logging.getLogger("tarn.service")


def check_count(count: int) -> None:
    if count < 0:
        raise ConfigError(f"--count: {count} is negative; give 0 or more instances")


_GONE = frozenset({"DECOMMISSIONED", "LOST", "SHUTDOWN"})  # NodeManager states that offer nothing


def gpu_shortfall(config: TarnConfig, capacities: Sequence[int]) -> str | None:
    """Why no NodeManager can run one Triton instance (its ranks share a node), or None."""
    needed = config.gpus
    if needed == 0 or not capacities or max(capacities) >= needed:
        return None
    world = config.world_size
    flags = "--gpus-per-instance" if needed > world else f"--tp {config.tp} --pp {config.pp}"
    return (
        f"{flags}: an instance needs {needed} yarn.io/gpu on one node, and the NodeManagers offer at "
        f"most {max(capacities)}; lower {'it' if needed > world else 'tp x pp'} or add GPUs to a node"
    )


def check_gpus(rm: ResourceManager, config: TarnConfig) -> None:
    """Refuse, before anything is uploaded or submitted, an instance larger than every node."""
    if config.gpus == 0:
        return
    nodes = [node for node in rm.nodes() if node.get("state") not in _GONE]
    problem = gpu_shortfall(config, [node_gpus(node) for node in nodes])
    if problem:
        raise ConfigError(problem)


def apply(cluster: Cluster, name: str, steps: Plan, desired: Desired | None, options: Options) -> JSON | None:
    """Carry out ``steps``; the service as the RM shows it afterwards (None once destroyed)."""
    rm = cluster.rm
    if steps.destroy:
        destroy(cluster, name)
        return None
    if steps.stop:
        rm.set_state(name, "STOPPED")
        if options.wait:
            return until(rm, name, stopped, f"service {name}: STOPPED", options)
        return rm.service(name)
    if steps.create:
        assert desired is not None
        create(cluster, desired, options)
        if options.wait:
            wait_ready(rm, name, desired.config.min_instances, options)
    if steps.start:
        rm.set_state(name, "STARTED")
    if steps.upgrade or steps.resume_upgrade:
        assert desired is not None
        if steps.upgrade:
            # YARN refuses an upgrade while a container is being replaced (state STARTED): wait
            # for that to finish rather than fail a deploy that is merely early.
            check_gpus(rm, desired.config)
            until(
                rm, name, stable, f"service {name}: STABLE, as YARN upgrades only a stable service", options
            )
            upload(cluster, desired)
            try:
                rm.initiate_upgrade(desired.spec)
            except ClusterError as exc:
                if "upgrade is disabled" not in str(exc):
                    raise
                raise ClusterError(
                    f"{exc} A spec change is applied by a YARN service upgrade: set "
                    "yarn.service.upgrade.enabled=true in the RM's yarn-site.xml (role "
                    "tarn.yarn.yarn_resourcemanager does) and restart the RM"
                ) from exc
            options.log(f"service {name}: upgrade to version {desired.spec['version']} initiated")
        rolling_upgrade(rm, name, str(desired.spec["version"]), options)
    if steps.flex_to is not None:
        flex(rm, name, steps.flex_to)
        if options.wait:
            wait_ready(rm, name, steps.flex_to, options)
    return rm.service(name)


def upload(cluster: Cluster, desired: Desired) -> None:
    cluster.hdfs.mkdirs(desired.directory, permission="700")
    for path, data in desired.uploads.items():
        cluster.hdfs.write(path, data, permission="600")


def create(cluster: Cluster, desired: Desired, options: Options) -> JSON:
    """Upload the service's files, then submit it; a refused submission removes the files again."""
    name = desired.config.service_name
    if cluster.rm.service(name) is not None:
        raise ClusterError(
            f"--service-name: service {name!r} already exists; use `tarn scale`, or `tarn destroy` it first"
        )
    check_gpus(cluster.rm, desired.config)
    # Kerberos: the AM's own configuration, so that it outlives the submission's HDFS token
    rm_conf = cluster.rm.configuration() if cluster.identity else None
    if rm_conf is not None and (warning := ha_token_warning(client_site(cluster.conf_dir) | rm_conf, name)):
        options.warn(warning)
    try:
        upload(cluster, desired)
        if rm_conf is not None:
            cluster.hdfs.write(*am_conf_file(rm_conf, desired.user, name), permission="644")
        return cluster.rm.create_service(desired.spec)
    except (TarnError, OSError):
        cluster.hdfs.delete(desired.directory, recursive=True)  # nothing half-deployed
        if rm_conf is not None:
            cluster.hdfs.delete(yarn_service_dir(rm_conf, desired.user, name), recursive=True)
        raise


def existing(rm: ResourceManager, name: str) -> JSON:
    service = rm.service(name)
    if service is None:
        raise ClusterError(f"--service-name: no service {name!r}; submit it with `tarn submit`")
    return service


def flex(rm: ResourceManager, name: str, count: int) -> JSON:
    check_count(count)
    return rm.flex(name, TRITON, count)


def stop(rm: ResourceManager, name: str) -> JSON:
    existing(rm, name)
    return rm.set_state(name, "STOPPED")


def start(rm: ResourceManager, name: str) -> str | None:
    """Start a stopped service again (YARN submits a new application from the kept definition);
    None when it was not stopped, else YARN's answer."""
    if not stopped(existing(rm, name)):
        return None
    return str(rm.set_state(name, "STARTED").get("diagnostics") or "started")


def destroy(cluster: Cluster, name: str) -> bool:
    """Remove the service, its HDFS files and its discovery entries (which outlive its controller
    on purpose: tarn.service.registrations); False when there was nothing to remove. What could
    not be withdrawn is logged as a warning with the way to remove it."""
    found = cluster.rm.service(name)
    removed = cluster.rm.destroy(name)
    deleted = cluster.hdfs.delete(artifact_dir(cluster.user, name), recursive=True)
    config = _deployed_config(found)
    if config is not None and (left := withdraw(config, cluster.identity)):
        log.warning("%s", left)
    return removed or deleted


def _deployed_config(service: JSON | None) -> TarnConfig | None:
    """The settings a TARN service was deployed with; None for no service or another kind."""
    if service is None:
        return None
    try:
        return read_back(service).config
    except (ClusterError, KeyError, TypeError, ValueError):
        return None
