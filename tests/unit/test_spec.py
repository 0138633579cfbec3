"""The YARN service spec builder: components, runtimes, GPUs, placement, readiness, no secrets."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from typing import Any

import pytest

from tarn.errors import ClusterError, ConfigError
from tarn.spec import (
    CONTROLLER,
    LAUNCHER_FILE,
    PAYLOAD_FILE,
    SECRETS_FILE,
    SETTINGS_PROPERTY,
    TOKEN_FILE,
    TRITON,
    Artifacts,
    build_service_spec,
    container_host,
    read_back,
    with_settings,
)
from tarn.stdlib.api_token import Secret
from tarn.stdlib.config import TarnConfig, parse_config

IMAGE = "nvcr.io/nvidia/tritonserver:24.09-py3"
TOKEN = "tok-3f9a-never-in-the-spec"  # noqa: S105 - a test value
ARTIFACTS = Artifacts(
    payload="hdfs:///apps/tarn/0.1.0/tarn.pyz",
    launcher="hdfs:///apps/tarn/0.1.0/tarn-launcher.py",
    token_file="hdfs:///user/tarn/.tarn/tarn/token",  # noqa: S106 - a path, not a token
)
NO_TOKEN = replace(ARTIFACTS, token_file=None)


def config(*extra: str) -> TarnConfig:
    return parse_config(["--model-repository", "hdfs:///models", "--image", IMAGE, *extra], {})


def spec_of(*extra: str, artifacts: Artifacts = NO_TOKEN) -> dict[str, Any]:
    return build_service_spec(config(*extra), artifacts)


def component(spec: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in spec["components"] if c["name"] == name]
    assert len(found) == 1
    return found[0]


# ---- the service


def test_service_fields() -> None:
    spec = spec_of("--service-name", "tarn-prod", "--queue", "gpu", "--lifetime", "3600")
    assert (spec["name"], spec["queue"], spec["lifetime"]) == ("tarn-prod", "gpu", 3600)
    assert isinstance(spec["version"], str)
    assert spec["version"]
    assert [c["name"] for c in spec["components"]] == [CONTROLLER, TRITON]
    assert "lifetime" not in spec_of()


def test_yarn_neither_ends_the_service_nor_shuns_a_node_after_a_few_triton_failures() -> None:
    # YARN's defaults: the whole service ended at the 11th failure of one component in 6 hours,
    # a node shunned at its 4th (issue 47's ten kills of every instance in a row).
    properties = spec_of()["configuration"]["properties"]
    assert properties["yarn.service.container-failure-per-component.threshold"] == "1000"
    assert properties["yarn.service.node-blacklist.threshold"] == "10"
    controller = component(spec_of(), CONTROLLER)["configuration"]["properties"]
    assert controller["yarn.service.node-blacklist.threshold"] == "10"  # as YARN reads it back


def test_kerberos_principal_only_when_given() -> None:
    spec = spec_of(
        "--service-principal", "tarn/_HOST@TARN.LAB", "--service-keytab", "/etc/security/keytabs/tarn.keytab"
    )
    assert spec["kerberos_principal"] == {
        "principal_name": "tarn/_HOST@TARN.LAB",
        "keytab": "file:///etc/security/keytabs/tarn.keytab",
    }
    given_as_uri = spec_of(
        "--service-principal", "tarn@TARN.LAB", "--service-keytab", "file:///k/tarn.keytab"
    )
    assert given_as_uri["kerberos_principal"]["keytab"] == "file:///k/tarn.keytab"
    assert "kerberos_principal" not in spec_of()


@pytest.mark.parametrize("name", [CONTROLLER, TRITON])
def test_restart_policy_is_always(name: str) -> None:
    assert component(spec_of(), name)["restart_policy"] == "ALWAYS"


@pytest.mark.parametrize(("argv", "count"), [([], 1), (["--min-instances", "3", "--max-instances", "5"], 3)])
def test_container_counts(argv: list[str], count: int) -> None:
    spec = spec_of(*argv)
    assert component(spec, CONTROLLER)["number_of_containers"] == 1
    assert component(spec, TRITON)["number_of_containers"] == count


# ---- runtimes


@pytest.mark.parametrize("name", [CONTROLLER, TRITON])
def test_docker_runtime(name: str) -> None:
    part = component(spec_of("--docker-mounts", "/data:/data"), name)
    assert part["artifact"] == {"id": IMAGE, "type": "DOCKER"}
    env = part["configuration"]["env"]
    assert env["YARN_CONTAINER_RUNTIME_TYPE"] == "docker"
    assert env["YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"] == IMAGE
    assert env["YARN_CONTAINER_RUNTIME_DOCKER_CONTAINER_NETWORK"] == "host"
    assert env["YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"] == f"/data:/data:ro,{NODE_FILES}"
    assert "YARN_CONTAINER_RUNTIME_DOCKER_RUN_PRIVILEGED_CONTAINER" not in env


SHM = "/dev/shm"  # noqa: S108 - the mount point the spec names


@pytest.mark.parametrize(("argv", "tmpfs"), [((), None), (("--tp", "2"), SHM), (("--pp", "2"), SHM)])
def test_a_docker_world_gets_a_private_dev_shm(argv: tuple[str, ...], tmpfs: str | None) -> None:
    spec = spec_of(*argv)
    assert (
        component(spec, TRITON)["configuration"]["env"].get("YARN_CONTAINER_RUNTIME_DOCKER_TMPFS_MOUNTS")
        == tmpfs
    )
    assert (
        "YARN_CONTAINER_RUNTIME_DOCKER_TMPFS_MOUNTS"
        not in component(spec, CONTROLLER)["configuration"]["env"]
    )


@pytest.mark.parametrize("name", [CONTROLLER, TRITON])
def test_process_runtime_has_no_artifact_and_no_docker_variables(name: str) -> None:
    part = component(spec_of("--runtime", "process", "--docker-privileged"), name)
    assert "artifact" not in part
    assert not [key for key in part["configuration"]["env"] if key.startswith("YARN_CONTAINER_RUNTIME")]
    assert part["launch_command"].startswith("exec python3 ")


def test_privileged_bridge_and_delayed_removal() -> None:
    spec = spec_of(
        "--docker-privileged",
        "--docker-network",
        "bridge",
        "--docker-ports",
        "9000:8000",
        "--docker-delayed-removal",
    )
    triton = component(spec, TRITON)["configuration"]["env"]
    controller = component(spec, CONTROLLER)["configuration"]["env"]
    assert triton["YARN_CONTAINER_RUNTIME_DOCKER_RUN_PRIVILEGED_CONTAINER"] == "true"
    assert triton["YARN_CONTAINER_RUNTIME_DOCKER_PORTS_MAPPING"] == "9000:8000"
    assert triton["YARN_CONTAINER_RUNTIME_DOCKER_DELAYED_REMOVAL"] == "true"
    assert "YARN_CONTAINER_RUNTIME_DOCKER_RUN_PRIVILEGED_CONTAINER" not in controller
    assert controller["YARN_CONTAINER_RUNTIME_DOCKER_PORTS_MAPPING"] == "8888:8888"


REPO_MOUNT = "/mnt/nfs/models:/mnt/nfs/models:ro"
NFS_MOUNT = "/mnt/nfs:/mnt/nfs:ro"
# Every Docker container reads the node's accounts (YARN runs it as a user of the node, by uid), its
# Hadoop client configuration and its CA certificates.
NODE_FILES = ",".join(
    f"{path}:{path}:ro" for path in ("/etc/passwd", "/etc/group", "/etc/hadoop", "/etc/ssl/certs")
)


@pytest.mark.parametrize(
    ("argv", "triton_mounts", "controller_mounts"),
    [
        (["--model-repository", "/mnt/nfs/models"],
         f"{REPO_MOUNT},{NODE_FILES}", f"{REPO_MOUNT},{NODE_FILES}"),
        (["--model-repository", "/mnt/nfs/models", "--docker-mounts", "/mnt/nfs:/mnt/nfs"],
         f"{NFS_MOUNT},{NODE_FILES}", f"{NFS_MOUNT},{NODE_FILES}"),
        (["--secrets", "/etc/tarn/hf.jceks"],
         f"/etc/tarn/hf.jceks:/etc/tarn/hf.jceks:ro,{NODE_FILES}", NODE_FILES),
        ([], NODE_FILES, NODE_FILES),
    ],
    ids=["local-repository", "covered-by-explicit-mount", "local-secrets-triton-only", "hdfs-needs-no-mount"],
)  # fmt: skip
def test_local_paths_are_mounted_read_only(
    argv: list[str], triton_mounts: str | None, controller_mounts: str | None
) -> None:
    spec = spec_of(*argv)
    key = "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"
    assert component(spec, TRITON)["configuration"]["env"].get(key) == triton_mounts
    assert component(spec, CONTROLLER)["configuration"]["env"].get(key) == controller_mounts


def test_the_node_model_cache_is_mounted_read_write_for_staging() -> None:
    key = "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"
    cache = "/var/lib/tarn/model-cache"
    staged = spec_of("--model-cache-dir", cache)  # the default repository is hdfs://
    assert component(staged, TRITON)["configuration"]["env"][key] == f"{NODE_FILES},{cache}:{cache}:rw"
    assert component(staged, CONTROLLER)["configuration"]["env"][key] == NODE_FILES
    nfs = spec_of("--model-cache-dir", cache, "--model-repository", "/mnt/hdfs/models")
    assert (
        component(nfs, TRITON)["configuration"]["env"][key]
        == f"/mnt/hdfs/models:/mnt/hdfs/models:ro,{NODE_FILES}"
    )
    assert f"--model-cache-dir {cache}" in component(staged, TRITON)["launch_command"]


@pytest.mark.parametrize("name", [CONTROLLER, TRITON])
def test_a_secure_service_reads_kerberos_settings_and_its_keytab_in_docker(name: str) -> None:
    keytab = "/etc/security/keytabs/tarn.service.keytab"
    spec = spec_of("--service-principal", "tarn/_HOST@EXAMPLE.COM", "--service-keytab", f"file://{keytab}")
    mounts = component(spec, name)["configuration"]["env"]["YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"].split(",")
    assert {"/etc/krb5.conf:/etc/krb5.conf:ro", f"{keytab}:{keytab}:ro"} <= set(mounts)


def test_user_env_reaches_triton_only() -> None:
    spec = spec_of("--env", "TRITON_LOG_VERBOSE=1", "--env", "OMP_NUM_THREADS=4")
    assert component(spec, TRITON)["configuration"]["env"]["TRITON_LOG_VERBOSE"] == "1"
    assert component(spec, TRITON)["configuration"]["env"]["OMP_NUM_THREADS"] == "4"
    assert "TRITON_LOG_VERBOSE" not in component(spec, CONTROLLER)["configuration"]["env"]
    assert "TRITON_LOG_VERBOSE" not in component(spec, CONTROLLER)["launch_command"]


# ---- GPUs and resources


@pytest.mark.parametrize(
    ("argv", "gpus"),
    [
        ([], 1),
        (["--tp", "2"], 2),
        (["--tp", "2", "--pp", "2"], 4),
        (["--tp", "4", "--pp", "2"], 8),
        (["--tp", "2", "--gpus-per-instance", "8"], 8),
        (["--tp", "2", "--gpus-per-instance", "0"], 0),
    ],
)
def test_gpu_count_is_tp_times_pp(argv: list[str], gpus: int) -> None:
    triton = component(spec_of(*argv), TRITON)["resource"]
    if gpus:
        assert triton["additional"] == {"yarn.io/gpu": {"value": gpus, "unit": ""}}
    else:
        assert "additional" not in triton


def test_resources() -> None:
    spec = spec_of("--memory-mb", "16384", "--vcores", "8", "--controller-memory-mb", "512")
    assert component(spec, TRITON)["resource"]["cpus"] == 8
    assert component(spec, TRITON)["resource"]["memory"] == "16384"
    assert component(spec, CONTROLLER)["resource"] == {"cpus": 1, "memory": "512"}


# ---- placement


def test_anti_affinity_targets_the_triton_component() -> None:
    policy = component(spec_of("--placement-tag", "a100"), TRITON)["placement_policy"]
    assert policy == {
        "constraints": [{"name": "a100", "type": "ANTI_AFFINITY", "scope": "NODE", "target_tags": [TRITON]}]
    }


def test_beside_triton_s_constraint_the_controller_has_one_of_its_own() -> None:
    """YARN 3.4's RM fails every AM heartbeat on the controller's second SchedulingRequest when it
    has no constraint (issue 47): the controller was never relaunched twice in one AM attempt."""
    policy = component(spec_of(), CONTROLLER)["placement_policy"]
    assert policy == {
        "constraints": [
            {"name": CONTROLLER, "type": "ANTI_AFFINITY", "scope": "NODE", "target_tags": [CONTROLLER]}
        ]
    }


def test_no_anti_affinity() -> None:
    """No component has a constraint: YARN's AM asks with plain ResourceRequests, for both."""
    spec = spec_of("--no-anti-affinity", "--port-stride", "10")
    assert "placement_policy" not in component(spec, TRITON)
    assert "placement_policy" not in component(spec, CONTROLLER)


