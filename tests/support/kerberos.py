"""A real MIT KDC in a temporary directory, and an HTTP server that accepts SPNEGO with MIT's
GSSAPI acceptor (gss_accept_sec_context through ctypes): for tests/integration/test_kerberos_spnego.py.

The KDC runs unprivileged on a free loopback port with its own krb5.conf and kdc.conf
(KRB5_CONFIG, KRB5_KDC_PROFILE); /etc/krb5.conf is never read. The programs come from Debian's
krb5-kdc (krb5kdc, kdb5_util), krb5-admin-server (kadmin.local) and krb5-user (kinit, klist).
"""

from __future__ import annotations

import base64
import ctypes
import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tarn.stdlib import kerberos
from tests.support.loopback import QuietHandler, reply_text, serve

REALM = "TARN.TEST"
# program -> the Debian package that has it
PROGRAMS = {
    "krb5kdc": "krb5-kdc",
    "kdb5_util": "krb5-kdc",
    "kadmin.local": "krb5-admin-server",
    "kinit": "krb5-user",
    "klist": "krb5-user",
}


def missing_programs() -> list[str]:
    return [f"{name} (apt package {package})" for name, package in PROGRAMS.items() if not shutil.which(name)]


def free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 (the KDC listens on both)."""
    for attempt in range(50):  # noqa: B007 - tries, not items
        with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port on 127.0.0.1")


@dataclass
class Kdc:
    """An MIT KDC for REALM; `env` is what every Kerberos program (and this process) must see."""

    home: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def krb5_conf(self) -> Path:
        return self.home / "krb5.conf"

    def run(self, *command: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            command,
            env={**os.environ, **self.env, **(env or {})},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stdout}{done.stderr}")
        return done.stdout + done.stderr

    def kadmin(self, query: str) -> str:
        return self.run("kadmin.local", "-r", REALM, "-q", query)

    def add_principal(self, name: str, keytab: Path | None = None, max_life: str | None = None) -> str:
        principal = f"{name}@{REALM}"
        life = f'-maxlife "{max_life}" ' if max_life else ""
        self.kadmin(f"addprinc -randkey {life}{principal}")
        if keytab is not None:
            self.kadmin(f"ktadd -k {keytab} {principal}")
        return principal

    def kinit(self, principal: str, keytab: Path, ccache: str, lifetime: str | None = None) -> None:
        life = ("-l", lifetime) if lifetime else ()
        self.run("kinit", *life, "-kt", str(keytab), "-c", ccache, principal)

    def log(self, tail: int | None = 3000) -> str:
        """krb5kdc's log (its last `tail` characters): a line per ticket issued or refused."""
        path = self.home / "kdc.log"
        text = path.read_text() if path.exists() else ""
        return text[-tail:] if tail else text


