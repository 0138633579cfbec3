"""The rolling upgrade: the instances YARN marks NEEDS_UPGRADE, one at a time, Triton first, each
drained through the controller before and READY again after; then YARN finalizes."""

from __future__ import annotations

from tarn.clients.resourcemanager import ResourceManager
from tarn.errors import ClusterError
from tarn.service.drain import controller_of, drain, wait_serving
from tarn.service.options import Options
from tarn.service.plan import COMPONENTS
from tarn.service.wait import finalized, instance_state, instance_upgraded, needing_upgrade, until, upgrading
from tarn.spec import TRITON


def rolling_upgrade(rm: ResourceManager, name: str, version: str, options: Options) -> None:
    service = until(rm, name, upgrading, f"service {name}: the upgrade to start", options)
    for component in COMPONENTS:
        while pending := needing_upgrade(service, component):
            instance = pending[0]
            controller = controller_of(service, options) if component == TRITON else None
            if controller is not None:
                drained, took = drain(service, controller, instance)
                if drained:
                    options.log(f"{instance} drained in {took:.1f} s")
                else:  # the controller's bound ran out: requests still in flight may fail
                    options.log(
                        f"warning: {instance} still busy after {took:.1f} s of draining; upgrading it anyway"
                    )
            options.log(f"service {name}: upgrading {instance}")
            rm.upgrade_instance(name, component, instance)
            service = until(
                rm,
                name,
                instance_upgraded(component, instance),
                f"service {name}: {instance} READY after its upgrade",
                options,
            )
            if instance_state(service, component, instance) == "FAILED_UPGRADE":
                raise ClusterError(
                    f"service {name}: YARN failed to upgrade {instance} (FAILED_UPGRADE; the NodeManager's "
                    f"log for its container says why); the service stays in its upgrade until "
                    f"{instance} is upgraded again or the upgrade is cancelled"
                )
            if controller is not None:
                controller.undrain(instance)  # also cleared by the restart; say so explicitly
                took = wait_serving(controller, instance, options)
                options.log(f"{instance} back in discovery {took:.1f} s after READY")
    until(rm, name, finalized(version), f"service {name}: YARN to finalize the upgrade to {version}", options)
