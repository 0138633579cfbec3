"""The folder layout's rules, enforced: what the launcher zipapp ships imports the standard library
and the libraries it carries only, and the controller does not import the life cycle or the zipapp
builder."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tarn import payload

SRC = Path(__file__).resolve().parents[2] / "src"
# What tarn-launcher.pyz ships: it runs in a stock Triton image, before anything is installed.
STDLIB_ONLY = [SRC / "tarn" / "errors.py", *sorted((SRC / "tarn" / "stdlib").rglob("*.py"))]
CONTROLLER = sorted((SRC / "tarn" / "controller").rglob("*.py"))
SHIPPED = ("tarn.stdlib", "tarn.errors", *payload.LAUNCHER_LIBRARIES)
FORBIDDEN_IN_CONTROLLER = ("tarn.payload", "tarn.service", "tarn.ansible_options")


def imported(source: str) -> set[str]:
    """Every module a source imports, absolute names (relative imports are not used in tarn)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def outside_the_standard_library(source: str) -> set[str]:
    return {
        name
        for name in imported(source)
        if name.split(".")[0] not in sys.stdlib_module_names | {"__future__"}
        and not any(name == ok or name.startswith(ok + ".") for ok in SHIPPED)
    }


def forbidden_in_controller(source: str) -> set[str]:
    return {
        name
        for name in imported(source)
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_IN_CONTROLLER)
    }


@pytest.mark.parametrize("path", STDLIB_ONLY, ids=lambda p: str(p.relative_to(SRC)))
def test_the_launcher_zipapp_imports_the_standard_library_and_what_it_carries_only(path: Path) -> None:
    assert outside_the_standard_library(path.read_text()) == set()


@pytest.mark.parametrize("path", CONTROLLER, ids=lambda p: str(p.relative_to(SRC)))
def test_the_controller_imports_no_life_cycle_and_no_zipapp_code(path: Path) -> None:
    assert forbidden_in_controller(path.read_text()) == set()


def test_the_zipapp_ships_exactly_the_standard_library_part(tmp_path: Path) -> None:
    import io
    import zipfile

    names = set(zipfile.ZipFile(io.BytesIO(payload.launcher_zipapp())).namelist()) - {"__main__.py"}
    carried = {name for name in names if name.split("/")[0] in payload.LAUNCHER_LIBRARIES}
    shipped = {str(p.relative_to(SRC)) for p in STDLIB_ONLY} | {"tarn/__init__.py"}
    assert names - carried == shipped
    assert {name.split("/")[0] for name in carried} == set(payload.LAUNCHER_LIBRARIES)


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import requests", {"requests"}),
        ("from kazoo.client import KazooClient", {"kazoo.client", "kazoo.client.KazooClient"}),
        ("from tarn.clients.triton import Triton", {"tarn.clients.triton", "tarn.clients.triton.Triton"}),
        ("from tarn import service", {"tarn", "tarn.service"}),
        ("import json, urllib.request\nfrom tarn.stdlib.config import TarnConfig", set()),
        ("import h11", set()),  # carried in the zipapp
    ],
)
def test_the_rule_catches_a_violation(source: str, found: set[str]) -> None:
    assert outside_the_standard_library(source) == found


def test_the_controller_rule_catches_a_violation() -> None:
    assert forbidden_in_controller("from tarn import payload") == {"tarn.payload"}
    assert forbidden_in_controller("from tarn.service.artifacts import desired_service")
    assert not forbidden_in_controller("from tarn.spec import TRITON")


# ---- the import graph of src/tarn: no cycle, and the loop imported by the process that runs it only
def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted((SRC / "tarn").rglob("*.py"))}


def tarn_imports(source: str, modules: set[str]) -> set[str]:
    """The tarn modules a source imports (``from a import b``: a.b when that is a module), type-only
    imports included: a cycle through them still ties the two modules together."""
    found = set()
    for name in imported(source):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    return {name: tarn_imports(path.read_text(), set(MODULES)) - {name} for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            component.append(node)
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_in_src() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_rule_catches_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_only_the_controller_process_imports_the_loop() -> None:
    """The API reads tarn.controller.snapshot and .publication; nothing imports the loop for a type."""
    importers = {name for name, targets in import_graph().items() if "tarn.controller.loop" in targets}
    assert importers == {"tarn.controller.main"}


TESTS = SRC.parent / "tests"
TEST_MODULES = sorted(path for path in TESTS.rglob("test_*.py") if "fixtures" not in path.parts)


def imported_test_modules(source: str) -> set[str]:
    """The test modules (``test_*``) a source imports: what they share belongs in tests/support."""
    found = set()
    for name in imported(source):
        parts = name.split(".")
        ends = [i for i, part in enumerate(parts) if part.startswith("test_")]
        if parts[0] == "tests" and ends:
            found.add(".".join(parts[: ends[0] + 1]))
    return found


@pytest.mark.parametrize("path", TEST_MODULES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_module_imports_another(path: Path) -> None:
    assert not imported_test_modules(path.read_text()), "move what both need to tests/support"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        (
            "from tests.unit.stdlib.openai.test_server import run_front",
            {"tests.unit.stdlib.openai.test_server"},
        ),
        ("from tests.unit.fuzz.hostile import HOSTILE_SETTINGS", set()),
        ("from tests.support.openai_front import run_front", set()),
    ],
)
def test_the_test_import_rule_catches_a_violation(source: str, found: set[str]) -> None:
    assert imported_test_modules(source) == found
