"""A Docker service is checked against the NodeManagers' container-executor.cfg before anything is
uploaded or submitted (tarn.service.docker_policy), and each decision is held to the lab's stand-in
for Hadoop's container-executor: the cfg is the yarn_nodemanager role's own template, rendered; the
stand-in reads the docker command file the NodeManager would write for the spec TARN built. What
TARN accepts, the stand-in runs with every mount; what TARN refuses, the stand-in refuses with the
real exit code, or runs without its mounts."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tarn import cli
from tarn.errors import ConfigError
from tarn.service import desired_service
from tarn.service import docker_policy as dp
from tarn.spec import (
    CONTROLLER,
    ENV_IMAGE,
    ENV_MOUNTS,
    ENV_NETWORK,
    ENV_PORTS,
    ENV_PRIVILEGED,
    TRITON,
    Artifacts,
    build_service_spec,
    component_of,
)
from tarn.stdlib.config import TarnConfig, parse_config
from tests.support.container_executor import stand_in
from tests.support.loopback import QuietHandler, serve, url
from tests.support.roles import container_executor_cfg

ce = stand_in()

ARTIFACTS = Artifacts(payload="hdfs:///a/tarn.pyz", launcher="hdfs:///a/tarn-launcher.pyz")
IMAGE = "nvcr.io/nvidia/tritonserver:24.08-py3"
BASE = ["--model-repository", "hdfs:///user/tarn/models", "--image", IMAGE, "--user", "tarn",
        "--model-cache-dir", "/var/lib/tarn/model-cache"]  # fmt: skip
# A NodeManager as site.yml makes it: Docker runtime, GPUs, the HDFS NFS mount.
NODE = {"yarn_nodemanager_runtime": "docker", "groups": {"hdfs_nfs_mount": ["worker1"]}}
CID = "container_e17_1410901177871_0001_01_000005"
WORKDIR = "/var/lib/hadoop/yarn/local/usercache/nobody/appcache/application_1410901177871_0001/" + CID
CFG_PATH = "/opt/hadoop/etc/hadoop/container-executor.cfg"
ROLE_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID",
                     "SETUID", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL",
                     "AUDIT_WRITE")  # fmt: skip


def config(*extra: str) -> TarnConfig:
    return parse_config([*BASE, *extra], {})


def role_cfg(edit: Callable[[str], str] | None = None, **role_vars: Any) -> str:
    text = container_executor_cfg(**{**NODE, **role_vars})
    return edit(text) if edit else text


# ---- the stand-in, fed what the NodeManager would write for a component of the spec


def host() -> Any:
    """A node where every absolute path exists (a directory): only the cfg's rules decide."""
    return ce.DockerHost(
        config_path=CFG_PATH,
        realpath=lambda path: posixpath.normpath(path) if path.startswith("/") else None,
        is_dir=lambda path: path.startswith("/"),
        network_driver={"host": "host", "bridge": "bridge", "none": "null"}.get,
        may_run_privileged=lambda user: True,
    )


def command_file(env: dict[str, str], gpus: int, capabilities: tuple[str, ...]) -> str:
    """The docker command file of DockerLinuxContainerRuntime for a component's environment: YARN's
    own mount of the working directory first, then the spec's; nvidia for GPUs (nvidia-docker-v2)."""
    mounts = [f"{WORKDIR}:{WORKDIR}:rw", *[m for m in env.get(ENV_MOUNTS, "").split(",") if m]]
    keys = {
        "docker-command": "run", "name": CID, "user": "65534:65534", "image": env[ENV_IMAGE],
        "detach": "true", "net": env[ENV_NETWORK], "workdir": WORKDIR, "mounts": ",".join(mounts),
        "cap-add": ",".join(capabilities), "launch-command": f"bash,{WORKDIR}/launch_container.sh",
        "runtime": "nvidia" if gpus else None, "privileged": env.get(ENV_PRIVILEGED),
        "ports-mapping": env.get(ENV_PORTS),
        "tmpfs": env.get("YARN_CONTAINER_RUNTIME_DOCKER_TMPFS_MOUNTS"),
    }  # fmt: skip
    return "[docker-command-execution]\n" + "".join(f"  {k}={v}\n" for k, v in keys.items() if v)


