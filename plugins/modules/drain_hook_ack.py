"""Answer Rancher's drain hooks for one node (see DOCUMENTATION)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: drain_hook_ack
short_description: Wait for and answer Rancher's pre/post-drain hooks for a node
version_added: "0.1.0"
description:
  - Rancher's provisioning-v2 planner marks the machine-plan secret of the node it upgrades
    (C(fleet-local/<machine>-machine-plan)) with C(rke.cattle.io/pre-drain) and later
    C(rke.cattle.io/post-drain), and waits until the hook annotations named in the cluster's
    C(upgradeStrategy) (by default C(management.harvesterhci.io/pre-hook) and
    C(management.harvesterhci.io/post-hook)) carry the same value.
  - I(step=await) waits by watch, with a deadline, for Rancher's annotation and records
    C(PreDraining)/C(PostDraining) in the UpgradePlan's C(nodeUpgradeStatuses). While waiting for
    C(pre-drain) it fails, naming both nodes, if Rancher starts draining a node outside the batch.
  - I(step=answer) copies the value into the hook annotation. For the pre-drain hook it first
    runs Job C(<plan>-node-upgrade-pre-drain-<node>) (C(upgrade_node.sh pre-drain), which undoes the
    rancher-system-agent drop-in the cluster upgrade left, so RKE2 can restart into the new
    version, removes RKE2's canal config, disables the RKE2 snapshot charts), waits for it and
    records C(PreDrained). With I(safety_timeout) it then waits, up to that many seconds, until
    it is still safe to take the node down (every other node C(Ready), no attached Longhorn
    volume left with its last healthy replica on this node; a node gone NotReady or a replica
    lost since the evacuation's checks); past it the node is marked C(PreDrainFailed), naming
    what is not safe, and nothing is answered.
  - I(step=released) waits until Rancher is done with the node (its drain annotations are gone,
    the node is uncordoned and its kubelet runs the release's Kubernetes version).
  - On a deadline the node is marked C(PreDrainFailed)/C(PostDrainFailed) and the plan Failed,
    naming what was awaited and the last state seen. Re-running after any interruption continues
    from the cluster's state (a hook already answered is not answered again).
author:
  - harvester-upgrade developers (@harvester-upgrade)
options:
  node:
    description: Node name.
    type: str
    required: true
  hook:
    description: Which hook.
    type: str
    choices: [pre-drain, post-drain]
    default: pre-drain
  step:
    description: What to do.
    type: str
    choices: [await, answer, released]
    default: await
  plan:
    description: UpgradePlan name; default the active plan.
    type: str
  batch:
    description: Nodes of the current batch; Rancher draining any other node is an error.
    type: list
    elements: str
  timeout:
    description: Seconds to wait (I(step=await), I(step=released), and the pre-drain Job of
      I(step=answer)).
    type: int
    default: 3600
  safety_timeout:
    description: I(step=answer) of the pre-drain hook only. Seconds to wait for the other nodes
      to be C(Ready) and the Longhorn volumes to be safe before answering; omitted, that is
      not checked here.
    type: int
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
notes:
  - Check mode reads only and never waits.
"""

EXAMPLES = r"""
- name: Wait until Rancher asks to drain the node
  harvester.upgrade.drain_hook_ack:
    node: "{{ inventory_hostname }}"
    hook: pre-drain
    step: await
    timeout: 7200

- name: Let Rancher drain it
  harvester.upgrade.drain_hook_ack:
    node: "{{ inventory_hostname }}"
    hook: pre-drain
    step: answer

- name: Wait until Rancher has finished with the node
  harvester.upgrade.drain_hook_ack:
    node: "{{ inventory_hostname }}"
    step: released
"""

RETURN = r"""
value:
  description: The value of Rancher's annotation (the drain options JSON), empty when passed.
  returned: always
  type: str
passed:
  description: The node was already beyond this hook (resumed run); nothing was awaited.
  returned: always
  type: bool
plan:
  description: UpgradePlan name.
  returned: always
  type: str
events:
  description: Events emitted on the UpgradePlan.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_hooks,
    node_module,
)


def main() -> None:
    spec = node_module.argument_spec(
        node={"type": "str", "required": True},
        hook={"type": "str", "choices": ["pre-drain", "post-drain"], "default": "pre-drain"},
        step={"type": "str", "choices": ["await", "answer", "released"], "default": "await"},
        batch={"type": "list", "elements": "str"},
        timeout={"type": "int", "default": 3600},
        safety_timeout={"type": "int"},
    )
    module = node_module.new_module(spec)
    p = module.params

    def step(kube, writer):  # type: ignore[no-untyped-def]
        if p["step"] == "await":
            return node_hooks.await_hook(kube, writer, p["node"], p["hook"], p["timeout"],
                                         p["batch"])
        if p["step"] == "answer":
            return node_hooks.answer_hook(kube, writer, p["node"], p["hook"],
                                          job_timeout=p["timeout"],
                                          safety_timeout=p["safety_timeout"])
        res = node_hooks.await_release(kube, writer, p["node"], p["timeout"])
        res.setdefault("value", "")
        res.setdefault("passed", False)
        return res

    node_module.run(module, step)


if __name__ == "__main__":
    main()
