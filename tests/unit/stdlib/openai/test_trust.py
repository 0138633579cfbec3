"""Who the front counts a request for (tarn.stdlib.openai.trust): X-TARN-User only with Knox's
proof, keyed with the service's token and recent; anonymous otherwise (issue 48, row 3, item 4)."""

from __future__ import annotations

import pytest

from tarn.stdlib.api_token import Secret
from tarn.stdlib.openai.trust import ANONYMOUS, PROOF_WINDOW_S, counted_user, proof

KEY = Secret("s3cret-token")
NOW = 1_700_000_000


def test_the_proof_is_the_one_knox_computes() -> None:
    # The same vector is in knox/tarn-knox-plugin's UserProofTest: the two sides cannot drift apart.
    assert (
        proof(KEY, NOW, "alice")
        == "v1:1700000000:8c0d5cec8e69c00f6faae3e803e3937c7beb2f5029c1a0599be39b610b710bd9"
    )


@pytest.mark.parametrize(
    ("user", "presented", "key", "now", "counted"),
    [
        ("alice", proof(KEY, NOW, "alice"), KEY, NOW, "alice"),
        (" alice ", proof(KEY, NOW, "alice"), KEY, NOW, "alice"),  # a header's surrounding blanks
        ("alice", proof(KEY, NOW - PROOF_WINDOW_S, "alice"), KEY, NOW, "alice"),  # at the window's edge
        ("alice", proof(KEY, NOW + 30, "alice"), KEY, NOW, "alice"),  # the entry's clock a little ahead
        ("alice", "", KEY, NOW, ANONYMOUS),  # a client naming itself (row 3)
        ("alice", proof(KEY, NOW, "bob"), KEY, NOW, ANONYMOUS),  # bob's proof for alice
        ("alice", proof(Secret("another"), NOW, "alice"), KEY, NOW, ANONYMOUS),  # another service's
        ("alice", proof(KEY, NOW - PROOF_WINDOW_S - 1, "alice"), KEY, NOW, ANONYMOUS),  # replayed late
        ("alice", proof(KEY, NOW, "alice"), None, NOW, ANONYMOUS),  # a front without the token
        ("", proof(KEY, NOW, ""), KEY, NOW, ANONYMOUS),
        ("a\nb", proof(KEY, NOW, "a\nb"), KEY, NOW, ANONYMOUS),  # no forged log lines
        ("x" * 300, proof(KEY, NOW, "x" * 300), KEY, NOW, ANONYMOUS),
        ("alice", "v2:1700000000:00", KEY, NOW, ANONYMOUS),
        ("alice", "v1:17e8:00", KEY, NOW, ANONYMOUS),
        ("alice", "v1:" + "9" * 5000 + ":00", KEY, NOW, ANONYMOUS),
        ("alice", "v1:\u0661\u0662:00", KEY, NOW, ANONYMOUS),  # Unicode digits
        ("alice", proof(KEY, NOW, "alice") + "\ud800", KEY, NOW, ANONYMOUS),
    ],
)
def test_counted_user(user: str, presented: str, key: Secret | None, now: int, counted: str) -> None:
    assert counted_user(user, presented, key, now) == counted
