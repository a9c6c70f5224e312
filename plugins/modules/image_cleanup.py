#!/usr/bin/python
# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Ansible module harvester.upgrade.image_cleanup: phase ImageCleanup of a Harvester upgrade."""

from __future__ import annotations

DOCUMENTATION = r"""
module: image_cleanup
short_description: Remove images of the previous release from the nodes (phase ImageCleanup)
version_added: 0.1.0
description:
  - Reads the image lists of the previous and the new release from the repository, and removes
    the images only the previous one used (minus the toolkit's retained names, minus every
    image a pod still running on a managed node uses) with system-upgrade-controller Plan
    C(<plan>-image-cleanup) (concurrency 1). Its container runs a shell script that calls the
    host's C(crictl rmi) for each image in env C(IMAGES); an image that cannot be removed is
    logged and does not fail the Job.
  - When the ISO has no image lists, records Warning Event C(ImageCleanupSkipped) and completes.
  - Records C(ImageCleaning)/C(ImageCleaned)/C(ImageCleanFailed) per node.
  - Works on the active UpgradePlan (or O(plan)) and follows its C(currentPhase) (phase
    ImageCleanup); a phase completed earlier is verified,
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
- name: Run phase ImageCleanup on the active plan
  harvester.upgrade.image_cleanup:
    timeout: 3600

- name: Run it on a named plan, out of order
  harvester.upgrade.image_cleanup:
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
  sample: ImageCleanup
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
images_removed:
  description: Number of images scheduled for removal.
  returned: when images were removed
  type: int
"""

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    args,
    module_factory,
    phase_table,
)


def main() -> None:
    module = module_factory.new_module(argument_spec=args.spec(args.PHASE),
                                       supports_check_mode=True)
    phase_table.run(module, "ImageCleanup")


if __name__ == "__main__":
    main()
