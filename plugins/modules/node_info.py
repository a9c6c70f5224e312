"""List the cluster's nodes in Rancher's drain order (see DOCUMENTATION)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_info
short_description: The cluster's nodes in the order Rancher drains them, with node-plan preview
version_added: "0.1.0"
description:
  - Reads Nodes, CAPI Machines, machine-plan Secrets, VMIs and the UpgradePlan and returns one
    entry per managed node in Rancher's drain order (the etcd init node, then the other etcd
    and control-plane nodes by machine name, then workers by machine name), with the same
    variables and groups the C(harvester.upgrade.nodes) inventory plugin gives.
  - Used by C(playbooks/node_upgrade.yml) to C(add_host) the nodes when no inventory is given.
  - With I(node_plan=true) also simulates the whole roll without touching anything - per node
    the VMs that would migrate and where, the VMs that would be shut down and why, and an
    estimated duration from VM memory and the migration bandwidth (measured from past
    migrations when known, else I(migration_bandwidth_mib_s)).
  - Read-only; never reports C(changed).
author:
  - harvester-upgrade developers (@harvester-upgrade)
options:
  plan:
    description: UpgradePlan name; default the active plan (none is fine).
    type: str
  node_plan:
    description: Also compute the node plan preview.
    type: bool
    default: false
  target_aware:
    description: Preview with target-aware placement.
    type: bool
    default: true
  migration_bandwidth_mib_s:
    description: Assumed live-migration bandwidth when none was measured.
    type: float
    default: 1024
  migration_overhead_s:
    description: Assumed fixed cost of one migration.
    type: float
    default: 10
  migration_concurrency:
    description: Migrations in flight per node.
    type: int
    default: 2
  node_overhead_s:
    description: Assumed time per node besides migrations (drain, OS install, reboot).
    type: float
    default: 600
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
"""

EXAMPLES = r"""
- name: Read the nodes in Rancher's order
  harvester.upgrade.node_info:
  register: nodes

- name: Add them to the in-memory inventory
  ansible.builtin.add_host:
    name: "{{ item.name }}"
    groups: "{{ item.groups }}"
    ansible_connection: local
  loop: "{{ nodes.nodes }}"
"""

RETURN = r"""
nodes:
  description: Nodes in Rancher's drain order.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Node name., type: str}
    groups: {description: Inventory groups., type: list, elements: str}
    vars: {description: Inventory variables (harvester_*)., type: dict}
order:
  description: Node names in drain order.
  returned: always
  type: list
  elements: str
single_node:
  description: Exactly one non-witness node.
  returned: always
  type: bool
node_plan:
  description: The preview (I(node_plan=true)).
  returned: when requested
  type: dict
"""

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_evacuation,
    node_facts,
    node_kube,
    node_module,
)


def main() -> None:
    spec = node_module.argument_spec(
        node_plan={"type": "bool", "default": False},
        target_aware={"type": "bool", "default": True},
        migration_bandwidth_mib_s={"type": "float", "default": 1024.0},
        migration_overhead_s={"type": "float", "default": 10.0},
        migration_concurrency={"type": "int", "default": 2},
        node_overhead_s={"type": "float", "default": 600.0},
    )
    module = node_module.new_module(spec)
    p = module.params

    def step(kube, _writer):  # type: ignore[no-untyped-def]
        try:
            plan = node_kube.find_plan(kube, p["plan"])
        except node_kube.NodeLoopError:
            if p["plan"]:
                raise
            plan = None
        facts = node_facts.cluster_facts(kube, plan)
        res = {"changed": False, **node_facts.inventory(facts),
               "plan": (plan or {}).get("metadata", {}).get("name")}
        if p["node_plan"]:
            bw = node_evacuation.measured_bandwidth(kube)
            res["node_plan"] = node_evacuation.node_plan(
                kube, plan, target_aware=p["target_aware"],
                bandwidth_mib_s=bw or p["migration_bandwidth_mib_s"],
                overhead_s=p["migration_overhead_s"], concurrency=p["migration_concurrency"],
                node_overhead_s=p["node_overhead_s"])
            res["node_plan"]["bandwidth_measured"] = bw is not None
        return res

    node_module.run(module, step, need_plan=False)


if __name__ == "__main__":
    main()
