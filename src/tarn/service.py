"""The TARN service's life cycle: one piece of logic behind the `tarn` CLI and the Ansible modules.

* :func:`desired_service`: the spec and the files a config asks for (pure but for building the
  zipapps). Each component's environment carries ``TARN_CODE_DIGEST``, the digest of the zipapp
  it runs, and the spec's ``version`` is TARN's version plus a digest of the whole spec, so new
  TARN code is a spec change of the component that runs it.
* :func:`plan`: desired state vs the RM's service JSON → what to do (pure; runtime fields such as
  containers, states, ids, the remaining lifetime and the instance count chosen by the
  controller are ignored). A change of the Triton instance count only flexes; any other change
  upgrades (YARN service upgrade), and only the components that changed.
* :func:`apply`: does it: create (upload, then submit; a refused submission removes the files),
  flex, rolling upgrade (each Triton instance drained through the controller first, upgraded,
  READY again before the next), start, stop, destroy (service and HDFS files).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlparse

from tarn import __version__, payload
from tarn.clients.controller import Controller
from tarn.clients.resourcemanager import ResourceManager, spnego
from tarn.clients.webhdfs import WebHdfs
from tarn.controller.decide import Candidate, pick_victims
from tarn.errors import ClusterError, ConfigError, TarnError
from tarn.hadoop_conf import client_conf_dir, read_properties, resource_manager_urls, webhdfs_url
from tarn.spec import CONTROLLER, TRITON, Artifacts, build_service_spec, component_of, triton_count
from tarn.stdlib.api_token import Secret, read_token
from tarn.stdlib.config import TarnConfig

JSON = dict[str, Any]
State = Literal["present", "started", "stopped", "absent"]
STATES: tuple[State, ...] = ("present", "started", "stopped", "absent")
COMPONENTS = (TRITON, CONTROLLER)  # upgrade order: Triton while the controller can still drain
STOPPED_STATES = frozenset({"STOPPED", "FAILED", "SUCCEEDED"})
UPGRADING_STATES = frozenset({"UPGRADING", "UPGRADING_AUTO_FINALIZE", "EXPRESS_UPGRADING"})
# Hadoop's own variable for a credential store's password (its default password is "none").
STORE_PASSWORD_ENV = "HADOOP_CREDSTORE_PASSWORD"  # noqa: S105 - the name of a variable
# Per-component keys whose values are maps the user fills (compared whole, keys added or removed).
_MAPS = frozenset({"env", "properties", "additional"})
# Keys the RM adds or maintains while the service runs: never part of "what was asked for".
_RUNTIME = frozenset(
    {"id", "state", "containers", "launch_time", "lifetime", "number_of_containers",
     "number_of_running_containers", "decommissioned_instances", "description"}
)  # fmt: skip

CODE_DIGEST_ENV = "TARN_CODE_DIGEST"
Log = Callable[[str], None]


# ---- the cluster


class Cluster:
    """The RM and WebHDFS of one user. WebHDFS is resolved on first use: commands that only talk
    to the RM (status, instances, scale, stop) must not need the NameNode's address."""

    def __init__(
        self,
        rm: ResourceManager,
        user: str,
        hdfs: WebHdfs | None = None,
        make_hdfs: Callable[[], WebHdfs] | None = None,
    ) -> None:
        self.rm = rm
        self.user = user
        self._hdfs = hdfs
        self._make_hdfs = make_hdfs

    @property
    def hdfs(self) -> WebHdfs:
        if self._hdfs is None:
            if self._make_hdfs is None:
                raise ConfigError("--webhdfs-url: needed for this command; give the NameNode's HTTP URL")
            self._hdfs = self._make_hdfs()
        return self._hdfs


