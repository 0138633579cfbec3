"""TARN on the secure lab (Kerberos, HDFS over SASL and HTTPS): what only a secure cluster shows.

* Bad identities fail before anything is submitted, each naming its fix, and leave nothing on HDFS
  or in the RM.
* No TARN component reaches HDFS or the RM with simple authentication (the daemons' own logs).
* A service outlives its delegation tokens: started when the suite starts (the lab's tokens renew
  every 2 minutes and live 5 at most), it is checked just before the chaos suite, past two maximum
  lifetimes: a new instance stages its models and serves, the service AM is killed and comes back,
  the service scales down. The token renewals the daemons logged are printed.

On a lab with simple authentication there is nothing to check here: the module is skipped, saying so.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.spec import instance_number
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.lab import LAB_USER, WORKERS, podman_exec, wait_for
from tests.support.lab_service import CLUSTER, ready_instances, tarn

pytestmark = pytest.mark.skipif(not lab_client.secure(), reason="the lab runs simple authentication")

SERVICE = "tarn-e2e-krb"
LONG_LIVED = "tarn-e2e-krb-long"
MODELS_ON_HDFS = f"/user/{LAB_USER}/e2e-krb-models"
MAX_LIFETIME_S = 300  # inventories/lab: hadoop_delegation_token_max_lifetime_ms
MASTER = "tarn-lab-master"


def submit(
    name: str, *extra: str, env: dict[str, str] | None = None, port: int = 8500, token: str | None = None
) -> subprocess.CompletedProcess[str]:
    return tarn(
        "submit", "--service-name", name, "--user", LAB_USER, "--runtime", "process",
        "--model-repository", f"hdfs://{MODELS_ON_HDFS}",
        "--port", str(port), "--grpc-port", str(port + 1), "--metrics-port", str(port + 2),
        "--port-stride", "10", "--no-anti-affinity", "--am-port", str(port + 90),
        "--min-instances", "1", "--max-instances", "2", "--cooldown", "3600000",
        "--gpus-per-instance", "0", "--memory-mb", "768", "--vcores", "1", "--controller-memory-mb", "512",
        *extra, *CLUSTER, token=token or secrets.token_urlsafe(16), env=env, timeout=600,
    )  # fmt: skip


def nothing_submitted(rm: ResourceManager, hdfs: WebHdfsClient, name: str) -> None:
    assert rm.service(name) is None, f"{name} reached the RM"
    assert hdfs.status(f"/user/{LAB_USER}/.tarn/{name}") is None, f"{name} left files on HDFS"


@pytest.fixture(scope="module")
def models(hdfs: WebHdfsClient) -> str:
    hdfs.upload_tree(ROOT / "examples" / "model_repository", MODELS_ON_HDFS)
    return MODELS_ON_HDFS


# ---- bad identities: refused before any contact that changes something


@dataclass(frozen=True)
class BadIdentity:
    flags: tuple[str, ...]
    env: dict[str, str]
    fix: str  # a piece of the one-line error


def bad_identities(tmp: Path) -> dict[str, BadIdentity]:
    empty_cache = f"FILE:{tmp / 'empty.ccache'}"
    return {
        "no service principal": BadIdentity((), {"TARN_SERVICE_PRINCIPAL": "", "TARN_SERVICE_KEYTAB": ""},
                                            "--service-principal tarn/_HOST@TARN.LAB"),
        "service principal in another realm": BadIdentity(
            ("--service-principal", "tarn/_HOST@EXAMPLE.COM"), {}, "write tarn/_HOST@TARN.LAB"),
        "service principal naming one host": BadIdentity(
            ("--service-principal", "tarn/worker1@TARN.LAB"), {}, "tarn/_HOST@TARN.LAB"),
        "operator keytab missing": BadIdentity(("--keytab", str(tmp / "absent.keytab")), {}, "absent.keytab"),
        "operator keytab without the principal": BadIdentity(
            ("--principal", "alice@TARN.LAB"), {}, "holds no key for alice@TARN.LAB"),
        "no ticket and no keytab": BadIdentity(
            ("--kerberos",), {"TARN_PRINCIPAL": "", "TARN_KEYTAB": "", "KRB5CCNAME": empty_cache}, "kinit"),
        "simple authentication on a Kerberized cluster": BadIdentity(
            (), {"TARN_PRINCIPAL": "", "TARN_KEYTAB": "", "HADOOP_CONF_DIR": str(tmp / "conf")},
            "--kerberos"),
    }  # fmt: skip


CASES = [
    "no service principal",
    "service principal in another realm",
    "service principal naming one host",
    "operator keytab missing",
    "operator keytab without the principal",
    "no ticket and no keytab",
    "simple authentication on a Kerberized cluster",
]


@pytest.mark.parametrize("case", CASES)
def test_a_bad_identity_fails_early_naming_the_fix(
    case: str, tmp_path: Path, rm: ResourceManager, hdfs: WebHdfsClient, models: str
) -> None:
    bad = bad_identities(tmp_path)[case]
    conf = tmp_path / "conf"  # a client configuration that says Kerberos, as a secure cluster's does
    conf.mkdir()
    (conf / "core-site.xml").write_text(
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value>"
        "</property></configuration>"
    )
    name = f"{SERVICE}-bad"
    started = time.monotonic()
    done = submit(name, *bad.flags, env=bad.env)
    took = time.monotonic() - started
    assert done.returncode != 0, done.stdout
    error = done.stderr.strip().splitlines()[-1]
    print(f"{case}: refused in {took:.1f}s: {error}")
    assert bad.fix in error, error
    nothing_submitted(rm, hdfs, name)


# ---- a service that outlives its tokens


LONG_LIVED_PORT = 8600


@dataclass(frozen=True)
class LongLived:
    started: float  # wall clock
    token: str


@pytest.fixture(scope="session")
def long_lived(rm: ResourceManager, hdfs: WebHdfsClient) -> Iterator[LongLived]:
    """The service, submitted once (the first test of the session asks for it)."""
    tarn("destroy", "--service-name", LONG_LIVED, "--user", LAB_USER, *CLUSTER, timeout=600)
    hdfs.upload_tree(ROOT / "examples" / "model_repository", MODELS_ON_HDFS)
    token = secrets.token_urlsafe(16)
    done = submit(LONG_LIVED, port=LONG_LIVED_PORT, token=token)
    assert done.returncode == 0, done.stderr
    try:
        yield LongLived(time.time(), token)
    finally:
        tarn("destroy", "--service-name", LONG_LIVED, "--user", LAB_USER, *CLUSTER, timeout=600)


@pytest.mark.first
def test_long_lived_service_starts(long_lived: LongLived, rm: ResourceManager) -> None:
    wait_for(lambda: ready_instances(rm, LONG_LIVED, 1), 300, "the long-lived service's instance READY")


def application_id(rm: ResourceManager, name: str) -> str:
    service = rm.service(name) or {}
    return str(service["id"])


def renewals(app_id: str) -> list[str]:
    """The RM's log lines about renewing or fetching the tokens of ``app_id`` (DelegationTokenRenewer)."""
    log = podman_exec(MASTER, "cat", "/var/log/hadoop/resourcemanager/resourcemanager.log", check=True).stdout
    return [
        line
        for line in log.splitlines()
        if "DelegationTokenRenewer" in line
        and ("enew" in line or "new token" in line.lower() or app_id in line)
    ]


