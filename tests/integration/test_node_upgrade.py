"""End-to-end: the node loop (playbooks/node_upgrade.yml) against the simulator.

Each *run* brings a simulated cluster to ``ClusterUpgraded`` by hand (``at_cluster_upgraded``:
the UpgradePlan CRD and a plan with ``releaseMetadata``, the Rancher cluster patched with the
drain hooks and the new ``kubernetesVersion``, as ClusterUpgrade leaves it), runs
``playbooks/node_upgrade.yml`` with ``ansible-playbook`` exactly as a user would, and keeps a
snapshot of the outcome (plan, nodes, VMs, the simulator's report, the play's output). The
simulator is stopped as soon as its run is over; tests assert on the snapshots.

Runs are independent, so the module runs the ones the selected tests need on a small thread
pool (``NODE_TEST_PARALLEL``, default 2: most of a run is ansible-playbook and module start-up
in subprocesses, so two runs use two cores) and each test waits for its own. Several tests
share a run (e.g. ``--check`` runs on the three-node cluster before the real run).

``NODE_TEST_SPEED`` (default 1000) is the simulator's clock speed: a node reboot (180 s
simulated) takes 0.18 s; every deadline of the play is in wall seconds.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

harvester_sim = pytest.importorskip("harvester_sim")

from node_setup import (  # noqa: E402
    PLAN,
    at_cluster_upgraded,
    get_plan,
    min_migrations,
    nodes_in_play_order,
    order_of,
    running_vms,
    vmis,
    wait_settled,
)

from testkit import PLAN_API, ROOT  # noqa: E402

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
SPEED = float(os.environ.get("NODE_TEST_SPEED", "1000"))
PARALLEL = max(1, int(os.environ.get("NODE_TEST_PARALLEL", "2")))
HOOKS = {"preDrainHooks": [{"annotation": "management.harvesterhci.io/pre-hook"}],
         "postDrainHooks": [{"annotation": "management.harvesterhci.io/post-hook"}]}
PRE_DRAIN = "rke.cattle.io/pre-drain"

pytestmark = [pytest.mark.timeout(900)]


# ---------------------------------------------------------------------------------------------
# runs
# ---------------------------------------------------------------------------------------------

@dataclass
class Run:
    """What a test may assert on, taken from the cluster when the play was over."""

    name: str
    rc: int = -1
    output: str = ""
    seconds: float = 0.0
    plan: dict[str, Any] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    start: dict[str, dict[str, Any]] = field(default_factory=dict)   # VMIs before the play
    running_before: set[str] = field(default_factory=set)
    running_after: set[str] = field(default_factory=set)
    recorded: set[str] = field(default_factory=set)    # VMs in the restore ConfigMap
    report: dict[str, Any] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    rel: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> dict[str, Any]:
        return self.plan.get("status") or {}

    @property
    def states(self) -> dict[str, str]:
        return {n: s.get("state", "") for n, s in
                (self.status.get("nodeUpgradeStatuses") or {}).items()}

    @property
    def migrations(self) -> int:
        return int(self.report["vm_migrations"]["total"])

    @property
    def bound(self) -> int:
        migratable = {k for k in self.running_before if k not in self.recorded}
        return min_migrations(self.start, self.nodes, self.order, migratable)

    def events(self, name: str, **match: Any) -> list[dict[str, Any]]:
        return [e for e in self.report.get("timeline") or [] if e.get("event") == name
                and all(e.get(k) == v for k, v in match.items())]

    def __str__(self) -> str:   # shown on assertion failures
        return f"run {self.name}: rc={self.rc} states={self.states}\n{self.output[-5000:]}"


def _begin(sim: Any, run: Run, **kw: Any) -> None:
    wait_settled(sim)
    run.start = vmis(sim)
    run.running_before = running_vms(sim)
    run.order = order_of(sim)
    run.rel = at_cluster_upgraded(sim, **kw)


def _finish(sim: Any, run: Run, res: Any, t0: float) -> Run:
    from harvester_sim import report as rep
    c = sim.world.client
    run.rc, run.output, run.seconds = res.rc, res.output, round(time.monotonic() - t0, 1)
    run.plan = get_plan(sim)
    run.nodes = {n["metadata"]["name"]: n for n in c.list("v1", "Node")}
    run.running_after = running_vms(sim)
    cm = c.try_get("v1", "ConfigMap", f"{PLAN}-restore-vm", namespace="harvester-system")
    run.recorded = {k for v in ((cm or {}).get("data") or {}).values()
                    for k in v.split(",") if k}
    run.report = rep.build(sim.world)
    run.extra["cluster_after"] = c.get("provisioning.cattle.io/v1", "Cluster", "local",
                                       "fleet-local")["spec"]
    run.extra["jobs"] = {j["metadata"]["name"]: j for j in c.list(
        "batch/v1", "Job", "harvester-system")}
    run.extra["host_files"] = {n: dict(sim.world.controllers["kubelet"].host_files(n) or {})
                               for n in run.nodes}
    return run


_RUN_PLAYBOOK: list[Callable[..., Any]] = []   # conftest's run_playbook, set by ``runs``


def _play(sim: Any, *args: str, **kw: Any) -> Any:
    return _RUN_PLAYBOOK[0](sim, "playbooks/node_upgrade.yml", *args, **kw)


def run_three_node() -> Run:
    """three-node, target-aware; the --check node plan first, on the same cluster."""
    from harvester_sim import testing
    run = Run("three-node")
    t0 = time.monotonic()
    with testing.running("three-node", speed=SPEED) as sim:
        _begin(sim, run)
        rv = get_plan(sim)["metadata"]["resourceVersion"]
        c = sim.world.client
        cluster_rv = c.get("provisioning.cattle.io/v1", "Cluster", "local",
                           "fleet-local")["metadata"]["resourceVersion"]
        run.extra["cluster_before"] = c.get("provisioning.cattle.io/v1", "Cluster", "local",
                                            "fleet-local")["spec"]
        check = _play(sim, check=True)
        run.extra["check"] = check
        run.extra["check_changed_plan"] = get_plan(sim)["metadata"]["resourceVersion"] != rv
        run.extra["check_changed_cluster"] = c.get(
            "provisioning.cattle.io/v1", "Cluster", "local",
            "fleet-local")["metadata"]["resourceVersion"] != cluster_rv
        from harvester_sim import report as rep
        run.extra["check_migrations"] = rep.build(sim.world)["vm_migrations"]["total"]
        return _finish(sim, run, _play(sim), t0)


def run_five_node() -> Run:
    """five-node-mixed, target-aware. The node holding the degraded VM's replica that is last
    in the order is paused; when Rancher asks for it, the volume's other replicas are failed
    for a while (volume_degraded, healing after HEAL_S) and then the node is released from
    pauseNodes, so its turn starts with it holding the volume's last healthy replica. (The
    replica the scenario starts failed is rebuilt by Longhorn once the VM runs.)"""
    from harvester_sim import testing
    run = Run("five-node-mixed")
    t0 = time.monotonic()
    with testing.running("five-node-mixed", speed=SPEED) as sim:
        c = sim.world.client
        order = order_of(sim)
        lh = sim.world.controllers["longhorn"]
        wait_settled(sim)
        vm = c.get("kubevirt.io/v1", "VirtualMachine", "degraded", namespace="default")
        claim = vm["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]
        name = c.get("v1", "PersistentVolumeClaim", claim["claimName"],
                     namespace="default")["spec"]["volumeName"]
        nodes = sorted({r["spec"]["nodeID"] for r in c.list(
            "longhorn.io/v1beta2", "Replica", namespace="longhorn-system")
            if r["spec"].get("volumeName") == name}, key=order.index)
        assert len(nodes) == 3, nodes
        *others, paused = nodes
        other = others[0]
        run.extra.update(volume=name, paused=paused, other=other, others=others)
        _begin(sim, run, pause=[paused])
        secret = next(m["metadata"]["name"] for m in c.list(
            "cluster.x-k8s.io/v1beta1", "Machine", namespace="fleet-local")
            if (m.get("status") or {}).get("nodeRef", {}).get("name") == paused)
        secret += "-machine-plan"

        def paused_then_degrade_then_resume() -> None:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                st = (get_plan(sim).get("status") or {}).get("nodeUpgradeStatuses") or {}
                sec = c.get("v1", "Secret", secret, namespace="fleet-local")
                asked = PRE_DRAIN in (sec["metadata"].get("annotations") or {})
                if (st.get(paused) or {}).get("state") == "UpgradePaused" and asked:
                    run.extra["degraded_at"] = sim.world.clock.now()
                    run.extra["victims"] = sim.world.runtime.run_sync(
                        lambda: lh.degrade(name, 2, HEAL_S, nodes=others))

                    def fn(cur: dict[str, Any]) -> dict[str, Any]:
                        cur["spec"]["nodeUpgradeOption"]["pauseNodes"] = []
                        return cur
                    c.modify(PLAN_API, "UpgradePlan", PLAN, fn)
                    return
                time.sleep(0.05)

        thread = threading.Thread(target=paused_then_degrade_then_resume, daemon=True)
        thread.start()
        res = _play(sim)
        thread.join(timeout=5)
        return _finish(sim, run, res, t0)


def _four_node(target_aware: bool, version: str = "v1.6.0") -> Run:
    """four-node-big-worker (tests/integration/scenarios): the naive baseline against
    target-aware placement on the same cluster. To v1.6.0 KubeVirt runs 1.5.2 (no
    addedNodeSelector: Harvester's migrate action); to v1.7.0 it runs 1.6.3."""
    from harvester_sim import testing
    run = Run("four-node-big-worker" + ("" if target_aware else "-naive")
              + ("" if version == "v1.6.0" else f"-{version}"))
    t0 = time.monotonic()
    with testing.running(str(SCENARIOS / "four-node-big-worker.yaml"), speed=SPEED) as sim:
        _begin(sim, run, version=version)
        res = _play(sim, extra_vars={"node_upgrade_target_aware": target_aware})
        run.extra["migrations"] = sim.world.client.list(
            "kubevirt.io/v1", "VirtualMachineInstanceMigration")
        return _finish(sim, run, res, t0)


# simulated seconds the degraded volume stays without a second healthy replica: below the
# replica-replenishment-wait-interval the play holds during the node upgrade (1800 s), after
# which Longhorn would replace the failed replicas on the fourth node instead
HEAL_S = 1500.0


def run_single_node() -> Run:
    from harvester_sim import testing
    run = Run("single-node")
    t0 = time.monotonic()
    with testing.running("single-node", speed=SPEED) as sim:
        _begin(sim, run, single=True)
        return _finish(sim, run, _play(sim), t0)


def run_migration_fault() -> Run:
    """The first migration off node-1 fails; with no retry allowed that is final."""
    from harvester_sim import testing
    run = Run("migration-fault")
    t0 = time.monotonic()
    with testing.running("three-node-migration-fail", speed=SPEED) as sim:
        _begin(sim, run)
        res = _play(sim, extra_vars={"node_upgrade_migration_retries": 0})
        return _finish(sim, run, res, t0)


def run_never_returns() -> Run:
    """three-node-node-never-returns with the fault on the first node (the point is the same,
    the run is one node shorter)."""
    from harvester_sim import testing
    from harvester_sim.scenarios import loader
    scn = loader.load("three-node-node-never-returns")
    for f in scn["faults"]:
        f["target"] = {"node": "node-1"}
    run = Run("never-returns")
    t0 = time.monotonic()
    with testing.running(scn, speed=SPEED) as sim:
        _begin(sim, run)
        res = _play(sim, extra_vars={"node_upgrade_node_timeout": 10})
        return _finish(sim, run, res, t0)


# longest first: the pool starts them in this order
RUNNERS: dict[str, Callable[[], Run]] = {
    "five-node-mixed": run_five_node,
    "four-node-big-worker-naive": lambda: _four_node(False),
    "four-node-big-worker": lambda: _four_node(True),
    "four-node-big-worker-v1.7.0": lambda: _four_node(True, "v1.7.0"),
    "three-node": run_three_node,
    "never-returns": run_never_returns,
    "single-node": run_single_node,
    "migration-fault": run_migration_fault,
}


class Runs:
    def __init__(self, futures: dict[str, cf.Future[Run]]) -> None:
        self.futures = futures

    def __getitem__(self, name: str) -> Run:
        run = self.futures[name].result()
        _save(run)
        return run


def _save(run: Run) -> None:
    out = ROOT / "out"
    out.mkdir(exist_ok=True)
    (out / f"test-node-{run.name}.json").write_text(json.dumps(
        {"rc": run.rc, "seconds": run.seconds, "states": run.states,
         "migrations": run.report.get("vm_migrations"), "bound": run.bound if run.order else 0,
         "violations": run.report.get("invariant_violations")}, indent=1, default=str))


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, playbook_runner: Callable[..., Any]
         ) -> Iterator[Runs]:
    _RUN_PLAYBOOK[:] = [playbook_runner]
    wanted: list[str] = []
    for item in request.session.items:
        mark = item.get_closest_marker("node_run")
        if mark is not None:
            wanted += [n for n in mark.args if n not in wanted]
    wanted.sort(key=list(RUNNERS).index)
    pool = cf.ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="node-run")
    futures = {n: pool.submit(RUNNERS[n]) for n in wanted}
    try:
        yield Runs(futures)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def assert_all_upgraded(run: Run) -> None:
    for name, n in run.nodes.items():
        info = n["status"]["nodeInfo"]
        assert info["osImage"] == run.rel["os"], name
        assert info["kubeletVersion"].replace("-", "+") == run.rel["kubernetes"].replace("-", "+")
        assert not n["spec"].get("unschedulable"), name


