"""This machine as a client of the lab, secure (Kerberos) or not: the main job and the e2e tests
reach the lab's RM, WebHDFS and TARN's CLI through here.

A secure lab (TARN_LAB_SECURE=true when site.yml ran) is told by its RM, which answers 401 to a
request without SPNEGO. Then `use_lab()` fetches what a client needs into build/lab: the realm's
krb5.conf, a keytab of the user principal tarn@TARN.LAB (made on the lab's KDC with kadmin.local),
and puts in this process's environment, which every `tarn` subprocess inherits:
KRB5_CONFIG, the lab CA for Python's TLS (SSL_CERT_FILE, REQUESTS_CA_BUNDLE: HDFS is HTTPS only),
TARN_PRINCIPAL and TARN_KEYTAB (the CLI's --principal and --keytab), TARN_SERVICE_PRINCIPAL and
TARN_SERVICE_KEYTAB (the service's own identity, its keytab on every NodeManager).
"""

from __future__ import annotations

import functools
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from tarn.clients.resourcemanager import ResourceManager
from tarn.clients.spnego import rm_auth
from tarn.errors import ConfigError
from tarn.stdlib.kerberos import KerberosIdentity, webhdfs_auth
from tarn.stdlib.webhdfs import WebHdfsClient

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("TARN_BUILD", ROOT / "build"))
MASTER = os.environ.get("TARN_LAB_MASTER", "master")
MASTER_CONTAINER = "tarn-lab-master"
USER = "tarn"
REALM = "TARN.LAB"
RM_URL = f"http://{MASTER}:8088"
LAB_DIR = BUILD / "lab"
KRB5_CONF = LAB_DIR / "krb5.conf"
USER_KEYTAB = LAB_DIR / f"{USER}.keytab"
CA = LAB_DIR / "tls" / "ca.pem"  # lab/tls.sh
USER_PRINCIPAL = f"{USER}@{REALM}"
SERVICE_PRINCIPAL = f"{USER}/_HOST@{REALM}"
WORKER_CONTAINER = "tarn-lab-worker1"
# A lab with YARN's Docker runtime (TARN_LAB_DOCKER=true when site.yml ran): its Triton image, and
# the NodeManagers' container-executor.cfg, which tarn submit reads before submitting (inventories/lab).
TRITON_IMAGE = "registry.tarn.lab/tarn/triton:2.51.0"
CONTAINER_EXECUTOR_CFG = "/usr/local/lib/tarn-lab/etc/hadoop/container-executor.cfg"
SERVICE_KEYTAB = (
    "/etc/security/keytabs/tarn.service.keytab"  # inventories/lab: yarn_nodemanager_service_keytabs
)


@functools.cache
def secure() -> bool:
    """Whether the running lab is Kerberized: its RM refuses a request without SPNEGO."""
    try:
        with urllib.request.urlopen(f"{RM_URL}/ws/v1/cluster/info", timeout=10):  # noqa: S310 - http://
            return False
    except urllib.error.HTTPError as refused:
        return refused.code == 401


