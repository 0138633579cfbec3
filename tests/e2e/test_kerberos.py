"""TARN on the secure lab (Kerberos, HDFS over SASL and HTTPS): what only a secure cluster shows.

* Bad identities fail before anything is submitted, each naming its fix, and leave nothing on HDFS
  or in the RM: among them a ticket cache whose tickets have ended, and this host's clock 15
  minutes ahead of the KDC's (libfaketime moves the clock of the `tarn` process alone).
* No TARN component reaches HDFS or the RM with simple authentication (the daemons' own logs).

A service outliving its delegation tokens is test_tokens.py's (docs/kerberos.md).

On a lab with simple authentication there is nothing to check here: the module is skipped, saying so.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.lab import LAB_USER, podman_exec
from tests.support.lab_service import CLUSTER, tarn

pytestmark = pytest.mark.skipif(not lab_client.secure(), reason="the lab runs simple authentication")

SERVICE = "tarn-e2e-krb"
MODELS_ON_HDFS = f"/user/{LAB_USER}/e2e-krb-models"
MASTER = "tarn-lab-master"


def submit(
    name: str, *extra: str, env: dict[str, str] | None = None, port: int = 8500, token: str | None = None
) -> subprocess.CompletedProcess[str]:
    return tarn(
        "submit", "--service-name", name, "--user", LAB_USER, *lab_client.runtime_args(),
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


LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"  # Debian's libfaketime (lab/preflight.sh)
SKEW = "+15m"  # beyond Kerberos' limit (krb5.conf's clockskew, 5 minutes by default)


def kinit(cache: str, *flags: str) -> None:
    """Tickets of the lab's user tarn@TARN.LAB into ``cache``, as an operator's kinit does."""
    keytab = lab_client.user_keytab(lab_client.USER)
    subprocess.run(["kinit", *flags, "-kt", str(keytab), "-c", cache, lab_client.USER_PRINCIPAL], check=True)


def ticket_cache_only(cache: str) -> dict[str, str]:
    return {"TARN_PRINCIPAL": "", "TARN_KEYTAB": "", "KRB5CCNAME": cache}


def expired_ticket(tmp: Path) -> BadIdentity:
    cache = f"FILE:{tmp / 'expired.ccache'}"
    kinit(cache, "-l", "2s")
    time.sleep(3)  # past the tickets' end (MIT counts whole seconds)
    return BadIdentity(("--kerberos",), ticket_cache_only(cache), "has expired: run kinit again")


def clock_ahead(tmp: Path) -> BadIdentity:
    """Valid tickets, then this host's clock jumps ahead: each authenticator TARN makes is 15 minutes
    off, and the KDC refuses the service ticket (MIT corrects a skew only when it logs in anew)."""
    cache = f"FILE:{tmp / 'skewed.ccache'}"
    kinit(cache)
    faked = {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": SKEW, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    return BadIdentity(("--kerberos",), ticket_cache_only(cache) | faked, "synchronize them (NTP)")


# cases that need tickets made (and time to pass) first
PREPARED = {"an expired ticket": expired_ticket, "this host's clock 15 minutes ahead": clock_ahead}


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
        "no ticket and no keytab": BadIdentity(("--kerberos",), ticket_cache_only(empty_cache), "kinit"),
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
    *PREPARED,
]


@pytest.mark.parametrize("case", CASES)
def test_a_bad_identity_fails_early_naming_the_fix(
    case: str, tmp_path: Path, rm: ResourceManager, hdfs: WebHdfsClient, models: str
) -> None:
    bad = PREPARED[case](tmp_path) if case in PREPARED else bad_identities(tmp_path)[case]
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


# ---- every TARN component on Kerberos


@pytest.mark.before_chaos
def test_no_tarn_component_uses_simple_authentication() -> None:
    """After the suite's services (staging, the controllers' RM polls and audit, the CLI, the
    modules), the daemons' logs: every HDFS audit line of TARN's principals (tarn@, tarn/<host>@)
    and every RPC login says KERBEROS, TOKEN (a DataNode redirect, YARN's localization) or PROXY
    (the RM acting for tarn), never SIMPLE."""
    log = podman_exec(MASTER, "cat", "/var/log/hadoop/namenode/namenode.log", check=True).stdout
    # since the NameNode last started: make test converges a lab that ran with simple authentication
    namenode = log.rpartition("STARTUP_MSG: Starting NameNode")[2]
    audit = re.findall(r"ugi=(tarn\S*) \(auth:(\w+)\)", namenode)
    logins = re.findall(r"Auth successful for (tarn\S*) \(auth:(\w+)\)", namenode)
    methods = sorted({method for _user, method in audit + logins})
    users = sorted({user for user, _method in audit})
    print(f"NameNode: {len(audit)} audit lines of {users}, {len(logins)} RPC logins; methods {methods}")
    assert audit, "no audit line of TARN's principals: the NameNode's audit log is off?"
    assert any(user.startswith("tarn/") for user in users), "the service's own principal never reached HDFS"
    assert "SIMPLE" not in methods