# ---------------------------------------------------------------------------------------------
# three-node
# ---------------------------------------------------------------------------------------------

@pytest.mark.node_run("three-node")
def test_three_node_target_aware_reaches_the_lower_bound(runs: Runs) -> None:
    run = runs["three-node"]
    assert run.rc == 0, run
    assert run.status["currentPhase"] == "NodeUpgraded", run
    assert set(run.states.values()) == {"PostDrained"}, run
    assert_all_upgraded(run)
    assert run.report["invariant_violations"] == [], run.report["invariant_violations"]
    # the pinned and the PCI VM were shut down, recorded and restored
    assert any("pinned" in k for k in run.recorded), run.recorded
    assert any("gpu" in k for k in run.recorded), run.recorded
    assert run.running_before <= run.running_after
    # every migratable VM once, those that started on the first node once more
    first = run.order[0]
    migratable = run.running_before - run.recorded
    simple = len(migratable) + len([k for k in migratable
                                    if run.start[k]["status"]["nodeName"] == first])
    assert run.bound == simple
    assert run.migrations == run.bound, (run.report["vm_migrations"], run.bound)
    assert [e["node"] for e in run.events("pre_drain_set")] == run.order
    assert nodes_in_play_order(run.output) == run.order


@pytest.mark.node_run("three-node")
def test_rancher_patched_once_and_pre_drain_jobs_run(runs: Runs) -> None:
    """Seed 000 ``upgradeKubernetes`` / reference §C.1: kubernetesVersion, provisionGeneration
    + 1 and upgradeStrategy in one patch when NodeUpgrade begins; every node's pre-drain Job
    ran ``upgrade_node.sh pre-drain`` with the env the script reads and undid the drop-in."""
    run = runs["three-node"]
    assert run.rc == 0, run
    before, after = run.extra["cluster_before"], run.extra["cluster_after"]
    gen0 = int((before.get("rkeConfig") or {}).get("provisionGeneration") or 0)
    assert after["kubernetesVersion"] == run.rel["kubernetes"]
    assert after["rkeConfig"]["provisionGeneration"] == gen0 + 1
    assert run.status["provisionGeneration"] == gen0 + 1
    assert not run.extra["check_changed_cluster"]
    assert len(run.events("planner_started")) <= 1
    for node in run.order:
        job = run.extra["jobs"][f"{PLAN}-node-upgrade-pre-drain-{node}"]
        ctr = job["spec"]["template"]["spec"]["containers"][0]
        assert ctr["command"] == ["upgrade_node.sh"] and ctr["args"] == ["pre-drain"]
        env = {e["name"]: e.get("value") for e in ctr["env"]}
        assert env == {"HARVESTER_UPGRADEPLAN_NAME": PLAN, "HARVESTER_UPGRADE_NODE_NAME": node}
        assert any(c["type"] == "Complete" and c["status"] == "True"
                   for c in job["status"]["conditions"])
        post = run.extra["jobs"][f"{PLAN}-node-upgrade-post-drain-{node}"]
        penv = {e["name"] for e in post["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert penv == {"HARVESTER_UPGRADEPLAN_NAME", "HARVESTER_UPGRADE_NODE_NAME",
                        "HARVESTER_UPGRADE_POD_NAME"}
        files = run.extra["host_files"][node]
        assert not [f for f in files if "rancher-system-agent.service.d" in f], files
        assert "/etc/rancher/rke2/config.yaml.d/40-disable-charts.yaml" in files
    assert not run.events("rke2_restart_skipped")


@pytest.mark.node_run("three-node")
def test_check_mode_prints_node_plan_and_changes_nothing(runs: Runs) -> None:
    run = runs["three-node"]
    check: Any = run.extra["check"]
    assert check.rc == 0, check
    assert "Node plan (3 nodes" in check.output, check
    # v1.6.0 runs KubeVirt 1.5.2: no addedNodeSelector, Harvester's action sends the VMs
    assert "Migrations to a chosen node: harvester-migrate-action (KubeVirt 1.5.2" in \
        check.output, check
    assert "NodeSelectorPinned" in check.output and "HostDeviceNotLiveMigratable" in check.output
    assert "default/pinned" in check.output and "default/gpu" in check.output
    assert not run.extra["check_changed_plan"]
    assert run.extra["check_migrations"] == 0


# ---------------------------------------------------------------------------------------------
# five-node-mixed: order, pause, degraded volume, and the naive baseline
# ---------------------------------------------------------------------------------------------

@pytest.mark.node_run("five-node-mixed")
def test_five_node_order_pause_and_degraded_volume(runs: Runs) -> None:
    run = runs["five-node-mixed"]
    assert run.rc == 0, run
    assert run.status["currentPhase"] == "NodeUpgraded", run
    assert_all_upgraded(run)
    assert run.report["invariant_violations"] == [], run.report["invariant_violations"]
    assert run.running_before <= run.running_after
    # the fewest migrations the zones allow (node-1's VMs and worker-4's zone-b VMs twice)
    assert run.migrations == run.bound, (run.report["vm_migrations"], run.bound)
    # Rancher's order (etcd init node, etcd, witness, then workers) = the play's order
    assert [e["node"] for e in run.events("pre_drain_set")] == run.order
    assert nodes_in_play_order(run.output) == run.order
    assert run.order.index("node-3") < run.order.index("worker-4"), run.order
    # the paused node paused (the play said how to resume) and resumed
    paused = run.extra["paused"]
    assert f"Node {paused} is paused" in run.output, run
    assert "spec.nodeUpgradeOption.pauseNodes" in run.output
    assert run.states[paused] == "PostDrained"
    # the degraded volume held the paused node's drain until a replica was rebuilt:
    # Rancher asked for the node before the rebuild, we answered only after it
    vol = run.extra["volume"]
    assert len(run.extra.get("victims") or []) == 2, run.extra
    asked = run.events("pre_drain_set", node=paused)[0]["t"]
    rebuilt = [e["t"] for e in run.events("replica_rebuilt", volume=vol)
               if e["t"] > run.extra["degraded_at"] and e["node"] in run.extra["others"]]
    answered = run.events("hook_acked", node=paused, hook="pre-drain")[0]["t"]
    assert rebuilt, run.events("replica_rebuilt", volume=vol)
    assert asked < run.extra["degraded_at"] < rebuilt[0] < answered, (asked, rebuilt, answered)
    assert rebuilt[0] - run.extra["degraded_at"] >= HEAL_S
    # live migrations do not wait for Longhorn (node_evacuation._volumes_before): the
    # paused node's VMs moved while its volume's other replicas were being rebuilt
    moved = [e["t"] for e in run.events("vm_migration_started", source=paused)]
    assert moved and run.extra["degraded_at"] < min(moved) < rebuilt[0], (moved, rebuilt)


@pytest.mark.node_run("four-node-big-worker", "four-node-big-worker-naive")
def test_target_aware_reaches_the_bound_and_naive_moves_more(runs: Runs) -> None:
    """Target-aware placement moves each VM the fewest times the order allows; the naive
    baseline (KubeVirt's evacuation through the scheduler, least-allocated first) does not:
    the big worker, drained last, stays the least allocated node, so once the upgraded node
    has filled up to its level the scheduler sends evacuated VMs there, and they move again
    when the worker is drained. (On three-node the naive run happens to reach the bound: the
    freshly upgraded, empty node is always the least allocated there.)"""
    aware, naive = runs["four-node-big-worker"], runs["four-node-big-worker-naive"]
    for run in (aware, naive):
        assert run.rc == 0, run
        assert run.status["currentPhase"] == "NodeUpgraded", run
        assert run.report["invariant_violations"] == [], run.report["invariant_violations"]
        assert run.running_before <= run.running_after
        assert not run.recorded                # every VM here can live-migrate
    assert naive.bound == aware.bound == 16 + 4   # 16 VMs once, node-1's 4 once more
    assert aware.migrations == aware.bound, (aware.report["vm_migrations"], aware.bound)
    assert naive.migrations > naive.bound, (naive.report["vm_migrations"], naive.bound)


@pytest.mark.node_run("four-node-big-worker", "four-node-big-worker-v1.7.0")
def test_both_target_mechanisms_reach_the_bound(runs: Runs) -> None:
    """To v1.6.0 the cluster runs KubeVirt 1.5.2, which has no addedNodeSelector: the play
    sends each VM through Harvester's migrate action (Harvester pins the VM, KubeVirt builds the
    target pod from it). To v1.7.0 KubeVirt 1.6.3 takes addedNodeSelector. Same result."""
    action, selector = runs["four-node-big-worker"], runs["four-node-big-worker-v1.7.0"]
    for run in (action, selector):
        assert run.rc == 0, run
        assert run.report["invariant_violations"] == [], run.report["invariant_violations"]
        assert run.migrations == run.bound == 16 + 4, (run.report["vm_migrations"], run.bound)
    assert len(action.events("harvester_vm_migrate")) == action.bound
    assert not any((m.get("spec") or {}).get("addedNodeSelector")
                   for m in action.extra["migrations"])
    assert not selector.events("harvester_vm_migrate")
    assert all((m.get("spec") or {}).get("addedNodeSelector")
               for m in selector.extra["migrations"])


# ---------------------------------------------------------------------------------------------
# single node
# ---------------------------------------------------------------------------------------------

@pytest.mark.node_run("single-node")
def test_single_node_job_path_restores_vms(runs: Runs) -> None:
    run = runs["single-node"]
    assert run.rc == 0, run
    assert run.status["currentPhase"] == "NodeUpgraded", run
    assert set(run.states.values()) == {"SingleNodeUpgraded"}, run
    assert_all_upgraded(run)
    assert run.recorded == run.running_before    # every VM shut down and recorded ...
    assert run.running_before <= run.running_after   # ... and running again
    assert run.report["vm_migrations"]["total"] == 0
    assert run.report["invariant_violations"] == [], run.report["invariant_violations"]
    assert ("Run the single-node upgrade job" in run.output                    # steps mode
            or re.search(r"os upgrade +done .*job \S*single-node-upgrade", run.output)), run.output


# ---------------------------------------------------------------------------------------------
# failures
# ---------------------------------------------------------------------------------------------

@pytest.mark.node_run("migration-fault")
def test_migration_fault_fails_pre_drain_with_vm_named(runs: Runs) -> None:
    run = runs["migration-fault"]
    assert run.rc != 0
    first = run.order[0]
    assert run.states[first] == "PreDrainFailed", run
    msg = run.status["nodeUpgradeStatuses"][first]["message"]
    assert "default/" in msg and "failed" in msg, msg
    assert run.status["currentPhase"] == "Failed"
    assert run.report["invariant_violations"] == []
    # no VM lost: everything that ran still runs, except the recorded shutdowns
    assert run.running_before - run.recorded <= run.running_after
    # the node was not handed to Rancher
    assert not run.events("hook_acked", node=first, hook="pre-drain")


@pytest.mark.node_run("never-returns")
def test_node_never_returns_fails_post_drain(runs: Runs) -> None:
    run = runs["never-returns"]
    assert run.rc != 0
    assert run.states["node-1"] == "PostDrainFailed", run
    assert "node-1" in run.status["nodeUpgradeStatuses"]["node-1"]["message"]
    assert run.status["currentPhase"] == "Failed"
    assert run.report["invariant_violations"] == []
