"""tarn status's problem lines, from the RM's service JSON alone (issue 47: nobody should learn
from users that the controller is gone or that YARN allocates nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from tarn.service.report import problems, summary

JSON = dict[str, Any]


def service(
    state: str = "STABLE", controller: list[str] | None = None, tritons: int = 2, wanted: int = 2
) -> JSON:
    """A TARN service as the RM shows it: the controller's containers by state, Triton's count."""
    controller = ["READY"] if controller is None else controller
    return {
        "name": "svc",
        "state": state,
        "components": [
            {
                "name": "controller",
                "number_of_containers": 1,
                "containers": [{"id": f"c{n}", "state": s} for n, s in enumerate(controller)],
            },
            {
                "name": "triton",
                "number_of_containers": wanted,
                "containers": [{"id": f"t{n}", "state": "READY"} for n in range(tritons)],
            },
        ],
    }


@pytest.mark.parametrize(
    ("shown", "said"),
    [
        (service(), []),
        (
            service(controller=[]),
            ["the controller is not running (no container)", "placed 0 of 1 controller"],
        ),
        (
            service(controller=["RUNNING_BUT_UNREADY"]),
            ["the controller is not running (RUNNING_BUT_UNREADY)"],
        ),
        (service(tritons=1), ["placed 1 of 2 triton containers"]),
        (service(state="STOPPED", controller=[], tritons=0), []),  # stopped on purpose
        (service(state="ACCEPTED", controller=[], tritons=0), []),  # no AM to report yet
    ],
    ids=[
        "healthy",
        "no controller container",
        "controller unready",
        "a triton unplaced",
        "stopped",
        "accepted",
    ],
)
def test_problem_lines_name_the_cause(shown: JSON, said: list[str]) -> None:
    found = problems(shown)
    assert len(found) == len(said), found
    for line, words in zip(found, said, strict=True):
        assert words in line


def test_the_controller_s_absence_says_what_goes_on_and_what_waits() -> None:
    line = problems(service(controller=[]))[0]
    assert "stay discoverable" in line
    assert "nothing is scaled, drained or newly registered" in line


def test_the_summary_carries_the_problems() -> None:
    assert summary(service(tritons=1))["problems"] == problems(service(tritons=1))
    assert summary(service())["problems"] == []
