"""How the life cycle acts: waits, progress, and the token a drain is asked with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tarn.stdlib.api_token import Secret
from tarn.stdlib.config import READY_BUDGET_S

Log = Callable[[str], None]


@dataclass(frozen=True)
class Options:
    wait: bool = True
    timeout: float = float(READY_BUDGET_S)  # for each wait (submission to READY, one instance's upgrade, …)
    token: Secret | None = None  # the controller's API token, to drain instances
    controller_url: str | None = None  # default: the controller container's host and --am-port
    log: Log = field(default=lambda text: None)
    warn: Log = field(default=lambda text: None)  # what the operator must act on (a module's warnings)
    poll: float = 2.0
