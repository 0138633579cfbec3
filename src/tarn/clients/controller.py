"""The TARN controller's API (docs/discovery.md): the instances it sees and draining one of them.

``POST /instances/<instance>/drain`` deregisters an instance (ZooKeeper and ``/instances``) and
answers 200 once it has no request in flight (bounded by the controller); ``DELETE`` makes it
eligible again, which also happens by itself when the instance restarts.
"""

from __future__ import annotations

from typing import Any

import requests

from tarn.errors import ClusterError
from tarn.stdlib.api_token import Secret

JSON = dict[str, Any]
TOKEN_HEADER = "X-TARN-Token"  # noqa: S105 - the header's name


class ControllerClient:
    def __init__(self, url: str, token: Secret | None = None, timeout: float = 10.0) -> None:
        self._url = url.rstrip("/")
        self._headers = {TOKEN_HEADER: token.reveal()} if token is not None else {}
        self._timeout = timeout
        self._session = requests.Session()

    @property
    def url(self) -> str:
        return self._url

    def instances(self) -> JSON:
        """``{"service": …, "target": N, "instances": [ … ]}``: every Triton container, with its load."""
        reply = self._call("GET", "/instances")
        found: JSON = reply.json()
        return found

    def drain(self, instance: str, timeout: float = 300.0) -> JSON:
        """Take ``instance`` (e.g. ``triton-1``) out of discovery and wait until it is idle; the answer's
        ``drained`` is false when the controller's own bound (--drain-timeout) ran out first."""
        reply = self._call("POST", f"/instances/{instance}/drain?wait=true", timeout=timeout)
        found: JSON = reply.json() if reply.content else {"instance": instance, "drained": True}
        return found

    def undrain(self, instance: str) -> None:
        self._call("DELETE", f"/instances/{instance}/drain", ok=(200, 204, 404))

    def _call(
        self, method: str, path: str, timeout: float | None = None, ok: tuple[int, ...] = (200,)
    ) -> requests.Response:
        try:
            reply = self._session.request(
                method, self._url + path, headers=self._headers, timeout=timeout or self._timeout
            )
        except requests.RequestException as exc:
            raise ClusterError(f"controller {method} {self._url}{path}: {exc.__class__.__name__}") from exc
        if reply.status_code not in ok:
            raise ClusterError(
                f"controller {method} {self._url}{path} answered {reply.status_code}: {reply.text[:200]}"
            )
        return reply


def load_summary(instances: list[JSON]) -> JSON:
    """Count, registered count and mean/max load of the controller's instances (None without metrics)."""
    loads = [float(i["load"]) for i in instances if isinstance(i.get("load"), int | float)]
    states: dict[str, int] = {}
    for item in instances:
        states[str(item.get("state"))] = states.get(str(item.get("state")), 0) + 1
    return {
        "instances": len(instances),
        "registered": sum(1 for i in instances if i.get("registered")),
        "states": states,
        "mean_load": sum(loads) / len(loads) if loads else None,
        "max_load": max(loads) if loads else None,
    }