# ---- readiness and launch commands


@pytest.mark.parametrize("port", [8000, 9000, 31000])
def test_readiness_url_uses_the_http_port(port: int) -> None:
    spec = spec_of("--port", str(port), "--grpc-port", str(port + 1), "--metrics-port", str(port + 2))
    assert component(spec, TRITON)["readiness_check"] == {
        "type": "HTTP",
        "properties": {"url": f"http://${{THIS_HOST}}:{port}/v2/health/ready"},
    }


def test_controller_readiness_uses_the_am_port() -> None:
    check = component(spec_of("--am-port", "9999"), CONTROLLER)["readiness_check"]
    assert check["properties"]["url"] == "http://${THIS_HOST}:9999/health"


def test_port_stride_passes_the_instance_id_and_uses_default_readiness() -> None:
    triton = component(spec_of("--no-anti-affinity", "--port-stride", "10", "--max-instances", "3"), TRITON)
    assert triton["readiness_check"] == {"type": "DEFAULT"}
    assert triton["launch_command"].endswith(" --port-stride 10 --instance-id ${COMPONENT_ID}")


def test_triton_command_and_files() -> None:
    spec = spec_of("--tp", "2", "--secrets", "hdfs:///user/secrets/hf.jceks", "--address", "10.0.0.1")
    triton = component(spec, TRITON)
    args = shlex.split(triton["launch_command"])
    assert args[:3] == ["exec", "python3", LAUNCHER_FILE]
    flags = dict(zip(args[3::2], args[4::2], strict=True))
    assert flags == {
        "--model-repository": "hdfs:///models",
        "--model-cache-max-gib": "100.0",
        "--model-verify": "hdfs",
        "--port": "8000",
        "--grpc-port": "8001",
        "--metrics-port": "8002",
        "--openai-max-generations": "0",
        "--openai-admission": "fair",
        "--address": "10.0.0.1",
        "--tp": "2",
        "--pp": "1",
        "--secrets": SECRETS_FILE,
    }
    assert triton["configuration"]["files"] == [
        {"type": "STATIC", "src_file": NO_TOKEN.launcher, "dest_file": LAUNCHER_FILE},
        {"type": "STATIC", "src_file": "hdfs:///user/secrets/hf.jceks", "dest_file": SECRETS_FILE},
    ]