def connect(
    *,
    user: str | None,
    rm_urls: list[str] | None = None,
    webhdfs: str | None = None,
    conf_dir: str | None = None,
    kerberos: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Cluster:
    """The RM (every URL, for HA) and WebHDFS, from explicit URLs or the Hadoop client configuration."""
    env = environ or {}
    name = user or env.get("HADOOP_USER_NAME") or env.get("USER")
    if not name:
        raise ConfigError("--user: no YARN user given; pass --user NAME or set HADOOP_USER_NAME")
    conf = client_conf_dir(conf_dir, env)
    auth = spnego() if kerberos else None
    urls = resource_manager_urls(rm_urls, conf)

    def web_hdfs() -> WebHdfs:
        url = webhdfs or webhdfs_url(
            read_properties(conf / "hdfs-site.xml"), read_properties(conf / "core-site.xml")
        )
        return WebHdfs(url, user=name, auth=auth)

    return Cluster(rm=ResourceManager(urls, user=name, auth=auth), user=name, make_hdfs=web_hdfs)


# ---- what a config asks for


def artifact_dir(user: str, service_name: str) -> str:
    """Where a service's files live on HDFS: private to the service user."""
    return f"/user/{user}/.tarn/{service_name}"


def planned_artifacts(
    config: TarnConfig, user: str, environ: Mapping[str, str], rm_urls: tuple[str, ...] = ()
) -> Artifacts:
    """hdfs:/// URIs (the cluster's default file system) of the files a deployment uploads, and
    the RM URLs the controller is given."""
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
        rm_urls=rm_urls,
    )


@dataclass(frozen=True)
class Desired:
    """A service as a config asks for it: the spec, and the files to upload first (path → bytes)."""

    config: TarnConfig
    user: str
    spec: JSON
    uploads: dict[str, bytes] = field(repr=False)  # holds the token: never printed

    @property
    def directory(self) -> str:
        return artifact_dir(self.user, self.config.service_name)


def desired_service(
    config: TarnConfig, user: str, environ: Mapping[str, str], rm_urls: tuple[str, ...] = ()
) -> Desired:
    """Validate ``config`` and build its spec and files; ConfigError names the flag at fault."""
    artifacts = planned_artifacts(config, user, environ, rm_urls)
    spec = build_service_spec(config, artifacts)  # validates everything before any contact
    code = {
        _hdfs_path(artifacts.payload): payload.controller_zipapp(),
        _hdfs_path(artifacts.launcher): payload.launcher_zipapp(),
    }
    uploads = dict(code)
    if artifacts.token_file is not None:
        uploads[_hdfs_path(artifacts.token_file)] = _token_bytes(config)
    if artifacts.secrets_password_file is not None:
        uploads[_hdfs_path(artifacts.secrets_password_file)] = environ[STORE_PASSWORD_ENV].encode()
    # Each component carries the digest of the code it runs: new TARN code relaunches only the
    # component whose code changed (the controller's changes often, the launcher's seldom).
    for component, path in ((CONTROLLER, artifacts.payload), (TRITON, artifacts.launcher)):
        env = (component_of(spec, component) or {}).setdefault("configuration", {}).setdefault("env", {})
        env[CODE_DIGEST_ENV] = hashlib.sha256(code[_hdfs_path(path)]).hexdigest()[:16]
    spec["version"] = spec_version(spec)
    return Desired(config=config, user=user, spec=spec, uploads=uploads)


def spec_version(spec: JSON) -> str:
    """TARN's version + a digest of the spec less runtime fields (code digests included, no secret)."""
    digest = hashlib.sha256(json.dumps(comparable(spec), sort_keys=True).encode())
    return f"{__version__}-{digest.hexdigest()[:12]}"


def _hdfs_path(uri: str) -> str:
    return uri.removeprefix("hdfs://")


def _token_bytes(config: TarnConfig) -> bytes:
    token = read_token(config.token, config.token_file)
    if token is None:
        raise ValueError("no token to upload")  # planned_artifacts plans a token file only with one
    return token.reveal().encode()


# ---- comparing (pure)


def comparable(spec: JSON, template: JSON | None = None) -> JSON:
    """The part of a service spec a user asks for: runtime fields dropped, components keyed by name.

    With ``template`` (the desired spec) only the keys the template has are kept, except maps
    (env, properties, …) which are compared whole, so a removed variable shows as a change.
    """
    view: JSON = {}
    for key, value in spec.items():
        if key in _RUNTIME or key == "version" or (template is not None and key not in template):
            continue
        if key == "components":
            wanted = {c["name"]: c for c in (template or {}).get("components", [])}
            view[key] = {
                c["name"]: _project(c, wanted.get(c["name"]) if template is not None else None, False)
                for c in value
                if template is None or c["name"] in wanted
            }
        else:
            view[key] = _project(value, template.get(key) if template is not None else None, key in _MAPS)
    return view


