"""The role tarn.yarn.tarn passes some TARN options as role variables (tarn_min_instances, …): their
defaults, in defaults/main.yml and meta/argument_specs.yml, are copies of the declaration's, and fail
here when they drift from it. Which variables carry an option is read from the role's own tasks and
vars, so a new one is checked without editing this test."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tarn import ansible_options
from tarn.stdlib.config import OPTIONS, default_of, flag_of

ROLE = Path(__file__).resolve().parents[3] / "roles" / "tarn"
Json = dict[str, Any]

# Role variables that carry an option but deliberately default otherwise: variable -> why.
THE_ROLE_CHOOSES = {
    "tarn_user": "the role deploys as the tarn user; the CLI falls back to $HADOOP_USER_NAME, then $USER",
}

_FIELD_OF_MODULE_OPTION = {flag_of(f).module_name: f.name for f in OPTIONS}
_FIRST_VARIABLE = re.compile(r"\{\{\s*(tarn_\w+)")
_CONNECTION_ENTRY = re.compile(r"'(\w+)': (tarn_\w+)")


def _load(relative: str) -> Any:
    return yaml.safe_load((ROLE / relative).read_text())


def role_variables_of_options() -> dict[str, str]:
    """Role variable -> TarnConfig field, for every variable the role hands to a module as an option:
    the tarn.yarn module arguments of its tasks and the connection arguments of its vars."""
    found: dict[str, str] = {}
    for tasks in sorted((ROLE / "tasks").glob("*.yml")):
        for task in yaml.safe_load(tasks.read_text()) or []:
            for module, arguments in task.items():
                if not (module.startswith("tarn.yarn.") and isinstance(arguments, dict)):
                    continue
                for option, template in arguments.items():
                    variable = _FIRST_VARIABLE.search(str(template))
                    if variable and option in _FIELD_OF_MODULE_OPTION:
                        found[variable.group(1)] = _FIELD_OF_MODULE_OPTION[option]
    for option, variable in _CONNECTION_ENTRY.findall(_load("vars/main.yml")["tarn_connection_args"]):
        if option in _FIELD_OF_MODULE_OPTION:
            found[variable] = _FIELD_OF_MODULE_OPTION[option]
    return found


CARRIED = role_variables_of_options()
CHECKED = {variable: name for variable, name in CARRIED.items() if variable not in THE_ROLE_CHOOSES}


def role_default(name: str) -> Any:
    """What the role's variable holds when the option is not given: the declared default, or an empty
    string where the declaration has None (the tasks leave the option out: ``or omit``)."""
    default = default_of(name)
    return "" if default is None else default


def test_the_role_variables_of_the_issue_are_found() -> None:
    assert {"tarn_min_instances", "tarn_max_instances", "tarn_runtime"} <= set(CHECKED)
    assert set(THE_ROLE_CHOOSES) <= set(CARRIED)  # no stale exception


@pytest.mark.parametrize(("variable", "name"), sorted(CHECKED.items()))
def test_the_role_default_is_the_declared_one(variable: str, name: str) -> None:
    assert _load("defaults/main.yml")[variable] == role_default(name)


@pytest.mark.parametrize(("variable", "name"), sorted(CHECKED.items()))
def test_the_role_argument_spec_agrees_with_the_declaration(variable: str, name: str) -> None:
    item = next(f for f in OPTIONS if f.name == name)
    flag = flag_of(item)
    module_spec: Json = ansible_options.argument_spec(flag.module_name, flag)
    for entry_point, spec in _load("meta/argument_specs.yml")["argument_specs"].items():
        role_spec: Json = spec["options"][variable]
        assert role_spec["default"] == role_default(name), entry_point
        assert role_spec["type"] == module_spec["type"], entry_point
        assert role_spec.get("choices") == module_spec.get("choices"), entry_point