def test_local_secrets_are_passed_by_path() -> None:
    triton = component(spec_of("--secrets", "/etc/tarn/hf.jceks"), TRITON)
    assert "--secrets /etc/tarn/hf.jceks" in triton["launch_command"]
    assert len(triton["configuration"]["files"]) == 1


def test_controller_command_round_trips_to_the_config() -> None:
    source = config(
        "--token", TOKEN, "--env", "A=1", "--zk-ensemble", "zk:2181", "-rs", "triton_prod", "--tp", "2"
    )
    controller = component(build_service_spec(source, ARTIFACTS), CONTROLLER)
    args = shlex.split(controller["launch_command"])
    assert args[:4] == ["exec", "python3", PAYLOAD_FILE, CONTROLLER]
    assert parse_config(args[4:], {}) == replace(source, token=None, token_file=TOKEN_FILE, env=())
    assert controller["configuration"]["files"] == [
        {"type": "STATIC", "src_file": ARTIFACTS.payload, "dest_file": PAYLOAD_FILE},
        {"type": "STATIC", "src_file": ARTIFACTS.token_file, "dest_file": TOKEN_FILE},
    ]


def test_the_controller_is_given_the_rm_urls() -> None:
    """A Docker container has no Hadoop configuration: the RM addresses go on the command line."""
    urls = ("http://rm1:8088", "http://rm2:8088")
    controller = component(build_service_spec(config(), replace(NO_TOKEN, rm_urls=urls)), CONTROLLER)
    args = shlex.split(controller["launch_command"])
    given = [args[i + 1] for i, arg in enumerate(args) if arg == "--rm-url"]
    assert given == list(urls)
    bare = component(build_service_spec(config(), NO_TOKEN), CONTROLLER)
    assert "--rm-url" not in bare["launch_command"]