@pytest.mark.before_chaos
def test_long_lived_service_outlives_two_token_lifetimes(long_lived: LongLived, rm: ResourceManager) -> None:
    app_id = application_id(rm, LONG_LIVED)
    wait = long_lived.started + 2 * MAX_LIFETIME_S + 30 - time.time()
    if wait > 0:
        print(f"waiting {wait:.0f}s more, to two token lifetimes ({2 * MAX_LIFETIME_S}s) and a margin")
        time.sleep(wait)
    print(f"service {LONG_LIVED} ({app_id}) up {time.time() - long_lived.started:.0f}s")
    # a new container: YARN localizes its files with the RM's renewed tokens, the launcher stages the
    # models over WebHDFS from the service keytab
    scaled = tarn("scale", "2", "--service-name", LONG_LIVED, "--user", LAB_USER, *CLUSTER,
                  token=long_lived.token, timeout=600)  # fmt: skip
    assert scaled.returncode == 0, scaled.stderr
    rows = wait_for(lambda: ready_instances(rm, LONG_LIVED, 2), 300, "a second instance READY")
    for row in rows:
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "client.py"), "--url",
             f"{row['host']}:{LONG_LIVED_PORT + 10 * instance_number(str(row['instance']))}",
             "--protocol", "http", "--wait", "60"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    # the service AM logs in again from the keytab in its new attempt
    am = f"ServiceMaster.*{LONG_LIVED}"
    worker = next(w for w in WORKERS if podman_exec(w, "pgrep", "-f", am).stdout.strip())
    podman_exec(worker, "pkill", "-KILL", "-f", am, check=True)
    killed = time.monotonic()

    def stable() -> bool:
        return (rm.service(LONG_LIVED) or {}).get("state") == "STABLE" and bool(
            ready_instances(rm, LONG_LIVED, 2)
        )

    wait_for(stable, 600, "the service STABLE again after its AM was killed")
    print(f"service AM killed on {worker}: STABLE again after {time.monotonic() - killed:.0f}s")
    scaled = tarn("scale", "1", "--service-name", LONG_LIVED, "--user", LAB_USER, *CLUSTER,
                  token=long_lived.token, timeout=600)  # fmt: skip
    assert scaled.returncode == 0, scaled.stderr
    wait_for(lambda: ready_instances(rm, LONG_LIVED, 1), 300, "back to one instance")
    for line in renewals(app_id):
        print(f"  RM: {line}")


# ---- every TARN component on Kerberos


@pytest.mark.before_chaos
def test_no_tarn_component_uses_simple_authentication() -> None:
    """After the suite's services (staging, the controllers' RM polls and audit, the CLI, the
    modules), the daemons' logs: every HDFS audit line of TARN's principals (tarn@, tarn/<host>@)
    and every RPC login says KERBEROS, TOKEN (a DataNode redirect, YARN's localization) or PROXY
    (the RM acting for tarn), never SIMPLE."""
    namenode = podman_exec(MASTER, "cat", "/var/log/hadoop/namenode/namenode.log", check=True).stdout
    audit = re.findall(r"ugi=(tarn\S*) \(auth:(\w+)\)", namenode)
    logins = re.findall(r"Auth successful for (tarn\S*) \(auth:(\w+)\)", namenode)
    methods = sorted({method for _user, method in audit + logins})
    users = sorted({user for user, _method in audit})
    print(f"NameNode: {len(audit)} audit lines of {users}, {len(logins)} RPC logins; methods {methods}")
    assert audit, "no audit line of TARN's principals: the NameNode's audit log is off?"
    assert any(user.startswith("tarn/") for user in users), "the service's own principal never reached HDFS"
    assert "SIMPLE" not in methods
