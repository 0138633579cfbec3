"""The declaration of the TARN options: one :class:`TarnConfig` field per option, its :class:`Flag`
(the flags, help, group, environment fallbacks, whether the launcher and the modules take it) as the
field's metadata.

Everything else reads this: the parser and the argv (:mod:`tarn.stdlib.config.argv`), the checks
(:mod:`tarn.stdlib.config.checks`, which name each flag with :func:`cli_flag`), the Ansible modules'
argument spec and doc fragment (:mod:`tarn.ansible_options`), the controller's policy and the role's
defaults (:func:`default_of`; ``tests/unit/roles/test_tarn.py`` checks the role's copies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, Literal

from tarn.stdlib.api_token import Secret
from tarn.stdlib.openai.admission import POLICIES, Policy

Runtime = Literal["docker", "process"]
RUNTIMES: tuple[Runtime, ...] = ("docker", "process")
MODEL_VERIFY_MODES = ("hdfs", "recompute")  # how staged bytes are checked (launcher/staging.py)
# What the autoscaler compares with its thresholds (tarn.controller.decide): the load (0..1, against
# --scale-up/--scale-down), or Triton's pending requests or the OpenAI fronts' streams in flight,
# each a mean per ready instance (against --scale-up-at/--scale-down-at).
ScaleSignal = Literal["load", "queue", "streams"]
SCALE_SIGNALS: tuple[ScaleSignal, ...] = ("load", "queue", "streams")
# How long an instance may take to become READY: a deploy's wait (tarn.service.options) and the
# controller's bound before it replaces an instance that stays unready (--replace-unready-after).
READY_BUDGET_S = 600

# value: --flag VALUE; switch: --flag sets True; negated: --no-x sets False; toggle: --x / --no-x;
# repeat: --flag VALUE, repeatable (a tuple; comma-separated lists allowed where noted).
Form = Literal["value", "switch", "negated", "toggle", "repeat"]

GROUPS = (
    "what to serve",
    "YARN service",
    "ports and API",
    "each Triton instance",
    "placement",
    "scaling",
    "discovery and authorization",
    "Docker runtime",
)


@dataclass(frozen=True)
class Flag:
    """How one :class:`TarnConfig` field appears on the command line and as a module option."""

    names: tuple[str, ...]  # names[0] is the flag TARN writes; the others are accepted aliases
    help: str
    group: str
    form: Form = "value"
    type: Callable[[str], Any] = str  # of one command-line word
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    env: tuple[str, ...] = ()  # environment fallbacks, first set one wins
    module: bool = True  # an option of the tarn.yarn service modules (same name as the flag)
    doc: tuple[str, ...] = ()  # the module documentation, when it says more than ``help``
    launcher: bool = False  # the Triton launcher takes it too

    @property
    def flag(self) -> str:
        return self.names[0]

    @property
    def module_name(self) -> str:
        """The Ansible option: the flag in snake case (``--no-anti-affinity`` -> anti_affinity)."""
        return self.flag.removeprefix("--").removeprefix("no-").replace("-", "_")


def option(default: Any, *names: str, hidden: bool = False, **flag: Any) -> Any:
    """A :class:`TarnConfig` field declared with its flag (``hidden``: kept out of repr)."""
    # A field specifier (dataclass_transform style), used only inside TarnConfig's body.
    return field(default=default, repr=not hidden, metadata={"flag": Flag(names, **flag)})  # pylint: disable=invalid-field-call


@dataclass(frozen=True)
class InstancePorts:
    http: int
    grpc: int
    metrics: int
    openai: int | None = None  # the OpenAI front's, when it runs


@dataclass(frozen=True, kw_only=True)
class TarnConfig:
    """One TARN service. Build it with :func:`parse_config`; check a hand-built one with :func:`validate`."""

    # what to serve
    model_repository: str = option(
        "", "--model-repository", group="what to serve", launcher=True,
        help="hdfs:///path (staged to the container) or /path (NFS)",
        doc=("Triton model repository: C(hdfs:///path) (staged into each container) or an absolute "
             "C(/path) (an HDFS NFS gateway mount on every NodeManager).",
             "Required with O(state=present) and O(state=started)."),
    )  # fmt: skip
    model_cache_dir: str | None = option(
        None, "--model-cache-dir", group="what to serve", launcher=True,
        help="the node model cache, shared by every TARN service on a NodeManager (the yarn_nodemanager "
        "role's /var/lib/tarn/model-cache); default: one per application",
        doc=("The NodeManagers' model cache, shared by every TARN instance and service on a node.",
             "The C(yarn_nodemanager) role makes C(/var/lib/tarn/model-cache), an allowed Docker mount.",
             "Default: a cache per application in its YARN local directory."),
    )  # fmt: skip
    model_cache_max_gib: float = option(
        100.0, "--model-cache-max-gib", group="what to serve", type=float, launcher=True,
        help="bound of the model cache in GiB (least recently used files go first; files in use never)",
    )  # fmt: skip
    model_verify: str = option(
        "hdfs", "--model-verify", group="what to serve", choices=MODEL_VERIFY_MODES, launcher=True,
        help="hdfs: trust the DataNode's checksum-verified read, check lengths; recompute: also "
        "recompute HDFS's file checksum here (CPU-bound, slower)",
        doc=("How staged bytes are checked.",
             "C(hdfs) (default): the DataNode checks each chunk's CRC as it serves WebHDFS; TARN, lengths.",
             "C(recompute): TARN also recomputes HDFS's file checksum on the node (slower)."),
    )  # fmt: skip
    image: str | None = option(
        None, "--image", group="what to serve", help="Triton Docker image (docker runtime)",
        doc=("Triton Docker image (C(--runtime docker)); required with the Docker runtime.",),
    )  # fmt: skip
    runtime: Runtime = option(
        "docker", "--runtime", group="what to serve", choices=RUNTIMES,
        help="docker (production) or process (tritonserver installed on the NodeManagers)",
        doc=("C(docker) (production) or C(process) (C(tritonserver) installed on the NodeManagers).",
             "CLI default C(docker)."),
    )  # fmt: skip
    python: str = option(
        "python3", "--python", group="what to serve",
        help="interpreter that runs the launcher and the controller in the containers",
    )  # fmt: skip
    # the YARN service
    service_name: str = option(
        "tarn", "--service-name", group="YARN service", module=False, help="YARN service name"
    )
    user: str | None = option(
        None, "--user", group="YARN service", module=False, env=("HADOOP_USER_NAME", "USER"),
        help="YARN user (default $HADOOP_USER_NAME, then $USER)",
    )  # fmt: skip
    queue: str = option("default", "--queue", group="YARN service", help="YARN queue")
    service_principal: str | None = option(
        None, "--service-principal", group="YARN service", launcher=True, metavar="PRINCIPAL",
        env=("TARN_SERVICE_PRINCIPAL",),
        help="the service's Kerberos principal on a secure cluster, e.g. tarn/_HOST@EXAMPLE.COM "
             "(default $TARN_SERVICE_PRINCIPAL)",
        doc=("The service's own Kerberos principal on a secure cluster (the spec's C(kerberos_principal)),",
             "e.g. C(tarn/_HOST@EXAMPLE.COM); C(_HOST) is each node's name.",
             "Default C($TARN_SERVICE_PRINCIPAL)."),
    )  # fmt: skip
    service_keytab: str | None = option(
        None, "--service-keytab", group="YARN service", launcher=True, metavar="PATH",
        env=("TARN_SERVICE_KEYTAB",),
        help="keytab of --service-principal, the same path on every NodeManager (file:// or a plain path; "
             "default $TARN_SERVICE_KEYTAB)",
    )  # fmt: skip
    lifetime: int | None = option(
        None, "--lifetime", group="YARN service", type=int,
        help="seconds before YARN stops the service (default never)",
        doc=("Seconds before YARN stops the service; unlimited when left out.",
             "Not compared with the running service (the RM reports the time left)."),
    )  # fmt: skip
    jar: str | None = option(
        None, "--jar", group="YARN service", module=False,
        help="accepted for compatibility with the Java client; ignored",
    )  # fmt: skip
    # ports and API
    port: int = option(
        8000, "--port", group="ports and API", type=int, launcher=True, help="Triton HTTP port"
    )
    grpc_port: int = option(
        8001, "--grpc-port", group="ports and API", type=int, launcher=True, help="Triton gRPC port"
    )
    metrics_port: int = option(
        8002, "--metrics-port", group="ports and API", type=int, launcher=True, help="Triton metrics port"
    )
    am_port: int = option(
        8888, "--am-port", group="ports and API", type=int, help="the controller's API port"
    )
    openai_port: int | None = option(
        None, "--openai-port", group="ports and API", type=int, launcher=True,
        help="port of the OpenAI-compatible front (/v1) beside each Triton instance; "
        "shifted by --port-stride like Triton's (default: no front)",
        doc=("Port of the OpenAI-compatible front (C(/v1/chat/completions), C(/v1/completions), "
             "C(/v1/models)) that the launcher runs beside each Triton instance.",
             "Shifted by O(port_stride) like Triton's ports. Left out: no front.",
             "Discovery carries it (C(openai_port) in each instance's znode):",
             "HAProxy routes C(/v1/) to it."),
    )  # fmt: skip
    openai_max_generations: int = option(
        0, "--openai-max-generations", group="ports and API", type=int, launcher=True, metavar="N",
        help="generations of a model at once per OpenAI front, the rest queued in --openai-admission's "
        "order (default 0: the model's own max_concurrent_generations parameter; neither: no queue)",
        doc=("Generations of a model at once per OpenAI front (its batch slots); the rest wait in",
             "O(openai_admission)'s order.",
             "C(0) (the default): the model's own C(max_concurrent_generations) parameter in its",
             "C(config.pbtxt); where it has none, nothing waits."),
    )  # fmt: skip
    openai_admission: Policy = option(
        "fair", "--openai-admission", group="ports and API", choices=POLICIES, launcher=True,
        help="order of the requests waiting for a slot: fair (priority bands, a fair share of the slots "
        "per user, weighted fair queuing) or fifo (first come, first served)",
        doc=("Order of the requests waiting for a generation slot at each OpenAI front.",
             "C(fair) (the default): a fair share of the slots for each active user and weighted fair",
             "queuing across users (docs/openai.md); C(fifo): first come, first served."),
    )  # fmt: skip
    address: str = option(
        "0.0.0.0",  # noqa: S104 - the seeds' bind address; Triton must be reachable
        "--address", group="ports and API", launcher=True, help="bind address",
    )  # fmt: skip
    token: Secret | None = option(
        None, "--token", group="ports and API", hidden=True, env=("TARN_TOKEN",),
        help="API token (or $TARN_TOKEN); sent as X-TARN-Token",
        doc=("API token of the controller, sent as C(X-TARN-Token). Uploaded to a private HDFS file, "
             "never put in the service spec.",
             "Also used to drain instances during a rolling upgrade."),
    )  # fmt: skip
    token_file: str | None = option(
        None, "--token-file", group="ports and API", help="a local file holding the API token",
        doc=("A local file holding the API token (instead of O(token)).",),
    )  # fmt: skip
    # each Triton instance
    tp: int = option(
        1, "--tp", "--tensor-parallelism", group="each Triton instance", type=int, launcher=True,
        help="tensor parallelism (GPUs per instance = tp x pp)",
    )  # fmt: skip
    pp: int = option(
        1, "--pp", "--pipeline-parallelism", group="each Triton instance", type=int, launcher=True,
        help="pipeline parallelism",
    )  # fmt: skip
    gpus_per_instance: int | None = option(
        None, "--gpus-per-instance", group="each Triton instance", type=int,
        help="yarn.io/gpu per instance: 0 (CPU only) or >= tp*pp (default tp*pp)",
        doc=("C(yarn.io/gpu) per Triton instance, C(0) for CPU only. Default tp x pp.",),
    )  # fmt: skip
    memory_mb: int = option(
        4096,
        "--memory-mb",
        group="each Triton instance",
        type=int,
        help="memory of each Triton container, MiB",
    )
    vcores: int = option(
        2, "--vcores", group="each Triton instance", type=int, help="vcores of each Triton container",
        doc=("vcores of each Triton container. CLI default C(2).",),
    )  # fmt: skip
    controller_memory_mb: int = option(
        1024, "--controller-memory-mb", group="each Triton instance", type=int,
        help="memory of the controller's container, MiB",
    )  # fmt: skip
    controller_vcores: int = option(
        1, "--controller-vcores", group="each Triton instance", type=int,
        help="vcores of the controller's container",
        doc=("vcores of the controller's container. CLI default C(1).",),
    )  # fmt: skip
    secrets: str | None = option(
        None, "--secrets", group="each Triton instance", launcher=True,
        help="JCEKS keystore: hdfs:///path or /path (huggingface.token, tarn.env.* become Triton's env)",
        doc=("JCEKS keystore, C(hdfs:///path) or C(/path): C(huggingface.token) and C(tarn.env.*) become "
             "Triton's environment.",),
    )  # fmt: skip
    env: tuple[tuple[str, str], ...] = option(
        (), "--env", group="each Triton instance", form="repeat", metavar="KEY=VALUE",
        help="environment of the Triton processes (repeat)",
        doc=("Environment of the Triton processes (the CLI's repeated C(--env KEY=VALUE)).",),
    )  # fmt: skip
    # placement
    placement_tag: str = option(
        "nvidia", "--placement-tag", group="placement", help="name of the anti-affinity constraint"
    )
    anti_affinity: bool = option(
        True, "--no-anti-affinity", group="placement", form="negated",
        help="let several instances share a node (needs --port-stride)",
        doc=("One Triton instance per node. CLI default C(true); C(false) needs O(port_stride).",),
    )  # fmt: skip
    port_stride: int = option(
        0, "--port-stride", group="placement", type=int, launcher=True,
        help="port offset per instance when instances share a node (instance i: port + i * stride)",
    )  # fmt: skip
    # scaling
    scale_up: float = option(
        0.8, "--scale-up", group="scaling", type=float, help="load above which the controller adds instances"
    )
    scale_down: float = option(
        0.2, "--scale-down", group="scaling", type=float, help="load below which the controller removes one"
    )
    scale_on: ScaleSignal = option(
        "load", "--scale-on", group="scaling", choices=SCALE_SIGNALS,
        help="what the autoscaler watches: load (0..1, against --scale-up/--scale-down); queue (Triton's "
        "pending requests) or streams (the OpenAI fronts' streams in flight; needs --openai-port), a mean "
        "per ready instance against --scale-up-at/--scale-down-at",
        doc=("What the autoscaler compares with its thresholds.",
             "C(load) (the default): the load (0..1) against O(scale_up) and O(scale_down).",
             "C(queue): Triton's pending requests, C(streams): the OpenAI fronts' streams in flight",
             "(needs O(openai_port)), each a mean per ready instance, against O(scale_up_at) and",
             "O(scale_down_at), which they require."),
    )  # fmt: skip
    scale_up_at: float | None = option(
        None, "--scale-up-at", group="scaling", type=float, metavar="N",
        help="with --scale-on queue or streams: the mean per ready instance above which the controller "
        "adds instances (required with them)",
        doc=("With O(scale_on=queue) or O(scale_on=streams): the mean pending requests or streams per",
             "ready instance above which the controller adds instances. Required with them."),
    )  # fmt: skip
    scale_down_at: float | None = option(
        None, "--scale-down-at", group="scaling", type=float, metavar="N",
        help="with --scale-on queue or streams: the mean per ready instance below which the controller "
        "removes one (required with them; 0: the signal never removes one)",
        doc=("With O(scale_on=queue) or O(scale_on=streams): the mean pending requests or streams per",
             "ready instance below which the controller removes one. Required with them;",
             "C(0): the signal never removes an instance (idleness still may)."),
    )  # fmt: skip
    min_instances: int = option(
        1, "--min-instances", group="scaling", type=int,
        help="fewest Triton instances (also the count a new service starts with)",
    )  # fmt: skip
    max_instances: int = option(4, "--max-instances", group="scaling", type=int, help="most Triton instances")
    scale_to_zero_after_s: int = option(
        0, "--scale-to-zero-after", group="scaling", type=int,
        help="seconds without a request after which the last instance goes (needs --min-instances 0; "
        "0: never); the activator holds requests until one is back",
        doc=("Seconds without a request after which the last Triton instance is drained and removed.",
             "Its GPUs go back to YARN. C(0) (the default): never. Needs O(min_instances=0).",
             "While no instance runs, the activator beside HAProxy holds requests and wakes the service."),
    )  # fmt: skip
    cooldown_ms: int = option(
        60000, "--cooldown", group="scaling", type=int, help="milliseconds between two scaling actions"
    )
    # the controller's loop (not in the seeds: their loop ran every 15-30 s and had no drain)
    tick_seconds: float = option(
        2.0, "--tick-seconds", group="scaling", type=float, help="the controller's loop period, seconds"
    )
    concurrency_per_instance: float = option(
        4.0, "--concurrency-per-instance", group="scaling", type=float,
        help="requests in flight per instance that count as full load",
    )  # fmt: skip
    drain_timeout_s: int = option(
        30, "--drain-timeout", group="scaling", type=int,
        help="seconds the controller waits for a draining instance's requests to finish",
    )  # fmt: skip
    replace_unready_after_s: int = option(
        READY_BUDGET_S, "--replace-unready-after", group="scaling", type=int,
        help="seconds an instance may stay unready (still starting, or no longer answering) before "
        "the controller replaces it (0: never); the new one has as long to start",
        doc=("Seconds a Triton instance may stay unready (still starting, or no longer answering)",
             "before the controller decommissions it so that YARN starts another. C(0): never.",
             "The new instance has as long to start. Default: as long as a deploy waits for READY.",
             "Never an instance the controller finds ready, nor one YARN finds READY where its check asks "
             "Triton (no O(port_stride))."),
    )  # fmt: skip
    # discovery and authorization
    zk_ensemble: str | None = option(
        None, "--zk-ensemble", group="discovery and authorization", metavar="HOST:PORT[,HOST:PORT…]",
        help="ZooKeeper the controller registers instances in",
    )  # fmt: skip
    zk_path: str = option(
        "/services/triton/instances", "--zk-path", group="discovery and authorization",
        help="ZooKeeper path of the instances",
    )  # fmt: skip
    ranger_service: str | None = option(
        None, "--ranger-service", "-rs", group="discovery and authorization", env=("RANGER_SERVICE",),
        help="Apache Ranger service whose policies authorize requests (or $RANGER_SERVICE); "
        "tarn submit needs --ranger-conf-dir with it",
    )  # fmt: skip
    ranger_app_id: str = option(
        "tarn", "--ranger-app-id", "-ra", group="discovery and authorization", env=("RANGER_APP_ID",),
        help="Ranger application id (or $RANGER_APP_ID)",
    )  # fmt: skip
    ranger_audit: bool = option(
        False, "--ranger-audit", "-raudit", group="discovery and authorization", form="toggle",
        env=("RANGER_AUDIT",), help="send audit events to Ranger (or $RANGER_AUDIT)",
    )  # fmt: skip
    ranger_conf_dir: str | None = option(
        None, "--ranger-conf-dir", group="discovery and authorization", metavar="DIR",
        help="directory holding ranger-triton-security.xml (and ranger-triton-audit.xml); "
        "tarn submit ships its ranger-triton-*.xml files to the controller",
        doc=("Local directory with the Ranger plugin's C(ranger-triton-security.xml) (Ranger Admin's URL, "
             "poll interval, cache directory).",
             "Its C(ranger-triton-*.xml) files are uploaded and localized into the controller's container.",
             "Required with O(ranger_service).",),
    )  # fmt: skip
    # Docker runtime
    docker_network: str = option("host", "--docker-network", group="Docker runtime", help="Docker network")
    docker_privileged: bool = option(
        False, "--docker-privileged", group="Docker runtime", form="switch",
        help="run the Triton containers privileged",
    )  # fmt: skip
    docker_delayed_removal: bool = option(
        False, "--docker-delayed-removal", group="Docker runtime", form="switch",
        help="keep stopped containers for debugging",
    )  # fmt: skip
    docker_mounts: tuple[str, ...] = option(
        (), "--docker-mounts", group="Docker runtime", form="repeat", metavar="SRC:DST[:ro|rw][,…]",
        help="Docker mounts /src:/dst[:ro|rw] (mode default ro; repeat or comma-separate)",
    )  # fmt: skip
    docker_ports: tuple[str, ...] = option(
        (), "--docker-ports", group="Docker runtime", form="repeat", metavar="[HOST:]CONTAINER[,…]",
        help="Docker port mappings [host:]container, bridge networks only",
    )  # fmt: skip
    container_executor_cfg: str | None = option(
        None, "--container-executor-cfg", group="Docker runtime", metavar="PATH",
        env=("TARN_CONTAINER_EXECUTOR_CFG",),
        help="the NodeManagers' container-executor.cfg (a copy where tarn runs): its [docker] rules are "
        "checked before a Docker service is submitted (default <conf-dir>/container-executor.cfg, "
        "$TARN_CONTAINER_EXECUTOR_CFG)",
        doc=("The NodeManagers' C(container-executor.cfg), or a copy where the module runs.",
             "Read with C(--runtime docker) only.",
             "Its C([docker]) rules are checked before anything is uploaded or submitted:",
             "the image's registry, the mounts, the network, the GPU runtime, privileged mode.",
             "What Hadoop's container-executor would refuse or silently drop fails the task,",
             "naming the option.",
             "Default C(container-executor.cfg) in the client configuration directory (O(conf_dir)),",
             "or C($TARN_CONTAINER_EXECUTOR_CFG)."),
    )  # fmt: skip

    @property
    def world_size(self) -> int:
        """Triton ranks of one instance: tp x pp."""
        return self.tp * self.pp

    @property
    def gpus(self) -> int:
        """yarn.io/gpu per Triton instance: tp x pp unless overridden."""
        return self.world_size if self.gpus_per_instance is None else self.gpus_per_instance

    @property
    def scale_thresholds(self) -> tuple[float, float]:
        """(up, down) in the unit of --scale-on: a load fraction, or pending requests or streams in
        flight per ready instance."""
        if self.scale_on == "load":
            return self.scale_up, self.scale_down
        if self.scale_up_at is None or self.scale_down_at is None:  # validate() refuses this
            raise ValueError(f"{cli_flag('scale_on')} {self.scale_on} needs {cli_flag('scale_up_at')} and "
                             f"{cli_flag('scale_down_at')}")  # fmt: skip
        return self.scale_up_at, self.scale_down_at

    @property
    def env_vars(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def shares_host_network(self) -> bool:
        """Instances on one node share its ports (process runtime, or Docker's host network)."""
        return self.runtime == "process" or self.docker_network == "host"

    def instance_ports(self, index: int) -> InstancePorts:
        """The ports of Triton instance ``index`` (its YARN component id): the one place of the stride."""
        shift = index * self.port_stride
        openai = None if self.openai_port is None else self.openai_port + shift
        return InstancePorts(self.port + shift, self.grpc_port + shift, self.metrics_port + shift, openai)

    @property
    def notes(self) -> tuple[str, ...]:
        """Things the user asked for that TARN accepts but does not use: to print, not to fail on."""
        notes: list[str] = []
        if self.jar is not None:
            notes.append(f"{cli_flag('jar')} is not needed and was ignored: TARN ships as a Python package")
        if self.runtime == "process":
            ignored = [
                cli_flag(name)
                for name, used in (
                    ("image", self.image is not None),
                    ("docker_privileged", self.docker_privileged),
                    ("docker_mounts", bool(self.docker_mounts)),
                    ("docker_ports", bool(self.docker_ports)),
                    ("container_executor_cfg", self.container_executor_cfg is not None),
                )
                if used
            ]
            if ignored:
                notes.append(f"{', '.join(ignored)} ignored with {cli_flag('runtime')} process")
        return tuple(notes)

    def redacted(self) -> dict[str, Any]:
        """A JSON-friendly view for /config, logs and --dry-run: the token shows as ``***``."""
        view: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, Secret):
                value = str(value)
            elif item.name == "env":
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            view[item.name] = value
        return view


def flag_of(item: Field[Any]) -> Flag:
    flag: Flag = item.metadata["flag"]
    return flag


OPTIONS: tuple[Field[Any], ...] = tuple(fields(TarnConfig))
LAUNCHER_OPTIONS: tuple[str, ...] = tuple(f.name for f in OPTIONS if flag_of(f).launcher)
_BY_NAME: dict[str, Field[Any]] = {f.name: f for f in OPTIONS}


def default_of(name: str) -> Any:
    """The declared default of option ``name`` (Policy and the launcher take theirs from here)."""
    item = next(f for f in OPTIONS if f.name == name)
    return None if item.default is MISSING else item.default


def cli_flag(name: str) -> str:
    """The flag TARN writes for option ``name`` (``min_instances`` -> ``--min-instances``): how the
    checks and notes name an option, so that its spelling lives in the declaration alone."""
    try:
        return flag_of(_BY_NAME[name]).flag
    except KeyError:
        raise KeyError(f"{name!r} is no TarnConfig option") from None
