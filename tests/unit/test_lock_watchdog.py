"""The upgrade lock's pure parts: who may take the lease, and the watchdog that stops a
module whose run was killed."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path

lock = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock")


def test_module_stops_once_its_ansible_playbook_is_gone() -> None:
    """kill -9 of ansible-playbook leaves its task's module running (workers setsid); the
    watchdog ends the module then, so it does not work on beside the next run."""
    answers = iter([True, True, False])
    stopped: list[int] = []
    lock.watch_run(4242, lambda: stopped.append(1), every=0.0,
                   alive=lambda pid: next(answers), use_pidfd=False)
    assert stopped == [1]


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this platform")
def test_watchdog_stops_the_module_as_soon_as_the_run_exits() -> None:
    """With a pidfd the watchdog wakes when the process exits, not at its next poll (here
    an hour away): a killed run's module must not answer a hook in the meantime."""
    import subprocess
    import sys
    import threading
    import time
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stopped = threading.Event()
    watcher = threading.Thread(target=lock.watch_run, daemon=True,
                               args=(run.pid, stopped.set, 3600.0, lambda pid: True))
    watcher.start()
    time.sleep(0.2)
    assert not stopped.is_set()           # the run lives: the watchdog waits
    run.kill()
    assert stopped.wait(30), "the watchdog did not notice the run's exit"
    run.wait()


def test_run_alive_reads_the_process_command_line() -> None:
    assert not lock.run_alive(os.getpid())          # pytest, not ansible-playbook
    assert not lock.run_alive(2 ** 22 + 17)           # no such process


def test_stale_only_for_a_dead_ansible_playbook_of_this_host() -> None:
    import socket
    host = socket.gethostname()
    assert lock.is_stale(f"alice@{host}:{2 ** 22 + 17}")
    assert not lock.is_stale(f"alice@elsewhere:{2 ** 22 + 17}")
    assert not lock.is_stale("awx-job-12")
    now = datetime.now(timezone.utc)
    live = {"spec": {"holderIdentity": "awx-job-12", "leaseDurationSeconds": 300,
                     "renewTime": (now - timedelta(seconds=10)).isoformat()}}
    assert lock.decide(live, "me", now) == "held"
    assert lock.decide(live, "awx-job-12", now) == "renew"
    assert lock.decide(None, "me", now) == "create"


def _fake_procs(monkeypatch: pytest.MonkeyPatch, table: dict[int, tuple[int, str]]) -> None:
    monkeypatch.setattr(lock, "_proc_cmdline", lambda pid: table.get(pid, (0, ""))[1])
    monkeypatch.setattr(lock, "_proc_parent", lambda pid: table.get(pid, (0, ""))[0])


def test_the_run_is_the_ansible_playbook_above_the_tasks_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pb = "python3 /venv/bin/ansible-playbook upgrade.yml"
    table = {50: (40, "python3 AnsiballZ_vm_evacuate.py"), 40: (30, "/bin/sh -c ..."),
             30: (20, pb), 20: (10, pb), 10: (1, "ansible-runner run ..."), 1: (0, "init")}
    _fake_procs(monkeypatch, table)
    assert lock.playbook_chain(50) == [30, 20]
    assert not lock.orphaned(lock.playbook_chain(50))
    # ansible-playbook killed: its worker (setsid) lives on, reparented to init
    table[30] = (1, pb)
    del table[20]
    assert lock.playbook_chain(50) == [30]
    assert lock.orphaned(lock.playbook_chain(50))
    # not under ansible at all (tests, ansible-test): no run, never orphaned
    assert lock.playbook_chain(10) == [] and not lock.orphaned([])
    # ansible-playbook as a container's pid 1
    table.update({30: (1, pb), 1: (0, pb)})
    assert lock.playbook_chain(50) == [30, 1]


class _Leases:
    """A Kube double holding one Lease (get / create / replace, counting the writes)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.writes = 0

    def get(self, *_a: Any) -> dict[str, Any] | None:
        return None if self.lease is None else dict(self.lease)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        self.lease = obj
        return obj

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        self.lease = obj
        return obj


def test_a_lease_renewed_moments_ago_is_not_written_again() -> None:
    kube = _Leases()
    lock.acquire(kube, "me@h:1", fresh=lock.FRESH)          # created
    lock.acquire(kube, "me@h:1", fresh=lock.FRESH)          # just renewed: read only
    assert kube.writes == 1
    lock.acquire(kube, "me@h:1")                            # the renewal thread: always
    assert kube.writes == 2
    spec = kube.lease["spec"]                               # type: ignore[index]
    spec["renewTime"] = "2000-01-01T00:00:00.000000Z"       # long ago: renewed
    lock.acquire(kube, "me@h:1", fresh=lock.FRESH)
    assert kube.writes == 3 and kube.lease["spec"]["renewTime"] > "2001"  # type: ignore[index]
    with pytest.raises(lock.LockHeld):                      # another run's lease, still valid
        lock.acquire(kube, "other@h2:2", fresh=lock.FRESH)
