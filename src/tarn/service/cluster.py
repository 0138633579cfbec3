"""The cluster a front end talks to: the RM (every URL, for HA) and WebHDFS of one user."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from tarn.clients.resourcemanager import ResourceManager
from tarn.clients.spnego import rm_auth
from tarn.errors import ConfigError
from tarn.hadoop_conf import client_conf_dir, read_properties, resource_manager_urls, webhdfs_url
from tarn.stdlib.hadoop_site import hadoop_user, kerberos_enabled
from tarn.stdlib.kerberos import KerberosIdentity, webhdfs_auth
from tarn.stdlib.webhdfs import WebHdfsClient


class Cluster:
    """The RM and WebHDFS of one user. WebHDFS is resolved on first use: commands that only talk
    to the RM (status, instances, scale, stop) must not need the NameNode's address."""

    def __init__(
        self,
        rm: ResourceManager,
        user: str,
        hdfs: WebHdfsClient | None = None,
        make_hdfs: Callable[[], WebHdfsClient] | None = None,
        identity: KerberosIdentity | None = None,
        conf_dir: Path | None = None,
    ) -> None:
        self.rm = rm
        self.user = user
        self.identity = identity  # None: simple authentication
        self.conf_dir = conf_dir  # the Hadoop client configuration it was found from (container-executor.cfg)
        self._hdfs = hdfs
        self._make_hdfs = make_hdfs

    @property
    def realm(self) -> str | None:
        """None with simple authentication; else the submitter's realm ("" for a kinit ticket)."""
        if self.identity is None:
            return None
        principal = self.identity.resolved_principal() or ""
        return principal.rpartition("@")[2]

    @property
    def hdfs(self) -> WebHdfsClient:
        if self._hdfs is None:
            if self._make_hdfs is None:
                raise ConfigError("--webhdfs-url: needed for this command; give the NameNode's HTTP URL")
            self._hdfs = self._make_hdfs()
        return self._hdfs


def resolve_user(user: str | None, environ: Mapping[str, str]) -> str:
    """The YARN user (tarn.stdlib.hadoop_site.hadoop_user), required: the CLI's and the modules'."""
    name = hadoop_user(user, environ)
    if not name:
        raise ConfigError("--user: no YARN user given; pass --user NAME or set HADOOP_USER_NAME")
    return name


def kerberos_identity(
    kerberos: bool = False, principal: str | None = None, keytab: str | None = None
) -> KerberosIdentity | None:
    """Who TARN is to a Kerberized cluster, or None for simple authentication. A keytab or a
    principal implies Kerberos; the keytab is checked here (readable, holds the principal), before
    anything is submitted."""
    if not (kerberos or principal or keytab):
        return None
    identity = KerberosIdentity(principal or None, keytab or None)
    identity.check()
    return identity


def connect(
    *,
    user: str | None,
    rm_urls: list[str] | None = None,
    webhdfs: str | None = None,
    conf_dir: str | None = None,
    kerberos: bool = False,
    principal: str | None = None,
    keytab: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Cluster:
    """The RM (every URL, for HA) and WebHDFS, from explicit URLs or the Hadoop client configuration.
    With Kerberos (`kerberos`, or a `principal` or `keytab`), SPNEGO for both (tarn.stdlib.kerberos)."""
    env = environ or {}
    name = resolve_user(user, env)
    conf = client_conf_dir(conf_dir, env)
    identity = kerberos_identity(kerberos, principal, keytab)
    if identity is None and kerberos_enabled(read_properties(conf / "core-site.xml")):
        raise ConfigError(
            f"--kerberos: {conf / 'core-site.xml'} says the cluster uses Kerberos; "
            "pass --kerberos (the ticket from kinit) or --principal and --keytab"
        )
    urls = resource_manager_urls(rm_urls, conf)

    def web_hdfs() -> WebHdfsClient:
        url = webhdfs or webhdfs_url(conf)
        return WebHdfsClient(url, webhdfs_auth(identity, name))

    rm = ResourceManager(urls, user=name, auth=rm_auth(identity))
    return Cluster(rm=rm, user=name, make_hdfs=web_hdfs, identity=identity, conf_dir=conf)