def stand_in_runs(spec: dict[str, Any], cfg_text: str, capabilities: tuple[str, ...]) -> list[Any]:
    """What the stand-in does with each component's container: its docker argv (with the notes of
    what it dropped), or its refusal."""
    cfg = ce.parse_config(cfg_text)
    outcomes: list[Any] = []
    for name in (CONTROLLER, TRITON):
        component = component_of(spec, name) or {}
        env = component["configuration"]["env"]
        gpus = component["resource"].get("additional", {}).get("yarn.io/gpu", {}).get("value", 0)
        command = ce.parse_config(command_file(env, gpus, capabilities))
        if not ce.docker_enabled(cfg):
            outcomes.append(ce.Exit.FEATURE_DISABLED)
            continue
        try:
            outcomes.append(ce.docker_command_argv(command, cfg, host()))
        except ce.DockerRefusal as refused:
            outcomes.append(refused.code)
    return outcomes


def tarn_decision(
    spec: dict[str, Any], cfg: TarnConfig, cfg_text: str, capabilities: tuple[str, ...]
) -> None:
    dp.check_spec(cfg, spec, dp.policy_of(cfg_text, CFG_PATH), capabilities)


# ---- what TARN accepts, the stand-in runs with every mount and capability

ACCEPTED = [
    # id, extra flags, role variables, yarn-site capabilities
    ("defaults: staged from HDFS into the node cache, one GPU", (), {}, ROLE_CAPABILITIES),
    ("models on the NFS mount, CPU only",
     ("--model-repository", "/mnt/hdfs/models", "--gpus-per-instance", "0"),
     {"yarn_nodemanager_gpu_enabled": False}, ()),
    ("a TP 2 world with its /dev/shm", ("--tp", "2"), {}, ROLE_CAPABILITIES),
    ("bridge network with a port mapping",
     ("--docker-network", "bridge", "--docker-ports", "8000:8000"), {}, ()),
    ("an official Docker Hub image, library trusted", ("--image", "tritonserver:24.08"),
     {"yarn_nodemanager_docker_trusted_registries": ["nvcr.io", "library"]}, ()),
    ("a registry with a port", ("--image", "registry.lab:5000/tarn/triton:1"),
     {"yarn_nodemanager_docker_trusted_registries": ["registry.lab:5000"]}, ()),
    ("an explicit mount of an allowed read-write path", ("--docker-mounts", "/srv/scratch:/scratch:rw"),
     {"yarn_nodemanager_docker_allowed_rw_mounts": ["/srv"]}, ()),
    ("a local keystore under an allowed mount", ("--secrets", "/mnt/hdfs/secrets/hf.jceks"), {}, ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "role_vars", "capabilities"), [row[1:] for row in ACCEPTED], ids=[row[0] for row in ACCEPTED]
)
def test_what_tarn_accepts_the_stand_in_runs_with_every_mount(
    extra: tuple[str, ...], role_vars: dict[str, Any], capabilities: tuple[str, ...]
) -> None:
    cfg = config(*extra)
    spec = build_service_spec(cfg, ARTIFACTS)
    text = role_cfg(**role_vars)
    tarn_decision(spec, cfg, text, capabilities)  # no error
    for outcome, name in zip(stand_in_runs(spec, text, capabilities), (CONTROLLER, TRITON), strict=True):
        assert isinstance(outcome, ce.DockerArgv), f"{name}: the stand-in refused it with {outcome}"
        assert outcome.notes == [], outcome.notes
        env = (component_of(spec, name) or {})["configuration"]["env"]
        wanted = [m for m in env.get(ENV_MOUNTS, "").split(",") if m]
        given = [outcome.argv[i + 1] for i, word in enumerate(outcome.argv) if word == "-v"]
        assert all(mount in given for mount in wanted), (wanted, given)
        assert [f"--cap-add={cap}" for cap in capabilities] == [
            a for a in outcome.argv if a.startswith("--cap-add")
        ]


