"""Empty a node of running VMs before Rancher drains it (see DOCUMENTATION)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vm_evacuate
short_description: Live-migrate or shut down every VM on a node, targeting already-upgraded nodes
version_added: "0.1.0"
description:
  - Decides per running VirtualMachineInstance on I(node) whether it can live-migrate. It
    cannot when it uses host devices (PCI/USB/vGPU) or GPUs, is paused, KubeVirt reports
    C(LiveMigratable=False) (KubeVirt's reason is kept), or its nodeSelector, required node
    affinity or taints leave no other schedulable non-witness node.
  - VMs that cannot move are recorded in ConfigMap C(<plan>-restore-vm) in C(harvester-system)
    (key = node, value = comma-separated C(ns/name), owned by the plan; event
    C(RestoreVMConfigMapCreated)) and shut down (C(runStrategy=Halted); event
    C(VMShutdownCompleted)).
  - Then taints the node C(kubevirt.io/drain=draining:NoSchedule) and starts
    VirtualMachineInstanceMigrations with bounded concurrency. With I(target_aware=true) each
    migration is sent to a chosen node. On KubeVirt v1.6.0 and later (KubeVirt CR
    C(status.observedKubeVirtVersion)) it carries C(spec.addedNodeSelector)
    C(kubernetes.io/hostname=<target>). On older KubeVirt, which has no such field, Harvester's
    VM C(migrate) action is called with body field C(nodeName) set to the target, through the
    API server's proxy to Service C(harvester-system/harvester) (needs C(create) on
    C(services/proxy) C(https:harvester:8443)). The target is an
    already-upgraded node with room (allocatable minus requests), falling back to a
    not-yet-upgraded node (the one Rancher drains last) only when no upgraded node has room,
    so a VM moves once rather than once per node.
  - Before anything moves it waits (watch, deadline) until no attached Longhorn volume would
    lose its last healthy replica with the node and no PodDisruptionBudget forbids evicting a
    pod on the node.
  - Once Rancher has cordoned the node, the pods on it that Rancher's drain would evict and
    wait for because of a PodDisruptionBudget are evicted (C(policy/v1) Eviction, needs
    C(create) on C(pods/eviction)) before the migrations start, and those still there once
    more after they end. Only pods a ReplicaSet, StatefulSet or ReplicationController
    recreates, outside the platform's namespaces (C(kube-system), C(cattle-*), C(fleet-*),
    C(longhorn-system), C(harvester-system), ...), not DaemonSet, mirror or VM launcher pods,
    selected by exactly one budget of their namespace, with C(emptyDir) data only when the
    drain options allow deleting it. A 429 (the budget allows no disruption now) or any other
    failure leaves the pod to Rancher's drain; nothing waits for a budget. Nothing is evicted
    when Rancher's drain options for the node say C(enabled=false) (Rancher does not drain
    it) or C(disableEviction=true) (its drain ignores budgets).
  - Each migration is followed by watch; a failed or hung one (no success within
    I(migration_timeout)) is retried on another target up to I(retries) times; after that the
    node is marked C(PreDrainFailed), the plan Failed, and the module fails naming the VMs and
    reasons. The VMs keep running where they are; the node is never handed to Rancher with a
    running VM.
  - Idempotent; VMs already gone are not touched again; a migration already in flight for a VM
    is adopted.
author:
  - harvester-upgrade developers (@harvester-upgrade)
options:
  node:
    description: Node to empty.
    type: str
    required: true
  plan:
    description: UpgradePlan name; default the active plan.
    type: str
  target_aware:
    description:
      - Target already-upgraded nodes (C(addedNodeSelector) or Harvester's migrate action, by
        KubeVirt version). C(false) gives the naive behaviour (the scheduler picks), for the
        benchmark baseline.
    type: bool
    default: true
  concurrency:
    description: Migrations in flight at once from this node.
    type: int
    default: 2
  retries:
    description: Extra attempts for a failed or hung migration.
    type: int
    default: 2
  migration_timeout:
    description: Seconds one migration may take before it counts as hung.
    type: int
    default: 900
  timeout:
    description: Seconds the whole evacuation may take.
    type: int
    default: 3600
  volume_timeout:
    description: Seconds to wait, before anything is moved, for every other node to be
      C(Ready) and for the Longhorn volumes to be safe (rebuilds). When only live migrations
      are planned, the Longhorn wait comes after them instead (a migration leaves every
      volume attached and every replica in place).
    type: int
    default: 1800
  pdb_timeout:
    description: Seconds to wait for PodDisruptionBudgets to allow the drain.
    type: int
    default: 1800
  shutdown_timeout:
    description: Seconds to wait for shut-down VMs to stop.
    type: int
    default: 600
  shutdown_all:
    description: Shut down (and record) every VM instead of migrating (single-node path).
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
notes:
  - Check mode returns the evacuation plan (C(evacuation)) and the pods it would evict
    (C(pod_evictions)) and changes nothing.
"""

