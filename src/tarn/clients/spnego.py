"""SPNEGO (Kerberos) from the caller's ticket cache (kinit), for a Kerberized cluster: a requests
auth for the ResourceManager, and an Authenticator for the WebHDFS client (tarn.stdlib.webhdfs).

Both need GSSAPI bindings, installed only where Kerberos is used (requests-gssapi, which brings
gssapi). The lab runs no KDC: the header format is unit-tested, the handshake is not exercised.
"""

from __future__ import annotations

import base64
import importlib
import urllib.parse
from types import ModuleType

import requests.auth

from tarn.errors import ConfigError

SPNEGO_MECHANISM = "1.3.6.1.5.5.2"  # RFC 4178


def requests_auth() -> requests.auth.AuthBase:
    """SPNEGO for a requests session (the RM client)."""
    try:
        from requests_gssapi import OPTIONAL, HTTPSPNEGOAuth  # only on Kerberized clusters
    except ImportError as exc:
        raise ConfigError(
            "--kerberos: needs the requests-gssapi package; pip install requests-gssapi"
        ) from exc
    auth: requests.auth.AuthBase = HTTPSPNEGOAuth(mutual_authentication=OPTIONAL)
    return auth


class SpnegoAuth:
    """``Authorization: Negotiate <token>`` for the service principal HTTP/<host of the URL>.

    A DataNode URL the NameNode redirected to carries a delegation token instead: no header."""

    def __init__(self) -> None:
        self._gssapi = _gssapi()

    def query(self) -> dict[str, str]:
        return {}

    def headers(self, url: str) -> dict[str, str]:
        parts = urllib.parse.urlsplit(url)
        if "delegation" in urllib.parse.parse_qs(parts.query):
            return {}
        gssapi = self._gssapi
        service = gssapi.Name(f"HTTP@{parts.hostname}", gssapi.NameType.hostbased_service)
        mechanism = gssapi.OID.from_int_seq(SPNEGO_MECHANISM)
        token = gssapi.SecurityContext(name=service, mech=mechanism, usage="initiate").step()
        return {"Authorization": f"Negotiate {base64.b64encode(token).decode()}"}


def _gssapi() -> ModuleType:
    try:
        return importlib.import_module("gssapi")
    except ImportError as exc:
        raise ConfigError("--kerberos: needs the gssapi package; pip install requests-gssapi") from exc
