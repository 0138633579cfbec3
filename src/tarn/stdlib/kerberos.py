"""Kerberos SPNEGO with the standard library only: ctypes over MIT's GSSAPI (libgssapi_krb5.so.2,
Debian's libgssapi-krb5-2), so that the launcher in a YARN container, the controller and the CLI
need no Python package for a Kerberized cluster.

A `KerberosIdentity` is either the caller's ticket cache (kinit, $KRB5CCNAME) or a keytab. With a
keytab, MIT's library is handed the keytab and a credential cache in memory of its own
(``gss_acquire_cred_from``: client_keytab, ccache): it obtains tickets from the keytab itself, and
new ones when the credential is acquired past half their lifetime, which TARN does (a credential
handle is kept, then acquired again). A service that runs for months never lets its tickets lapse,
without kinit and without a ticket file on disk.

`KerberosIdentity.negotiate` makes the ``Authorization: Negotiate`` value for the HTTP service of a
host (one leg: Hadoop's servers need no mutual authentication). `SpnegoAuth` is the WebHDFS
client's Authenticator (tarn.stdlib.webhdfs); tarn.clients.spnego the requests one. A failure is a
ConfigError naming the fix, with GSSAPI's own words (gss_display_status) after it.

`KerberosIdentity.context` starts a Kerberos V5 security context (the krb5 mechanism itself, not
SPNEGO; mutual authentication) with a service such as ``zookeeper@host``: its tokens go back and
forth (`ClientContext.step`) until it is established, then `wrap` and `unwrap` protect messages.
That is what SASL's GSSAPI mechanism (RFC 4752) needs: tarn.clients.zk_sasl, for ZooKeeper. The
identity keeps one credential for SPNEGO and one for the krb5 mechanism, each with its own
memory ccache, each acquired again as above.
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import os
import re
import socket
import struct
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from tarn.errors import ConfigError
from tarn.stdlib.webhdfs import Authenticator, SimpleAuth

_T = TypeVar("_T")

LIBRARY = "libgssapi_krb5.so.2"
LIBRARY_PACKAGE = "libgssapi-krb5-2"  # Debian's; krb5-libs on Red Hat's family
SPNEGO_MECHANISM = "1.3.6.1.5.5.2"  # RFC 4178
KRB5_MECHANISM = "1.2.840.113554.1.2.2"  # RFC 1964
HOSTBASED_SERVICE = "1.2.840.113554.1.2.1.4"  # GSS_C_NT_HOSTBASED_SERVICE: HTTP@host
KRB5_PRINCIPAL_NAME = "1.2.840.113554.1.2.2.1"  # GSS_KRB5_NT_PRINCIPAL_NAME: name/host@REALM
# A kept credential is acquired again at least this often (a new kinit, keytab tickets refreshed).
REACQUIRE_MAX_S = 300.0

# GSSAPI's status words (RFC 2744): the routine error is bits 16-23 of the major status.
GSS_S_CONTINUE_NEEDED = 1  # a supplementary status: another token must come from the peer
GSS_C_MUTUAL_FLAG = 2
GSS_C_SEQUENCE_FLAG = 8
GSS_C_GSS_CODE = 1
GSS_C_MECH_CODE = 2
GSS_C_INITIATE = 1
GSS_C_ACCEPT = 2
GSS_C_INDEFINITE = 0xFFFFFFFF
GSS_S_NO_CRED = 7 << 16
GSS_S_DEFECTIVE_CREDENTIAL = 10 << 16
GSS_S_CREDENTIALS_EXPIRED = 11 << 16
CREDENTIAL_TROUBLE = (GSS_S_NO_CRED, GSS_S_DEFECTIVE_CREDENTIAL, GSS_S_CREDENTIALS_EXPIRED)

# Failures are told apart by MIT's own words (gss_display_status): through SPNEGO, the mechanism
# glue renumbers Kerberos's minor codes, so the numbers of krb5's error table are not what comes.
_PROBLEMS: tuple[tuple[str, str], ...] = (
    ("skew", r"clock skew too great"),
    ("server", r"server .*not found in kerberos database|server not found"),
    ("client", r"client .*not found in kerberos database"),
    ("kdc", r"cannot (contact|find) any kdc|cannot find kdc|cannot resolve network address for kdc"),
    ("stale key", r"decrypt integrity check failed|preauthentication failed|password incorrect|key version"),
    ("no key", r"no key table entry found|key table file .*not found|keytab"),
    ("expired", r"ticket expired|credentials? (has|have) expired|expired"),
    (
        "no ticket",
        r"no kerberos credentials available|no credentials cache found|credential cache is empty"
        r"|can't find client principal|matching credential not found|does not match desired name"
        r"|no credentials were supplied",
    ),
)


# ---- principals and keytabs: pure Python, for validation before anything is submitted


def resolve_principal(principal: str, hostname: str | None = None) -> str:
    """``_HOST`` in the host part (``tarn/_HOST@REALM``) becomes the lower-cased fully qualified
    host name, as Hadoop's SecurityUtil does; any other principal is returned as it is.

    In a YARN container the host is the NodeManager's ($NM_HOST): a Docker container's own host
    name is the one YARN gives it (``triton-0.<service>.<user>``), for which no keytab has keys."""
    match = re.fullmatch(r"([^/@]+)/_HOST(@.*)?", principal)
    if match is None:
        return principal
    host = (hostname or os.environ.get("NM_HOST") or socket.getfqdn()).lower()
    return f"{match.group(1)}/{host}{match.group(2) or ''}"


def keytab_principals(path: str) -> list[str]:
    """The principals (``name/instance@REALM``) a keytab holds, in file order, each once.

    MIT's keytab file format, versions 0x0502 (big-endian) and 0x0501 (the host's byte order, the
    realm counted among the components, no name type)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"--keytab: {path} does not exist; give the path of the keytab") from None
    except IsADirectoryError:
        raise ConfigError(f"--keytab: {path} is a directory; give the path of the keytab") from None
    except OSError as exc:
        raise ConfigError(
            f"--keytab: cannot read {path} ({exc.strerror}); the user running TARN must be able to read it"
        ) from None
    if len(data) < 2 or data[0] != 5 or data[1] not in (1, 2):
        raise ConfigError(f"--keytab: {path} is not a Kerberos keytab (MIT's format 0x0502 or 0x0501)")
    try:
        return list(dict.fromkeys(_keytab_entries(data)))
    except (struct.error, ValueError) as exc:
        raise ConfigError(f"--keytab: {path} is damaged ({exc}); export the keytab again") from None


