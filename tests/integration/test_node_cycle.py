"""End-to-end: the two ``node_upgrade_mode``s (``node``, the default: module ``node_cycle``, one
module call per node; ``steps``: one task per step).

1. The whole ``upgrade.yml`` on ``three-node`` in each mode: Succeeded, every node upgraded
   (rebooted) once, migrations at the lower bound, the shut-down VMs restored, no invariant
   violation; node mode prints one summary line per step, steps mode runs one task per step.
2. Resume: the node loop alone (``playbooks/node_upgrade.yml`` from ``ClusterUpgraded``) is
   killed (SIGKILL, the whole process group) while the first node's OS upgrade runs, or just
   after the first node's cycle started the second node's migrations (head start), then
   re-run: no node is evacuated or rebooted twice, migrations stay at the lower bound, and the
   run completes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from typing import Any

import pytest

harvester_sim = pytest.importorskip("harvester_sim")

import node_setup as nu  # noqa: E402

from testkit import BIN, ROOT, ansible_env, only_plan, plans, run_playbook  # noqa: E402

SPEED = float(os.environ.get("NODE_CYCLE_TEST_SPEED", "200"))
MODE = {"node_upgrade_mode": "node"}
PLAN_API = "management.harvesterhci.io/v1beta1"

pytestmark = [pytest.mark.timeout(600)]


def _reboots(report: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in report.get("timeline") or []:
        if e.get("event") == "node_reboot":
            out[str(e.get("node"))] = out.get(str(e.get("node")), 0) + 1
    return out


def _snapshot(sim: Any) -> tuple[dict[str, dict[str, Any]], set[str], list[str]]:
    nu.wait_settled(sim)
    return nu.vmis(sim), nu.running_vms(sim), nu.order_of(sim)


def _bound(sim: Any, start: dict[str, Any], running: set[str], order: list[str],
           plan: str) -> int:
    c = sim.world.client
    cm = c.try_get("v1", "ConfigMap", f"{plan}-restore-vm", namespace="harvester-system")
    recorded = {k for v in ((cm or {}).get("data") or {}).values() for k in v.split(",") if k}
    nodes = {n["metadata"]["name"]: n for n in c.list("v1", "Node")}
    return int(nu.min_migrations(start, nodes, order, {k for k in running if k not in recorded}))


@pytest.mark.parametrize("mode", ["node", "steps"])
def test_whole_upgrade_in_each_mode(simulator: Any, mode: str) -> None:
    from harvester_sim import report as rep
    sim = simulator("three-node", speed=SPEED)
    start, running, order = _snapshot(sim)
    sim.server.audit = []   # which module made each request (its user agent)
    res = run_playbook(sim, "upgrade.yml", extra_vars={"node_upgrade_mode": mode},
                       timeout=500)
    assert res.rc == 0, res
    plan = only_plan(sim)
    assert plan["status"]["currentPhase"] == "Succeeded", res
    _no_reads_of_what_the_run_just_did(list(sim.server.audit), mode)
    report = rep.build(sim.world)
    assert report["invariant_violations"] == [], report["invariant_violations"]
    rel = plan["status"]["releaseMetadata"]
    nodes = sim.world.client.list("v1", "Node")
    for name, n in {n["metadata"]["name"]: n for n in nodes}.items():
        assert n["status"]["nodeInfo"]["osImage"] == rel["os"], name
        assert not n["spec"].get("unschedulable"), name
    assert _reboots(report) == {n: 1 for n in order}, _reboots(report)
    assert int(report["vm_migrations"]["total"]) == _bound(
        sim, start, running, order, plan["metadata"]["name"]), report["vm_migrations"]
    assert running <= nu.running_vms(sim)      # the shut-down VMs were restored
    # the PDB-protected web-frontend pods went through the eviction API while the VMs
    # migrated (node_pod_eviction), and no budget was violated (invariant_violations above)
    ours = report["api_requests"]["by_user_agent_request"]["harvester-upgrade"]
    assert ours.get("create /pods/eviction", 0) >= 1, ours
    _no_repeated_events_or_reads(sim, plan, order, mode)
    if mode == "steps":   # one task per step, no node_cycle call
        assert "Upgrade in one module call" not in res.output, res
        for task in ("Wait for Rancher to ask to drain", "Answer the pre-drain hook",
                     "Upgrade the OS and wait for the reboot"):
            assert res.output.count(task) >= len(order), task
        return
    # the fast path ran (one module call per node) and said what each step did
    assert res.output.count("TASK [harvester.upgrade.node_upgrade : Upgrade") >= len(order)
    assert "Wait for Rancher to ask to drain" not in res.output
    for step in ("await pre-drain", "evacuate", "answer pre-drain", "os upgrade",
                 "await release", "restore", "head start"):
        assert step in res.output, step
    # every node had its evacuation started early: the first one when the phase was entered
    # (node_gate step=enter), each other one by the previous node's cycle (head start)
    assert f"migration(s) started off {order[0]}" in res.output.split("PLAY [Upgrade the nodes")[0]
    assert res.output.count("migration(s) started") == len(order), res
    # ... and a head start that saw the VMs off its node answered that node's pre-drain (when
    # Longhorn allows it at that moment: at least once in a run; then, Rancher having drained
    # it, started its OS upgrade Job), that node's own cycle found it past evacuation and said
    # what had been moved off it
    flat = " ".join(res.output.split())   # the callback wraps long summary lines
    # to v1.6.0 KubeVirt runs 1.5.2: Harvester's migrate action, whose pins hold only for what
    # KubeVirt runs at once; the head start starts the rest as lanes free (docs/node-upgrade.md)
    assert "more left to" not in flat, res
    assert "its pre-drain answered" in flat, res
    assert re.search(r"already past evacuation \((PreDrained|PostDraining)\): \d+ migrated",
                     flat), res
    if mode == "node":   # the play's last node completed NodeUpgrade and started ImageCleanup
        assert "finish done" in flat and "NodeUpgraded; ImageCleanup started" in flat, res


def _no_repeated_events_or_reads(sim: Any, plan: dict[str, Any], order: list[str],
                                 mode: str) -> None:
    """The requests cut in docs/performance.md "API requests, round two" stay cut: one
    ``NodePreDrained`` Event per node saying the answer (no separate ``DrainHookAnswered``
    for pre-drain), no ``NodeJobCreated`` for a post-drain Job (``NodePostDraining`` says
    it), ``VMMigrationStarted`` only for a retry; the Versions listed once (the new plan's
    check and choice); in node mode the plan read by name only by pre-flight (NodeUpgrade's
    completion and Finalize decide on the plan they hold; the steps re-read it each)."""
    evs = [e for e in sim.world.client.list("v1", "Event")
           if (e.get("involvedObject") or {}).get("name") == plan["metadata"]["name"]]
    said = [(e.get("reason"), e.get("message") or "") for e in evs]
    for node in order:
        pre = [m for r, m in said if r == "NodePreDrained" and f"Node {node}:" in m]
        assert len(pre) == 1 and pre[0].startswith(
            f"Node {node}: PreDrained, answered rke.cattle.io/pre-drain with "), said
    assert not [m for r, m in said if r == "DrainHookAnswered" and "pre-drain" in m], said
    assert not [m for r, m in said if r == "NodeJobCreated" and "post-drain" in m], said
    assert all(re.search(r"attempt [2-9]", m) for r, m in said if r == "VMMigrationStarted")
    # ... and the evacuation's decisions, once per node: each VM's target and why
    for node in order:
        plans = [m for r, m in said if r == "VMEvacuationStarted"
                 and m.startswith(f"Evacuating node {node}: ")]
        assert len(plans) == 1 and re.search(r" to \S+ \(", plans[0]), said
    by = sim.stats()["by_verb_resource"]
    assert by.get("list versions", 0) == 1, by
    if mode == "node":
        assert by.get("get upgradeplans", 0) <= 1, by


def _no_reads_of_what_the_run_just_did(audit: list[dict[str, Any]], mode: str) -> None:
    """docs/performance.md "API requests, round three": the node play's entry does not hold
    (read) the settings ClusterUpgrade's call held moments ago (one read of the descheduler
    Addon in the run: its PreRun); in node mode the finish play does not call node_gate once
    the last node's cycle completed NodeUpgrade; an Eviction is sent only while the budget
    allows one; the repository's task reads neither the nodes (they only size a Deployment
    to create) nor lists the Deployment its wait starts from."""
    def calls(module: str, verb: str, resource: str) -> int:
        return sum(1 for e in audit if e.get("verb") == verb
                   and (e.get("objectRef") or {}).get("resource") == resource
                   and str(e.get("userAgent") or "").endswith(f"/{module}"))
    assert sum(calls(m, "get", "addons") for m in ("cluster_upgrade", "node_gate")) == 1
    assert calls("node_gate", "get", "addons") == 0
    assert calls("repo_create", "list", "deployments") == 0
    # (the ImagePreload it starts lists them: its own Plan's concurrency)
    assert calls("repo_create", "list", "nodes") == 1
    refused = [e for e in audit if (e.get("objectRef") or {}).get("resource") == "pods"
               and e.get("verb") == "create" and (e.get("responseStatus") or {}).get(
                   "code") == 429 and "harvester-upgrade/" in str(e.get("userAgent"))]
    # (one refusal may come of a budget status the cycle's informer had not seen change yet;
    # every round asking for every protected pod made six in this run)
    assert len(refused) <= 1, refused
    if mode == "node":
        finish = [e for e in audit if str(e.get("userAgent") or "").endswith("/node_gate")
                  and (e.get("objectRef") or {}).get("resource") == "leases"]
        # node_gate's calls: step=enter only (its Lease read and watch)
        assert len(finish) == 2, finish


def _state(sim: Any, node: str) -> str:
    plans = sim.world.client.list(PLAN_API, "UpgradePlan")
    st = ((plans[0].get("status") or {}).get("nodeUpgradeStatuses") or {}) if plans else {}
    return str((st.get(node) or {}).get("state") or "")


def _os_upgrading(sim: Any, node: str) -> str:
    """The node's OS upgrade runs: its post-drain Job exists (the previous step, or the head
    start at NodeUpgrade's entry, created it) or it waits for its reboot. Not
    ``WaitingReboot`` alone: a node whose Job and reboot ended before its own cycle reached
    them goes from PostDraining straight to PostDrained (on a loaded machine)."""
    state = _state(sim, node)
    if state == "WaitingReboot":
        return state
    if state == "PostDraining" and any(
            j["metadata"]["name"].endswith(f"-node-upgrade-post-drain-{node}")
            for j in sim.world.client.list("batch/v1", "Job")):
        return "PostDraining, its Job created"
    return ""


def _head_started(sim: Any, order: list[str]) -> str:
    """The second node's evacuation started (or finished) by the first node's cycle (head
    start)."""
    c = sim.world.client
    migs = c.list("kubevirt.io/v1", "VirtualMachineInstanceMigration")
    if _state(sim, order[1]) in ("PreDraining", "PreDrained", "PostDraining") and any(
            (m["metadata"].get("labels") or {}).get("management.harvesterhci.io/node")
            == order[1] for m in migs):
        return "head start"
    return ""


@pytest.mark.parametrize("kill_at", ["os upgrade", "head start"])
def test_killed_mid_node_resumes_without_redoing(simulator: Any, kill_at: str) -> None:
    """Killed while the first node's OS upgrade runs (Job or reboot), or right after its
    cycle started the second node's migrations (head start): the re-run redoes nothing and
    adopts what runs."""
    from harvester_sim import report as rep
    sim = simulator("three-node", speed=SPEED)
    start, running, order = _snapshot(sim)
    nu.at_cluster_upgraded(sim)
    first = order[0]
    env = ansible_env(sim)
    cmd = [str(BIN / "ansible-playbook"), "playbooks/node_upgrade.yml",
           "-e", json.dumps(MODE)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline, killed_at = time.monotonic() + 300, ""
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if kill_at == "os upgrade":
                killed_at = _os_upgrading(sim, first)
                if killed_at:
                    break
            if kill_at == "head start":
                killed_at = _head_started(sim, order)
                if killed_at:
                    break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out1 = proc.communicate(timeout=30)[0].decode(errors="replace")
    assert killed_at, out1[-4000:]
    res = run_playbook(sim, "playbooks/node_upgrade.yml", extra_vars=MODE,
                       timeout=400)
    assert res.rc == 0, res
    plan = plans(sim)[0]
    assert plan["status"]["currentPhase"] == "NodeUpgraded", res
    assert {n: s["state"] for n, s in plan["status"]["nodeUpgradeStatuses"].items()} == {
        n: "PostDrained" for n in order}
    report = rep.build(sim.world)
    assert report["invariant_violations"] == [], report["invariant_violations"]
    assert _reboots(report) == {n: 1 for n in order}, _reboots(report)
    assert int(report["vm_migrations"]["total"]) == _bound(
        sim, start, running, order, plan["metadata"]["name"]), report["vm_migrations"]
    assert running <= nu.running_vms(sim)
    if kill_at == "os upgrade":
        # the resumed first node: past pre-drain, so no evacuation; its job awaited, not redone
        flat = " ".join(res.output.split())   # the callback wraps long summary lines
        mine = flat.split(f"node cycle of {first}", 1)[-1].split("PLAY [", 1)[0]
        assert "node already past pre-drain" in mine or re.search(
            r"already past evacuation \((PostDraining|WaitingReboot)\)", mine), (killed_at, res)
    assert "nodes upgraded 3/3" in res.output, res      # the progress callback follows it


RESTORING = "harvester-upgrade.harvesterhci.io/restoring-for-node"


def test_last_nodes_vms_boot_during_image_cleanup_and_finalize_awaits_them(
        simulator: Any) -> None:
    """The node loop alone leaves the last node's shut-down VMs started but marked (nobody
    waited for them); the rest of the upgrade (ImageCleanup, Finalize) awaits them: the mark
    goes, RestoreVMCompleted names that node, and they run."""
    sim = simulator("three-node", speed=SPEED)
    _start, running, order = _snapshot(sim)
    res = run_playbook(sim, "upgrade.yml", extra_vars=MODE, timeout=400,
                       skip_tags="node_upgrade,image_cleanup,finalize")
    assert res.rc == 0, res
    res = run_playbook(sim, "playbooks/node_upgrade.yml", extra_vars=MODE,
                       timeout=400)
    assert res.rc == 0, res
    c = sim.world.client
    stopped = {str(e["vm"]) for e in sim.world.timeline.snapshot()   # "ns/name"
               if e.get("event") == "vm_stopped" and e.get("node") == order[-1]}
    assert stopped, "the scenario shuts down a VM on the last node"
    marked = {f"{v['metadata']['namespace']}/{v['metadata']['name']}": (
        v["metadata"].get("annotations") or {}).get(RESTORING)
        for v in c.list("kubevirt.io/v1", "VirtualMachine")}
    assert {k: n for k, n in marked.items() if n} == {k: order[-1] for k in stopped}, marked
    assert "they boot while ImageCleanup runs" in " ".join(res.output.split()), res
    res = run_playbook(sim, "upgrade.yml", extra_vars=MODE, timeout=400)
    assert res.rc == 0, res
    assert plans(sim)[0]["status"]["currentPhase"] == "Succeeded", res
    assert not any((v["metadata"].get("annotations") or {}).get(RESTORING)
                   for v in c.list("kubevirt.io/v1", "VirtualMachine"))
    evs = [e["message"] for e in c.list("v1", "Event") if e.get("reason") == "RestoreVMCompleted"]
    assert any(f"for node {order[-1]}" in m for m in evs), evs
    assert running <= nu.running_vms(sim)
