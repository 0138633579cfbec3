"""The requests auth of tarn.clients.spnego: the Negotiate header of tarn.stdlib.kerberos for the
request's host, set before the request is sent (no 401 round trip). Its tokens against a real KDC:
tests/integration/test_kerberos_spnego.py; the stdlib side: tests/unit/stdlib/test_kerberos.py."""

from __future__ import annotations

import requests

from tarn.clients.spnego import NegotiateAuth, requests_auth
from tarn.stdlib.kerberos import KerberosIdentity


class Hosts(KerberosIdentity):
    """An identity that records the hosts it is asked a token for."""

    def negotiate(self, host: str) -> str:
        asked.append(host)
        return f"Negotiate for-{host}"


asked: list[str] = []


def test_every_request_carries_a_token_for_its_own_host() -> None:
    asked.clear()
    auth = NegotiateAuth(Hosts("tarn@EXAMPLE.COM", "/etc/security/keytabs/tarn.keytab"))
    for url in (
        "http://rm1.example.com:8088/ws/v1/cluster/info",
        "http://rm2.example.com:8088/app/v1/services",
    ):
        request = auth(requests.Request("GET", url).prepare())
        assert request.headers["Authorization"] == f"Negotiate for-{url.split('/')[2].split(':')[0]}"
    assert asked == ["rm1.example.com", "rm2.example.com"]


def test_without_an_identity_the_ticket_cache() -> None:
    auth = requests_auth()
    assert isinstance(auth, NegotiateAuth)
    assert auth.identity == KerberosIdentity()