def _keytab_entries(data: bytes) -> Iterator[str]:
    version = data[1]
    order = ">" if version == 2 else "="
    position = 2
    while position + 4 <= len(data):
        (size,) = struct.unpack_from(order + "i", data, position)
        position += 4
        if size == 0:  # what follows was never written
            return
        if size < 0:  # a hole left by a removed entry
            position -= size
            continue
        entry = data[position : position + size]
        if len(entry) < size:
            raise ValueError(f"an entry of {size} bytes is cut off")
        position += size
        (count,) = struct.unpack_from(order + "H", entry, 0)
        offset = 2
        if version == 1:
            count -= 1
        realm, offset = _counted(entry, offset, order)
        components: list[str] = []
        while len(components) < count:
            component, offset = _counted(entry, offset, order)
            components.append(component)
        yield "/".join(components) + "@" + realm


def _counted(data: bytes, offset: int, order: str) -> tuple[str, int]:
    (length,) = struct.unpack_from(order + "H", data, offset)
    offset += 2
    text = data[offset : offset + length]
    if len(text) < length:
        raise ValueError("a name is cut off")
    return text.decode("utf-8", "replace"), offset + length


def _principal_in(principal: str, held: list[str]) -> bool:
    """Whether a keytab's principals hold `principal` (without a realm: in any realm)."""
    if "@" in principal:
        return principal in held
    return any(name.rpartition("@")[0] == principal for name in held)


# ---- the identity


