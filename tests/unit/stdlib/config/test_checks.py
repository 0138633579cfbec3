"""The checks name every flag from the declaration: no TARN flag is spelled out in the checks or the
argv code, every option a check names is declared, every pair (name, c.value) agrees, and every
check runs. What a check refuses, and how its message reads, is tested in tests/unit/test_config.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tarn.stdlib.config import OPTIONS, argv, checks, flag_of

SPELLED_FLAG = re.compile(r"(?<![\w-])--?[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
DECLARED_FLAGS = {name for item in OPTIONS for name in flag_of(item).names}
OPTION_NAMES = {item.name for item in OPTIONS}
NAMING = {"fail", "cli_flag", "_require_safe", "_require_match", "_require_storage_path"}


def tree(module: object) -> ast.Module:
    return ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())


def spelled_flags(module: object) -> list[str]:
    """The declared flags written in the strings of ``module``'s code (its docstrings may name them)."""
    parsed = tree(module)
    documented = {
        id(node.body[0].value)
        for node in ast.walk(parsed)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    texts = [
        node.value
        for node in ast.walk(parsed)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documented
    ]
    return [word for text in texts for word in SPELLED_FLAG.findall(text) if word in DECLARED_FLAGS]


@pytest.mark.parametrize("module", [checks, argv], ids=lambda m: m.__name__)
def test_no_flag_is_spelled_out(module: object) -> None:
    assert spelled_flags(module) == []


def test_the_rule_catches_a_spelled_flag() -> None:
    words = SPELLED_FLAG.findall("is above --max-instances (4); give -rs, --docker-* or non-printable --help")
    assert [w for w in words if w in DECLARED_FLAGS] == ["--max-instances", "-rs"]


def named_options() -> list[str]:
    """The option names the checks pass to fail, cli_flag and the _require helpers."""
    return [
        str(node.args[0].value)
        for node in ast.walk(tree(checks))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in NAMING
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]


def test_every_named_option_is_declared() -> None:
    names = named_options()
    assert len(names) > 50
    assert set(names) - OPTION_NAMES == set()


def test_every_name_value_pair_agrees() -> None:
    """``("tp", c.tp)`` in a loop over options: the name is the field the value comes from."""
    pairs = [
        (str(node.elts[0].value), node.elts[1].attr)
        for node in ast.walk(tree(checks))
        if isinstance(node, ast.Tuple)
        and len(node.elts) == 2
        and isinstance(node.elts[0], ast.Constant)
        and isinstance(node.elts[1], ast.Attribute)
        and isinstance(node.elts[1].value, ast.Name)
        and node.elts[1].value.id == "c"
    ]
    assert len(pairs) >= 8
    assert [(name, attribute) for name, attribute in pairs if name != attribute] == []


def test_every_check_runs() -> None:
    defined = {name for name in vars(checks) if name.startswith("_check_")}
    assert defined == {check.__name__ for check in checks._CHECKS}
