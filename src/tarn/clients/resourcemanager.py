"""YARN ResourceManager REST: cluster state (/ws/v1) and the YARN Services API (/app/v1).

Simple authentication passes the user as ``user.name``; on a Kerberized cluster pass a requests
auth object (tarn.clients.spnego.rm_auth: SPNEGO as a Kerberos identity). With RM HA,
every RM URL is tried in turn and the one that answered is remembered: a standby RM redirects or
refuses API calls.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

import requests
import requests.auth

from tarn.errors import ClusterError
from tarn.stdlib.hadoop_site import parse_properties

JSON = dict[str, Any]
# GET of a service answers 500 for a moment while YARN rewrites the service's JSON on HDFS (an
# upgrade finalizing: "No content to map due to end-of-input"); a GET is safe to ask again.
SERVICE_GET_RETRY_DELAYS_S = (0.5, 1.0, 2.0)


class ResourceManager:
    def __init__(
        self,
        urls: list[str],
        user: str,
        timeout: float = 30.0,
        auth: requests.auth.AuthBase | None = None,
        sleep: Callable[[float], None] = time.sleep,
        service_get_retries: tuple[float, ...] = SERVICE_GET_RETRY_DELAYS_S,
    ) -> None:
        if not urls:
            raise ValueError("at least one ResourceManager URL is needed")
        self._urls = [u.rstrip("/") for u in urls]
        self.configured_urls = tuple(self._urls)  # as given: _urls reorders on failover
        self._user = user
        self._timeout = timeout
        self._session = requests.Session()
        self._session.auth = auth
        self._sleep = sleep
        self._service_get_retries = service_get_retries

    # ---- transport: one request against the active RM, failing over on connection errors
    def _request(self, method: str, path: str, body: JSON | None = None) -> requests.Response:
        errors: list[str] = []
        for index, base in enumerate(self._urls):
            try:
                reply = self._session.request(
                    method,
                    f"{base}{path}",
                    # Kerberos (an auth object): SPNEGO alone, never a claimed user.name
                    params={"user.name": self._user} if self._session.auth is None else None,
                    json=body,
                    timeout=self._timeout,
                    allow_redirects=False,
                )
            except requests.RequestException as exc:
                errors.append(f"{base}: {exc.__class__.__name__}")
                continue
            if _is_standby(reply):
                errors.append(f"{base}: standby")
                continue
            if index:  # remember the active RM first
                self._urls.insert(0, self._urls.pop(index))
            return reply
        raise ClusterError(f"no active ResourceManager answered {method} {path} ({'; '.join(errors)})")

    def _json(self, method: str, path: str, body: JSON | None = None, ok: tuple[int, ...] = (200,)) -> JSON:
        reply = self._request(method, path, body)
        if reply.status_code not in ok:
            raise ClusterError(f"{method} {path} answered {reply.status_code}: {_diagnostics(reply)}")
        return reply.json() if reply.content else {}

    # ---- cluster
    def cluster_info(self) -> JSON:
        info: JSON = self._json("GET", "/ws/v1/cluster/info")["clusterInfo"]
        return info

    def nodes(self) -> list[JSON]:
        nodes = self._json("GET", "/ws/v1/cluster/nodes")["nodes"]
        return list(nodes["node"]) if nodes else []

    def configuration(self) -> dict[str, str]:
        """The RM's effective configuration, property → value (Hadoop's /conf servlet)."""
        reply = self._request("GET", "/conf")
        if reply.status_code != 200:
            raise ClusterError(f"GET /conf answered {reply.status_code}: {_diagnostics(reply)}")
        try:
            return parse_properties(reply.content)
        except ET.ParseError as exc:
            raise ClusterError(f"GET /conf: not a Hadoop configuration ({exc})") from exc

    def app(self, app_id: str) -> JSON:
        app: JSON = self._json("GET", f"/ws/v1/cluster/apps/{app_id}")["app"]
        return app

    def app_attempts(self, app_id: str) -> list[JSON]:
        """The application's attempts, oldest first (an AM that died is followed by a new one)."""
        found = self._json("GET", f"/ws/v1/cluster/apps/{app_id}/appattempts")["appAttempts"]
        return list(found["appAttempt"]) if found else []

    # ---- YARN services
    def create_service(self, spec: JSON) -> JSON:
        return self._json("POST", "/app/v1/services", spec, ok=(200, 202))

    def service(self, name: str) -> JSON | None:
        reply = self._request("GET", f"/app/v1/services/{name}")
        for delay in self._service_get_retries:
            if reply.status_code < 500:
                break
            self._sleep(delay)
            reply = self._request("GET", f"/app/v1/services/{name}")
        if reply.status_code == 404:
            return None
        if reply.status_code != 200:
            raise ClusterError(f"GET service {name} answered {reply.status_code}: {_diagnostics(reply)}")
        found: JSON = reply.json()
        return found

    def flex(self, name: str, component: str, count: int) -> JSON:
        body = {"number_of_containers": count}
        return self._json("PUT", f"/app/v1/services/{name}/components/{component}", body)

    def decommission(self, name: str, component: str, instances: list[str]) -> JSON:
        """Remove exactly these component instances (e.g. triton-3); the count drops by as many."""
        body = {"components": [{"name": component, "decommissioned_instances": instances}]}
        return self._json("PUT", f"/app/v1/services/{name}", body, ok=(200, 202))

    def set_state(self, name: str, state: str) -> JSON:
        """STOPPED stops every container and keeps the service definition; STARTED starts it again."""
        return self._json("PUT", f"/app/v1/services/{name}", {"state": state}, ok=(200, 202))

    def initiate_upgrade(self, spec: JSON) -> JSON:
        """Start a YARN service upgrade to ``spec`` (its ``version`` must differ from the running one).

        The service goes to UPGRADING; nothing restarts until each instance is upgraded
        (:meth:`upgrade_instance`). Auto-finalized: once every instance of the changed components
        runs the new version, YARN makes it the service's definition and the service STABLE again.
        The RM must run with ``yarn.service.upgrade.enabled=true``.
        """
        body = {**spec, "state": "UPGRADING_AUTO_FINALIZE"}
        return self._json("PUT", f"/app/v1/services/{spec['name']}", body, ok=(200, 202, 204))

    def upgrade_instance(self, name: str, component: str, instance: str) -> None:
        """Relaunch one component instance (e.g. ``triton-1``) with the upgraded spec."""
        path = f"/app/v1/services/{name}/components/{component}/component-instances/{instance}"
        self._json(
            "PUT", path, {"component_instance_name": instance, "state": "UPGRADING"}, ok=(200, 202, 204)
        )

    def destroy(self, name: str) -> bool:
        """Stop and remove the service; False when there was none (the RM answers 400 then)."""
        reply = self._request("DELETE", f"/app/v1/services/{name}")
        if reply.status_code in (200, 204):
            return True
        if reply.status_code in (400, 404) and "doesn't exist" in _diagnostics(reply):
            return False
        raise ClusterError(f"DELETE service {name} answered {reply.status_code}: {_diagnostics(reply)}")


def node_gpus(node: JSON, which: str = "totalResource") -> int:
    """yarn.io/gpu of a node from /ws/v1/cluster/nodes: its capacity, or `usedResource`."""
    resources = node[which]["resourceInformations"]["resourceInformation"]
    return sum(int(r["value"]) for r in resources if r["name"] == "yarn.io/gpu")


def _is_standby(reply: requests.Response) -> bool:
    # A standby RM redirects REST calls to the active one, or says so in the body.
    return reply.status_code in (307, 503) or "standby" in reply.headers.get("Refresh", "").lower()


def _diagnostics(reply: requests.Response) -> str:
    try:
        body = reply.json()
    except ValueError:
        return reply.text[:300]
    if isinstance(body, dict):
        for key in ("diagnostics", "RemoteException"):
            if key in body:
                return str(body[key])[:300]
    return str(body)[:300]
