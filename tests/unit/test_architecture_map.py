"""The map stays true: docs/architecture.md names every module of src/tarn (by its path from there)
and every role (as roles/<name>), and the prose docs say what things are, not which issue brought
them."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import ROOT

ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "src" / "tarn"
# docs/ci.md keeps CI's measurement history run by run, and each run names what it measured.
HISTORY_KEPT_BY_CI_RUN = {ROOT / "docs" / "ci.md"}
ISSUE_REFERENCE = re.compile(r"\bissues? \d+\b|(?<![\w&])#\d+\b", re.IGNORECASE)


def named(text: str, path: str) -> bool:
    """``path`` is in ``text`` whole, not as the tail of a longer path (``tarn/errors.py``)."""
    return re.search(rf"(?<![\w/.]){re.escape(path)}(?!\w)", text) is not None


def modules() -> list[str]:
    return sorted(
        path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"
    )


def roles() -> list[str]:
    return sorted(f"roles/{path.name}" for path in (ROOT / "roles").iterdir() if path.is_dir())


def prose_docs() -> list[Path]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [path for path in docs if path not in HISTORY_KEPT_BY_CI_RUN]


def test_the_finders_find_something() -> None:
    assert "controller/loop.py" in modules()
    assert "roles/hadoop" in roles()
    assert ROOT / "README.md" in prose_docs()


def test_architecture_names_every_module_and_role() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = [path for path in [*modules(), *roles()] if not named(text, path)]
    assert not missing, (
        f"docs/architecture.md does not name {', '.join(missing)}: add each to the tree, with one line "
        "saying what it is"
    )


def test_prose_docs_name_no_issue() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in prose_docs()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if ISSUE_REFERENCE.search(line)
    ]
    assert not found, "say what the thing is, not which issue brought it:\n" + "\n".join(found)


def test_named_wants_the_whole_path() -> None:
    assert named("  errors.py  the TarnError family", "errors.py")
    assert not named("(with tarn/errors.py)", "errors.py")
    assert not named("roles/hadoop_conf", "roles/hadoop")
    assert named("roles/hadoop, then", "roles/hadoop")
