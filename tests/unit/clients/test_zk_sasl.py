"""tarn.clients.zk_sasl's SASL GSSAPI exchange (RFC 4752) through pure-sasl's SASLClient, as kazoo
builds it, with a stand-in for the Kerberos context; the real one against a real ZooKeeper and KDC
is tests/integration/test_zookeeper_sasl.py."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kazoo.exceptions import ConnectionDropped
from puresasl import SASLProtocolException
from puresasl.client import SASLClient

from tarn.clients import zk_sasl
from tarn.errors import ConfigError
from tarn.stdlib.kerberos import KerberosIdentity

OFFER = struct.pack("!I", 0x07 << 24 | 0x10000)  # the server offers all layers, 64 KiB


class Context:
    """A ClientContext stand-in: two legs, then 'wrap' and 'unwrap' that mark the bytes."""

    def __init__(self, service: str, host: str) -> None:
        self.service, self.host = service, host
        self.first = b"ap-req"
        self.established = False
        self.steps: list[bytes] = []
        self.closed = False

    def step(self, token: bytes) -> bytes:
        self.steps.append(token)
        self.established = True
        return b""

    def unwrap(self, data: bytes) -> bytes:
        assert data.startswith(b"wrapped:")
        return data.removeprefix(b"wrapped:")

    def wrap(self, data: bytes, confidential: bool = False) -> bytes:
        return b"wrapped:" + data

    def initiator(self) -> str:
        return "tarn/worker1@EXAMPLE.COM"

    def close(self) -> None:
        self.closed = True


class Identity(KerberosIdentity):
    failure: str | None
    contexts: list[Context]

    def __init__(self, failure: str | None = None) -> None:
        super().__init__("tarn/worker1@EXAMPLE.COM", "/k")
        object.__setattr__(self, "failure", failure)
        object.__setattr__(self, "contexts", [])

    def context(self, service: str, host: str) -> Any:
        if self.failure:
            raise ConfigError(self.failure)
        made = Context(service, host)
        self.contexts.append(made)
        return made


def client(identity: KerberosIdentity, status: zk_sasl.SaslStatus, **extra: Any) -> SASLClient:
    """What kazoo does with ``sasl_options`` (kazoo.protocol.connection: _authenticate_with_sasl)."""
    options = zk_sasl.sasl_options(identity, status, **extra)
    return SASLClient(host="zk1.example.com", **options)


def test_the_exchange_as_kazoo_drives_it() -> None:
    identity, status = Identity(), zk_sasl.SaslStatus()
    sasl = client(identity, status)
    (context,) = identity.contexts
    assert (context.service, context.host) == ("zookeeper", "zk1.example.com")
    assert sasl.process(None) == b"ap-req"
    assert sasl.process(b"ap-rep") == b""  # mutual authentication done: the server goes on
    assert context.steps == [b"ap-rep"]
    assert not sasl.complete
    answer = sasl.process(b"wrapped:" + OFFER)
    assert sasl.complete
    assert answer == b"wrapped:" + struct.pack("!I", 1 << 24) + b"tarn/worker1@EXAMPLE.COM"
    assert not status.authenticated.is_set()  # kazoo disposes once the server accepted
    sasl.dispose()
    assert status.authenticated.is_set()
    assert (status.principal, status.successes) == ("tarn/worker1@EXAMPLE.COM", 1)
    assert context.closed


def test_an_authorization_id_given() -> None:
    sasl = client(Identity(), zk_sasl.SaslStatus(), authorization_id="tarn")
    sasl.process(None)
    sasl.process(b"ap-rep")
    assert sasl.process(b"wrapped:" + OFFER).endswith(struct.pack("!I", 1 << 24) + b"tarn")


def test_a_failure_at_the_first_token_is_a_dropped_connection_to_kazoo() -> None:
    """kazoo retries a dropped connection; an error of process() would stop it for good."""
    status = zk_sasl.SaslStatus()
    with pytest.raises(ConnectionDropped, match=r"zookeeper@zk1\.example\.com: --keytab: no KDC"):
        client(Identity(failure="--keytab: no KDC of the realm answered"), status)
    assert (status.failures, status.failure) == (1, "--keytab: no KDC of the realm answered")
    assert not status.authenticated.is_set()


def test_a_server_that_requires_a_security_layer() -> None:
    identity, status = Identity(), zk_sasl.SaslStatus()
    sasl = client(identity, status)
    sasl.process(None)
    sasl.process(b"ap-rep")
    with pytest.raises(SASLProtocolException, match="requires a security layer"):
        sasl.process(b"wrapped:" + struct.pack("!I", 0x04 << 24 | 0x10000))
    assert status.failures == 1
    assert identity.contexts[0].closed


def test_layer_answer() -> None:
    assert zk_sasl.layer_answer(OFFER, "a") == b"\x01\x00\x00\x00a"
    assert zk_sasl.layer_answer(struct.pack("!I", 1 << 24), "tärn") == b"\x01\x00\x00\x00t\xc3\xa4rn"
    with pytest.raises(SASLProtocolException, match="not 4"):
        zk_sasl.layer_answer(b"\x01\x00\x00", "a")


def test_the_mechanism_is_registered_under_its_own_name() -> None:
    import puresasl.mechanisms

    zk_sasl.register()
    assert puresasl.mechanisms.mechanisms["TARN-GSSAPI"] is zk_sasl.GssapiMechanism
    assert puresasl.mechanisms.mechanisms.get("GSSAPI") is not zk_sasl.GssapiMechanism