# ---- what TARN refuses, the stand-in refuses (the real code) or runs without its mounts

DROPPED = "mounts and capabilities dropped"


def without_docker(text: str) -> str:
    return text.replace("  module.enabled=true\n  docker.binary", "  docker.binary", 1)


REFUSED = [
    # id, extra flags, role variables, cfg edit, yarn-site capabilities, flag named, words, the stand-in
    ("untrusted registry", ("--image", "registry.lab:5000/tarn/triton:1"), {}, None, ROLE_CAPABILITIES,
     "--image", "add registry.lab:5000 to docker.trusted.registries", DROPPED),
    ("no trusted registry at all", (), {"yarn_nodemanager_docker_trusted_registries": []}, None, (),
     "--image", "not trusted by docker.trusted.registries", DROPPED),
    ("a Docker Hub namespace", ("--image", "nvidia/tritonserver:24.08"), {}, None, (),
     "--image", "(registry docker.io)", DROPPED),
    ("an official image without library", ("--image", "tritonserver:24.08"), {}, None, (),
     "--image", "add library to", DROPPED),
    ("a prefix that stops short of a '/'", ("--image", "nvcr.io.evil.example/triton:1"), {}, None, (),
     "--image", "add nvcr.io.evil.example to", DROPPED),
    ("an image by digest", ("--image", "nvcr.io/nvidia/tritonserver@sha256:" + "a" * 64), {}, None, (),
     "--image", "not an image name container-executor accepts", 56),
    ("network not allowed", ("--docker-network", "bridge"),
     {"yarn_nodemanager_docker_allowed_networks": ["host"]},
     None, (), "--docker-network", "add bridge to docker.allowed.networks", 60),
    ("cache outside the read-write mounts", ("--model-cache-dir", "/srv/cache"), {}, None, (),
     "--model-cache-dir", "yarn_nodemanager_model_cache_dir", 51),
    ("node without a cache", (), {"yarn_nodemanager_model_cache_dir": ""}, None, (),
     "--model-cache-dir", "/var/lib/tarn/model-cache is not under docker.allowed.rw-mounts", 51),
    ("read-only mount not allowed", ("--docker-mounts", "/data:/data"), {}, None, (),
     "--docker-mounts", "add /data to docker.allowed.ro-mounts", 50),
    ("read-write mount of a read-only path", ("--docker-mounts", "/mnt/hdfs/out:/out:rw"), {}, None, (),
     "--docker-mounts", "add /mnt/hdfs/out to docker.allowed.rw-mounts", 51),
    ("local repository outside the mounts", ("--model-repository", "/srv/models"), {}, None, (),
     "--model-repository", "/srv/models is under neither", 50),
    ("NFS repository on a node without the mount", ("--model-repository", "/mnt/hdfs/models"),
     {"groups": {"hdfs_nfs_mount": []}}, None, (),
     "--model-repository", "read-only mount of /mnt/hdfs/models", 50),
    ("GPUs without the nvidia runtime", (), {"yarn_nodemanager_gpu_enabled": False}, None, (),
     "--gpus-per-instance", "add nvidia to docker.allowed.runtimes", 74),
    ("privileged, disabled", ("--docker-privileged",), {}, None, (),
     "--docker-privileged", "docker.privileged-containers.enabled is not true", 63),
    ("privileged, enabled, outside entry-point mode", ("--docker-privileged",),
     {"yarn_nodemanager_docker_privileged_containers": True}, None, (),
     "--docker-privileged", "only in YARN's entry-point mode", 63),
    ("a port mapping without a host port",
     ("--docker-network", "bridge", "--docker-ports", "8000"), {}, None, (),
     "--docker-ports", "write HOST:CONTAINER, e.g. 8000:8000", 61),
    ("capabilities the NodeManager adds, not allowed", (), {}, None, (*ROLE_CAPABILITIES, "SYS_ADMIN"),
     "--container-executor-cfg", "lacks SYS_ADMIN", 62),
    ("Docker disabled in the cfg", (), {}, without_docker, (),
     "--container-executor-cfg", "does not enable Docker", ce.Exit.FEATURE_DISABLED),
]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "role_vars", "edit", "capabilities", "flag", "words", "real"),
    [row[1:] for row in REFUSED],
    ids=[row[0] for row in REFUSED],
)
def test_what_tarn_refuses_the_stand_in_refuses_or_strips(
    extra: tuple[str, ...],
    role_vars: dict[str, Any],
    edit: Callable[[str], str] | None,
    capabilities: tuple[str, ...],
    flag: str,
    words: str,
    real: int | str,
) -> None:
    cfg = config(*extra)
    spec = build_service_spec(cfg, ARTIFACTS)
    text = role_cfg(edit, **role_vars)
    with pytest.raises(ConfigError) as refused:
        tarn_decision(spec, cfg, text, capabilities)
    message = str(refused.value)
    assert message.startswith(f"{flag}: "), message
    assert words in message, message
    assert "\n" not in message
    assert CFG_PATH in message or flag != "--container-executor-cfg"  # says which file it read
    outcomes = stand_in_runs(spec, text, capabilities)
    if real == DROPPED:
        for outcome, name in zip(outcomes, (CONTROLLER, TRITON), strict=True):
            if outcome == ce.Exit.INVALID_DOCKER_RUNTIME:  # an untrusted image with GPUs: refused outright
                assert name == TRITON
                assert cfg.gpus > 0
                assert "refuse those with GPUs" in message
                continue
            assert isinstance(outcome, ce.DockerArgv), outcome
            assert "-v" not in outcome.argv  # YARN's working directory too: no launch script in there
            assert any("Disable mount volume for untrusted image" in note for note in outcome.notes)
    else:
        assert real in outcomes, outcomes


