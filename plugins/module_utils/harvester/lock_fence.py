"""Holding the upgrade lock while a module runs: the renewal loop, the renew deadline and the
fence every API request passes (:class:`Holding`), and the watchdog that stops a module
whose run was killed (:func:`watch_run`).

A thread renews the lease every third of its duration and watches it; if no renewal
succeeded for two thirds of the duration (the renew deadline), or the lease was taken by
another run, the run has lost the lock: every further API request of the module raises
:class:`LockLost` (the fence in ``client``). A lease deleted by hand is created again at once
(as client-go does) unless another run created it first, in which case this run stops.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
    unfenced,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_lease import (
    LEASE,
    NAME,
    NAMESPACE,
    duration_of,
    holder_of,
    lease_for,
    now_utc,
    parse_time,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_run import (
    run_alive,
)


def _open_pidfd(pid: int) -> int | None:
    """A pidfd for ``pid`` (readable once that process has exited), None where the kernel or
    Python has none or the process is gone."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def watch_run(pid: int, stop: Callable[[], None], every: float = 0.25,
              alive: Callable[[int], bool] = run_alive, use_pidfd: bool = True) -> None:
    """Call ``stop`` once the run's ``ansible-playbook`` (``pid``) is gone.

    Ansible runs each task in a worker that calls ``setsid()``, so ``kill -9`` of
    ansible-playbook (even of its whole process group) leaves the module running: it would go
    on working -- migrating, answering Rancher -- beside the next run, which finds the lock
    stale (its holder's process is gone) and takes it. The module stops instead, as if the
    kill had reached it; every step resumes from the cluster's state wherever it stopped.

    Where Linux gives a pidfd (5.3+), the thread sleeps on it and stops the module the
    moment the process exits (a poll every second let a killed run's module answer a
    hook it should have left to the next run); otherwise it checks every ``every`` s."""
    fd = _open_pidfd(pid) if use_pidfd else None
    if fd is not None:
        try:
            if alive(pid):              # the pidfd is of the run, not of a reused pid
                select.select([fd], [], [])
            stop()
            return
        finally:
            os.close(fd)
    while True:
        time.sleep(every)
        if not alive(pid):
            stop()
            return


