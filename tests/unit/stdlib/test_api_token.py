"""The API token's one reader (tarn.stdlib.api_token.read_token): a blank --token-file is refused
at start, naming the flag, where it used to leave the controller's API open (issue 48, row 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tarn.errors import ConfigError
from tarn.stdlib.api_token import Secret, read_token


def test_the_token_of_a_file_drops_the_line_end(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cr3t-token\n")
    assert read_token(None, str(tmp_path / "token")) == Secret("s3cr3t-token")


def test_a_token_given_wins_and_none_is_none() -> None:
    assert read_token("given", None) == Secret("given")
    assert read_token(None, None) is None


@pytest.mark.parametrize("content", ["", "\n", "   \t\n"])
def test_a_blank_token_file_is_refused_naming_the_flag(tmp_path: Path, content: str) -> None:
    (tmp_path / "token").write_text(content)
    with pytest.raises(ConfigError, match=r"^--token-file: .* is empty: write the service's token"):
        read_token(None, str(tmp_path / "token"))


@pytest.mark.parametrize("content", ["two words", "tok\x00en", "tök"])
def test_a_token_file_with_more_than_a_token_is_refused_unechoed(tmp_path: Path, content: str) -> None:
    (tmp_path / "token").write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^--token-file: .* spaces or non-printable") as refused:
        read_token(None, str(tmp_path / "token"))
    assert content not in str(refused.value)
