"""The declaration (tarn.stdlib.config.declaration): the seeds' defaults, the notes on what is
ignored, the instances' ports, a token that never shows, and cli_flag (how the checks and notes
name an option). The configs are parsed from argv (tests/support/config.py)."""

from __future__ import annotations

import pytest

from tarn.stdlib.config import OPTIONS, cli_flag, flag_of, parse_config
from tests.support.config import TOKEN, parse


@pytest.mark.parametrize(
    ("name", "flag"),
    [
        ("min_instances", "--min-instances"),
        ("anti_affinity", "--no-anti-affinity"),  # the flag, not the field, is what a user types
        ("scale_to_zero_after_s", "--scale-to-zero-after"),
        ("cooldown_ms", "--cooldown"),
        ("tp", "--tp"),  # the flag TARN writes, not its alias --tensor-parallelism
        ("ranger_service", "--ranger-service"),
    ],
)
def test_cli_flag(name: str, flag: str) -> None:
    assert cli_flag(name) == flag


def test_every_option_has_its_first_flag() -> None:
    assert {item.name: cli_flag(item.name) for item in OPTIONS} == {
        item.name: flag_of(item).names[0] for item in OPTIONS
    }


def test_an_undeclared_name_is_refused() -> None:
    with pytest.raises(KeyError, match="'min_instance' is no TarnConfig option"):
        cli_flag("min_instance")


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
    assert {p.openai for p in map(config.instance_ports, range(3))} == {None}  # no front by default


def test_the_openai_front_port_follows_the_stride_like_tritons() -> None:
    shared = ("--no-anti-affinity", "--port-stride", "10", "--max-instances", "3")
    config = parse(*shared, "--openai-port", "9100")
    assert [config.instance_ports(i).openai for i in range(3)] == [9100, 9110, 9120]
    assert parse("--openai-port", "9000").instance_ports(5).openai == 9000  # one instance per node


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
