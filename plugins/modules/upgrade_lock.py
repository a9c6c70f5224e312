#!/usr/bin/python
# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Ansible module harvester.upgrade.upgrade_lock: take, renew or release the upgrade lock."""

from __future__ import annotations

DOCUMENTATION = r"""
module: upgrade_lock
short_description: Take, renew or release the lock that keeps two upgrade runs apart
version_added: 0.1.0
description:
  - The lock is the Lease C(harvester-system/harvester-upgrade-lock) (C(coordination.k8s.io/v1)).
    Its C(holderIdentity) names the run and ends in a random token of the run
    (C(<name>/run-<token>)); C(<name>) is C(awx-job-<id>) under AWX, else
    C(<user>@<host>:<ansible-playbook pid>); environment variable
    C(HARVESTER_UPGRADE_LOCK_HOLDER) overrides the name.
  - O(state=acquired) creates a missing lease, renews the run's own, takes one nobody holds or
    a stale one (its holder is a run of this machine whose ansible-playbook is gone, proven by
    the run's token file); a lease of another run that is live by this machine's clock fails
    at once naming the holder; one this machine's clock calls expired is watched and taken only
    after it stayed unchanged for its C(leaseDurationSeconds) (clocks of two machines are
    never compared).
  - O(state=released) deletes the lease if this run holds it, with preconditions (its uid and
    resourceVersion), so a lease another run took meanwhile is never deleted.
  - Every module of the collection that writes takes/renews the lock itself, renews it while it
    runs and stops (failing, naming the lock) when it could not renew it within two thirds of
    the duration or another run took it; this module sets the lease duration and releases it
    at the end of a run.
options:
  state:
    description: Take/renew or release.
    type: str
    choices: [acquired, released]
    default: acquired
  duration:
    description: C(leaseDurationSeconds) (renewed every third of it while a module runs).
    type: int
    default: 300
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
attributes:
  check_mode:
    description: Can run in check mode; nothing in the cluster is changed and the result
      reports what would be done.
    support: full
author:
  - harvester-upgrade developers (@harvester-upgrade)
"""

EXAMPLES = r"""
- name: Take the upgrade lock
  harvester.upgrade.upgrade_lock:
    duration: 300

- name: Release it
  harvester.upgrade.upgrade_lock:
    state: released
"""

RETURN = r"""
holder:
  description: This run's holder identity.
  returned: always
  type: str
lease:
  description: The Lease after the call (null when released or absent).
  returned: always
  type: dict
"""

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    args,
    lock_lease,
    lock_run,
    module_factory,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)


def main() -> None:
    module = module_factory.new_module(argument_spec=args.spec(
        state={"type": "str", "choices": ["acquired", "released"], "default": "acquired"},
        duration={"type": "int", "default": lock_lease.DEFAULT_DURATION}),
        supports_check_mode=True)
    p = module.params
    me = lock_run.identity()
    if p["duration"] < 1:
        module.fail_json(msg=f"duration must be at least 1 second, got {p['duration']}")
    try:
        kube = Kube.from_module(module)
        if p["state"] == "released":
            done = False if module.check_mode else lock_lease.release(kube, me)
            module.exit_json(changed=done, holder=me, lease=None,
                             msg="released the upgrade lock" if done
                             else "the upgrade lock was not held by this run")
        if module.check_mode:
            lease = kube.get(*lock_lease.LEASE, lock_lease.NAME, lock_lease.NAMESPACE)
            what = lock_lease.decide(lease, me, lock_lease.now_utc())
            if what == "held":
                module.fail_json(msg=lock_lease.held_message(lease or {}, lock_lease.now_utc()),
                                 holder=me)
            module.exit_json(changed=what != "renew", holder=me, lease=lease,
                             msg="would watch the lease for its duration and take it if "
                             "it stays unchanged" if what == "observe" else "")
        try:
            lease = lock_lease.acquire(kube, me, p["duration"])
        except lock_lease.LockHeld as exc:
            module.fail_json(msg=str(exc), holder=me)
        except ValueError as exc:   # HARVESTER_UPGRADE_LOCK_DURATION
            module.fail_json(msg=str(exc), holder=me)
        module.exit_json(changed=True, holder=me, lease=lease,
                         msg=f"upgrade lock held by {me} for {p['duration']}s (renewed while "
                         "modules run)")
    except ApiError as exc:
        module.fail_json(msg=f"upgrade lock: {exc}", holder=me)


if __name__ == "__main__":
    main()
