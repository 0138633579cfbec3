"""The TARN options: seeds' defaults, environment fallbacks, and one-line errors that name the flag."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from tarn.errors import ConfigError, TarnError
from tarn.stdlib.api_token import Secret
from tarn.stdlib.config import (
    ConfigArgumentParser,
    TarnConfig,
    add_config_arguments,
    config_from_namespace,
    config_to_argv,
    parse_config,
    validate,
)

IMAGE = "nvcr.io/nvidia/tritonserver:24.09-py3"
BASE = ["--model-repository", "hdfs:///user/models", "--image", IMAGE]
TOKEN = "my-secret-token-4711"  # noqa: S105 - a test value

# The seeds' full example (002, "Deployment"), verbatim but for the program name.
SEEDS_EXAMPLE = [
    "--model-repository", "hdfs:///user/models",
    "--image", IMAGE,
    "--port", "8000",
    "--metrics-port", "8002",
    "--am-port", "8888",
    "--address", "0.0.0.0",  # noqa: S104 - the seeds' value
    "--token", TOKEN,
    "--tp", "2",
    "--pp", "1",
    "--secrets", "hdfs:///user/secrets/hf.jceks",
    "--placement-tag", "nvidia",
    "--scale-up", "0.8",
    "--scale-down", "0.2",
    "--min-instances", "2",
    "--max-instances", "8",
    "--cooldown", "120000",
    "--jar", "target/tarn-orchestrator-0.0.1-SNAPSHOT.jar",
    "--env", "TRITON_LOG_VERBOSE=1",
]  # fmt: skip


def parse(*extra: str, environ: dict[str, str] | None = None) -> TarnConfig:
    return parse_config([*BASE, *extra], environ or {})


# ---- good input


def test_defaults_are_the_seeds() -> None:
    config = parse()
    assert (config.port, config.grpc_port, config.metrics_port, config.am_port) == (8000, 8001, 8002, 8888)
    assert config.address == "0.0.0.0"  # noqa: S104 - the seeds' default
    assert (config.tp, config.pp, config.gpus) == (1, 1, 1)
    assert (config.scale_up, config.scale_down) == (0.8, 0.2)
    assert config.placement_tag == "nvidia"
    assert config.anti_affinity is True
    assert config.zk_path == "/services/triton/instances"
    assert (config.ranger_service, config.ranger_app_id, config.ranger_audit) == (None, "tarn", False)
    assert (config.service_name, config.runtime, config.queue) == ("tarn", "docker", "default")
    assert (config.min_instances, config.max_instances, config.cooldown_ms) == (1, 4, 60000)
    assert (config.docker_network, config.docker_privileged, config.port_stride) == ("host", False, 0)
    assert config.token is None
    assert config.notes == ()


def test_the_seeds_example_parses() -> None:
    config = parse_config(SEEDS_EXAMPLE, {})
    assert config.tp == 2
    assert config.gpus == 2
    assert (config.min_instances, config.max_instances, config.cooldown_ms) == (2, 8, 120000)
    assert config.secrets == "hdfs:///user/secrets/hf.jceks"
    assert config.env == (("TRITON_LOG_VERBOSE", "1"),)
    assert config.token is not None
    assert config.token.reveal() == TOKEN
    assert config.notes == ("--jar is not needed and was ignored: TARN ships as a Python package",)


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        ([], {"RANGER_SERVICE": "triton_prod"}, ("triton_prod", "tarn", False)),
        ([], {"RANGER_APP_ID": "app", "RANGER_AUDIT": "true"}, (None, "app", True)),
        ([], {"RANGER_AUDIT": "0"}, (None, "tarn", False)),
        (["-rs", "svc", "-ra", "app", "-raudit"], {}, ("svc", "app", True)),
        (["--ranger-service", "svc", "--ranger-audit"], {"RANGER_SERVICE": "env"}, ("svc", "tarn", True)),
        (["--no-ranger-audit"], {"RANGER_AUDIT": "yes"}, (None, "tarn", False)),
    ],
    ids=[
        "env-service",
        "env-app-audit",
        "env-audit-off",
        "short-flags",
        "flag-beats-env",
        "no-audit-beats-env",
    ],
)
def test_ranger_flags_and_environment(
    argv: list[str], environ: dict[str, str], expected: tuple[object, ...]
) -> None:
    config = parse(*argv, environ=environ)
    assert (config.ranger_service, config.ranger_app_id, config.ranger_audit) == expected


@pytest.mark.parametrize(
    ("argv", "environ", "attribute", "expected"),
    [
        (["--env", "A=b=c", "--env", "EMPTY="], {}, "env", (("A", "b=c"), ("EMPTY", ""))),
        (["--docker-mounts", "/a:/b,/c:/d:rw", "--docker-mounts", "/e:/f"], {}, "docker_mounts",
         ("/a:/b:ro", "/c:/d:rw", "/e:/f:ro")),
        (["--docker-network", "bridge", "--docker-ports", "8000:8000,8001"], {}, "docker_ports",
         ("8000:8000", "8001")),
        (["--tensor-parallelism", "4", "--pipeline-parallelism", "2"], {}, "gpus", 8),
        (["--tp", "2", "--gpus-per-instance", "0"], {}, "gpus", 0),
        (["--tp", "2", "--gpus-per-instance", "4"], {}, "gpus", 4),
        ([], {"HADOOP_USER_NAME": "tarn", "USER": "other"}, "user", "tarn"),
        ([], {"USER": "alice"}, "user", "alice"),
        (["--user", "bob"], {"USER": "alice"}, "user", "bob"),
        ([], {"TARN_TOKEN": TOKEN}, "token", Secret(TOKEN)),
        (["--model-repository", "/mnt/hdfs/user/models"], {}, "model_repository", "/mnt/hdfs/user/models"),
        (["--model-repository", "hdfs://nn1:8020/models"], {}, "model_repository", "hdfs://nn1:8020/models"),
        (["--model-repository", "hdfs://mycluster/models"], {}, "model_repository", "hdfs://mycluster/models"),
        (["--runtime", "process"], {}, "runtime", "process"),
        (["--no-anti-affinity", "--port-stride", "10"], {}, "anti_affinity", False),
        (["--min-instances", "0", "--scale-to-zero-after", "300"], {}, "min_instances", 0),
        (["--model-cache-dir", "/var/lib/tarn/mc"], {}, "model_cache_dir", "/var/lib/tarn/mc"),
        (["--model-cache-max-gib", "0.5"], {}, "model_cache_max_gib", 0.5),
        (["--model-verify", "recompute"], {}, "model_verify", "recompute"),
        (["--min-instances", "0", "--scale-to-zero-after", "300"], {}, "scale_to_zero_after_s", 300),
        (["--scale-up", "1", "--scale-down", "0"], {}, "scale_up", 1.0),
        (["--zk-ensemble", "zk1:2181,zk2:2181,zk3"], {}, "zk_ensemble", "zk1:2181,zk2:2181,zk3"),
    ],
)  # fmt: skip
def test_good_input(argv: list[str], environ: dict[str, str], attribute: str, expected: object) -> None:
    assert getattr(parse(*argv, environ=environ), attribute) == expected


def test_process_runtime_needs_no_image_and_notes_what_it_ignores() -> None:
    config = parse_config(["--model-repository", "/models", "--runtime", "process"], {})
    assert config.image is None
    assert config.notes == ()
    with_docker_flags = parse("--runtime", "process", "--docker-privileged")
    assert with_docker_flags.notes == ("--image, --docker-privileged ignored with --runtime process",)


def test_instance_ports_follow_the_stride() -> None:
    config = parse("--no-anti-affinity", "--port-stride", "10", "--max-instances", "3")
    assert [(p.http, p.grpc, p.metrics) for p in map(config.instance_ports, range(3))] == [
        (8000, 8001, 8002),
        (8010, 8011, 8012),
        (8020, 8021, 8022),
    ]


@pytest.mark.parametrize(
    "argv",
    [
        SEEDS_EXAMPLE,
        [*BASE, "--runtime", "process", "--no-anti-affinity", "--port-stride", "10", "--ranger-service", "r"],
        [
            *BASE,
            "--docker-network",
            "bridge",
            "--docker-ports",
            "9000:8000",
            "--docker-privileged",
            "--lifetime",
            "60",
        ],
        [
            *BASE,
            "--docker-mounts",
            "/data:/data:rw",
            "--zk-ensemble",
            "zk:2181",
            "--ranger-audit",
            "--user",
            "u",
        ],
    ],
)
def test_config_to_argv_round_trips_without_the_token(argv: list[str]) -> None:
    config = parse_config(argv, {})
    rendered = config_to_argv(config)
    assert TOKEN not in " ".join(rendered)
    assert parse_config(rendered, {}) == replace(config, token=None, jar=None)
    assert "--env" not in config_to_argv(config, with_env=False)


def test_the_token_never_shows() -> None:
    config = parse("--token", TOKEN)
    shown = [
        repr(config),
        str(config),
        f"{config}",
        repr(config.redacted()),
        repr(config.token),
        f"{config.token}",
    ]
    assert all(TOKEN not in text for text in shown)
    assert config.redacted()["token"] == "***"  # noqa: S105 - the mask, not a token
    assert config.token is not None
    assert config.token.matches(TOKEN)
    assert not config.token.matches("guess")


def test_the_cli_can_reuse_the_arguments() -> None:
    parser = argparse.ArgumentParser(prog="tarn submit", allow_abbrev=False)
    parser.add_argument("--dry-run", action="store_true")
    add_config_arguments(parser)
    namespace = parser.parse_args([*BASE, "--dry-run"])
    assert namespace.dry_run is True
    assert validate(config_from_namespace(namespace, {})) == parse()


def test_config_error_is_a_tarn_error() -> None:
    assert issubclass(ConfigError, TarnError)
    parser = ConfigArgumentParser(prog="tarn")
    add_config_arguments(parser)
    with pytest.raises(ConfigError, match=r"^--port: invalid int value"):
        parser.parse_args(["--port", "x"])


# ---- bad input: each fails with one line that names the flag


BAD: list[tuple[str, list[str], dict[str, str], str]] = [
    # (id, argv after BASE, environ, the flag the message must name)
    ("min-above-max", ["--min-instances", "5", "--max-instances", "2"], {}, "--min-instances"),
    ("min-negative", ["--min-instances", "-1"], {}, "--min-instances"),
    (
        "max-zero",
        ["--min-instances", "0", "--scale-to-zero-after", "60", "--max-instances", "0"],
        {},
        "--max-instances",
    ),
    ("min-zero-without-grace", ["--min-instances", "0"], {}, "--min-instances"),
    ("cache-dir-relative", ["--model-cache-dir", "cache"], {}, "--model-cache-dir"),
    ("cache-dir-dotdot", ["--model-cache-dir", "/var/../etc"], {}, "--model-cache-dir"),
    ("cache-bound-zero", ["--model-cache-max-gib", "0"], {}, "--model-cache-max-gib"),
    ("cache-bound-nan", ["--model-cache-max-gib", "nan"], {}, "--model-cache-max-gib"),
    ("grace-without-min-zero", ["--scale-to-zero-after", "60"], {}, "--scale-to-zero-after"),
    ("grace-negative", ["--min-instances", "0", "--scale-to-zero-after", "-5"], {}, "--scale-to-zero-after"),
    ("scale-up-above-1", ["--scale-up", "1.5"], {}, "--scale-up"),
    ("scale-down-negative", ["--scale-down", "-0.1"], {}, "--scale-down"),
    ("scale-up-nan", ["--scale-up", "nan"], {}, "--scale-up"),
    ("scale-up-not-above-down", ["--scale-up", "0.3", "--scale-down", "0.3"], {}, "--scale-up"),
    ("grpc-equals-http", ["--grpc-port", "8000"], {}, "--grpc-port"),
    ("metrics-equals-grpc", ["--metrics-port", "8001"], {}, "--metrics-port"),
    ("am-equals-http", ["--am-port", "8000"], {}, "--am-port"),
    ("port-zero", ["--port", "0"], {}, "--port"),
    ("port-too-high", ["--metrics-port", "70000"], {}, "--metrics-port"),
    ("port-not-a-number", ["--port", "http"], {}, "--port"),
    ("tp-zero", ["--tp", "0"], {}, "--tp"),
    ("pp-negative", ["--pp", "-2"], {}, "--pp"),
    ("gpus-below-world", ["--tp", "2", "--pp", "2", "--gpus-per-instance", "3"], {}, "--gpus-per-instance"),
    ("repo-s3", ["--model-repository", "s3://bucket/models"], {}, "--model-repository"),
    ("repo-file-scheme", ["--model-repository", "file:///models"], {}, "--model-repository"),
    ("repo-relative", ["--model-repository", "models/resnet"], {}, "--model-repository"),
    ("repo-dotdot", ["--model-repository", "/mnt/hdfs/../etc"], {}, "--model-repository"),
    ("repo-semicolon", ["--model-repository", "/models;rm -rf /"], {}, "--model-repository"),
    ("repo-dollar", ["--model-repository", "hdfs:///m$(id)"], {}, "--model-repository"),
    ("repo-backtick", ["--model-repository", "/m`id`"], {}, "--model-repository"),
    ("repo-newline", ["--model-repository", "/m\nx"], {}, "--model-repository"),
    ("repo-quote", ["--model-repository", "/m'x"], {}, "--model-repository"),
    ("repo-bad-authority", ["--model-repository", "hdfs://nn_1:x/m"], {}, "--model-repository"),
    ("image-pipe", ["--image", "triton|sh"], {}, "--image"),
    ("image-ampersand", ["--image", "triton&&id"], {}, "--image"),
    ("image-missing-docker", ["--image", ""], {}, "--image"),
    ("tag-angle", ["--placement-tag", "nv<x"], {}, "--placement-tag"),
    ("tag-slash", ["--placement-tag", "nv/idia"], {}, "--placement-tag"),
    ("env-no-equals", ["--env", "TRITON_LOG_VERBOSE"], {}, "--env"),
    ("env-empty-key", ["--env", "=1"], {}, "--env"),
    ("env-digit-key", ["--env", "1A=1"], {}, "--env"),
    ("env-dash-key", ["--env", "A-B=1"], {}, "--env"),
    ("env-twice", ["--env", "A=1", "--env", "A=2"], {}, "--env"),
    ("env-runtime-override", ["--env", "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE=evil"], {}, "--env"),
    ("env-command-substitution", ["--env", "A=$(id)"], {}, "--env"),
    ("env-carries-token", ["--token", TOKEN, "--env", f"API_KEY={TOKEN}"], {}, "--env"),
    ("env-tarn-token-key", ["--env", "TARN_TOKEN=x"], {}, "--env"),
    ("cooldown-negative", ["--cooldown", "-1"], {}, "--cooldown"),
    ("secrets-s3", ["--secrets", "s3://bucket/hf.jceks"], {}, "--secrets"),
    ("secrets-relative", ["--secrets", "hf.jceks"], {}, "--secrets"),
    ("secrets-metachar", ["--secrets", "/s/hf.jceks;id"], {}, "--secrets"),
    ("zk-path-relative", ["--zk-path", "services/triton"], {}, "--zk-path"),
    ("zk-path-trailing-slash", ["--zk-path", "/services/"], {}, "--zk-path"),
    ("zk-path-reserved", ["--zk-path", "/zookeeper/x"], {}, "--zk-path"),
    ("zk-ensemble-chroot", ["--zk-ensemble", "zk1:2181/tarn"], {}, "--zk-ensemble"),
    ("zk-ensemble-port", ["--zk-ensemble", "zk1:99999"], {}, "--zk-ensemble"),
    ("token-empty", ["--token", ""], {}, "--token"),
    ("token-space", ["--token", "two words"], {}, "--token"),
    ("token-and-file", ["--token", TOKEN, "--token-file", "/etc/tarn/token"], {}, "--token-file"),
    ("address", ["--address", "everywhere"], {}, "--address"),
    ("service-name-upper", ["--service-name", "Tarn"], {}, "--service-name"),
    ("queue-metachar", ["--queue", "q;x"], {}, "--queue"),
    ("runtime-unknown", ["--runtime", "podman"], {}, "--runtime"),
    ("stride-needed", ["--no-anti-affinity", "--max-instances", "3"], {}, "--port-stride"),
    (
        "stride-clash",
        ["--no-anti-affinity", "--port-stride", "1", "--max-instances", "2"],
        {},
        "--port-stride",
    ),
    (
        "stride-hits-am",
        ["--no-anti-affinity", "--port-stride", "888", "--max-instances", "2"],
        {},
        "--port-stride",
    ),
    (
        "stride-overflow",
        ["--port", "65000", "--port-stride", "1000", "--max-instances", "2"],
        {},
        "--port-stride",
    ),
    ("memory-zero", ["--memory-mb", "0"], {}, "--memory-mb"),
    ("lifetime-zero", ["--lifetime", "0"], {}, "--lifetime"),
    ("mount-relative", ["--docker-mounts", "data:/data"], {}, "--docker-mounts"),
    ("mount-mode", ["--docker-mounts", "/a:/b:rx"], {}, "--docker-mounts"),
    ("ports-on-host-network", ["--docker-ports", "8000:8000"], {}, "--docker-ports"),
    ("ports-bad", ["--docker-network", "bridge", "--docker-ports", "80:x"], {}, "--docker-ports"),
    ("network-metachar", ["--docker-network", "host;id"], {}, "--docker-network"),
    ("ranger-service-space", ["--ranger-service", "a b"], {}, "--ranger-service"),
    ("ranger-audit-env", [], {"RANGER_AUDIT": "maybe"}, "RANGER_AUDIT"),
    ("unknown-flag", ["--gpu", "1"], {}, "--gpu"),
    ("abbreviated-flag", ["--model", "/m"], {}, "--model"),
    ("python-metachar", ["--python", "python3;id"], {}, "--python"),
]


@pytest.mark.parametrize(
    ("argv", "environ", "flag"), [case[1:] for case in BAD], ids=[case[0] for case in BAD]
)
def test_bad_input_names_the_flag_in_one_line(argv: list[str], environ: dict[str, str], flag: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(*argv, environ=environ)
    message = str(caught.value)
    assert flag in message
    assert "\n" not in message
    assert "\r" not in message
    assert TOKEN not in message


def test_missing_model_repository() -> None:
    with pytest.raises(ConfigError, match=r"^--model-repository: is required"):
        parse_config(["--image", IMAGE], {})


def test_validate_checks_hand_built_configs() -> None:
    good = TarnConfig(model_repository="hdfs:///models", image=IMAGE)
    assert validate(good) is good
    with pytest.raises(ConfigError, match=r"^--min-instances"):
        validate(replace(good, min_instances=9))
    with pytest.raises(ConfigError, match=r"^--docker-mounts"):
        validate(replace(good, docker_mounts=("/a:/b",)))
