"""Ranger's plugin settings from ranger-triton-security.xml (tarn.ranger.settings): Ranger's property
names and defaults, and one-line errors that name the property and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tarn.errors import ConfigError
from tarn.ranger.settings import PluginSettings, plugin_id, plugin_settings, settings_of, shipped_files
from tarn.stdlib.config import TarnConfig, parse_config
from tests.support.ranger_documents import URL, write_xml

P = "ranger.plugin.triton."


def test_ranger_s_defaults() -> None:
    settings = plugin_settings(URL, "triton_prod", "tarn")
    assert settings == PluginSettings(service="triton_prod", app_id="tarn", rest_urls=("http://ranger:6080",))
    assert (settings.poll_interval_s, settings.cache_dir, settings.connect_timeout_s) == (30.0, None, 5.0)


def test_every_property() -> None:
    settings = plugin_settings(
        {
            P + "policy.rest.url": " https://r1:6182/ , http://r2:6080 ",
            P + "service.name": "triton_prod",
            P + "policy.pollIntervalMs": "500",
            P + "policy.cache.dir": "/etc/ranger/triton_prod/policycache",
            P + "super.users": "admin, ops ,",
            P + "super.groups": "root",
            P + "access.cluster.name": "prod",
            P + "policy.rest.client.connection.timeoutMs": "2000",
            P + "policy.rest.client.read.timeoutMs": "7000",
        },
        "triton_prod",
        "tarn",
    )
    assert settings.rest_urls == ("https://r1:6182", "http://r2:6080")
    assert settings.poll_interval_s == 0.5
    assert settings.cache_dir == "/etc/ranger/triton_prod/policycache"
    assert (settings.super_users, settings.super_groups) == (frozenset({"admin", "ops"}), frozenset({"root"}))
    assert (settings.cluster_name, settings.connect_timeout_s, settings.read_timeout_s) == ("prod", 2.0, 7.0)
    assert settings.notes == ()


def test_notes_for_what_is_read_but_not_honoured() -> None:
    settings = plugin_settings(
        {**URL, P + "service.name": "triton_dev", P + "policy.rest.ssl.config.file": "/etc/ranger/ssl.xml"},
        "triton_prod",
        "tarn",
    )
    assert settings.service == "triton_prod", "--ranger-service wins"
    assert [n.split(" ", 1)[0] for n in settings.notes] == [
        P + "service.name",
        P + "policy.rest.ssl.config.file",
    ]


@pytest.mark.parametrize(
    ("properties", "words"),
    [
        ({}, "no ranger.plugin.triton.policy.rest.url; add it"),
        ({P + "policy.rest.url": " , "}, "no ranger.plugin.triton.policy.rest.url"),
        ({P + "policy.rest.url": "ranger:6080"}, "is not an http(s) URL"),
        ({P + "policy.rest.url": "ftp://ranger"}, "is not an http(s) URL"),
        ({P + "policy.rest.url": "http://admin:pw@ranger:6080"}, "carries credentials; remove them"),
        ({**URL, P + "policy.pollIntervalMs": "30s"}, "pollIntervalMs '30s' is not a number of milliseconds"),
        ({**URL, P + "policy.pollIntervalMs": "50"}, ">= 100"),
        ({**URL, P + "policy.rest.client.read.timeoutMs": "0"}, "read.timeoutMs '0'"),
    ],
)
def test_errors_name_the_file_the_property_and_the_fix(properties: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        plugin_settings(properties, "triton_prod", "tarn")
    message = str(raised.value)
    assert message.startswith("--ranger-conf-dir: ranger-triton-security.xml: ")
    assert words in message
    assert "pw" not in message


def config(*extra: str) -> TarnConfig:
    return parse_config(["--model-repository", "hdfs:///m", "--runtime", "process", *extra], {})


def test_settings_of(tmp_path: Path) -> None:
    assert settings_of(config()) is None, "Ranger is off without --ranger-service"
    with pytest.raises(
        ConfigError, match=r"^--ranger-service: set, but no policy REST URL .*--ranger-conf-dir"
    ):
        settings_of(config("--ranger-service", "triton_prod"))
    with pytest.raises(ConfigError, match=r"^--ranger-conf-dir: no ranger-triton-security.xml in "):
        settings_of(config("-rs", "triton_prod", "--ranger-conf-dir", str(tmp_path)))
    (tmp_path / "ranger-triton-security.xml").write_text("<configuration><property>")
    with pytest.raises(ConfigError, match=r"is not valid XML .*; fix the file$"):
        settings_of(config("-rs", "triton_prod", "--ranger-conf-dir", str(tmp_path)))
    write_xml(tmp_path, URL)
    found = settings_of(config("-rs", "triton_prod", "-ra", "tarn-a", "--ranger-conf-dir", str(tmp_path)))
    assert found is not None
    assert (found.service, found.app_id, found.rest_urls) == (
        "triton_prod",
        "tarn-a",
        ("http://ranger:6080",),
    )


def test_a_conf_dir_without_a_service_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^--ranger-conf-dir: is given without --ranger-service; add"):
        config("--ranger-conf-dir", "/etc/ranger/triton")


def test_shipped_files_are_the_ranger_triton_xml_files(tmp_path: Path) -> None:
    write_xml(tmp_path, URL)
    write_xml(tmp_path, {"xasecure.audit.is.enabled": "true"}, "ranger-triton-audit.xml")
    write_xml(tmp_path, {}, "ranger-hive-security.xml")
    (tmp_path / "core-site.xml").write_text("<configuration/>")
    (tmp_path / "ranger-triton-old.xml.bak").write_text("x")
    shipped = shipped_files(tmp_path)
    assert sorted(shipped) == ["ranger-triton-audit.xml", "ranger-triton-security.xml"]
    assert shipped["ranger-triton-security.xml"] == (tmp_path / "ranger-triton-security.xml").read_bytes()


def test_plugin_id_is_ranger_s() -> None:
    assert plugin_id("tarn", "am-host.example.com", "triton_prod") == "tarn@am-host.example.com-triton_prod"
    assert len(plugin_id("tarn", "h" * 300, "s")) == 255
