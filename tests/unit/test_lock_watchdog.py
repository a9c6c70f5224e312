"""The upgrade lock's pure parts: who may take the lease, and the watchdog that stops a
module whose run was killed."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path

lock_fence = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_fence")
lock_lease = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_lease")
lock_run = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_run")
ApiError = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client").ApiError


def test_module_stops_once_its_ansible_playbook_is_gone() -> None:
    """kill -9 of ansible-playbook leaves its task's module running (workers setsid); the
    watchdog ends the module then, so it does not work on beside the next run."""
    answers = iter([True, True, False])
    stopped: list[int] = []
    lock_fence.watch_run(4242, lambda: stopped.append(1), every=0.0,
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
    watcher = threading.Thread(target=lock_fence.watch_run, daemon=True,
                               args=(run.pid, stopped.set, 3600.0, lambda pid: True))
    watcher.start()
    time.sleep(0.2)
    assert not stopped.is_set()           # the run lives: the watchdog waits
    run.kill()
    assert stopped.wait(30), "the watchdog did not notice the run's exit"
    run.wait()


def test_run_alive_reads_the_process_command_line() -> None:
    assert not lock_run.run_alive(os.getpid())      # pytest, not ansible-playbook
    assert not lock_run.run_alive(2 ** 22 + 17)       # no such process


def test_stale_needs_the_runs_token_not_just_hostname_and_pid(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two containers can share a hostname and a pid: a holder is stale only when this
    machine's own token file shows the run that made it, and that run's ansible-playbook is
    gone."""
    import socket
    monkeypatch.setenv("HARVESTER_UPGRADE_LOCK_DIR", str(tmp_path))
    host = socket.gethostname()
    dead = 2 ** 22 + 17
    # a run of another container (same hostname, same pid): no token file here
    assert not lock_run.is_stale(f"alice@{host}:{dead}/run-0123456789abcdef")
    assert not lock_run.is_stale(f"alice@{host}:{dead}")      # no token at all
    # a run of this machine whose ansible-playbook is gone: its token file is here
    token = lock_run.run_token(dead)
    assert lock_run.run_token(dead) == token                   # the run's modules agree
    assert lock_run.is_stale(f"alice@{host}:{dead}/run-{token}")
    # this process is alive, but it is no ansible-playbook: not a live run either
    mine = lock_run.run_token(os.getpid())
    assert mine != token
    assert lock_run.is_stale(f"alice@{host}:{os.getpid()}/run-{mine}")
    monkeypatch.setattr(lock_run, "run_alive", lambda pid: True)
    assert not lock_run.is_stale(f"alice@{host}:{os.getpid()}/run-{mine}")
    assert not lock_run.is_stale("awx-job-12")
    now = datetime.now(timezone.utc)
    live = {"spec": {"holderIdentity": "awx-job-12", "leaseDurationSeconds": 300,
                     "renewTime": (now - timedelta(seconds=10)).isoformat()}}
    assert lock_lease.decide(live, "me", now) == "held"
    assert lock_lease.decide(live, "awx-job-12", now) == "renew"
    assert lock_lease.decide(None, "me", now) == "create"


