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
notes:
  - Waits use Kubernetes watches with a deadline, never fixed sleeps.
  - Check mode changes nothing in the cluster and reports what would be done (in the
    C(actions) result of the modules that return one).
"""
