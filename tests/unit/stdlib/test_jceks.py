"""The stdlib-only JCEKS reader: real keystores from keytool and Java, cross-checked with pyjks.

DES is checked against published known-answer values, 3DES-CBC against OpenSSL, and the key
derivation against pyjks and a ciphertext produced by the JDK itself.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import struct
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from tarn.stdlib import jceks
from tarn.stdlib.jceks import (
    HADOOP_DEFAULT_PASSWORD,
    JceksError,
    derive_triple_des_key_iv,
    des_decrypt_block,
    des_ede3_cbc_decrypt,
    des_encrypt_block,
    parse_pbe_parameters,
    pbe_password_bytes,
    pkcs5_unpad,
    read_secret_entries,
)
from tests.support.jceks import (
    HADOOP_SECRETS,
    KEYTOOL_SECRETS,
    STORE_PASSWORD,
    assert_secrets_absent,
    make_hadoop_store,
    make_keytool_store,
)

requires_keytool = pytest.mark.usefixtures("require_keytool")
requires_java = pytest.mark.usefixtures("require_java")
requires_openssl = pytest.mark.usefixtures("require_openssl")


def expected_entries(secrets: Mapping[str, str]) -> dict[str, bytes]:
    """JCEKS lowercases aliases; values come back as their UTF-8 bytes."""
    return {alias.lower(): value.encode() for alias, value in secrets.items()}


@pytest.fixture(scope="module")
def keytool_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("keytool") is None:
        pytest.fail("needs Java's keytool: CI installs a JDK")
    return make_keytool_store(tmp_path_factory.mktemp("keytool") / "secrets.jceks", KEYTOOL_SECRETS)


@pytest.fixture(scope="module")
def hadoop_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("java") is None:
        pytest.fail("needs a JDK (java): CI installs one")
    path = tmp_path_factory.mktemp("hadoop") / "creds.jceks"
    return make_hadoop_store(path, HADOOP_SECRETS, HADOOP_DEFAULT_PASSWORD)


# --------------------------------------------------------------------------- real keystores


def test_keytool_store_values_decode_exactly(keytool_store: Path) -> None:
    entries = read_secret_entries(keytool_store.read_bytes(), STORE_PASSWORD)
    assert entries == expected_entries(KEYTOOL_SECRETS)
    assert "tarn.env.foo" in entries  # JCEKS lowercased the alias


def test_hadoop_store_with_default_password_none(hadoop_store: Path) -> None:
    assert HADOOP_DEFAULT_PASSWORD == "none"  # noqa: S105 - Hadoop's public default
    entries = read_secret_entries(hadoop_store.read_bytes(), "none")
    assert entries == expected_entries(HADOOP_SECRETS)
    assert entries["huggingface.token"].decode() == HADOOP_SECRETS["huggingface.token"]


@pytest.mark.parametrize(
    ("store", "password"), [("keytool_store", STORE_PASSWORD), ("hadoop_store", HADOOP_DEFAULT_PASSWORD)]
)
def test_agrees_with_pyjks(request: pytest.FixtureRequest, store: str, password: str) -> None:
    import jks

    path: Path = request.getfixturevalue(store)
    keystore = jks.KeyStore.load(str(path), password)
    theirs = {alias: entry.key for alias, entry in keystore.secret_keys.items()}
    assert read_secret_entries(path.read_bytes(), password) == theirs


@requires_keytool
def test_private_key_and_certificate_entries_are_skipped(tmp_path: Path) -> None:
    path = make_keytool_store(tmp_path / "mixed.jceks", {"tarn.env.ONLY": "only-secret"})
    common = ["-storetype", "jceks", "-keystore", str(path), "-storepass", STORE_PASSWORD]
    subprocess.run(
        ["keytool", "-genkeypair", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=tarn",
         "-alias", "tls", "-keypass", STORE_PASSWORD, *common],
        check=True, capture_output=True,
    )  # fmt: skip
    cert = tmp_path / "tls.der"
    subprocess.run(
        ["keytool", "-exportcert", "-alias", "tls", "-file", str(cert), *common],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(cert), *common],
        check=True, capture_output=True,
    )  # fmt: skip
    assert read_secret_entries(path.read_bytes(), STORE_PASSWORD) == {"tarn.env.only": b"only-secret"}


def test_empty_store_has_no_entries() -> None:
    body = struct.pack(">IIi", 0xCECECECE, 2, 0)
    assert read_secret_entries(body + _integrity_digest(body, "pw"), "pw") == {}


# --------------------------------------------------------------------------- failures


def test_wrong_password_fails_without_showing_secrets(keytool_store: Path) -> None:
    with pytest.raises(JceksError, match="wrong password") as caught:
        read_secret_entries(keytool_store.read_bytes(), "not-the-password")
    assert_secrets_absent(caught.value, KEYTOOL_SECRETS)


def test_wrong_default_password(hadoop_store: Path) -> None:
    with pytest.raises(JceksError, match="wrong password"):
        read_secret_entries(hadoop_store.read_bytes(), STORE_PASSWORD)


@pytest.mark.parametrize("keep", [0, 3, 11, 40, 200, 0.5, -21, -1])
def test_truncated_store_fails(keytool_store: Path, keep: float) -> None:
    data = keytool_store.read_bytes()
    cut = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    with pytest.raises(JceksError, match=r"truncated|corrupt|not a JCEKS") as caught:
        read_secret_entries(data[:cut], STORE_PASSWORD)
    assert_secrets_absent(caught.value, KEYTOOL_SECRETS)


def test_altered_byte_fails_integrity_check(keytool_store: Path) -> None:
    data = bytearray(keytool_store.read_bytes())
    data[len(data) // 2] ^= 0x01  # inside an encrypted key: structure intact, digest wrong
    with pytest.raises(JceksError, match="integrity check failed"):
        read_secret_entries(bytes(data), STORE_PASSWORD)


def test_trailing_bytes_are_refused(keytool_store: Path) -> None:
    with pytest.raises(JceksError, match="after the integrity digest"):
        read_secret_entries(keytool_store.read_bytes() + b"\0", STORE_PASSWORD)


@pytest.mark.parametrize("data", [b"", b"\xfe\xed", b"PK\x03\x04" + bytes(40), bytes(64)])
def test_not_a_keystore(data: bytes) -> None:
    with pytest.raises(JceksError):
        read_secret_entries(data, STORE_PASSWORD)


@requires_keytool
def test_key_password_different_from_store_password(tmp_path: Path) -> None:
    secrets = {"tarn.env.OTHER": "sealed-with-another-password"}
    path = make_keytool_store(tmp_path / "k.jceks", secrets, key_password="another-pw")  # noqa: S106 - test data
    with pytest.raises(JceksError, match=r"'tarn\.env\.other'.*key password differs") as caught:
        read_secret_entries(path.read_bytes(), STORE_PASSWORD)
    assert_secrets_absent(caught.value, secrets)


@requires_keytool
def test_wrong_key_that_happens_to_pass_the_padding_check(
    keytool_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # About one wrong key in 256 decrypts to bytes whose last byte is 0x01 (valid PKCS#5 padding);
    # a CI run once drew one. Such plaintext is not a serialization stream and must read the same.
    monkeypatch.setattr(jceks, "des_ede3_cbc_decrypt", lambda key, iv, data: b"\x9c" * 15 + b"\x01")
    with pytest.raises(JceksError, match="key password differs"):
        read_secret_entries(keytool_store.read_bytes(), STORE_PASSWORD)


def _integrity_digest(body: bytes, password: str) -> bytes:
    return hashlib.sha1(
        password.encode("utf-16-be") + b"Mighty Aphrodite" + body, usedforsecurity=False
    ).digest()


def _entry_header(tag: int, alias: str) -> bytes:
    name = alias.encode()
    return struct.pack(">iH", tag, len(name)) + name + struct.pack(">q", 0)


def test_unknown_entry_type_is_refused() -> None:
    body = struct.pack(">IIi", 0xCECECECE, 2, 1) + _entry_header(9, "strange")
    with pytest.raises(JceksError, match=r"unsupported keystore entry type 9 \(alias 'strange'\)"):
        read_secret_entries(body + _integrity_digest(body, "pw"), "pw")


@pytest.mark.parametrize(
    ("stream", "problem"),
    [
        (b"\xac\xed\x00\x05\x7b", "unsupported serialization type code 0x7b"),  # TC_EXCEPTION
        (b"\xac\xed\x00\x05\x71\x00\x7e\x00\x09", "dangling back reference"),
        (b"\xac\xed\x00\x04\x70", "not a Java serialization stream"),
        (b"\xac\xed\x00\x05\x74\x00\x02A", "truncated"),
    ],
)
def test_malformed_serialized_entry(stream: bytes, problem: str) -> None:
    body = struct.pack(">IIi", 0xCECECECE, 2, 1) + _entry_header(3, "bad") + stream
    with pytest.raises(JceksError, match=problem):
        read_secret_entries(body + _integrity_digest(body, "pw"), "pw")


def test_sealed_entry_that_is_not_a_sealed_object() -> None:
    stream = b"\xac\xed\x00\x05\x74\x00\x05hello"  # a bare String where a SealedObject belongs
    body = struct.pack(">IIi", 0xCECECECE, 2, 1) + _entry_header(3, "str") + stream
    with pytest.raises(JceksError, match="'str' is not a sealed object"):
        read_secret_entries(body + _integrity_digest(body, "pw"), "pw")


def test_non_ascii_password_cannot_unseal() -> None:
    with pytest.raises(JceksError, match="printable ASCII"):
        pbe_password_bytes("pässwörd")
    assert pbe_password_bytes("none") == b"none"


# --------------------------------------------------------------------------- DES (FIPS 46-3)

DES_KNOWN_ANSWERS = [
    # (key, plaintext, ciphertext)
    ("133457799BBCDFF1", "0123456789ABCDEF", "85E813540F0AB405"),  # the classic worked example
    ("0123456789ABCDEF", "4E6F772069732074", "3FA40E8A984D4815"),  # FIPS 81: "Now is t"
    ("0000000000000000", "0000000000000000", "8CA64DE9C1B123A7"),
    ("FFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFF", "7359B2163E4EDC58"),
    ("3000000000000000", "1000000000000001", "958E6E627A05557B"),
    ("1111111111111111", "1111111111111111", "F40379AB9E0EC533"),
    ("0123456789ABCDEF", "1111111111111111", "17668DFC7292532D"),
    # NIST SP 800-17 variable-plaintext and variable-key known-answer tests
    ("0101010101010101", "8000000000000000", "95F8A5E5DD31D900"),
    ("0101010101010101", "4000000000000000", "DD7F121CA5015619"),
    ("0101010101010101", "2000000000000000", "2E8653104F3834EA"),
    ("8001010101010101", "0000000000000000", "95A8D72813DAA94D"),
    ("4001010101010101", "0000000000000000", "0EEC1487DD8C26D5"),
]


@pytest.mark.parametrize(("key", "plain", "cipher"), DES_KNOWN_ANSWERS)
def test_des_known_answers(key: str, plain: str, cipher: str) -> None:
    k, p, c = bytes.fromhex(key), bytes.fromhex(plain), bytes.fromhex(cipher)
    assert des_encrypt_block(k, p) == c
    assert des_decrypt_block(k, c) == p


def test_des_rivest_iteration() -> None:
    """Rivest's DES test: 16 alternating encryptions/decryptions of x under key x."""
    x = bytes.fromhex("9474B8E8C73BCA7D")
    for i in range(16):
        x = des_encrypt_block(x, x) if i % 2 == 0 else des_decrypt_block(x, x)
    assert x.hex().upper() == "1B1A2DDB4C642438"