# ---- secrets never appear


@pytest.mark.parametrize("runtime", ["docker", "process"])
def test_the_token_never_appears(runtime: str) -> None:
    source = config("--token", TOKEN, "--runtime", runtime, "--secrets", "hdfs:///s/hf.jceks", "--env", "A=1")
    spec = build_service_spec(source, ARTIFACTS)
    assert TOKEN not in json.dumps(spec)
    assert TOKEN not in repr(source)
    assert TOKEN not in str(source)
    assert TOKEN not in json.dumps(source.redacted())
    assert "--token-file tarn-token" in component(spec, CONTROLLER)["launch_command"]


def test_a_token_needs_its_hdfs_file() -> None:
    with pytest.raises(ConfigError, match=r"^--token: .*artifacts\.token_file"):
        build_service_spec(config("--token", TOKEN), NO_TOKEN)


def test_no_token_no_token_file() -> None:
    controller = component(spec_of(), CONTROLLER)
    assert "--token" not in controller["launch_command"]
    assert [f["dest_file"] for f in controller["configuration"]["files"]] == [PAYLOAD_FILE]


def test_the_spec_is_json() -> None:
    spec = spec_of("--secrets", "hdfs:///s/hf.jceks", "--no-anti-affinity", "--port-stride", "10")
    assert json.loads(json.dumps(spec)) == spec


