"""Upgrade one node end to end in one module call (see DOCUMENTATION)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_cycle
short_description: Upgrade one Harvester node end to end in one process (fast path of the node loop)
version_added: "0.2.0"
description:
  - Runs the whole NodeUpgrade of one node in one module process, calling the same steps as the
    step-by-step role tasks, in the same order and with the same resume rules
    (C(node_upgrade_mode=node) of role C(harvester.upgrade.node_upgrade)).
  - First the batch check of M(harvester.upgrade.node_gate) (is Rancher asking for this node?
    a node that is already upgraded ends here with I(done=true)) and the pauseNodes check (a
    node listed there is recorded C(UpgradePaused); the module waits up to I(pause_timeout)
    seconds and returns I(paused=true) if it is still listed, changing nothing else).
  - Multi-node cluster, as M(harvester.upgrade.drain_hook_ack), M(harvester.upgrade.vm_evacuate),
    M(harvester.upgrade.node_job) and M(harvester.upgrade.vm_restore) do one by one - wait for
    Rancher's C(rke.cattle.io/pre-drain), evacuate the VMs (skipped when the node is already past
    pre-drain), answer pre-drain, wait for C(rke.cattle.io/post-drain), run the post-drain Job and
    wait for the node to come back Ready on the new OS, answer post-drain, wait until Rancher
    releases the node, restart the VMs shut down for it.
  - Single-node cluster (I(single_node=true)) - shut down and record every VM, run the
    single-node-upgrade Job and wait for the reboot, restart the VMs.
  - The same C(nodeUpgradeStatuses) writes and Events as the step modules. Every step is
    idempotent and resumes from the cluster's state, so re-running after an interruption (or a
    failure) continues where the node is.
  - Faster than one task per step - one API client and discovery, the upgrade lock taken once
    (renewed when due), reads that the previous step's view still answers served from memory,
    and no task boundary between a hook and the reaction to it (docs/performance.md).
  - Head start (I(head_start), serial play of one node at a time) - once the node is done,
    when Rancher asks within I(head_start_wait) seconds to drain another node of I(play), the
    module marks that node C(PreDraining), asks its non-migratable VMs to stop and creates its
    planned migrations (KubeVirt runs them as its per-node and per-cluster limits allow; with
    Harvester's migrate action, which pins only what KubeVirt runs at once, two and then the
    next as one ends), then waits up to I(head_start_finish) seconds for them to end and,
    when the node is empty, taints it and answers its pre-drain (node C(PreDrained)), then
    creates its OS upgrade Job once Rancher drained it (node C(PostDraining)); whatever is
    not done by then,
    that node's own cycle adopts. Rancher's pre-drain is then answered within the watch
    latency instead of after the play's hand-over to the next host, which overlaps the OS
    install. Nothing is started for a paused node, a node a PDB makes wait (or Longhorn, when
    a VM there has to be shut down), or a node outside I(play); a head start never fails
    the task or the plan.
  - Once Rancher has cordoned the node, its workload pods that a PodDisruptionBudget would
    make Rancher's drain wait for (controller-owned, outside the platform's namespaces, not
    DaemonSet or VM launcher pods) are evicted through the eviction API before the VMs
    migrate, and those still there once more after they are off (also in a head start, for
    the node it starts). A budget's refusal (429) or any other failure leaves the pod to
    Rancher's drain; nothing waits for a budget. Not done when Rancher's drain options say
    C(enabled=false) or C(disableEviction=true) (C(pod_evictions), docs/node-upgrade.md).
  - On a deadline the module fails with C(awaited) and C(last_seen) (and the node/plan marked
    failed as the step modules do); C(steps) still lists what was done.
author:
  - harvester-upgrade developers (@harvester-upgrade)
options:
  node:
    description: Node name.
    type: str
    required: true
  plan:
    description: UpgradePlan name; default the active plan.
    type: str
  batch:
    description: Nodes of the current batch of the serial play; Rancher asking for none of them
      (or draining a node outside it) is an error. Default - just I(node).
    type: list
    elements: str
  single_node:
    description: Take the single-node path (the plan's C(status.singleNode); from
      M(harvester.upgrade.node_gate) I(step=enter)).
    type: bool
    default: false
  pause_timeout:
    description: Seconds a node listed in C(pauseNodes) waits to be released before the module
      returns I(paused=true). C(0) returns at once.
    type: int
    default: 0
  hook_timeout:
    description: Seconds to wait for Rancher's pre-drain and post-drain annotations.
    type: int
    default: 7200
  target_aware:
    description: Migrate VMs to already-upgraded nodes (C(false) is the naive baseline).
    type: bool
    default: true
  concurrency:
    description: Live migrations in flight at once from this node.
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
  evacuation_timeout:
    description: Seconds the whole evacuation may take.
    type: int
    default: 3600
  volume_timeout:
    description: Seconds to wait for every other node to be C(Ready) and the Longhorn
      volumes to be safe (rebuilds), before the evacuation (for Longhorn after it when only
      live migrations are planned) and again right before the pre-drain hook is answered.
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
  job_timeout:
    description: Seconds the pre-drain and post-drain (or single-node-upgrade) Jobs may
      run; the pre-drain Job's run includes upgrade_node.sh's wait for every running Longhorn
      volume to be healthy.
    type: int
    default: 3600
  node_timeout:
    description: Seconds for the node to come back Ready on the new OS after the Job.
    type: int
    default: 1800
  release_timeout:
    description: Seconds for Rancher to uncordon the node and clear its annotations.
    type: int
    default: 1800
  restore_timeout:
    description: Seconds to wait for the restored VMs to run.
    type: int
    default: 900
  restore:
    description: Override the plan's C(spec.restoreVM).
    type: bool
  restore_fail_on_error:
    description: Fail when a VM could not be restored.
    type: bool
    default: false
  play:
    description: The hosts (node names) of the serial play, for the head start; empty - no
      head start.
    type: list
    elements: str
    default: []
  head_start:
    description: Start the evacuation of the node Rancher drains next before returning (see
      the description). Only with I(target_aware) and a batch of one node.
    type: bool
    default: true
  head_start_wait:
    description: Seconds to wait, after this node is done, for Rancher to ask for the next one.
    type: int
    default: 10
  head_start_finish:
    description:
      - Seconds the head start then waits for the next node's VMs to be off it (every
        migration succeeded, every stop done); when they are, it taints that node and answers
        its pre-drain as that node's own cycle would and, once Rancher drained it within the
        same time, creates its OS upgrade Job, so the hand-over to the next host overlaps the
        OS install. Otherwise (time out, a failed migration, Longhorn or a PDB
        not ready) that node's own cycle carries on from where the head start stopped.
      - C(0) - only start the evacuation.
    type: int
    default: 30
  then:
    description:
      - For the play's last node (no other node of I(play) left). Once it is done, complete
        NodeUpgrade (as M(harvester.upgrade.node_gate) I(step=finish) does, which then finds it
        done) and start the phases listed, as the C(then) option of the phase modules (doc
        fragment C(harvester.upgrade.phase), filter P(harvester.upgrade.phase_chain#filter);
        C(image_cleanup), its Plan created and its wait left to its own task). Nothing is
        completed or started while nodes outside the play are still to do. Checked before
        anything is done.
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
notes:
  - Check mode only reads - the batch check, the pause check (no wait) and the evacuation
    plan of the node (C(evacuation)).
  - The step-by-step modules remain the reference; this module calls the same code.
  - For a node found paused, its action plugin calls the module first with I(pause_timeout=0),
    says how to resume the node, then calls it again with the task's I(pause_timeout);
    I(summary) holds the lines of both calls. The harvester.upgrade.harvester_progress callback
    prints one line per step (C(node cycle of <node>:)).
seealso:
  - module: harvester.upgrade.drain_hook_ack
  - module: harvester.upgrade.vm_evacuate
  - module: harvester.upgrade.node_job
  - module: harvester.upgrade.vm_restore
"""

