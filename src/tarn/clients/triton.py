"""Triton Inference Server over its HTTP API (the Open Inference Protocol and Triton's extensions):
readiness, model metadata, the repository index and the Prometheus metrics text."""

from __future__ import annotations

from typing import Any

import requests

from tarn.errors import ClusterError

JSON = dict[str, Any]


class Triton:
    def __init__(
        self, host: str, http_port: int = 8000, metrics_port: int = 8002, timeout: float = 5.0
    ) -> None:
        self._http = f"http://{host}:{http_port}"
        self._metrics = f"http://{host}:{metrics_port}/metrics"
        self._timeout = timeout
        self._session = requests.Session()

    def ready(self) -> bool:
        """/v2/health/ready answers 200: a refused or slow connection is simply not ready."""
        try:
            return (
                self._session.get(f"{self._http}/v2/health/ready", timeout=self._timeout).status_code == 200
            )
        except requests.RequestException:
            return False

    def model_metadata(self, model: str) -> JSON:
        metadata: JSON = self._json("GET", f"/v2/models/{model}")
        return metadata

    def repository_index(self) -> list[JSON]:
        """Every model of the repository with its state (READY, UNAVAILABLE, …)."""
        index: list[JSON] = self._json("POST", "/v2/repository/index", {})
        return index

    def metrics(self) -> str:
        try:
            reply = self._session.get(self._metrics, timeout=self._timeout)
        except requests.RequestException as exc:
            raise ClusterError(f"Triton metrics {self._metrics}: {exc.__class__.__name__}") from exc
        if reply.status_code != 200:
            raise ClusterError(f"Triton metrics {self._metrics} answered {reply.status_code}")
        return reply.text

    def _json(self, method: str, path: str, body: JSON | None = None) -> Any:
        try:
            reply = self._session.request(method, f"{self._http}{path}", json=body, timeout=self._timeout)
        except requests.RequestException as exc:
            raise ClusterError(f"Triton {method} {path}: {exc.__class__.__name__}") from exc
        if reply.status_code != 200:
            raise ClusterError(f"Triton {method} {path} answered {reply.status_code}: {reply.text[:200]}")
        return reply.json()
