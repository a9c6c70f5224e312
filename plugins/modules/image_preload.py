#!/usr/bin/python
# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Ansible module harvester.upgrade.image_preload: phase ImagePreload of a Harvester upgrade."""

from __future__ import annotations

DOCUMENTATION = r"""
module: image_preload
short_description: Pull the new release's images on every node (phase ImagePreload)
version_added: 0.1.0
description:
  - Checks upgrade eligibility (previous version, target, C(minUpgradableVersion)); O(force),
    C(spec.force) or annotation C(harvesterhci.io/skip-version-check) lift its rules except a
    downgrade and a target whose C(minUpgradableVersion) is above the running release, which
    only the plan's annotations C(harvester-upgrade.harvesterhci.io/allow-downgrade) and
    C(harvester-upgrade.harvesterhci.io/allow-version-skip) allow; a refusal sets the plan
    C(Failed).
  - Creates system-upgrade-controller Plan C(<plan>-image-preload) in C(cattle-system)
    (C(upgrade_node.sh prepare), concurrency from C(spec.imagePreloadOption.concurrency),
    unset or 0 means all nodes, negative skips the phase) and waits for its C(Complete) condition.
  - Records per-node progress (C(ImagePreloading), C(ImagePreloaded), C(ImagePreloadFailed)) in
    C(status.nodeUpgradeStatuses); progress lines show nodes preloaded N/M.
  - Works on the active UpgradePlan (or O(plan)) and follows its C(currentPhase) (phase
    ImagePreload); a phase completed earlier is verified,
    not redone; a phase the plan has not reached is refused with a clear message unless O(force).
  - Writes C(currentPhase), C(phaseTransitionTimestamps), the C(Progressing)/C(Degraded)/
    C(Available) conditions and the Events C(PhaseTransition)/C(PhaseCompleted) as the
    upgrade-toolkit does.
options:
  job_deadline_seconds:
    description:
      - C(jobActiveDeadlineSecs) of the SUC Plan. V(0) (the default) is no deadline, as the
        upgrade-toolkit writes it; a negative value leaves the field unset, so that the
        controller's own default (600 s) applies.
    type: int
    default: 0
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
- name: Run phase ImagePreload on the active plan
  harvester.upgrade.image_preload:
    timeout: 3600

- name: Run it on a named plan, out of order
  harvester.upgrade.image_preload:
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
  sample: ImagePreload
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
    module = module_factory.new_module(
        argument_spec=args.spec(args.PHASE,
                                job_deadline_seconds={"type": "int", "default": 0}),
        supports_check_mode=True)
    phase_table.run(module, "ImagePreload")


if __name__ == "__main__":
    main()