EXAMPLES = r"""
- name: Upgrade the node in one module call
  harvester.upgrade.node_cycle:
    node: "{{ inventory_hostname }}"
    batch: "{{ ansible_play_batch }}"
  register: cycle

- name: One line per step
  ansible.builtin.debug:
    msg: "{{ cycle.summary }}"

- name: Single-node cluster, do not wait for a paused node
  harvester.upgrade.node_cycle:
    node: node-1
    single_node: true
    pause_timeout: 0
"""

RETURN = r"""
node:
  description: The node.
  returned: always
  type: str
done:
  description: The node was already upgraded (nothing else ran).
  returned: always
  type: bool
paused:
  description: The node is listed in C(pauseNodes) and was not released within I(pause_timeout);
    nothing after the pause check ran.
  returned: always
  type: bool
passed:
  description: The node was already past pre-drain (resumed run); evacuation was skipped.
  returned: always
  type: bool
status:
  description: C(no_plan) when no plan is named and none is active (nothing to do).
  returned: when no plan is active
  type: str
steps:
  description: One entry per step that ran - C(step), C(status) (done, passed, skipped,
    failed), C(changed), C(seconds), C(detail).
  returned: always
  type: list
  elements: dict
summary:
  description: The same, one line of text per step (for a debug task).
  returned: always
  type: list
  elements: str
migrated:
  description: VMs migrated in this run, their final node and attempts.
  returned: always
  type: list
  elements: dict
shutdown:
  description: VMs shut down (ns/name).
  returned: always
  type: list
  elements: str
restored:
  description: VMs (ns/name) restarted after the upgrade.
  returned: always
  type: list
  elements: str
failed:
  description: VMs that could not be restored, with the reason.
  returned: always
  type: list
  elements: str
head_start:
  description: What the head start did - C(next) (the node Rancher drains next), C(started)
    (VMs whose migration started), C(stopping) (VMs asked to stop), C(why) (why nothing or not
    everything was started or finished), C(answered) (its pre-drain answered here),
    C(migrated) (VMs this run's migrations moved off it, when answered), C(job) (its OS
    upgrade Job when the head start created it), C(pod_evictions) (as below, for that node).
  returned: when a head start ran to its end
  type: dict
evacuation:
  description: The evacuation decision per VM (as M(harvester.upgrade.vm_evacuate)).
  returned: when the evacuation step ran
  type: dict
pod_evictions:
  description:
    - Pods evicted ahead of Rancher's drain (as M(harvester.upgrade.vm_evacuate)) -
      C(evicted) (ns/name), C(left) (ns/name and why they were left to Rancher's drain),
      C(skipped) (why no pod was considered); in check mode C(would_evict) instead of
      C(evicted).
  returned: when the evacuation step evicted or considered pods
  type: dict
api:
  description: Reads served from memory (C(hits)) and sent (C(lists), C(gets)) by the cycle.
  returned: always
  type: dict
plan:
  description: UpgradePlan name.
  returned: when a plan is active
  type: str
events:
  description: Events emitted on the UpgradePlan.
  returned: when a plan is active
  type: list
  elements: dict
awaited:
  description: On a deadline, what was awaited.
  returned: failure
  type: str
last_seen:
  description: On a deadline, the last state seen.
  returned: failure
  type: str
finished:
  description: With I(then), on the play's last node - C(phase) (C(NodeUpgraded) once
    completed), C(pending) (nodes still to do) and C(started) (what I(then) started).
  returned: with I(then), on the play's last node
  type: dict
"""

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    cycle_kube,
    node_cycle,
    node_module,
    phase_table,
    phases,
    pipeline,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)

