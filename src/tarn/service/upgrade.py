"""The rolling upgrade: the instances YARN marks NEEDS_UPGRADE, one at a time, Triton first, each
drained through the controller before and READY again after; then YARN finalizes."""

from __future__ import annotations

from tarn.clients.resourcemanager import ResourceManager
from tarn.service.drain import controller_of, drain
from tarn.service.options import Options
from tarn.service.plan import COMPONENTS
from tarn.service.wait import finalized, instance_ready, needing_upgrade, until, upgrading
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
                instance_ready(component, instance),
                f"service {name}: {instance} READY after its upgrade",
                options,
            )
            if controller is not None:
                controller.undrain(instance)  # also cleared by the restart; say so explicitly
    until(rm, name, finalized(version), f"service {name}: YARN to finalize the upgrade to {version}", options)
