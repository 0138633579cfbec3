"""Who the front counts a request for: the user an entry authenticated, only when it proves it.

Knox authenticates its users and names them in ``X-TARN-User``; HAProxy authenticates no one and
removes that header. A client that reaches a front's port directly could send any name, so the
front believes ``X-TARN-User`` only beside ``X-TARN-User-Proof: v1:<ts>:<hex>``, where ``hex`` is
HMAC-SHA256 of ``v1:<ts>:<user>`` keyed with the service's API token (which Knox holds for
/authorize) and ``ts`` the Unix time it was sent, within ``PROOF_WINDOW_S`` of the front's clock.
Anything else counts as ``anonymous`` (issue 48, item 4). The same computation is Knox's
``tarn.knox.UserProof``; a test vector in both test suites ties them.
"""

from __future__ import annotations

import hashlib
import hmac

from tarn.stdlib.api_token import Secret

USER_HEADER = "x-tarn-user"  # set by the entry (Knox) to the authenticated user
PROOF_HEADER = "x-tarn-user-proof"
ANONYMOUS = "anonymous"
VERSION = "v1"
# Clocks of a cluster agree within seconds (NTP); a proof seen on the wire is good this long.
PROOF_WINDOW_S = 300
MAX_USER_CHARS = 256  # a longer name is no name an LDAP directory gives


def proof(key: Secret, sent_at: int, user: str) -> str:
    """The proof an entry sends with ``user`` at Unix time ``sent_at``."""
    message = f"{VERSION}:{sent_at}:{user}".encode()
    digest = hmac.new(key.reveal().encode(), message, hashlib.sha256).hexdigest()
    return f"{VERSION}:{sent_at}:{digest}"


def counted_user(user: str, presented: str, key: Secret | None, now: float) -> str:
    """The user a request counts for: ``user`` (X-TARN-User) when ``presented`` (its proof) is
    right and recent under ``key``, else anonymous; always anonymous without a key."""
    user = user.strip()
    if key is None or not user or len(user) > MAX_USER_CHARS or not user.isprintable():
        return ANONYMOUS
    version, _sep, rest = presented.strip().partition(":")
    sent_at, _sep, _digest = rest.partition(":")
    if version != VERSION or not (sent_at.isascii() and sent_at.isdigit() and len(sent_at) <= 12):
        return ANONYMOUS
    if abs(now - int(sent_at)) > PROOF_WINDOW_S:
        return ANONYMOUS
    expected = proof(key, int(sent_at), user)
    return (
        user
        if hmac.compare_digest(expected.encode(), presented.strip().encode("utf-8", "replace"))
        else ANONYMOUS
    )