@dataclass(frozen=True)
class KerberosIdentity:
    """Who TARN is to Kerberos: ``keytab`` None is the caller's ticket cache (kinit, $KRB5CCNAME),
    of ``principal`` if given; with a keytab, ``principal`` (default: the keytab's first) from it.
    ``_HOST`` in the principal is this host's name (resolve_principal)."""

    principal: str | None = None
    keytab: str | None = None
    _credential: _Credential = field(  # SPNEGO's (negotiate, token)
        default_factory=lambda: _Credential(),  # pylint: disable=unnecessary-lambda  # defined below
        init=False,
        repr=False,
        compare=False,
    )
    _krb5_credential: _Credential = field(  # the krb5 mechanism's (context)
        default_factory=lambda: _Credential(),  # pylint: disable=unnecessary-lambda  # defined below
        init=False,
        repr=False,
        compare=False,
    )

    def resolved_principal(self) -> str | None:
        """The principal asked for: ``_HOST`` resolved, else the keytab's first, else None (the cache's)."""
        if self.principal:
            return resolve_principal(self.principal)
        if self.keytab is not None:
            held = keytab_principals(self.keytab)
            if not held:
                raise ConfigError(
                    f"--keytab: {self.keytab} holds no key; export the principal's keys into it"
                )
            return held[0]
        return None

    def check(self) -> str | None:
        """What can be checked without a KDC: the keytab is readable and holds the principal.
        Returns the principal (resolved_principal)."""
        principal = self.resolved_principal()
        if self.keytab is None or principal is None:
            return principal
        held = keytab_principals(self.keytab)
        if not _principal_in(principal, held):
            raise ConfigError(
                f"--principal: the keytab {self.keytab} holds no key for {principal} (it holds "
                f"{', '.join(held) or 'none'}); give one of these, or a keytab with {principal}'s keys"
            )
        return principal

    def negotiate(self, host: str) -> str:
        """``Negotiate <token>``: SPNEGO (Kerberos) for the service ``HTTP@host``, one leg."""
        return "Negotiate " + base64.b64encode(self.token(host)).decode("ascii")

    def token(self, host: str) -> bytes:
        """The SPNEGO token of :meth:`negotiate`. Thread-safe: one token at a time per identity.

        The credential handle is kept, and acquired again once half its lifetime is over (at most
        every REACQUIRE_MAX_S): MIT's library refreshes keytab tickets when a credential is
        acquired, not when a kept handle is used, and a new acquisition also sees a new kinit."""
        return self._use(
            self._credential, lambda gss, cred: gss.initiate(cred, f"HTTP@{host}"), host, "HTTP", krb5=False
        )

    def context(self, service: str, host: str) -> ClientContext:
        """A security context with ``service@host`` (GSS_C_NT_HOSTBASED_SERVICE: the principal
        ``service/host@REALM``), the krb5 mechanism, mutual authentication; its first token is
        made at once (the one leg that needs a ticket from the KDC): a ConfigError here names the
        fix, as for :meth:`negotiate`. Close it (or use it in a ``with`` block) when done."""
        context = ClientContext(service, host)
        try:
            context.first = self._use(self._krb5_credential, context._start, host, service, krb5=True)
        except BaseException:
            context.close()
            raise
        return context

    def _use(
        self,
        state: _Credential,
        use: Callable[[_Gss, ctypes.c_void_p], _T],
        host: str | None,
        service: str,
        krb5: bool,
    ) -> _T:
        """``use`` with the kept credential of ``state`` (acquired again when due, and once more
        when a kept one turns out stale); a failure as a ConfigError that names the fix."""
        gss = _library()
        with state.lock:
            if state.handle is not None and time.monotonic() >= state.reacquire_at:
                state.release(gss)
            for attempt in (1, 2):
                if state.handle is None:
                    state.handle, lifetime = self._acquire(gss, state.ccache, krb5)
                    state.reacquire_at = time.monotonic() + reacquire_after(lifetime)
                try:
                    return use(gss, state.handle)
                except _GssError as failure:
                    state.release(gss)  # the next call acquires again
                    if attempt == 1 and stale(failure):
                        continue
                    raise ConfigError(self._explain(failure, host, service)) from None
        raise AssertionError("unreachable")

    def _acquire(self, gss: _Gss, ccache: str, krb5: bool = False) -> tuple[ctypes.c_void_p, int]:
        principal = self.check()
        store = None
        if self.keytab is not None:
            store = {"client_keytab": "FILE:" + os.path.abspath(self.keytab), "ccache": ccache}
        try:
            return gss.acquire(principal, store, mechanisms=gss.krb5_set if krb5 else None)
        except _GssError as failure:
            if not krb5:  # SPNEGO says only that it found no mechanism: Kerberos's own words say why.
                try:
                    gss.release_cred(gss.acquire(principal, store, mechanisms=gss.krb5_set)[0])
                except _GssError as why:
                    failure.text = f"{failure.text}; Kerberos: {why.minor_text or why.text}"
            raise ConfigError(explain(failure.text, principal, self.keytab, None)) from None

    def _explain(self, failure: _GssError, host: str | None, service: str = "HTTP") -> str:
        principal = self.principal and resolve_principal(self.principal)
        return explain(failure.text, principal, self.keytab, host, service)


