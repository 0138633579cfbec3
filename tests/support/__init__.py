"""What the tests share: test doubles, loopback servers and lab helpers.

Test modules import from here and never from one another; bench/ takes its doubles from here too.
Nothing here is collected by pytest (no module is named test_*).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
