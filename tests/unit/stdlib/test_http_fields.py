"""tarn.stdlib.http_fields: the Content-Length both of TARN's HTTP readers accept."""

from __future__ import annotations

import pytest

from tarn.stdlib.http_fields import MAX_LENGTH_DIGITS, content_length


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("12", 12),
        ("007", 7),
        ("9" * MAX_LENGTH_DIGITS, int("9" * MAX_LENGTH_DIGITS)),
        ("9" * (MAX_LENGTH_DIGITS + 1), None),  # int() refuses over 4,300 digits; nothing needs 16
        ("", None),
        ("-1", None),
        ("+1", None),
        (" 1", None),
        ("1_000", None),  # int() takes it
        ("\u00b2", None),  # isdigit() takes it, int() does not
        ("\u0663", None),  # int() takes it: an Arabic-Indic three is no HTTP digit
    ],
)
def test_content_length(text: str, value: int | None) -> None:
    assert content_length(text) == value
