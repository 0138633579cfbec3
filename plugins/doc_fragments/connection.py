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
      - Authenticate with SPNEGO, using the Kerberos ticket of the user running the module (C(kinit) first).
      - Needs the C(requests-gssapi) Python package.
    type: bool
    default: false
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
