"""The options as argv (tarn.stdlib.config.argv): the seeds' example, environment fallbacks, every
kind of good input, the argv a config renders back to (never the token), the CLI reusing the
parser. What the declaration gives (defaults, notes, ports, the token unshown) is tested in
test_declaration.py, what the checks refuse in test_checks.py."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from tarn.errors import ConfigError, TarnError
from tarn.stdlib.api_token import Secret
from tarn.stdlib.config import (
    ConfigArgumentParser,
    add_config_arguments,
    config_from_namespace,
    config_to_argv,
    parse_config,
    validate,
)
from tests.support.config import BASE, IMAGE, TOKEN, parse

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
        ([], {}, "openai_port", None),
        (["--openai-port", "9000"], {}, "openai_port", 9000),
    ],
)  # fmt: skip
def test_good_input(argv: list[str], environ: dict[str, str], attribute: str, expected: object) -> None:
    assert getattr(parse(*argv, environ=environ), attribute) == expected


@pytest.mark.parametrize(
    "argv",
    [
        SEEDS_EXAMPLE,
        [*BASE, "--runtime", "process", "--no-anti-affinity", "--port-stride", "10", "--ranger-service", "r"],
        [*BASE, "--no-anti-affinity", "--port-stride", "10", "--openai-port", "9000"],
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