def test_des_tables_are_consistent() -> None:
    from tarn.stdlib import jceks

    assert [jceks._IP[p - 1] for p in jceks._FP] == list(range(1, 65))  # FP is IP's inverse
    for box in jceks._SBOXES:
        for row in range(4):
            assert sorted(box[16 * row : 16 * row + 16]) == list(range(16))


def _openssl_encrypt(key: bytes, iv: bytes, plain: bytes) -> bytes:
    return subprocess.run(
        ["openssl", "enc", "-des-ede3-cbc", "-K", key.hex(), "-iv", iv.hex()],
        input=plain, capture_output=True, check=True,
    ).stdout  # fmt: skip


@requires_openssl
@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 64, 301])
def test_triple_des_cbc_matches_openssl(size: int) -> None:
    key, iv, plain = os.urandom(24), os.urandom(8), os.urandom(size)
    ciphertext = _openssl_encrypt(key, iv, plain)  # PKCS#5 padded
    assert pkcs5_unpad(des_ede3_cbc_decrypt(key, iv, ciphertext)) == plain


@pytest.mark.parametrize(
    "padded", [b"", b"1234567", b"12345678", b"1234567\x00", b"1234567\x09", b"123456\x01\x02"]
)
def test_bad_padding(padded: bytes) -> None:
    with pytest.raises(ValueError, match="bad padding"):
        pkcs5_unpad(padded)


