"""The upgrade lock: one run at a time per cluster (a ``coordination.k8s.io/v1`` Lease).

Lease ``harvester-system/harvester-upgrade-lock``. ``holderIdentity`` names the run and ends
in a random token made by the run's first module (``<name>/run-<16 hex>``); ``<name>`` is
``awx-job-<id>`` under AWX (``AWX_JOB_ID``, or ``JOB_ID`` with ``AWX_HOST``), else
``<user>@<host>:<pid of ansible-playbook>``; ``HARVESTER_UPGRADE_LOCK_HOLDER`` overrides the
name (the token is still added: two runs never share an identity). The token is kept in a
file per run (:func:`run_dir`), so the modules of one run find it again.

The rules follow client-go's leader election (``tools/leaderelection``), see
docs/resilience.md:

* every module that writes calls :func:`hold` first (not in check mode): a free lease is
  created, the run's own renewed, a lease nobody holds or a *stale* one (:func:`is_stale`)
  taken; a lease of another run that is live by our clock fails the module at once; one our
  clock calls expired is watched, and taken only after it stayed unchanged (holder,
  renewTime, resourceVersion) for its whole ``leaseDurationSeconds`` of *our* monotonic time
  -- the holder's clock is never compared with ours to take a lease;
* while the module runs, a thread renews the lease every third of its duration and watches
  it; if no renewal succeeded for two thirds of the duration (the renew deadline), or the
  lease was taken by another run, the run has lost the lock: every further API request of
  the module raises :class:`LockLost` (the fence in ``client``) and the module is failed at
  once, naming the lock. A lease deleted by hand is created again at once (as client-go
  does) unless another run created it first, in which case this run stops;
* a module that fails releases the lease; the playbook's last play releases it after a run
  that ended normally. Release deletes with preconditions (uid and resourceVersion), so it
  never deletes a lease another run took meanwhile.
"""

from __future__ import annotations

import getpass
import os
import secrets
import select
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    ConflictsExhausted,
    Kube,
    retry_on_conflict,
    set_fence,
    unfenced,
)

LEASE = ("coordination.k8s.io/v1", "Lease")
NAMESPACE = "harvester-system"
NAME = "harvester-upgrade-lock"
DEFAULT_DURATION = 300
MIN_DURATION = 3
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
    """This run's holder identity (``<name>/run-<token>``), the same for every module of it."""
    global _identity
    if _identity is None:
        _identity = f"{_name()}/run-{run_token(playbook_pid())}"
    return _identity


_identity: str | None = None


def _name() -> str:
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


# -- the run's token ------------------------------------------------------------------------

def _run_dirs() -> list[str]:
    explicit = os.environ.get("HARVESTER_UPGRADE_LOCK_DIR")
    if explicit:
        return [explicit]
    return [os.path.expanduser("~/.ansible/harvester-upgrade-lock"),
            os.path.join(tempfile.gettempdir(), f"harvester-upgrade-lock-{os.getuid()}")]


def run_dir() -> str:
    """Where each run's token is kept (``HARVESTER_UPGRADE_LOCK_DIR``, else
    ``~/.ansible/harvester-upgrade-lock``, else, where that cannot be written, a directory in
    the temporary directory): a file per run, named after the machine's boot id and the pid
    and start time of the run's ansible-playbook, holding the token."""
    dirs = _run_dirs()
    for where in dirs:
        try:
            os.makedirs(where, mode=0o700, exist_ok=True)
            if os.access(where, os.W_OK):
                return where
        except OSError:
            continue
    raise OSError(f"upgrade lock: cannot write the run's token under {' or '.join(dirs)} "
                  "(set HARVESTER_UPGRADE_LOCK_DIR to a writable directory)")


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "noboot"


