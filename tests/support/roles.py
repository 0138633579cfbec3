"""The collection's roles rendered without a host, with Ansible's own templating."""

from __future__ import annotations

from typing import Any

from ansible.template import trust_as_template


def trusted(value: Any) -> Any:
    """YAML read by hand is not trusted by Ansible 2.19's templating: mark it as the role's own."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value
