#!/usr/bin/python
# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Ansible module harvester.upgrade.cluster_upgrade: phase ClusterUpgrade of a Harvester upgrade."""

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_upgrade
short_description: Upgrade Rancher and the Harvester charts (the cluster-upgrade Job)
version_added: 0.1.0
description:
  - Leaves the Rancher cluster C(fleet-local/local) alone; its C(kubernetesVersion),
    C(provisionGeneration) and C(upgradeStrategy) are written together when NodeUpgrade begins
    (M(harvester.upgrade.node_gate) I(step=enter)).
  - Creates Job C(<plan>-cluster-upgrade) in C(harvester-system) (C(upgrade_manifests.sh) in the
    upgrade-toolkit image) and waits for it; a failed Job sets the plan C(Failed).
  - Works on the active UpgradePlan (or O(plan)) and follows its C(currentPhase) (phase
    ClusterUpgrade); a phase completed earlier is verified,
    not redone; a phase the plan has not reached is refused with a clear message unless O(force).
  - Writes C(currentPhase), C(phaseTransitionTimestamps), the C(Progressing)/C(Degraded)/
    C(Available) conditions and the Events C(PhaseTransition)/C(PhaseCompleted) as the
    upgrade-toolkit does.
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
- name: Run phase ClusterUpgrade on the active plan
  harvester.upgrade.cluster_upgrade:
    timeout: 3600

- name: Run it on a named plan, out of order
  harvester.upgrade.cluster_upgrade:
    plan: hvst-upgrade-abcde
    force: true
"""

RETURN = r"""
plan:
  description: Name of the UpgradePlan.
  returned: always
  type: str
  sample: hvst-upgrade-864fh
phase:
  description: The phase this module runs.
  returned: always
  type: str
  sample: ClusterUpgrade
status:
  description:
    - C(completed), C(verified) (done earlier), C(pending) (wait slice over; call again),
      C(not_reached), C(no_plan) or C(terminal).
  returned: always
  type: str
proceed:
  description: Whether the phase is done, so the next phase may run.
  returned: always
  type: bool
current_phase:
  description: C(status.currentPhase) of the plan afterwards.
  returned: when a plan was found
  type: str
actions:
  description: What was done (or, in check mode, would be done).
  returned: always
  type: list
  elements: str
events:
  description: Events recorded on the plan.
  returned: always
  type: list
  elements: dict
progress:
  description: Last progress line of a wait.
  returned: when status is pending
  type: str
duration:
  description: How long the module ran.
  returned: always
  type: str
started:
  description: The phases I(then) started after this one completed, each with C(phase),
    C(status) (C(started), or C(completed) when it had nothing to wait for) and C(actions).
  returned: when I(then) started a phase
  type: list
  elements: dict
"""

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    args,
    module_factory,
    phase_table,
)


def main() -> None:
    module = module_factory.new_module(argument_spec=args.spec(args.PHASE),
                                       supports_check_mode=True)
    phase_table.run(module, "ClusterUpgrade")


if __name__ == "__main__":
    main()
