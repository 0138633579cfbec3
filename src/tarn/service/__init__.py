"""The TARN service's life cycle: one piece of logic behind the `tarn` CLI and the Ansible modules.

================= ==========================================================================
``cluster``       :func:`connect`: the RM (every URL, for HA) and WebHDFS of one user
``artifacts``     :func:`desired_service`: the spec and the files a config asks for (zipapps, token)
``docker_policy`` a Docker spec checked against the NodeManagers' container-executor.cfg (pure)
``am_conf``       the service AM's resource-types.xml on a Kerberized cluster (pure): its HDFS token unused
``plan``          :func:`plan`: desired state vs the RM's service JSON → what to do (pure)
``apply``         :func:`apply`: carries a plan out (create, upgrade, flex, start, stop, destroy)
``scale``         :func:`plan_scale` (pure) and :func:`scale`: the instance count and its bounds
``drain``         the client side of a drain, through the controller's API (scale-down, upgrades)
``upgrade``       :func:`rolling_upgrade`: one instance at a time, each drained first
``wait``          named predicates over the RM's service JSON, and the one waiter
``report``        :func:`instances_of`, :func:`summary`, :func:`controller_url`
================= ==========================================================================

This package is the public interface: front ends import from ``tarn.service``. The controller
does not import it (it runs inside the service and needs none of this).
"""

from tarn.service.apply import apply, check_count, create, destroy, existing, flex, start, stop
from tarn.service.artifacts import STORE_PASSWORD_ENV, Desired, artifact_dir, desired_service
from tarn.service.cluster import Cluster, connect
from tarn.service.options import Options
from tarn.service.plan import STATES, Plan, State, comparable, plan, spec_of, spec_version, view
from tarn.service.report import controller_url, instances_of, summary
from tarn.service.scale import ScalePlan, apply_scale, plan_scale, scale
from tarn.service.upgrade import rolling_upgrade
from tarn.service.wait import wait_ready
from tarn.spec import triton_count

__all__ = [
    "STATES",
    "STORE_PASSWORD_ENV",
    "Cluster",
    "Desired",
    "Options",
    "Plan",
    "ScalePlan",
    "State",
    "apply",
    "apply_scale",
    "artifact_dir",
    "check_count",
    "comparable",
    "connect",
    "controller_url",
    "create",
    "desired_service",
    "destroy",
    "existing",
    "flex",
    "instances_of",
    "plan",
    "plan_scale",
    "rolling_upgrade",
    "scale",
    "spec_of",
    "spec_version",
    "start",
    "stop",
    "summary",
    "triton_count",
    "view",
    "wait_ready",
]
