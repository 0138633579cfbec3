"""The SPNEGO authenticator (tarn.clients.spnego): the header a Kerberized NameNode expects, for the
HTTP service of its host, and the package named when gssapi is missing (no KDC here: the GSSAPI is a
stand-in)."""

from __future__ import annotations

import base64
import sys
import types
from typing import Any

import pytest


class FakeGssapi(types.ModuleType):
    """What SpnegoAuth uses of python-gssapi: Name, NameType, OID, SecurityContext."""

    def __init__(self) -> None:
        super().__init__("gssapi")
        self.contexts: list[dict[str, Any]] = []
        outer = self

        class Context:
            def __init__(self, **kwargs: Any) -> None:
                outer.contexts.append(kwargs)

            def step(self) -> bytes:
                return b"negotiation-token"

        self.Name = lambda name, kind: (name, kind)
        self.NameType = types.SimpleNamespace(hostbased_service="hostbased")
        self.OID = types.SimpleNamespace(from_int_seq=lambda oid: f"oid:{oid}")
        self.SecurityContext = Context


def test_spnego_asks_for_the_http_service_of_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    from tarn.clients.spnego import SpnegoAuth

    fake = FakeGssapi()
    monkeypatch.setitem(sys.modules, "gssapi", fake)
    auth = SpnegoAuth()
    header = auth.headers("http://nn1.example:9870/webhdfs/v1/x?op=GETFILESTATUS")
    assert header == {"Authorization": "Negotiate " + base64.b64encode(b"negotiation-token").decode()}
    assert fake.contexts == [
        {"name": ("HTTP@nn1.example", "hostbased"), "mech": "oid:1.3.6.1.5.5.2", "usage": "initiate"}
    ]
    assert auth.query() == {}
    # The DataNode a NameNode redirects to is authorized by the delegation token in the URL.
    assert auth.headers("http://dn1.example:9864/webhdfs/v1/x?op=OPEN&delegation=abc") == {}


def test_spnego_without_gssapi_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from tarn.clients.spnego import SpnegoAuth
    from tarn.errors import ConfigError

    monkeypatch.setitem(sys.modules, "gssapi", None)  # as if not installed
    with pytest.raises(ConfigError, match="requests-gssapi"):
        SpnegoAuth()
