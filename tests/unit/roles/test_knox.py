"""The role tarn.yarn.knox without a host: its templates rendered with Ansible's own templating
(the role's defaults and vars plus sample inputs) and parsed as XML, compared with the topology
knox/smoke.sh runs end to end and the gateway-site.xml of knox/gateway-dist; Kerberos mode (each
topology's SPNEGO twin with Knox's HadoopAuth provider, gateway-site, the JAAS file); its argument
specification; its secrets kept out of the output; `ansible-playbook --syntax-check`; and the
validate entry point, run against an unreachable host so that any attempt to touch one fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.template import Templar, trust_as_template

from tests.support import ROOT
from tests.support.roles import trusted

ROLE = ROOT / "roles" / "knox"
SMOKE = ROOT / "knox" / "smoke.sh"
SEED_GATEWAY_SITE = ROOT / "knox" / "gateway-dist" / "src" / "home" / "conf" / "gateway-site.xml"
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
Json = dict[str, Any]

SECRET = "master-secret-for-tests"  # noqa: S105 - a test value; checked never to be shown
TOKEN = "tarn-token-for-tests"  # noqa: S105 - a test value; checked never to be shown
ONE_SERVICE: Json = {
    "knox_master_secret": SECRET,
    "knox_tarn_services": [{"authorize_urls": ["http://master:8888/authorize"], "token": TOKEN}],
}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


DEFAULTS: Json = load(ROLE / "defaults" / "main.yml")
VARS: Json = load(ROLE / "vars" / "main.yml")
SPECS: Json = load(ROLE / "meta" / "argument_specs.yml")["argument_specs"]


def templar(**inputs: Any) -> Templar:
    variables = {
        **trusted(DEFAULTS),
        **trusted(VARS),
        "ansible_managed": "Ansible managed",
        "inventory_hostname": "edge",
        "role_path": str(ROLE),
        "groups": {"zookeeper": ["zk1", "zk2", "zk3"]},
        **ONE_SERVICE,
        **inputs,
    }
    return Templar(variables=variables)


def render(name: str, t: Templar, **local: Any) -> str:
    if local:
        t = t.copy_with_new_env(available_variables={**t.available_variables, **local})
    result = t.template(trust_as_template((ROLE / "templates" / name).read_text()))
    assert isinstance(result, str)
    return result


def value(t: Templar, expression: str) -> Any:
    return t.template(trust_as_template("{{ " + expression + " }}"))


def parse(xml: str) -> ET.Element:
    return ET.fromstring(xml)  # noqa: S314 - the role's own templates and the repository's files


def topologies(t: Templar) -> list[ET.Element]:
    """Every topology file the role renders, in order (a service's, then its Kerberos twin)."""
    return [parse(render("topology.xml.j2", t, knox_topo=topo)) for topo in value(t, "knox_topology_files")]


def providers(topology: ET.Element) -> dict[str, Json]:
    """role -> {name, enabled, params (in order)} of each provider."""
    found: dict[str, Json] = {}
    for p in topology.findall("./gateway/provider"):
        role = p.findtext("role")
        assert role is not None
        assert role not in found
        found[role] = {
            "name": p.findtext("name"),
            "enabled": p.findtext("enabled"),
            "params": [(q.findtext("name"), q.findtext("value")) for q in p.findall("param")],
        }
    return found


# ---- the topology


def smoke_topology(ldap_port: str, authz_port: str, zk_port: str) -> ET.Element:
    """The topology knox/smoke.sh writes (the seeds' shape, run end to end there)."""
    text = SMOKE.read_text()
    heredoc = re.search(r"cat > conf/topologies/tarn\.xml <<XML\n(.*?)\nXML\n", text, re.S)
    assert heredoc, "knox/smoke.sh no longer writes conf/topologies/tarn.xml from a heredoc"
    xml = heredoc.group(1).replace("\\$", "$")
    for name, port in {"ldap_port": ldap_port, "authz_port": authz_port, "zk_port": zk_port}.items():
        xml = xml.replace("$" + name, port)
    return parse(xml)


def test_the_topology_is_the_one_the_smoke_test_runs() -> None:
    t = templar(
        knox_demo_ldap=True,
        knox_demo_ldap_port=33389,
        knox_zookeeper_ensemble="127.0.0.1:2181",
        knox_tarn_services=[
            {"authorize_urls": "http://127.0.0.1:8888/authorize", "token": TOKEN, "cache_ttl_ms": 1000}
        ],
    )
    [mine] = topologies(t)
    seed = smoke_topology("33389", "8888", "2181")
    ours, theirs = providers(mine), providers(seed)
    assert list(ours) == list(theirs) == ["authentication", "identity-assertion", "authorization", "ha"]
    for role in theirs:
        assert ours[role]["name"] == theirs[role]["name"]
        assert ours[role]["enabled"] == theirs[role]["enabled"] == "true"
    assert ours["authentication"]["params"] == theirs["authentication"]["params"]
    # the smoke test serves /v2 only; the role adds the OpenAI fronts (TRITON-OPENAI) after TRITON
    assert ours["ha"]["params"][:1] == theirs["ha"]["params"]
    # The smoke test names the gateway-level alias tarn.api.token; the role one alias per topology,
    # and it sets the per-controller time limit and the stale bound the smoke test leaves at their
    # defaults.
    authz = dict(ours["authorization"]["params"])
    assert authz == {
        **dict(theirs["authorization"]["params"]),
        "tarn.token.alias": "tarn.api.token.tarn",
        "tarn.timeout.ms": "3000",
        "tarn.cache.stale.ms": "900000",
    }
    assert [s.findtext("role") for s in mine.findall("service")] == ["TRITON", "TRITON-OPENAI"]
    assert mine.find("service/url") is None


def test_the_ha_provider_reads_the_instances_from_zookeeper() -> None:
    [topology] = topologies(templar())
    ha = providers(topology)["ha"]
    assert ha["name"] == "HaProvider"
    assert ha["params"] == [
        (
            "TRITON",
            "enabled=true;maxFailoverAttempts=3;failoverSleep=1000;enableLoadBalancing=true;"
            "zookeeperEnsemble=zk1:2181,zk2:2181,zk3:2181;zookeeperNamespace=/services/triton",
        ),
        (
            "TRITON-OPENAI",
            "enabled=true;maxFailoverAttempts=3;failoverSleep=1000;enableLoadBalancing=false;"
            "zookeeperEnsemble=zk1:2181,zk2:2181,zk3:2181;zookeeperNamespace=/services/triton",
        ),
    ]


def test_the_triton_service_has_no_url() -> None:
    [topology] = topologies(templar())
    service = topology.findall("service")[0]
    assert [child.tag for child in service] == ["role"]
    assert service.findtext("role") == "TRITON"


def test_the_openai_fronts_are_served_with_a_read_timeout_for_long_streams() -> None:
    [topology] = topologies(templar())
    openai = topology.findall("service")[1]
    assert openai.findtext("role") == "TRITON-OPENAI"
    assert openai.find("url") is None
    params = {p.findtext("name"): p.findtext("value") for p in openai.findall("param")}
    assert params == {"httpclient.socketTimeout": "600s"}
    site = properties(render("gateway-site.xml.j2", templar()))
    assert site["gateway.idle.timeout"] == "600000"
    [longer] = topologies(templar(knox_openai_read_timeout_s=1800))
    assert longer.findall("service")[1].findtext("param/value") == "1800s"
    assert (
        properties(render("gateway-site.xml.j2", templar(knox_openai_read_timeout_s=60)))[
            "gateway.idle.timeout"
        ]
        == "300000"
    )  # Knox's default stays the floor


def test_without_openai_the_topology_serves_v2_alone() -> None:
    t = templar(knox_openai=False)
    [topology] = topologies(t)
    assert [s.findtext("role") for s in topology.findall("service")] == ["TRITON"]
    assert [name for name, _value in providers(topology)["ha"]["params"]] == ["TRITON"]
    assert properties(render("gateway-site.xml.j2", t))["gateway.idle.timeout"] == "300000"


def test_the_openai_service_definition_routes_v1_to_tarns_dispatch() -> None:
    service = parse((ROLE / "files" / "services" / "triton-openai" / "1.0.0" / "service.xml").read_text())
    assert service.get("role") == "TRITON-OPENAI"
    assert [r.get("path") for r in service.findall("routes/route")] == ["/triton/v1/**?**"]
    dispatch = service.find("dispatch")
    assert dispatch is not None
    assert dispatch.get("ha-classname") == "tarn.knox.dispatch.OpenAIHaDispatch"
    params = {p.findtext("name"): p.findtext("value") for p in dispatch.findall("param")}
    excluded = (params["requestExcludeHeaders"] or "").split(",")
    assert {"X-TARN-User", "X-TARN-User-Proof"} <= set(excluded)  # never the client's
    assert "rewrite" not in [p.get("role") for p in service.findall("policies/policy")]


def test_each_tarn_service_gets_its_own_topology_namespace_and_alias() -> None:
    t = templar(
        knox_ha_load_balancing=False,
        knox_tarn_services=[
            {"authorize_urls": "http://m1:8888/authorize, http://m2:8888/authorize", "token": "t1"},
            {
                "name": "llm",
                "authorize_urls": ["http://m3:9999/authorize"],
                "token": "t2",
                "zookeeper_namespace": "/services/llm",
                "zookeeper_ensemble": "zk9:2281",
                "token_alias": "llm.token",
                "cache_ttl_ms": 0,
                "cache_stale_ms": 0,
                "timeout_ms": 500,
            },
        ],
    )
    tarn, llm = (providers(topology) for topology in topologies(t))
    assert dict(tarn["authorization"]["params"]) == {
        "tarn.authorize.url": "http://m1:8888/authorize,http://m2:8888/authorize",
        "tarn.token.alias": "tarn.api.token.tarn",
        "tarn.cache.ttl.ms": "5000",
        "tarn.cache.stale.ms": "900000",  # a controller away for minutes costs no request (issue 47)
        "tarn.timeout.ms": "3000",
    }
    assert dict(llm["authorization"]["params"]) == {
        "tarn.authorize.url": "http://m3:9999/authorize",
        "tarn.token.alias": "llm.token",
        "tarn.cache.ttl.ms": "0",
        "tarn.cache.stale.ms": "0",
        "tarn.timeout.ms": "500",
    }
    assert dict(llm["ha"]["params"])["TRITON"] == (
        "enabled=true;maxFailoverAttempts=3;failoverSleep=1000;enableLoadBalancing=false;"
        "zookeeperEnsemble=zk9:2281;zookeeperNamespace=/services/llm"
    )
    assert value(t, "knox_tarn_tokens") == {"tarn.api.token.tarn": "t1", "llm.token": "t2"}
    # What the tasks loop over holds no token.
    assert TOKEN not in json.dumps(value(t, "knox_topologies"))
    assert "t1" not in json.dumps(value(t, "knox_topologies")).replace("http", "")


def test_ldap_settings_and_extra_shiro_params_are_escaped_and_before_the_urls() -> None:
    t = templar(
        knox_ldap_url="ldaps://ldap.example.org:636",
        knox_ldap_user_dn_template="uid={0},ou=people,dc=example,dc=org",
        knox_shiro_extra_params={
            "main.ldapRealm.contextFactory.systemUsername": "cn=knox&<admin>",
            "main.ldapRealm.contextFactory.systemPassword": "${ALIAS=ldcSystemPassword}",
        },
    )
    [topology] = topologies(t)
    params = providers(topology)["authentication"]["params"]
    assert dict(params)["main.ldapRealm.contextFactory.url"] == "ldaps://ldap.example.org:636"
    assert dict(params)["main.ldapRealm.userDnTemplate"] == "uid={0},ou=people,dc=example,dc=org"
    assert dict(params)["main.ldapRealm.contextFactory.systemUsername"] == "cn=knox&<admin>"
    assert params[-1] == ("urls./**", "authcBasic")


CACHE_PARAMS = {
    "main.cacheManager": "org.apache.knox.gateway.shirorealm.KnoxCacheManager",
    "main.securityManager.cacheManager": "$cacheManager",
    "main.ldapRealm.authenticationCachingEnabled": "true",
}


@pytest.mark.parametrize("cache", [True, False])
def test_the_ldap_authentication_cache_is_a_switch(cache: bool) -> None:
    [topology] = topologies(templar(knox_ldap_authentication_cache=cache))
    params = dict(providers(topology)["authentication"]["params"])
    assert {name: params[name] for name in CACHE_PARAMS if name in params} == (CACHE_PARAMS if cache else {})


# ---- gateway-site.xml, users.ldif, units


def properties(xml: str) -> dict[str, str]:
    root = parse(xml)
    return {p.findtext("name") or "": p.findtext("value") or "" for p in root.findall("property")}


def test_gateway_site_is_the_gateway_home_one_plus_the_listen_address_and_no_port_mapping() -> None:
    mine = properties(render("gateway-site.xml.j2", templar()))
    seed = properties(SEED_GATEWAY_SITE.read_text())
    # port mapping off: it scans the whole configuration with a regex on every request
    expected = {
        **seed,
        "gateway.host": "0.0.0.0",  # noqa: S104
        "gateway.port.mapping.enabled": "false",
        "gateway.idle.timeout": "600000",  # the OpenAI streams' longest pause (knox_openai_read_timeout_s)
    }
    assert mine == expected


def test_gateway_site_takes_the_port_and_extra_properties() -> None:
    t = templar(
        knox_gateway_port=9443,
        knox_gateway_site_extra={"gateway.dispatch.whitelist": "^https?://10\\.89\\..*$", "x.flag": True},
    )
    mine = properties(render("gateway-site.xml.j2", t))
    assert mine["gateway.port"] == "9443"
    assert mine["gateway.dispatch.whitelist"] == "^https?://10\\.89\\..*$"
    assert mine["x.flag"] == "true"


def test_demo_ldap_users_and_groups() -> None:
    t = templar(
        knox_demo_ldap=True,
        knox_demo_ldap_users=[{"name": "carol", "password": "carol-pw"}, {"name": "dave", "password": "d"}],
        knox_demo_ldap_groups=[{"name": "ml-team", "members": ["carol", "dave"]}],
    )
    ldif = render("users.ldif.j2", t)
    entries = [block for block in ldif.split("\n\n") if block.lstrip().startswith("dn:")]
    dns = [block.strip().splitlines()[0] for block in entries]
    assert dns == [
        "dn: dc=hadoop,dc=apache,dc=org",
        "dn: ou=people,dc=hadoop,dc=apache,dc=org",
        "dn: uid=carol,ou=people,dc=hadoop,dc=apache,dc=org",
        "dn: uid=dave,ou=people,dc=hadoop,dc=apache,dc=org",
        "dn: ou=groups,dc=hadoop,dc=apache,dc=org",
        "dn: cn=ml-team,ou=groups,dc=hadoop,dc=apache,dc=org",
    ]
    assert "userPassword: carol-pw" in ldif
    # Not an LDIF SAFE-STRING: base64 after "::".
    odd = render("users.ldif.j2", templar(knox_demo_ldap_users=[{"name": "eve", "password": ":pw é"}]))
    assert "userPassword:: OnB3IMOp" in odd
    assert "member: uid=dave,ou=people,dc=hadoop,dc=apache,dc=org" in ldif


def test_the_default_demo_users_are_the_gateway_home_ones() -> None:
    ldif = render("users.ldif.j2", templar(knox_demo_ldap=True))
    seed = (ROOT / "knox" / "gateway-dist" / "src" / "home" / "conf" / "users.ldif").read_text()

    def entries(text: str) -> list[str]:
        lines = [line for line in text.splitlines() if line and not line.startswith("#")]
        return lines

    assert entries(ldif) == entries(seed)


def test_the_units_run_the_jars_with_the_jdk17_flags() -> None:
    t = templar(knox_demo_ldap=True)
    gateway = render("knox.service.j2", t)
    ldap = render("knox-demo-ldap.service.j2", t)
    [start] = [line for line in gateway.splitlines() if line.startswith("ExecStart=")]
    assert start.startswith("ExecStart=/usr/bin/java -Xmx1024m ")
    assert start.endswith(" -jar /opt/knox/bin/gateway.jar")
    assert "--add-opens java.base/java.lang=ALL-UNNAMED" in start  # required by Knox 2.0.0 on JDK 17
    assert all(flag in start for flag in DEFAULTS["knox_jvm_flags"])
    assert "User=knox" in gateway
    assert "After=network-online.target knox-demo-ldap.service" in gateway
    assert "AmbientCapabilities" not in gateway
    assert "-Dldap.port=33389 -jar /opt/knox/bin/ldap.jar /opt/knox/conf" in ldap
    low_port = render("knox.service.j2", templar(knox_gateway_port=443))
    assert "AmbientCapabilities=CAP_NET_BIND_SERVICE" in low_port


# ---- Kerberos mode (kerberos_realm set): each topology's SPNEGO twin

REALM = "TARN.LAB"
SIGNATURE = "signature-secret-for-tests"  # a test value; checked never to be shown
KERBEROS: Json = {
    "kerberos_realm": REALM,
    "knox_kerberos_signature_secret": SIGNATURE,
    "ansible_facts": {"fqdn": "Edge.Example.Org"},
}
TWO_SERVICES: Json = {
    "knox_tarn_services": [
        {"authorize_urls": ["http://m1:8888/authorize"], "token": TOKEN},
        {
            "name": "llm",
            "authorize_urls": ["http://m3:9999/authorize"],
            "token": "t2",
            "zookeeper_namespace": "/llm",
        },
    ]
}
# Names as Knox 2.0.0's HadoopAuthFilter (config.prefix, then the prefixed keys) and hadoop-auth 3.2.4's
# AuthenticationFilter and KerberosAuthenticationHandler read them (docs/knox.md).
HADOOP_AUTH = {
    "config.prefix": "hadoop.auth.config",
    "hadoop.auth.config.type": "kerberos",
    "hadoop.auth.config.simple.anonymous.allowed": "false",
    "hadoop.auth.config.token.validity": "1800",
    "hadoop.auth.config.cookie.path": "/gateway/tarn-kerberos",
    "hadoop.auth.config.signature.secret.file": "/opt/knox/data/security/hadoop-auth-signature.secret",
    "hadoop.auth.config.kerberos.principal": "HTTP/edge.example.org@TARN.LAB",
    "hadoop.auth.config.kerberos.keytab": "/etc/security/keytabs/knox-spnego.service.keytab",
    "hadoop.auth.config.kerberos.name.rules": "DEFAULT",
}


def by_name(t: Templar) -> dict[str, ET.Element]:
    names = value(t, "knox_topology_files | map(attribute='name') | list")
    return dict(zip(names, topologies(t), strict=True))


def test_without_a_realm_each_service_has_one_ldap_topology_and_the_gateway_no_kerberos() -> None:
    t = templar(**TWO_SERVICES)
    assert list(by_name(t)) == ["tarn", "llm"]
    assert all(providers(topology)["authentication"]["name"] == "ShiroProvider" for topology in topologies(t))
    site = properties(render("gateway-site.xml.j2", t))
    assert site["gateway.hadoop.kerberos.secured"] == "false"
    assert "java.security.krb5.conf" not in site
    # twins a Kerberos run left are removed (and only those)
    assert value(t, "knox_stale_kerberos_topologies") == ["tarn-kerberos", "llm-kerberos"]
    assert value(t, "knox_install_marker") == "/opt/knox-2.0.0/bin/gateway.jar"


def test_a_realm_gives_each_topology_a_spnego_twin_identical_but_for_its_authentication() -> None:
    t = templar(**KERBEROS, **TWO_SERVICES)
    found = by_name(t)
    assert list(found) == ["tarn", "tarn-kerberos", "llm", "llm-kerberos"]
    for name in ("tarn", "llm"):
        ldap, kerberos = providers(found[name]), providers(found[f"{name}-kerberos"])
        assert list(ldap) == list(kerberos) == ["authentication", "identity-assertion", "authorization", "ha"]
        assert ldap["authentication"]["name"] == "ShiroProvider"
        assert kerberos["authentication"]["name"] == "HadoopAuth"
        assert kerberos["authentication"]["enabled"] == "true"
        for role in ("identity-assertion", "authorization", "ha"):  # same controllers, token alias, instances
            assert kerberos[role] == ldap[role], (name, role)
        services = [[ET.tostring(e) for e in found[n].findall("service")] for n in (name, f"{name}-kerberos")]
        assert services[0] == services[1], services
    params = providers(found["tarn-kerberos"])["authentication"]["params"]
    assert dict(params) == HADOOP_AUTH
    assert params[0] == ("config.prefix", "hadoop.auth.config")
    llm = dict(providers(found["llm-kerberos"])["authentication"]["params"])
    assert (
        llm["hadoop.auth.config.cookie.path"] == "/gateway/llm-kerberos"
    )  # the cookie stays with its topology
    # the secret is in a file only Knox reads, never in a topology
    assert all(
        SIGNATURE not in render("topology.xml.j2", t, knox_topo=f) for f in value(t, "knox_topology_files")
    )
    assert value(t, "knox_stale_kerberos_topologies") == []
    assert (
        value(t, "knox_install_marker")
        == "/opt/knox-2.0.0/lib/gateway-provider-security-hadoopauth-2.0.0.jar"
    )
    # the token aliases, written once per service, are shared by both topologies
    assert value(t, "knox_tarn_tokens") == {"tarn.api.token.tarn": TOKEN, "tarn.api.token.llm": "t2"}


def test_the_spnego_topology_name_principal_and_cookie_are_configurable() -> None:
    t = templar(
        **KERBEROS,
        knox_kerberos_topology_suffix="_spnego",
        knox_kerberos_principal="HTTP/knox.example.org",
        knox_kerberos_keytab="/etc/knox/http.keytab",
        knox_kerberos_token_validity_s=600,
        knox_gateway_path="gw",
        knox_kerberos_hadoop_auth_extra_params={"hadoop.auth.config.cookie.domain": "example.org"},
    )
    [_ldap, twin] = topologies(t)
    params = dict(providers(twin)["authentication"]["params"])
    assert params["hadoop.auth.config.kerberos.principal"] == "HTTP/knox.example.org@TARN.LAB"
    assert params["hadoop.auth.config.kerberos.keytab"] == "/etc/knox/http.keytab"
    assert params["hadoop.auth.config.token.validity"] == "600"
    assert params["hadoop.auth.config.cookie.path"] == "/gw/tarn_spnego"
    assert params["hadoop.auth.config.cookie.domain"] == "example.org"
    assert value(t, "knox_topology_files | map(attribute='name') | list") == ["tarn", "tarn_spnego"]


def test_principals_become_the_user_names_hadoop_gives_them() -> None:
    # alone on the edge: Hadoop's DEFAULT rule (alice@TARN.LAB is alice)
    assert value(templar(**KERBEROS), "knox_kerberos_name_rules") == "DEFAULT"
    # where the inventory (or the hadoop role on the same host) has auth_to_local: the same rules,
    # one line each in core-site, space-separated in the topology (hadoop-auth's parser takes both)
    hadoop = trusted(yaml.safe_load((ROOT / "roles" / "hadoop" / "defaults" / "main.yml").read_text()))
    t = templar(**KERBEROS, **hadoop)
    rules = dict(providers(topologies(t)[1])["authentication"]["params"])[
        "hadoop.auth.config.kerberos.name.rules"
    ]
    assert rules == " ".join(value(t, "hadoop_auth_to_local").split())
    assert rules.startswith("RULE:[2:$1@$0](nn@TARN.LAB)s/.*/hdfs/ ")
    assert rules.endswith(" DEFAULT")


def test_in_kerberos_mode_the_gateway_reads_the_realm_and_a_jaas_file() -> None:
    t = templar(**KERBEROS, knox_gateway_site_extra={"sun.security.krb5.debug": "true"})
    site = properties(render("gateway-site.xml.j2", t))
    assert site["gateway.hadoop.kerberos.secured"] == "true"
    assert site["java.security.krb5.conf"] == "/etc/krb5.conf"
    # Knox 2.0.0 sets both as system properties and fails to start when either is unset
    assert site["java.security.auth.login.config"] == "/opt/knox/conf/krb5JAASLogin.conf"
    assert site["sun.security.krb5.debug"] == "true"
    assert (
        properties(
            render("gateway-site.xml.j2", templar(**KERBEROS, kerberos_client_conf="/etc/krb5/x.conf"))
        )["java.security.krb5.conf"]
        == "/etc/krb5/x.conf"
    )
    jaas = render("krb5JAASLogin.conf.j2", t)
    assert re.search(r"com\.sun\.security\.jgss\.initiate \{\n.*\n\};", jaas, re.S)
    assert 'keyTab="/etc/security/keytabs/knox-spnego.service.keytab"' in jaas
    assert 'principal="HTTP/edge.example.org@TARN.LAB"' in jaas
    assert all(line.startswith("//") for line in jaas.split("com.sun")[0].splitlines())  # JAAS comments


# ---- argument specification, defaults, secrets


def test_the_argument_spec_names_each_required_variable() -> None:
    main = SPECS["main"]["options"]
    required = {name for name, spec in main.items() if spec.get("required")}
    assert required == {"knox_master_secret", "knox_tarn_services"}
    # A default would satisfy `required` without the user giving anything.
    assert not required & set(DEFAULTS)
    assert main["knox_master_secret"]["no_log"] is True
    services = main["knox_tarn_services"]
    assert services["type"] == "list"
    assert services["elements"] == "dict"
    assert {n for n, s in services["options"].items() if s.get("required")} == {"authorize_urls", "token"}
    assert services["options"]["token"]["no_log"] is True
    # required in Kerberos mode only (tasks/validate.yml), so not `required`
    assert main["knox_kerberos_signature_secret"]["no_log"] is True
    assert SPECS["validate"]["options"] == main


def test_the_argument_spec_documents_every_default_with_its_value() -> None:
    main = SPECS["main"]["options"]
    assert set(DEFAULTS) <= set(main), f"undocumented: {sorted(set(DEFAULTS) - set(main))}"
    for name, spec in main.items():
        assert spec.get("description"), name
        if "default" in spec:
            assert spec["default"] == DEFAULTS[name], name
        elif name in DEFAULTS:
            assert "Jinja" in str(spec["description"]) or isinstance(DEFAULTS[name], list | dict), name


def tasks(path: Path) -> Iterator[Json]:
    def walk(items: list[Json]) -> Iterator[Json]:
        for task in items:
            yield task
            for key in ("block", "rescue", "always"):
                yield from walk(task.get(key, []))

    yield from walk(load(path) or [])


SECRETS = ("knox_master_secret", "knox_tarn_tokens", "knox_kerberos_signature_secret")


def test_every_task_that_carries_a_secret_has_no_log() -> None:
    checked = 0
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        for task in tasks(path):
            module = next((k for k in task if k.startswith("ansible.builtin.")), None)
            if module in (None, "ansible.builtin.assert"):
                continue  # asserts name variables and mask secrets in their messages
            # ansible-playbook -vvv prints the `environment` keyword's values, no_log or not.
            environment = json.dumps(task.get("environment"))
            assert not any(secret in environment for secret in SECRETS), f"{path.name}: {task['name']}"
            carried = json.dumps({"args": task[module], "vars": task.get("vars")})
            if any(secret in carried for secret in SECRETS):
                checked += 1
                assert task.get("no_log") is True, f"{path.name}: {task['name']}"
    assert checked >= 6  # master, keystore, certificate, aliases, fingerprints, signature secret


def test_assert_messages_mask_the_secrets() -> None:
    """In an assert's message a secret is only ever what replace() masks."""
    masked = re.compile(r"replace\((knox_master_secret|knox_tarn_tokens\[[^\]]+\]), '\*+'\)")
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        for task in tasks(path):
            message = str(task.get("ansible.builtin.assert", {}).get("fail_msg", ""))
            expressions = " ".join(re.findall(r"\{\{.*?\}\}|\{%.*?%\}", message, re.S))
            left = masked.sub("", expressions)
            assert not any(secret in left for secret in SECRETS), f"{path.name}: {task['name']}"


# ---- ansible-playbook: syntax and the validate entry point


def playbook_env() -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_TIMEOUT": "5",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
    }


