# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The cluster the tarn.yarn modules talk to (action group tarn.yarn.tarn: set once in module_defaults).
    DOCUMENTATION = r"""
options:
  rm_url:
    description:
      - ResourceManager web URL, for example C(http://rm:8088).
      - Give every RM's URL with ResourceManager HA; the active one is found and remembered.
      - Default the RMs of C(yarn-site.xml) in O(conf_dir).
    type: list
    elements: str
    aliases: [rm_urls]
  webhdfs_url:
    description:
      - NameNode HTTP URL, for example C(http://nn:9870).
      - Default the NameNode of C(hdfs-site.xml) and C(core-site.xml) in O(conf_dir).
    type: str
  conf_dir:
    description:
      - Hadoop client configuration directory.
      - Default C($HADOOP_CONF_DIR), then C(/etc/hadoop/conf).
    type: path
  user:
    description:
      - The YARN and HDFS user the service runs as (simple authentication passes it as C(user.name)).
      - Default C($HADOOP_USER_NAME), then C($USER) of the host that runs the module.
    type: str
  kerberos:
    description:
      - Authenticate with SPNEGO (Kerberos), with the ticket cache of the user running the module (C(kinit) first),
        or with O(keytab).
      - Needs MIT's GSSAPI library C(libgssapi_krb5.so.2) (Debian's C(libgssapi-krb5-2)), no Python package.
    type: bool
    default: false
  principal:
    description:
      - The Kerberos principal, for example C(tarn/_HOST@EXAMPLE.COM); C(_HOST) is the host's fully qualified name.
      - Default the ticket cache's principal, or the first principal of O(keytab).
      - Implies O(kerberos).
    type: str
  keytab:
    description:
      - A keytab of O(principal) on the host that runs the module; tickets are obtained from it (in memory, no C(kinit)).
      - Implies O(kerberos).
    type: path
requirements:
  - python >= 3.10
  - requests
  - the C(tarn) Python package of this collection (role M(tarn.yarn.tarn) installs it)
notes:
  - All tarn.yarn modules belong to the action group C(tarn.yarn.tarn), so one C(module_defaults) block
    can carry these options.
"""

    SERVICE_NAME = r"""
options:
  service_name:
    description:
      - The YARN service's name (the CLI's C(--service-name)).
    type: str
    default: tarn
"""
