from pathlib import Path

import pytest

from tarn.stdlib.hadoop_site import hadoop_user, kerberos_enabled, namenode_http_url, read_properties


@pytest.mark.parametrize(
    ("hdfs_site", "url"),
    [
        ({"dfs.namenode.http-address": "nn:9870"}, "http://nn:9870"),
        ({"dfs.namenode.http-address": "nn:9870", "dfs.http.policy": "HTTP_ONLY"}, "http://nn:9870"),
        # SASL data transfer: HDFS's web endpoints are HTTPS only, on the https-address.
        (
            {
                "dfs.namenode.http-address": "nn:9870",
                "dfs.namenode.https-address": "nn:9871",
                "dfs.http.policy": "HTTPS_ONLY",
            },
            "https://nn:9871",
        ),
        ({"dfs.http.policy": "https_only"}, None),
        ({}, None),
    ],
)
def test_namenode_http_url(hdfs_site: dict[str, str], url: str | None) -> None:
    assert namenode_http_url(hdfs_site) == url


@pytest.mark.parametrize(
    ("value", "on"), [("kerberos", True), ("Kerberos ", True), ("simple", False), (None, False)]
)
def test_kerberos_enabled(value: str | None, on: bool) -> None:
    core_site = {} if value is None else {"hadoop.security.authentication": value}
    assert kerberos_enabled(core_site) is on


def test_read_properties(tmp_path: Path) -> None:
    site = tmp_path / "core-site.xml"
    site.write_text(
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value>"
        "</property></configuration>"
    )
    assert read_properties(site) == {"hadoop.security.authentication": "kerberos"}
    assert read_properties(tmp_path / "absent.xml") == {}


@pytest.mark.parametrize(
    ("given", "environ", "user"),
    [
        ("alice", {"HADOOP_USER_NAME": "bob", "USER": "carol"}, "alice"),
        (None, {"HADOOP_USER_NAME": "bob", "USER": "carol"}, "bob"),
        (None, {"HADOOP_USER_NAME": "", "USER": "carol"}, "carol"),
        (None, {}, None),
        ("", {}, None),
    ],
)
def test_the_hadoop_user_is_given_then_hadoop_user_name_then_the_login_user(
    given: str | None, environ: dict[str, str], user: str | None
) -> None:
    assert hadoop_user(given, environ) == user