class ClientContext:
    """A Kerberos V5 security context initiated by a `KerberosIdentity` (:meth:`KerberosIdentity.context`)
    with ``service@host``: ``first`` is the initiator's first token; each token of the acceptor
    goes to :meth:`step` until ``established``; then :meth:`wrap` and :meth:`unwrap`.
    GSSAPI's failures after the first token are ``GssFailure`` (a ConfigError). Not thread-safe:
    one context is one conversation."""

    FLAGS = GSS_C_MUTUAL_FLAG | GSS_C_SEQUENCE_FLAG  # MIT adds integrity and confidentiality

    def __init__(self, service: str, host: str) -> None:
        self.service, self.host = service, host
        self.first = b""
        self.established = False
        self._handle, self._target = ctypes.c_void_p(), ctypes.c_void_p()
        self._gss = _library()
        self._target = self._gss.import_name(f"{service}@{host}", self._gss.hostbased)

    def _start(self, gss: _Gss, cred: ctypes.c_void_p) -> bytes:
        gss.delete_context(self._handle)  # a try with a stale credential left nothing worth keeping
        self._handle = ctypes.c_void_p()
        token, self.established = gss.init_step(cred, self._handle, self._target, self.FLAGS, None)
        return token

    def step(self, token: bytes) -> bytes:
        """The acceptor's token in, the next token out (empty once established with nothing to send)."""
        if self.established:
            raise GssFailure(f"the context with {self.service}@{self.host} is already established")
        try:
            out, self.established = self._gss.init_step(None, self._handle, self._target, self.FLAGS, token)
        except _GssError as failure:
            raise GssFailure(self._words("authenticating", failure)) from None
        return out

    def wrap(self, data: bytes, confidential: bool = False) -> bytes:
        """gss_wrap: ``data`` with the context's integrity check (and encrypted if ``confidential``)."""
        self._require()
        try:
            return self._gss.wrap(self._handle, data, confidential)
        except _GssError as failure:
            raise GssFailure(self._words("wrapping a message for", failure)) from None

    def unwrap(self, data: bytes) -> bytes:
        """gss_unwrap: the message the acceptor wrapped, its integrity checked."""
        self._require()
        try:
            return self._gss.unwrap(self._handle, data)
        except _GssError as failure:
            raise GssFailure(self._words("unwrapping a message of", failure)) from None

    def initiator(self) -> str:
        """The authenticated principal of this side (gss_inquire_context), e.g. tarn/host@REALM."""
        self._require()
        try:
            return self._gss.initiator(self._handle)
        except _GssError as failure:
            raise GssFailure(self._words("inquiring the context with", failure)) from None

    def close(self) -> None:
        """Delete the context (idempotent: GSSAPI leaves the handles empty)."""
        self._gss.delete_context(self._handle)
        self._gss.release_name(self._target)

    def __del__(self) -> None:
        if getattr(self, "_gss", None) is not None:
            self.close()

    def __enter__(self) -> ClientContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require(self) -> None:
        if not self.established:
            raise GssFailure(f"the context with {self.service}@{self.host} is not established yet")

    def _words(self, doing: str, failure: _GssError) -> str:
        return f"Kerberos: {doing} {self.service}@{self.host} failed (GSSAPI: {failure.text})"


class GssFailure(ConfigError):
    """A GSSAPI call on an established (or establishing) context failed."""


def webhdfs_auth(identity: KerberosIdentity | None, user: str) -> Authenticator:
    """WebHDFS's authentication: SPNEGO as ``identity`` on a secure cluster, else ``user.name=user``."""
    return SpnegoAuth(identity) if identity else SimpleAuth(user)


