"""Run a node's upgrade Job and wait for it to come back on the new OS (see DOCUMENTATION)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_job
short_description: Run the post-drain or single-node upgrade Job and wait for the node's reboot
version_added: "0.1.0"
description:
  - Creates Job C(<plan>-node-upgrade-<type>-<node>) in C(harvester-system) as upgrade-toolkit
    does (toolkit image, privileged container C(apply) running C(upgrade_node.sh <type>) pinned to
    the node, host root at C(/host), plan labels and ownerReference), records
    C(PostDraining)/C(SingleNodeUpgrading), waits by watch for the Job (C(WaitingReboot) on
    success), then waits for the node to be Ready with C(status.nodeInfo.osImage) equal to the
    plan's C(releaseMetadata.os) (C(PostDrained)/C(SingleNodeUpgraded)).
  - A failed Job, a Job deadline or a node that does not return within I(node_timeout) marks
    the node C(PostDrainFailed)/C(SingleNodeUpgradeFailed) and the plan Failed.
  - Resumable; a node already on the target OS gets no Job and no second reboot.
author:
  - harvester-upgrade developers (@harvester-upgrade)
options:
  node:
    description: Node name.
    type: str
    required: true
  type:
    description: Job type.
    type: str
    choices: [post-drain, single-node-upgrade]
    default: post-drain
  plan:
    description: UpgradePlan name; default the active plan.
    type: str
  job_timeout:
    description: Seconds the Job may run.
    type: int
    default: 3600
  node_timeout:
    description: Seconds for the node to come back Ready on the new OS after the Job.
    type: int
    default: 1800
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
notes:
  - Check mode creates nothing and does not wait.
"""

EXAMPLES = r"""
- name: Upgrade the OS and wait for the reboot
  harvester.upgrade.node_job:
    node: "{{ inventory_hostname }}"
    type: post-drain
    node_timeout: 1800
"""

RETURN = r"""
job:
  description: Job name.
  returned: always
  type: str
plan:
  description: UpgradePlan name.
  returned: always
  type: str
"""

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_job,
    node_module,
)


def main() -> None:
    spec = node_module.argument_spec(
        node={"type": "str", "required": True},
        type={"type": "str", "choices": ["post-drain", "single-node-upgrade"],
              "default": "post-drain"},
        job_timeout={"type": "int", "default": 3600},
        node_timeout={"type": "int", "default": 1800},
    )
    module = node_module.new_module(spec)
    p = module.params
    node_module.run(module, lambda kube, writer: node_job.run_node_job(
        kube, writer, p["node"], p["type"], job_timeout=p["job_timeout"],
        node_timeout=p["node_timeout"]))


if __name__ == "__main__":
    main()
