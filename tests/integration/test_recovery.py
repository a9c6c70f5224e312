"""A failure mid-roll is recoverable and never reported as success (docs/recovery.md).

Each case on three-node: a fault stops NodeUpgrade on node-2 (node-1 already upgraded) and the
run fails naming the cause; the same command run again without the fix fails again with the
same cause (never "up to date", never exit 0: ``server-version`` already names the new
release); ``upgrade_resume_failed=false`` stops at once naming the failed plan, and so does
the node loop alone (``--tags node_upgrade``, whose entry finds no active plan); then the fault
is cleared (the operator's fix) and the same command continues the plan to ``Succeeded``:
every node rebooted exactly once (timeline ``node_reboot``), every VM that ran before runs,
zero invariant violations.

The three causes: Rancher never asks for the drain (``planner_stuck``: the pre-drain hook
times out), the node's OS-upgrade Job fails (``node_job_fail``), the node never comes back
from its reboot (``node_never_returns``; the fix is ``Kubelet.repair``, the operator bringing
the node back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from testkit import only_plan

pytest.importorskip("harvester_sim")

from harvester_sim.testing import wait_for  # noqa: E402

SPEED = 250
NODE = "node-2"

pytestmark = [pytest.mark.timeout(1500)]


@dataclass
class Case:
    fault: dict[str, Any]
    needles: tuple[str, ...]
    state: str                                   # the failed node's state
    fix: Callable[[Any], None]
    extra_vars: dict[str, Any] = field(default_factory=dict)
    cordoned: bool = True                        # Rancher holds the node cordoned meanwhile


def _clear(kind: str) -> Callable[[Any], None]:
    def fix(world: Any) -> None:
        assert world.faults.clear(kind) == 1
    return fix


def _repair(world: Any) -> None:
    assert world.faults.clear("node_never_returns") == 1
    world.controllers["kubelet"].repair(NODE)


CASES = {
    "hook-timeout": Case(
        {"kind": "planner_stuck", "target": {"node": NODE}},
        ("timed out after 6s waiting for", "rke.cattle.io/pre-drain", NODE), "PreDrainFailed",
        _clear("planner_stuck"), {"node_upgrade_hook_timeout": 6}, cordoned=False),
    "node-job-fail": Case(
        {"kind": "node_job_fail", "target": {"node": NODE, "program": "post-drain"}},
        (f"node-upgrade-post-drain-{NODE}", "failed"), "PostDrainFailed",
        _clear("node_job_fail")),
    "node-never-returns": Case(
        {"kind": "node_never_returns", "target": {"node": NODE}},
        (f"node {NODE} to come back Ready", "timed out"), "PostDrainFailed", _repair,
        {"node_upgrade_node_timeout": 8}),
}


def _messages(plan: dict[str, Any]) -> str:
    st = plan.get("status") or {}
    msgs = [c.get("message") or "" for c in st.get("conditions") or []
            if c.get("type") == "Progressing"]
    msgs += [v.get("message") or "" for v in (st.get("nodeUpgradeStatuses") or {}).values()]
    return "\n".join(msgs)


def _states(plan: dict[str, Any]) -> dict[str, str]:
    st = plan.get("status") or {}
    return {n: v.get("state", "") for n, v in (st.get("nodeUpgradeStatuses") or {}).items()}


def _running_vms(sim: Any) -> set[str]:
    return {f"{v['metadata']['namespace']}/{v['metadata']['name']}"
            for v in sim.world.client.list("kubevirt.io/v1", "VirtualMachine")
            if ((v.get("status") or {}).get("printableStatus")) == "Running"}


def _reboots(sim: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for ev in sim.world.timeline.snapshot():
        if ev.get("event") in ("node_reboot", "node_rebooted"):
            out[ev["node"]] = out.get(ev["node"], 0) + 1
    return out


def _failed_again(res: Any, sim: Any, case: Case, run: str) -> dict[str, Any]:
    plan = only_plan(sim)
    ctx = f"{run}: rc={res.rc} states={_states(plan)}\n{_messages(plan)}\n{res.output[-4000:]}"
    assert res.rc != 0, ctx
    assert "is up to date" not in res.output, ctx
    assert (plan.get("status") or {}).get("currentPhase") == "Failed", ctx
    for needle in case.needles:
        assert needle in _messages(plan), f"{needle!r} missing; {ctx}"
    assert _states(plan).get(NODE) == case.state, ctx
    assert _states(plan).get("node-1") == "PostDrained", ctx
    # the plan says why the node stays cordoned (Rancher waits for its hook) and how to go on
    node = sim.world.client.get("v1", "Node", NODE)
    assert bool((node.get("spec") or {}).get("unschedulable")) == case.cordoned, ctx
    assert (f"node {NODE} stays cordoned" in _messages(plan)) == case.cordoned, ctx
    return plan


@pytest.mark.parametrize("name", list(CASES))
def test_failure_mid_roll_is_resumed_after_the_fix(
        name: str, playbook_runner: Callable[..., Any]) -> None:
    from harvester_sim import report as rep
    from harvester_sim import testing
    from harvester_sim.scenarios import loader

    case = CASES[name]
    scenario = loader.load("three-node")
    scenario.update(name=f"three-node-recover-{name}", faults=[dict(case.fault)])
    with testing.running(scenario, speed=SPEED) as sim:
        def run(tags: str | None = None, fixed: bool = False, **more: Any) -> Any:
            # the short deadlines only while the cause is there (they make it fail quickly);
            # after the fix the defaults, so no wait of the successful run is cut short
            base = {} if fixed else case.extra_vars
            return playbook_runner(sim, "upgrade.yml", tags=tags,
                                   extra_vars={**base, **more} or None, timeout=600)

        before = wait_for(lambda: _running_vms(sim), what="the scenario's VMs to run", poll=0.2)

        first = run()
        plan = _failed_again(first, sim, case, "first run")
        assert any(f["kind"] == case.fault["kind"] for f in sim.world.faults.fired)
        assert _reboots(sim).get("node-1") == 1, _reboots(sim)

        # the same command, cause not fixed: the plan is continued and fails the same way
        again = run()
        assert f"resumed UpgradePlan {plan['metadata']['name']}" in again.output, \
            again.output[-4000:]
        _failed_again(again, sim, case, "re-run without the fix")

        # the operator declines to continue: stops at once, naming the plan, changing nothing
        held = only_plan(sim)
        # the node loop alone is not "nothing to do" either: it names the plan and the way on
        nodes_only = run(tags="node_upgrade")
        assert nodes_only.rc != 0, nodes_only.output[-3000:]
        assert "failed in NodeUpgrading and the nodes are part-way upgraded" in \
            nodes_only.output, nodes_only.output[-3000:]
        declined = run(upgrade_resume_failed=False)
        assert declined.rc != 0, declined.output[-3000:]
        assert "failed in NodeUpgrading" in declined.output, declined.output[-3000:]
        assert only_plan(sim)["metadata"]["resourceVersion"] == \
            held["metadata"]["resourceVersion"]   # neither run wrote to the plan

        case.fix(sim.world)
        last = run(fixed=True)
        plan = only_plan(sim)
        report = rep.build(sim.world)
        ctx = (f"rc={last.rc} phase={(plan.get('status') or {}).get('currentPhase')} "
               f"states={_states(plan)}\n{_messages(plan)}\n{last.output[-5000:]}")
        assert last.rc == 0, ctx
        assert (plan.get("status") or {}).get("currentPhase") == "Succeeded", ctx
        assert set(_states(plan).values()) <= {"PostDrained", "ImageCleaned"}, ctx
        assert _reboots(sim) == {"node-1": 1, "node-2": 1, "node-3": 1}, _reboots(sim)
        assert report.get("invariant_violations") == [], report.get("invariant_violations")
        # the last node's VMs boot while Finalize awaits them
        wait_for(lambda: before <= _running_vms(sim),
                 what=f"the VMs that ran before to run again: {sorted(before)}", poll=0.2)

        # and a run after that is up to date: the cluster is at the release
        done = run(fixed=True)
        assert done.rc == 0 and "is up to date" in done.output, done.output[-3000:]
