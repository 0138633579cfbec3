"""A destroyed service's znodes: the one time discovery entries go without a controller.

The controller's registrations are persistent (tarn.controller.registry, docs/discovery.md): they
outlive a controller that is killed or waits for a container, so that serving never depends on
it. A destroyed service has no controller to come back, so ``tarn destroy`` (and
``tarn_deploy state=absent``) deletes its znodes under --zk-path once YARN has removed it, with
the caller's Kerberos identity on a secure cluster (the znodes' ACL gives the service principal's
short name every right: the submitter's must be the same, as for the controllers that share a
path). Other services' znodes under the same path are left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tarn.errors import TarnError

if TYPE_CHECKING:
    from tarn.stdlib.config import TarnConfig
    from tarn.stdlib.kerberos import KerberosIdentity


def withdraw(config: TarnConfig, identity: KerberosIdentity | None, connect_s: float = 10.0) -> str | None:
    """Delete the service's znodes; None when done (or there is no ZooKeeper), else what was
    left and how to remove it (a warning: the service itself is gone either way)."""
    if config.zk_ensemble is None:
        return None
    by_hand = (
        f"delete the znodes of service {config.service_name} under {config.zk_path} on "
        f"{config.zk_ensemble} by hand (zkCli.sh: deleteall)"
    )
    try:
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        from tarn.controller.registry import Registry
    except ImportError:
        missing = "no kazoo here: pip install 'tarn[controller]'"
        return f"--zk-ensemble: the discovery entries stay ({missing}); {by_hand}"
    registry = Registry(config.zk_ensemble, config.zk_path, config.service_name, identity=identity)
    try:
        registry.start(timeout=connect_s)
        registry.stop()  # deletes this service's znodes, then ends the session
    except (KazooException, KazooTimeoutError, TarnError) as exc:
        registry.close()
        return f"--zk-ensemble: the discovery entries stay ({type(exc).__name__}: {exc}); {by_hand}"
    return None
