"""Durations and rates of simulated work, from the scenario's ``timings`` section.

All durations are simulated seconds (scaled by the clock's ``speed``); rates are per
simulated second. Every controller reads its durations here, so a scenario can describe a
slow or fast cluster in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass
class Timings:
    pod_start_s: float = 2.0            # image present -> container running
    pod_stop_s: float = 1.0             # graceful termination of an ordinary pod
    node_heartbeat_s: float = 10.0      # kubelet Lease renewal / Ready heartbeat
    reboot_s: float = 180.0             # NotReady time of a rebooting node
    rke2_restart_s: float = 20.0        # kubelet restart when Rancher applies a new RKE2 plan
    os_install_s: float = 120.0         # post-drain / single-node OS installation before reboot
    vm_start_s: float = 15.0            # VMI Scheduled -> Running
    vm_stop_s: float = 10.0             # graceful VM shutdown
    migration_bandwidth_mib_s: float = 1024.0  # live migration memory copy rate
    migration_overhead_s: float = 5.0   # fixed cost per migration (target pod start, switch-over)
    image_pull_mib_s: float = 200.0     # container image pull rate per node
    download_mib_s: float = 100.0       # ISO download rate (VirtualMachineImage import)
    chart_rollout_s: float = 30.0       # ManagedChart / Deployment roll to new images
    rancher_upgrade_s: float = 60.0     # Rancher Deployment upgrade
    kubevirt_upgrade_s: float = 120.0   # virt-operator rolls KubeVirt to its own version
    replica_rebuild_s: float = 60.0     # Longhorn replica rebuild after a node returns
    job_pod_overhead_s: float = 1.0     # Job pod creation -> container start
    volume_provision_s: float = 2.0     # CSI CreateVolume (Longhorn) for a new claim
    short_program_s: float = 1.0        # run time of an unmodelled run-to-completion program

    @classmethod
    def from_scenario(cls, scenario: dict[str, Any]) -> Timings:
        raw = scenario.get("timings") or {}
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown timings: {', '.join(sorted(unknown))}")
        return cls(**{k: float(v) for k, v in raw.items()})
