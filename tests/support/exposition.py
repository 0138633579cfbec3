"""A /metrics text read back with prometheus_client's own parser and held against its declaration
(tarn.stdlib.exposition.Family): the families, their types, their samples' names and labels."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client.parser import text_string_to_metric_families

from tarn.stdlib.exposition import Family


def departures(
    text: str, declared: Iterable[Family], help_texts: Mapping[Family, str] | None = None, prefix: str = ""
) -> list[str]:
    """Where ``text`` departs from ``declared``: a family missing or not declared, another type or
    help (``help_texts``' where given, else the declared), a sample of another name (``_created``
    among them) or with other labels. Empty when none. Only the families named ``prefix…`` count."""
    wanted = {family.name: family for family in declared}
    found: list[str] = []
    parsed = [family for family in text_string_to_metric_families(text) if family.name.startswith(prefix)]
    names = [family.name for family in parsed]
    found += [f"{name}: written twice" for name in sorted({n for n in names if names.count(n) > 1})]
    found += [f"{name}: declared, not written" for name in sorted(set(wanted) - set(names))]
    for family in parsed:
        declaration = wanted.get(family.name)
        if declaration is None:
            found.append(f"{family.name}: written, not declared")
            continue
        if family.type != declaration.kind:
            found.append(f"{family.name}: a {family.type}, declared a {declaration.kind}")
        help_text = (help_texts or {}).get(declaration, declaration.help)
        if family.documentation != help_text:
            found.append(f"{family.name}: help {family.documentation!r}, not {help_text!r}")
        for sample in family.samples:
            if sample.name not in declaration.samples:
                found.append(f"{family.name}: a sample {sample.name}")
            labels = set(sample.labels) - ({"le"} if sample.name.endswith("_bucket") else set())
            if labels != set(declaration.labels):
                found.append(f"{sample.name}: labels {sorted(labels)}, declared {list(declaration.labels)}")
    return found
