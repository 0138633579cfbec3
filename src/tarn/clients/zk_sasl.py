"""ZooKeeper's SASL authentication with Kerberos (GSSAPI, RFC 4752) for kazoo, without compiled
modules: the controller runs from a zipapp of pure-Python libraries on hosts with a bare python3.

kazoo authenticates through pure-sasl (``KazooClient(sasl_options=...)`` becomes
``puresasl.client.SASLClient(host=<the server's name in the ensemble>, **sasl_options)``), and
pure-sasl's own GSSAPI mechanism needs the compiled ``kerberos`` module. This module's
`GssapiMechanism` speaks the same protocol on tarn.stdlib.kerberos (ctypes over MIT's
libgssapi_krb5.so.2): a Kerberos V5 context with ``zookeeper@<server host>`` (the krb5 mechanism,
mutual authentication), the server's tokens fed back until it is established; then the server's
wrapped 4-byte security-layer offer is unwrapped and answered, wrapped, with "no security layer"
(ZooKeeper's is authentication only), a maximum message size of 0 and the authorization id.

How kazoo gets it: the class is registered in pure-sasl's mechanism table (``puresasl.mechanisms.
mechanisms``, the table SASLClient looks a name up in) under its own name, ``TARN-GSSAPI``, and
`sasl_options` names it. A distinct name rather than ``GSSAPI``: where the ``kerberos`` module
happens to be installed, pure-sasl's own GSSAPI stays what it is, and TARN never depends on which
of the two a table lookup finds. The name never goes on the wire (ZooKeeper's server picks its
mechanism from its JAAS login: Kerberos keys mean GSSAPI), so nothing on the server side knows it.
Registering is explicit (`register`, called by `sasl_options`) and idempotent; nothing of kazoo or
pure-sasl is patched. The identity travels in ``sasl_options`` too: SASLClient hands the options
it does not know to the mechanism's constructor.

Failures: kazoo turns any error of a mechanism's ``process`` into AUTH_FAILED and stops
connecting for good, so the step that needs the KDC (the first token: a ticket for the server) is
made when the mechanism is created, where an error is a dropped connection to kazoo, retried with
its back-off: a KDC that is down for a while does not end the controller's ZooKeeper session for
ever. Each failure and success is recorded in the `SaslStatus` given to `sasl_options`, so that a
caller (tarn.controller.registry) can wait for the authentication and name the fix when it fails.
"""

from __future__ import annotations

import struct
import threading
from typing import Any, ClassVar

import puresasl.mechanisms
from kazoo.exceptions import ConnectionDropped
from puresasl import QOP, SASLError, SASLProtocolException

from tarn.errors import ConfigError
from tarn.stdlib.kerberos import ClientContext, KerberosIdentity

MECHANISM = "TARN-GSSAPI"
SERVICE = "zookeeper"  # the first part of the servers' principals (zookeeper/host@REALM)
NO_SECURITY_LAYER = 1  # RFC 4752's bit-mask: 1 none, 2 integrity, 4 confidentiality


class SaslStatus:
    """What the mechanism instances of one client (one per connection) report: the principal
    authenticated last, and the last failure's words."""

    def __init__(self) -> None:
        self.authenticated = threading.Event()
        self.principal: str | None = None
        self.failure: str | None = None
        self.failures = 0
        self.successes = 0  # one per connection: a reconnection authenticates again

    def succeeded(self, principal: str) -> None:
        self.principal, self.failure = principal, None
        self.successes += 1
        self.authenticated.set()

    def failed(self, text: str) -> None:
        self.failure = text
        self.failures += 1


def sasl_options(
    identity: KerberosIdentity,
    status: SaslStatus | None = None,
    service: str = SERVICE,
    authorization_id: str | None = None,
) -> dict[str, Any]:
    """kazoo's ``sasl_options`` for SASL GSSAPI as ``identity``. ``authorization_id`` None: the
    authenticated principal (ZooKeeper's server authorizes the authenticated one in any case)."""
    register()
    options: dict[str, Any] = {"mechanism": MECHANISM, "service": service, "identity": identity}
    if status is not None:
        options["status"] = status
    if authorization_id is not None:
        options["authorization_id"] = authorization_id
    return options


def register() -> None:
    """Put `GssapiMechanism` in pure-sasl's table of mechanisms under ``TARN-GSSAPI``."""
    puresasl.mechanisms.mechanisms[MECHANISM] = GssapiMechanism


def layer_answer(offer: bytes, authorization_id: str) -> bytes:
    """The client's answer (RFC 4752, 3.1) to the server's unwrapped 4-byte offer: no security
    layer, maximum message size 0, the authorization id in UTF-8."""
    if len(offer) != 4:
        raise SASLProtocolException(
            f"the server's security-layer offer has {len(offer)} bytes, not 4: not SASL GSSAPI"
        )
    if not offer[0] & NO_SECURITY_LAYER:
        raise SASLProtocolException(
            f"the server requires a security layer (offer {offer[0]:#04x}); TARN uses none: "
            "set the server's javax.security.sasl.qop to auth"
        )
    return struct.pack("!I", NO_SECURITY_LAYER << 24) + authorization_id.encode("utf-8")


class GssapiMechanism(puresasl.mechanisms.Mechanism):  # type: ignore[misc]
    """SASL GSSAPI on tarn.stdlib.kerberos (see the module's docstring)."""

    name = MECHANISM
    score = 100
    qops: ClassVar[list[bytes]] = [QOP.AUTH]
    allows_anonymous = False
    uses_plaintext = False
    active_safe = True
    dictionary_safe = True

    def __init__(
        self,
        sasl: Any,
        identity: KerberosIdentity | None = None,
        status: SaslStatus | None = None,
        **props: Any,
    ) -> None:
        super().__init__(sasl)
        if identity is None:
            raise SASLError(f"{MECHANISM} needs an identity (tarn.clients.zk_sasl.sasl_options)")
        self.status = status or SaslStatus()
        self.complete = False
        self._sent_first = False
        service = sasl.service or SERVICE
        try:
            self._context: ClientContext | None = identity.context(service, sasl.host)
        except ConfigError as exc:  # the KDC's answer: kazoo retries a dropped connection
            self.status.failed(str(exc))
            raise ConnectionDropped(f"SASL GSSAPI with {service}@{sasl.host}: {exc}") from None

    def process(self, challenge: bytes | None = None) -> bytes:
        context = self._context
        if context is None:
            raise SASLProtocolException("the SASL exchange is over")
        try:
            if not self._sent_first:
                self._sent_first = True
                return context.first
            if not context.established:
                return context.step(challenge or b"")  # empty once established: the server goes on
            answer = layer_answer(
                context.unwrap(challenge or b""), self.sasl.authorization_id or context.initiator()
            )
            wrapped = context.wrap(answer)
            self.complete = True
            return wrapped
        except (ConfigError, SASLProtocolException) as exc:
            self.status.failed(f"SASL GSSAPI with {context.service}@{context.host}: {exc}")
            self.dispose()
            raise

    def wrap(self, outgoing: bytes) -> bytes:
        return outgoing  # no security layer

    def unwrap(self, incoming: bytes) -> bytes:
        return incoming

    def dispose(self) -> None:
        """kazoo calls it once the server accepted the exchange (and this module on a failure)."""
        context, self._context = self._context, None
        if context is None:
            return
        try:
            if self.complete:
                self.status.succeeded(context.initiator())
        finally:
            context.close()