def _proc_start(pid: int) -> str:
    """The process's start time (clock ticks since boot), "" when there is no such process:
    with the pid it names one process of this boot (pids are reused)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _run_key(pid: int) -> str:
    return f"{_boot_id()}_{pid}_{_proc_start(pid) or 'gone'}"


def run_token(pid: int) -> str:
    """The random token of the run whose ansible-playbook is ``pid``: made by its first
    module, read back by the others (created atomically: two modules starting at once agree)."""
    where = run_dir()
    path = os.path.join(where, _run_key(pid))
    try:
        with open(path, encoding="ascii") as fh:
            token = fh.read().strip()
        if token:
            return token
    except OSError:
        pass
    token = secrets.token_hex(8)
    tmp = f"{path}.{token}.tmp"
    with open(tmp, "w", encoding="ascii") as fh:
        fh.write(token)
    try:
        os.link(tmp, path)            # fails if another module of this run was first
    except FileExistsError:
        with open(path, encoding="ascii") as fh:
            token = fh.read().strip()
    finally:
        os.unlink(tmp)
    _forget_old_runs(where)
    return token


def _forget_old_runs(where: str, keep_days: float = 7.0) -> None:
    cutoff = time.time() - keep_days * 86400
    try:
        for entry in os.scandir(where):
            if entry.is_file() and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
    except OSError:
        pass


def _run_of_token(token: str) -> tuple[str, int, str] | None:
    """(boot id, pid, start time) of the run of this machine that made ``token``, None when
    no run of this machine (this file system) made it."""
    entries = []
    for where in _run_dirs():
        try:
            entries.extend(os.scandir(where))
        except OSError:
            continue
    for entry in entries:
        if entry.name.endswith(".tmp") or not entry.is_file():
            continue
        try:
            with open(entry.path, encoding="ascii") as fh:
                if fh.read().strip() != token:
                    continue
        except OSError:
            continue
        boot, _s, rest = entry.name.partition("_")
        pid, _s, start = rest.partition("_")
        if pid.isdigit():
            return boot, int(pid), start
    return None


def is_stale(holder: str) -> bool:
    """The holder is a run of this machine whose ansible-playbook is gone. Proven by the run's
    token file (:func:`run_token`) here, never by hostname and pid alone: two containers can
    share both. A holder without a token, or whose token no run of this machine made, is not
    stale (its lease is taken over only once observed expired)."""
    name, sep, token = holder.rpartition("/run-")
    if not sep or not name or not token:
        return False
    run = _run_of_token(token)
    if run is None:
        return False
    boot, pid, start = run
    if boot != _boot_id():
        return True                         # made before this machine's last boot
    return _proc_start(pid) != start or not run_alive(pid)


# -- time -----------------------------------------------------------------------------------

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


def duration_of(lease: dict[str, Any] | None) -> int:
    spec = (lease or {}).get("spec") or {}
    try:
        return max(1, int(spec.get("leaseDurationSeconds") or DEFAULT_DURATION))
    except (TypeError, ValueError):
        return DEFAULT_DURATION


def expires_at(lease: dict[str, Any]) -> datetime | None:
    """When the lease expires by *our* clock if its holder's clock agrees with ours (shown to
    people; never used to take a lease)."""
    spec = lease.get("spec") or {}
    renewed = _parse(spec.get("renewTime") or spec.get("acquireTime"))
    if renewed is None:
        return None
    return datetime.fromtimestamp(renewed.timestamp() + duration_of(lease), timezone.utc)


def _holder(lease: dict[str, Any] | None) -> str:
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def _version(lease: dict[str, Any] | None) -> tuple[str, str, str]:
    """What changes whenever the lease's holder renews or someone takes it."""
    spec = (lease or {}).get("spec") or {}
    return (str(((lease or {}).get("metadata") or {}).get("resourceVersion") or ""),
            str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))


def decide(lease: dict[str, Any] | None, me: str, now: datetime) -> str:
    """``create`` (no lease), ``renew`` (ours), ``take`` (nobody holds it, or its holder is
    a stale run of this machine), ``held`` (another run's, live by our clock: refused at once)
    or ``observe`` (another run's that our clock calls expired, or renewed in the future: the
    clocks may differ, so it is taken only after it stayed unchanged for its duration of our
    own monotonic time, see :func:`observe`)."""
    if lease is None:
        return "create"
    holder = _holder(lease)
    if holder == me:
        return "renew"
    if not holder or is_stale(holder):
        return "take"
    renewed = _parse((lease.get("spec") or {}).get("renewTime")
                     or (lease.get("spec") or {}).get("acquireTime"))
    secs = duration_of(lease)
    if renewed is not None and now - timedelta(seconds=secs) < renewed <= \
            now + timedelta(seconds=secs):
        return "held"
    return "observe"


def held_message(lease: dict[str, Any], now: datetime) -> str:
    spec = lease.get("spec") or {}
    exp = expires_at(lease)
    left = int((exp - now).total_seconds()) if exp else 0
    secs = duration_of(lease)
    return (f"another upgrade run holds the lock (Lease {NAMESPACE}/{NAME}): holder "
            f"{spec.get('holderIdentity')}, renewed {spec.get('renewTime')} (its clock), "
            f"expires {_micro(exp) if exp else '?'} (in {left}s by this machine's clock) unless "
            f"renewed. Wait for that run to end. A lease nobody renews any more is taken over "
            f"by a run that sees it unchanged for {secs}s (leaseDurationSeconds), and at once "
            f"by a re-run from the same machine once that run's ansible-playbook is gone. Do "
            f"not delete the Lease while that run may still be working: it would take it back, "
            f"or stop if another run took it first")


class _Observe(Exception):
    """The lease needs watching before it may be taken."""


def observe(kube: Kube, lease: dict[str, Any], sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic,
            every: float | None = None) -> dict[str, Any] | None:
    """Watch another run's lease for its ``leaseDurationSeconds`` of our monotonic time
    (client-go's ``observedTime``): the lease as last read if nothing changed meanwhile (its
    holder stopped renewing: it may be taken), None if it was deleted; :class:`LockHeld` if
    its holder renewed it or another run took it."""
    secs = duration_of(lease)
    seen, since = _version(lease), clock()
    step = every if every is not None else min(5.0, max(0.5, secs / 10))
    while True:
        left = since + secs - clock()
        if left <= 0:
            return lease
        sleep(min(step, left))
        cur = kube.get(*LEASE, NAME, NAMESPACE)
        if cur is None:
            return None
        if _version(cur) != seen:
            raise LockHeld(held_message(cur, _now()) + " (it was renewed while this run "
                           "watched it: its holder is alive, whatever its renewTime says)")