def test_an_untrusted_image_says_what_it_would_lose() -> None:
    cfg = config("--image", "registry.lab:5000/tarn/triton:1", "--model-repository", "/mnt/hdfs/models")
    with pytest.raises(ConfigError) as refused:
        tarn_decision(build_service_spec(cfg, ARTIFACTS), cfg, role_cfg(), ())
    message = str(refused.value)
    assert "YARN's working and log directories, where the launch script is" in message
    assert "/mnt/hdfs/models" in message
    assert "every added capability" in message
    assert "yarn_nodemanager_docker_trusted_registries" in message


# ---- the pieces, row by row against the stand-in's own functions


@pytest.mark.parametrize(
    ("registries", "image"),
    [
        ("nvcr.io", IMAGE),
        ("nvcr.io/", IMAGE),
        ("nvcr.io/nvidia", IMAGE),  # a repository prefix up to a '/'
        ("nvcr", IMAGE),  # a prefix, but not up to a '/'
        ("registry.lab", "registry.lab:5000/triton:1"),  # the port is part of it
        ("registry.lab:5000", "registry.lab:5000/triton:1"),
        ("library", "ubuntu:22.04"),
        ("library", "docker.io/library/ubuntu:22.04"),
        ("library2", "ubuntu:22.04"),  # any entry starting with "library", as the real code reads it
        ("docker.io", "docker.io/library/ubuntu:22.04"),
        ("nvidia", "nvidia/cuda:12.4.1-base"),
        ("localhost:5000", "localhost:5000/triton"),
        ("a,,b", "b/x"),
        (None, IMAGE),
    ],
)
def test_trust_is_the_stand_ins(registries: str | None, image: str) -> None:
    line = "" if registries is None else f"  docker.trusted.registries={registries}\n"
    cfg = ce.parse_config(f"[docker]\n{line}")
    command = ce.parse_config(f"[docker-command-execution]\n  image={image}\n")
    policy = dp.policy_of(f"[docker]\n{line}", "x.cfg")
    assert dp.image_trusted(image, policy.values("docker.trusted.registries")) is ce.image_trusted(
        command, cfg
    )
    entry_cfg = ce.parse_config(f"[docker]\n  docker.trusted.registries={dp.trusted_entry(image)}\n")
    assert ce.image_trusted(command, entry_cfg)  # the entry the message proposes trusts it


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        ("ubuntu", "docker.io"),
        ("nvidia/cuda:12", "docker.io"),
        ("nvcr.io/nvidia/tritonserver:24.08-py3", "nvcr.io"),
        ("registry.lab:5000/triton", "registry.lab:5000"),
        ("localhost/triton", "localhost"),
        ("myhost:5000/x", "myhost:5000"),
    ],
)
def test_the_registry_a_message_names_follows_dockers_reference_rules(image: str, registry: str) -> None:
    assert dp.registry_of(image) == registry


