"""A fake Ranger Admin public API (tarn.ranger.registration.AdminApi) over memory, for the tests
of registering the triton service and of the module tarn.yarn.tarn_ranger.

It keeps what Ranger does that a client can tell: ids and versions it assigns, a password config
shown as "*****", the default policy "all - model" made with a service whose configs name a user,
the service's policyVersion moving with its policies, and a policy naming a user Admin does not
have refused (400) unless createPrincipalsIfAbsent. Every call is recorded, reads included.
"""

from __future__ import annotations

import copy
from typing import Any

from tarn.ranger.admin import RangerAdminError

Json = dict[str, Any]
USERS = ("admin", "alice", "bob", "carol", "tarn")
REFUSED = "Operation denied. User name: {} specified in policy does not exist in ranger admin."


class FakeAdmin:
    def __init__(self, users: tuple[str, ...] = USERS) -> None:
        self.users = set(users)
        self.service_defs: dict[str, Json] = {}
        self.services: dict[str, Json] = {}
        self.stored_policies: dict[int, Json] = {}
        self.calls: list[str] = []
        self._ids = 0

    @property
    def writes(self) -> list[str]:
        return [c for c in self.calls if not c.startswith("GET")]

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    # ---- service defs
    def service_def(self, name: str) -> Json | None:
        self.calls.append(f"GET servicedef {name}")
        found = self.service_defs.get(name)
        return copy.deepcopy(found) if found else None

    def create_service_def(self, sdef: Json) -> Json:
        self.calls.append(f"POST servicedef {sdef['name']}")
        stored = {**copy.deepcopy(sdef), "id": self._next_id(), "version": 1, "guid": "g"}
        self.service_defs[sdef["name"]] = stored
        return copy.deepcopy(stored)

    def update_service_def(self, name: str, sdef: Json) -> Json:
        self.calls.append(f"PUT servicedef {name}")
        old = self.service_defs[name]
        self.service_defs[name] = {**copy.deepcopy(sdef), "id": old["id"], "version": old["version"] + 1}
        return copy.deepcopy(self.service_defs[name])

    # ---- services
    def service(self, name: str) -> Json | None:
        self.calls.append(f"GET service {name}")
        found = self.services.get(name)
        if found is None:
            return None
        shown = copy.deepcopy(found)
        shown["configs"] = {k: "*****" if "password" in k else v for k, v in shown.get("configs", {}).items()}
        return shown

    def create_service(self, service: Json) -> Json:
        self.calls.append(f"POST service {service['name']}")
        stored = {**copy.deepcopy(service), "id": self._next_id(), "version": 1, "policyVersion": 1}
        stored.setdefault("configs", {})
        self.services[service["name"]] = stored
        user = stored["configs"].get("username")
        if user:  # Ranger's default policy for the configured user
            self._store_policy(
                {
                    "name": "all - model",
                    "service": service["name"],
                    "resources": {"model": {"values": ["*"]}},
                    "policyItems": [
                        {"users": [user], "accesses": [{"type": "infer"}], "delegateAdmin": True}
                    ],
                }
            )
        return copy.deepcopy(stored)

    def update_service(self, name: str, service: Json) -> Json:
        self.calls.append(f"PUT service {name}")
        old = self.services[name]
        configs = {
            k: old["configs"].get(k, v) if v == "*****" else v for k, v in service.get("configs", {}).items()
        }
        kept = {"id": old["id"], "version": old["version"] + 1, "policyVersion": old["policyVersion"]}
        self.services[name] = {**copy.deepcopy(service), "configs": configs, **kept}
        return copy.deepcopy(self.services[name])

    # ---- policies
    def policies(self, service: str) -> list[Json]:
        self.calls.append(f"GET policies {service}")
        return [copy.deepcopy(p) for p in self.stored_policies.values() if p["service"] == service]

    def create_policy(self, policy: Json, create_principals: bool = False) -> Json:
        self.calls.append(f"POST policy {policy['name']}")
        self._check_principals(policy, create_principals)
        return self._store_policy(policy)

    def update_policy(self, policy_id: int, policy: Json, create_principals: bool = False) -> Json:
        self.calls.append(f"PUT policy {policy['name']}")
        self._check_principals(policy, create_principals)
        old = self.stored_policies[policy_id]
        return self._store_policy(policy, policy_id, old["version"] + 1)

    def delete_policy(self, policy_id: int) -> None:
        policy = self.stored_policies.pop(policy_id)
        self.calls.append(f"DELETE policy {policy['name']}")
        self._bump(policy["service"])

    def _store_policy(self, policy: Json, policy_id: int | None = None, version: int = 1) -> Json:
        stored = copy.deepcopy(policy)
        stored.update(id=policy_id or self._next_id(), version=version, serviceType="triton")
        self.stored_policies[stored["id"]] = stored
        self._bump(stored["service"])
        return copy.deepcopy(stored)

    def _bump(self, service: str) -> None:
        self.services[service]["policyVersion"] += 1

    def _check_principals(self, policy: Json, create: bool) -> None:
        named = {
            user
            for key in ("policyItems", "denyPolicyItems", "allowExceptions", "denyExceptions")
            for item in policy.get(key) or []
            for user in item.get("users") or []
        }
        unknown = sorted(named - self.users)
        if unknown and not create:
            message = REFUSED.format(unknown[0])
            raise RangerAdminError(
                f"Ranger Admin answered 400 to POST /service/public/v2/api/policy: {message}"
            )
        self.users |= set(unknown)
