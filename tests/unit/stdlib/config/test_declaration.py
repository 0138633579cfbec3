"""cli_flag: how the checks and notes name an option, from its declaration."""

from __future__ import annotations

import pytest

from tarn.stdlib.config import OPTIONS, cli_flag, flag_of


@pytest.mark.parametrize(
    ("name", "flag"),
    [
        ("min_instances", "--min-instances"),
        ("anti_affinity", "--no-anti-affinity"),  # the flag, not the field, is what a user types
        ("scale_to_zero_after_s", "--scale-to-zero-after"),
        ("cooldown_ms", "--cooldown"),
        ("tp", "--tp"),  # the flag TARN writes, not its alias --tensor-parallelism
        ("ranger_service", "--ranger-service"),
    ],
)
def test_cli_flag(name: str, flag: str) -> None:
    assert cli_flag(name) == flag


def test_every_option_has_its_first_flag() -> None:
    assert {item.name: cli_flag(item.name) for item in OPTIONS} == {
        item.name: flag_of(item).names[0] for item in OPTIONS
    }


def test_an_undeclared_name_is_refused() -> None:
    with pytest.raises(KeyError, match="'min_instance' is no TarnConfig option"):
        cli_flag("min_instance")
