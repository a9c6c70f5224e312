"""The upgrade lock (Lease harvester-system/harvester-upgrade-lock): one run at a time.

* a live lease of another run stops a second run at once, naming the holder and the expiry,
  before anything is written (no plan created);
* an expired lease, or a stale one (a dead ansible-playbook of this host), is taken over;
* a real concurrent run: while a whole upgrade runs, a second run fails naming the first;
  the first ends Succeeded and releases the lease.
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytest.importorskip("harvester_sim")

from testkit import BIN, ROOT, ansible_env  # noqa: E402

PLAN_API = "management.harvesterhci.io/v1beta1"
LEASE = ("coordination.k8s.io/v1", "Lease", "harvester-upgrade-lock", "harvester-system")
PREFLIGHT = {"upgrade_what_if": False}

pytestmark = [pytest.mark.timeout(900)]


def _stamp(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _put_lease(sim: Any, holder: str, renewed: datetime, duration: int) -> None:
    c = sim.world.client
    c.create({"apiVersion": LEASE[0], "kind": LEASE[1],
              "metadata": {"name": LEASE[2], "namespace": LEASE[3]},
              "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                       "acquireTime": _stamp(renewed), "renewTime": _stamp(renewed)}})


def test_live_lease_of_another_run_stops_at_once(simulator: Any, playbook: Any) -> None:
    sim = simulator("three-node", speed=200)
    _put_lease(sim, "alice@bastion:4242", datetime.now(timezone.utc), 600)
    t0 = time.monotonic()
    res = playbook(sim, "upgrade.yml", tags="preflight", extra_vars=PREFLIGHT, timeout=300)
    assert res.rc != 0, res
    assert "alice@bastion:4242" in res.output and "expires" in res.output, res
    # refused, not waited out: the lease (600 s) would have expired first (a fixed bound below
    # that would only measure how loaded the machine is)
    assert time.monotonic() - t0 < 600
    assert sim.world.client.try_list(PLAN_API, "UpgradePlan") == [], \
        "a plan was created although another run holds the lock"
    lease = sim.world.client.try_get(*LEASE)
    assert lease and lease["spec"]["holderIdentity"] == "alice@bastion:4242"


@pytest.mark.parametrize("how", ["expired", "stale"])
def test_expired_or_stale_lease_is_taken_over(how: str, simulator: Any, playbook: Any,
                                              tmp_path: Any) -> None:
    """Expired: nobody renewed it while the run watched it for its duration (5 s here) of
    the run's own clock. Stale: its holder's token file on this machine shows a run whose
    ansible-playbook is gone (taken at once)."""
    sim = simulator("three-node", speed=200)
    now = datetime.now(timezone.utc)
    env = {"HARVESTER_UPGRADE_LOCK_DIR": str(tmp_path / "runs")}
    if how == "expired":
        _put_lease(sim, "alice@bastion:4242/run-0123456789abcdef", now - timedelta(hours=1), 5)
    else:   # a run of this machine whose ansible-playbook is gone
        from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import lock_run
        dead = 2 ** 22 + 17
        os.environ["HARVESTER_UPGRADE_LOCK_DIR"] = env["HARVESTER_UPGRADE_LOCK_DIR"]
        try:
            token = lock_run.run_token(dead)
        finally:
            del os.environ["HARVESTER_UPGRADE_LOCK_DIR"]
        _put_lease(sim, f"{getpass.getuser()}@{socket.gethostname()}:{dead}/run-{token}",
                   now, 600)
    res = playbook(sim, "upgrade.yml", tags="preflight", extra_vars=PREFLIGHT, timeout=300,
                   env=env)
    assert res.rc == 0, str(res)
    assert len(sim.world.client.try_list(PLAN_API, "UpgradePlan")) == 1
    assert sim.world.client.try_get(*LEASE) is None, "the run did not release the lock at its end"


def test_concurrent_run_fails_naming_the_holder(simulator: Any, playbook: Any,
                                                tmp_path: Any) -> None:
    sim = simulator("three-node", speed=200)
    env = ansible_env(sim)
    log = tmp_path / "first.log"
    with open(log, "wb") as out:
        first = subprocess.Popen([str(BIN / "ansible-playbook"), "upgrade.yml"], cwd=ROOT,
                                 env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while sim.world.client.try_get(*LEASE) is None and time.monotonic() < deadline:
            time.sleep(0.5)
        lease = sim.world.client.try_get(*LEASE)
        assert lease is not None, log.read_text()
        holder = lease["spec"]["holderIdentity"]
        assert f":{first.pid}/run-" in holder, holder
        second = playbook(sim, "upgrade.yml", timeout=300)
        assert second.rc != 0, second
        assert holder in second.output and "expires" in second.output, second
        assert first.wait(timeout=600) == 0, log.read_text()[-6000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    plans = sim.world.client.try_list(PLAN_API, "UpgradePlan")
    assert len(plans) == 1 and plans[0]["status"]["currentPhase"] == "Succeeded"
    assert sim.world.client.try_get(*LEASE) is None
    from harvester_sim import report as rep
    assert rep.build(sim.world)["invariant_violations"] == []


def _our_processes(kubeconfig: str) -> list[str]:
    """Processes (ansible workers, modules) whose environment points at this simulator."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"KUBECONFIG={kubeconfig}".encode() in env and cmd:
            found.append(f"{pid} {cmd}")   # whole: CI's longer paths cut a 120-char prefix
    return found


