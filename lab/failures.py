"""Print the failed tests of a JUnit XML report, so the end of a long log names them.

Molecule's destroy step and recap come after the verifier's pytest summary; CI keeps only the
end of its output. Usage: python lab/failures.py REPORT.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def failures(report: Path) -> list[str]:
    """One line per failed or errored test case: its id and the first line of the reason."""
    lines = []
    for case in ET.parse(report).iter("testcase"):  # noqa: S314 - our own pytest's report
        for problem in (*case.findall("failure"), *case.findall("error")):
            reason = (problem.get("message") or "").strip().splitlines()
            test = f"{case.get('classname')}::{case.get('name')}"
            lines.append(f"{problem.tag.upper()} {test}: {reason[0][:300] if reason else ''}")
    return lines


def main(argv: list[str]) -> int:
    report = Path(argv[1])
    if not report.exists():
        print(f"no report at {report}: the tests did not run")
        return 0
    found = failures(report)
    print(f"{len(found)} failed in {report}:" if found else f"no failures in {report}")
    print("\n".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