# --------------------------------------------------------------------------- PBEWithMD5AndTripleDES


def test_key_derivation_agrees_with_pyjks() -> None:
    from jks import sun_crypto

    salt = bytes.fromhex("066e9207e5d5eee2")
    theirs = sun_crypto._jce_pbe_derive_key_and_iv("changeit", salt, 1000)
    assert derive_triple_des_key_iv(b"changeit", salt, 1000) == theirs


def test_openssl_md5_fallback_derives_the_same_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from tarn.stdlib import jceks

    salt = bytes.fromhex("066e9207e5d5eee2")
    builtin = derive_triple_des_key_iv(b"changeit", salt, 500)
    monkeypatch.setattr(jceks, "_new_md5", functools.partial(hashlib.md5, usedforsecurity=False))
    assert derive_triple_des_key_iv(b"changeit", salt, 500) == builtin


def test_equal_salt_halves_match_the_jdk() -> None:
    """Ciphertext from JDK 17 (and 25): Cipher PBEWithMD5AndTripleDES, salt 01020304 01020304, count 7.

    Current JDKs reverse the first salt half when both halves are equal (older ones had a typo
    there, which pyjks reproduces; this reader follows the JDKs that write stores today).
    """
    key, iv = derive_triple_des_key_iv(b"changeit", bytes.fromhex("0102030401020304"), 7)
    ciphertext = bytes.fromhex("08cefce6c2d66398472311fa99cb5528")
    assert pkcs5_unpad(des_ede3_cbc_decrypt(key, iv, ciphertext)) == b"probe-text"


def test_pbe_parameters_from_der() -> None:
    der = bytes.fromhex("300f0408066e9207e5d5eee20203030d40")
    assert parse_pbe_parameters(der) == (bytes.fromhex("066e9207e5d5eee2"), 200_000)


@pytest.mark.parametrize(("salt", "count"), [(bytes(7), 10), (bytes(8), 0), (bytes(8), 5_000_001)])
def test_bad_pbe_parameters(salt: bytes, count: int) -> None:
    with pytest.raises(JceksError):
        derive_triple_des_key_iv(b"pw", salt, count)