def test_identity_is_random_per_run(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARVESTER_UPGRADE_LOCK_DIR", str(tmp_path))
    monkeypatch.setenv("HARVESTER_UPGRADE_LOCK_HOLDER", "ci")
    monkeypatch.setattr(lock_run, "_identity", None)
    me = lock_run.identity()
    assert me.startswith("ci/run-") and len(me) == len("ci/run-") + 16
    monkeypatch.setattr(lock_run, "_identity", None)
    assert lock_run.identity() == me               # the same run: the same token
    monkeypatch.setenv("HARVESTER_UPGRADE_LOCK_DIR", str(tmp_path / "other-container"))
    monkeypatch.setattr(lock_run, "_identity", None)
    assert lock_run.identity() != me               # same name and pid, another machine
    monkeypatch.setattr(lock_run, "_identity", None)


def _fake_procs(monkeypatch: pytest.MonkeyPatch, table: dict[int, tuple[int, str]]) -> None:
    monkeypatch.setattr(lock_run, "_proc_cmdline", lambda pid: table.get(pid, (0, ""))[1])
    monkeypatch.setattr(lock_run, "_proc_parent", lambda pid: table.get(pid, (0, ""))[0])


def test_the_run_is_the_ansible_playbook_above_the_tasks_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pb = "python3 /venv/bin/ansible-playbook upgrade.yml"
    table = {50: (40, "python3 AnsiballZ_vm_evacuate.py"), 40: (30, "/bin/sh -c ..."),
             30: (20, pb), 20: (10, pb), 10: (1, "ansible-runner run ..."), 1: (0, "init")}
    _fake_procs(monkeypatch, table)
    assert lock_run.playbook_chain(50) == [30, 20]
    assert not lock_run.orphaned(lock_run.playbook_chain(50))
    # ansible-playbook killed: its worker (setsid) lives on, reparented to init
    table[30] = (1, pb)
    del table[20]
    assert lock_run.playbook_chain(50) == [30]
    assert lock_run.orphaned(lock_run.playbook_chain(50))
    # not under ansible at all (tests, ansible-test): no run, never orphaned
    assert lock_run.playbook_chain(10) == [] and not lock_run.orphaned([])
    # ansible-playbook as a container's pid 1
    table.update({30: (1, pb), 1: (0, pb)})
    assert lock_run.playbook_chain(50) == [30, 1]


class _Leases:
    """A Kube double holding one Lease (get / create / replace / delete with the API's
    resourceVersion and precondition rules), counting the writes."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.writes = 0
        self.reads = 0
        self.rv = 0
        self.fail: Exception | None = None
        self.deleted: list[dict[str, Any]] = []

    def _stamp(self, obj: dict[str, Any], uid: str | None = None) -> dict[str, Any]:
        self.rv += 1
        md = dict(obj.get("metadata") or {})
        md["resourceVersion"] = str(self.rv)
        md["uid"] = uid or md.get("uid") or f"uid-{self.rv}"
        self.lease = {**obj, "metadata": md, "spec": dict(obj.get("spec") or {})}
        return dict(self.lease)

    def get(self, *_a: Any) -> dict[str, Any] | None:
        self.reads += 1
        if self.fail is not None:
            raise self.fail
        return None if self.lease is None else dict(self.lease, spec=dict(self.lease["spec"]))

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.fail is not None:
            raise self.fail
        if self.lease is not None:
            raise ApiError(409, "AlreadyExists", "leases already exists")
        self.writes += 1
        return self._stamp(obj)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.fail is not None:
            raise self.fail
        assert self.lease is not None
        if (obj.get("metadata") or {}).get("resourceVersion") != \
                self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.writes += 1
        return self._stamp(obj, self.lease["metadata"]["uid"])

    def delete(self, *_a: Any, preconditions: dict[str, str] | None = None,
               **_k: Any) -> bool:
        if self.lease is None:
            return False
        md = self.lease["metadata"]
        for k, v in (preconditions or {}).items():
            if md.get(k) != v:
                raise ApiError(409, "Conflict", f"Precondition failed: {k}")
        self.deleted.append(dict(preconditions or {}))
        self.lease = None
        return True

    def renewed_by(self, holder: str, renew_time: str) -> None:
        """Another run (on a machine whose clock is far behind ours) renews its lease."""
        assert self.lease is not None
        self._stamp({**self.lease, "spec": {**self.lease["spec"], "holderIdentity": holder,
                                            "renewTime": renew_time}})


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_a_lease_renewed_moments_ago_is_not_written_again() -> None:
    kube = _Leases()
    lock_lease.acquire(kube, "me@h:1", fresh=lock_lease.FRESH)  # created
    lock_lease.acquire(kube, "me@h:1", fresh=lock_lease.FRESH)  # just renewed: read only
    assert kube.writes == 1
    lock_lease.acquire(kube, "me@h:1", duration=300)        # an explicit duration: written
    assert kube.writes == 2
    spec = kube.lease["spec"]                               # type: ignore[index]
    spec["renewTime"] = "2000-01-01T00:00:00.000000Z"       # long ago: renewed
    lock_lease.acquire(kube, "me@h:1", fresh=lock_lease.FRESH)
    assert kube.writes == 3 and kube.lease["spec"]["renewTime"] > "2001"  # type: ignore[index]
    with pytest.raises(lock_lease.LockHeld):                # another run's lease, still valid
        lock_lease.acquire(kube, "other@h2:2", fresh=lock_lease.FRESH)


def test_a_lease_read_moments_ago_is_decided_on_without_reading_it_again() -> None:
    """The lease as this module's cluster-identity check read it: no second read; a write
    on it is conditional (its resourceVersion), and a conflict reads it again."""
    kube = _Leases()
    lock_lease.acquire(kube, "me@h:1", fresh=lock_lease.FRESH)          # created
    long_ago = "2000-01-01T00:00:00.000000Z"
    kube.renewed_by("me@h:1", long_ago)
    seen = kube.get(*lock_lease.LEASE, lock_lease.NAME, lock_lease.NAMESPACE)
    reads = kube.reads
    lock_lease.acquire(kube, "me@h:1", fresh=lock_lease.FRESH, read=(seen,))
    assert (kube.reads, kube.writes) == (reads, 2)         # renewed on the read given
    kube.renewed_by("me@h:1", long_ago)                    # changed since ``seen`` was read
    done = lock_lease.acquire(kube, "me@h:1", fresh=lock_lease.FRESH, read=(seen,))
    assert (kube.reads, kube.writes) == (reads + 1, 3)     # 409, read again, renewed
    assert done["spec"]["renewTime"] > "2001"
    lock_lease.acquire(kube, "me@h:1", fresh=lock_lease.FRESH, read=(None,))
    assert (kube.reads, kube.writes) == (reads + 2, 3)     # "absent": 409 AlreadyExists, read


def test_a_skewed_live_lease_stays_held() -> None:
    """The holder's clock is an hour behind ours: by our clock its renewTime is long past,
    but it keeps renewing. Watching it by our own monotonic time shows it alive: refused,
    never taken (today's code compared its renewTime with our clock and took it)."""
    kube = _Leases()
    clock = _Clock()
    old = "2026-01-01T00:00:00.000000Z"
    kube.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": lock_lease.NAME, "namespace": lock_lease.NAMESPACE},
                 "spec": {"holderIdentity": "bob@skewed/run-1", "leaseDurationSeconds": 30,
                          "renewTime": old}})
    writes = kube.writes
    ticks = iter(range(1, 1000))

    def sleep(s: float) -> None:          # bob renews every 10 s of our time
        before = clock.t
        clock.sleep(s)
        if int(clock.t // 10) != int(before // 10):
            kube.renewed_by("bob@skewed/run-1", f"2026-01-01T00:00:{next(ticks):02d}.000000Z")

    with pytest.raises(lock_lease.LockHeld, match="renewed while this run watched it"):
        lock_lease.acquire(kube, "me/run-2", sleep=sleep, clock=clock)
    assert kube.writes == writes and kube.lease["spec"]["holderIdentity"] == "bob@skewed/run-1"  # type: ignore[index]
    assert clock.t - 1000.0 <= 30


def test_an_unrenewed_lease_is_taken_after_its_duration_of_our_time() -> None:
    kube = _Leases()
    clock = _Clock()
    kube.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": lock_lease.NAME, "namespace": lock_lease.NAMESPACE},
                 "spec": {"holderIdentity": "bob@gone/run-1", "leaseDurationSeconds": 30,
                          "renewTime": "2026-01-01T00:00:00.000000Z"}})
    lease = lock_lease.acquire(kube, "me/run-2", sleep=clock.sleep, clock=clock)
    assert clock.t - 1000.0 >= 30                       # watched for its whole duration
    assert lease["spec"]["holderIdentity"] == "me/run-2"
    assert lease["spec"]["leaseTransitions"] == 1


