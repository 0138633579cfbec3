"""YARN's Docker runtime on the lab (issue 34): the LinuxContainerExecutor, the lab's container-executor
stand-in, a Docker engine on each worker and the lab's Triton image (TARN_LAB_DOCKER=true). Collected
on such a lab only (conftest deselects them elsewhere); the rest of the suite runs its services
there in Docker too (lab_client.runtime_args).

- Each instance of a service is the Docker container YARN named after its container id, running
  the lab's image, with tritonserver inside it running as the user YARN runs containers as (the
  submitting user on the secure lab, the non-secure local user otherwise), and it infers.
- YARN's stop reaches TARN: the launcher is the container's PID 1 (the launch command execs it;
  a shell there would drop SIGTERM), so a destroyed service's containers end on YARN's SIGTERM
  before the NodeManager's SIGKILL (10 s later), none with exit 137 (1-5 s here; 11 s, all 137,
  before the fix).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.service.wait import containers
from tarn.spec import CONTROLLER, container_host
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support.lab import LAB_MASTER, LAB_USER, podman_exec, wait_for
from tests.support.lab_service import CLUSTER, MODELS, ready_instances, serves, tarn

pytestmark = pytest.mark.docker_lab

SERVICE = "tarn-e2e-docker"
PORT = 8720
MODELS_ON_HDFS = f"/user/{LAB_USER}/e2e-docker-models"
CACHE = "/var/lib/tarn/model-cache"  # the yarn_nodemanager role's node cache
ZK_PATH = "/services/tarn-e2e-docker/instances"  # not the edge's: HAProxy leaves these alone
NM_LOG = "/var/log/hadoop/nodemanager/nodemanager.log"
# The NodeManager's SIGKILL after its SIGTERM (yarn_nodemanager_sigkill_delay_ms, the lab's default)
SIGKILL_DELAY_S = 10


@pytest.fixture(scope="module")
def instances(rm: ResourceManager, hdfs: WebHdfsClient) -> Iterator[list[dict[str, Any]]]:
    tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER)
    hdfs.upload_tree(MODELS, MODELS_ON_HDFS)
    try:
        done = tarn(
            "submit", "--service-name", SERVICE, "--user", LAB_USER, *lab_client.runtime_args(),
            "--model-repository", f"hdfs://{MODELS_ON_HDFS}", "--model-cache-dir", CACHE,
            "--port", str(PORT), "--grpc-port", str(PORT + 1), "--metrics-port", str(PORT + 2),
            "--am-port", str(PORT + 3), "--min-instances", "2", "--max-instances", "2",
            "--gpus-per-instance", "1", "--memory-mb", "768", "--vcores", "1",
            "--controller-memory-mb", "512",
            "--zk-ensemble", f"{LAB_MASTER}:2181", "--zk-path", ZK_PATH, *CLUSTER,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        yield wait_for(lambda: ready_instances(rm, SERVICE, 2), 300, f"2 ready instances of {SERVICE}")
    finally:
        tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER)
        hdfs.delete(MODELS_ON_HDFS, recursive=True)


def container_user() -> str:
    """Who YARN's LinuxContainerExecutor runs containers as (inventories/lab)."""
    return LAB_USER if lab_client.secure() else "nobody"


def docker(worker: str, *args: str) -> str:
    done = podman_exec(worker, "docker", *args)
    assert done.returncode == 0, f"docker {' '.join(args)} on {worker}: {done.stderr}"
    return done.stdout


def test_each_instance_is_the_docker_container_yarn_named_with_tritonserver_as_the_user(
    instances: list[dict[str, Any]],
) -> None:
    user = container_user()
    for row in instances:
        worker = f"tarn-lab-{row['host'].split('.')[0]}"
        uid = podman_exec(worker, "id", "-u", user).stdout.strip()
        inspected = json.loads(docker(worker, "inspect", row["container"]))[0]
        assert inspected["State"]["Running"], inspected["State"]
        assert inspected["Config"]["Image"] == lab_client.TRITON_IMAGE
        assert inspected["Config"]["User"].split(":")[0] == uid
        top = docker(worker, "top", row["container"], "-eo", "pid,user,args").splitlines()
        tritons = [line for line in top if "/bin/tritonserver " in line]
        print(f"\n[docker] {row['container']} on {worker}: {len(top) - 1} processes; {tritons}")
        assert tritons, f"no tritonserver in {row['container']}: {top}"
        assert all(line.split()[1] in (user, uid) for line in tritons)
        serves(row, PORT)


def nm_event(log: str, container: str, event: str) -> datetime | None:
    """When the NodeManager's log first says ``event`` of ``container``."""
    for line in log.splitlines():
        if container in line and event in line:
            return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return None


def test_yarn_stops_each_container_through_the_launcher_it_runs_as_pid_1(
    rm: ResourceManager, instances: list[dict[str, Any]]
) -> None:
    """The controller's container too: its PID 1 is the controller, and it ends on YARN's stop."""
    [controller] = containers(rm.service(SERVICE) or {}, CONTROLLER)
    rows = [*instances, {"container": controller["id"], "host": container_host(controller)}]
    workers = {row["container"]: f"tarn-lab-{str(row['host']).split('.', maxsplit=1)[0]}" for row in rows}
    for container, worker in workers.items():
        pid_1 = docker(worker, "exec", container, "cat", "/proc/1/cmdline").replace("\0", " ").strip()
        program = "tarn.pyz controller " if container == controller["id"] else "tarn-launcher.pyz "
        assert re.match(rf"\S*python3 {re.escape(program)}", pid_1), f"PID 1 of {container}: {pid_1}"
    done = tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER)
    assert done.returncode == 0, done.stderr

    def stopped() -> dict[str, tuple[float, str]] | None:
        took = {}
        for container, worker in workers.items():
            log = podman_exec(worker, "grep", "-F", container, NM_LOG).stdout
            asked = nm_event(log, container, "Stopping container with container Id")
            ended = nm_event(log, container, "transitioned from KILLING to ")
            if asked is None or ended is None:
                return None
            assert f"Exit code from container {container} is : 137" not in log, f"{container} was SIGKILLed"
            [state] = re.findall(rf"{container} transitioned from KILLING to (\w+)", log)
            took[container] = ((ended - asked).total_seconds(), state)
        return took

    took = wait_for(stopped, 60, "the NodeManagers to stop the service's containers")
    longest = max(took_s for took_s, _state in took.values())
    print(
        f"\n[docker] YARN's stop to each container's end, and the state it ended in: {took}"
        f" (margin {SIGKILL_DELAY_S - longest:.1f} s to the NodeManager's SIGKILL)"
    )
    assert longest < SIGKILL_DELAY_S, f"{took}: not ended before the NodeManager's SIGKILL"
    # killed on request (exit 143 read by the launch), not EXITED_WITH_FAILURE: a container YARN removed
    # before its launch read the exit code ends that way, 28 s late (the yarn_nodemanager role's delay)
    assert {state for _took_s, state in took.values()} == {"CONTAINER_CLEANEDUP_AFTER_KILL"}, took
