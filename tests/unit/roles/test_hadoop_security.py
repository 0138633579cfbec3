"""tarn.yarn.hadoop in SecureMode (kerberos_realm set) without a host: the site files, the
keytabs each host gets from its inventory groups, the roles' own WebHDFS calls; and simple
authentication when no realm is set. Rendered with Ansible's own templating."""

from __future__ import annotations

from typing import Any

from tests.support.roles import templar, value

REALM = "TARN.LAB"
GROUPS = {
    "hdfs_namenode": ["master"],
    "yarn_resourcemanager": ["master"],
    "hdfs_nfs_gateway": ["master"],
    "hdfs_datanode": ["worker1"],
    "yarn_nodemanager": ["worker1"],
}


def sites(host: str = "master", **inputs: Any) -> dict[str, dict[str, str]]:
    t = templar(groups=GROUPS, inventory_hostname=host, **inputs)
    files: dict[str, dict[str, str]] = value(t, "hadoop_shared_site_files")
    return files


def keytabs(host: str) -> dict[str, list[str]]:
    t = templar(groups=GROUPS, inventory_hostname=host, kerberos_realm=REALM)
    return {k["path"].rsplit("/", 1)[1]: list(k["principals"]) for k in value(t, "hadoop_host_keytabs")}


def test_without_a_realm_the_cluster_stays_simple() -> None:
    files = sites()
    assert files["core-site.xml"]["hadoop.security.authentication"] == "simple"
    assert "dfs.http.policy" not in files["hdfs-site.xml"]
    assert "ssl-server.xml" not in files
    t = templar(groups=GROUPS, hadoop_tls_ca_certificate_src="/build/lab/tls/ca.pem")  # as the lab gives it
    assert value(t, "hadoop_webhdfs_url") == "http://master:9870/webhdfs/v1"
    assert value(t, "hadoop_http_user_query") == "&user.name=hdfs"
    # the roles' HTTP calls verify with no CA file: it is installed on secure clusters only
    assert value(t, "hadoop_tls_ca_path") == ""


def test_a_realm_makes_every_daemon_secure() -> None:
    stores = {"hadoop_tls_keystore_password": "k", "hadoop_tls_truststore_password": "t"}
    files = sites(kerberos_realm=REALM, **stores)
    core, hdfs, yarn = files["core-site.xml"], files["hdfs-site.xml"], files["yarn-site.xml"]
    assert core["hadoop.security.authentication"] == "kerberos"
    assert core["hadoop.http.authentication.type"] == "kerberos"
    assert core["hadoop.http.authentication.kerberos.principal"] == f"HTTP/_HOST@{REALM}"
    assert "RULE:[2:$1@$0](nn@TARN.LAB)s/.*/hdfs/" in core["hadoop.security.auth_to_local"]
    # a secure DataNode without privileged ports: SASL on data transfer, HDFS's web on HTTPS only
    assert hdfs["dfs.data.transfer.protection"] == "authentication"
    assert hdfs["dfs.http.policy"] == "HTTPS_ONLY"
    assert hdfs["dfs.block.access.token.enable"] == "true"
    assert hdfs["dfs.namenode.kerberos.principal"] == f"nn/_HOST@{REALM}"
    assert yarn["yarn.resourcemanager.principal"] == f"rm/_HOST@{REALM}"
    assert yarn["yarn.resourcemanager.proxy-user-privileges.enabled"] == "true"
    assert files["ssl-server.xml"]["ssl.server.keystore.password"] == "k"
    assert files["ssl-client.xml"]["ssl.client.truststore.password"] == "t"
    t = templar(groups=GROUPS, kerberos_realm=REALM, hadoop_tls_ca_certificate_src="/build/lab/tls/ca.pem")
    assert value(t, "hadoop_webhdfs_url") == "https://master:9871/webhdfs/v1"
    assert value(t, "hadoop_tls_ca_path") == "/usr/local/share/ca-certificates/hadoop-ca.crt"
    assert value(t, "hadoop_http_user_query") == ""  # SPNEGO, never a claimed user


def test_each_host_gets_the_keytabs_of_its_daemons() -> None:
    assert keytabs("master") == {
        "hdfs.service.keytab": ["nn/_HOST", "nfs/_HOST"],
        "yarn.service.keytab": ["rm/_HOST"],
        "spnego.service.keytab": ["HTTP/_HOST"],
    }
    assert keytabs("worker1") == {
        "hdfs.service.keytab": ["dn/_HOST"],
        "yarn.service.keytab": ["nm/_HOST"],
        "spnego.service.keytab": ["HTTP/_HOST"],
    }
