"""Options shared by the phase modules of harvester.upgrade."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  plan:
    description:
      - Name of the UpgradePlan to work on.
      - Default is the active plan (the one whose C(Progressing) condition is C(True)).
    type: str
  force:
    description:
      - Run the phase even if the plan has not reached it yet (out of order).
      - For C(image_preload), also lift the upgrade-eligibility (version) rules, except a
        downgrade and a version skip (plan annotations
        C(harvester-upgrade.harvesterhci.io/allow-downgrade), C(allow-version-skip)).
    type: bool
    default: false
  timeout:
    description:
      - Seconds the phase may take in total. When they run out the plan becomes
        C(Failed) with a message naming what was awaited and the last state seen.
    type: int
    default: 3600
  progress_interval:
    description:
      - Seconds between progress lines while the phase waits (used with the
        collection's action plugin, which calls the module again until the phase ends).
    type: int
    default: 30
  deadline:
    description:
      - Absolute deadline (seconds since the epoch) set by the action plugin from
        O(timeout); not meant to be set by hand.
    type: float
  then:
    description:
      - The phases to start, in order, once this one has completed in this call (the
        playbook passes the cluster phases that follow in the same run, see the
        P(harvester.upgrade.phase_chain#filter) filter). Each entry is a mapping with
        C(phase) (the phase's tag, e.g. C(repo_create)) and the options of that phase's
        module that shape what it creates (C(job_deadline_seconds) for C(image_preload))
        or its deadline (C(timeout)); C(node_upgrade) takes the first node's head start as
        M(harvester.upgrade.node_gate) I(step=enter) does (C(head_start),
        C(head_start_wait), C(head_start_finish), C(play)), done by the call that enters
        NodeUpgrade once it is entered.
      - Each phase is entered and its first objects created exactly as its own module
        would, without waiting for them; its own task then resumes it. A phase that has
        nothing to wait for (C(metadata_populate)) is completed, and the next one started.
        The chain stops at the first phase that waits, or that the plan has not reached.
      - Ignored in check mode. Empty (the default) starts nothing.
    type: list
    elements: dict
    default: []
notes:
  - Waits use Kubernetes watches with a deadline, never fixed sleeps.
  - Check mode changes nothing in the cluster and reports what would be done (in the
    C(actions) result of the modules that return one).
"""
