"""The role tarn.yarn.ranger_triton (module tarn.yarn.tarn_ranger) against the stand-in Ranger Admin.

Each test starts its own stand-in (lab/ranger_admin.py) on 127.0.0.1 with the lab's users (alice
in ml-team, bob in analysts, carol), runs ansible-playbook with a play that applies the role to
localhost (connection local, this venv's Python as the interpreter, the JSON callback), and reads
what Admin holds back with the apache-ranger client.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.ranger_admin import PASSWORD, SERVICE, Standin

ROOT = Path(__file__).resolve().parents[2]
COLLECTION = ROOT / "build" / "collections" / "ansible_collections" / "tarn" / "yarn"
PLAYBOOK = """\
- name: Register TARN's service in Ranger Admin
  hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: tarn.yarn.ranger_triton
"""
Json = dict[str, Any]


def policy(name: str, models: list[str], **fields: Any) -> Json:
    return {"name": name, "resources": {"model": {"values": models}}, **fields}


def item(accesses: list[str], users: Sequence[str] = (), groups: Sequence[str] = ()) -> Json:
    return {"users": list(users), "groups": list(groups), "accesses": [{"type": a} for a in accesses]}


# The scenario: alice may infer, list and read the metadata of add_*; bob may list linear_onnx
# only; bob is denied add_one, except its metadata; an OVERRIDE policy lets carol infer on add_sub
# and identity and takes inference on add_sub from alice.
POLICIES = [
    policy("alice-add", ["add_*"], policyItems=[item(["infer", "list", "metadata"], users=["alice"])]),
    policy("bob-linear", ["linear_onnx"], policyItems=[item(["list"], users=["bob"])]),
    policy(
        "bob-not-add-one",
        ["add_one"],
        denyPolicyItems=[item(["infer", "list", "metadata"], users=["bob"])],
        denyExceptions=[item(["metadata"], users=["bob"])],
    ),
    policy(
        "override",
        ["add_sub", "identity"],
        policyPriority=1,
        policyItems=[item(["infer", "list"], users=["carol"])],
        denyPolicyItems=[item(["infer"], users=["alice"])],
    ),
]


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str

    @property
    def output(self) -> Json:
        try:
            parsed: Json = json.loads(self.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"not the JSON callback's output:\n{self.stdout}\n{self.stderr}")
        return parsed

    @property
    def changed(self) -> int:
        count: int = self.output["stats"]["localhost"]["changed"]
        return count

    @property
    def result(self) -> Json:
        """The module task's result (the role's last task)."""
        task = self.output["plays"][0]["tasks"][-1]
        assert task["task"]["name"].endswith("service and policies in Ranger Admin"), task["task"]
        answer: Json = task["hosts"]["localhost"]
        return answer


@pytest.fixture(scope="module", autouse=True)
def collection() -> None:
    if not COLLECTION.exists():
        pytest.fail(f"{COLLECTION} is missing: run make deps", pytrace=False)


@pytest.fixture
def play(tmp_path: Path, ranger: Standin):
    """play(extra vars, *ansible-playbook flags) -> Run, against the test's stand-in."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    env = {
        **{k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_NOCOLOR": "1",
    }

    def run(variables: Json, *flags: str) -> Run:
        extra = tmp_path / "vars.json"
        base = {"ranger_triton_admin_url": ranger.url, "ranger_triton_admin_password": PASSWORD}
        extra.write_text(json.dumps({**base, **variables}))
        command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,"]
        command += ["-e", f"ansible_python_interpreter={sys.executable}", "-e", f"@{extra}", *flags]
        done = subprocess.run(
            [*command, str(playbook)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert PASSWORD not in done.stdout + done.stderr, "the admin password must never be shown"
        return Run(done.returncode, done.stdout, done.stderr)

    return run


def versions(ranger: Standin) -> dict[str, tuple[int, int]]:
    return {p.name: (p.id, p.version) for p in ranger.client().get_policies_in_service(SERVICE)}


def test_the_role_registers_the_def_the_service_and_the_policies_then_changes_nothing(
    ranger: Standin, play: Any
) -> None:
    first = play({"ranger_triton_policies": POLICIES})
    assert first.rc == 0, first.stdout + first.stderr
    assert first.changed == 1
    assert first.result["actions"] == [
        "create service def triton",
        f"create service {SERVICE}",
        *[f"create policy {p['name']}" for p in POLICIES],
    ]

    client = ranger.client()
    sdef = client.get_service_def("triton")
    assert sdef is not None
    assert [a["name"] for a in sdef.accessTypes] == ["infer", "metadata", "list"]
    assert [r["name"] for r in sdef.resources] == ["model"]
    service = client.get_service(SERVICE)
    assert (service.type, service.isEnabled) == ("triton", True)
    stored = {p.name: p for p in client.get_policies_in_service(SERVICE)}
    assert list(stored) == [p["name"] for p in POLICIES]
    assert stored["alice-add"].resources == {
        "model": {"values": ["add_*"], "isExcludes": False, "isRecursive": False}
    }
    assert [a["type"] for a in stored["alice-add"].policyItems[0]["accesses"]] == [
        "infer",
        "list",
        "metadata",
    ]
    assert stored["bob-linear"].policyItems[0]["users"] == ["bob"]
    deny = stored["bob-not-add-one"]
    assert (deny.denyPolicyItems[0]["users"], deny.denyExceptions[0]["users"]) == (["bob"], ["bob"])
    assert [a["type"] for a in deny.denyExceptions[0]["accesses"]] == ["metadata"]
    assert not deny.policyItems
    assert (stored["override"].policyPriority, stored["bob-linear"].policyPriority) == (1, 0)
    assert first.result["policies"] == [
        {"name": p.name, "id": p.id, "version": 1, "action": "create"} for p in stored.values()
    ]

    before = versions(ranger)
    second = play({"ranger_triton_policies": POLICIES})
    assert second.rc == 0, second.stdout + second.stderr
    assert second.changed == 0, second.result["actions"]
    assert second.result["actions"] == []
    assert [p["action"] for p in second.result["policies"]] == ["keep"] * len(POLICIES)
    assert versions(ranger) == before
    assert client.get_service_def("triton").version == 1


def test_a_changed_policy_variable_updates_that_policy_only(ranger: Standin, play: Any) -> None:
    assert play({"ranger_triton_policies": POLICIES}).changed == 1
    client = ranger.client()
    before, policy_version = versions(ranger), client.get_service(SERVICE).policyVersion

    changed = copy.deepcopy(POLICIES)
    changed[1]["resources"]["model"]["values"].append("identity")  # bob-linear: bob may list identity too
    run = play({"ranger_triton_policies": changed}, "--diff")
    assert run.rc == 0, run.stdout + run.stderr
    assert run.changed == 1
    assert run.result["actions"] == ["update policy bob-linear (resources)"]
    after = versions(ranger)
    assert after["bob-linear"] == (before["bob-linear"][0], before["bob-linear"][1] + 1), (
        "same id, next version"
    )
    assert {k: v for k, v in after.items() if k != "bob-linear"} == {
        k: v for k, v in before.items() if k != "bob-linear"
    }
    assert client.get_service(SERVICE).policyVersion == policy_version + 1
    assert client.get_policy(SERVICE, "bob-linear").resources["model"]["values"] == [
        "linear_onnx",
        "identity",
    ]

    diff = run.result["diff"]
    assert diff["before"]["policies"]["bob-linear"]["resources"]["model"]["values"] == ["linear_onnx"]
    assert diff["after"]["policies"]["bob-linear"]["resources"]["model"]["values"] == [
        "linear_onnx",
        "identity",
    ]
    unchanged = [k for k in ("service_def", "service") if diff["before"][k] == diff["after"][k]]
    assert unchanged == ["service_def", "service"], "the diff shows real differences only"
    assert [
        n for n in diff["after"]["policies"] if diff["before"]["policies"][n] != diff["after"]["policies"][n]
    ] == ["bob-linear"]

    again = play({"ranger_triton_policies": changed}, "--diff")
    assert (again.rc, again.changed, again.result["actions"]) == (0, 0, [])
    assert versions(ranger) == after


def test_check_mode_on_a_fresh_admin_reports_the_changes_and_makes_none(ranger: Standin, play: Any) -> None:
    run = play({"ranger_triton_policies": POLICIES}, "--check", "--diff")
    assert run.rc == 0, run.stdout + run.stderr
    assert run.changed == 1
    assert len(run.result["actions"]) == 2 + len(POLICIES)
    assert run.result["diff"]["before"] == {"service_def": {}, "service": {}, "policies": {}}
    assert list(run.result["diff"]["after"]["policies"]) == [p["name"] for p in POLICIES]
    client = ranger.client()
    assert client.get_service_def("triton") is None
    assert client.get_service(SERVICE) is None

    # A change in check mode, once registered: reported, not made.
    assert play({"ranger_triton_policies": POLICIES}).changed == 1
    before = versions(ranger)
    fewer = copy.deepcopy(POLICIES)
    fewer[0]["policyItems"][0]["accesses"].pop()  # alice: no metadata
    checked = play({"ranger_triton_policies": fewer}, "--check")
    assert (checked.changed, checked.result["actions"]) == (1, ["update policy alice-add (policyItems)"])
    assert versions(ranger) == before


def test_an_unknown_principal_fails_naming_it_and_the_option(ranger: Standin, play: Any) -> None:
    mallory = [*POLICIES, policy("mallory-all", ["*"], policyItems=[item(["list"], users=["mallory"])])]
    run = play({"ranger_triton_policies": mallory})
    assert run.rc != 0
    result = run.result
    assert result["failed"] is True
    assert "policy 'mallory-all' names the user 'mallory'" in result["msg"]
    assert "create_principals_if_absent" in result["msg"]
    assert "ranger_triton_create_principals_if_absent" in result["msg"]
    assert result["actions"][-1] == "create policy override", "what was done before the failure"
    assert ranger.client().get_policy(SERVICE, "mallory-all") is None

    allowed = play({"ranger_triton_policies": mallory, "ranger_triton_create_principals_if_absent": True})
    assert allowed.rc == 0, allowed.stdout + allowed.stderr
    assert allowed.result["actions"] == ["create policy mallory-all"]
    assert ranger.client().get_policy(SERVICE, "mallory-all").policyItems[0]["users"] == ["mallory"]
    assert play({"ranger_triton_policies": mallory}).changed == 0, "mallory exists now"


def test_ranger_s_default_policy_is_kept_unless_purged(ranger: Standin, play: Any) -> None:
    variables = {
        "ranger_triton_policies": POLICIES[:1],
        "ranger_triton_service_configs": {"username": "tarn"},
    }
    assert play(variables).changed == 1
    assert sorted(versions(ranger)) == ["alice-add", "all - model"], "Ranger made its default policy"
    assert play(variables).changed == 0
    purged = play({**variables, "ranger_triton_purge_policies": True})
    assert purged.result["actions"] == ["delete policy all - model"]
    assert sorted(versions(ranger)) == ["alice-add"]
    assert play({**variables, "ranger_triton_purge_policies": True}).changed == 0
