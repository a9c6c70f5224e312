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

from conftest import BIN, ROOT  # noqa: E402

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


def _lease(sim: Any) -> dict[str, Any] | None:
    try:
        return sim.world.client.get(*LEASE)
    except Exception:  # noqa: BLE001 - 404
        return None


def _plans(sim: Any) -> list[dict[str, Any]]:
    try:
        return list(sim.world.client.list(PLAN_API, "UpgradePlan"))
    except Exception:  # noqa: BLE001 - no CRD
        return []


def test_live_lease_of_another_run_stops_at_once(simulator: Any, playbook: Any) -> None:
    sim = simulator("three-node", speed=200)
    _put_lease(sim, "alice@bastion:4242", datetime.now(timezone.utc), 600)
    t0 = time.monotonic()
    res = playbook(sim, "upgrade.yml", tags="preflight", extra_vars=PREFLIGHT, timeout=300)
    assert res.rc != 0, res
    assert "alice@bastion:4242" in res.output and "expires" in res.output, res
    assert time.monotonic() - t0 < 120
    assert _plans(sim) == [], "a plan was created although another run holds the lock"
    lease = _lease(sim)
    assert lease and lease["spec"]["holderIdentity"] == "alice@bastion:4242"


@pytest.mark.parametrize("how", ["expired", "stale"])
def test_expired_or_stale_lease_is_taken_over(how: str, simulator: Any, playbook: Any) -> None:
    sim = simulator("three-node", speed=200)
    now = datetime.now(timezone.utc)
    if how == "expired":
        _put_lease(sim, "alice@bastion:4242", now - timedelta(hours=1), 600)
    else:   # this host, a pid that is not an ansible-playbook
        _put_lease(sim, f"{getpass.getuser()}@{socket.gethostname()}:{os.getpid()}", now, 600)
    res = playbook(sim, "upgrade.yml", tags="preflight", extra_vars=PREFLIGHT, timeout=300)
    assert res.rc == 0, str(res)
    assert len(_plans(sim)) == 1
    assert _lease(sim) is None, "the run did not release the lock at its end"


def test_concurrent_run_fails_naming_the_holder(simulator: Any, playbook: Any,
                                                tmp_path: Any) -> None:
    sim = simulator("three-node", speed=200)
    env = {**os.environ, **sim.env, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
           "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    log = tmp_path / "first.log"
    with open(log, "wb") as out:
        first = subprocess.Popen([str(BIN / "ansible-playbook"), "upgrade.yml"], cwd=ROOT,
                                 env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while _lease(sim) is None and time.monotonic() < deadline:
            time.sleep(0.5)
        lease = _lease(sim)
        assert lease is not None, log.read_text()
        holder = lease["spec"]["holderIdentity"]
        assert holder.endswith(f":{first.pid}"), holder
        second = playbook(sim, "upgrade.yml", timeout=300)
        assert second.rc != 0, second
        assert holder in second.output and "expires" in second.output, second
        assert first.wait(timeout=600) == 0, log.read_text()[-6000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    plans = _plans(sim)
    assert len(plans) == 1 and plans[0]["status"]["currentPhase"] == "Succeeded"
    assert _lease(sim) is None
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
    this set-up they end with the run anyway, and lock.watch_run (unit-tested) stops a module
    whose ansible-playbook is gone should one outlive it (chaos saw a node state written by a
    killed run's step after the kill)."""
    import signal
    sim = simulator("three-node", speed=200)
    kubeconfig = sim.env["KUBECONFIG"]
    env = {**os.environ, **sim.env, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
           "TMPDIR": str(tmp_path)}
    log = open(tmp_path / "run.log", "wb")  # noqa: SIM115
    evars = '{"upgrade_pause_nodes": ["node-1"], "node_upgrade_pause_timeout": 600}'
    play = subprocess.Popen([str(BIN / "ansible-playbook"), "upgrade.yml", "-e", evars],
                            cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        started = time.monotonic()
        deadline = started + 420   # CI under load: the run reached the pause after ~120 s once
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
