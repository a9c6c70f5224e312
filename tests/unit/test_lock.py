"""The upgrade lock's pure parts: who may take the lease, and the watchdog that stops a
module whose run was killed."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

lock = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock")


def test_module_stops_once_its_ansible_playbook_is_gone() -> None:
    """kill -9 of ansible-playbook leaves its task's module running (workers setsid); the
    watchdog ends the module then, so it does not work on beside the next run."""
    answers = iter([True, True, False])
    stopped: list[int] = []
    lock.watch_run(4242, lambda: stopped.append(1), every=0.0,
                   alive=lambda pid: next(answers))
    assert stopped == [1]


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
