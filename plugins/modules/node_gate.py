"""Phase entry/exit and the per-batch gate of the node loop (see DOCUMENTATION)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_gate
short_description: Enter/finish the NodeUpgrade phase, check whose turn it is, hold paused nodes
version_added: "0.1.0"
description:
  - I(step=enter) checks the plan reached C(ClusterUpgraded) (or is already in or past
    C(NodeUpgrading)) and sets C(NodeUpgrading); nodes without a state start at
    C(ImagePreloaded). On a multi-node cluster it then hands the roll to Rancher, once
    (guarded by C(status.provisionGeneration)) with one merge patch of
    C(clusters.provisioning.cattle.io fleet-local/local) with C(spec.kubernetesVersion) =
    C(releaseMetadata.kubernetes), C(spec.rkeConfig.provisionGeneration) + 1 and the
    C(upgradeStrategy) (concurrency 1, drain options, pre/post drain hooks
    C(management.harvesterhci.io/pre-hook)/C(post-hook)).
  - I(step=enter) on a multi-node cluster also holds the cluster settings for the roll, as
    Harvester's upgrade controller does before the node upgrades - Longhorn
    C(replica-replenishment-wait-interval) raised to 1800 when lower, Longhorn
    C(auto-cleanup-system-generated-snapshot) off for targets before v1.6.1, the
    C(kube-system/descheduler) addon disabled when enabled. The original values are saved in
    plan annotations before anything is changed (M(harvester.upgrade.finalize),
    M(harvester.upgrade.upgrade_abort) and plan deletion restore them); a resumed run keeps
    the saved originals and holds them again, unless I(prerun_held). Check mode only reports
    it (RV(settings)).
  - I(step=batch) runs at the start of each batch of the serial node play. It drops nodes that
    are already upgraded (resume) and fails, naming both, when Rancher is draining a node that
    is not in the batch (or, when Rancher is between nodes, the batch is not the next
    not-yet-upgraded node in Rancher's order).
  - I(step=pause) holds a node listed in the plan's C(spec.nodeUpgradeOption.pauseNodes) in
    C(UpgradePaused) until it is removed from the list or I(pause_timeout) passes; then
    C(paused=true) tells the play to end the run cleanly (a later run resumes).
  - I(step=finish) sets C(NodeUpgraded) once every node is done and Rancher removed its
    post-drain annotations (as upgrade-toolkit's NodeUpgrade PostRun).
  - With no I(plan) named and no active UpgradePlan (the cluster is up to date, or the plan
    already ended), every step exits unchanged with C(status=no_plan) and the node play skips,
    as the cluster phases do. A named plan that does not exist is an error.
author:
  - harvester-upgrade developers (@harvester-upgrade)
options:
  step:
    description: What to do.
    type: str
    choices: [enter, batch, pause, finish]
    required: true
  plan:
    description: UpgradePlan name; default the active plan.
    type: str
  batch:
    description: Node names of the current batch (I(step=batch)).
    type: list
    elements: str
  node:
    description: Node (I(step=pause)).
    type: str
  pause_timeout:
    description: Seconds a paused node waits before the run ends cleanly; 0 ends at once.
    type: int
    default: 3600
  timeout:
    description: Seconds to wait for Rancher to settle (I(step=finish)).
    type: int
    default: 1800
  head_start:
    description:
      - I(step=enter) only. Once the phase is entered, start the evacuation of the first node
        Rancher asks to drain (within I(head_start_wait) seconds), as
        M(harvester.upgrade.node_cycle) does for the next node after each node, and finish it
        within I(head_start_finish) seconds (answer its pre-drain, start its OS upgrade Job).
        That node's own cycle adopts what was started or done.
      - When the plan already shows a node of I(play) whose pre-drain is answered and that is
        not upgraded yet (C(PreDrained), C(PostDraining), C(WaitingReboot)), the head start is
        done (in a whole run, by the call of M(harvester.upgrade.cluster_upgrade) that entered
        NodeUpgrade through its C(then)); nothing is awaited or started, and C(why) says so.
      - Nothing is started for a paused node, a node the gate would refuse, a node that Longhorn
        or a PDB makes wait, a node outside I(play), a single-node cluster, or in check mode.
        Nothing here fails the task.
    type: bool
    default: false
  head_start_wait:
    description: Seconds to wait for Rancher to ask for the first node (I(head_start)).
    type: int
    default: 10
  head_start_finish:
    description: Seconds to wait for the first node's VMs to be off it, then for Rancher's
      drain (I(head_start)), as M(harvester.upgrade.node_cycle)'s I(head_start_finish);
      C(0) only starts the evacuation.
    type: int
    default: 0
  prerun_held:
    description:
      - I(step=enter) only. This run's previous call (ClusterUpgrade's, C(then)) has just
        entered NodeUpgrade, its PreRun holding the settings. When the plan says so too
        (C(NodeUpgrading), C(status.provisionGeneration) recorded, every node with a state),
        the settings are not read and held again. Otherwise (a resumed run) they are.
    type: bool
    default: false
  play:
    description: The node play's hosts (I(head_start)); empty means every managed node.
    type: list
    elements: str
    default: []
  then:
    description:
      - I(step=finish) only. The phases to start once NodeUpgrade is completed in this call
        (C(image_cleanup), its Plan created and its wait left to its own task), as the
        C(then) option of the phase modules (doc fragment C(harvester.upgrade.phase), filter
        P(harvester.upgrade.phase_chain#filter)). Checked before anything is done; ignored in
        check mode.
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
"""

EXAMPLES = r"""
- name: Check Rancher is asking for this batch's node
  harvester.upgrade.node_gate:
    step: batch
    batch: "{{ ansible_play_batch }}"
  run_once: true
"""

