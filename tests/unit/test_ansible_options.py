"""Each option is declared once (a TarnConfig field): the module option, the doc fragment entry and
the generated files (tarn.ansible_options), the CLI flag and the argv round trip
(tarn.stdlib.config.argv) and the launcher's parser (tarn.stdlib.launcher.main) all come from that
one list."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from tarn import ansible_options
from tarn.stdlib.api_token import Secret
from tarn.stdlib.config import (
    LAUNCHER_OPTIONS,
    OPTIONS,
    ConfigArgumentParser,
    TarnConfig,
    add_config_arguments,
    config_to_argv,
    flag_of,
    parse_config,
)

BASE = TarnConfig(model_repository="hdfs:///models", image="registry/triton:24.08", user="tarn")

# A valid value other than the default, for every option: an option missing here fails the test.
SAMPLES: dict[str, Any] = {
    "model_repository": "/mnt/hdfs/models",
    "model_cache_dir": "/var/lib/tarn/model-cache",
    "model_cache_max_gib": 2.5,
    "model_verify": "recompute",
    "image": "registry/triton:25.01",
    "runtime": "process",
    "python": "/usr/bin/python3",
    "service_name": "svc-a",
    "user": "alice",
    "queue": "gpu",
    "lifetime": 3600,
    "service_principal": "tarn/_HOST@EXAMPLE.COM",
    "service_keytab": "/etc/security/keytabs/tarn.service.keytab",
    "jar": None,  # accepted and ignored: never rendered
    "port": 9000,
    "grpc_port": 9001,
    "metrics_port": 9002,
    "am_port": 9888,
    "openai_port": 9100,
    "openai_max_generations": 4,
    "openai_admission": "fifo",
    "address": "10.0.0.1",
    "token": None,  # never rendered (the controller gets --token-file)
    "token_file": "/etc/tarn/token",
    "tp": 2,
    "pp": 2,
    "gpus_per_instance": 8,
    "memory_mb": 8192,
    "vcores": 4,
    "controller_memory_mb": 512,
    "controller_vcores": 2,
    "secrets": "hdfs:///user/tarn/hf.jceks",
    "env": (("A", "1"), ("B", "x=y")),
    "placement_tag": "a100",
    "anti_affinity": False,
    "port_stride": 10,
    "scale_up": 0.7,
    "scale_down": 0.1,
    "scale_on": "streams",
    "scale_up_at": 8.0,
    "scale_down_at": 1.5,
    "min_instances": 2,
    "max_instances": 3,
    "scale_to_zero_after_s": 600,
    "cooldown_ms": 5000,
    "tick_seconds": 1.0,
    "concurrency_per_instance": 8.0,
    "drain_timeout_s": 45,
    "replace_unready_after_s": 300,
    "zk_ensemble": "zk1:2181,zk2:2181",
    "zk_path": "/services/tarn/a",
    "ranger_service": "triton_prod",
    "ranger_app_id": "tarn-a",
    "ranger_audit": True,
    "ranger_conf_dir": "/etc/ranger/triton/conf",
    "docker_network": "bridge",
    "docker_privileged": True,
    "docker_delayed_removal": True,
    "docker_mounts": ("/data:/data:rw",),
    "docker_ports": ("8000:8000",),
    "container_executor_cfg": "/etc/hadoop/conf/container-executor.cfg",
}
NAMES = [item.name for item in OPTIONS]


def sample(name: str) -> TarnConfig:
    return replace(BASE, **{**_companions(name), name: SAMPLES[name]})


def test_every_option_has_a_sample() -> None:
    assert set(SAMPLES) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_cli_flag_parses_and_renders_back(name: str) -> None:
    flag = flag_of(next(f for f in OPTIONS if f.name == name))
    parser = ConfigArgumentParser(prog="tarn")
    add_config_arguments(parser)
    assert {a.dest for a in parser._actions if flag.flag in a.option_strings} == {name}
    if SAMPLES[name] is None:
        return
    config = sample(name)
    rendered = config_to_argv(config)
    assert flag.flag in rendered
    assert getattr(parse_config(rendered, {}), name) == getattr(config, name)


@pytest.mark.parametrize("name", NAMES)
def test_module_option_and_doc_fragment_agree(name: str) -> None:
    flag = flag_of(next(f for f in OPTIONS if f.name == name))
    specs = ansible_options.module_flags()
    documented = yaml.safe_load(_doc_fragment())["options"]
    if not flag.module:
        assert flag.module_name not in specs
        return
    assert specs[flag.module_name] is flag
    spec = ansible_options.argument_spec(flag.module_name, flag)
    assert documented[flag.module_name]["type"] == spec["type"]
    if SAMPLES[name] is None:
        return
    config = sample(name)
    value: Any = getattr(config, name)
    if name == "env":
        value = dict(value)
    elif isinstance(value, tuple):
        value = list(value)
    params = {"service_name": BASE.service_name, "user": BASE.user, "model_repository": BASE.model_repository}
    params |= {"image": BASE.image, **_companions(name), flag.module_name: value}
    from_module = ansible_options.config_from_params(params, {}, "tarn_deploy")
    assert getattr(from_module, name) == getattr(config, name)


def test_module_token_reaches_the_config_unshown() -> None:
    params = {"model_repository": "hdfs:///m", "image": "i:1", "token": "s3cret-token"}
    config = ansible_options.config_from_params(params, {}, "tarn_deploy")
    assert config.token == Secret("s3cret-token")


@pytest.mark.parametrize("name", LAUNCHER_OPTIONS)
def test_launcher_parser_takes_its_subset(name: str) -> None:
    from tarn.stdlib.launcher import main as launcher

    config = sample(name)
    argv = config_to_argv(config, only=LAUNCHER_OPTIONS)
    parsed = launcher.parse_args(argv)
    assert getattr(parsed, name) == getattr(config, name)


def test_generated_files_are_up_to_date() -> None:
    """Ansible's static texts: regenerate with `make generate` after changing the declaration."""
    assert ansible_options.ARGUMENT_SPEC_FILE.read_text() == ansible_options.argument_spec_source()
    assert ansible_options.DOC_FRAGMENT_FILE.read_text() == ansible_options.doc_fragment_source()


def _doc_fragment() -> str:
    text = ansible_options.DOC_FRAGMENT_FILE.read_text()
    return text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0]


def _companions(name: str) -> dict[str, Any]:
    """Options a sample needs beside it to be valid."""
    needs: dict[str, dict[str, Any]] = {
        "docker_ports": {"docker_network": "bridge"},
        "anti_affinity": {"port_stride": 10},
        "ranger_conf_dir": {"ranger_service": "triton_prod"},
        "scale_to_zero_after_s": {"min_instances": 0},
        "scale_on": {"openai_port": 9100, "scale_up_at": 8.0, "scale_down_at": 2.0},
        "scale_up_at": {"scale_on": "queue", "scale_down_at": 2.0},
        "scale_down_at": {"scale_on": "queue", "scale_up_at": 8.0},
        "service_principal": {"service_keytab": "/etc/security/keytabs/tarn.service.keytab"},
        "service_keytab": {"service_principal": "tarn/_HOST@EXAMPLE.COM"},
    }
    return needs.get(name, {})
