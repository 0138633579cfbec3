"""A TARN service on the lab, as the e2e tests drive it: the ``tarn`` CLI and the tarn.yarn modules
(through ansible-playbook) against the lab's RM and WebHDFS, the example models, the instances YARN
reports READY, and the service's controller API (found with tarn.service.controller_url)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

from lab import lab_client
from tarn.cli import instances_of
from tarn.clients.resourcemanager import ResourceManager
from tarn.service import controller_url
from tarn.spec import CONTROLLER, component_of
from tests.support import ROOT
from tests.support.lab import LAB_USER, WORKERS, podman_exec

MODELS = ROOT / "examples" / "model_repository"
# A secure lab: this process and the CLI it runs take the lab's Kerberos and TLS settings.
lab_client.use_lab()
CLUSTER = lab_client.cluster_args()
# The tarn.yarn modules' connection to the lab (module_defaults for group/tarn.yarn.tarn).
CONNECTION: dict[str, Any] = {
    "rm_url": [lab_client.RM_URL],
    "webhdfs_url": lab_client.webhdfs_url(),
    "user": LAB_USER,
    **(
        {"principal": lab_client.USER_PRINCIPAL, "keytab": str(lab_client.USER_KEYTAB)}
        if lab_client.secure()
        else {}
    ),
}


def tarn(
    *args: str, token: str | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The ``tarn`` CLI of this checkout; ``token`` goes as one word (a random token may start with
    "-"), ``env`` over this process's environment."""
    flags = [f"--token={token}"] if token else []
    return subprocess.run(
        [sys.executable, "-m", "tarn", *args, *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def run_module(module: str, args: dict[str, Any], *flags: str) -> dict[str, Any]:
    """Run one tarn.yarn module through ansible-playbook; its registered result."""
    playbook = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "module_defaults": {"group/tarn.yarn.tarn": CONNECTION},
            "tasks": [
                {"name": "module", f"tarn.yarn.{module}": args, "register": "out", "ignore_errors": True},
                {
                    "name": "result",
                    "ansible.builtin.copy": {"content": "{{ out | to_json }}", "dest": "{{ result_file }}"},
                    "check_mode": False,
                },
            ],
        }
    ]
    work = Path(tempfile.mkdtemp(prefix="tarn-mod-"))
    (work / "play.yml").write_text(json.dumps(playbook))
    done = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}",
         "-e", f"result_file={work / 'result.json'}", str(work / "play.yml"), *flags],
        capture_output=True, text=True, timeout=900, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads((work / "result.json").read_text())
    assert not result.get("failed"), f"tarn.yarn.{module} failed: {result.get('msg')}"
    return result


def run_playbook(playbook: str, extra: dict[str, Any]) -> str:
    """Run one of the collection's playbooks (``playbooks/<playbook>``) on localhost with ``extra``
    as its variables; its output (it must succeed)."""
    work = Path(tempfile.mkdtemp(prefix="tarn-play-"))
    (work / "vars.json").write_text(json.dumps(extra))
    done = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", f"@{work / 'vars.json'}",
         str(ROOT / "playbooks" / playbook)],
        capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return done.stdout


def serves(row: dict[str, Any], port: int) -> None:
    """The instance of ``row`` (its host) infers both example models on ``port`` (examples/client.py)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "client.py"), "--url", f"{row['host']}:{port}",
         "--protocol", "http", "--wait", "60"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{row['host']}:{port}: {done.stdout}{done.stderr}"


def ready_instances(rm: ResourceManager, name: str, count: int) -> list[dict[str, Any]] | None:
    service = rm.service(name)
    rows = [r for r in instances_of(service or {}) if r["state"] == "READY"]
    return rows if len(rows) == count else None


def models_on_every_worker(local: str) -> None:
    """examples/model_repository at ``local`` on each worker, readable by the YARN user."""
    for worker in WORKERS:
        podman_exec(worker, "rm", "-rf", local, check=True)
        subprocess.run(["podman", "cp", str(MODELS), f"{worker}:{local}"], check=True)
        podman_exec(worker, "chmod", "-R", "a+rX", local, check=True)


class Service:
    """A TARN service of the lab, seen through its controller's API."""

    def __init__(self, rm: ResourceManager, token: str, name: str) -> None:
        self.rm, self.token, self.name = rm, token, name

    @property
    def url(self) -> str:
        url = controller_url(self.rm.service(self.name) or {})
        if url is None:
            raise requests.ConnectionError("no controller container yet")
        return url

    def get(self, path: str, user: str | None = None, **params: str) -> requests.Response:
        headers = {"X-TARN-Token": self.token, **({"X-TARN-User": user} if user else {})}
        return requests.get(f"{self.url}{path}", params=params, headers=headers, timeout=10)

    def post(self, path: str) -> requests.Response:
        return requests.post(f"{self.url}{path}", headers={"X-TARN-Token": self.token}, timeout=60)

    def delete(self, path: str) -> requests.Response:
        return requests.delete(f"{self.url}{path}", headers={"X-TARN-Token": self.token}, timeout=10)

    def authorize(self, user: str, model: str, action: str) -> bool:
        reply = self.get("/authorize", model=model, action=action, user=user)
        assert reply.status_code == 200, reply.text
        return reply.text == "true"

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        """Each sample called ``name`` in the controller's /metrics: its labels and its value."""
        families = text_string_to_metric_families(self.get("/metrics").text)
        return [(s.labels, s.value) for f in families for s in f.samples if s.name == name]

    def metric(self, name: str, absent: float | None = None, **labels: str) -> float:
        """``name`` summed over its samples whose labels include ``labels``; not in /metrics at all:
        ``absent``, or an error when None."""
        found = self.samples(name)
        if not found:
            if absent is not None:
                return absent
            raise AssertionError(f"{name} not in /metrics")
        return sum(value for have, value in found if labels.items() <= have.items())


def ready_controller(rm: ResourceManager, service: str) -> str | None:
    """The controller's container id while YARN reports it READY."""
    component = component_of(rm.service(service) or {}, CONTROLLER) or {}
    ready = [c["id"] for c in component.get("containers", []) if c.get("state") == "READY"]
    return ready[0] if ready else None