RETURN = r"""
todo:
  description: Nodes of the batch still to upgrade (I(step=batch)).
  returned: step=batch
  type: list
  elements: str
done:
  description: Nodes of the batch already upgraded (I(step=batch)).
  returned: step=batch
  type: list
  elements: str
expected:
  description: Nodes Rancher is asking for (I(step=batch)).
  returned: step=batch
  type: list
  elements: str
paused:
  description: The node is still paused after I(pause_timeout) (I(step=pause)).
  returned: step=pause
  type: bool
phase:
  description: The plan's phase after the step (I(step=enter)/I(step=finish)).
  returned: step=enter or step=finish
  type: str
single_node:
  description: Single-node cluster (I(step=enter)).
  returned: step=enter
  type: bool
nodes:
  description: The managed nodes in Rancher's drain order, each with C(name), C(groups) and
    C(vars), as M(harvester.upgrade.node_info) returns them (I(step=enter); the playbook
    C(add_host)s them without a second module call).
  returned: step=enter, when the plan is in or past NodeUpgrade
  type: list
  elements: dict
order:
  description: Node names in Rancher's drain order (I(step=enter)).
  returned: step=enter, when the plan is in or past NodeUpgrade
  type: list
  elements: str
settings:
  description: What I(step=enter) did (or would do, in check mode) to the cluster settings
    held for the roll, one line each.
  returned: step=enter, when the plan is in NodeUpgrading
  type: list
  elements: str
head_start:
  description: What I(head_start) did (I(step=enter)) - C(next) (the node Rancher drains
    first), C(started) (migrations created), C(stopping) (VMs asked to stop), C(why) (why
    nothing or not everything was started or finished), C(answered) (its pre-drain answered),
    C(migrated) (VMs moved off it, when answered), C(job) (its OS upgrade Job, when created).
  returned: step=enter with I(head_start), when the plan is in NodeUpgrading
  type: dict
started:
  description: The phases I(then) started (I(step=finish)), each with C(phase), C(status)
    (C(started), or C(completed) when it had nothing to wait for) and C(actions).
  returned: step=finish, when I(then) started a phase
  type: list
  elements: dict
pending:
  description: Nodes not yet upgraded (I(step=finish)).
  returned: step=finish
  type: list
  elements: str
status:
  description: C(no_plan) when there is no active UpgradePlan (nothing to do).
  returned: when there is no active plan
  type: str
  sample: no_plan
"""

import copy

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    cycle_kube,
    errors,
    node_gate,
    node_head_start,
    node_module,
    node_phase,
    phase_table,
    phases,
    pipeline,
)


def main() -> None:
    spec = node_module.argument_spec(
        step={"type": "str", "required": True, "choices": ["enter", "batch", "pause", "finish"]},
        batch={"type": "list", "elements": "str"},
        node={"type": "str"},
        pause_timeout={"type": "int", "default": 3600},
        timeout={"type": "int", "default": 1800},
        prerun_held={"type": "bool", "default": False},
        **copy.deepcopy(node_head_start.HEAD_START_OPTIONS),
        then={"type": "list", "elements": "dict", "default": []},
    )
    module = node_module.new_module(spec, required_if=[("step", "batch", ["batch"]),
                                                       ("step", "pause", ["node"])])
    p = module.params
    try:
        chain = pipeline.chain_items(p, phases.get("NodeUpgrade"), phase_table.TABLE) \
            if p["step"] == "finish" else []
    except ValueError as exc:
        module.fail_json(msg=str(exc))

    head_start = p["step"] == "enter" and p["head_start"] and not module.check_mode

    def step(kube, writer):  # type: ignore[no-untyped-def]
        if head_start and isinstance(kube, cycle_kube.CycleKube):
            # the head start reads the whole cluster several times (facts, gate, evacuation
            # plan, Longhorn): each set listed once, side by side, then followed by a watch;
            # none when the plan, as this call has just listed it, shows it done
            # (ClusterUpgrade's call did it): it returns at once, and the enter alone reads
            # each set once (a list, not a list and a watch) and not the plan again
            done = bool(node_head_start.answered_already(writer.plan, list(p["play"] or [])))
            if done:
                kube.informing = False
            else:
                kube.prefetch(wait=False)
            try:
                return enter(kube, writer, fresh=done)
            finally:
                kube.close()
        return enter(kube, writer) if p["step"] == "enter" else other(kube, writer)

    def enter(kube, writer, fresh=False):  # type: ignore[no-untyped-def]
        if module.check_mode:
            try:
                return node_phase.enter_phase(kube, writer)
            except errors.NodeLoopError as exc:
                return {"changed": False, "phase": "", "single_node": False,
                        "warning": str(exc)}
        if head_start:
            return node_head_start.enter_with_head_start(
                kube, writer, list(p["play"] or []), p["head_start_wait"],
                p["head_start_finish"], held=p["prerun_held"], fresh=fresh)
        return node_phase.enter_phase(kube, writer, held=p["prerun_held"])

    def other(kube, writer):  # type: ignore[no-untyped-def]
        if p["step"] == "batch":
            res = node_gate.gate(kube, writer, p["batch"])
            res["changed"] = False
            return res
        if p["step"] == "pause":
            return node_gate.wait_unpaused(kube, writer, p["node"], p["pause_timeout"])
        return phase_table.finish_node_upgrade(kube, writer, p["timeout"], chain)

    node_module.run(module, step, skip_without_plan=True,
                    client=cycle_kube.CycleKube if head_start else node_module.Kube)


if __name__ == "__main__":
    main()