@functools.cache
def docker() -> bool:
    """Whether the running lab's NodeManagers run YARN's Docker runtime: worker1 has its cfg."""
    done = subprocess.run(
        ["podman", "exec", WORKER_CONTAINER, "test", "-f", CONTAINER_EXECUTOR_CFG],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def runtime_args() -> list[str]:
    """The CLI's runtime flags for the lab's Triton: its image on a Docker lab, else the NodeManagers'
    tritonserver (use_lab puts the cfg's copy in TARN_CONTAINER_EXECUTOR_CFG)."""
    return ["--runtime", "docker", "--image", TRITON_IMAGE] if docker() else ["--runtime", "process"]


def runtime_options() -> dict[str, str]:
    """runtime_args as tarn_deploy's options (the cfg's copy is made by use_lab)."""
    if not docker():
        return {"runtime": "process"}
    cfg = str(LAB_DIR / "container-executor.cfg")
    return {"runtime": "docker", "image": TRITON_IMAGE, "container_executor_cfg": cfg}


def webhdfs_url() -> str:
    return f"https://{MASTER}:9871" if secure() else f"http://{MASTER}:9870"


def cluster_args() -> list[str]:
    """The CLI's flags for the lab (the identity comes from the environment use_lab sets)."""
    return ["--rm-url", RM_URL, "--webhdfs-url", webhdfs_url()]


def service_kerberos_principal() -> dict[str, str]:
    """A YARN service spec's kerberos_principal on the secure lab (the keytab on every NodeManager)."""
    return {"principal_name": SERVICE_PRINCIPAL, "keytab": f"file://{SERVICE_KEYTAB}"}


def module_identity() -> dict[str, str]:
    """The tarn.yarn modules' options for the lab's user and service identities (secure lab)."""
    if not secure():
        return {}
    return {"principal": USER_PRINCIPAL, "keytab": str(USER_KEYTAB)}


def identity(user: str = USER) -> KerberosIdentity | None:
    """`user`@TARN.LAB from its keytab on a secure lab (`hdfs` is HDFS's superuser)."""
    return KerberosIdentity(f"{user}@{REALM}", str(user_keytab(user))) if secure() else None


def resource_manager(user: str = USER) -> ResourceManager:
    return ResourceManager([RM_URL], user=user, auth=rm_auth(identity(user)))


def webhdfs(user: str = USER) -> WebHdfsClient:
    """WebHDFS as `user`: user.name with simple authentication, its principal on a secure lab."""
    return WebHdfsClient(webhdfs_url(), webhdfs_auth(identity(user), user))


def user_keytab(user: str) -> Path:
    """build/lab/<user>.keytab with the keys of <user>@TARN.LAB, made on the lab's KDC once."""
    keytab = LAB_DIR / f"{user}.keytab"
    if not _logs_in(f"{user}@{REALM}", keytab):  # absent, or of an earlier lab's KDC
        LAB_DIR.mkdir(parents=True, exist_ok=True)
        principal = f"{user}@{REALM}"
        scratch = f"/root/.tarn-{user}.keytab"
        _kadmin(f"addprinc -randkey {principal}", ok_if="already exists")
        _kadmin(f"ktadd -norandkey -k {scratch} {principal}")
        _podman("cp", f"{MASTER_CONTAINER}:{scratch}", str(keytab))
        _podman("exec", MASTER_CONTAINER, "rm", "-f", scratch)
        keytab.chmod(0o600)
    return keytab


def use_lab() -> None:
    """Make this process (and its children) a client of the lab; nothing to do for a simple one
    without Docker."""
    LAB_DIR.mkdir(parents=True, exist_ok=True)
    if docker():
        cfg = LAB_DIR / "container-executor.cfg"
        _podman("cp", f"{WORKER_CONTAINER}:{CONTAINER_EXECUTOR_CFG}", str(cfg))
        os.environ["TARN_CONTAINER_EXECUTOR_CFG"] = str(cfg)
    if not secure():
        return
    _podman("cp", f"{MASTER_CONTAINER}:/etc/krb5.conf", str(KRB5_CONF))
    os.environ.update(
        {
            "KRB5_CONFIG": str(KRB5_CONF),
            "SSL_CERT_FILE": str(CA),
            "REQUESTS_CA_BUNDLE": str(CA),
            "TARN_PRINCIPAL": USER_PRINCIPAL,
            "TARN_KEYTAB": str(USER_KEYTAB),
            "TARN_SERVICE_PRINCIPAL": SERVICE_PRINCIPAL,
            "TARN_SERVICE_KEYTAB": SERVICE_KEYTAB,
        }
    )
    user_keytab(USER)


def _logs_in(principal: str, keytab: Path) -> bool:
    if not keytab.exists():
        return False
    try:
        KerberosIdentity(principal, str(keytab)).negotiate(MASTER)
    except ConfigError:
        return False
    return True


def _kadmin(query: str, ok_if: str = "") -> None:
    done = subprocess.run(
        ["podman", "exec", MASTER_CONTAINER, "kadmin.local", "-q", query],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode or ("error" in done.stderr.lower() and not (ok_if and ok_if in done.stderr)):
        raise RuntimeError(f"kadmin.local -q {query!r}: {done.stderr.strip()}")


def _podman(*args: str) -> None:
    subprocess.run(["podman", *args], check=True, capture_output=True)
