"""JCEKS keystores made the two ways TARN meets them: ``keytool -importpass`` (what an operator
runs) and Java's KeyStore API as Hadoop's credential provider writes it; and a check that no error
shows a secret. keytool and java must be installed (the tests that call these say so)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

STORE_PASSWORD = "changeit"  # noqa: S105 - test data

KEYTOOL_SECRETS = {
    "huggingface.token": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "tarn.env.FOO": "foo value with spaces & symbols !#$%",
    "tarn.env.AWS_SECRET_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "db.password": "p@ss=w0rd;--x",
}

# Hadoop's provider stores SecretKeySpec(UTF-8 bytes, "AES"), so any Unicode text survives.
HADOOP_SECRETS = {
    "huggingface.token": "hf_ünïcødé_€_😀",
    "tarn.env.FOO": "bar",
}

# Writes a JCEKS store the way Hadoop's JavaKeyStoreProvider does. Args: path password alias=value...
HADOOP_STORE_JAVA = """
import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.KeyStore;
import javax.crypto.spec.SecretKeySpec;

public class HadoopStore {
    public static void main(String[] args) throws Exception {
        char[] password = args[1].toCharArray();
        KeyStore ks = KeyStore.getInstance("jceks");
        ks.load(null, password);
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            byte[] value = args[i].substring(eq + 1).getBytes(StandardCharsets.UTF_8);
            ks.setKeyEntry(args[i].substring(0, eq), new SecretKeySpec(value, "AES"), password, null);
        }
        try (FileOutputStream out = new FileOutputStream(args[0])) {
            ks.store(out, password);
        }
    }
}
"""


def _java_env() -> dict[str, str]:
    return {**os.environ, "LC_ALL": "C.UTF-8", "JAVA_TOOL_OPTIONS": "-Dfile.encoding=UTF-8"}


def make_keytool_store(
    path: Path, secrets: Mapping[str, str], password: str = STORE_PASSWORD, key_password: str | None = None
) -> Path:
    """``keytool -importpass -storetype jceks`` once per alias, the secret on stdin."""
    for alias, value in secrets.items():
        subprocess.run(
            ["keytool", "-importpass", "-storetype", "jceks", "-keystore", str(path),
             "-storepass", password, "-keypass", key_password or password, "-alias", alias],
            input=value + "\n", text=True, check=True, capture_output=True,
        )  # fmt: skip
    return path


def make_hadoop_store(path: Path, secrets: Mapping[str, str], password: str) -> Path:
    """A store written through Java's KeyStore API as Hadoop's credential provider writes it."""
    source = path.parent / "HadoopStore.java"
    source.write_text(HADOOP_STORE_JAVA)
    pairs = [f"{alias}={value}" for alias, value in secrets.items()]
    subprocess.run(
        ["java", str(source), str(path), password, *pairs], check=True, capture_output=True, env=_java_env()
    )
    return path


def assert_secrets_absent(error: BaseException, secrets: Mapping[str, str]) -> None:
    """No exception in the chain a log would print (causes, unsuppressed contexts) shows a secret."""
    shown: list[str] = []
    current: BaseException | None = error
    while current is not None:
        shown += [str(current), repr(current), repr(current.args)]
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    text = "\n".join(shown)
    for value in secrets.values():
        assert value not in text
        assert repr(value.encode())[2:-1] not in text