@pytest.mark.parametrize(
    ("ro", "rw", "mount"),
    [
        ("/mnt/hdfs", "/var/lib/tarn/model-cache", "/mnt/hdfs/models:/m:ro"),
        ("/mnt/hdfs", "/var/lib/tarn/model-cache", "/mnt/hdfs:/m:ro"),
        ("/mnt/hdfs", "/var/lib/tarn/model-cache", "/mnt/hdfsx:/m:ro"),  # a sibling, not below
        ("/mnt/hdfs", "/var/lib/tarn/model-cache", "/mnt/hdfs/x:/m:rw"),
        ("/mnt/hdfs", "/var/lib/tarn/model-cache", "/var/lib/tarn/model-cache:/c:ro"),  # rw allows ro
        ("/mnt/hdfs", "/var/lib/tarn/model-cache", "/var/lib/tarn/model-cache/:/c:rw"),
        ("/mnt/hdfs/", "/var/lib/tarn/", "/var/lib/tarn/model-cache:/c:rw"),
        ("/mnt/hdfs", None, "/var/lib/tarn/model-cache:/c:rw"),
        (None, None, "/mnt/hdfs:/m:ro"),
        ("/", None, "/etc/passwd:/etc/passwd:ro"),
        ("regex:^/mnt.*", None, "/mnt/hdfs:/m:ro"),  # regexes match volume names only
        ("/etc/passwd,/etc/group", "/var/log/hadoop/yarn-containers", "/etc/group:/etc/group:ro"),
    ],
)
def test_mounts_are_allowed_as_the_stand_in_allows_them(ro: str | None, rw: str | None, mount: str) -> None:
    lines = "".join(f"  docker.allowed.{kind}-mounts={v}\n" for kind, v in (("ro", ro), ("rw", rw)) if v)
    text = f"[docker]\n  module.enabled=true\n{lines}"
    parsed = dp.Mount.parse(mount)
    policy = dp.policy_of(text, "x.cfg")
    ours = dp.mount_allowed(parsed.source, policy.values("docker.allowed.rw-mounts")) or (
        not parsed.read_write and dp.mount_allowed(parsed.source, policy.values("docker.allowed.ro-mounts"))
    )
    command = ce.parse_config(f"[docker-command-execution]\n  image={IMAGE}\n  mounts={mount}\n")
    cfg = ce.parse_config(f"[docker]\n  docker.trusted.registries=nvcr.io\n{lines}")
    code = None
    try:
        ce.mount_flags(command, cfg, host())
    except ce.DockerRefusal as refused:
        code = refused.code
    assert code in (None, 50, 51)
    assert ours is (code is None)


