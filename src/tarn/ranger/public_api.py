"""Ranger Admin's public REST API v2 (``/service/public/v2/api``), the part that registers a service:
service definitions, services and policies, as Admin's JSON, with HTTP basic authentication.

Service definitions and services are read and updated by name, policies listed per service and
updated or deleted by id. A read of something Admin does not have (404) is None; any other answer
but the expected one is a RangerAdminError naming the request and Admin's reason (its msgDesc).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import requests

from tarn.ranger.admin import RangerAdminError, answer_reason

Json = dict[str, Any]
API = "/service/public/v2/api"
REASON_CHARS = 2000  # Admin's validation failures name every field at fault: keep them whole


class PublicApi:
    def __init__(
        self,
        url: str,
        user: str,
        password: str,
        verify: bool = True,
        timeout: float = 30.0,
        session: requests.Session | None = None,
    ) -> None:
        self._url = url.rstrip("/")
        self._session = session or requests.Session()
        self._session.auth = (user, password)
        self._session.verify = verify
        self._timeout = timeout

    def service_def(self, name: str) -> Json | None:
        found: Json | None = self._read(f"/servicedef/name/{_segment(name)}")
        return found

    def create_service_def(self, sdef: Json) -> Json:
        return self._write("POST", "/servicedef", sdef)

    def update_service_def(self, name: str, sdef: Json) -> Json:
        return self._write("PUT", f"/servicedef/name/{_segment(name)}", sdef)

    def service(self, name: str) -> Json | None:
        found: Json | None = self._read(f"/service/name/{_segment(name)}")
        return found

    def create_service(self, service: Json) -> Json:
        return self._write("POST", "/service", service)

    def update_service(self, name: str, service: Json) -> Json:
        return self._write("PUT", f"/service/name/{_segment(name)}", service)

    def policies(self, service: str) -> list[Json]:
        found = self._read(f"/service/{_segment(service)}/policy")
        return list(found or [])

    def create_policy(self, policy: Json, create_principals: bool = False) -> Json:
        return self._write("POST", "/policy", policy, _principals(create_principals))

    def update_policy(self, policy_id: int, policy: Json, create_principals: bool = False) -> Json:
        return self._write("PUT", f"/policy/{policy_id}", policy, _principals(create_principals))

    def delete_policy(self, policy_id: int) -> None:
        self._call("DELETE", f"/policy/{policy_id}", ok=(204, 200))

    def close(self) -> None:
        self._session.close()

    def _read(self, path: str) -> Any:
        reply = self._call("GET", path, ok=(200, 404))
        return None if reply.status_code == 404 else _json(reply, "GET", path)

    def _write(self, method: str, path: str, body: Json, params: dict[str, str] | None = None) -> Json:
        found = _json(self._call(method, path, body=body, params=params), method, path)
        if not isinstance(found, dict):
            raise RangerAdminError(f"Ranger Admin answered {method} {API}{path} with no JSON object")
        return found

    def _call(
        self,
        method: str,
        path: str,
        ok: tuple[int, ...] = (200,),
        body: Json | None = None,
        params: dict[str, str] | None = None,
    ) -> requests.Response:
        try:
            reply = self._session.request(
                method,
                f"{self._url}{API}{path}",
                params=params,
                json=body,
                headers={"Accept": "application/json"},
                timeout=self._timeout,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            raise RangerAdminError(
                f"url: no answer from Ranger Admin at {self._url} to {method} {API}{path} ({exc}); "
                "check the URL, that Admin runs, and validate_certs for HTTPS"
            ) from exc
        if reply.status_code == 401:
            raise RangerAdminError(
                f"admin_user: Ranger Admin answered 401 to {method} {API}{path} "
                f"({answer_reason(reply, REASON_CHARS)}); give a Ranger Admin user and its admin_password"
            )
        if reply.status_code not in ok:
            reason = answer_reason(reply, REASON_CHARS)
            raise RangerAdminError(
                f"Ranger Admin answered {reply.status_code} to {method} {API}{path}: {reason}"
            )
        return reply


def _segment(name: str) -> str:
    return quote(name, safe="")


def _principals(create: bool) -> dict[str, str] | None:
    """Ranger's createPrincipalsIfAbsent: Admin creates the users, groups and roles a policy names."""
    return {"createPrincipalsIfAbsent": "true"} if create else None


def _json(reply: requests.Response, method: str, path: str) -> Any:
    try:
        return reply.json()
    except ValueError as exc:
        raise RangerAdminError(f"Ranger Admin answered {method} {API}{path} with no JSON") from exc
