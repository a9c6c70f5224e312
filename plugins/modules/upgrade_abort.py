#!/usr/bin/python
# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Ansible module harvester.upgrade.upgrade_abort: stop an upgrade and clean up after it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: upgrade_abort
short_description: Abort an UpgradePlan with upgrade-toolkit's rules and clean up after it
version_added: 0.1.0
description:
  - Refused while the plan is C(ClusterUpgrading) or C(NodeUpgrading) (the toolkit's hard
    deletion rule, reference F.3) unless O(force) - then the cluster may stay at mixed
    versions.
  - Otherwise runs the toolkit's C(CleanupUpgradeResources) (repo Deployment/Service, SUC
    plans, jobs, the ISO image, C(pendingOSImage), Rancher C(upgradeStrategy), Longhorn and
    descheduler settings), starts again the VMs the collection shut down (ConfigMap
    C(<plan>-restore-vm), regardless of C(spec.restoreVM)), removes the collection's
    C(kubevirt.io/drain) taint from nodes unless Rancher is in the middle of a node (a
    machine-plan Secret carries C(rke.cattle.io/pre-drain)), and marks the plan C(Failed)
    with condition reason C(Aborted). The plan object is kept (the record); the restore
    ConfigMap goes with it when it is deleted (ownerReference).
  - Idempotent; an already Succeeded plan is not touched, an aborted/failed one is cleaned
    up again.
options:
  plan:
    description: UpgradePlan name; default the active one (else the newest).
    type: str
  force:
    description: Abort even in C(ClusterUpgrading)/C(NodeUpgrading).
    type: bool
    default: false
  reason:
    description: Why (recorded in the plan's condition message and the Event).
    type: str
    default: aborted by the operator
  restore_timeout:
    description: Seconds to wait for the restored VMs of one node to run.
    type: int
    default: 600
extends_documentation_fragment:
  - harvester.upgrade.auth
attributes:
  check_mode:
    description: Can run in check mode; nothing in the cluster is changed and the result
      reports what would be done.
    support: full
author:
  - harvester-upgrade developers (@harvester-upgrade)
"""

EXAMPLES = r"""
- name: Abort the active upgrade
  harvester.upgrade.upgrade_abort:
    reason: maintenance window over
"""

RETURN = r"""
plan:
  description: The plan aborted (null when there was none).
  returned: always
  type: str
actions:
  description: What was done (or would be, in check mode).
  returned: always
  type: list
  elements: str
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    args,
    lock,
    node_order,
    node_steps,
    phase_actions,
    phases,
    plan_status,
    plan_writer,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_kube as nk,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)

HARD = {"ClusterUpgrading": "the cluster is being upgraded",
        "NodeUpgrading": "nodes are being upgraded"}


def _pick(kube: Kube, name: str | None) -> dict[str, Any] | None:
    plan = plan_writer.resolve(kube, name)
    if plan is None and not name:
        plans = plan_writer.list_plans(kube)
        plans.sort(key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))
        plan = plans[-1] if plans else None
    return plan


def rancher_mid_node(kube: Kube) -> list[str]:
    secrets = kube.list("v1", "Secret", namespace=c.FLEET_NS) or []
    return [s["metadata"]["name"] for s in secrets
            if node_order.PRE_DRAIN in ((s.get("metadata") or {}).get("annotations") or {})]


def main() -> None:
    module = AnsibleModule(argument_spec=args.spec(
        plan={"type": "str"}, force={"type": "bool", "default": False},
        reason={"type": "str", "default": "aborted by the operator"},
        restore_timeout={"type": "int", "default": 600}), supports_check_mode=True)
    p = module.params
    actions: list[str] = []
    try:
        kube = Kube.from_module(module)
        plan = _pick(kube, p.get("plan"))
        if plan is None:
            module.exit_json(changed=False, plan=None, actions=[], msg="no UpgradePlan to abort")
        name = plan["metadata"]["name"]
        current = (plan.get("status") or {}).get("currentPhase")
        if current == phases.SUCCEEDED:
            module.exit_json(changed=False, plan=name, actions=[],
                             msg=f"UpgradePlan {name} already Succeeded; nothing to abort")
        if current in HARD and not p["force"]:
            module.fail_json(plan=name, actions=[], msg=(
                f"cannot abort UpgradePlan {name} while {HARD[current]} ({current}): the "
                "toolkit refuses it too. Wait for the phase to end, or set "
                "upgrade_abort_force=true (force) to abort anyway - the cluster may be left "
                "at mixed versions and Rancher keeps upgrading the remaining nodes"))
        lock.hold(kube, module)
        writer = plan_writer.PlanWriter(kube, plan, module.check_mode)
        actions += phase_actions.cleanup_resources(kube, writer, module.check_mode)
        # VMs the collection shut down, and its drain taint
        nkube = nk.Kube(kube.dyn, check_mode=module.check_mode)
        nwriter = nk.PlanWriter(nkube, plan)
        cm = kube.get("v1", "ConfigMap", f"{name}-restore-vm", c.UPGRADE_NS) or {}
        for node in sorted((cm.get("data") or {})):
            if module.check_mode:
                actions.append(f"would restore VMs of {node}")
                continue
            res = node_steps.restore_vms(nkube, nwriter, node, timeout=p["restore_timeout"],
                                         force=True)
            if res.get("restored") or res.get("failed"):
                actions.append(f"restore VMs of {node}: {len(res.get('restored') or [])} "
                               f"started, failed: {res.get('failed') or []}")
        busy = rancher_mid_node(kube)
        for node in kube.list(*c.NODE):
            n = node["metadata"]["name"]
            if any(t.get("key") == "kubevirt.io/drain"
                   for t in (node.get("spec") or {}).get("taints") or []):
                if busy:
                    actions.append(f"left the kubevirt.io/drain taint on {n}: Rancher is "
                                   f"mid-node ({', '.join(busy)} has pre-drain)")
                elif node_steps.untaint_node(nkube, n):
                    actions.append(f"{'would remove' if module.check_mode else 'removed'} "
                                   f"the kubevirt.io/drain taint from {n}")
        msg = f"Aborted: {p['reason']}" + (f" (forced in {current})" if current in HARD else "")

        def abort(s: dict[str, Any]) -> list[Any]:
            events = plan_status.fail(s, msg, writer.now(), writer.generation)
            plan_status.set_condition(s, plan_status.COND_PROGRESSING, "False", "Aborted", msg,
                                      writer.now(), writer.generation)
            return events

        if current != phases.FAILED:
            writer.update(abort)
            actions.append(f"marked UpgradePlan {name} Failed (Aborted)")
        module.exit_json(changed=bool(actions), plan=name, actions=actions,
                         msg=f"UpgradePlan {name}: {msg}; {len(actions)} actions")
    except (ApiError, plan_writer.PlanError, nk.NodeLoopError) as exc:
        module.fail_json(msg=f"abort: {exc}", actions=actions)


if __name__ == "__main__":
    main()
