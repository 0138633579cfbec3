"""HTTP header values both of TARN's own HTTP readers (the OpenAI front, the activator) parse the
same way. Standard library only: the front runs from the launcher's zipapp in a stock Triton image.
"""

from __future__ import annotations

# A Content-Length TARN accepts has at most this many digits (a petabyte): Python's int() refuses
# strings of over 4,300 digits with an error of its own, and no body TARN takes comes near.
MAX_LENGTH_DIGITS = 15


def content_length(text: str) -> int | None:
    """A Content-Length's value (RFC 9110: 1*DIGIT), None when it is not one. ASCII digits only:
    str.isdigit also takes '²' and other Unicode digits, which int() then refuses (issue 48,
    row 10: a 500 with a traceback)."""
    if not text or len(text) > MAX_LENGTH_DIGITS or not (text.isascii() and text.isdigit()):
        return None
    return int(text)
