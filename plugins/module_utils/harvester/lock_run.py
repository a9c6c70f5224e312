"""Which run holds the upgrade lock: the run's identity, its token, and whether a holder's
run is gone (stale).

``holderIdentity`` is ``<name>/run-<16 hex>``: ``<name>`` is ``awx-job-<id>`` under AWX
(``AWX_JOB_ID``, or ``JOB_ID`` with ``AWX_HOST``), else
``<user>@<host>:<pid of ansible-playbook>``; ``HARVESTER_UPGRADE_LOCK_HOLDER`` overrides the
name (the token is still added: two runs never share an identity). The token is made by the
run's first module and kept in a file per run (:func:`run_dir`), so the modules of one run
find it again, and so a re-run on this machine can tell that a holder's ansible-playbook is
gone (:func:`is_stale`). The Lease rules are in :mod:`lock_lease`.
"""

from __future__ import annotations

import getpass
import os
import secrets
import socket
import tempfile
import time


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


# the files of runs older than a week are removed by a run's first module, at most once per
# FORGET_EVERY_S (the mtime of FORGOTTEN says when last): the directory keeps one file per run
# of that week, thousands on a machine that runs many, and a stat of each is on the path of
# every run's first module (docs/performance.md)
FORGET_EVERY_S = 3600.0
FORGOTTEN = ".forgotten"   # a dot in the name: never taken for a run's token file


def _forget_old_runs(where: str, keep_days: float = 7.0) -> None:
    now = time.time()
    marker = os.path.join(where, FORGOTTEN)
    try:
        if 0 <= now - os.stat(marker).st_mtime < FORGET_EVERY_S:
            return
    except OSError:
        pass
    cutoff = now - keep_days * 86400
    try:
        for entry in os.scandir(where):
            if entry.name != FORGOTTEN and entry.is_file() and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
        with open(marker, "w", encoding="ascii"):
            pass
        os.utime(marker, (now, now))
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
        if "." in entry.name or not entry.is_file():   # a .tmp, or the run's cluster record
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


# -- the cluster the run's lease proves -----------------------------------------------------
# A Lease's uid is made by the API server that created it (a random UUID; a copy restored
# into another cluster gets a new one): a module that finds the lease with the uid recorded
# here talks to the cluster where this run read that uid beside the kube-system uid. The
# record is written by a module that read both (lock.hold); see cluster_id.

def _cluster_record_path(where: str) -> str:
    return os.path.join(where, f"{_run_key(playbook_pid())}.cluster")


def remember_cluster(lease_uid: str, cluster_uid: str) -> None:
    """Record that this run's lease ``lease_uid`` lives in the cluster whose kube-system
    Namespace has uid ``cluster_uid`` (best effort: without the record the next module reads
    kube-system again)."""
    if not lease_uid or not cluster_uid or remembered_cluster() == (lease_uid, cluster_uid):
        return
    try:
        path = _cluster_record_path(run_dir())
        tmp = f"{path}.{secrets.token_hex(4)}.tmp"
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write(f"{lease_uid} {cluster_uid}\n")
        os.replace(tmp, path)
    except OSError:
        pass


def remembered_cluster() -> tuple[str, str] | None:
    """``(lease uid, kube-system uid)`` recorded by this run (:func:`remember_cluster`)."""
    for where in _run_dirs():
        try:
            with open(_cluster_record_path(where), encoding="ascii") as fh:
                parts = fh.read().split()
        except OSError:
            continue
        if len(parts) == 2:
            return parts[0], parts[1]
    return None
