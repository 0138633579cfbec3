"""The service AM's resource-types.xml on a Kerberized cluster: the RM's resource types, and HDFS
tokens looked up by host name (so that the AM's NameNode connections use its keytab)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tarn.service.am_conf import USE_IP, am_conf_file, ha_nameservice, ha_token_warning, yarn_service_dir
from tarn.stdlib.hadoop_site import read_properties

RM_CONF = {
    "yarn.resource-types": "yarn.io/gpu",
    "yarn.resource-types.yarn.io/gpu.units": "",
    "yarn.resource-types.memory-mb.increment-allocation": "512",
    "yarn.resourcemanager.principal": "rm/_HOST@TARN.LAB",
    "hadoop.security.token.service.use_ip": "true",
}


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        (None, "/user/tarn/.yarn/services/demo"),
        ("/apps/yarn-services/", "/apps/yarn-services/services/demo"),
        ("hdfs://nn.example:8020/apps/ys", "/apps/ys/services/demo"),
    ],
)
def test_the_service_dir_is_yarns(base: str | None, expected: str) -> None:
    conf = {} if base is None else {"yarn.service.base.path": base}
    assert yarn_service_dir(conf, "tarn", "demo") == expected


def test_the_file_holds_the_rms_resource_types_and_host_name_token_lookups(tmp_path: Path) -> None:
    path, data = am_conf_file(RM_CONF, "tarn", "demo")
    assert path == "/user/tarn/.yarn/services/demo/conf/resource-types.xml"
    written = tmp_path / "resource-types.xml"
    written.write_bytes(data)
    assert read_properties(written) == {
        "yarn.resource-types": "yarn.io/gpu",
        "yarn.resource-types.yarn.io/gpu.units": "",
        "yarn.resource-types.memory-mb.increment-allocation": "512",
        USE_IP: "false",  # the RM's own value is not copied: the AM must differ from it
    }


def test_the_same_configuration_gives_the_same_bytes() -> None:
    shuffled = dict(reversed(list(RM_CONF.items())))
    assert am_conf_file(RM_CONF, "tarn", "demo") == am_conf_file(shuffled, "tarn", "demo")


def test_a_cluster_without_resource_types_still_gets_the_setting(tmp_path: Path) -> None:
    data = am_conf_file({}, "tarn", "demo")[1]
    (tmp_path / "r.xml").write_bytes(data)
    assert read_properties(tmp_path / "r.xml") == {USE_IP: "false"}


# ---- HDFS HA: the AM keeps the submission's token there; the operator is told when it lapses


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"fs.defaultFS": "hdfs://prod", "dfs.nameservices": "prod"}, "prod"),
        ({"fs.defaultFS": "hdfs://prod", "dfs.nameservices": "other, prod"}, "prod"),
        ({"fs.defaultFS": "hdfs://prod/", "dfs.client.failover.proxy.provider.prod": "x.Provider"}, "prod"),
        ({"fs.defaultFS": "hdfs://nn1.example.com:8020", "dfs.nameservices": "prod"}, None),
        ({"fs.defaultFS": "hdfs://nn1.example.com"}, None),  # one NameNode on the default port
        ({"fs.defaultFS": "s3a://bucket", "dfs.nameservices": "bucket"}, None),
        ({}, None),
    ],
)
def test_ha_nameservice(conf: dict[str, str], expected: str | None) -> None:
    assert ha_nameservice(conf) == expected


def test_the_warning_names_the_lifetime_the_namenode_gives_and_the_way_out() -> None:
    conf = {"fs.defaultFS": "hdfs://prod", "dfs.nameservices": "prod",
            "dfs.namenode.delegation.token.max-lifetime": "172800000"}  # fmt: skip
    warning = ha_token_warning(conf, "llm")
    assert warning is not None
    assert warning.startswith("service llm: HDFS is HA (nameservice prod)")
    assert "2 days after this submission" in warning
    assert "Stop and start the service" in warning
    assert ha_token_warning({"fs.defaultFS": "hdfs://nn:8020"}, "llm") is None