def test_release_deletes_only_the_lease_it_read() -> None:
    kube = _Leases()
    lock_lease.acquire(kube, "me/run-1")
    assert not lock_lease.release(kube, "other/run-2")        # not ours: left
    assert kube.lease is not None
    uid = kube.lease["metadata"]["uid"]
    assert lock_lease.release(kube, "me/run-1")
    assert kube.deleted == [{"uid": uid, "resourceVersion": "1"}]

    # taken by another run between the read and the delete: the preconditions refuse it
    class Racing(_Leases):
        def get(self, *a: Any) -> dict[str, Any] | None:
            seen = super().get(*a)
            if self.lease is not None:
                self.renewed_by("other/run-2", "2026-01-01T00:00:00.000000Z")
            return seen

    racing = Racing()
    lock_lease.acquire(racing, "me/run-1")
    assert not lock_lease.release(racing, "me/run-1")
    assert racing.lease is not None and racing.lease["spec"]["holderIdentity"] == "other/run-2"


def _held(kube: _Leases, clock: _Clock, duration: int = 30) -> Any:
    lease = lock_lease.acquire(kube, "me/run-1", duration=duration)
    lost: list[str] = []
    h = lock_fence.Holding(kube, "me/run-1", lease, clock=clock, on_lost=lost.append)  # type: ignore[arg-type]
    return h, lost


