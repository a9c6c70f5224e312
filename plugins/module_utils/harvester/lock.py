"""The upgrade lock: one run at a time per cluster (a ``coordination.k8s.io/v1`` Lease).

Lease ``harvester-system/harvester-upgrade-lock``. ``holderIdentity`` names the run and ends
in a random token made by the run's first module (``<name>/run-<16 hex>``); ``<name>`` is
``awx-job-<id>`` under AWX (``AWX_JOB_ID``, or ``JOB_ID`` with ``AWX_HOST``), else
``<user>@<host>:<pid of ansible-playbook>``; ``HARVESTER_UPGRADE_LOCK_HOLDER`` overrides the
name (the token is still added: two runs never share an identity). The token is kept in a
file per run (:func:`lock_run.run_dir`), so the modules of one run find it again.

The rules follow client-go's leader election (``tools/leaderelection``), see
docs/resilience.md:

* every module that writes calls :func:`hold` first (not in check mode): a free lease is
  created, the run's own renewed, a lease nobody holds or a *stale* one
  (:func:`lock_run.is_stale`) taken; a lease of another run that is live by our clock fails
  the module at once; one our clock calls expired is watched, and taken only after it stayed
  unchanged (holder, renewTime, resourceVersion) for its whole ``leaseDurationSeconds`` of
  *our* monotonic time -- the holder's clock is never compared with ours to take a lease;
* while the module runs, a thread renews the lease every third of its duration and watches
  it; if no renewal succeeded for two thirds of the duration (the renew deadline), or the
  lease was taken by another run, the run has lost the lock: every further API request of
  the module raises :class:`lock_fence.LockLost` (the fence in ``client``) and the module is
  failed at once, naming the lock. A lease deleted by hand is created again at once (as
  client-go does) unless another run created it first, in which case this run stops;
* a module that fails releases the lease; Finalize releases it once the plan is Succeeded
  (:func:`release_held`: nothing of the run writes after it); the playbook's last play
  releases it after any other run that ended normally. Release deletes with preconditions
  (uid and resourceVersion), so it never deletes a lease another run took meanwhile.

The parts: :mod:`lock_run` (the run's identity and token, whether a holder's run is gone),
:mod:`lock_lease` (the Lease protocol: decide, observe, acquire, release), :mod:`lock_fence`
(the renewal loop, the renew deadline and the fence while a module runs; the watchdog of
the run's ansible-playbook). This module is what the modules call: :func:`hold` before their
first write, :func:`module_ended` once their result is made.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import cluster_id
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
    set_fence,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_fence import (
    Holding,
    watch_run,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_lease import (
    FRESH,
    LockHeld,
    acquire,
    release,
    version_of,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_run import (
    identity,
    orphaned,
    remember_cluster,
    run_pid,
)

# this process's run: one Holding for every module it runs (an action plugin may run several
# in one worker), and the module to fail when the lock is lost
_holding: Holding | None = None
_active: Any = None
_signal_ready = False


def _on_signal(_signum: int, _frame: Any) -> None:
    global _active
    module, _active = _active, None
    if module is None or _holding is None or _holding.lost is None:
        return
    module.fail_json(msg=_holding.lost, lock_lost=True)


def _interrupt(_msg: str) -> None:
    """Lost: fail the running module now (its main thread), not at its next request."""
    if _active is not None and _signal_ready:
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR2)


def _install_signal() -> None:
    global _signal_ready
    if _signal_ready or threading.current_thread() is not threading.main_thread():
        return
    try:
        signal.signal(signal.SIGUSR2, _on_signal)
        _signal_ready = True
    except (ValueError, OSError):
        pass


def module_ended() -> None:
    """The running module returned (its result is made): a loss is no longer its failure."""
    global _active
    _active = None


def release_held(kube: Kube) -> bool:
    """The run's work is over (Finalize has marked the plan Succeeded): stop renewing and
    delete the lease now, as a failing module does, instead of leaving it to the playbook's
    last play. False when this module does not hold it (check mode, lost)."""
    if _holding is None or _holding.lost is not None:
        return False
    _holding.stop()
    return release(kube, identity())


def _abandon() -> None:
    os._exit(137)   # as SIGKILL would have ended it: no cleanup, no result, the lease left stale


def hold(kube: Kube, module: Any) -> str | None:
    """Take the lock for this module's run (see the module doc); fail the module at once if
    another run holds it or this run lost it. Returns the holder identity (None in check
    mode)."""
    global _holding, _active
    if getattr(module, "check_mode", False):
        return None
    if orphaned():
        # the run was killed before this task's module started (its worker lives on, setsid):
        # do nothing, as the kill would have
        _abandon()
    me = identity()
    if _holding is not None and _holding.lost is not None:
        module.fail_json(msg=_holding.lost, lock_holder=me, lock_lost=True)
    sent = time.monotonic()
    # the lease as this module's cluster-identity check read it moments ago, if it did
    read = cluster_id.lease_read(kube)
    if read is not None:
        sent = read[1]
    try:
        # renewed by this run's previous module moments ago: no write (every module call of a
        # run holds the lock, and calls follow each other closely)
        lease = acquire(kube, me, fresh=FRESH, read=None if read is None else (read[0],))
    except LockHeld as exc:
        module.fail_json(msg=str(exc), lock_holder=None)
        raise   # unreachable: fail_json exits
    except ValueError as exc:
        module.fail_json(msg=str(exc), lock_holder=None)
        raise
    if _holding is None:
        _holding = Holding(kube, me, lease, on_lost=_interrupt)
        set_fence(_holding.check)
        _holding.start()
        pid = run_pid()
        if pid:
            threading.Thread(target=watch_run, args=(pid, _abandon), daemon=True).start()
    else:
        _holding.confirmed(lease, sent if version_of(lease) != version_of(_holding.lease)
                           else _holding.renewed_at)
    # this module read kube-system (or will: cluster_id.cluster_uid records it then): later
    # modules of the run that find this lease know the cluster by it
    lease_uid = str((lease.get("metadata") or {}).get("uid") or "")
    cluster = getattr(kube, "_cluster_uid", None)
    if cluster:
        remember_cluster(lease_uid, str(cluster))
    try:
        setattr(kube, "_lock_lease_uid", lease_uid)  # noqa: B010 - read by cluster_id
    except AttributeError:
        pass
    _install_signal()
    _active = module
    original_fail, original_exit = module.fail_json, module.exit_json

    def fail_and_release(*args: Any, **kwargs: Any) -> None:
        module_ended()
        if _holding is None or _holding.lost is None:   # a lost lock is not ours to delete
            if _holding is not None:
                _holding.stop()
            release(kube, me)
        original_fail(*args, **kwargs)

    def exit_ended(*args: Any, **kwargs: Any) -> None:
        module_ended()
        original_exit(*args, **kwargs)

    module.fail_json = fail_and_release
    module.exit_json = exit_ended
    return me
