"""The controller's API token: a :class:`Secret` that never shows itself, and the one reader of it."""

from __future__ import annotations

import hmac
from pathlib import Path

from tarn.errors import ConfigError


class Secret:
    """A string that never shows itself: repr, str and format print ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def matches(self, candidate: str) -> bool:
        """Constant-time comparison, for checking a presented token."""
        return hmac.compare_digest(self._value.encode(), candidate.encode())

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and self.matches(other._value)

    def __hash__(self) -> int:
        return hash((Secret, self._value))


TOKEN_HEADER = "X-TARN-Token"  # noqa: S105 - a header name, not a token


def presented(token_header: str | None, authorization: str | None) -> str | None:
    """The token a request presents in its headers: ``X-TARN-Token``, else a Bearer credential."""
    if token_header:
        return token_header
    scheme, sep, credentials = (authorization or "").partition(" ")
    if sep and scheme.lower() == "bearer":
        return credentials.strip()
    return None


def well_formed(value: str) -> bool:
    """A token is printable ASCII without spaces: it goes in a header, and is never echoed."""
    return all("!" <= char <= "~" for char in value)


def read_token(token: str | Secret | None, token_file: str | None) -> Secret | None:
    """The API token: the one given, else the content of ``token_file`` (surrounding whitespace
    dropped), else None. One reader for the CLI, the modules, submit and the controller."""
    if token is not None:
        return token if isinstance(token, Secret) else Secret(token)
    if token_file is not None:
        return _token_of_file(token_file)
    return None


def _token_of_file(path: str) -> Secret:
    """The token in ``path``; ConfigError for a blank file or one that holds more than a token: an
    empty token would leave the controller's API open (issue 48, row 7)."""
    value = Path(path).read_text(errors="replace").strip()
    if not value:
        raise ConfigError(f"--token-file: {path} is empty: write the service's token in it (one line)")
    if not well_formed(value):
        raise ConfigError(
            f"--token-file: {path} holds spaces or non-printable characters: write the token alone, "
            "printable ASCII"
        )
    return Secret(value)