INT_OPTIONS = {"pause_timeout": 0, "hook_timeout": 7200, "concurrency": 2, "retries": 2,
               "migration_timeout": 900, "evacuation_timeout": 3600, "volume_timeout": 1800,
               "pdb_timeout": 1800, "shutdown_timeout": 600, "job_timeout": 3600,
               "node_timeout": 1800, "release_timeout": 1800, "restore_timeout": 900,
               "head_start_wait": 10, "head_start_finish": 30}


def main() -> None:
    spec = node_module.argument_spec(
        node={"type": "str", "required": True},
        batch={"type": "list", "elements": "str"},
        single_node={"type": "bool", "default": False},
        target_aware={"type": "bool", "default": True},
        restore={"type": "bool"},
        restore_fail_on_error={"type": "bool", "default": False},
        play={"type": "list", "elements": "str", "default": []},
        head_start={"type": "bool", "default": True},
        then={"type": "list", "elements": "dict", "default": []},
        **{k: {"type": "int", "default": v} for k, v in INT_OPTIONS.items()},
    )
    module = node_module.new_module(spec)
    p = module.params
    if p["concurrency"] < 1 or p["retries"] < 0:
        module.fail_json(msg="concurrency must be >= 1 and retries >= 0")
    try:
        pipeline.chain_items(p, phases.get("NodeUpgrade"), phase_table.TABLE)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    params = node_cycle.Params(
        node=p["node"], batch=list(p["batch"] or []), single_node=p["single_node"],
        target_aware=p["target_aware"], restore=p["restore"],
        restore_fail_on_error=p["restore_fail_on_error"], play=list(p["play"] or []),
        head_start=p["head_start"], then=list(p["then"] or []),
        **{k: p[k] for k in INT_OPTIONS})
    cycle = node_cycle.Cycle(p["node"])

    def extra(kube: Kube | None, writer: PlanWriter | None) -> dict[str, Any]:
        out: dict[str, Any] = {"node": p["node"], "steps": cycle.steps,
                               "summary": cycle.summary() if cycle.steps else []}
        if isinstance(kube, cycle_kube.CycleKube):
            out["api"] = dict(kube.stats)
        if writer is not None:
            out["plan"], out["events"] = writer.name, writer.events
        return out

    def step(kube: Kube, writer: PlanWriter) -> dict[str, Any]:
        try:
            result = node_cycle.run_cycle(kube, writer, params, cycle)  # type: ignore[arg-type]
        finally:
            if isinstance(kube, cycle_kube.CycleKube):
                kube.close()
        result["changed"] = cycle.changed
        return result

    node_module.run(module, step, skip_without_plan=True, client=cycle_kube.CycleKube,
                    extra=extra, no_plan_fields={"done": False, "paused": False,
                                                 "passed": False})


if __name__ == "__main__":
    main()