def _project(value: Any, template: Any, whole: bool = False) -> Any:
    """``value`` cut to the shape of ``template``; a ``whole`` map keeps every key (values still cut)."""
    if isinstance(value, dict):
        shape = template if isinstance(template, dict) else {}
        return {
            k: _project(v, shape.get(k), whole=k in _MAPS)
            for k, v in value.items()
            if k not in _RUNTIME and (whole or template is None or k in shape)
        }
    if isinstance(value, list):
        items = (
            template if isinstance(template, list) and len(template) == len(value) else [None] * len(value)
        )
        return [_project(v, t) for v, t in zip(value, items, strict=True)]
    if isinstance(template, str) and not isinstance(value, str) and value is not None:
        return str(value)  # the RM echoes some strings (memory) as numbers, or the reverse
    return value


@dataclass(frozen=True)
class Plan:
    """What :func:`apply` will do; ``before``/``after`` are the comparable views for a diff."""

    create: bool = False
    upgrade: tuple[str, ...] = ()  # components whose instances are relaunched, in order
    resume_upgrade: bool = False  # an earlier upgrade is still going: finish it
    flex_to: int | None = None
    start: bool = False
    stop: bool = False
    destroy: bool = False
    before: JSON | None = None
    after: JSON | None = None

    @property
    def changed(self) -> bool:
        return bool(
            self.create or self.upgrade or self.resume_upgrade or self.flex_to is not None
            or self.start or self.stop or self.destroy
        )  # fmt: skip

    def actions(self) -> list[str]:
        """The plan in words, for module output and the CLI."""
        steps = ["create"] if self.create else []
        steps += [f"upgrade {c}" for c in self.upgrade]
        steps += ["finish the upgrade in progress"] if self.resume_upgrade else []
        steps += [f"flex triton to {self.flex_to}"] if self.flex_to is not None else []
        steps += [word for word, on in (("start", self.start), ("stop", self.stop)) if on]
        return steps + (["destroy"] if self.destroy else [])


def view(service: JSON | None, template: JSON | None = None) -> JSON | None:
    """A service for a diff: the comparable spec, the version and the Triton instance count."""
    if service is None:
        return None
    shown = comparable(service, template)
    shown["version"] = service.get("version")
    shown["triton_instances"] = triton_count(service)
    shown["state"] = service.get("state")
    return shown


def plan(
    state: State, actual: JSON | None, desired: JSON | None = None, bounds: tuple[int, int] | None = None
) -> Plan:
    """What it takes to bring ``actual`` (the RM's service, None when absent) to ``state``.

    ``desired`` (the spec) and ``bounds`` (min, max Triton instances) are needed for present and
    started. The instance count only changes when it is outside the bounds: in between, it is the
    controller's to choose.
    """
    if state == "absent":
        return Plan(destroy=actual is not None, before=view(actual), after=None)
    if state == "stopped":
        stop = actual is not None and str(actual.get("state")) not in STOPPED_STATES
        after = None if actual is None else {**(view(actual) or {}), "state": "STOPPED"}
        return Plan(stop=stop, before=view(actual), after=after)
    if desired is None or bounds is None:
        raise ValueError(f"state {state}: the desired spec and the instance bounds are needed")
    low, high = bounds
    if actual is None:
        after = view(desired) or {}
        after["state"] = "STARTED"
        return Plan(create=True, before=None, after=after)
    before = view(actual, desired) or {}
    mine = comparable(desired)
    theirs = comparable(actual, desired)
    changed = tuple(
        c for c in COMPONENTS if mine.get("components", {}).get(c) != theirs.get("components", {}).get(c)
    )
    service_level = {k: v for k, v in mine.items() if k != "components"} != {
        k: v for k, v in theirs.items() if k != "components"
    }
    if service_level and not changed:
        changed = COMPONENTS  # service-wide settings changed: relaunch all
    # The versions alone may differ (a spec the RM echoed back, e.g. after tarn_scale changed the
    # bounds to what is asked now): nothing to relaunch for that.
    running = str(actual.get("state"))
    count = triton_count(actual)
    target = min(max(count, low), high)
    upgrading = running in UPGRADING_STATES
    if changed and running in STOPPED_STATES:
        raise ClusterError(
            f"service {desired['name']} is {running}: a spec change is applied by a rolling upgrade, "
            "which needs it running; start it first (state started), then apply the change"
        )
    after = {**comparable(desired), "version": desired.get("version"), "triton_instances": target}
    after["state"] = "STARTED" if state == "started" and running in STOPPED_STATES else running
    return Plan(
        upgrade=() if upgrading else changed,
        resume_upgrade=upgrading,
        flex_to=target if target != count else None,
        start=state == "started" and running in STOPPED_STATES,
        before=before,
        after=after,
    )