# ---- the file, read as container-executor reads it


def role_texts() -> list[str]:
    return [role_cfg(), role_cfg(yarn_nodemanager_cgroups_enabled=True, yarn_nodemanager_gpu_enabled=False)]


QUIRKS = [
    "top=1 # a comment\n[docker]\n  docker.allowed.networks = host,,bridge \n"
    "  docker.trusted.registries=a=b\n[docker]\n  module.enabled=true\n",
    "feature.docker.enabled=TRUE\n[docker]\n  module.enabled=false\n",
    "feature.docker.enabled=0\n[docker]\n  module.enabled=True\n",
    "[docker]\n  docker.allowed.networks=host\n  docker.allowed.networks=bridge\n",  # the first wins
    "[docker]\n  docker.allowed.runtimes=\n  docker.privileged-containers.enabled=1\n",
    "[docker]\n  docker.allowed.ro-mounts=,,,\n  docker.privileged-containers.enabled=TRUE\n",
    "# only a comment\n",
]
KEYS = [*dp.ROLE_VARIABLE, "docker.allowed.devices"]


@pytest.mark.parametrize("text", [*role_texts(), *QUIRKS], ids=lambda t: t.splitlines()[0][:40])
def test_the_file_reads_as_the_stand_in_reads_it(text: str) -> None:
    cfg = ce.parse_config(text)
    policy = dp.policy_of(text, "x.cfg")
    for key in KEYS:
        theirs = cfg.values(key, "docker")
        assert policy.values(key) == (None if theirs is None else tuple(theirs)), key
    assert policy.docker_enabled is ce.docker_enabled(cfg)
    assert policy.privileged_enabled is ce.enabled_one_or_true(
        cfg.value("docker.privileged-containers.enabled", "docker")
    )


@pytest.mark.parametrize("text", ["[docker]\n   \n", "[docker] \n", "[]\n", "[docker]\n  novalue\n"])
def test_a_file_the_real_parser_refuses_is_refused(text: str) -> None:
    with pytest.raises(ce.ConfigFileError):
        ce.parse_config(text)
    with pytest.raises(ConfigError) as refused:
        dp.policy_of(text, "/etc/hadoop/conf/container-executor.cfg")
    assert str(refused.value).startswith(
        "--container-executor-cfg: /etc/hadoop/conf/container-executor.cfg: "
    )
    assert "exit 24" in str(refused.value)


# ---- where the file is found, and the front ends: nothing is uploaded or submitted


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    (tmp_path / dp.CFG_NAME).write_text(role_cfg())
    return tmp_path


def test_the_file_is_found_in_the_client_configuration_or_named(conf_dir: Path, tmp_path: Path) -> None:
    assert dp.read_policy(config(), conf_dir).path == str(conf_dir / dp.CFG_NAME)
    named = tmp_path / "elsewhere.cfg"
    named.write_text("[docker]\n  module.enabled=true\n")
    assert dp.read_policy(config("--container-executor-cfg", str(named)), conf_dir).path == str(named)
    from_env = parse_config(BASE, {"TARN_CONTAINER_EXECUTOR_CFG": str(named)})
    assert dp.read_policy(from_env, None).path == str(named)


@pytest.mark.parametrize("where", ["no conf dir", "not in the conf dir", "named, missing"])
def test_docker_without_the_file_is_refused_naming_the_option(tmp_path: Path, where: str) -> None:
    extra = ("--container-executor-cfg", str(tmp_path / "missing.cfg")) if where == "named, missing" else ()
    conf = None if where == "no conf dir" else tmp_path
    with pytest.raises(dp.PolicyMissing) as refused:
        desired_service(config(*extra), "tarn", {}, conf_dir=conf)
    message = str(refused.value)
    assert message.startswith("--container-executor-cfg: ")
    assert "--runtime docker needs the NodeManagers' container-executor.cfg" in message
    assert "TARN_CONTAINER_EXECUTOR_CFG" in message


