# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Ranger Admin, as the modules that manage it reach it (module_utils/common.py RANGER_ADMIN_ARGS).
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Ranger Admin's URL, for example C(http://ranger-admin:6080).
    type: str
    required: true
  admin_user:
    description:
      - A Ranger Admin user allowed to manage service definitions, services and policies.
    type: str
    default: admin
  admin_password:
    description:
      - The password of O(admin_user); never logged or returned.
    type: str
    required: true
  validate_certs:
    description:
      - Verify Ranger Admin's TLS certificate (HTTPS URLs).
    type: bool
    default: true
  timeout:
    description:
      - Seconds each request to Ranger Admin may take.
    type: int
    default: 30
requirements:
  - python >= 3.10
  - requests
  - the C(tarn) Python package of this collection (role M(tarn.yarn.tarn) installs it)
"""
