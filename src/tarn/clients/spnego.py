"""SPNEGO (Kerberos) for requests sessions (the ResourceManager client): the ``Authorization:
Negotiate`` header of tarn.stdlib.kerberos, sent with the first request (preemptively), for the
HTTP service of the request's host. WebHDFS takes tarn.stdlib.kerberos.SpnegoAuth instead."""

from __future__ import annotations

import urllib.parse

import requests
import requests.auth

from tarn.stdlib.kerberos import KerberosIdentity


class NegotiateAuth(requests.auth.AuthBase):
    """``Authorization: Negotiate <token>`` for HTTP/<host of the request>, on every request."""

    def __init__(self, identity: KerberosIdentity | None = None) -> None:
        self.identity = identity or KerberosIdentity()

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        host = urllib.parse.urlsplit(request.url or "").hostname or ""
        request.headers["Authorization"] = self.identity.negotiate(host)
        return request


def rm_auth(identity: KerberosIdentity | None) -> requests.auth.AuthBase | None:
    """The RM client's authentication: SPNEGO as ``identity`` on a secure cluster, else None
    (simple authentication: the client sends ``user.name``)."""
    return NegotiateAuth(identity) if identity else None


def requests_auth(identity: KerberosIdentity | None = None) -> requests.auth.AuthBase:
    """SPNEGO for a requests session: the caller's ticket cache, or the identity given."""
    return NegotiateAuth(identity)