class LockLost(ApiError):
    """This run no longer holds the lock: nothing more may be sent (an :class:`ApiError`, so
    every module reports it as it reports an API failure, naming the lock)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "LockLost", message)


def lost_message(why: str) -> str:
    return (f"lost the upgrade lock (Lease {NAMESPACE}/{NAME}): {why}. This run stopped "
            f"acting before its lease could expire, so that another run may go on safely; "
            f"re-run to resume (the plan keeps its phase)")


class Holding:
    """The lock held by this process's run: the fence (:meth:`check`), the renewal loop and
    the renew deadline (client-go's ``renewDeadline``: two thirds of the lease duration
    after the last successful renewal, by our monotonic clock)."""

    def __init__(self, kube: Kube, me: str, lease: dict[str, Any],
                 clock: Callable[[], float] = time.monotonic,
                 on_lost: Callable[[str], None] | None = None) -> None:
        self.kube, self.me, self.clock, self.on_lost = kube, me, clock, on_lost
        self.lease = lease
        self.duration = duration_of(lease)
        self.renew_every = self.duration / 3
        self.deadline = self.duration * 2 / 3
        self.retry = max(0.5, self.duration / 15)
        self.cond = threading.Condition()
        self.lost: str | None = None
        self.suspended = False
        self.last_error = ""
        self.renewed_at = self.clock() - self._age(lease)
        # set (under ``writing``) when this process releases the lease: the renewal loop then
        # neither re-creates the lease it sees deleted nor writes it again
        self.released = False
        self.writing = threading.Lock()

    @staticmethod
    def _age(lease: dict[str, Any]) -> float:
        """How long ago our own renewTime was written (by this machine's clock)."""
        renewed = parse_time((lease.get("spec") or {}).get("renewTime"))
        if renewed is None:
            return 0.0
        return max(0.0, (now_utc() - renewed).total_seconds())

    def confirmed(self, lease: dict[str, Any], sent: float) -> None:
        """``lease`` is ours as of ``sent`` (our monotonic time before the request)."""
        with self.cond:
            if self.lost is None:
                self.lease = lease
                self.renewed_at = max(self.renewed_at, sent)
                self.suspended = False
                self.last_error = ""
            self.cond.notify_all()

    def overdue(self) -> bool:
        return self.clock() - self.renewed_at >= self.deadline

    def lose(self, why: str) -> None:
        with self.cond:
            if self.lost is not None:
                return
            self.lost = lost_message(why)
            self.cond.notify_all()
        if self.on_lost is not None:
            self.on_lost(self.lost)

    def _deadline_why(self) -> str:
        return (f"no renewal succeeded for {self.deadline:.0f}s (the renew deadline, two "
                f"thirds of its {self.duration}s duration)"
                + (f"; last error: {self.last_error}" if self.last_error else ""))

    def check(self) -> None:
        """The fence, before each request of the module: wait while a deleted lease is being
        taken back; raise :class:`LockLost` once the lock is lost or the renew deadline
        passed."""
        with self.cond:
            while self.suspended and self.lost is None and not self.overdue():
                self.cond.wait(0.05)
            lost, late = self.lost, self.lost is None and self.overdue()
        if late:
            self.lose(self._deadline_why())
        if lost is None and not late:
            return
        raise LockLost(self.lost or "")

    def _too_late(self) -> None:
        """Before each request of a renewal (its retries too): none once the lock is lost."""
        if self.lost is None and self.overdue():
            self.lose(self._deadline_why())
        if self.lost is not None:
            raise LockLost(self.lost)

    def renew(self) -> bool:
        """One renewal (client-go's ``tryAcquireOrRenew`` for a leader): the lease renewed,
        created again if it was deleted; another holder means the lock is lost."""
        for _attempt in range(3):
            sent = self.clock()
            with unfenced(self._too_late), self.writing:
                if self.released:
                    return False
                try:
                    lease = self.kube.get(*LEASE, NAME, NAMESPACE)
                    holder = holder_of(lease)
                    if lease is not None and holder != self.me:
                        self.lose(f"it is now held by {holder or 'nobody'} (taken over, or "
                                  "deleted and taken by another run)")
                        return False
                    new = lease_for(self.me, self.duration, now_utc(), lease)
                    done = self.kube.create(new) if lease is None else self.kube.replace(new)
                except LockLost:
                    return False
                except ApiError as exc:
                    if exc.status == 409:       # changed or created meanwhile: read it again
                        continue
                    with self.cond:
                        self.last_error = str(exc)
                    return False
            if self.overdue():   # the answer came after the deadline: too late to go on
                self.lose(self._deadline_why())
                return False
            self.confirmed(done, sent)
            return True
        return False

    def wait_for_change(self, until: float) -> None:
        """Until ``until`` (monotonic), or earlier once the lease was deleted or changed by
        someone else (a watch on it): then the fence holds the module's requests until the
        next renewal settles who holds the lock."""
        rv = str((self.lease.get("metadata") or {}).get("resourceVersion") or "")
        while self.lost is None and not self.released:
            left = until - self.clock()
            if left <= 0:
                return
            try:
                with unfenced(self._too_late):
                    for ev in self.kube.watch(*LEASE, namespace=NAMESPACE,
                                              field_selector=f"metadata.name={NAME}",
                                              resource_version=rv or None,
                                              timeout=max(1, int(left))):
                        obj = ev.get("object") or {}
                        if ev.get("type") == "BOOKMARK":
                            rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                            continue
                        if ev.get("type") == "DELETED" or holder_of(obj) != self.me:
                            with self.cond:
                                self.suspended = True
                            return
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
            except LockLost:
                return
            except ApiError as exc:
                if exc.status == 410:
                    rv = ""
                    continue
                with self.cond:
                    self.cond.wait(min(self.retry, max(0.0, until - self.clock())))
            except Exception:  # noqa: BLE001 - a broken watch: the renewal loop goes on
                with self.cond:
                    self.cond.wait(min(self.retry, max(0.0, until - self.clock())))

    def run(self) -> None:
        """The renewal loop (its own thread)."""
        ok = True
        while self.lost is None and not self.released:
            due = self.renewed_at + self.renew_every if ok else self.clock() + self.retry
            self.wait_for_change(due)
            if self.lost is not None or self.released:
                return
            ok = self.renew()

    def stop(self) -> None:
        """This process is about to release the lease: after this returns no renewal writes it
        (one in flight has finished), and its deletion is not taken for a hand's and undone."""
        with self.writing:
            self.released = True

    def enforce_deadline(self) -> None:
        """Lose the lock when the renew deadline passes (its own thread: the renewal loop
        may be stuck in a request that does not answer)."""
        while True:
            with self.cond:
                if self.lost is not None:
                    return
                left = self.renewed_at + self.deadline - self.clock()
                if left > 0:
                    self.cond.wait(left)
                    continue
            self.lose(self._deadline_why())
            return

    def start(self) -> None:
        for target, name in ((self.run, "renew"), (self.enforce_deadline, "deadline")):
            threading.Thread(target=target, name=f"harvester-upgrade-lock-{name}",
                             daemon=True).start()
