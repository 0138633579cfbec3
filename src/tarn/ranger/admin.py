"""Ranger Admin's plugin downloads, as RangerAdminRESTClient (Ranger 2.8.0) asks for them.

Three documents, each versioned: ServicePolicies (``/service/plugins/policies/download/{service}``),
RangerRoles (``/service/roles/download/{service}``) and RangerUserStore
(``/service/xusers/download/{service}``). Each call sends the version the plugin holds and answers
the new document, or None when Admin says it is unchanged (304, or 204). The query parameters are
the Java client's: ``lastKnown…Version``, ``lastActivationTime``, ``pluginId``, ``clusterName``, and
``supportsPolicyDeltas=false`` (TARN takes full policies only). ``pluginCapabilities`` is not sent:
Admin only records it, and TARN does not have every capability Ranger's bitmask would claim.

Unauthenticated (non-Kerberos) download paths only. Several URLs (Ranger's comma-separated
``policy.rest.url``) are tried in turn on connection errors and 5xx; the one that answered is
asked first next time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import requests

from tarn.errors import TarnError

JSON = dict[str, Any]
POLICIES_PATH = "/service/plugins/policies/download/"
ROLES_PATH = "/service/roles/download/"
USER_STORE_PATH = "/service/xusers/download/"
UNCHANGED = (304, 204)  # RangerAdminRESTClient takes both as "no change"
SERVICE_NOT_FOUND = "RANGER_ERROR_SERVICE_NOT_FOUND: ServiceName="


class RangerAdminError(TarnError):
    """Ranger Admin refused a request (a plugin download, a public API call), or could not be reached."""


class AdminUnreachable(RangerAdminError):
    """No Ranger Admin URL answered."""


class RangerAdmin:
    def __init__(
        self,
        urls: Sequence[str],
        service: str,
        plugin_id: str,
        cluster_name: str = "",
        timeout: tuple[float, float] = (5.0, 30.0),
        session: requests.Session | None = None,
    ) -> None:
        if not urls:
            raise ValueError("at least one Ranger Admin URL is needed")
        self._urls = [u.rstrip("/") for u in urls]
        self._service = service
        self._path_service = quote(service, safe="")
        self._common = {"pluginId": plugin_id, "clusterName": cluster_name}
        self._timeout = timeout
        self._session = session or requests.Session()

    def policies(self, last_known_version: int, last_activation_ms: int) -> JSON | None:
        """ServicePolicies, or None when ``last_known_version`` is current."""
        params = {"lastKnownVersion": str(last_known_version), "supportsPolicyDeltas": "false"}
        return self._download(POLICIES_PATH, params, last_activation_ms)

    def roles(self, last_known_version: int, last_activation_ms: int) -> JSON | None:
        """RangerRoles, or None when ``last_known_version`` is current."""
        return self._download(
            ROLES_PATH, {"lastKnownRoleVersion": str(last_known_version)}, last_activation_ms
        )

    def user_store(self, last_known_version: int, last_activation_ms: int) -> JSON | None:
        """RangerUserStore (users, groups, user → groups), or None when ``last_known_version`` is current."""
        params = {"lastKnownUserStoreVersion": str(last_known_version)}
        return self._download(USER_STORE_PATH, params, last_activation_ms)

    def close(self) -> None:
        self._session.close()

    def _download(self, path: str, params: dict[str, str], last_activation_ms: int) -> JSON | None:
        query = {**params, "lastActivationTime": str(last_activation_ms), **self._common}
        reply = self._get(f"{path}{self._path_service}", query)
        if reply.status_code in UNCHANGED:
            return None
        if reply.status_code == 200:
            try:
                body = reply.json()
            except ValueError as exc:
                raise RangerAdminError(f"{path}: the answer is not JSON") from exc
            if not isinstance(body, dict):
                raise RangerAdminError(f"{path}: the answer is not a JSON object")
            return body
        if reply.status_code == 404 and SERVICE_NOT_FOUND in reply.text:
            raise RangerAdminError(
                f"Ranger Admin has no service {self._service!r} (404); create it, or fix --ranger-service"
            )
        raise RangerAdminError(
            f"{path}{self._path_service} answered {reply.status_code}: {answer_reason(reply)}"
        )

    def _get(self, path: str, query: dict[str, str]) -> requests.Response:
        errors: list[str] = []
        for index, base in enumerate(self._urls):
            try:
                reply = self._session.get(
                    f"{base}{path}", params=query, timeout=self._timeout, allow_redirects=False
                )
            except requests.RequestException as exc:
                errors.append(f"{base}: {exc.__class__.__name__}")
                continue
            if reply.status_code >= 500:
                errors.append(f"{base}: {reply.status_code}")
                continue
            if index:  # ask the one that answered first next time
                self._urls.insert(0, self._urls.pop(index))
            return reply
        raise AdminUnreachable(f"no Ranger Admin answered ({'; '.join(errors)})")


def answer_reason(reply: requests.Response, limit: int = 200) -> str:
    """Ranger's msgDesc when the body has one, else the start of the body (one line)."""
    try:
        body = reply.json()
    except ValueError:
        body = None
    text = str(body.get("msgDesc")) if isinstance(body, dict) and body.get("msgDesc") else reply.text
    return " ".join(text.split())[:limit] or "no body"