EXAMPLES = r"""
- name: Empty the node, preferring already-upgraded targets
  harvester.upgrade.vm_evacuate:
    node: "{{ inventory_hostname }}"
    concurrency: 2

- name: Naive baseline (the scheduler chooses targets)
  harvester.upgrade.vm_evacuate:
    node: "{{ inventory_hostname }}"
    target_aware: false
"""

RETURN = r"""
evacuation:
  description: The decision per VM.
  returned: always
  type: dict
  contains:
    migrate:
      description: VMs to live-migrate with target (null = scheduler) and why.
      type: list
      elements: dict
    shutdown:
      description: VMs shut down, with the reason.
      type: list
      elements: dict
migrated:
  description: VMs migrated in this run, their final node and attempts.
  returned: success
  type: list
  elements: dict
shutdown:
  description: VMs shut down (ns/name).
  returned: always
  type: list
  elements: str
pod_evictions:
  description:
    - Pods evicted ahead of Rancher's drain - C(evicted) (ns/name), C(left) (ns/name and why
      they were left to Rancher's drain), C(skipped) (why no pod was considered, e.g. the
      drain options or the node not cordoned yet).
    - In check mode C(would_evict) (ns/name, under the collection's own drain options while
      Rancher has not written the node's) instead of C(evicted).
  returned: unless the node was already past its evacuation or I(shutdown_all)
  type: dict
mechanism:
  description:
    - How migrations are sent to their target, C(addedNodeSelector) or
      C(harvester-migrate-action) (also in check mode).
  returned: when target-aware migrations are planned
  type: str
mechanism_why:
  description: The KubeVirt version (or schema) that decided it.
  returned: when target-aware migrations are planned
  type: str
"""

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_evacuation,
    node_module,
)


def main() -> None:
    spec = node_module.argument_spec(
        node={"type": "str", "required": True},
        target_aware={"type": "bool", "default": True},
        concurrency={"type": "int", "default": 2},
        retries={"type": "int", "default": 2},
        migration_timeout={"type": "int", "default": 900},
        timeout={"type": "int", "default": 3600},
        volume_timeout={"type": "int", "default": 1800},
        pdb_timeout={"type": "int", "default": 1800},
        shutdown_timeout={"type": "int", "default": 600},
        shutdown_all={"type": "bool", "default": False},
    )
    module = node_module.new_module(spec)
    p = module.params
    if p["concurrency"] < 1 or p["retries"] < 0:
        module.fail_json(msg="concurrency must be >= 1 and retries >= 0")

    def step(kube, writer):  # type: ignore[no-untyped-def]
        res = node_evacuation.evacuate(
            kube, writer, p["node"], target_aware=p["target_aware"],
            concurrency=p["concurrency"], retries=p["retries"],
            migration_timeout=p["migration_timeout"], timeout=p["timeout"],
            volume_timeout=p["volume_timeout"], pdb_timeout=p["pdb_timeout"],
            shutdown_all=p["shutdown_all"], shutdown_timeout=p["shutdown_timeout"])
        res["evacuation"] = res.pop("plan")
        return res

    node_module.run(module, step)


if __name__ == "__main__":
    main()
