"""The collection's roles rendered without a host, with Ansible's own templating."""

from __future__ import annotations

from typing import Any

import yaml
from ansible.template import Templar, trust_as_template

from tests.support import ROOT


def trusted(value: Any) -> Any:
    """YAML read by hand is not trusted by Ansible 2.19's templating: mark it as the role's own."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


Json = dict[str, Any]
ROLES = ROOT / "roles"

LAB_GROUPS = {
    "hdfs_namenode": ["master"],
    "yarn_resourcemanager": ["master"],
    "zookeeper": ["master"],
    "hdfs_nfs_gateway": ["master"],
    "hdfs_nfs_mount": ["worker1", "worker2"],
}


def defaults(role: str) -> Json:
    """A role's defaults/main.yml as read from disk (not yet trusted)."""
    loaded: Json = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    return loaded


def templar(*roles: str, groups: dict[str, list[str]] | None = None, **inputs: Any) -> Templar:
    variables: Json = {}
    for role in ("hadoop", *roles):
        variables.update(trusted(defaults(role)))
    variables.update(
        {
            "ansible_managed": "Ansible managed",
            "inventory_hostname": "master",
            "groups": LAB_GROUPS if groups is None else groups,
            **inputs,
        }
    )
    return Templar(variables=variables)


def value(t: Templar, expression: str) -> Any:
    return t.template(trust_as_template("{{ " + expression + " }}"))


def node_variables(
    host: str = "worker1", groups: dict[str, list[str]] | None = None, **inputs: Any
) -> dict[str, Any]:
    """The variables of a NodeManager host as site.yml gives them: the hadoop and yarn_nodemanager
    defaults (trusted), the host, its groups and ``inputs`` (which win)."""
    variables: dict[str, Any] = {}
    for role in ("hadoop", "yarn_nodemanager"):
        variables.update(
            trusted(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()))
        )
    variables.update(
        {"ansible_managed": "Ansible managed", "inventory_hostname": host, "groups": groups or {}}
    )
    variables.update(inputs)
    return variables


def node_value(expression: str, **variables: Any) -> Any:
    """A Jinja expression over :func:`node_variables`."""
    return Templar(variables=node_variables(**variables)).template(
        trust_as_template("{{ " + expression + " }}")
    )


def container_executor_cfg(**variables: Any) -> str:
    """The yarn_nodemanager role's container-executor.cfg, rendered for :func:`node_variables`."""
    template = (ROOT / "roles" / "yarn_nodemanager" / "templates" / "container-executor.cfg.j2").read_text()
    text = Templar(variables=node_variables(**variables)).template(trust_as_template(template))
    assert isinstance(text, str)
    return text
