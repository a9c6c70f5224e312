"""One node's whole upgrade in one process (module ``node_cycle``, ``node_upgrade_mode: node``).

The step-by-step role (``roles/node_upgrade/tasks/multi_node.yml``) runs each step in its own
module process; every task boundary costs a fork, an AnsiballZ start, the ``kubernetes``
import, API discovery, a lock renewal and a re-read of the plan and of the cluster's
nodes/machines/secrets/VMIs (docs/performance.md). :func:`run_cycle` runs the same steps
(:mod:`node_step_order`: one table for both paths), calling the same step functions with the
same conditions, in one process:

* one :class:`cycle_kube.CycleKube` (discovery once), the upgrade lock taken once (its
  renewal thread renews it when a third of the lease is gone, not per step);
* reads that the previous step's view still answers are served from memory, and the busy
  sets from informers (:mod:`cycle_kube`);
* the reaction between two steps (a hook set → the first migration, the node back → the hook
  answer) is in-process: a few API calls instead of a task boundary.

Each step is idempotent and resumes from the cluster's state exactly as in the step-by-step
mode; errors are the steps' own (:class:`waiting.WaitTimeout` carries what was awaited and
the last state seen). The result lists one entry per step (what happened, seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_evacuation,
    node_facts,
    node_gate,
    node_head_start,
    node_hooks,
    node_job,
    node_pod_eviction,
    node_restore,
    phase_table,
    phases,
    pipeline,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_step_order as order,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.cycle_kube import (
    CycleKube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)


@dataclass
class Params:
    node: str
    batch: list[str] = field(default_factory=list)
    single_node: bool = False
    pause_timeout: int = 0
    hook_timeout: int = 7200
    target_aware: bool = True
    concurrency: int = 2
    retries: int = 2
    migration_timeout: int = 900
    evacuation_timeout: int = 3600
    volume_timeout: int = 1800
    pdb_timeout: int = 1800
    shutdown_timeout: int = 600
    job_timeout: int = 3600
    node_timeout: int = 1800
    release_timeout: int = 1800
    restore_timeout: int = 900
    restore: bool | None = None
    restore_fail_on_error: bool = False
    play: list[str] = field(default_factory=list)   # the serial play's hosts (head start)
    head_start: bool = True
    head_start_wait: int = 10
    head_start_finish: int = 30
    # what the play's last node starts after NodeUpgrade's completion (the then option:
    # pipeline.chain_items of NodeUpgrade, checked by the module before anything runs)
    then: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Cycle:
    """The per-step record the module returns (also on failure)."""

    node: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    changed: bool = False
    t0: float = field(default_factory=time.monotonic)
    # writes put off from the node's return to the next node's first migrations
    # (:func:`_os_upgrade`): run by :meth:`settle`
    later: list[Callable[[], Any]] = field(default_factory=list)
    holding: bool = False   # the writer holds its Events (:meth:`hold`)

    def hold(self, writer: PlanWriter) -> None:
        """From now on the writer's Events wait for :meth:`settle`."""
        self.holding = True
        writer.hold_events()

    def settle(self, writer: PlanWriter) -> None:
        """The writes put off since the node came back, then the Events held since."""
        later, self.later = self.later, []
        for fn in later:
            fn()
        if self.holding:
            self.holding = False
            writer.send_events()

    def run(self, name: str, kube: CycleKube, fn: Callable[[], dict[str, Any]],
            describe: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
        kube.begin_step(name)
        t = time.monotonic()
        entry: dict[str, Any] = {"step": name, "status": "running", "changed": False}
        self.steps.append(entry)
        try:
            res = fn()
        except Exception as exc:
            entry.update(status="failed", seconds=round(time.monotonic() - t, 3),
                         detail=str(exc)[:300])
            raise
        entry.update(status="passed" if res.get("passed") else "done",
                     changed=bool(res.get("changed")),
                     seconds=round(time.monotonic() - t, 3), detail=describe(res))
        self.changed |= bool(res.get("changed"))
        return res

    def skip(self, name: str, why: str) -> None:
        self.steps.append({"step": name, "status": "skipped", "changed": False, "seconds": 0.0,
                           "detail": why})

    def summary(self) -> list[str]:
        out = []
        for s in self.steps:
            out.append(f"{s['step']:<16} {s['status']:<8} {s['seconds']:8.2f}s"
                       + ("  changed" if s.get("changed") else "         ")
                       + (f"  {s['detail']}" if s.get("detail") else ""))
        out.append(f"{'total':<16} {'':<8} {time.monotonic() - self.t0:8.2f}s")
        return out


def _evac_text(res: dict[str, Any]) -> str:
    if res.get("skipped"):
        done = (f": {len(res.get('migrated') or [])} migrated, "
                f"{len(res.get('shutdown') or [])} shut down earlier in the upgrade"
                if res.get("migrated") or res.get("shutdown") else "")
        return f"already past evacuation ({res['skipped']}){done}"
    plan = res.get("plan") or {}
    migrated = res.get("migrated") or []
    text = f"{len(migrated)} migrated, {len(res.get('shutdown') or [])} shut down"
    if not migrated and plan.get("migrate"):
        text += f" ({len(plan['migrate'])} planned)"
    pods = node_pod_eviction.short(res.get("pod_evictions"))
    return text + (f", {pods}" if pods else "")


def _check_text(res: dict[str, Any]) -> str:
    pods = node_pod_eviction.short(res.get("pod_evictions"))
    return (f"would migrate {len((res.get('plan') or {}).get('migrate') or [])}, "
            f"shut down {len(res.get('shutdown') or [])}" + (f", {pods}" if pods else ""))


def run_cycle(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle) -> dict[str, Any]:
    """The steps of :mod:`node_step_order` in its order: the gate and pause check, then the
    node's path (multi-node or single-node); see the module doc.

    Returns the module result (without ``steps``/``summary``, which the caller adds from
    ``cycle`` also on failure)."""
    node = p.node
    result: dict[str, Any] = {"node": node, "done": False, "paused": False, "passed": False,
                              "migrated": [], "shutdown": [], "restored": [], "failed": []}
    if writer.node_state(node) != "PostDrained" and \
            node not in node_gate.paused_nodes(writer.plan):
        # most likely worked on: the gate's own reads (the nodes and their machine-plan
        # Secrets for the facts) and the other sets are listed side by side from now on (not
        # for a node the plan says is done)
        kube.prefetch(wait=False, scoped=_scoped(node))
    for step in order.GATE:
        if RUNNERS[step.name](kube, writer, p, cycle, result, step):
            return result
    kube.prefetch(scoped=_scoped(node))   # this node is worked on: every set its steps read
    if kube.check_mode:   # the steps in check mode only read; the node entry says the rest
        ev = cycle.run("evacuate", kube, lambda: node_evacuation.evacuate(
            kube, writer, node, target_aware=p.target_aware, shutdown_all=p.single_node),
            _check_text)
        result["evacuation"] = ev.get("plan")
        result["pod_evictions"] = ev.get("pod_evictions") or {}
        return result
    try:
        for step in order.path(p.single_node):
            if step.resume_skip and result["passed"]:
                cycle.skip(step.name, "node already past pre-drain")
                continue
            RUNNERS[step.name](kube, writer, p, cycle, result, step)
    except Exception:
        try:   # what was put off still goes out; the step's own error is the one raised
            cycle.settle(writer)
        except Exception:  # noqa: BLE001 - see above
            pass
        raise
    cycle.settle(writer)
    return result


def _scoped(node: str) -> list[tuple[str, str, str | None, str | None]]:
    """The node-scoped informers of ``node``'s cycle: the VMIs labelled as on it (its
    evacuation plans, migrates and checks those only; docs/performance.md "Node-scoped
    reads")."""
    return [(node_facts.VMI_API, "VirtualMachineInstance", None, node_facts.on_node(node))]


# One runner per step name of node_step_order: the step's call in this process, how the
# module result reports it, and whether the node's cycle ends there (True).
Runner = Callable[[CycleKube, PlanWriter, Params, Cycle, dict[str, Any], order.Step], bool]


def _gate(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
          result: dict[str, Any], step: order.Step) -> bool:
    node = p.node
    gate = cycle.run(step.name, kube, lambda: node_gate.gate(kube, writer, p.batch or [node],
                                                             node),
                     lambda r: f"todo {r['todo']}, done {r['done']}, Rancher expects "
                               f"{r['expected']} ({r['why']})")
    result.update(todo=gate["todo"], expected=gate["expected"], done=node in gate["done"])
    return bool(result["done"])


def _pause(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
           result: dict[str, Any], step: order.Step) -> bool:
    pause = cycle.run(step.name, kube, lambda: node_gate.wait_unpaused(
        kube, writer, p.node, p.pause_timeout),
        lambda r: "paused (pauseNodes)" if r["paused"] else "not paused")
    result["paused"] = bool(pause["paused"])
    return bool(result["paused"])


def _await_pre_drain(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                     result: dict[str, Any], step: order.Step) -> bool:
    pre = cycle.run(step.name, kube, lambda: node_hooks.await_hook(
        kube, writer, p.node, "pre-drain", p.hook_timeout, p.batch or [p.node]),
        lambda r: "already past it (resumed)" if r.get("passed") else "Rancher asks to drain")
    result["passed"] = bool(pre.get("passed"))
    return False


def _evacuate(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
              result: dict[str, Any], step: order.Step) -> bool:
    res = cycle.run(step.name, kube, lambda: node_evacuation.evacuate(
        kube, writer, p.node, target_aware=p.target_aware, concurrency=p.concurrency,
        retries=p.retries, migration_timeout=p.migration_timeout, timeout=p.evacuation_timeout,
        volume_timeout=p.volume_timeout, pdb_timeout=p.pdb_timeout,
        shutdown_all=bool(step.args.get("shutdown_all")),
        shutdown_timeout=p.shutdown_timeout), _evac_text)
    result["evacuation"] = res.get("plan")
    result["migrated"] = res.get("migrated") or []
    result["shutdown"] = res.get("shutdown") or []
    if res.get("pod_evictions"):
        result["pod_evictions"] = res["pod_evictions"]
    return False


def _answer_pre_drain(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                      result: dict[str, Any], step: order.Step) -> bool:
    cycle.run(step.name, kube, lambda: node_hooks.answer_hook(
        kube, writer, p.node, "pre-drain", job_timeout=p.job_timeout,
        safety_timeout=p.volume_timeout),
        lambda r: "already answered" if not r.get("changed") else "pre-drain Job done, answered")
    return False


def _await_post_drain(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                      result: dict[str, Any], step: order.Step) -> bool:
    cycle.run(step.name, kube, lambda: node_hooks.await_hook(
        kube, writer, p.node, "post-drain", p.hook_timeout),
        lambda r: "already past it (resumed)" if r.get("passed") else "drained, RKE2 applied")
    return False


def _os_upgrade(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                result: dict[str, Any], step: order.Step) -> bool:
    """The OS upgrade Job and the reboot. Head start ahead (:func:`_heads_start`): while the
    node reboots, the next node's reads are prepared (node_head_start.prepare); once it is
    back, its done state is written without an Event and the Events and the pending-OS
    annotation's removal wait (:attr:`Cycle.later`) until the next node's first migrations
    were asked for: between the node's return and them only the done state, the post-drain
    answer and the head start's reads (docs/node-upgrade.md "Head start")."""
    ahead = _heads_start(p) and not kube.check_mode
    if ahead:
        restore = node_restore.restore_enabled(writer.plan, p.restore)
        node_head_start.prepare(kube, writer, p.node, p.play,
                                restore=restore and bool(result.get("shutdown")))
    cycle.run(step.name, kube, lambda: node_job.run_node_job(
        kube, writer, p.node, str(step.args["type"]), job_timeout=p.job_timeout,
        node_timeout=p.node_timeout, on_back=(lambda: cycle.hold(writer)) if ahead else None,
        later=cycle.later if ahead else None),
        lambda r: f"job {r['job']}, node back on the new OS" if r.get("changed")
        else "already upgraded")
    return False


def _answer_post_drain(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                       result: dict[str, Any], step: order.Step) -> bool:
    cycle.run(step.name, kube, lambda: node_hooks.answer_hook(
        kube, writer, p.node, "post-drain"),
        lambda r: "already answered" if not r.get("changed") else "answered")
    return False


def _await_release(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                   result: dict[str, Any], step: order.Step) -> bool:
    cycle.run(step.name, kube, lambda: node_hooks.await_release(
        kube, writer, p.node, p.release_timeout),
        lambda r: "uncordoned, annotations cleared, kubelet current")
    return False


def _restore(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
             result: dict[str, Any], step: order.Step) -> bool:
    """Multi-node, head start on, one node per batch: the restore runs around the next
    node's head start (:func:`_restore_around_head_start`); otherwise on its own."""
    if _heads_start(p):
        _restore_around_head_start(kube, writer, p, cycle, result)
        return False
    cycle.settle(writer)
    res = cycle.run(step.name, kube, lambda: _restored(p, node_restore.restore_vms(
        kube, writer, p.node, timeout=p.restore_timeout, force=p.restore)), _restore_text)
    result["restored"], result["failed"] = res["restored"], res["failed"]
    return False


def _heads_start(p: Params) -> bool:
    """The node's restore runs around the next node's head start (:func:`_restore`)."""
    return bool(not p.single_node and p.head_start and p.play and p.target_aware
                and len(p.batch or [p.node]) <= 1)


RUNNERS: dict[str, Runner] = {
    "gate": _gate, "pause": _pause, "await pre-drain": _await_pre_drain,
    "evacuate": _evacuate, "answer pre-drain": _answer_pre_drain,
    "await post-drain": _await_post_drain, "os upgrade": _os_upgrade,
    "answer post-drain": _answer_post_drain, "await release": _await_release,
    "restore": _restore,
}


def _restore_text(r: dict[str, Any]) -> str:
    return ((f"{len(r['restored'])} restored, {len(r['failed'])} failed"
             if r["enabled"] else "restoreVM off")
            + (f" of {len(r['recorded'])} recorded" if r["recorded"] else ""))


def _restored(p: Params, res: dict[str, Any]) -> dict[str, Any]:
    if res["failed"] and p.restore_fail_on_error:
        raise NodeLoopError("could not restore: " + "; ".join(res["failed"]))
    return res


def _restore_around_head_start(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                               result: dict[str, Any]) -> None:
    """The restore and the head start side by side: the VMs stopped for this node are asked
    to start and, once scheduled (their launcher pods hold this node's capacity that the next
    node's evacuation plan sees), the next node's evacuation starts while they boot; then
    they are awaited. (As in the upgrade-toolkit, where the restore-vm Job runs beside
    Rancher's next drain.) Restored VMs not scheduled within ``head_start_wait``: no head
    start, the next node's own cycle evacuates it.

    The play's last node (no other node left, and ``restore_fail_on_error`` off): nobody
    waits for its VMs here; they are marked and boot while ImageCleanup runs, and Finalize
    awaits them (:func:`node_restore.await_marked_restores`) before it marks the plan
    Succeeded."""
    node = p.node
    last = not p.restore_fail_on_error and not node_facts.others_left(
        node_facts.cluster_facts(kube, writer.plan, light=True), node, p.play)
    started = cycle.run("restore start", kube, lambda: node_restore.start_restores(
        kube, writer, node, force=p.restore, scheduled_timeout=p.head_start_wait, mark=last),
        lambda r: (f"{len(r['starting'])} VM(s) asked to start"
                   + ("" if r["scheduled"] else ", not all scheduled yet")
                   + ("; they boot while ImageCleanup runs, Finalize awaits them"
                      if last else "")
                   if r["starting"] else _restore_text(r)))
    if last:
        cycle.settle(writer)
        cycle.skip("head start", "no other node of the play is left to upgrade")
        result["restoring"] = started["starting"]
        result["restored"], result["failed"] = started["restored"], started["failed"]
        if p.then:
            _finish_phase(kube, writer, p, cycle, result)
        return
    if started["scheduled"]:
        _head_start(kube, writer, p, cycle, result)
    else:
        cycle.skip("head start", "restored VMs not scheduled yet; the next node's own cycle "
                                 "evacuates it")
    cycle.settle(writer)   # (done already when the head start started migrations)
    res = cycle.run("restore", kube, lambda: _restored(p, node_restore.await_restores(
        kube, writer, node, started, timeout=p.restore_timeout)), _restore_text)
    result["restored"], result["failed"] = res["restored"], res["failed"]


def _finish_phase(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                  result: dict[str, Any]) -> None:
    """The play's last node is done: NodeUpgrade's completion, as the play after the node loop
    makes it (node_gate ``step=finish``, which then finds it done), and the phases the run
    starts after it (``then``: ImageCleanup's Plan), one module call earlier. Nodes outside
    the play still to do (``--limit``): nothing is completed or started."""
    chain = pipeline.chain_items({"then": p.then}, phases.get("NodeUpgrade"), phase_table.TABLE)

    def finish() -> dict[str, Any]:
        return phase_table.finish_node_upgrade(kube, writer, p.release_timeout, chain)

    def text(r: dict[str, Any]) -> str:
        if r["phase"] != "NodeUpgraded":
            return f"NodeUpgrade not complete: {', '.join(r.get('pending') or [])} still to do"
        started = ", ".join(f"{s['phase']} {s['status']}" for s in r.get("started") or [])
        return "NodeUpgraded" + (f"; {started}" if started else "")

    res = cycle.run("finish", kube, finish, text)
    result["finished"] = {"phase": res["phase"], "pending": res.get("pending") or [],
                          "started": res.get("started") or []}


def _head_start(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                result: dict[str, Any]) -> None:
    """Start the evacuation of the node Rancher drains next (node_head_start.head_start). A
    failure here fails nothing: that node's own cycle does the whole evacuation anyway."""
    try:
        res = cycle.run("head start", kube, lambda: node_head_start.head_start(
            kube, writer, p.node, p.play, wait=p.head_start_wait,
            shutdown_timeout=p.shutdown_timeout, finish=p.head_start_finish,
            started=lambda: cycle.settle(writer)),
            node_head_start.head_start_text)
    except Exception as exc:  # noqa: BLE001 - the next node's cycle does the work itself
        cycle.steps[-1]["status"] = "skipped"
        cycle.steps[-1]["detail"] = f"nothing more started ({exc}"[:280] + \
            "); the next node's own cycle evacuates it"
        return
    keys = ("next", "started", "stopping", "why", "answered", "migrated", "job",
            "pod_evictions")
    result["head_start"] = {k: res.get(k) for k in keys}