def service_identity(principal: str | None, keytab: str | None) -> KerberosIdentity | None:
    """The identity of a TARN service inside YARN (--service-principal, --service-keytab: the spec's
    kerberos_principal), or None on a cluster with simple authentication."""
    if not principal:
        return None
    return KerberosIdentity(principal, (keytab or "").removeprefix("file://") or None)


def reacquire_after(lifetime_s: int) -> float:
    """Seconds until a credential of `lifetime_s` is acquired again: just past half its lifetime
    (MIT's refresh time for keytab tickets), at most REACQUIRE_MAX_S."""
    if lifetime_s == GSS_C_INDEFINITE:
        return REACQUIRE_MAX_S
    return min(REACQUIRE_MAX_S, max(1.0, lifetime_s / 2 + 1))


def stale(failure: _GssError) -> bool:
    """Whether a failure may be a kept credential gone stale (expired, a new kinit): worth one
    more try with a credential acquired again."""
    return routine(failure.major) in CREDENTIAL_TROUBLE or problem(failure.text) == "expired"


def problem(text: str) -> str | None:
    """What went wrong, from GSSAPI's words: a key of _PROBLEMS, or None."""
    said = text.lower()
    return next((name for name, pattern in _PROBLEMS if re.search(pattern, said)), None)


def explain(
    text: str, principal: str | None, keytab: str | None, host: str | None, service: str = "HTTP"
) -> str:
    """A GSSAPI failure as one line naming the fix, GSSAPI's words (`text`) after it; ``service``
    is the first part of the server's principal (HTTP, zookeeper)."""
    of = f" of {principal}" if principal else ""
    flag = "--keytab" if keytab is not None else "--kerberos"
    found = problem(text)
    if found == "skew":
        fix = "this host's clock and the KDC's (or the server's) differ too much: synchronize them (NTP)"
    elif found == "server":
        service = f"{service}/{host}" if host else "the service's"
        fix = (
            f"no {service} principal in the KDC: use the server's host name as in its principal "
            "(fully qualified), or ask the Kerberos administrator to create the principal"
        )
    elif found == "client":
        fix = f"the KDC does not know {principal or 'the principal'}: check the principal and its realm"
    elif found == "kdc":
        fix = "no KDC of the realm answered: check [realms] in krb5.conf ($KRB5_CONFIG) and the network"
    elif found == "stale key" and keytab is not None:
        fix = (
            f"the KDC refused the key{of} in {keytab}: the keytab is out of date (the principal's "
            "keys changed since it was exported); export it again"
        )
    elif found == "no key" and keytab is not None:
        fix = f"the keytab {keytab} holds no usable key{of}; export the principal's keys into it"
    elif found == "expired" and keytab is not None:
        fix = (
            f"the tickets obtained from {keytab} expired and could not be obtained again: check that "
            "the KDC answers and this host's clock"
        )
    elif found == "expired":
        fix = f"the ticket{of} in the ticket cache has expired: run kinit again, or give a keytab"
    elif found == "no ticket" and keytab is None:
        cache = os.environ.get("KRB5CCNAME", "the default ticket cache")
        fix = f"no Kerberos ticket{of} in {cache}: run kinit, or give a keytab (--keytab)"
    else:
        fix = "Kerberos authentication failed"
    return f"{flag}: {fix} (GSSAPI: {text})"


class SpnegoAuth:
    """The WebHDFS client's Authenticator (tarn.stdlib.webhdfs) on a Kerberized cluster:
    ``Authorization: Negotiate`` for HTTP/<host of the URL>. A DataNode URL the NameNode redirected
    to carries a delegation token instead: no header then."""

    def __init__(self, identity: KerberosIdentity | None = None) -> None:
        self.identity = identity or KerberosIdentity()

    def query(self) -> dict[str, str]:
        return {}

    def headers(self, url: str) -> dict[str, str]:
        parts = urllib.parse.urlsplit(url)
        if "delegation" in urllib.parse.parse_qs(parts.query, keep_blank_values=True):
            return {}
        return {"Authorization": self.identity.negotiate(parts.hostname or "")}

    def __repr__(self) -> str:
        return f"SpnegoAuth({self.identity!r})"


# ---- the GSSAPI through ctypes