# ---- doing it


@dataclass(frozen=True)
class Options:
    """How :func:`apply` acts: waits, drains, reports progress."""

    wait: bool = True
    timeout: float = 600.0  # for each wait (submission to READY, one instance's upgrade, …)
    drain_timeout: float = 300.0  # HTTP timeout of a drain call; the controller bounds the wait itself
    token: Secret | None = None  # the controller's API token, to drain instances
    controller_url: str | None = None  # default: the controller container's host and --am-port
    log: Log = field(default=lambda text: None)
    poll: float = 2.0


def apply(cluster: Cluster, name: str, steps: Plan, desired: Desired | None, options: Options) -> JSON | None:
    """Carry out ``steps``; the service as the RM shows it afterwards (None once destroyed)."""
    rm = cluster.rm
    if steps.destroy:
        destroy(cluster, name)
        return None
    if steps.stop:
        rm.set_state(name, "STOPPED")
        if options.wait:
            return _until(
                lambda: _if(rm.service(name), lambda s: str(s.get("state")) in STOPPED_STATES),
                options,
                f"service {name}: STOPPED",
            )
        return rm.service(name)
    if steps.create:
        assert desired is not None
        create(cluster, desired)
        if options.wait:
            wait_ready(rm, name, desired.config.min_instances, options)
    if steps.start:
        rm.set_state(name, "STARTED")
    if steps.upgrade or steps.resume_upgrade:
        assert desired is not None
        if steps.upgrade:
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


def create(cluster: Cluster, desired: Desired) -> JSON:
    """Upload the service's files, then submit it; a refused submission removes the files again."""
    name = desired.config.service_name
    if cluster.rm.service(name) is not None:
        raise ClusterError(
            f"--service-name: service {name!r} already exists; use `tarn scale`, or `tarn destroy` it first"
        )
    try:
        upload(cluster, desired)
        return cluster.rm.create_service(desired.spec)
    except (TarnError, OSError):
        cluster.hdfs.delete(desired.directory, recursive=True)  # nothing half-deployed
        raise


def spec_of(service: JSON) -> JSON:
    """The RM's service JSON less its runtime fields: a spec to upgrade to, once changed."""
    spec: JSON = {k: _project(v, None) for k, v in service.items() if k not in _RUNTIME}
    spec["components"] = [
        {k: _project(v, None) for k, v in c.items() if k not in _RUNTIME} | {"number_of_containers": n}
        for c, n in ((c, c.get("number_of_containers", 0)) for c in service.get("components", []))
    ]
    return spec


