"""The upgrade lock: one run at a time per cluster (a ``coordination.k8s.io/v1`` Lease).

Lease ``harvester-system/harvester-upgrade-lock``; ``holderIdentity`` names the run:
``awx-job-<id>`` under AWX (``AWX_JOB_ID``, or ``JOB_ID`` with ``AWX_HOST``), else
``<user>@<host>:<pid of ansible-playbook>``; ``HARVESTER_UPGRADE_LOCK_HOLDER`` overrides.

Every module that writes (phase modules, node modules, ``upgrade_plan`` ensure after its
validation, ``upgrade_lock``) calls :func:`hold` first (not in check mode):

* a free, expired (``renewTime + leaseDurationSeconds`` in the past) or *stale* lease is
  taken (stale: held by a run on this host whose ansible-playbook process is gone, e.g. a
  killed run re-run from the same machine), an own lease is renewed;
* a live lease of another run fails the module at once, before it writes anything, with
  the holder and when the lease expires;
* while the module runs, a daemon thread renews the lease every third of its duration, so
  waits of any length keep it (a killed run stops renewing; the lease expires after
  ``leaseDurationSeconds``, default :data:`DEFAULT_DURATION`);
* a module that fails releases the lease (the run ends); the playbook's last play releases
  it after a run that ended normally (``harvester.upgrade.upgrade_lock state=released``).
"""

from __future__ import annotations

import getpass
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    ConflictsExhausted,
    Kube,
    retry_on_conflict,
)

LEASE = ("coordination.k8s.io/v1", "Lease")
NAMESPACE = "harvester-system"
NAME = "harvester-upgrade-lock"
DEFAULT_DURATION = 300
FRESH = 1 / 6   # of the duration: a lease renewed by this run more recently is not rewritten


class LockHeld(Exception):
    """Another run holds a live lease."""


def _proc_cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _proc_parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def playbook_chain(start: int | None = None) -> list[int]:
    """The ``ansible-playbook`` processes above this one (itself included), nearest first,
    while they follow each other: the task's worker (a fork of ansible-playbook, same command
    line), then ansible-playbook itself. A live run always shows both."""
    chain: list[int] = []
    pid, hops = start or os.getpid(), 0
    while pid >= 1 and hops < 64:
        if "ansible-playbook" in _proc_cmdline(pid):
            chain.append(pid)
        elif chain:
            break
        if pid == 1:
            break
        pid, hops = _proc_parent(pid), hops + 1
    return chain


def run_pid() -> int:
    """The pid of the ``ansible-playbook`` process this module runs under, 0 if none."""
    chain = playbook_chain()
    return chain[-1] if len(chain) >= 2 else 0


def orphaned(chain: list[int] | None = None) -> bool:
    """This task's worker outlived its ansible-playbook (killed): only the worker is left
    in the chain."""
    return len(playbook_chain() if chain is None else chain) == 1


def playbook_pid() -> int:
    return run_pid() or os.getppid()


def run_alive(pid: int) -> bool:
    return "ansible-playbook" in _proc_cmdline(pid)


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


def identity() -> str:
    env = os.environ
    if env.get("HARVESTER_UPGRADE_LOCK_HOLDER"):
        return env["HARVESTER_UPGRADE_LOCK_HOLDER"]
    job = env.get("AWX_JOB_ID") or (env.get("JOB_ID") if env.get("AWX_HOST") else None)
    if job:
        return f"awx-job-{job}"
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}:{playbook_pid()}"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _micro(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def expires_at(lease: dict[str, Any]) -> datetime | None:
    spec = lease.get("spec") or {}
    renewed = _parse(spec.get("renewTime") or spec.get("acquireTime"))
    if renewed is None:
        return None
    duration = int(spec.get("leaseDurationSeconds") or DEFAULT_DURATION)
    return datetime.fromtimestamp(renewed.timestamp() + duration, timezone.utc)


def is_stale(holder: str, host: str | None = None) -> bool:
    """Held by an ansible-playbook process of this host that no longer runs."""
    host = host or socket.gethostname()
    if "@" not in holder or ":" not in holder:
        return False
    where, _sep, pid = holder.rpartition("@")[2].rpartition(":")
    if where != host or not pid.isdigit():
        return False
    return "ansible-playbook" not in _proc_cmdline(int(pid))


def decide(lease: dict[str, Any] | None, me: str, now: datetime) -> str:
    """``create``, ``renew``, ``take`` (expired or stale) or ``held``."""
    if lease is None:
        return "create"
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    if holder == me:
        return "renew"
    if not holder:
        return "take"
    exp = expires_at(lease)
    if exp is None or exp <= now or is_stale(holder):
        return "take"
    return "held"