def test_a_run_that_cannot_renew_within_its_deadline_stops() -> None:
    """The renewal outage: no renewal succeeds for two thirds of the lease duration (by our
    monotonic clock): the fence refuses every further request, naming the lock, a third of
    the duration before another run could take the lease."""
    kube, clock = _Leases(), _Clock()
    h, lost = _held(kube, clock)
    h.check()                                   # held: requests pass
    kube.fail = ApiError(503, "ServiceUnavailable", "the server is unavailable")
    clock.sleep(10)
    assert not h.renew()
    h.check()                                   # 10 s < the 20 s deadline: still acting
    clock.sleep(9.9)
    h.check()
    clock.sleep(0.1)
    with pytest.raises(lock_fence.LockLost, match="harvester-upgrade-lock") as exc:
        h.check()
    assert "20s" in str(exc.value) and "unavailable" in str(exc.value)
    assert lost == [str(exc.value)]
    kube.fail = None
    assert not h.renew() and kube.lease["spec"]["holderIdentity"] == "me/run-1"  # type: ignore[index]
    with pytest.raises(lock_fence.LockLost):    # lost for good, whatever the API says now
        h.check()


def test_a_renewal_that_answers_after_the_deadline_does_not_count() -> None:
    kube, clock = _Leases(), _Clock()
    h, lost = _held(kube, clock)

    class Slow(_Leases):
        def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
            clock.sleep(25)                     # the API answered 25 s later
            return super().replace(obj)

    slow = Slow()
    slow.lease, slow.rv = kube.lease, kube.rv
    h.kube = slow
    assert not h.renew()
    assert lost and "renew deadline" in lost[0]


def test_renewal_takes_back_a_deleted_lease_or_stops_if_another_run_has_it() -> None:
    kube, clock = _Leases(), _Clock()
    h, lost = _held(kube, clock)
    kube.lease = None                           # deleted by hand
    assert h.renew()                            # client-go: created again, still ours
    assert kube.lease["spec"]["holderIdentity"] == "me/run-1" and not lost  # type: ignore[index]
    h.check()
    kube.lease = None
    lock_lease.acquire(kube, "second/run-2")    # a second run was quicker
    assert not h.renew()
    assert lost and "second/run-2" in lost[0]
    with pytest.raises(lock_fence.LockLost, match="second/run-2"):
        h.check()


