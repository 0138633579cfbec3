"""tarn.stdlib.kerberos against real parts: an MIT KDC (krb5kdc, unprivileged, on a free loopback
port, its own krb5.conf and kdc.conf in a temporary directory) and an HTTP server that accepts
SPNEGO with MIT's GSSAPI acceptor and the HTTP/localhost keytab (tests/support/kerberos.py).

What it proves: a keytab identity authenticates as its principal (through the requests auth of
tarn.clients.spnego, the WebHDFS Authenticator and curl's own SPNEGO, the same server); a
ticket-cache identity after kinit; each misconfiguration fails with a ConfigError that names the
fix; tickets that expire are obtained again from the keytab, so a keytab identity keeps
authenticating while a kinit'ed cache of the same lifetime stops. The realm is shared by the
module's tests (about 1 s to set up); the expiry test waits about 12 s.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tarn.clients.spnego import NegotiateAuth
from tarn.errors import ConfigError
from tarn.service.cluster import kerberos_identity
from tarn.stdlib.kerberos import KerberosIdentity, SpnegoAuth, keytab_principals
from tests.support.kerberos import REALM, Kdc, SpnegoServer, missing_programs, running_kdc, spnego_server

SHORT_LIFE_S = 8  # the max_life of the short-lived principals (MIT counts whole seconds)
# krb5.conf's clockskew: an expired ticket is refused this long after its end. At 1 s, an
# authenticator made under a loaded CI machine (the lab converging beside) once reached the
# server a second later among test_one_identity_from_many_threads' 40: "Clock skew too great".
CLOCKSKEW_S = 5


@dataclass
class Realm:
    kdc: Kdc
    server: SpnegoServer
    home: Path
    tarn: str  # tarn/localhost@TARN.TEST
    tarn_keytab: Path
    fqdn_keytab: Path  # tarn/<this host's fqdn>, for _HOST (tarn.keytab where that is localhost)

    def get(self, headers: dict[str, str]) -> tuple[int, str]:
        """GET the SPNEGO server with urllib (the standard library, as the launcher would)."""
        url = self.server.url("/webhdfs/v1/?op=GETFILESTATUS")
        request = urllib.request.Request(url, headers=headers)  # noqa: S310 - loopback
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310 - loopback
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()

    def negotiate_as(self, identity: KerberosIdentity) -> tuple[int, str]:
        return self.get({"Authorization": identity.negotiate("localhost")})


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    missing = missing_programs()
    if missing:
        pytest.fail(f"MIT Kerberos programs missing: {', '.join(missing)}; lab/preflight.sh lists them")
    home = tmp_path_factory.mktemp("krb5")
    with running_kdc(home / "kdc", clockskew_s=CLOCKSKEW_S) as kdc, pytest.MonkeyPatch.context() as env:
        for name, value in kdc.env.items():  # this process's GSSAPI: the test's realm only
            env.setenv(name, value)
        tarn = kdc.add_principal("tarn/localhost", home / "tarn.keytab")
        kdc.add_principal("HTTP/localhost", home / "http.keytab")
        fqdn_keytab = home / "tarn.keytab"
        if socket.getfqdn().lower() != "localhost":  # a second ktadd of tarn/localhost would rotate its keys
            fqdn_keytab = home / "fqdn.keytab"
            kdc.add_principal(f"tarn/{socket.getfqdn().lower()}", fqdn_keytab)
        try:
            with spnego_server(home / "http.keytab") as server:
                yield Realm(kdc, server, home, tarn, home / "tarn.keytab", fqdn_keytab)
        finally:
            print(f"---- kdc.log\n{kdc.log()}")


# ---- who authenticates


def test_the_keytab_identity_authenticates_as_its_principal(realm: Realm) -> None:
    identity = KerberosIdentity(realm.tarn, str(realm.tarn_keytab))
    assert realm.negotiate_as(identity) == (200, "tarn/localhost@TARN.TEST")
    # the RM's client: requests with tarn.clients.spnego (the header sent with the first request)
    reply = requests.get(realm.server.url("/ws/v1/cluster/info"), auth=NegotiateAuth(identity), timeout=10)
    assert (reply.status_code, reply.text) == (200, "tarn/localhost@TARN.TEST")
    # WebHDFS's Authenticator: the header for the URL's host, none on a delegation-token URL
    auth = SpnegoAuth(identity)
    assert realm.get(auth.headers(realm.server.url("/webhdfs/v1/x?op=OPEN"))) == (200, realm.tarn)
    assert auth.headers(realm.server.url("/webhdfs/v1/x?op=OPEN&delegation=abc")) == {}
    # no principal: the keytab's first; no ticket file was written anywhere ($KRB5CCNAME is unused)
    assert realm.negotiate_as(KerberosIdentity(None, str(realm.tarn_keytab))) == (200, realm.tarn)
    assert not Path(os.environ["KRB5CCNAME"].removeprefix("FILE:")).exists()


def test_host_in_the_principal_is_this_hosts_name(realm: Realm) -> None:
    identity = KerberosIdentity(f"tarn/_HOST@{REALM}", str(realm.fqdn_keytab))
    assert realm.negotiate_as(identity) == (200, f"tarn/{socket.getfqdn().lower()}@{REALM}")


def test_the_ticket_cache_identity_after_kinit(realm: Realm, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = f"FILE:{realm.home}/kinit-cache"
    realm.kdc.kinit(realm.tarn, realm.tarn_keytab, cache)
    monkeypatch.setenv("KRB5CCNAME", cache)
    assert realm.negotiate_as(KerberosIdentity()) == (200, realm.tarn)
    assert realm.negotiate_as(KerberosIdentity(realm.tarn)) == (200, realm.tarn)
    # the CLI's and the modules' way in: --kerberos alone
    identity = kerberos_identity(kerberos=True)
    assert identity == KerberosIdentity()
    assert realm.negotiate_as(identity) == (200, realm.tarn)


def test_one_identity_from_many_threads(realm: Realm) -> None:
    identity = KerberosIdentity(realm.tarn, str(realm.tarn_keytab))
    results: list[tuple[int, str]] = []

    def work() -> None:
        results.extend(realm.negotiate_as(identity) for round_ in range(5))

    threads = [threading.Thread(target=work, name=f"spnego-{n}") for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [(200, realm.tarn)] * 40


def test_curl_accepts_the_same_server(realm: Realm, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cross-check of the server: curl's own SPNEGO (GSS-API) with a kinit'ed cache."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.fail("curl is not installed (apt package curl)")
    features = subprocess.run([curl, "-V"], capture_output=True, text=True, check=True).stdout
    if "SPNEGO" not in features:
        pytest.fail(f"this curl has no SPNEGO: install Debian's curl (libcurl4 with GSS-API)\n{features}")
    cache = f"FILE:{realm.home}/curl-cache"
    realm.kdc.kinit(realm.tarn, realm.tarn_keytab, cache)
    env = {**os.environ, "KRB5CCNAME": cache}
    done = subprocess.run(
        [curl, "-sS", "--negotiate", "-u", ":", "-w", " %{http_code}", realm.server.url()],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=30,
    )
    assert done.stdout == f"{realm.tarn} 200", done.stderr
    unauthenticated = subprocess.run(
        [curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", realm.server.url()],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert unauthenticated.stdout == "401"


# ---- what fails, and the fix it names


def test_a_principal_the_keytab_does_not_hold(realm: Realm) -> None:
    identity = KerberosIdentity(f"nobody/localhost@{REALM}", str(realm.tarn_keytab))
    with pytest.raises(
        ConfigError, match=r"^--principal: .*holds no key for nobody/localhost@TARN.TEST"
    ) as err:
        identity.negotiate("localhost")
    assert realm.tarn in str(err.value)  # what it does hold
    with pytest.raises(ConfigError, match="holds no key for nobody"):  # before anything is submitted
        kerberos_identity(principal=identity.principal, keytab=identity.keytab)


def test_a_missing_keytab(realm: Realm) -> None:
    missing = str(realm.home / "missing.keytab")
    with pytest.raises(ConfigError, match=rf"^--keytab: {re.escape(missing)} does not exist"):
        KerberosIdentity(realm.tarn, missing).negotiate("localhost")
    with pytest.raises(ConfigError, match="does not exist"):
        kerberos_identity(keytab=missing)


def test_a_file_that_is_no_keytab(realm: Realm) -> None:
    garbage = realm.home / "garbage.keytab"
    garbage.write_bytes(b"not a keytab at all")
    with pytest.raises(ConfigError, match="is not a Kerberos keytab"):
        KerberosIdentity(realm.tarn, str(garbage)).negotiate("localhost")


def test_an_empty_ticket_cache(realm: Realm, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = f"FILE:{realm.home}/never-written"
    monkeypatch.setenv("KRB5CCNAME", cache)
    with pytest.raises(
        ConfigError, match=r"^--kerberos: no Kerberos ticket .*run kinit, or give a keytab"
    ) as err:
        KerberosIdentity().negotiate("localhost")
    assert cache in str(err.value)
    assert "No Kerberos credentials available" in str(err.value)  # MIT's words, through SPNEGO's


def test_a_host_without_an_http_principal(realm: Realm) -> None:
    identity = KerberosIdentity(realm.tarn, str(realm.tarn_keytab))
    with pytest.raises(ConfigError, match=r"no HTTP/nohttp.tarn.test principal in the KDC") as err:
        identity.negotiate("nohttp.tarn.test")
    assert "not found in Kerberos database" in str(err.value)
    assert realm.negotiate_as(identity) == (200, realm.tarn)  # the identity still works


def test_a_principal_the_kdc_does_not_know(realm: Realm) -> None:
    keytab = realm.home / "ghost.keytab"
    ghost = realm.kdc.add_principal("ghost/localhost", keytab)
    realm.kdc.kadmin(f"delprinc -force {ghost}")
    with pytest.raises(ConfigError, match=rf"the KDC does not know {re.escape(ghost)}"):
        KerberosIdentity(ghost, str(keytab)).negotiate("localhost")


def test_a_keytab_exported_before_the_keys_changed(realm: Realm) -> None:
    old, new = realm.home / "rotated-old.keytab", realm.home / "rotated-new.keytab"
    rotated = realm.kdc.add_principal("rotated/localhost", old)
    realm.kdc.kadmin(f"ktadd -k {new} {rotated}")  # new keys: the first keytab is out of date
    with pytest.raises(ConfigError, match=r"the keytab is out of date .*export it again"):
        KerberosIdentity(rotated, str(old)).negotiate("localhost")
    assert realm.negotiate_as(KerberosIdentity(rotated, str(new))) == (200, rotated)


# ---- tickets that expire


def test_keytab_tickets_are_obtained_again_after_they_expire(
    realm: Realm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two principals whose tickets live SHORT_LIFE_S: one from its keytab (kept by TARN), one
    kinit'ed once into a ticket cache. Past the lifetime, the cache's fails (naming kinit) and the
    keytab's keeps authenticating: MIT's library obtained new tickets from the keytab (the KDC
    issued them: AS requests in its log)."""
    life = f"{SHORT_LIFE_S} seconds"
    keytab_principal = realm.kdc.add_principal(
        "renewed/localhost", realm.home / "renewed.keytab", max_life=life
    )
    cache_principal = realm.kdc.add_principal(
        "kinited/localhost", realm.home / "kinited.keytab", max_life=life
    )
    cache = f"FILE:{realm.home}/short-cache"
    realm.kdc.kinit(cache_principal, realm.home / "kinited.keytab", cache)
    monkeypatch.setenv("KRB5CCNAME", cache)
    from_keytab = KerberosIdentity(keytab_principal, str(realm.home / "renewed.keytab"))
    from_cache = KerberosIdentity()
    assert realm.negotiate_as(from_keytab) == (200, keytab_principal)
    assert realm.negotiate_as(from_cache) == (200, cache_principal)
    started = time.monotonic()

    # one request a second for two lifetimes and more: every one accepted
    deadline = started + 2 * SHORT_LIFE_S + 2 * CLOCKSKEW_S + 1
    answers = []
    while time.monotonic() < deadline:
        answers.append(realm.negotiate_as(from_keytab))
        time.sleep(1)
    assert answers == [(200, keytab_principal)] * len(answers)
    assert len(answers) >= 2 * SHORT_LIFE_S

    with pytest.raises(
        ConfigError, match=r"^--kerberos: the ticket .* has expired: run kinit again, or give a keytab"
    ):
        from_cache.negotiate("localhost")
    log = realm.kdc.log(tail=None)
    issued = re.findall(rf"AS_REQ .*ISSUE: .*{re.escape(keytab_principal)} for krbtgt", log)
    assert len(issued) >= 3, log  # the first tickets, then at least two renewals


def test_keytab_principals_lists_what_kadmin_exported(realm: Realm) -> None:
    both = realm.home / "both.keytab"
    realm.kdc.kadmin(f"ktadd -k {both} -norandkey {realm.tarn}")
    realm.kdc.kadmin(f"ktadd -k {both} -norandkey HTTP/localhost@{REALM}")
    assert keytab_principals(str(both)) == [realm.tarn, f"HTTP/localhost@{REALM}"]
    listed = realm.kdc.run("klist", "-k", str(both))
    assert set(keytab_principals(str(both))) == set(re.findall(r"\S+@TARN\.TEST", listed))