class _Buffer(ctypes.Structure):
    _fields_ = (("length", ctypes.c_size_t), ("value", ctypes.c_void_p))


class _Oid(ctypes.Structure):
    _fields_ = (("length", ctypes.c_uint32), ("elements", ctypes.c_void_p))


class _OidSet(ctypes.Structure):
    _fields_ = (("count", ctypes.c_size_t), ("elements", ctypes.POINTER(_Oid)))


class _KeyValue(ctypes.Structure):
    _fields_ = (("key", ctypes.c_char_p), ("value", ctypes.c_char_p))


class _KeyValueSet(ctypes.Structure):
    _fields_ = (("count", ctypes.c_uint32), ("elements", ctypes.POINTER(_KeyValue)))


def oid(dotted: str) -> _Oid:
    """A gss_OID_desc of a dotted OID (its DER contents); the bytes live as long as the object."""
    numbers = [int(n) for n in dotted.split(".")]
    encoded = bytearray([40 * numbers[0] + numbers[1]])
    for number in numbers[2:]:
        chunk = [number & 0x7F]
        while number > 0x7F:
            number >>= 7
            chunk.append(0x80 | (number & 0x7F))
        encoded += bytes(reversed(chunk))
    elements = ctypes.create_string_buffer(bytes(encoded), len(encoded))
    value = _Oid(len(encoded), ctypes.cast(elements, ctypes.c_void_p))
    value._keep = elements
    return value


def buffer_of(data: bytes) -> _Buffer:
    keep = ctypes.create_string_buffer(data, len(data))
    value = _Buffer(len(data), ctypes.cast(keep, ctypes.c_void_p))
    value._keep = keep
    return value


class _GssError(Exception):
    """A failed GSSAPI call: its status codes and their words (the mechanism's, MIT's, last)."""

    def __init__(self, major: int, minor: int, major_text: str, minor_text: str = "") -> None:
        self.major, self.minor, self.minor_text = major, minor, minor_text
        self.text = "; ".join(t for t in (major_text, minor_text) if t) or f"major {major:#x}, minor {minor}"
        super().__init__(self.text)


def routine(major: int) -> int:
    """The routine error of a major status (GSS_ROUTINE_ERROR)."""
    return major & 0x00FF0000


def _failed(major: int) -> bool:
    return major & 0xFFFF0000 != 0  # GSS_ERROR(): a calling or routine error


_P = ctypes.c_void_p
_U32 = ctypes.c_uint32
_PU32 = ctypes.POINTER(ctypes.c_uint32)
_PBUF = ctypes.POINTER(_Buffer)
_POID = ctypes.POINTER(_Oid)
_SIGNATURES: dict[str, tuple[object, ...]] = {
    "gss_import_name": (_PU32, _PBUF, _POID, ctypes.POINTER(_P)),
    "gss_display_name": (_PU32, _P, _PBUF, ctypes.POINTER(_POID)),
    "gss_release_name": (_PU32, ctypes.POINTER(_P)),
    "gss_release_buffer": (_PU32, _PBUF),
    "gss_release_cred": (_PU32, ctypes.POINTER(_P)),
    "gss_delete_sec_context": (_PU32, ctypes.POINTER(_P), _PBUF),
    "gss_display_status": (_PU32, _U32, ctypes.c_int, _POID, _PU32, _PBUF),
    "gss_acquire_cred_from": (
        *(_PU32, _P, _U32, ctypes.POINTER(_OidSet), ctypes.c_int),
        *(ctypes.POINTER(_KeyValueSet), ctypes.POINTER(_P), _P, _PU32),
    ),
    "gss_init_sec_context": (
        *(_PU32, _P, ctypes.POINTER(_P), _P, _POID, _U32, _U32, _P),
        *(_PBUF, ctypes.POINTER(_POID), _PBUF, _PU32, _PU32),
    ),
    "gss_wrap": (_PU32, _P, ctypes.c_int, _U32, _PBUF, ctypes.POINTER(ctypes.c_int), _PBUF),
    "gss_unwrap": (_PU32, _P, _PBUF, _PBUF, ctypes.POINTER(ctypes.c_int), _PU32),
    "gss_inquire_context": (
        *(_PU32, _P, ctypes.POINTER(_P), ctypes.POINTER(_P), _PU32),
        *(ctypes.POINTER(_POID), _PU32, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)),
    ),
    "gss_accept_sec_context": (
        *(_PU32, ctypes.POINTER(_P), _P, _PBUF, _P, ctypes.POINTER(_P)),
        *(ctypes.POINTER(_POID), _PBUF, _PU32, _PU32, ctypes.POINTER(_P)),
    ),
}