def test_a_playbook_using_the_role_passes_the_syntax_check(tmp_path: Path) -> None:
    play = [
        {
            "name": "Knox in front of TARN's Triton instances",
            "hosts": "edge",
            "become": True,
            "roles": [{"role": "tarn.yarn.knox", "vars": ONE_SERVICE}],
        }
    ]
    (tmp_path / "knox.yml").write_text(yaml.safe_dump(play))
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "--syntax-check", "-i", "edge,", str(tmp_path / "knox.yml")],
        cwd=ROOT,
        env=playbook_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def validate(tmp_path: Path, extra: Json) -> tuple[int, str]:
    """The validate entry point on a host that cannot be reached (TEST-NET-1): a task that tried
    to touch it would end the run as unreachable."""
    (tmp_path / "archive.tar.gz").write_bytes(b"not a real archive")
    (tmp_path / "plugin.jar").write_bytes(b"not a real jar")
    play = [
        {
            "name": "Validate the Knox inputs",
            "hosts": "edge",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Knox inputs",
                    "ansible.builtin.include_role": {"name": "tarn.yarn.knox", "tasks_from": "validate"},
                }
            ],
        }
    ]
    (tmp_path / "validate.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "hosts.ini").write_text("edge ansible_host=192.0.2.1 ansible_connection=ssh\n")
    inputs = {
        "knox_archive": str(tmp_path / "archive.tar.gz"),
        "knox_plugin_jar": str(tmp_path / "plugin.jar"),
        "knox_demo_ldap": True,
        "knox_zookeeper_ensemble": "zk1:2181,zk2:2181",
        **ONE_SERVICE,
        **extra,
    }
    inputs = {k: v for k, v in inputs.items() if v is not None}
    (tmp_path / "vars.json").write_text(json.dumps(inputs))
    proc = subprocess.run(
        [
            ANSIBLE_PLAYBOOK,
            "-i",
            str(tmp_path / "hosts.ini"),
            "-e",
            "@" + str(tmp_path / "vars.json"),
            str(tmp_path / "validate.yml"),
        ],
        cwd=ROOT,
        env=playbook_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


KERBEROS_INPUTS: Json = {
    "kerberos_realm": REALM,
    "knox_kerberos_signature_secret": SIGNATURE,
    "kerberos_client_kdc_hosts": ["master"],
}


def test_valid_kerberos_inputs_pass_without_touching_the_host(tmp_path: Path) -> None:
    rc, out = validate(tmp_path, KERBEROS_INPUTS)
    assert rc == 0, out
    assert "unreachable=0" in out
    assert "failed=0" in out
    assert SIGNATURE not in out


def test_valid_inputs_pass_without_touching_the_host(tmp_path: Path) -> None:
    sha = hashlib.sha256(b"not a real archive").hexdigest()
    rc, out = validate(tmp_path, {"knox_archive_sha256": sha})
    assert rc == 0, out
    assert "unreachable=0" in out
    assert "failed=0" in out
    assert SECRET not in out
    assert TOKEN not in out


BAD_INPUTS = [
    ("no master secret", {"knox_master_secret": None}, "knox_master_secret"),
    ("short master secret", {"knox_master_secret": "abc"}, "shorter than 6 characters"),
    ("ensemble without port", {"knox_zookeeper_ensemble": "zk1"}, "knox_zookeeper_ensemble"),
    ("empty ensemble", {"knox_zookeeper_ensemble": ""}, "inventory group zookeeper"),
    (
        "bad controller URL",
        {"knox_tarn_services": [{"authorize_urls": "master:8888/authorize", "token": TOKEN}]},
        "authorize_urls",
    ),
    (
        "two services in one namespace",
        {
            "knox_tarn_services": [
                {"authorize_urls": ["http://m/authorize"], "token": TOKEN},
                {"name": "other", "authorize_urls": ["http://m/authorize"], "token": TOKEN},
            ]
        },
        "zookeeper_namespace",
    ),
    ("wrong archive checksum", {"knox_archive_sha256": "0" * 64}, "knox_archive_sha256"),
    (
        "Kerberos without a signature secret",
        {**KERBEROS_INPUTS, "knox_kerberos_signature_secret": None},
        "knox_kerberos_signature_secret is missing",
    ),
    (
        "short signature secret",
        {**KERBEROS_INPUTS, "knox_kerberos_signature_secret": "0123456789"},
        "shorter than 16 characters",
    ),
    ("realm in lower case", {**KERBEROS_INPUTS, "kerberos_realm": "tarn.lab"}, "upper case"),
    ("realm without KDC", {**KERBEROS_INPUTS, "kerberos_client_kdc_hosts": []}, "kerberos_kdc"),
    (
        "Kerberos twin named like another service",
        {
            **KERBEROS_INPUTS,
            "knox_tarn_services": [
                {"authorize_urls": ["http://m/authorize"], "token": TOKEN},
                {
                    "name": "tarn-kerberos",
                    "authorize_urls": ["http://m/authorize"],
                    "token": TOKEN,
                    "zookeeper_namespace": "/other",
                },
            ],
        },
        "knox_kerberos_topology_suffix",
    ),
    (
        "principal with a realm",
        {**KERBEROS_INPUTS, "knox_kerberos_principal": "HTTP/_HOST@X.ORG"},
        "knox_kerberos_principal",
    ),
]


@pytest.mark.parametrize(("inputs", "named"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_fail_naming_the_variable_before_touching_the_host(
    tmp_path: Path, inputs: Json, named: str
) -> None:
    rc, out = validate(tmp_path, inputs)
    assert rc != 0
    assert named in out, out
    assert "unreachable=0" in out, out
    assert SECRET not in out, out
    assert TOKEN not in out, out
    assert SIGNATURE not in out, out


def test_the_activator_is_the_fallback_of_v2_and_v1_alike() -> None:
    """While ZooKeeper lists no instance (or no front), Knox sends /v2 and /v1 to the activator,
    which holds them until one is ready (scale to zero)."""
    [service] = ONE_SERVICE["knox_tarn_services"]
    at_zero = {**service, "activator_url": "http://127.0.0.1:8099"}
    [topology] = topologies(templar(knox_tarn_services=[at_zero]))
    urls = {s.findtext("role"): [u.text for u in s.findall("url")] for s in topology.findall("service")}
    assert urls == {"TRITON": ["http://127.0.0.1:8099"], "TRITON-OPENAI": ["http://127.0.0.1:8099"]}
    [without] = topologies(templar(knox_openai=False, knox_tarn_services=[at_zero]))
    assert [s.findtext("role") for s in without.findall("service")] == ["TRITON"]
