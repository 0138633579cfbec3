"""The cluster a front end talks to: the RM (every URL, for HA) and WebHDFS of one user."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tarn.clients.resourcemanager import ResourceManager
from tarn.clients.spnego import SpnegoAuth, requests_auth
from tarn.errors import ConfigError
from tarn.hadoop_conf import client_conf_dir, read_properties, resource_manager_urls, webhdfs_url
from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient


class Cluster:
    """The RM and WebHDFS of one user. WebHDFS is resolved on first use: commands that only talk
    to the RM (status, instances, scale, stop) must not need the NameNode's address."""

    def __init__(
        self,
        rm: ResourceManager,
        user: str,
        hdfs: WebHdfsClient | None = None,
        make_hdfs: Callable[[], WebHdfsClient] | None = None,
    ) -> None:
        self.rm = rm
        self.user = user
        self._hdfs = hdfs
        self._make_hdfs = make_hdfs

    @property
    def hdfs(self) -> WebHdfsClient:
        if self._hdfs is None:
            if self._make_hdfs is None:
                raise ConfigError("--webhdfs-url: needed for this command; give the NameNode's HTTP URL")
            self._hdfs = self._make_hdfs()
        return self._hdfs


def resolve_user(user: str | None, environ: Mapping[str, str]) -> str:
    """The YARN user: the one given, else $HADOOP_USER_NAME, else $USER (the CLI's and the modules')."""
    name = user or environ.get("HADOOP_USER_NAME") or environ.get("USER")
    if not name:
        raise ConfigError("--user: no YARN user given; pass --user NAME or set HADOOP_USER_NAME")
    return name


def connect(
    *,
    user: str | None,
    rm_urls: list[str] | None = None,
    webhdfs: str | None = None,
    conf_dir: str | None = None,
    kerberos: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Cluster:
    """The RM (every URL, for HA) and WebHDFS, from explicit URLs or the Hadoop client configuration."""
    env = environ or {}
    name = resolve_user(user, env)
    conf = client_conf_dir(conf_dir, env)
    auth = requests_auth() if kerberos else None
    urls = resource_manager_urls(rm_urls, conf)

    def web_hdfs() -> WebHdfsClient:
        url = webhdfs or webhdfs_url(
            read_properties(conf / "hdfs-site.xml"), read_properties(conf / "core-site.xml")
        )
        return WebHdfsClient(url, SpnegoAuth() if kerberos else SimpleAuth(name))

    return Cluster(rm=ResourceManager(urls, user=name, auth=auth), user=name, make_hdfs=web_hdfs)
