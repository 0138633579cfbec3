"""`tarn haproxy-sync`'s command line (tarn.haproxy.command): a bad option names its flag; the
token from the environment or a file."""

from __future__ import annotations

import argparse

import pytest

from tarn.errors import ConfigError
from tarn.haproxy import command
from tarn.haproxy.runtime import RuntimeApi


def namespace(**given: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args([])
    for key, value in given.items():
        setattr(args, key, value)
    return args


@pytest.mark.parametrize(
    ("given", "flag"),
    [
        ({}, "--zk-ensemble / --controller-url"),
        ({"zk_ensemble": "zk:2181", "controller_url": "http://c:8888"}, "--zk-ensemble / --controller-url"),
        ({"zk_ensemble": "zk:2181;rm -rf"}, "--zk-ensemble"),
        ({"zk_ensemble": "zk:2181", "zk_path": "services"}, "--zk-path"),
        ({"controller_url": "ftp://c"}, "--controller-url"),
        ({"controller_url": "http://c:8888/?token=x"}, "--controller-url"),
        ({"controller_url": "http://c:8888", "interval": 0}, "--interval"),
        ({"controller_url": "http://c:8888", "token": "a", "token_file": "/f"}, "--token / --token-file"),
        ({"zk_ensemble": "zk:2181", "backend": "a b"}, "--backend"),
        ({"zk_ensemble": "zk:2181", "socket": "haproxy.sock"}, "--socket"),
        ({"zk_ensemble": "zk:2181", "repair_interval": -1.0}, "--repair-interval"),
        ({"zk_ensemble": "zk:2181", "openai_backend": "v1 backend"}, "--openai-backend"),
        ({"zk_ensemble": "zk:2181", "openai_backend": "triton_backend"}, "--openai-backend"),
    ],
)
def test_bad_options_name_the_flag(given: dict[str, object], flag: str) -> None:
    with pytest.raises(ConfigError, match=f"^{flag}"):
        command.options_from(namespace(**given), {})


def test_token_from_the_environment_or_a_file(tmp_path) -> None:
    options = command.options_from(namespace(controller_url="http://c:8888/"), {"TARN_TOKEN": "s3cret"})
    assert options.source.token is not None
    assert options.source.token.reveal() == "s3cret"
    assert options.source.controller_url == "http://c:8888"
    assert "s3cret" not in repr(options)
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    options = command.options_from(namespace(controller_url="http://c:8888", token_file=str(token_file)), {})
    assert options.source.token is not None
    assert options.source.token.reveal() == "from-file"
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match=r"^--token-file"):
        command.options_from(namespace(controller_url="http://c:8888", token_file=str(empty)), {})


def test_zookeeper_options() -> None:
    options = command.options_from(namespace(zk_ensemble="zk1:2181,zk2:2181"), {})
    assert (options.source.zk_ensemble, options.source.zk_path, options.source.token) == (
        "zk1:2181,zk2:2181",
        "/services/triton/instances",
        None,
    )


def test_the_openai_backend_is_synced_beside_tritons() -> None:
    api = RuntimeApi("/run/haproxy.sock")
    alone = command.options_from(namespace(zk_ensemble="zk:2181"), {})
    assert [(s.backend, s.select.__name__) for s in command.backend_syncs(alone, api)] == [
        ("triton_backend", "triton_endpoints")
    ]
    both = command.options_from(namespace(zk_ensemble="zk:2181", openai_backend="openai_backend"), {})
    assert [(s.backend, s.select.__name__) for s in command.backend_syncs(both, api)] == [
        ("triton_backend", "triton_endpoints"),
        ("openai_backend", "front_endpoints"),
    ]