def test_the_fence_stops_every_request_of_the_module() -> None:
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import client
    kube, clock = _Leases(), _Clock()
    h, _lost = _held(kube, clock)
    calls: list[str] = []
    client.set_fence(h.check)
    try:
        client._raw(lambda **kw: calls.append("sent") or {})
        h.lose("test")
        with pytest.raises(lock_fence.LockLost):
            client._raw(lambda **kw: calls.append("sent") or {})
        with client.unfenced():                 # the lock's own requests
            client._raw(lambda **kw: calls.append("lock") or {})
    finally:
        client.set_fence(None)
    assert calls == ["sent", "lock"]


def test_the_watch_holds_requests_back_once_the_lease_is_deleted() -> None:
    """A deletion seen on the watch stops the module's requests (the fence waits) until the
    next renewal settles who holds the lock: taken back here, so they go on."""
    kube, clock = _Leases(), _Clock()
    h, lost = _held(kube, clock)
    events = [{"type": "MODIFIED", "object": kube.lease},          # our own renewal
              {"type": "DELETED", "object": kube.lease}]

    def watch(*_a: Any, **_k: Any) -> Any:
        yield from events

    kube.watch = watch  # type: ignore[attr-defined]
    h.wait_for_change(clock() + 60)
    assert h.suspended and not lost
    kube.lease = None
    assert h.renew() and not h.suspended
    h.check()
    # another run's holder on the watch: held back, and the renewal finds the lock lost
    events[:] = [{"type": "MODIFIED", "object": {**kube.lease,  # type: ignore[dict-item]
                  "spec": {"holderIdentity": "second/run-2"}}}]
    h.wait_for_change(clock() + 60)
    assert h.suspended
    kube.renewed_by("second/run-2", "2026-01-01T00:00:00.000000Z")
    assert not h.renew()
    with pytest.raises(lock_fence.LockLost, match="second/run-2"):
        h.check()


def test_a_lease_this_process_released_is_not_taken_back() -> None:
    """A failing module releases the lease while its renewal loop still runs: the loop sees
    the deletion (as it would a hand's) but must not create the lease again, or the lock
    outlives the run that released it."""
    kube, clock = _Leases(), _Clock()
    h, lost = _held(kube, clock)
    h.stop()
    assert lock_lease.release(kube, "me/run-1") and kube.lease is None
    assert not h.renew()
    assert kube.lease is None and not lost
    h.run()                                     # the loop ends at once, writing nothing
    assert kube.lease is None


def test_old_run_files_removed_at_most_once_an_hour(tmp_path: Any) -> None:
    """A run's first module removes the token files of runs older than a week, and records
    when (a dot-named marker, never read as a token); within the hour after, the directory is
    not scanned again; once the marker is an hour old, it is."""
    week_ago = datetime.now(timezone.utc).timestamp() - 8 * 86400
    old = tmp_path / "boot_1_1"
    old.write_text("aaaa")
    os.utime(old, (week_ago, week_ago))
    recent = tmp_path / "boot_2_2"
    recent.write_text("bbbb")
    lock_run._forget_old_runs(str(tmp_path))  # noqa: SLF001 - the function under test
    assert not old.exists() and recent.exists()
    marker = tmp_path / lock_run.FORGOTTEN
    assert marker.exists() and "." in marker.name
    old.write_text("aaaa")
    os.utime(old, (week_ago, week_ago))
    lock_run._forget_old_runs(str(tmp_path))  # noqa: SLF001
    assert old.exists()                        # scanned less than an hour ago: left
    hour_ago = datetime.now(timezone.utc).timestamp() - lock_run.FORGET_EVERY_S - 1
    os.utime(marker, (hour_ago, hour_ago))
    lock_run._forget_old_runs(str(tmp_path))  # noqa: SLF001
    assert not old.exists() and recent.exists() and marker.exists()
