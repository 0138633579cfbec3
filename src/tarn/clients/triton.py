"""Triton Inference Server over its HTTP API (the Open Inference Protocol and Triton's extensions):
readiness, model metadata, the repository index and the Prometheus metrics text."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import requests

from tarn.errors import ClusterError

JSON = dict[str, Any]
READY_PATH = "/v2/health/ready"
METRICS_PATH = "/metrics"  # on the metrics port
INDEX_PATH = "/v2/repository/index"
SERVER_PATH = (
    "/v2"  # server metadata: its "name" is tritonserver's --id (the launcher gives the container id)
)
DEFAULT_SERVER_ID = "triton"  # tritonserver's --id when none is given


class Triton:
    def __init__(
        self,
        host: str,
        http_port: int = 8000,
        metrics_port: int = 8002,
        timeout: float | tuple[float, float] = 5.0,
    ) -> None:
        self._http = f"http://{host}:{http_port}"
        self._metrics = f"http://{host}:{metrics_port}{METRICS_PATH}"
        self._timeout = timeout
        self._session = requests.Session()

    def ready(self) -> bool:
        """/v2/health/ready answers 200: a refused or slow connection is simply not ready."""
        try:
            return self._session.get(f"{self._http}{READY_PATH}", timeout=self._timeout).status_code == 200
        except requests.RequestException:
            return False

    def model_metadata(self, model: str) -> JSON:
        metadata: JSON = self._json("GET", f"/v2/models/{model}")
        return metadata

    def repository_index(self) -> list[JSON]:
        """Every model of the repository with its state (READY, UNAVAILABLE, …)."""
        index: list[JSON] = self._json("POST", INDEX_PATH, {})
        return index

    def model_config(self, model: str) -> JSON:
        """The configuration Triton serves the model with, as JSON."""
        config: JSON = self._json("GET", f"/v2/models/{model}/config")
        return config

    def load_model(self, model: str, files: Mapping[str, bytes], config: JSON | None = None) -> None:
        """(Re)load ``model`` in place from ``files`` (paths relative to the model's directory, such as
        ``2/model.py``), sent in the request: nothing needs to be on the node and nothing restarts.
        Triton serves the old version until the new one is loaded. ``config`` defaults to the one
        Triton serves now (Triton needs a config whenever files are given)."""
        parameters: JSON = {"config": json.dumps(config if config is not None else self.model_config(model))}
        for path, data in files.items():
            parameters[f"file:{path}"] = base64.b64encode(data).decode()
        self._json("POST", f"/v2/repository/models/{model}/load", {"parameters": parameters}, timeout=300.0)

    def metrics(self) -> str:
        try:
            reply = self._session.get(self._metrics, timeout=self._timeout)
        except requests.RequestException as exc:
            raise ClusterError(f"Triton metrics {self._metrics}: {exc.__class__.__name__}") from exc
        if reply.status_code != 200:
            raise ClusterError(f"Triton metrics {self._metrics} answered {reply.status_code}")
        return reply.text

    def _json(self, method: str, path: str, body: JSON | None = None, timeout: float | None = None) -> Any:
        try:
            reply = self._session.request(
                method, f"{self._http}{path}", json=body, timeout=timeout or self._timeout
            )
        except requests.RequestException as exc:
            raise ClusterError(f"Triton {method} {path}: {exc.__class__.__name__}") from exc
        if reply.status_code != 200:
            raise ClusterError(f"Triton {method} {path} answered {reply.status_code}: {reply.text[:200]}")
        return reply.json() if reply.content else {}