def write_configuration(home: Path, port: int, clockskew_s: int) -> dict[str, str]:
    """krb5.conf, kdc.conf and the kadmin ACL; the environment that points the tools at them."""
    (home / "krb5.conf").write_text(
        f"""[libdefaults]
    default_realm = {REALM}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    clockskew = {clockskew_s}
    ticket_lifetime = 10h
    forwardable = false
    udp_preference_limit = 1

[realms]
    {REALM} = {{
        kdc = 127.0.0.1:{port}
    }}

[domain_realm]
    localhost = {REALM}
"""
    )
    (home / "kdc.conf").write_text(
        f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{port}
    kdc_tcp_listen = 127.0.0.1:{port}

[realms]
    {REALM} = {{
        database_name = {home}/principal
        key_stash_file = {home}/stash
        acl_file = {home}/kadm5.acl
        admin_keytab = FILE:{home}/kadm5.keytab
        kdc_listen = 127.0.0.1:{port}
        kdc_tcp_listen = 127.0.0.1:{port}
        max_life = 10h
        max_renewable_life = 0
        master_key_type = aes256-cts-hmac-sha1-96
        supported_enctypes = aes256-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{home}/kdc.log
    admin_server = FILE:{home}/kadmin.log
    default = FILE:{home}/krb5lib.log
"""
    )
    (home / "kadm5.acl").write_text(f"*/admin@{REALM} *\n")
    return {
        "KRB5_CONFIG": str(home / "krb5.conf"),
        "KRB5_KDC_PROFILE": str(home / "kdc.conf"),
        "KRB5RCACHETYPE": "none",  # the test's acceptor: no replay cache file
        "KRB5CCNAME": f"FILE:{home}/no-such-cache",  # never the caller's own tickets
        "KRB5_CLIENT_KTNAME": f"FILE:{home}/no-client-keytab",
        "KRB5_KTNAME": f"FILE:{home}/no-keytab",
    }


@contextmanager
def running_kdc(home: Path, clockskew_s: int = 1) -> Iterator[Kdc]:
    """Create the realm's database and run krb5kdc in the foreground until the block ends."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    kdc = Kdc(home, port, env=write_configuration(home, port, clockskew_s))
    kdc.run("kdb5_util", "create", "-s", "-r", REALM, "-P", "tarn-master-key")
    kdc.process = subprocess.Popen(
        ["krb5kdc", "-n", "-r", REALM, "-P", str(home / "krb5kdc.pid")],
        env={**os.environ, **kdc.env},
        stdout=subprocess.DEVNULL,
        stderr=(home / "krb5kdc.stderr").open("wb"),
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            if kdc.process.poll() is not None:
                raise RuntimeError(f"krb5kdc exited: {(home / 'krb5kdc.stderr').read_text()} {kdc.log()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"krb5kdc did not listen on {port}: {kdc.log()}") from None
                time.sleep(0.1)
        yield kdc
    finally:
        kdc.process.terminate()
        try:
            kdc.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kdc.process.kill()
            kdc.process.wait()


# ---- the acceptor: MIT's gss_accept_sec_context, with the HTTP service's keytab


class Acceptor:
    """Accepts SPNEGO tokens for the principals of a keytab (HTTP/localhost@REALM)."""

    def __init__(self, keytab: Path) -> None:
        self.gss = kerberos._library()
        self.cred = self.gss.acquire(None, {"keytab": f"FILE:{keytab}"}, usage=kerberos.GSS_C_ACCEPT)[0]
        self.lock = threading.Lock()

    def accept(self, token: bytes) -> str:
        """The authenticated client's principal; raises kerberos._GssError on a bad token."""
        gss = self.gss
        minor, context, source, out = (
            ctypes.c_uint32(),
            ctypes.c_void_p(),
            ctypes.c_void_p(),
            kerberos._Buffer(),
        )
        with self.lock:
            try:
                major = gss.lib.gss_accept_sec_context(
                    *(minor, context, self.cred, kerberos.buffer_of(token), None, source),
                    *(None, out, None, None, None),
                )
                gss.take(out)
                gss.check(major, minor)
                if major & 1:  # GSS_S_CONTINUE_NEEDED: one leg must be enough
                    raise kerberos._GssError(major, 0, "the acceptor wanted another leg")
                return gss.display_name(source)
            finally:
                gss.release_name(source)
                gss.delete_context(context)

    def close(self) -> None:
        self.gss.release_cred(self.cred)


@dataclass
class SpnegoServer:
    """A loopback HTTP server: 200 with the client's principal for a valid Negotiate token, 401
    (``WWW-Authenticate: Negotiate``, the reason in the body) otherwise."""

    acceptor: Acceptor
    server: http.server.ThreadingHTTPServer
    accepted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str = "/") -> str:
        return f"http://localhost:{self.port}{path}"


@contextmanager
def spnego_server(keytab: Path) -> Iterator[SpnegoServer]:
    acceptor = Acceptor(keytab)
    holder: list[SpnegoServer] = []

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            state = holder[0]
            header = self.headers.get("Authorization", "")
            scheme, _sep, value = header.partition(" ")
            if scheme.lower() != "negotiate" or not value:
                self.answer(401, "no Negotiate token")
                return
            try:
                name = acceptor.accept(base64.b64decode(value))
            except kerberos._GssError as exc:
                state.refused.append(exc.text)
                self.answer(401, f"refused: {exc.text}")
                return
            state.accepted.append(name)
            self.answer(200, name)

        def answer(self, status: int, text: str) -> None:
            reply_text(self, status, text, {"WWW-Authenticate": "Negotiate"} if status == 401 else None)

    server = serve(Handler)
    holder.append(SpnegoServer(acceptor, server))
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()
        acceptor.close()
