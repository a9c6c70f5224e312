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
    with condition reason C(Aborted). The plan object is kept (the record) and loses the
    collection's finalizer C(harvester-upgrade.harvesterhci.io/cleanup) (its cleanup ran);
    the restore ConfigMap goes with it when it is deleted (ownerReference). A plan deleted
    with C(kubectl delete) (kept C(Terminating) by that finalizer) is cleaned up the same way
    and then goes away.
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
  - kubernetes.core.k8s_auth_options
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

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    args,
    errors,
    lock,
    module_factory,
    phases,
    plan_cleanup,
    plan_writer,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)

HARD = plan_cleanup.HARD


def _pick(kube: Kube, name: str | None) -> dict[str, Any] | None:
    plan = plan_writer.resolve(kube, name)
    if plan is None and not name:
        plans = plan_writer.list_plans(kube)
        plans.sort(key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))
        plan = plans[-1] if plans else None
    return plan


def main() -> None:
    module = module_factory.new_module(argument_spec=args.spec(
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
            # nothing to abort; a finalizer left by a run killed after Succeeded goes
            gone = plan_cleanup.remove_finalizer(kube, name, module.check_mode)
            module.exit_json(changed=gone, plan=name, actions=[
                f"removed finalizer {plan_cleanup.FINALIZER}"] if gone else [],
                msg=f"UpgradePlan {name} already Succeeded; nothing to abort")
        if current in HARD and not p["force"]:
            module.fail_json(plan=name, actions=[], msg=(
                f"cannot abort UpgradePlan {name} while {HARD[current]} ({current}): the "
                "toolkit refuses it too. Wait for the phase to end, or set "
                "upgrade_abort_force=true (force) to abort anyway - the cluster may be left "
                "at mixed versions and Rancher keeps upgrading the remaining nodes"))
        lock.hold(kube, module)
        msg = f"Aborted: {p['reason']}" + (f" (forced in {current})" if current in HARD else "")
        actions += plan_cleanup.abort(kube, plan, msg, check_mode=module.check_mode,
                                      restore_timeout=p["restore_timeout"])
        module.exit_json(changed=bool(actions), plan=name, actions=actions,
                         msg=f"UpgradePlan {name}: {msg}; {len(actions)} actions")
    except (ApiError, plan_writer.PlanError, errors.NodeLoopError) as exc:
        module.fail_json(msg=f"abort: {exc}", actions=actions)


if __name__ == "__main__":
    main()