# ---- bad input reaches no spec: the builder validates hand-built configs too

GOOD = TarnConfig(model_repository="hdfs:///models", image=IMAGE)

BAD: list[tuple[str, dict[str, Any], str]] = [
    ("min-above-max", {"min_instances": 5, "max_instances": 2}, "--min-instances"),
    ("min-negative", {"min_instances": -1}, "--min-instances"),
    ("scale-up-high", {"scale_up": 1.2}, "--scale-up"),
    ("scale-down-negative", {"scale_down": -0.5}, "--scale-down"),
    ("scale-inverted", {"scale_up": 0.1, "scale_down": 0.5}, "--scale-up"),
    ("port-clash", {"metrics_port": 8000}, "--metrics-port"),
    ("am-port-clash", {"am_port": 8001}, "--am-port"),
    ("port-range", {"grpc_port": 0}, "--grpc-port"),
    ("tp-zero", {"tp": 0}, "--tp"),
    ("pp-zero", {"pp": 0}, "--pp"),
    ("repo-scheme", {"model_repository": "gs://bucket/models"}, "--model-repository"),
    ("repo-metachar", {"model_repository": "/m&&reboot"}, "--model-repository"),
    ("image-missing", {"image": None}, "--image"),
    ("image-metachar", {"image": "triton>out"}, "--image"),
    ("tag-metachar", {"placement_tag": "nv$x"}, "--placement-tag"),
    ("env-key", {"env": (("BAD KEY", "1"),)}, "--env"),
    ("env-token", {"token": Secret(TOKEN), "env": (("X", TOKEN),)}, "--env"),
    ("cooldown", {"cooldown_ms": -5}, "--cooldown"),
    ("secrets-scheme", {"secrets": "http://vault/hf.jceks"}, "--secrets"),
    ("zk-path", {"zk_path": "triton"}, "--zk-path"),
    ("runtime", {"runtime": "podman"}, "--runtime"),
    ("stride", {"anti_affinity": False, "max_instances": 2}, "--port-stride"),
    ("mount", {"docker_mounts": ("/a:/b:ro;id",)}, "--docker-mounts"),
    ("python", {"python": "python3 -c evil"}, "--python"),
]


