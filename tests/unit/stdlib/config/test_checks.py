"""The checks name every flag from the declaration: no TARN flag is spelled out in the checks or the
argv code, every option a check names is declared, every pair (name, c.value) agrees, and every
check runs; and what each check refuses, in one line that names the flag (a few, such as a port
that is not a number or an unknown flag, the parser of tarn.stdlib.config.argv refuses)."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest

from tarn.errors import ConfigError
from tarn.stdlib.config import OPTIONS, TarnConfig, argv, checks, flag_of, parse_config, validate
from tests.support.config import IMAGE, TOKEN, parse

SPELLED_FLAG = re.compile(r"(?<![\w-])--?[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
DECLARED_FLAGS = {name for item in OPTIONS for name in flag_of(item).names}
OPTION_NAMES = {item.name for item in OPTIONS}
NAMING = {"fail", "cli_flag", "_require_safe", "_require_match", "_require_storage_path"}


def tree(module: object) -> ast.Module:
    return ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())


def spelled_flags(module: object) -> list[str]:
    """The declared flags written in the strings of ``module``'s code (its docstrings may name them)."""
    parsed = tree(module)
    documented = {
        id(node.body[0].value)
        for node in ast.walk(parsed)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    texts = [
        node.value
        for node in ast.walk(parsed)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documented
    ]
    return [word for text in texts for word in SPELLED_FLAG.findall(text) if word in DECLARED_FLAGS]


@pytest.mark.parametrize("module", [checks, argv], ids=lambda m: m.__name__)
def test_no_flag_is_spelled_out(module: object) -> None:
    assert spelled_flags(module) == []


def test_the_rule_catches_a_spelled_flag() -> None:
    words = SPELLED_FLAG.findall("is above --max-instances (4); give -rs, --docker-* or non-printable --help")
    assert [w for w in words if w in DECLARED_FLAGS] == ["--max-instances", "-rs"]


def named_options() -> list[str]:
    """The option names the checks pass to fail, cli_flag and the _require helpers."""
    return [
        str(node.args[0].value)
        for node in ast.walk(tree(checks))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in NAMING
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]


def test_every_named_option_is_declared() -> None:
    names = named_options()
    assert len(names) > 50
    assert set(names) - OPTION_NAMES == set()


def test_every_name_value_pair_agrees() -> None:
    """``("tp", c.tp)`` in a loop over options: the name is the field the value comes from."""
    pairs = [
        (str(node.elts[0].value), node.elts[1].attr)
        for node in ast.walk(tree(checks))
        if isinstance(node, ast.Tuple)
        and len(node.elts) == 2
        and isinstance(node.elts[0], ast.Constant)
        and isinstance(node.elts[1], ast.Attribute)
        and isinstance(node.elts[1].value, ast.Name)
        and node.elts[1].value.id == "c"
    ]
    assert len(pairs) >= 8
    assert [(name, attribute) for name, attribute in pairs if name != attribute] == []


def test_every_check_runs() -> None:
    defined = {name for name in vars(checks) if name.startswith("_check_")}
    assert defined == {check.__name__ for check in checks._CHECKS}


# ---- bad input: each fails with one line that names the flag


KEYTAB = "/etc/security/keytabs/tarn.service.keytab"
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
    ("scale-on-unknown", ["--scale-on", "gpu"], {}, "--scale-on"),
    (
        "scale-on-streams-without-front",
        ["--scale-on", "streams", "--scale-up-at", "8", "--scale-down-at", "2"],
        {},
        "--openai-port",
    ),
    ("scale-on-queue-without-up-at", ["--scale-on", "queue", "--scale-down-at", "1"], {}, "--scale-up-at"),
    ("scale-on-queue-without-down-at", ["--scale-on", "queue", "--scale-up-at", "4"], {}, "--scale-down-at"),
    ("scale-up-at-with-load", ["--scale-up-at", "8"], {}, "--scale-up-at"),
    ("scale-down-at-with-load", ["--scale-down-at", "2"], {}, "--scale-down-at"),
    (
        "scale-up-at-not-above-down-at",
        ["--scale-on", "queue", "--scale-up-at", "2", "--scale-down-at", "2"],
        {},
        "--scale-up-at",
    ),
    (
        "scale-down-at-negative",
        ["--scale-on", "queue", "--scale-up-at", "2", "--scale-down-at", "-1"],
        {},
        "--scale-down-at",
    ),
    (
        "scale-up-at-nan",
        ["--scale-on", "queue", "--scale-up-at", "nan", "--scale-down-at", "1"],
        {},
        "--scale-up-at",
    ),
    (
        "scale-up-at-inf",
        ["--scale-on", "queue", "--scale-up-at", "inf", "--scale-down-at", "1"],
        {},
        "--scale-up-at",
    ),
    ("grpc-equals-http", ["--grpc-port", "8000"], {}, "--grpc-port"),
    ("metrics-equals-grpc", ["--metrics-port", "8001"], {}, "--metrics-port"),
    ("am-equals-http", ["--am-port", "8000"], {}, "--am-port"),
    ("port-zero", ["--port", "0"], {}, "--port"),
    ("port-too-high", ["--metrics-port", "70000"], {}, "--metrics-port"),
    ("port-not-a-number", ["--port", "http"], {}, "--port"),
    ("openai-equals-http", ["--openai-port", "8000"], {}, "--openai-port"),
    ("openai-equals-am", ["--openai-port", "8888"], {}, "--openai-port"),
    ("openai-port-zero", ["--openai-port", "0"], {}, "--openai-port"),
    ("openai-port-too-high", ["--openai-port", "65536"], {}, "--openai-port"),
    ("openai-port-not-a-number", ["--openai-port", "v1"], {}, "--openai-port"),
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
    ("unready-negative", ["--replace-unready-after", "-1"], {}, "--replace-unready-after"),
    ("unready-too-soon", ["--replace-unready-after", "5"], {}, "--replace-unready-after"),
    (
        "unready-within-three-ticks",
        ["--tick-seconds", "20", "--replace-unready-after", "30"],
        {},
        "--replace-unready-after",
    ),
    ("unready-not-a-number", ["--replace-unready-after", "soon"], {}, "--replace-unready-after"),
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
    ("max-generations-negative", ["--openai-max-generations", "-1"], {}, "--openai-max-generations"),
    ("admission-unknown", ["--openai-admission", "lottery"], {}, "--openai-admission"),
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
        "stride-hits-openai",  # instance 1's HTTP port would be instance 0's front
        ["--no-anti-affinity", "--port-stride", "10", "--max-instances", "2", "--openai-port", "8010"],
        {},
        "--port-stride",
    ),
    (
        "stride-lifts-openai-over-65535",
        ["--port-stride", "10", "--max-instances", "2", "--openai-port", "65530"],
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
    ("principal-without-keytab", ["--service-principal", "tarn/_HOST@TARN.LAB"], {}, "--service-keytab"),
    ("keytab-without-principal", ["--service-keytab", KEYTAB], {}, "--service-principal"),
    (
        "principal-no-realm",
        ["--service-principal", "tarn/_HOST", "--service-keytab", KEYTAB],
        {},
        "--service-principal",
    ),
    (
        "principal-realm-lower",
        ["--service-principal", "tarn/_HOST@tarn.lab", "--service-keytab", KEYTAB],
        {},
        "--service-principal",
    ),
    (
        "principal-one-host",
        ["--service-principal", "tarn/worker1@TARN.LAB", "--service-keytab", KEYTAB],
        {},
        "--service-principal",
    ),
    (
        "keytab-relative",
        ["--service-principal", "tarn@TARN.LAB", "--service-keytab", "tarn.keytab"],
        {},
        "--service-keytab",
    ),
    (
        "keytab-metachar",
        ["--service-principal", "tarn@TARN.LAB", "--service-keytab", "/k;id"],
        {},
        "--service-keytab",
    ),
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


def test_scale_on_needs_its_thresholds_and_names_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        parse("--scale-on", "streams", "--openai-port", "9100")
    assert str(caught.value).startswith(
        "--scale-on: streams needs --scale-up-at; give --scale-up-at and --scale-down-at"
    )
    with pytest.raises(
        ConfigError, match=r"^--scale-on: streams without --openai-port: .*give --openai-port PORT"
    ):
        parse("--scale-on", "streams", "--scale-up-at", "8", "--scale-down-at", "2")


@pytest.mark.parametrize(
    ("argv", "thresholds"),
    [
        ([], (0.8, 0.2)),
        (["--scale-on", "queue", "--scale-up-at", "4", "--scale-down-at", "0"], (4.0, 0.0)),
        (
            ["--scale-on", "streams", "--openai-port", "9100", "--scale-up-at", "8", "--scale-down-at", "2"],
            (8.0, 2.0),
        ),
    ],
)
def test_scale_thresholds_are_in_the_signal_unit(argv: list[str], thresholds: tuple[float, float]) -> None:
    assert parse(*argv).scale_thresholds == thresholds


def test_validate_checks_hand_built_configs() -> None:
    good = TarnConfig(model_repository="hdfs:///models", image=IMAGE)
    assert validate(good) is good
    with pytest.raises(ConfigError, match=r"^--min-instances"):
        validate(replace(good, min_instances=9))
    with pytest.raises(ConfigError, match=r"^--docker-mounts"):
        validate(replace(good, docker_mounts=("/a:/b",)))
