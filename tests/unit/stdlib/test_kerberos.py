"""tarn.stdlib.kerberos without a KDC: _HOST in principals, MIT's keytab format (a keytab that
kadmin.local wrote, saved here), the fix each GSSAPI failure names, the Authenticator's header and
MIT's library itself for what needs no KDC. Against a real KDC and acceptor:
tests/integration/test_kerberos_spnego.py."""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests

from tarn.clients.spnego import NegotiateAuth, requests_auth
from tarn.errors import ConfigError
from tarn.service.cluster import kerberos_identity
from tarn.stdlib import kerberos
from tarn.stdlib.kerberos import KerberosIdentity, SpnegoAuth, keytab_principals, resolve_principal

# Written by kadmin.local (MIT krb5 1.20, a throwaway test realm): ktadd of tarn/localhost,
# HTTP/localhost, hdfs/nn1.example.com and tarn (two enctypes), then ktremove of HTTP/localhost,
# which leaves a hole (a negative entry length) where its entry was. klist -k lists:
KADMIN_KEYTAB_PRINCIPALS = ["tarn/localhost@TARN.TEST", "hdfs/nn1.example.com@TARN.TEST", "tarn@TARN.TEST"]
KADMIN_KEYTAB = base64.b64decode(
    "BQIAAABPAAIACVRBUk4uVEVTVAAEdGFybgAJbG9jYWxob3N0AAAAAWsHvmkBABIAIJJrrd2ubXbfAy1nW9wv2/2dkHLxR/B2TYc+"
    "BJxa66tMAAAAAf///7EAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAVQACAAlUQVJOLlRFU1QABGhkZnMAD25uMS5leGFtcGxlLmNvbQAAAAFrB75pAQASACBm+hb4"
    "+9troA7YIWy9lNTqJva5WUQ1tAn2v6R1J2pCiAAAAAEAAABEAAEACVRBUk4uVEVTVAAEdGFybgAAAAFrB75pAQASACA5Bu9Y/+59"
    "qKhcqiT93dbkdim6M2FU+jC2kcn8/5viDQAAAAEAAAA0AAEACVRBUk4uVEVTVAAEdGFybgAAAAFrB75pAQARABCRgKP22qE2XzfE"
    "B2RAV8DnAAAAAQ=="
)


def as_version_0501(data: bytes) -> bytes:
    """The same entries in MIT's older layout 0x0501: integers in the host's byte order, the realm
    counted among the components, no name type. No tool writes it any more; old keytabs remain."""
    native = "<" if sys.byteorder == "little" else ">"
    out = bytearray(b"\x05\x01")
    position = 2
    while position < len(data):
        (size,) = struct.unpack_from(">i", data, position)
        position += 4
        if size < 0:
            out += struct.pack(native + "i", size) + data[position : position - size]
            position -= size
            continue
        entry, position = data[position : position + size], position + size
        (count,) = struct.unpack_from(">H", entry, 0)
        offset, names = 2, list[bytes]()
        while len(names) < count + 1:  # the realm, then the components
            (length,) = struct.unpack_from(">H", entry, offset)
            names.append(entry[offset + 2 : offset + 2 + length])
            offset += 2 + length
        offset += 4  # the name type: not in 0x0501
        timestamp, vno8, keytype, keylength = struct.unpack_from(">IBHH", entry, offset)
        key = entry[offset + 9 : offset + 9 + keylength]
        rewritten = struct.pack(native + "H", count + 1)
        rewritten += b"".join(struct.pack(native + "H", len(name)) + name for name in names)
        rewritten += struct.pack(native + "IBHH", timestamp, vno8, keytype, keylength) + key
        out += struct.pack(native + "i", len(rewritten)) + rewritten
    return bytes(out)


# ---- _HOST


