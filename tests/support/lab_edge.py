"""The lab's edge node as the e2e tests meet it: HAProxy on this machine's loopback and the
instances its sync follows in ZooKeeper, Knox's certificate and demo users, and the stand-in
Ranger Admin (lab/ranger_admin.py; no real Ranger Admin can run here) with the collection's
ranger_triton role registering a service and its policies there."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests
from apache_ranger.client.ranger_client import RangerClient
from kazoo.client import KazooClient

from tarn.haproxy.plan import AdminState
from tarn.haproxy.runtime import ServerState, parse_servers_state
from tests.support import ROOT
from tests.support.lab import podman_exec, wait_for, znodes
from tests.support.ranger_admin import USERS as RANGER_USERS

# ---- HAProxy

ZK_PATH = "/services/triton/instances"  # haproxy_sync_zk_path in inventories/lab
FRONTEND = "127.0.0.1:18000"  # tarn_lab_publish of the edge node
ACTIVATOR = "activator"  # the backup server's name in the haproxy role's haproxy.cfg


def _slots(backend: str) -> list[ServerState]:
    """The backend's servers as HAProxy's Runtime API shows them, the activator (its backup) left out."""
    show = f"echo 'show servers state {backend}' | socat - /var/run/haproxy.sock"
    text = podman_exec("edge", "sh", "-c", show, check=True, timeout=60).stdout
    return [s for s in parse_servers_state(text) if s.name != ACTIVATOR]


def backend_ready(backend: str = "triton_backend") -> set[str]:
    """ip:port of the backend slots HAProxy would send new requests to (admin READY).
    ``openai_backend``: the fronts'."""
    return {f"{s.addr}:{s.port}" for s in _slots(backend) if s.admin is AdminState.READY}


def backend_serving(backend: str = "triton_backend") -> set[str]:
    """The slots of `backend_ready` that HAProxy's health check also has up (srv_op_state 2)."""
    return {
        f"{s.addr}:{s.port}" for s in _slots(backend) if s.admin is AdminState.READY and s.operational == 2
    }


def backend_retries(backend: str = "triton_backend") -> tuple[int, int]:
    """HAProxy's counters of the backend since it started: (retries, redispatches): its `show
    stat` CSV, the BACKEND row's `wretr` and `wredis`."""
    show = "echo 'show stat' | socat - /var/run/haproxy.sock"
    text = podman_exec("edge", "sh", "-c", show, check=True, timeout=60).stdout
    header, *rows = [line for line in text.splitlines() if line.strip()]
    names = header.lstrip("# ").split(",")
    for row in rows:
        stat = dict(zip(names, row.split(","), strict=False))
        if stat.get("pxname") == backend and stat.get("svname") == "BACKEND":
            return int(stat.get("wretr") or 0), int(stat.get("wredis") or 0)
    raise AssertionError(f"no BACKEND row for {backend} in HAProxy's show stat")


class Registered:
    """The instances of ``service`` registered under ZK_PATH, as host:port."""

    def __init__(self, zk: KazooClient, service: str) -> None:
        self.zk = zk
        self.service = service

    def records(self) -> list[dict[str, Any]]:
        """The service's znodes, as their JSON."""
        found = [json.loads(data) for data, _stat in znodes(self.zk, ZK_PATH).values()]
        return [r for r in found if r.get("service") == self.service]

    def endpoints(self, port: str = "http_port") -> set[str]:
        """``port``: the znode's key, http_port (Triton's) or openai_port (the front's)."""
        return {f"{r['ip']}:{r[port]}" for r in self.records() if port in r}


# ---- Knox

CERT = Path(os.environ.get("TARN_BUILD", ROOT / "build")) / "lab" / "edge-knox.pem"  # fetched by the role
PASSWORDS = {"alice": "alice-password", "bob": "bob-password"}  # Knox's demo LDAP (inventories/lab)

# ---- the stand-in Ranger Admin

ADMIN_NODE, ADMIN_URL = "tarn-lab-edge", "http://edge:6080"
ADMIN_PASSWORD = secrets.token_urlsafe(12)
PLAYBOOK = """\
- name: Register TARN's service in the lab's Ranger Admin
  hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: tarn.yarn.ranger_triton
"""


class LabAdmin:
    """The stand-in Ranger Admin on the edge node."""

    url = ADMIN_URL

    def client(self) -> RangerClient:
        return RangerClient(ADMIN_URL, ("admin", ADMIN_PASSWORD))

    def get(self, path: str, **params: str) -> requests.Response:
        return requests.get(f"{ADMIN_URL}{path}", params=params, timeout=10)

    def start(self) -> None:
        podman_exec(
            ADMIN_NODE, "python3", "/opt/tarn-ranger/ranger_admin.py", "--port", "6080",
            "--users", "/opt/tarn-ranger/users.json", "--state", "/opt/tarn-ranger/state.json",
            env={"RANGER_ADMIN_PASSWORD": ADMIN_PASSWORD}, detach=True, check=True,
        )  # fmt: skip
        wait_for(self._answers, 30, "the stand-in Ranger Admin on the edge node", every=0.3)

    def stop(self) -> None:
        podman_exec(ADMIN_NODE, "pkill", "-f", "ranger_admin.py")
        wait_for(lambda: not self._answers(), 15, "the stand-in Ranger Admin to stop", every=0.3)

    def _answers(self) -> bool:
        try:
            return self.get("/service/public/v2/api/servicedef/name/triton").status_code in (401, 404, 200)
        except requests.ConnectionError:
            return False


def fresh_lab_admin(here: Path) -> LabAdmin:
    """The stand-in Admin started on the edge node with an empty state."""
    (here / "users.json").write_text(json.dumps(RANGER_USERS))
    podman_exec(ADMIN_NODE, "pkill", "-f", "ranger_admin.py")
    podman_exec(ADMIN_NODE, "rm", "-rf", "/opt/tarn-ranger")
    podman_exec(ADMIN_NODE, "mkdir", "-p", "/opt/tarn-ranger")
    for file in (ROOT / "lab" / "ranger_admin.py", here / "users.json"):
        subprocess.run(["podman", "cp", str(file), f"{ADMIN_NODE}:/opt/tarn-ranger/"], check=True)
    lab_admin = LabAdmin()
    lab_admin.start()
    return lab_admin


def register_with_the_role(here: Path, service: str, policies: list[dict[str, Any]]) -> int:
    """ansible-playbook with the ranger_triton role: the service def, ``service`` and ``policies``;
    the number of changed tasks (from the JSON callback: Molecule's environment colours the text)."""
    (here / "play.yml").write_text(PLAYBOOK)
    (here / "vars.json").write_text(json.dumps({
        "ranger_triton_admin_url": ADMIN_URL, "ranger_triton_admin_password": ADMIN_PASSWORD,
        "ranger_triton_service_name": service,
        "ranger_triton_policies": policies,
    }))  # fmt: skip
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,",
         "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"@{here / 'vars.json'}",
         str(here / "play.yml")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert ADMIN_PASSWORD not in done.stdout + done.stderr
    stats = json.loads(done.stdout)["stats"]["localhost"]
    assert stats["failures"] == 0, stats
    return int(stats["changed"])
