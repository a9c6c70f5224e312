#!/usr/bin/python
# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Ansible module harvester.upgrade.finalize: clean up and mark the plan Succeeded."""

from __future__ import annotations

DOCUMENTATION = r"""
module: finalize
short_description: Clean up after an upgrade and mark the UpgradePlan Succeeded
version_added: 0.1.0
description:
  - Runs once the plan reached C(CleanedUp) - deletes what the plan created (ISO image,
    repository Deployment/Service, SUC Plans, Jobs, selected by the plan's labels), removes
    C(pendingOSImage) from Nodes, resets Rancher's C(upgradeStrategy) when the plan set
    it, restores the saved Longhorn C(replica-replenishment-wait-interval) and the
    descheduler addon, then sets C(Succeeded) (conditions C(Available=False/Executed),
    C(Progressing=False/Succeeded), Event C(UpgradeSucceeded)).
  - First it awaits the VMs the node loop asked to start again without waiting for them
    (the last node's, booting while ImageCleanup runs; marked
    C(harvester-upgrade.harvesterhci.io/restoring-for-node)), at most O(restore_timeout)
    seconds, with the C(RestoreVMCompleted)/C(RestoreVMFailed) event per node; a VM that
    does not run is reported and does not fail the plan, as in the toolkit.
  - On a C(Failed) plan named by O(plan), only cleans up (as the toolkit's Finalize does).
  - Idempotent; a C(Succeeded) plan is reported as done.
options:
  restore_timeout:
    description:
      - Seconds to await the VMs the node loop started and marked (within the phase's
        deadline).
    type: int
    default: 900
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
  - harvester.upgrade.phase
attributes:
  check_mode:
    description: Can run in check mode; nothing in the cluster is changed and the result
      reports what would be done.
    support: full
author:
  - harvester-upgrade developers (@harvester-upgrade)
"""

EXAMPLES = r"""
- name: Finish the active upgrade
  harvester.upgrade.finalize:

- name: Clean up after a failed plan
  harvester.upgrade.finalize:
    plan: hvst-upgrade-abcde
"""

RETURN = r"""
plan:
  description: Plan name.
  returned: always
  type: str
lock_released:
  description: The run's upgrade lock was released once the plan was Succeeded (nothing of
    the run writes after Finalize; the playbook's last play then has nothing to release).
  returned: when the plan was marked Succeeded
  type: bool
status:
  description: C(completed), C(verified), C(not_reached) or C(no_plan).
  returned: always
  type: str
actions:
  description: Objects deleted/changed (or that would be).
  returned: always
  type: list
  elements: str
restored:
  description: VMs (ns/name) awaited here after the node loop asked them to start, running.
  returned: always
  type: list
  elements: str
failed:
  description: Those of them that did not run, with the reason.
  returned: always
  type: list
  elements: str
current_phase:
  description: C(status.currentPhase) afterwards.
  returned: when a plan was found
  type: str
"""

import time
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    args,
    lock,
    module_factory,
    node_restore,
    phase_finalize,
    phases,
    pipeline,
    plan_cleanup,
    plan_status,
    plan_writer,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)


def main() -> None:
    module = module_factory.new_module(argument_spec=args.spec(
        args.PHASE, restore_timeout={"type": "int", "default": 900}), supports_check_mode=True)
    p = module.params
    started = time.time()
    out: dict[str, Any] = {"changed": False, "phase": "Finalize", "plan": None,
                           "actions": [], "events": [], "proceed": False, "restored": [],
                           "failed": []}
    try:
        kube = Kube.from_module(module)
        plan = plan_writer.resolve(kube, p.get("plan"))
        if plan is None:
            module.exit_json(status="no_plan", msg="no active UpgradePlan to finalize", **out)
        current = (plan.get("status") or {}).get("currentPhase")
        rel = phases.finalize_relation(current)
        if rel != "succeeded" and (rel != "not_reached" or p["force"]):
            lock.hold(kube, module)   # fails at once if another run holds the lock
        writer = plan_writer.PlanWriter(kube, plan, module.check_mode)
        out["plan"] = writer.name
        if rel == "succeeded":
            out["proceed"] = True
            # a run killed between Succeeded and dropping the finalizer: drop it now
            if plan_cleanup.remove_finalizer(kube, writer.name, module.check_mode):
                out.update(changed=True, actions=[
                    f"removed finalizer {plan_cleanup.FINALIZER}"])
            module.exit_json(status="verified", current_phase=current,
                             msg=f"UpgradePlan {writer.name} already Succeeded", **out)
        if rel == "not_reached" and not p["force"]:
            nxt = phases.next_to_run(current)
            module.exit_json(status="not_reached", current_phase=current, **out, msg=(
                f"UpgradePlan {writer.name} is at {current}"
                + (f" (next: {nxt.name}, tag {nxt.tag})" if nxt else "")
                + "; Finalize runs only after CleanedUp. Run the playbook without --tags to "
                "continue in order, or set force=true."))
        left = pipeline.phase_deadline(p, started) - time.time()
        vms = node_restore.await_marked_restores(kube, plan_writer.PlanWriter(kube, plan),
                                                 timeout=max(0.0, min(p["restore_timeout"],
                                                                      left)))
        out.update(restored=vms["restored"], failed=vms["failed"])
        out["actions"] = vms["lines"] + phase_finalize.cleanup_resources(kube, writer,
                                                                         module.check_mode)
        # the cleanup ran: deleting the plan later owes nothing. Before Succeeded, so that a
        # run killed in between finds the plan still active and ends it here again
        if plan_cleanup.drop_finalizer(kube, writer, module.check_mode):
            out["actions"].append(f"removed finalizer {plan_cleanup.FINALIZER}")
        if rel != "failed":
            writer.update(lambda s: plan_status.succeed(s, writer.now(), writer.generation))
            # the run writes nothing after this: the lock goes now, not one play later
            out["lock_released"] = lock.release_held(kube)
        out.update(changed=writer.changed or bool(out["actions"]), status="completed",
                   proceed=True, events=writer.recorder.emitted,
                   current_phase=writer.status.get("currentPhase"))
        module.exit_json(msg=f"UpgradePlan {writer.name} is {out['current_phase']}; "
                         f"{len(out['actions'])} cleanup actions", **out)
    except (ApiError, plan_writer.PlanError) as exc:
        module.fail_json(msg=f"Finalize: {exc}", **out)


if __name__ == "__main__":
    main()