class _Gss:
    """The few GSSAPI calls TARN makes, each result freed by the library's own release call."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.lib = library
        for name, arguments in _SIGNATURES.items():
            function = getattr(library, name)
            function.argtypes = arguments
            function.restype = ctypes.c_uint32
        self.spnego = oid(SPNEGO_MECHANISM)
        self.spnego_set = _OidSet(1, ctypes.pointer(self.spnego))
        self.krb5 = oid(KRB5_MECHANISM)
        self.krb5_set = _OidSet(1, ctypes.pointer(self.krb5))
        self.hostbased = oid(HOSTBASED_SERVICE)
        self.krb5_principal = oid(KRB5_PRINCIPAL_NAME)

    def status_text(self, code: int, kind: int) -> str:
        """gss_display_status: the words of a major (GSS_C_GSS_CODE) or minor (GSS_C_MECH_CODE) code."""
        words: list[str] = []
        more = ctypes.c_uint32(0)
        while True:
            status, text = ctypes.c_uint32(), _Buffer()
            if _failed(self.lib.gss_display_status(status, code, kind, None, more, text)):
                break
            words.append(self.take(text).decode("utf-8", "replace").rstrip("\x00").strip())
            if more.value == 0:
                break
        return "; ".join(word for word in words if word)

    def check(self, major: int, minor: ctypes.c_uint32) -> None:
        if _failed(major):
            major_text = self.status_text(major, GSS_C_GSS_CODE)
            minor_text = self.status_text(minor.value, GSS_C_MECH_CODE) if minor.value else ""
            raise _GssError(major, minor.value, major_text, minor_text)

    def take(self, data: _Buffer) -> bytes:
        """The bytes of a buffer the library allocated, which is then released."""
        try:
            return ctypes.string_at(data.value, data.length) if data.value else b""
        finally:
            if data.value:
                self.lib.gss_release_buffer(ctypes.c_uint32(), data)

    def import_name(self, text: str, kind: _Oid) -> ctypes.c_void_p:
        minor, name = ctypes.c_uint32(), ctypes.c_void_p()
        self.check(self.lib.gss_import_name(minor, buffer_of(text.encode()), kind, name), minor)
        return name

    def release_name(self, name: ctypes.c_void_p) -> None:
        if name.value:
            self.lib.gss_release_name(ctypes.c_uint32(), name)

    def release_cred(self, cred: ctypes.c_void_p) -> None:
        if cred.value:
            self.lib.gss_release_cred(ctypes.c_uint32(), cred)

    def delete_context(self, context: ctypes.c_void_p) -> None:
        if context.value:
            self.lib.gss_delete_sec_context(ctypes.c_uint32(), context, None)

    def display_name(self, name: ctypes.c_void_p) -> str:
        minor, text = ctypes.c_uint32(), _Buffer()
        self.check(self.lib.gss_display_name(minor, name, text, None), minor)
        return self.take(text).decode("utf-8", "replace")

    def acquire(
        self,
        principal: str | None,
        store: dict[str, str] | None,
        usage: int = GSS_C_INITIATE,
        mechanisms: _OidSet | None = None,
    ) -> tuple[ctypes.c_void_p, int]:
        """A credential handle for SPNEGO (gss_acquire_cred_from; store None: MIT's defaults) and
        its lifetime in seconds (GSS_C_INDEFINITE for an acceptor's)."""
        name = self.import_name(principal, self.krb5_principal) if principal else ctypes.c_void_p()
        store_set = None
        if store is not None:
            pairs = (_KeyValue * len(store))(*(_KeyValue(k.encode(), v.encode()) for k, v in store.items()))
            store_set = _KeyValueSet(len(store), pairs)
        minor, cred, lifetime = ctypes.c_uint32(), ctypes.c_void_p(), ctypes.c_uint32()
        try:
            major = self.lib.gss_acquire_cred_from(
                minor, name, 0, mechanisms or self.spnego_set, usage, store_set, cred, None, lifetime
            )
            self.check(major, minor)
            return cred, lifetime.value
        finally:
            self.release_name(name)

    def initiate(self, cred: ctypes.c_void_p, service: str) -> bytes:
        """The first (and, without mutual authentication, only) SPNEGO token for `service`."""
        target = self.import_name(service, self.hostbased)
        minor, context, out = ctypes.c_uint32(), ctypes.c_void_p(), _Buffer()
        try:
            major = self.lib.gss_init_sec_context(
                *(minor, cred, context, target, self.spnego, 0, 0, None),
                *(None, None, out, None, None),
            )
            token = self.take(out)
            self.check(major, minor)
            return token
        finally:
            self.delete_context(context)
            self.release_name(target)

    def init_step(
        self,
        cred: ctypes.c_void_p | None,
        context: ctypes.c_void_p,
        target: ctypes.c_void_p,
        flags: int,
        token: bytes | None,
    ) -> tuple[bytes, bool]:
        """One call of gss_init_sec_context with the krb5 mechanism on ``context`` (a handle it
        fills on the first call): the token to send, and whether the context is established."""
        minor, out = ctypes.c_uint32(), _Buffer()
        given = None if token is None else buffer_of(token)
        major = self.lib.gss_init_sec_context(
            *(minor, cred, context, target, self.krb5, flags, 0, None),
            *(given, None, out, None, None),
        )
        sent = self.take(out)
        self.check(major, minor)
        return sent, not major & GSS_S_CONTINUE_NEEDED

    def wrap(self, context: ctypes.c_void_p, data: bytes, confidential: bool) -> bytes:
        minor, out, conf_state = ctypes.c_uint32(), _Buffer(), ctypes.c_int()
        major = self.lib.gss_wrap(minor, context, int(confidential), 0, buffer_of(data), conf_state, out)
        wrapped = self.take(out)
        self.check(major, minor)
        if confidential and not conf_state.value:
            raise _GssError(0, 0, "the mechanism did not encrypt the message")
        return wrapped

    def unwrap(self, context: ctypes.c_void_p, data: bytes) -> bytes:
        minor, out = ctypes.c_uint32(), _Buffer()
        major = self.lib.gss_unwrap(minor, context, buffer_of(data), out, None, None)
        plain = self.take(out)
        self.check(major, minor)
        return plain

    def initiator(self, context: ctypes.c_void_p) -> str:
        """The source name of an established context (gss_inquire_context), as text."""
        minor, source = ctypes.c_uint32(), ctypes.c_void_p()
        try:
            major = self.lib.gss_inquire_context(minor, context, source, None, None, None, None, None, None)
            self.check(major, minor)
            return self.display_name(source)
        finally:
            self.release_name(source)


class _Credential:
    """An identity's credential handle, acquired once and kept, and its own memory ccache."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.handle: ctypes.c_void_p | None = None
        self.reacquire_at = 0.0  # time.monotonic()
        self.ccache = f"MEMORY:tarn-{uuid.uuid4().hex}"

    def release(self, gss: _Gss) -> None:
        if self.handle is not None:
            gss.release_cred(self.handle)
            self.handle = None

    def __del__(self) -> None:
        if self.handle is not None and _GSS is not None:
            self.release(_GSS)


_GSS: _Gss | None = None
_GSS_LOCK = threading.Lock()


def _library() -> _Gss:
    """MIT's GSSAPI, loaded on first use (a cluster without Kerberos never needs it)."""
    global _GSS
    with _GSS_LOCK:
        if _GSS is None:
            _GSS = _Gss(_load(LIBRARY))
        return _GSS


def _load(name: str) -> ctypes.CDLL:
    errors = []
    for candidate in (name, ctypes.util.find_library("gssapi_krb5")):
        if not candidate:
            continue
        try:
            return ctypes.CDLL(candidate)
        except OSError as exc:
            errors.append(str(exc))
    raise ConfigError(
        f"--kerberos: MIT's GSSAPI library {name} is not on this host ({'; '.join(errors) or 'not found'}); "
        f"install {LIBRARY_PACKAGE} (apt-get install {LIBRARY_PACKAGE}; krb5-libs on RHEL)"
    )