def with_bounds(service: JSON, low: int | None, high: int | None) -> tuple[JSON, tuple[int, int]]:
    """The running service's spec with new autoscaling bounds in the controller's flags (pure):
    (the spec to upgrade to, the new (min, max)). The rest of the spec is kept as the RM has it."""
    spec = spec_of(service)
    controller = component_of(spec, CONTROLLER)
    if controller is None:
        raise ClusterError(f"service {service.get('name')}: no controller component; is it a TARN service?")
    words = shlex.split(str(controller["launch_command"]))
    current = {flag: int(_flag_value(words, flag) or 0) for flag in ("--min-instances", "--max-instances")}
    wanted = {
        "--min-instances": current["--min-instances"] if low is None else low,
        "--max-instances": current["--max-instances"] if high is None else high,
    }
    if wanted["--min-instances"] < 0:
        raise ConfigError(f"--min-instances: {wanted['--min-instances']} is negative; give 0 or more")
    if wanted["--max-instances"] < max(1, wanted["--min-instances"]):
        raise ConfigError(
            f"--max-instances: {wanted['--max-instances']} is below 1 or --min-instances; raise it"
        )
    for flag, value in wanted.items():
        words[words.index(flag) + 1] = str(value)
    controller["launch_command"] = shlex.join(words)
    spec["version"] = spec_version(spec)
    return spec, (wanted["--min-instances"], wanted["--max-instances"])


def _flag_value(words: list[str], flag: str) -> str | None:
    return words[words.index(flag) + 1] if flag in words[:-1] else None


def existing(rm: ResourceManager, name: str) -> JSON:
    service = rm.service(name)
    if service is None:
        raise ClusterError(f"--service-name: no service {name!r}; submit it with `tarn submit`")
    return service


def flex(rm: ResourceManager, name: str, count: int) -> JSON:
    if count < 0:
        raise ConfigError(f"count: {count} is negative; give 0 or more instances")
    return rm.flex(name, TRITON, count)


def scale(rm: ResourceManager, name: str, count: int, options: Options) -> str:
    """Set the number of Triton instances. Up: flex. Down: the same victims the controller would
    pick (not ready, least loaded, newest) are drained through the controller, then exactly those
    are decommissioned, so no request in flight is cut. Without a reachable controller: a plain
    flex (YARN picks the victims), said in the answer."""
    if count < 0:
        raise ConfigError(f"count: {count} is negative; give 0 or more instances")
    found = existing(rm, name)
    current = triton_count(found)
    if count >= current:
        return str(rm.flex(name, TRITON, count).get("diagnostics", "ok"))
    url = options.controller_url or controller_url(found)
    try:
        if url is None:
            raise ClusterError("no controller container")
        listing = Controller(url, options.token).instances()["instances"]
    except TarnError as exc:
        rm.flex(name, TRITON, count)
        return f"flexed to {count} without draining (controller unavailable: {exc})"
    candidates = [Candidate(str(i["instance"]), i.get("state") == "READY", i.get("load")) for i in listing]
    victims = pick_victims(candidates, current - count)
    controller = Controller(str(url), options.token)
    for instance in victims:
        answer = controller.drain(instance, timeout=options.drain_timeout)
        options.log(f"{instance} drained" if answer.get("drained") else f"{instance} still busy; removing it")
    rm.decommission(name, TRITON, victims)
    return f"decommissioned {', '.join(victims)} after draining them"


def stop(rm: ResourceManager, name: str) -> JSON:
    existing(rm, name)
    return rm.set_state(name, "STOPPED")


def destroy(cluster: Cluster, name: str) -> bool:
    """Remove the service and its HDFS files; False when there was neither."""
    removed = cluster.rm.destroy(name)
    deleted = cluster.hdfs.delete(artifact_dir(cluster.user, name), recursive=True)
    return removed or deleted


def instances_of(service: JSON) -> list[JSON]:
    """The Triton containers of a service JSON from the RM, in instance order."""
    triton: JSON = component_of(service, TRITON) or {}
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


def summary(service: JSON) -> JSON:
    """The service's state and, per component, the instances wanted and running."""
    return {
        "name": service["name"],
        "state": service.get("state"),
        "id": service.get("id"),
        "version": service.get("version"),
        "components": {
            c["name"]: {"wanted": c.get("number_of_containers"), "running": len(c.get("containers", []))}
            for c in service.get("components", [])
            if c["name"] in (CONTROLLER, TRITON)
        },
    }