@pytest.mark.parametrize(("changes", "flag"), [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_config_builds_no_spec(changes: dict[str, Any], flag: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_service_spec(replace(GOOD, **changes), NO_TOKEN)
    message = str(caught.value)
    assert message.startswith(flag + ":")
    assert "\n" not in message
    assert TOKEN not in message


@pytest.mark.parametrize(
    ("artifacts", "name"),
    [
        (Artifacts(payload="/local/tarn.pyz", launcher=NO_TOKEN.launcher), "artifacts.payload"),
        (Artifacts(payload=NO_TOKEN.payload, launcher="hdfs:///l;id"), "artifacts.launcher"),
        (replace(ARTIFACTS, token_file="file:///tmp/token"), "artifacts.token_file"),  # noqa: S106
    ],
)
def test_bad_artifacts(artifacts: Artifacts, name: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{re.escape(name)}: "):
        build_service_spec(GOOD, artifacts)


# ---- reading the settings back: structured data, not shell words


def test_read_back_returns_the_config_less_the_token_and_environment() -> None:
    source = config("--token", TOKEN, "--env", "A=1", "--no-anti-affinity", "--port-stride", "10")
    spec = build_service_spec(source, replace(ARTIFACTS, rm_urls=("http://rm1:8088",)))
    deployed = read_back(json.loads(json.dumps(spec)))
    assert deployed.config == replace(source, token=None, env=())
    assert deployed.has_token
    assert deployed.rm_urls == ("http://rm1:8088",)
    assert deployed.instance_port("triton-3") == 8030
    assert TOKEN not in json.dumps(spec)


def test_with_settings_relaunches_only_the_controller_with_new_bounds() -> None:
    source = config("--token", TOKEN, "--max-instances", "3")
    spec = build_service_spec(source, ARTIFACTS)
    before = json.loads(json.dumps(spec))
    changed = with_settings(json.loads(json.dumps(spec)), replace(read_back(spec).config, max_instances=6))
    assert component(changed, TRITON) == component(before, TRITON)
    args = shlex.split(component(changed, CONTROLLER)["launch_command"])
    assert parse_config(args[4:], {}).max_instances == 6
    assert "--token-file" in args
    assert read_back(changed).config.max_instances == 6


def test_with_settings_refuses_bad_bounds_by_flag() -> None:
    spec = spec_of()
    with pytest.raises(ConfigError, match=r"^--min-instances: "):
        with_settings(spec, replace(read_back(spec).config, min_instances=5, max_instances=2))


def test_read_back_needs_the_settings() -> None:
    spec = spec_of()
    del component(spec, CONTROLLER)["configuration"]["properties"][SETTINGS_PROPERTY]
    with pytest.raises(ClusterError, match=r"tarn\.settings"):
        read_back(spec)


@pytest.mark.parametrize(
    ("container", "host"),
    [
        ({"bare_host": "worker1", "hostname": "triton-0.svc.tarn", "ip": "10.0.0.1"}, "worker1"),  # Docker
        ({"hostname": "worker2", "ip": "10.0.0.2"}, "worker2"),  # the RM does not know the node yet
        ({"ip": "10.0.0.3"}, "10.0.0.3"),
        ({}, ""),
    ],
)
def test_a_container_is_reached_on_its_nodemanagers_host(container: dict[str, str], host: str) -> None:
    assert container_host(container) == host


@pytest.mark.parametrize(
    ("extra", "artifacts", "gets_it"),
    [
        (("--openai-port", "9000"), ARTIFACTS, True),
        ((), ARTIFACTS, False),  # no front: Triton's containers never see the token
        (("--openai-port", "9000"), NO_TOKEN, False),
    ],
)
def test_the_openai_front_gets_the_token_by_path(
    extra: tuple[str, ...], artifacts: Artifacts, gets_it: bool
) -> None:
    """The front's /metrics needs the token and Knox's users are proven with it (issue 48, item 4)."""
    token = ("--token", TOKEN) if artifacts.token_file else ()
    triton = component(spec_of(*extra, *token, artifacts=artifacts), TRITON)
    localized = {"type": "STATIC", "src_file": ARTIFACTS.token_file, "dest_file": TOKEN_FILE}
    assert (localized in triton["configuration"]["files"]) is gets_it
    assert ("--front-token-file tarn-token" in triton["launch_command"]) is gets_it
    assert TOKEN not in json.dumps(triton)