def test_an_unreadable_file_is_refused_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        dp.read_policy(config("--container-executor-cfg", str(tmp_path)), None)  # a directory
    assert str(refused.value).startswith(f"--container-executor-cfg: {tmp_path}: ")


def test_the_process_runtime_needs_no_file() -> None:
    desired = desired_service(config("--runtime", "process"), "tarn", {}, conf_dir=None)
    assert desired.spec["name"] == "tarn"


def test_a_dry_run_without_the_file_notes_it_and_one_with_it_checks(conf_dir: Path, tmp_path: Path) -> None:
    desired = desired_service(config(), "tarn", {}, conf_dir=tmp_path / "none", policy_optional=True)
    assert any("the Docker settings were not checked" in note for note in desired.notes)
    with pytest.raises(ConfigError, match=r"^--docker-network: "):
        desired_service(
            config("--docker-network", "overlay"), "tarn", {}, conf_dir=conf_dir, policy_optional=True
        )


def test_the_nodemanagers_capabilities_come_from_the_client_yarn_site(tmp_path: Path) -> None:
    assert dp.nodemanager_capabilities(tmp_path) is None  # no yarn-site.xml: not known here
    site = "<configuration><property><name>{}</name><value>{}</value></property></configuration>"
    (tmp_path / "yarn-site.xml").write_text(site.format(dp.CAPABILITIES_KEY, " CHOWN, SETUID ,"))
    assert dp.nodemanager_capabilities(tmp_path) == ("CHOWN", "SETUID")
    (tmp_path / "yarn-site.xml").write_text(site.format(dp.CAPABILITIES_KEY, "none"))
    assert dp.nodemanager_capabilities(tmp_path) == ()


def test_the_cfg_path_stays_out_of_the_service(conf_dir: Path) -> None:
    named = str(conf_dir / dp.CFG_NAME)
    spec = desired_service(config("--container-executor-cfg", named), "tarn", {}).spec
    assert named not in str(spec)  # neither in the controller's command nor in its settings


class Recorder(QuietHandler):
    seen: ClassVar[list[str]] = []

    def _record(self) -> None:
        Recorder.seen.append(f"{self.command} {self.path}")
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = _record


@pytest.fixture
def cluster() -> Iterator[ThreadingHTTPServer]:
    Recorder.seen = []
    server = serve(Recorder)
    yield server
    server.shutdown()


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (("--image", "registry.lab:5000/tarn/triton:1"), "--image"),
        (("--docker-network", "overlay"), "--docker-network"),
        (("--docker-mounts", "/data:/data:rw"), "--docker-mounts"),
        (("--docker-privileged",), "--docker-privileged"),
    ],
)
def test_tarn_submit_refuses_before_any_request(
    cluster: ThreadingHTTPServer,
    conf_dir: Path,
    capsys: pytest.CaptureFixture[str],
    extra: tuple[str, ...],
    flag: str,
) -> None:
    argv = ["submit", *BASE, *extra, "--rm-url", url(cluster), "--webhdfs-url", url(cluster)]
    assert cli.main([*argv, "--conf-dir", str(conf_dir)], {}) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1
    assert error[0].startswith(f"tarn: error: {flag}: ")
    assert Recorder.seen == []  # nothing read, uploaded or submitted


def test_tarn_submit_of_an_allowed_spec_goes_on_to_the_cluster(
    cluster: ThreadingHTTPServer, conf_dir: Path
) -> None:
    argv = [
        "submit",
        *BASE,
        "--rm-url",
        url(cluster),
        "--webhdfs-url",
        url(cluster),
        "--conf-dir",
        str(conf_dir),
    ]
    assert cli.main(argv, {}) == 1  # the recording cluster answers 500
    assert Recorder.seen  # the checks passed: it asked the RM