@pytest.mark.parametrize(
    ("principal", "expected"),
    [
        ("tarn/_HOST@EXAMPLE.COM", "tarn/worker1.example.com@EXAMPLE.COM"),
        ("HTTP/_HOST", "HTTP/worker1.example.com"),
        ("tarn/nn1.example.com@EXAMPLE.COM", "tarn/nn1.example.com@EXAMPLE.COM"),
        ("tarn@EXAMPLE.COM", "tarn@EXAMPLE.COM"),
        ("_HOST@EXAMPLE.COM", "_HOST@EXAMPLE.COM"),  # only the host part is replaced, as Hadoop does
        ("tarn/_HOSTNAME@EXAMPLE.COM", "tarn/_HOSTNAME@EXAMPLE.COM"),
    ],
)
def test_resolve_principal(principal: str, expected: str) -> None:
    assert resolve_principal(principal, "Worker1.Example.COM") == expected


def test_resolve_principal_defaults_to_the_fully_qualified_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "getfqdn", lambda: "NM3.Cluster.Example.COM")
    assert resolve_principal("tarn/_HOST@EXAMPLE.COM") == "tarn/nm3.cluster.example.com@EXAMPLE.COM"
    assert KerberosIdentity("tarn/_HOST@EXAMPLE.COM").resolved_principal() == (
        "tarn/nm3.cluster.example.com@EXAMPLE.COM"
    )