def held_message(lease: dict[str, Any], now: datetime) -> str:
    spec = lease.get("spec") or {}
    exp = expires_at(lease)
    left = int((exp - now).total_seconds()) if exp else 0
    return (f"another upgrade run holds the lock (Lease {NAMESPACE}/{NAME}): holder "
            f"{spec.get('holderIdentity')}, renewed {spec.get('renewTime')}, expires "
            f"{_micro(exp) if exp else '?'} (in {left}s) unless renewed. Wait for that run to "
            f"end; if it is gone, re-run after the lease expires or delete it: kubectl -n "
            f"{NAMESPACE} delete lease {NAME}")


def acquire(kube: Kube, me: str, duration: int | None = None,
            fresh: float = 0.0) -> dict[str, Any]:
    """Take or renew the lease for ``me``; :class:`LockHeld` if another run holds it.
    ``fresh`` (a fraction of the lease's duration): a lease ``me`` renewed less than that long
    ago is left as it is (most of it is still ahead; the module's renewal thread keeps it)."""
    def attempt() -> dict[str, Any]:
        lease = kube.get(*LEASE, NAME, NAMESPACE)
        now = _now()
        what = decide(lease, me, now)
        if what == "held":
            raise LockHeld(held_message(lease or {}, now))
        spec = dict((lease or {}).get("spec") or {})
        secs = int(duration or spec.get("leaseDurationSeconds") or DEFAULT_DURATION)
        renewed = _parse(spec.get("renewTime"))
        if what == "renew" and lease is not None and renewed is not None and \
                0 <= (now - renewed).total_seconds() < fresh * secs:
            return lease
        spec.update(holderIdentity=me, leaseDurationSeconds=secs, renewTime=_micro(now))
        if what != "renew":
            spec["acquireTime"] = _micro(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                0 if what == "create" else 1)
        if lease is None:   # two runs creating it at once: one gets 409 AlreadyExists
            return kube.create({"apiVersion": LEASE[0], "kind": LEASE[1], "metadata": {
                "name": NAME, "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/managed-by": "harvester.upgrade"}},
                "spec": spec})
        # the lease as read (apiVersion, kind, namespace, resourceVersion: a conditional PUT)
        return kube.replace({**lease, "spec": spec})

    try:
        return retry_on_conflict(attempt, 5, f"Lease {NAMESPACE}/{NAME}")
    except ConflictsExhausted as exc:
        raise LockHeld(f"could not take Lease {NAMESPACE}/{NAME}: too many concurrent "
                       "writers") from exc


def release(kube: Kube, me: str) -> bool:
    """Delete the lease if ``me`` holds it."""
    try:
        lease = kube.get(*LEASE, NAME, NAMESPACE)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != me:
            return False
        kube.delete(*LEASE, NAME, NAMESPACE)
        return True
    except ApiError:
        return False


def _renew_forever(kube: Kube, me: str, every: float) -> None:
    while True:
        time.sleep(every)
        try:
            acquire(kube, me)
        except (ApiError, LockHeld):
            return
        except Exception:  # noqa: BLE001 - never take the module down from this thread
            return


def _abandon() -> None:
    os._exit(137)   # as SIGKILL would have ended it: no cleanup, no result, the lease left stale


def hold(kube: Kube, module: Any) -> str | None:
    """Take the lock for this module's run (see module docstring); fail the module at once
    if another run holds it. Returns the holder identity (None in check mode)."""
    if getattr(module, "check_mode", False):
        return None
    if orphaned():
        # the run was killed before this task's module started (its worker lives on, setsid):
        # do nothing, as the kill would have
        _abandon()
    me = identity()
    try:
        # renewed by this run's previous module moments ago: no write (every module call of a
        # run holds the lock; at the simulator's speeds they follow each other in ~0.1 s)
        lease = acquire(kube, me, fresh=FRESH)
    except LockHeld as exc:
        module.fail_json(msg=str(exc), lock_holder=None)
        raise   # unreachable: fail_json exits
    every = max(1.0, int((lease.get("spec") or {}).get("leaseDurationSeconds")
                         or DEFAULT_DURATION) / 3)
    threading.Thread(target=_renew_forever, args=(kube, me, every), daemon=True).start()
    pid = run_pid()
    if pid:
        threading.Thread(target=watch_run, args=(pid, _abandon), daemon=True).start()
    original = module.fail_json

    def fail_and_release(*args: Any, **kwargs: Any) -> None:
        release(kube, me)
        original(*args, **kwargs)

    module.fail_json = fail_and_release
    return me