def controller_url(service: JSON) -> str | None:
    """http://<controller host>:<--am-port>, from the controller's container and readiness check."""
    component = component_of(service, CONTROLLER) or {}
    containers = component.get("containers") or []
    probe = str(((component.get("readiness_check") or {}).get("properties") or {}).get("url", ""))
    port = urlparse(probe.replace("${THIS_HOST}", "localhost")).port
    if not containers or port is None:
        return None
    host = containers[0].get("hostname") or containers[0].get("ip")
    return f"http://{host}:{port}" if host else None


# ---- waiting and the rolling upgrade


def wait_ready(rm: ResourceManager, name: str, count: int, options: Options) -> JSON:
    """Until ``count`` Triton instances and the controller are READY."""

    def ready() -> JSON | None:
        service = rm.service(name)
        if service is None:
            return None
        triton = [r for r in instances_of(service) if r["state"] == "READY"]
        controller = (component_of(service, CONTROLLER) or {}).get("containers") or []
        if len(triton) >= count and all(c.get("state") == "READY" for c in controller) and controller:
            return service
        return None

    return _until(ready, options, f"service {name}: {count} READY Triton instances and the controller")


def rolling_upgrade(rm: ResourceManager, name: str, version: str, options: Options) -> None:
    """Upgrade the instances YARN marks NEEDS_UPGRADE one at a time, Triton first, each drained
    through the controller before and READY again after; then wait for YARN to finalize."""
    service = _until(
        lambda: _if(rm.service(name), lambda s: str(s.get("state")) in UPGRADING_STATES or _pending(s)),
        options,
        f"service {name}: the upgrade to start",
    )
    for component in COMPONENTS:
        while True:
            pending = [c for c in _containers(service, component) if c.get("state") == "NEEDS_UPGRADE"]
            if not pending:
                break
            instance = str(
                sorted(pending, key=lambda c: str(c["component_instance_name"]))[0]["component_instance_name"]
            )
            drained = _drain(service, component, instance, options)
            options.log(f"service {name}: upgrading {instance}")
            rm.upgrade_instance(name, component, instance)
            service = _until(
                _instance_ready(rm, name, component, instance),
                options,
                f"service {name}: {instance} READY after its upgrade",
            )
            if drained is not None:
                drained.undrain(instance)  # also cleared by the restart; say so explicitly
    _until(
        lambda: _if(rm.service(name), lambda s: s.get("version") == version and s.get("state") == "STABLE"),
        options,
        f"service {name}: YARN to finalize the upgrade to {version}",
    )


def _instance_ready(
    rm: ResourceManager, name: str, component: str, instance: str
) -> Callable[[], JSON | None]:
    return lambda: _if(rm.service(name), lambda s: _instance_state(s, component, instance) == "READY")


def _drain(service: JSON, component: str, instance: str, options: Options) -> Controller | None:
    if component != TRITON:
        return None
    url = options.controller_url or controller_url(service)
    if url is None:
        raise ClusterError(f"{instance}: no controller to drain it through; is the controller running?")
    controller = Controller(url, options.token)
    started = time.monotonic()
    answer = controller.drain(instance, timeout=options.drain_timeout)
    took = time.monotonic() - started
    if answer.get("drained"):
        options.log(f"{instance} drained in {took:.1f} s")
    else:  # the controller's bound ran out: requests still in flight may fail
        options.log(f"warning: {instance} still busy after {took:.1f} s of draining; upgrading it anyway")
    return controller


def _pending(service: JSON) -> bool:
    return any(c.get("state") == "NEEDS_UPGRADE" for n in COMPONENTS for c in _containers(service, n))


def _containers(service: JSON, component: str) -> list[JSON]:
    return list((component_of(service, component) or {}).get("containers") or [])


def _instance_state(service: JSON, component: str, instance: str) -> str | None:
    found = [c for c in _containers(service, component) if c.get("component_instance_name") == instance]
    return str(found[0].get("state")) if found else None


def _if(service: JSON | None, test: Callable[[JSON], bool]) -> JSON | None:
    return service if service is not None and test(service) else None


def _until(probe: Callable[[], JSON | None], options: Options, what: str) -> JSON:
    deadline = time.monotonic() + options.timeout
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {options.timeout:.0f} s waiting for {what}")
        time.sleep(options.poll)