def test_resolve_principal_in_a_yarn_container_is_the_nodemanagers_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Docker container's host name is YARN's (triton-0.<service>.<user>): NM_HOST wins."""
    monkeypatch.setattr("socket.getfqdn", lambda: "triton-0.tarn-demo.tarn")
    monkeypatch.setenv("NM_HOST", "Worker2")
    assert resolve_principal("tarn/_HOST@EXAMPLE.COM") == "tarn/worker2@EXAMPLE.COM"


# ---- keytabs


def test_keytab_principals_of_a_keytab_kadmin_wrote(tmp_path: Path) -> None:
    path = tmp_path / "tarn.keytab"
    path.write_bytes(KADMIN_KEYTAB)
    assert keytab_principals(str(path)) == KADMIN_KEYTAB_PRINCIPALS


def test_keytab_principals_of_the_older_format(tmp_path: Path) -> None:
    path = tmp_path / "old.keytab"
    path.write_bytes(as_version_0501(KADMIN_KEYTAB))
    assert path.read_bytes()[:2] == b"\x05\x01"
    assert keytab_principals(str(path)) == KADMIN_KEYTAB_PRINCIPALS


def test_an_empty_keytab_holds_no_principal(tmp_path: Path) -> None:
    path = tmp_path / "empty.keytab"
    path.write_bytes(b"\x05\x02")  # what ktutil writes with no entry
    assert keytab_principals(str(path)) == []
    with pytest.raises(ConfigError, match=r"^--keytab: .* holds no key"):
        KerberosIdentity(None, str(path)).resolved_principal()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        (b"", "is not a Kerberos keytab"),
        (b"\x05\x03" + KADMIN_KEYTAB[2:], "is not a Kerberos keytab"),
        (b"[libdefaults]\n", "is not a Kerberos keytab"),
        (KADMIN_KEYTAB[:60], "is damaged"),
    ],
    ids=["missing", "empty-file", "unknown-version", "text", "cut-off"],
)
def test_keytab_errors_name_the_flag(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "tarn.keytab"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=rf"^--keytab: .*{message}"):
        keytab_principals(str(path))


def test_a_directory_is_no_keytab(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        keytab_principals(str(tmp_path))


def test_a_keytab_the_user_cannot_read() -> None:
    """A real EACCES: as root (CI), the check runs as nobody (setpriv) on a root-only keytab."""
    home = Path(tempfile.mkdtemp(dir="/tmp"))  # traversable by nobody, unlike pytest's tmp_path
    try:
        home.chmod(0o755)
        keytab = home / "tarn.keytab"
        keytab.write_bytes(KADMIN_KEYTAB)
        keytab.chmod(0o600 if os.geteuid() == 0 else 0)
        check = f"from tarn.stdlib.kerberos import keytab_principals; keytab_principals({str(keytab)!r})"
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        src = Path(kerberos.__file__).parents[2]
        done = subprocess.run(
            [*nobody, "/usr/bin/python3", "-c", check],
            env={"PYTHONPATH": str(src)}, capture_output=True, text=True, check=False, cwd="/",
        )  # fmt: skip
    finally:
        shutil.rmtree(home)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"tarn.errors.ConfigError: --keytab: cannot read {keytab} (Permission denied); "
        "the user running TARN must be able to read it"
    )


def test_check_finds_a_principal_the_keytab_lacks_before_any_kdc(tmp_path: Path) -> None:
    path = tmp_path / "tarn.keytab"
    path.write_bytes(KADMIN_KEYTAB)
    assert KerberosIdentity("tarn/localhost@TARN.TEST", str(path)).check() == "tarn/localhost@TARN.TEST"
    assert KerberosIdentity("tarn/localhost", str(path)).check() == "tarn/localhost"  # the default realm's
    assert KerberosIdentity(None, str(path)).check() == "tarn/localhost@TARN.TEST"  # the keytab's first
    with pytest.raises(ConfigError, match=r"^--principal: .*holds no key for HTTP/localhost@TARN.TEST"):
        KerberosIdentity("HTTP/localhost@TARN.TEST", str(path)).check()
    assert KerberosIdentity().check() is None  # the ticket cache: nothing to check here


def test_kerberos_identity_of_the_flags(tmp_path: Path) -> None:
    path = tmp_path / "tarn.keytab"
    path.write_bytes(KADMIN_KEYTAB)
    assert kerberos_identity() is None
    assert kerberos_identity(kerberos=True) == KerberosIdentity()
    assert kerberos_identity(keytab=str(path)) == KerberosIdentity(None, str(path))  # implies --kerberos
    assert kerberos_identity(principal="tarn@TARN.TEST") == KerberosIdentity("tarn@TARN.TEST")
    with pytest.raises(ConfigError, match=r"--keytab: .*does not exist"):
        kerberos_identity(keytab=str(tmp_path / "missing.keytab"))


# ---- the fix each failure names (MIT's words as gss_display_status gives them)


@pytest.mark.parametrize(
    ("text", "keytab", "expected"),
    [
        ("Unspecified GSS failure; Clock skew too great", "/k", "--keytab: this host's clock"),
        (
            "Unspecified GSS failure; Server HTTP/nn1@EXAMPLE.COM not found in Kerberos database",
            None,
            "--kerberos: no HTTP/nn1.example.com principal in the KDC",
        ),
        (
            "No credentials were supplied; SPNEGO cannot find mechanisms to negotiate; Kerberos: "
            "Client 'tarn@EXAMPLE.COM' not found in Kerberos database",
            "/k",
            "--keytab: the KDC does not know tarn@EXAMPLE.COM",
        ),
        (
            "Kerberos: Cannot contact any KDC for realm 'EXAMPLE.COM'",
            "/k",
            "--keytab: no KDC of the realm answered",
        ),
        ("Kerberos: Decrypt integrity check failed", "/k", "--keytab: the KDC refused the key"),
        ("Kerberos: Preauthentication failed", "/k", "the keytab is out of date"),
        ("Kerberos: No key table entry found for tarn@EXAMPLE.COM", "/k", "holds no usable key"),
        ("Unspecified GSS failure; Ticket expired", None, "--kerberos: the ticket of tarn@EXAMPLE.COM"),
        ("Unspecified GSS failure; Ticket expired", "/k", "--keytab: the tickets obtained from /k expired"),
        (
            "No credentials were supplied; Kerberos: No Kerberos credentials available (default cache: "
            "FILE:/tmp/krb5cc_1000)",
            None,
            "run kinit, or give a keytab (--keytab)",
        ),
        ("Something new", None, "--kerberos: Kerberos authentication failed (GSSAPI: Something new)"),
    ],
)
def test_explain_names_the_fix(text: str, keytab: str | None, expected: str) -> None:
    message = kerberos.explain(text, "tarn@EXAMPLE.COM", keytab, "nn1.example.com")
    assert expected in message
    assert message.endswith(f"(GSSAPI: {text})")  # MIT's own words always follow


def test_a_credential_is_acquired_again_past_half_its_lifetime() -> None:
    assert kerberos.reacquire_after(36000) == kerberos.REACQUIRE_MAX_S
    assert kerberos.reacquire_after(8) == 5
    assert kerberos.reacquire_after(0) == 1
    assert kerberos.reacquire_after(kerberos.GSS_C_INDEFINITE) == kerberos.REACQUIRE_MAX_S


def test_oid_encoding() -> None:
    spnego = kerberos.oid(kerberos.SPNEGO_MECHANISM)
    assert ctypes.string_at(spnego.elements, spnego.length) == bytes.fromhex("2b0601050502")
    krb5 = kerberos.oid(kerberos.KRB5_MECHANISM)
    assert ctypes.string_at(krb5.elements, krb5.length) == bytes.fromhex("2a864886f712010202")


# ---- the headers


class RecordingIdentity(KerberosIdentity):
    def negotiate(self, host: str) -> str:
        return f"Negotiate token-for-{host}"


def test_spnego_auth_asks_for_the_http_service_of_the_urls_host() -> None:
    auth = SpnegoAuth(RecordingIdentity())
    assert auth.query() == {}
    url = "http://nn1.example.com:9870/webhdfs/v1/x?op=GETFILESTATUS"
    assert auth.headers(url) == {"Authorization": "Negotiate token-for-nn1.example.com"}


@pytest.mark.parametrize(
    "query", ["op=OPEN&delegation=abc", "delegation=abc&op=OPEN&offset=0", "delegation="]
)
def test_no_header_on_a_delegation_token_url(query: str) -> None:
    """The DataNode a NameNode redirects to is authorized by the delegation token in the URL."""
    assert SpnegoAuth(RecordingIdentity()).headers(f"http://dn1.example.com:9864/webhdfs/v1/x?{query}") == {}


def test_the_requests_auth_sets_the_header_before_the_first_request() -> None:
    request = requests.Request("GET", "http://rm1.example.com:8088/ws/v1/cluster/info").prepare()
    NegotiateAuth(RecordingIdentity())(request)
    assert request.headers["Authorization"] == "Negotiate token-for-rm1.example.com"
    assert isinstance(requests_auth(), NegotiateAuth)


# ---- MIT's library, where no KDC is needed


def test_a_missing_library_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(
        ConfigError, match=r"libgssapi_krb5.so.9 is not on this host.*install libgssapi-krb5-2"
    ):
        kerberos._load("libgssapi_krb5.so.9")


def test_an_empty_ticket_cache_with_the_real_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "krb5.conf").write_text("[libdefaults]\n    default_realm = TARN.TEST\n")
    monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "krb5.conf"))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/no-cache")
    monkeypatch.setenv("KRB5_CLIENT_KTNAME", f"FILE:{tmp_path}/no-client-keytab")
    with pytest.raises(
        ConfigError, match=r"^--kerberos: no Kerberos ticket .*run kinit, or give a keytab"
    ) as err:
        KerberosIdentity().negotiate("nn1.example.com")
    assert f"FILE:{tmp_path}/no-cache" in str(err.value)


def test_explain_names_the_service_principal_a_kdc_lacks() -> None:
    message = kerberos.explain(
        "Server zookeeper/10.0.0.1@EXAMPLE.COM not found in Kerberos database",
        "tarn@EXAMPLE.COM",
        "/k",
        "10.0.0.1",
        "zookeeper",
    )
    assert "no zookeeper/10.0.0.1 principal in the KDC" in message
