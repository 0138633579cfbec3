"""The service AM's own configuration on a Kerberized cluster: how a service outlives the HDFS
delegation token of its submission (docs/kerberos.md, "A service outlives its tokens").

YARN's service AM (ServiceMaster, Hadoop 3.1 to 3.4) logs in from the service keytab, then means to
drop the submission's HDFS delegation token but drops it from a copy of its credentials: every new
NameNode connection of the AM authenticates with that token. The RM renews it until it nears its
maximum lifetime, then fetches a new one for the NodeManagers only; from the old token's expiry on,
every container launch of the AM fails on HDFS and a lost instance is never replaced.

The RM names the token after the NameNode's IP address (``hadoop.security.token.service.use_ip``,
true by default). An AM whose configuration says false looks the token up by host name, finds none,
and uses its keytab instead, which it renews itself. The one file that reaches the AM's JVM alone
is one in the service's HDFS ``conf/`` directory: YARN's service client localizes that directory
first on the AM's class path (with ``yarnservice-log4j.properties``). Of the files Hadoop loads from
the class path, ``resource-types.xml`` is the smallest to stand in for: it carries the RM's
resource types (the AM needs ``yarn.io/gpu`` to ask for GPUs) and the setting.

The file is written before the service is submitted and never again: an AM attempt localizes the
directory with the time it had at submission, and a later write would fail the next attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlparse

from tarn.stdlib.hadoop_site import properties_xml

AM_CONF_FILE = "resource-types.xml"
USE_IP = "hadoop.security.token.service.use_ip"
RESOURCE_TYPES_PREFIX = "yarn.resource-types"
BASE_PATH = "yarn.service.base.path"  # YARN's services keep their files under it (default ~/.yarn)


def yarn_service_dir(rm_conf: Mapping[str, str], user: str, name: str) -> str:
    """Where YARN's service client keeps service ``name`` on HDFS (it deletes it with the service)."""
    base = urlparse(rm_conf.get(BASE_PATH) or f"/user/{user}/.yarn").path.rstrip("/")
    return f"{base}/services/{name}"


def am_conf_file(rm_conf: Mapping[str, str], user: str, name: str) -> tuple[str, bytes]:
    """(HDFS path, contents) of the AM's resource-types.xml: the RM's resource types, and token
    look-ups by host name so that the AM's NameNode connections use its keytab."""
    properties = {key: value for key, value in rm_conf.items() if key.startswith(RESOURCE_TYPES_PREFIX)}
    properties[USE_IP] = "false"
    return f"{yarn_service_dir(rm_conf, user, name)}/conf/{AM_CONF_FILE}", properties_xml(properties)


# HDFS HA: there the RM names the token by the nameservice (``ha-hdfs:<ns>``) and the AM's HDFS
# client copies it onto each NameNode's address under that same look-up rule, so use_ip=false
# finds it all the same. No file of the AM's can steer it off the token; only a new submission
# (stop, then start) brings a new one.
NAMESERVICES = "dfs.nameservices"
FAILOVER_PROVIDER = "dfs.client.failover.proxy.provider."
MAX_LIFETIME = "dfs.namenode.delegation.token.max-lifetime"
MAX_LIFETIME_DEFAULT_MS = 7 * 24 * 3600 * 1000


def ha_nameservice(conf: Mapping[str, str]) -> str | None:
    """The HA nameservice that fs.defaultFS names (``hdfs://<ns>``), or None for one NameNode."""
    url = urlparse(conf.get("fs.defaultFS", ""))
    if url.scheme != "hdfs" or not url.hostname or url.port:
        return None
    listed = {part.strip() for part in conf.get(NAMESERVICES, "").split(",")}
    return url.hostname if url.hostname in listed or FAILOVER_PROVIDER + url.hostname in conf else None


def ha_token_warning(conf: Mapping[str, str], name: str) -> str | None:
    """What an operator must know before submitting ``name`` to a Kerberized HDFS HA, or None."""
    nameservice = ha_nameservice(conf)
    if nameservice is None:
        return None
    try:
        lifetime_ms = int(conf.get(MAX_LIFETIME) or MAX_LIFETIME_DEFAULT_MS)
    except ValueError:
        lifetime_ms = MAX_LIFETIME_DEFAULT_MS
    return (
        f"service {name}: HDFS is HA (nameservice {nameservice}), where YARN's service AM keeps "
        f"using the submission's HDFS delegation token (a Hadoop fault, docs/kerberos.md): "
        f"{lifetime_ms / 86_400_000:g} days after this submission ({MAX_LIFETIME}) the AM can launch "
        "no container, and a lost instance is not replaced. Stop and start the service before then "
        "(tarn_deploy state stopped, then started; or yarn app -stop, then -start): a start is a new "
        "submission, with new tokens"
    )
