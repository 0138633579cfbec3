"""Turn the secret entries of a JCEKS keystore into environment variables for Triton.

Rules: alias ``huggingface.token`` → ``HUGGING_FACE_HUB_TOKEN``; alias ``tarn.env.X`` → ``X``
upper-cased (JCEKS lowercases aliases, so ``tarn.env.AWS_SECRET_KEY`` is stored as
``tarn.env.aws_secret_key`` and comes back as ``AWS_SECRET_KEY``). Other aliases are ignored.
Values are UTF-8. Error messages name aliases, never values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from tarn.stdlib.jceks import HADOOP_DEFAULT_PASSWORD, read_secret_entries

HUGGING_FACE_ALIAS = "huggingface.token"
HUGGING_FACE_VARIABLE = "HUGGING_FACE_HUB_TOKEN"
ENV_ALIAS_PREFIX = "tarn.env."
PASSWORD_VARIABLE = "HADOOP_CREDSTORE_PASSWORD"  # noqa: S105 - the variable's name, not a password
_VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*\Z")


class SecretsError(ValueError):
    """A keystore entry cannot become an environment variable; the message names its alias only."""


def variable_for_alias(alias: str) -> str | None:
    """The environment variable an alias maps to, or None for an alias TARN does not use."""
    lowered = alias.lower()
    if lowered == HUGGING_FACE_ALIAS:
        return HUGGING_FACE_VARIABLE
    if not lowered.startswith(ENV_ALIAS_PREFIX):
        return None
    name = alias[len(ENV_ALIAS_PREFIX) :].upper()
    if not _VARIABLE_NAME.match(name):
        raise SecretsError(
            f"keystore alias {alias!r} does not name a valid environment variable "
            "(after 'tarn.env.': letters, digits and '_', not starting with a digit)"
        )
    return name


def _decode_value(alias: str, value: bytes) -> str:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretsError(f"the secret under keystore alias {alias!r} is not UTF-8 text") from None
    if "\0" in text:
        raise SecretsError(f"the secret under keystore alias {alias!r} contains a NUL character")
    return text


def secrets_to_environment(entries: Mapping[str, bytes]) -> dict[str, str]:
    """Environment variables from alias → secret bytes, by the module's mapping rules."""
    environment: dict[str, str] = {}
    source: dict[str, str] = {}
    for alias, value in entries.items():
        variable = variable_for_alias(alias)
        if variable is None:
            continue
        if variable in source:
            raise SecretsError(f"keystore aliases {source[variable]!r} and {alias!r} both set {variable}")
        source[variable] = alias
        environment[variable] = _decode_value(alias, value)
    return environment


def keystore_password(environ: Mapping[str, str]) -> str:
    """The store password as Hadoop finds it: HADOOP_CREDSTORE_PASSWORD, else ``none``."""
    return environ.get(PASSWORD_VARIABLE) or HADOOP_DEFAULT_PASSWORD


def load_environment_from_jceks(path: str, password: str) -> dict[str, str]:
    """Read a JCEKS file and map its secrets to environment variables.

    Raises JceksError (bad password, corrupt file), SecretsError (bad alias or value) — both
    ValueError — or OSError when the file cannot be read.
    """
    return secrets_to_environment(read_secret_entries(Path(path).read_bytes(), password))