def _lease_for(me: str, secs: int, now: datetime,
               old: dict[str, Any] | None) -> dict[str, Any]:
    spec = dict((old or {}).get("spec") or {})
    taken = _holder(old) != me
    spec.update(holderIdentity=me, leaseDurationSeconds=secs, renewTime=_micro(now))
    if taken or old is None:
        spec["acquireTime"] = _micro(now)
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
            0 if old is None else 1)
    if old is None:
        return {"apiVersion": LEASE[0], "kind": LEASE[1], "metadata": {
            "name": NAME, "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "harvester.upgrade"}}, "spec": spec}
    # the lease as read (apiVersion, kind, namespace, resourceVersion: a conditional PUT)
    return {**old, "spec": spec}


def acquire(kube: Kube, me: str, duration: int | None = None, fresh: float = 0.0,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Take or renew the lease for ``me``; :class:`LockHeld` if another run holds it.
    ``fresh`` (a fraction of the lease's duration): a lease ``me`` renewed less than that long
    ago (its renewTime was written by this machine's clock) is left as it is."""
    def attempt() -> dict[str, Any]:
        with unfenced():
            lease = kube.get(*LEASE, NAME, NAMESPACE)
            now = _now()
            what = decide(lease, me, now)
            if what == "held":
                raise LockHeld(held_message(lease or {}, now))
            if what == "observe":
                lease = observe(kube, lease or {}, sleep, clock)
                now = _now()
            if duration:
                secs = int(duration)
            elif what == "renew":
                secs = duration_of(lease)
            else:               # created or taken: this run's duration
                secs = env_duration()
            renewed = _parse(((lease or {}).get("spec") or {}).get("renewTime"))
            if what == "renew" and lease is not None and renewed is not None and \
                    duration is None and 0 <= (now - renewed).total_seconds() < fresh * secs:
                return lease
            new = _lease_for(me, secs, now, lease)
            if lease is None:   # two runs creating it at once: one gets 409 AlreadyExists
                return kube.create(new)
            return kube.replace(new)

    try:
        return retry_on_conflict(attempt, 5, f"Lease {NAMESPACE}/{NAME}")
    except ConflictsExhausted as exc:
        raise LockHeld(f"could not take Lease {NAMESPACE}/{NAME}: too many concurrent "
                       "writers") from exc


def env_duration() -> int:
    """``HARVESTER_UPGRADE_LOCK_DURATION`` (seconds, at least :data:`MIN_DURATION`), else
    :data:`DEFAULT_DURATION`: the duration of a lease this run creates or takes."""
    raw = os.environ.get("HARVESTER_UPGRADE_LOCK_DURATION", "").strip()
    if not raw:
        return DEFAULT_DURATION
    if not raw.isdigit() or int(raw) < MIN_DURATION:
        raise ValueError(f"HARVESTER_UPGRADE_LOCK_DURATION must be a whole number of seconds, "
                         f"at least {MIN_DURATION}; got {raw!r}")
    return int(raw)


def release(kube: Kube, me: str) -> bool:
    """Delete the lease if ``me`` holds it, with preconditions (its uid and resourceVersion as
    read): a lease another run took or renewed meanwhile is left alone."""
    with unfenced():
        try:
            lease = kube.get(*LEASE, NAME, NAMESPACE)
            if lease is None or _holder(lease) != me:
                return False
            md = lease.get("metadata") or {}
            pre = {k: str(md[f]) for k, f in (("uid", "uid"),
                                              ("resourceVersion", "resourceVersion"))
                   if md.get(f)}
            return kube.delete(*LEASE, NAME, NAMESPACE, preconditions=pre or None)
        except ApiError:
            return False


# -- holding the lock while a module runs ----------------------------------------------------

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
        renewed = _parse((lease.get("spec") or {}).get("renewTime"))
        if renewed is None:
            return 0.0
        return max(0.0, (_now() - renewed).total_seconds())

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
                    holder = _holder(lease)
                    if lease is not None and holder != self.me:
                        self.lose(f"it is now held by {holder or 'nobody'} (taken over, or "
                                  "deleted and taken by another run)")
                        return False
                    new = _lease_for(self.me, self.duration, _now(), lease)
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
                        if ev.get("type") == "DELETED" or _holder(obj) != self.me:
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
    try:
        # renewed by this run's previous module moments ago: no write (every module call of a
        # run holds the lock; at the simulator's speeds they follow each other in ~0.1 s)
        lease = acquire(kube, me, fresh=FRESH)
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
        _holding.confirmed(lease, sent if _version(lease) != _version(_holding.lease)
                           else _holding.renewed_at)
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