def test_a_killed_runs_module_stops_instead_of_working_beside_the_next_run(
        simulator: Any, tmp_path: Any) -> None:
    """kill -9 of ansible-playbook's process group while a node step waits (here: a paused
    node, up to 600 s): nothing of that run is left working against the cluster afterwards.
    Ansible's workers setsid(), so they and their modules are outside that process group; in
    this set-up they end with the run anyway, and lock_fence.watch_run (unit-tested) stops a module
    whose ansible-playbook is gone should one outlive it (chaos saw a node state written by a
    killed run's step after the kill)."""
    import signal
    sim = simulator("three-node", speed=200)
    kubeconfig = sim.env["KUBECONFIG"]
    env = ansible_env(sim, TMPDIR=str(tmp_path))
    log = open(tmp_path / "run.log", "wb")  # noqa: SIM115
    evars = '{"upgrade_pause_nodes": ["node-1"], "node_upgrade_pause_timeout": 600}'
    play = subprocess.Popen([str(BIN / "ansible-playbook"), "upgrade.yml", "-e", evars],
                            cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        started = time.monotonic()
        deadline = started + 420   # generous: on a loaded machine the pause comes late
        modules: list[str] = []
        ours: list[str] = []
        c = sim.world.client
        while time.monotonic() < deadline and not modules:   # a task at work, lock held
            try:
                st = ((c.list(PLAN_API, "UpgradePlan") or [{}])[0].get("status") or {}) if \
                    c.try_get(*LEASE[:2], LEASE[2], namespace=LEASE[3]) else {}
            except Exception:  # noqa: BLE001 - the CRD is not installed yet
                st = {}
            paused = ((st.get("nodeUpgradeStatuses") or {}).get("node-1") or {}).get("state")
            if paused == "UpgradePaused":
                # the module waiting for node-1 to be released from pauseNodes (up to 600 s):
                # node_cycle's second call (node_gate step=pause in steps mode), run inside
                # the task's worker (a fork of ansible-playbook, setsid) or, with
                # harvester_upgrade_in_process=false, in a process of its own under it
                ours = _our_processes(kubeconfig)
                modules = [p for p in ours if "AnsiballZ_node_" in p or (
                    "ansible-playbook" in p and int(p.split()[0]) != play.pid)]
            time.sleep(0.1)
        assert modules, (f"after {time.monotonic() - started:.0f}s: processes "
                         f"{[p[:200] for p in ours]}\n"
                         + (tmp_path / "run.log").read_text()[-3000:])
        os.killpg(play.pid, signal.SIGKILL)
        play.wait()
        deadline = time.monotonic() + 15
        left = _our_processes(kubeconfig)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = _our_processes(kubeconfig)
        assert not left, left
    finally:
        if play.poll() is None:
            os.killpg(play.pid, signal.SIGKILL)
            play.wait()
        for p in _our_processes(kubeconfig):   # what this test started and left behind
            try:
                os.kill(int(p.split()[0]), signal.SIGKILL)
            except OSError:
                pass
        log.close()


# -- fencing (client-go leader election semantics; docs/resilience.md, "The upgrade lock") ---

WRITES = {"create", "update", "patch", "delete", "deletecollection"}
PAUSED = '{"upgrade_pause_nodes": ["node-1"], "node_upgrade_pause_timeout": 900}'


def _env(sim: Any, tmp_path: Any, kubeconfig: Any = None, **extra: str) -> dict[str, str]:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return ansible_env(sim, kubeconfig=kubeconfig, TMPDIR=str(tmp), **extra)


def _start(env: dict[str, str], log: Any, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(BIN / "ansible-playbook"), "upgrade.yml", *args], cwd=ROOT,
                            env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _wait_paused(sim: Any, run: subprocess.Popen[bytes], log: Any, node: str = "node-1") -> None:
    """Until ``node`` is UpgradePaused: the run's node module waits there (holding the lock)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:
        plans = sim.world.client.try_list(PLAN_API, "UpgradePlan")
        st = ((plans[0].get("status") or {}) if plans else {}).get("nodeUpgradeStatuses") or {}
        if (st.get(node) or {}).get("state") == "UpgradePaused":
            time.sleep(1.0)   # the module's second call (the wait) has taken the lock
            return
        time.sleep(0.2)
    raise AssertionError(f"{node} never paused (rc {run.poll()})\n"
                         + log.read_text()[-4000:])


def _unpause(sim: Any) -> None:
    def fn(cur: dict[str, Any]) -> dict[str, Any]:
        cur["spec"]["nodeUpgradeOption"]["pauseNodes"] = []
        return cur
    plan = sim.world.client.try_list(PLAN_API, "UpgradePlan")[0]
    sim.world.client.modify(PLAN_API, "UpgradePlan", plan["metadata"]["name"], fn)


def _kill(*runs: subprocess.Popen[bytes]) -> None:
    import signal
    for run in runs:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()


def _is_lease(e: dict[str, Any]) -> bool:
    """A request for the lock's Lease (a create names no object: any Lease create in its
    namespace)."""
    ref = e["objectRef"] or {}
    return ref.get("resource") == "leases" and ref.get("namespace") == LEASE[3] and (
        ref.get("name") == LEASE[2] or e["verb"] == "create")


def test_a_run_that_cannot_renew_stops_before_its_lease_expires(
        simulator: Any, playbook: Any, tmp_path: Any) -> None:
    """A renewal outage (every request of the first run to the Lease answers 503) while the
    first run's node module waits at a paused node: the run stops on its own once its renew
    deadline (2/3 of the 30 s lease) passed, naming the lock, before its lease expires; a
    second run then watches the lease stay unchanged for 30 s, takes it, and no request of
    the first follows (the API server's audit log); a run that stopped renewing but went on
    waiting and acting with the lease expired fails this."""
    sim = simulator("three-node", speed=200)
    sim.server.audit = []
    sim.server.auth.add_user("first-run", groups=("system:masters",))
    kc = sim.server.write_kubeconfig(tmp_path / "kubeconfig-first", user="first-run")
    duration = 30
    log = tmp_path / "first.log"
    with open(log, "wb") as out:
        first = _start(_env(sim, tmp_path, kc, HARVESTER_UPGRADE_LOCK_DURATION=str(duration)),
                       out, "-e", PAUSED)
    try:
        _wait_paused(sim, first, log)
        sim.world.faults.add({"kind": "api_error", "code": 503,
                              "target": {"resource": "leases", "user": "first-run"}})
        assert first.wait(timeout=300) != 0
        out1 = log.read_text()
        assert "lost the upgrade lock (Lease harvester-system/harvester-upgrade-lock)" in \
            out1, out1[-4000:]
        assert "renew deadline" in out1, out1[-4000:]
        # the second run: the lease looks live by the clock at first, then unchanged for 30 s
        second = playbook(sim, "upgrade.yml", tags="preflight", extra_vars=PREFLIGHT,
                          timeout=600, env={"HARVESTER_UPGRADE_LOCK_DURATION": str(duration)})
        deadline = time.monotonic() + 300
        while "holds the lock" in second.output and time.monotonic() < deadline:
            time.sleep(5)
            second = playbook(sim, "upgrade.yml", tags="preflight", extra_vars=PREFLIGHT,
                              timeout=600,
                              env={"HARVESTER_UPGRADE_LOCK_DURATION": str(duration)})
        assert second.rc == 0, second
    finally:
        _kill(first)
    audit = list(sim.server.audit)
    mine = [i for i, e in enumerate(audit) if e["user"]["username"] == "first-run"]
    renewed = [i for i in mine if _is_lease(audit[i]) and audit[i]["verb"] in WRITES
               and audit[i]["responseStatus"]["code"] < 300]
    taken = [i for i, e in enumerate(audit) if e["user"]["username"] != "first-run"
             and _is_lease(e) and e["verb"] in WRITES and e["responseStatus"]["code"] < 300]
    assert renewed and taken, (renewed, taken)
    # no request at all of the first run after the second's acquire
    assert max(mine) < taken[0], [audit[i] for i in mine if i > taken[0]][:5]
    # and its last one (anything: the lease renewals fail, the rest would pass) came before
    # the lease it last renewed expired
    last_renewal = datetime.fromisoformat(
        audit[renewed[-1]]["requestReceivedTimestamp"].replace("Z", "+00:00"))
    last_request = datetime.fromisoformat(
        audit[max(mine)]["requestReceivedTimestamp"].replace("Z", "+00:00"))
    assert last_request < last_renewal + timedelta(seconds=duration), (last_renewal,
                                                                       last_request)
    lease = sim.world.client.try_get(*LEASE)
    assert lease is None or "first-run" not in str(lease["spec"].get("holderIdentity"))


def test_a_skewed_live_lease_stays_held(simulator: Any, playbook: Any) -> None:
    """The holder's clock is an hour behind: its renewTime is long past by ours, but it keeps
    renewing (every 2 s here). The run watches the lease by its own clock, sees it change,
    and is refused naming the holder; the lease is not taken and no plan is created."""
    import threading
    sim = simulator("three-node", speed=200)
    holder = "bob@skewed/run-0123456789abcdef"
    behind = datetime.now(timezone.utc) - timedelta(hours=1)
    _put_lease(sim, holder, behind, 6)
    stop = threading.Event()

    def renew() -> None:
        c = sim.world.client
        while not stop.wait(2.0):
            def fn(cur: dict[str, Any]) -> dict[str, Any]:
                cur["spec"]["renewTime"] = _stamp(datetime.now(timezone.utc)
                                                  - timedelta(hours=1))
                return cur
            c.modify(LEASE[0], LEASE[1], LEASE[2], fn, namespace=LEASE[3])

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        res = playbook(sim, "upgrade.yml", tags="preflight", extra_vars=PREFLIGHT, timeout=300)
    finally:
        stop.set()
        renewer.join(timeout=10)
    assert res.rc != 0, res
    assert holder in res.output and "renewed while this run watched it" in res.output, res
    assert sim.world.client.try_list(PLAN_API, "UpgradePlan") == []
    lease = sim.world.client.try_get(*LEASE)
    assert lease and lease["spec"]["holderIdentity"] == holder


def test_a_lease_deleted_by_hand_during_node_upgrade_leaves_one_run_acting(
        simulator: Any, tmp_path: Any) -> None:
    """The Lease is deleted by hand while the first run's node module waits at a paused node,
    and a second run starts at once. The first takes it back at once (it watches the lease),
    so the second is refused naming the lock (or, had the second been quicker, the first
    would stop naming it): one run goes on. Released from the pause, the upgrade ends
    Succeeded with each node rebooted once."""
    sim = simulator("three-node", speed=200)
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    with open(logs[0], "wb") as out:
        first = _start(_env(sim, tmp_path), out, "-e", PAUSED)
    second: subprocess.Popen[bytes] | None = None
    try:
        _wait_paused(sim, first, logs[0])
        holder = (sim.world.client.try_get(*LEASE) or {}).get("spec", {}).get("holderIdentity")
        assert holder, "the first run does not hold the lock"
        sim.world.client.delete(LEASE[0], LEASE[1], LEASE[2], namespace=LEASE[3])
        with open(logs[1], "wb") as out:
            second = _start(_env(sim, tmp_path), out)
        runs = [first, second]
        deadline = time.monotonic() + 300
        while all(r.poll() is None for r in runs) and time.monotonic() < deadline:
            time.sleep(0.2)
        stopped = [i for i, r in enumerate(runs) if r.poll() is not None]
        assert len(stopped) == 1, "both runs go on acting (or both ended)"
        i = stopped[0]
        text = logs[i].read_text()
        assert runs[i].returncode != 0, text[-4000:]
        assert "Lease harvester-system/harvester-upgrade-lock" in text, text[-4000:]
        other = runs[1 - i]
        _unpause(sim)
        assert other.wait(timeout=900) == 0, logs[1 - i].read_text()[-6000:]
    finally:
        _kill(first, *([second] if second is not None else []))
    plans = sim.world.client.try_list(PLAN_API, "UpgradePlan")
    assert len(plans) == 1 and plans[0]["status"]["currentPhase"] == "Succeeded"
    from harvester_sim import report as rep
    report = rep.build(sim.world)
    reboots: dict[str, int] = {}
    for e in report.get("timeline") or []:
        if e.get("event") == "node_reboot":
            reboots[str(e.get("node"))] = reboots.get(str(e.get("node")), 0) + 1
    assert len(reboots) == 3 and set(reboots.values()) == {1}, reboots
    assert report["invariant_violations"] == []
    assert sim.world.client.try_get(*LEASE) is None
