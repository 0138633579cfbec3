"""lab/ranger_admin.py, the stand-in for Ranger Admin 2.8.0, driven as TARN and Ranger drive it.

The admin API goes through the real ``apache-ranger`` client (PyPI, the one TARN's Ansible role
uses); the plugin protocol is plain HTTP, as RangerAdminRESTClient sends it: the query parameters
it sets, the answers it parses (200 JSON, 304 empty, 404 whose body names a missing service).
Each test starts its own stand-in on 127.0.0.1 (port 0), with the lab's users.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import requests
from apache_ranger.exceptions import RangerServiceException

from tests.support.ranger_admin import PASSWORD, SERVICE, STANDIN, Standin, service_def, start, stop

Json = dict[str, Any]


def allow(
    name: str, models: list[str], accesses: list[str], users: Sequence[str] = (), groups: Sequence[str] = ()
) -> Json:
    return {
        "service": SERVICE,
        "name": name,
        "resources": {"model": {"values": models}},
        "policyItems": [
            {"accesses": [{"type": a} for a in accesses], "users": list(users), "groups": list(groups)}
        ],
    }


def refusal(call: Any, *args: Any) -> RangerServiceException:
    with pytest.raises(RangerServiceException) as raised:
        call(*args)
    return raised.value


# --- service defs -------------------------------------------------------------------------------


def test_a_service_def_without_item_ids_is_refused_as_ranger_does(ranger: Standin) -> None:
    sdef = service_def()
    for key in ("resources", "accessTypes"):
        for item in sdef[key]:
            del item["itemId"]
    error = refusal(ranger.client().create_service_def, sdef)
    assert error.statusCode == 400
    assert "reason[access type itemId[null] is null/empty], field[access type itemId]" in error.msgDesc
    assert (
        "reason[resource itemId[null] is null/empty], field[resource itemId], subfield[null]" in error.msgDesc
    )


def test_the_service_def_reads_back_as_ranger_stores_it(ranger: Standin) -> None:
    client = ranger.client()
    created = client.create_service_def(service_def())
    assert created.id != 1001, "Ranger ignores the id of a service def it creates"
    by_name, by_id = client.get_service_def("triton"), client.get_service_def_by_id(created.id)
    assert by_name == by_id == created
    assert (created.name, created.displayName) == ("triton", "triton")
    assert (created.version, created.isEnabled) == (1, True)
    (model,) = created.resources
    assert "parent" not in model, 'a parent "" is no parent'
    assert model["matcherOptions"] == {"wildCard": "true", "ignoreCase": "true"}, "Map<String, String>"
    assert (model["isValidLeaf"], model["excludesSupported"], model["level"]) == (True, False, 1)
    assert [a["name"] for a in created.accessTypes] == ["infer", "metadata", "list"]
    raw = ranger.admin_get("/servicedef/name/triton")
    assert created == {k: v for k, v in raw.items() if k != "markerAccessTypes"}
    markers = {m["name"]: m for m in raw["markerAccessTypes"]}
    assert list(markers) == ["_CREATE", "_READ", "_UPDATE", "_DELETE", "_MANAGE", "_ALL"]
    assert markers["_ALL"]["impliedGrants"] == ["infer", "list", "metadata"]
    assert markers["_CREATE"]["itemId"] == 4
    assert "impliedGrants" not in markers["_CREATE"]
    assert [c["name"] for c in created.policyConditions] == ["_expression"]
    assert created.dataMaskDef == {}
    assert created.rowFilterDef == {}

    changed = {**service_def(), "description": "Triton models, v2"}
    updated = client.update_service_def("triton", changed)
    assert (updated.id, updated.version, updated.description) == (created.id, 2, "Triton models, v2")
    error = refusal(client.update_service_def_by_id, created.id, changed)
    assert (error.statusCode, error.msgDesc) == (400, "serviceDef id mismatch"), "the file's id is 1001"
    del changed["id"]
    assert client.update_service_def_by_id(created.id, changed).version == 3
    assert client.get_service_def("nope") is None  # 404: the client answers None


# --- services and policies -----------------------------------------------------------------------


def test_services_and_policies_round_trip_through_the_real_client(triton: Standin) -> None:
    client = triton.client()
    service = client.get_service(SERVICE)
    assert (service.type, service.displayName) == ("triton", SERVICE)
    assert (service.policyVersion, service.version) == (1, 1)
    assert client.get_policies_in_service(SERVICE) == [], "no default policy: no user in the configs"

    infer = client.create_policy(allow("resnet-infer", ["resnet*"], ["infer"], users=["alice"]))
    meta = client.create_policy(allow("analysts-metadata", ["*"], ["metadata", "LIST"], groups=["analysts"]))
    assert (infer.id, meta.id, infer.version, infer.serviceType, infer.policyType) == (1, 2, 1, "triton", 0)
    assert infer.resources == {"model": {"values": ["resnet*"], "isExcludes": False, "isRecursive": False}}
    assert [a["type"] for a in meta.policyItems[0]["accesses"]] == ["metadata", "list"], "the def's spelling"
    assert len(infer.resourceSignature) == 64
    assert infer.guid
    assert infer.createdBy == "Admin"
    assert client.get_policy_by_id(infer.id) == infer
    assert client.get_policy(SERVICE, "analysts-metadata") == meta
    assert [p.name for p in client.get_policies_in_service(SERVICE)] == ["resnet-infer", "analysts-metadata"]
    assert client.get_service(SERVICE).policyVersion == 3

    wider = allow("resnet-infer", ["resnet*", "bert"], ["infer", "metadata"], users=["alice", "bob"])
    updated = client.update_policy_by_id(infer.id, wider)
    assert (updated.id, updated.version) == (infer.id, 2)
    assert (updated.guid, updated.createTime) == (infer.guid, infer.createTime)
    assert updated.resourceSignature != infer.resourceSignature
    assert client.update_policy(SERVICE, "resnet-infer", {**wider, "description": "by name"}).version == 3

    client.delete_policy(SERVICE, "analysts-metadata")
    client.delete_policy_by_id(infer.id)
    assert client.get_policies_in_service(SERVICE) == []
    assert client.get_policy(SERVICE, "resnet-infer") is None  # 404
    assert refusal(client.get_policy_by_id, infer.id).statusCode == 400, "a missing id is read()'s 400"
    assert client.get_service(SERVICE).policyVersion == 7


def test_a_service_update_moves_the_policy_version_when_plugins_see_the_change(triton: Standin) -> None:
    client = triton.client()
    service_id = client.get_service(SERVICE).id
    described = client.update_service(SERVICE, {"name": SERVICE, "type": "triton", "description": "prod"})
    assert (described.version, described.description, described.policyVersion) == (2, "prod", 1)
    cache = {"ranger.plugin.triton.policy.cache.dir": "/var/cache"}
    configs = {**cache, "password": PASSWORD}
    configured = client.update_service_by_id(
        service_id, {"name": SERVICE, "type": "triton", "configs": configs}
    )
    assert configured.policyVersion == 2
    assert configured.configs["password"] == "*****"  # noqa: S105 - Ranger's mask
    assert triton.download(1).json()["serviceConfig"] == cache
    disabled = client.update_service(SERVICE, {"name": SERVICE, "type": "triton", "isEnabled": False})
    assert (disabled.isEnabled, disabled.policyVersion) == (False, 3)
    assert triton.download(-1).status_code == 400, "ServiceUtil: a disabled service is refused"


def test_policies_are_validated_as_ranger_validates_them(triton: Standin) -> None:
    client = triton.client()
    client.create_policy(allow("resnet", ["resnet"], ["infer"], users=["alice"]))
    cases = {
        "Operation denied. User name: mallory specified in policy does not exist in ranger admin.": allow(
            "mallory", ["m"], ["infer"], users=["mallory"]
        ),
        "Invalid access type: access type=[delete], valid access types=[": allow(
            "x", ["x"], ["delete"], ["alice"]
        ),
        "Another policy already exists for matching resource: policy-name=[resnet]": allow(
            "again", ["resnet"], ["metadata"], users=["bob"]
        ),
        "Another policy already exists for this name": allow("resnet", ["other"], ["infer"], ["alice"]),
        "can specify values for the following resources: [[model]]": {
            **allow("table", ["t"], ["infer"], ["alice"]),
            "resources": {"table": {"values": ["t"]}},
        },
        "no service found with name[triton_dev]": {
            **allow("dev", ["d"], ["infer"], ["alice"]),
            "service": "triton_dev",
        },
        "All of users,  user-groups and roles collections on the policy item were null/empty": allow(
            "nobody", ["n"], ["infer"]
        ),
    }
    for message, policy in cases.items():
        error = refusal(client.create_policy, policy)
        assert (error.statusCode, message in str(error.msgDesc)) == (400, True), (message, error.msgDesc)

    created = client.create_policy(
        allow("mallory", ["m"], ["infer"], users=["mallory"]), {"createPrincipalsIfAbsent": "true"}
    )
    assert created.policyItems[0]["users"] == ["mallory"]
    store = triton.get(f"/service/xusers/download/{SERVICE}", lastKnownUserStoreVersion="1").json()
    assert (store["userStoreVersion"], store["userAttrMapping"]["mallory"]) == (2, {"_isInternal": "false"})


def test_a_service_with_a_user_gets_ranger_s_default_policy(ranger: Standin) -> None:
    client = ranger.client()
    client.create_service_def(service_def())
    created = client.create_service({"name": SERVICE, "type": "triton", "configs": {"username": "triton"}})
    assert created.policyVersion == 1, "the answer is read before the default policy is made"
    (policy,) = client.get_policies_in_service(SERVICE)
    assert (policy.name, policy.description) == ("all - model", "Policy for all - model")
    assert policy.resources == {"model": {"values": ["*"], "isExcludes": False, "isRecursive": False}}
    (item,) = policy.policyItems
    assert (item["users"], item["delegateAdmin"]) == (["triton"], True)
    assert [a["type"] for a in item["accesses"]] == ["infer", "metadata", "list"]
    assert client.get_service(SERVICE).policyVersion == 2


# --- the plugin protocol -------------------------------------------------------------------------


def test_policy_download_is_ranger_s_service_policies_and_304_when_unchanged(triton: Standin) -> None:
    client = triton.client()
    policy = client.create_policy(allow("resnet", ["resnet*"], ["infer"], users=["alice"]))
    client.create_policy({**allow("off", ["off"], ["infer"], users=["bob"]), "isEnabled": False})

    first = triton.download(-1)
    assert (first.status_code, first.headers["Content-Type"]) == (200, "application/json")
    body = first.json()
    fields = ["serviceName", "serviceId", "policyVersion", "policyUpdateTime", "policies", "serviceDef"]
    assert list(body) == [*fields, "auditMode"], "ServicePolicies' fields, in order, none empty"
    assert (body["serviceName"], body["serviceId"], body["policyVersion"]) == (SERVICE, 1, 3)
    assert isinstance(body["policyUpdateTime"], int), "a java.util.Date is epoch milliseconds"
    assert [p["name"] for p in body["policies"]] == ["resnet"], "a disabled policy is not sent"
    assert body["policies"][0] == client.get_policy_by_id(policy.id)
    assert body["serviceDef"] == triton.admin_get("/servicedef/name/triton")
    assert body["auditMode"] == "audit-default"

    unchanged = triton.download(3)
    assert (unchanged.status_code, unchanged.content, "Content-Type" in unchanged.headers) == (
        304,
        b"",
        False,
    )

    client.update_policy_by_id(
        policy.id, allow("resnet", ["resnet*"], ["infer", "metadata"], users=["alice"])
    )
    after = triton.download(3)
    assert after.status_code == 200
    assert after.json()["policyVersion"] == 4
    assert [a["type"] for a in after.json()["policies"][0]["policyItems"][0]["accesses"]] == [
        "infer",
        "metadata",
    ]
    assert triton.download(4).status_code == 304
    assert triton.download(-1, lastActivationTime="1700000000000").json()["policyVersion"] == 4


def test_a_disabled_policy_goes_to_a_delta_capable_plugin_that_knows_a_version(triton: Standin) -> None:
    client = triton.client()
    client.create_policy({**allow("off", ["off"], ["infer"], users=["bob"]), "isEnabled": False})
    assert "policies" not in triton.download(-1, supportsPolicyDeltas="true").json()
    assert [p["name"] for p in triton.download(1, supportsPolicyDeltas="true").json()["policies"]] == ["off"]


def test_a_download_for_an_unknown_service_is_a_404_the_plugin_ignores(triton: Standin) -> None:
    answer = triton.download(-1, service="triton_dev")
    assert answer.status_code == 404
    body = answer.json()
    assert body["statusCode"] == 404
    assert '"RANGER_ERROR_SERVICE_NOT_FOUND: ServiceName=triton_dev"' in body["msgDesc"]
    # RangerServiceNotFoundException.throwExceptionIfServiceNotFound: the body must start with it.
    assert not answer.text.startswith('"RANGER_ERROR_SERVICE_NOT_FOUND')
    assert triton.download(-1, service="triton_prod", lastKnownVersion="x").status_code == 404, (
        "Jersey: bad Long"
    )


def test_roles_download_carries_every_role_and_304_when_unchanged(triton: Standin) -> None:
    client = triton.client()
    path = f"/service/roles/download/{SERVICE}"
    empty = triton.get(path, lastKnownRoleVersion="-1", pluginId="triton@host-triton_prod")
    assert empty.status_code == 200
    assert empty.json() == {
        "serviceName": SERVICE,
        "roleVersion": 1,
        "roleUpdateTime": empty.json()["roleUpdateTime"],
    }
    assert triton.get(path, lastKnownRoleVersion="1").status_code == 304

    role = client.create_role(
        SERVICE, {"name": "ml-readers", "users": [{"name": "alice"}], "groups": [{"name": "analysts"}]}
    )
    assert (role.name, role.version, role.users) == ("ml-readers", 1, [{"name": "alice", "isAdmin": False}])
    assert client.get_role_by_id(role.id) == role == client.get_role("ml-readers", "admin", SERVICE)
    assert client.get_all_role_names("admin", SERVICE) == ["ml-readers"]
    roles = triton.get(path, lastKnownRoleVersion="1").json()
    assert roles["roleVersion"] == 2
    assert roles["rangerRoles"] == [role]
    assert triton.get(path, lastKnownRoleVersion="2").status_code == 304

    policy = client.create_policy({**allow("by-role", ["bert"], ["infer"]), "policyItems": [
        {"accesses": [{"type": "infer"}], "roles": ["ml-readers"]}]})  # fmt: skip
    version = client.get_service(SERVICE).policyVersion
    client.update_role(role.id, {"name": "ml-readers", "users": [{"name": "alice"}, {"name": "carol"}]})
    assert triton.get(path, lastKnownRoleVersion="2").json()["roleVersion"] == 3
    assert client.get_service(SERVICE).policyVersion == version + 1, "policies naming the role move too"
    error = refusal(client.delete_role_by_id, role.id)
    assert "can not be deleted as it is referenced in one or more policies" in error.msgDesc
    client.delete_policy_by_id(policy.id)
    client.delete_role_by_id(role.id)
    assert triton.get(path, lastKnownRoleVersion="3").json()["roleVersion"] == 4
    error = refusal(client.create_role, SERVICE, {"name": "r", "users": [{"name": "mallory"}]})
    assert error.msgDesc == "user with name: mallory does not exist "


def test_user_store_download_has_the_lab_users_and_304_when_unchanged(triton: Standin) -> None:
    path = f"/service/xusers/download/{SERVICE}"
    answer = triton.get(path, lastKnownUserStoreVersion="-1", pluginId="triton@host-triton_prod")
    assert answer.status_code == 200
    store = answer.json()
    assert store["userStoreVersion"] == 1
    assert isinstance(store["userStoreUpdateTime"], int)
    assert store["userGroupMapping"] == {"alice": ["ml-team"], "bob": ["analysts"]}
    assert store["userAttrMapping"]["carol"] == {"_isInternal": "false"}
    assert store["userAttrMapping"]["admin"] == {"_isInternal": "true"}
    assert store["groupAttrMapping"]["analysts"] == {"dept": "bi", "_isInternal": "false"}
    assert store["groupAttrMapping"]["public"] == {"_isInternal": "true"}
    assert "userCloudIdMapping" not in store, "empty maps are not sent"
    assert triton.get(path, lastKnownUserStoreVersion="1").status_code == 304


# --- authentication, errors, persistence -----------------------------------------------------------


def test_the_admin_api_needs_basic_auth_and_the_downloads_do_not(triton: Standin) -> None:
    api = f"{triton.url}/service/public/v2/api/service/name/{SERVICE}"
    for auth in (None, ("admin", "wrong"), ("alice", PASSWORD)):
        answer = requests.get(api, auth=auth, timeout=10)
        assert (answer.status_code, answer.json()) == (
            401,
            {"statusCode": 401, "msgDesc": "Authentication Failed"},
        )
    assert requests.get(api, auth=("admin", PASSWORD), timeout=10).status_code == 200
    assert triton.download(-1).status_code == 200


def test_anything_else_is_a_json_404(triton: Standin) -> None:
    for path in (
        "/",
        "/service/plugins/secure/policies/download/triton_prod",
        "/service/public/v2/api/zones",
    ):
        answer = requests.get(f"{triton.url}{path}", auth=("admin", PASSWORD), timeout=10)
        assert (answer.status_code, answer.json()["statusCode"]) == (404, 404), path
    answer = requests.post(f"{triton.url}/service/plugins/policies/download/{SERVICE}", json={}, timeout=10)
    assert answer.status_code == 405


def test_the_state_survives_a_restart(tmp_path: Path, triton: Standin) -> None:
    client = triton.client()
    policy = client.create_policy(allow("resnet", ["resnet*"], ["infer"], users=["alice"]))
    client.create_role(SERVICE, {"name": "ml-readers", "users": [{"name": "alice"}]})
    stop(triton)
    again = start(tmp_path, triton.state)
    try:
        assert again.client().get_policy_by_id(policy.id) == policy
        assert again.download(-1).json()["policyVersion"] == 2
        assert (
            again.get(f"/service/roles/download/{SERVICE}", lastKnownRoleVersion="-1").json()["roleVersion"]
            == 2
        )
        second = again.client().create_policy(allow("bert", ["bert"], ["infer"], users=["bob"]))
        assert second.id == policy.id + 1
    finally:
        stop(again)


def test_the_stand_in_is_standard_library_only() -> None:
    imports = [line for line in STANDIN.read_text().splitlines() if line.startswith(("import ", "from "))]
    modules = {line.split()[1].split(".")[0] for line in imports}
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules
