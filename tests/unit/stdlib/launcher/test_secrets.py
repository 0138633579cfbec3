"""JCEKS secrets → environment variables: the alias mapping rules, and real keystores end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from tarn.stdlib.jceks import HADOOP_DEFAULT_PASSWORD, JceksError
from tarn.stdlib.launcher.secrets import (
    SecretsError,
    keystore_password,
    load_environment_from_jceks,
    secrets_to_environment,
    variable_for_alias,
)
from tests.support.jceks import (
    HADOOP_SECRETS,
    KEYTOOL_SECRETS,
    STORE_PASSWORD,
    assert_secrets_absent,
    make_hadoop_store,
    make_keytool_store,
)


@pytest.mark.parametrize(
    ("alias", "variable"),
    [
        ("huggingface.token", "HUGGING_FACE_HUB_TOKEN"),
        ("HuggingFace.Token", "HUGGING_FACE_HUB_TOKEN"),
        ("tarn.env.foo", "FOO"),  # JCEKS stores tarn.env.FOO lowercased
        ("tarn.env.FOO", "FOO"),
        ("tarn.env.aws_secret_key", "AWS_SECRET_KEY"),
        ("tarn.env._private2", "_PRIVATE2"),
        ("TARN.ENV.mixed_Case", "MIXED_CASE"),
        ("db.password", None),
        ("tarn.environment", None),
        ("huggingface.token.old", None),
    ],
)
def test_variable_for_alias(alias: str, variable: str | None) -> None:
    assert variable_for_alias(alias) == variable


@pytest.mark.parametrize(
    "alias",
    [
        "tarn.env.",
        "tarn.env.1abc",
        "tarn.env.a-b",
        "tarn.env.a.b",
        "tarn.env.a b",
        "tarn.env.é",
        "tarn.env.a=",
    ],
)
def test_invalid_variable_names_are_rejected_naming_the_alias_only(alias: str) -> None:
    secret = "s3cr3t-value-never-shown"  # noqa: S105 - test data
    with pytest.raises(SecretsError, match="does not name a valid environment variable") as caught:
        secrets_to_environment({alias: secret.encode()})
    assert repr(alias) in str(caught.value)
    assert_secrets_absent(caught.value, {"value": secret})


def test_mapping() -> None:
    entries = {
        "huggingface.token": b"hf_123",
        "tarn.env.foo": b"bar",
        "tarn.env.aws_secret_key": "ké€y".encode(),
        "tarn.env.empty": b"",
        "hadoop.other.credential": b"ignored",
    }
    assert secrets_to_environment(entries) == {
        "HUGGING_FACE_HUB_TOKEN": "hf_123",
        "FOO": "bar",
        "AWS_SECRET_KEY": "ké€y",
        "EMPTY": "",
    }


def test_value_that_is_not_utf8() -> None:
    with pytest.raises(SecretsError, match=r"'tarn\.env\.bin' is not UTF-8") as caught:
        secrets_to_environment({"tarn.env.bin": b"\xffzq-hidden-zq\xfe"})
    assert caught.value.__suppress_context__  # the UnicodeDecodeError (holding the bytes) is not chained
    assert_secrets_absent(caught.value, {"value": "zq-hidden-zq"})


def test_value_with_nul() -> None:
    with pytest.raises(SecretsError, match="NUL") as caught:
        secrets_to_environment({"tarn.env.nul": b"abc\0zq-hidden-zq"})
    assert_secrets_absent(caught.value, {"value": "zq-hidden-zq"})


def test_two_aliases_for_one_variable() -> None:
    entries = {"huggingface.token": b"a", "tarn.env.hugging_face_hub_token": b"b"}
    with pytest.raises(SecretsError, match="both set HUGGING_FACE_HUB_TOKEN"):
        secrets_to_environment(entries)


@pytest.mark.parametrize(
    ("environ", "password"),
    [
        ({}, "none"),
        ({"HADOOP_CREDSTORE_PASSWORD": ""}, "none"),
        ({"HADOOP_CREDSTORE_PASSWORD": "pw123456"}, "pw123456"),
    ],
)
def test_keystore_password(environ: dict[str, str], password: str) -> None:
    assert keystore_password(environ) == password


@pytest.mark.usefixtures("require_keytool")
def test_keytool_store_to_environment(tmp_path: Path) -> None:
    path = make_keytool_store(tmp_path / "s.jceks", KEYTOOL_SECRETS)
    assert load_environment_from_jceks(str(path), STORE_PASSWORD) == {
        "HUGGING_FACE_HUB_TOKEN": KEYTOOL_SECRETS["huggingface.token"],
        "FOO": KEYTOOL_SECRETS["tarn.env.FOO"],
        "AWS_SECRET_KEY": KEYTOOL_SECRETS["tarn.env.AWS_SECRET_KEY"],
    }
    with pytest.raises(JceksError) as caught:
        load_environment_from_jceks(str(path), "wrong-password")
    assert_secrets_absent(caught.value, KEYTOOL_SECRETS)


@pytest.mark.usefixtures("require_java")
def test_hadoop_store_with_default_password(tmp_path: Path) -> None:
    path = make_hadoop_store(tmp_path / "h.jceks", HADOOP_SECRETS, HADOOP_DEFAULT_PASSWORD)
    password = keystore_password({})
    assert load_environment_from_jceks(str(path), password) == {
        "HUGGING_FACE_HUB_TOKEN": HADOOP_SECRETS["huggingface.token"],
        "FOO": "bar",
    }


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_environment_from_jceks(str(tmp_path / "absent.jceks"), "none")
