"""The head start: once a node is done, start the evacuation of the node Rancher drains next
(and, time allowing, answer its pre-drain and start its OS upgrade) so that node's own cycle
finds the work begun. Nothing here fails the plan; whatever is not done, that node's cycle
does (it adopts what was started, as on a resume)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import evacuation as ev
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    migration_target as mt,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_order as no
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_pod_eviction as pe,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_evacuation import (
    evacuate,
    no_shutdown_event,
    taint_node,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_facts import (
    RUN_ANNOTATION,
    VMI_API,
    VMIM_KIND,
    active_vmi,
    cluster_facts,
    hook_names,
    on_node,
    others_left,
    run_id,
    secret_ann,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_gate import (
    gate,
    paused_nodes,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_hooks import (
    answer_hook,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_job import (
    run_pre_drain_job,
    start_post_drain_job,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_migrations import (
    count_ours,
    ours_selector,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_phase import (
    check_phase,
    enter_phase,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_safety import (
    wait_nodes_ready,
    wait_pdbs,
    wait_volumes_safe,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source,
    WaitTimeout,
)

# the first node's head start as node_gate step=enter takes it (its argument spec) and
# ClusterUpgrade's call entering NodeUpgrade (its then options, phase_table): one definition
HEAD_START_OPTIONS: dict[str, dict[str, Any]] = {
    "head_start": {"type": "bool", "default": False},
    "head_start_wait": {"type": "int", "default": 10},
    "head_start_finish": {"type": "int", "default": 0},
    "play": {"type": "list", "elements": "str", "default": []},
}

# a node in one of these states had its pre-drain answered and is not upgraded yet: Rancher
# (one node at a time) asks for no other node until it is done
ANSWERED_STATES = ("PreDrained", "PostDraining", "WaitingReboot")
# a migration KubeVirt took into one of its lanes and has not finished (kubevirt.io/v1
# VirtualMachineInstanceMigration phases after Pending)
ADMITTED_PHASES = ("Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running")
# how long the head start lets its Node view catch up with Rancher's order (await_back)
NODE_VIEW_CATCH_UP_S = 5.0
# the taints kube-controller-manager's node lifecycle controller keeps in step with a Node's
# spec.unschedulable and Ready condition (TaintNodesByCondition)
LIFECYCLE_TAINTS = ("node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready",
                    "node.kubernetes.io/unreachable")


def answered_already(plan: dict[str, Any], play: list[str], node: str = "") -> str:
    """The node of ``play`` (every node the plan records a state for, when ``play`` is
    empty) other than ``node`` whose pre-drain is answered and that is not upgraded yet, by
    the plan's node states; ``""`` when there is none. Such a node was head-started already
    (by ClusterUpgrade's call, the previous node's cycle or a run stopped since): a head start
    has nothing left to do until it is upgraded, and must not wait for a pre-drain Rancher
    will not ask for meanwhile."""
    states = (plan.get("status") or {}).get("nodeUpgradeStatuses") or {}
    for name in play or list(states):
        if name != node and ((states.get(name) or {}).get("state") or "") in ANSWERED_STATES:
            return str(name)
    return ""


def head_start(kube: Kube, writer: PlanWriter, node: str, play: list[str], *, wait: float,
               shutdown_timeout: float = 600, finish: float = 0,
               started: Callable[[], Any] | None = None) -> dict[str, Any]:
    """After ``node`` is done: when Rancher asks to drain another node of the play (``play``,
    the serial play's hosts) within ``wait`` seconds, start that node's evacuation — create
    its planned migrations, then mark it ``PreDraining`` and ask its non-migratable VMs to
    stop — and return without waiting. That node's own cycle then adopts what was started (its
    evacuation adopts running migrations, as on a resume), so Rancher's pre-drain is answered
    by an action within the watch latency instead of after the play's hand-over to the next
    host. Nothing is started for a paused node, a node the gate would refuse, a node a PDB
    makes wait (or Longhorn, when a VM has to stop: migrations alone start beside its
    rebuilds), or a node outside the play; nothing here fails the plan.

    ``finish`` > 0: then wait up to that many seconds for the node's VMs to be off it (every
    migration succeeded, every stop done) and answer its pre-drain as its own cycle would
    (:func:`finish_head_start`), then start its OS upgrade Job once Rancher drained it; the
    hand-over to the next host then overlaps the OS install and reboot instead of delaying the
    answer and the Job. Anything short of that is left to the node's own cycle.

    A node of the play whose pre-drain is answered already (:func:`answered_already`):
    returns at once, nothing started (its head start is done; the rest is its own cycle's).

    The node's first migrations are asked for before its ``PreDraining`` state is written
    (:func:`node_evacuation.evacuate` ``then``); ``started`` (the caller's writes that can
    wait, node_cycle) is called right after that write, or at the end when nothing was
    started.

    Returns ``{"changed", "next", "why", "started", "stopping", "answered", "migrated",
    "job"}``."""
    out: dict[str, Any] = {"changed": False, "next": None, "why": "", "started": [],
                           "stopping": [], "answered": False, "migrated": [], "job": "",
                           "pod_evictions": {}}
    # the plan as the caller holds it: a node's state only moves on, and a node found
    # answered that was upgraded since costs at most the head start, not its correctness
    done = answered_already(writer.plan, play, node)
    if done:
        return {**out, "next": done, "why": f"{done}'s pre-drain is answered already (head "
                                            "start done)"}
    plan = writer.refresh()
    check_phase(plan)
    facts = cluster_facts(kube, plan, light=True)
    pre_hook, _post_hook = hook_names(kube)
    if not others_left(facts, node, play):
        return {**out, "why": "no other node of the play is left to upgrade"}
    by_secret = {f["machine_plan_secret"]: f for f in facts if f["machine_plan_secret"]}

    def asked(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        for key, sec in view["Secret"].items():
            f = by_secret.get(key.split("/", 1)[1])
            ann = secret_ann(sec)
            if f and f["name"] != node and ann.get(no.PRE_DRAIN) and \
                    ann.get(pre_hook) != ann.get(no.PRE_DRAIN):
                return {"node": f["name"], "secret": f["machine_plan_secret"],
                        "drain": ann.get(no.PRE_DRAIN)}
        return None

    try:
        found = kube.wait([Source("v1", "Secret", c.FLEET_NS)], asked, timeout=wait,
                          what="Rancher's pre-drain on the next node")
    except WaitTimeout:
        return {**out, "why": f"Rancher asked to drain no other node within {wait:g}s"}
    nxt = found["node"]
    out["next"] = nxt
    if nxt not in play:
        return {**out, "why": f"Rancher drains {nxt}, which is not a host of this play"}
    if nxt in paused_nodes(writer.plan):
        return {**out, "why": f"{nxt} is paused (pauseNodes)"}
    if node:
        await_back(kube, node)
    try:
        g = gate(kube, writer, [nxt], nxt)
    except NodeLoopError as exc:
        return {**out, "why": str(exc)}
    if nxt not in g["todo"] or g.get("restore_only"):
        return {**out, "why": f"{nxt} has nothing to evacuate ({g['why']})"}
    began = time.monotonic()

    wrote: list[bool] = []

    def first() -> None:
        # after the first migrations: the state says the evacuation began (a run stopped
        # before this write finds the migrations and adopts them, as on any resume)
        if wrote:
            return
        wrote.append(True)
        out["changed"] |= writer.set_node_state(nxt, "PreDraining")
        if started is not None:
            started()
    try:
        res = evacuate(kube, writer, nxt, shutdown_timeout=shutdown_timeout, start_only=True,
                       feed=finish, then=first)
    finally:
        first()   # nothing was started (deferred, skipped, failed): written all the same
    out["changed"] |= bool(res.get("changed"))
    out["started"] = res.get("started") or []
    out["stopping"] = res.get("shutdown") or []
    out["pod_evictions"] = res.get("pod_evictions") or {}
    out["why"] = res.get("deferred") or res.get("skipped") or res.get("partial") or ""
    if finish > 0 and not out["why"]:
        fin = finish_head_start(kube, writer, nxt, found["secret"],
                                max(0.0, finish - (time.monotonic() - began)),
                                stopped=bool(out["stopping"]), drain=found["drain"])
        out["changed"] |= fin["changed"]
        out.update(answered=fin["answered"], migrated=fin["migrated"], why=fin["why"],
                   job=fin["job"])
        if fin["pod_evictions"]:
            out["pod_evictions"] = pe.merge(out["pod_evictions"], fin["pod_evictions"])
    return out


def all_under_way(left: list[dict[str, Any]], migrations: Iterable[dict[str, Any]],
                  run: str) -> bool:
    """Whether every VMI of ``left`` (the VMs still running on a node) is being moved by one
    of this run's migrations (``run``) that KubeVirt admitted (a phase past ``Pending`` and
    not final) and carries no ``spec.nodeSelector`` any more. Then the node's pre-drain Job
    may start beside those migrations: its VM detector (harvester
    ``GetAllNonLiveMigratableVMINames``) stops every VMI with a node selector, which the
    VMs moved by Harvester's v1.6 migrate action carry until Harvester's migration controller
    drops the pin from the VM and KubeVirt copies that to the VMI; its drain taint makes
    KubeVirt's evacuation start migrations only for VMIs with none under way; and its wait
    for the VMs to be off the node ends when these migrations do."""
    moving = set()
    for m in migrations:
        md = m.get("metadata") or {}
        if (md.get("annotations") or {}).get(RUN_ANNOTATION) == run and \
                (m.get("status") or {}).get("phase") in ADMITTED_PHASES:
            moving.add((md.get("namespace"), (m.get("spec") or {}).get("vmiName")))
    return all((v.get("spec") or {}).get("nodeSelector") is None and
               ((v.get("metadata") or {}).get("namespace"),
                (v.get("metadata") or {}).get("name")) in moving for v in left)


def await_back(kube: Kube, node: str, timeout: float = NODE_VIEW_CATCH_UP_S) -> bool:
    """Whether ``node`` shows Ready and schedulable in the Node view, waiting up to ``timeout``
    for the view to show it (no request when the view is an informer's).

    Rancher uncordons a node (machinedrain's undrain) before its planner asks to drain the
    next one, so once the next node's pre-drain is seen, the node just done is back at the
    server; but the Node view is a watch of its own beside the Secrets' and may show it a
    moment later. And the ``node.kubernetes.io/unschedulable`` taint that mirrors the cordon
    (and ``not-ready`` / ``unreachable``, which mirror the Ready condition) goes in a write of
    the node lifecycle controller of its own, after the uncordon: a view between the two still
    has the node untolerated by every VM (``evacuation.schedulable_for``). An evacuation
    planned on a view that still shows it cordoned or tainted leaves out the one upgraded
    target and sends the VMs to nodes upgraded after it, to move again. False past
    ``timeout`` (an operator's cordon, the node NotReady again): the evacuation is then
    planned on the view as it is, as before."""
    def back(view: dict[str, dict[str, dict[str, Any]]]) -> bool:
        for n in view["Node"].values():
            if (n.get("metadata") or {}).get("name") == node:
                return no.node_ready(n) and not (n.get("spec") or {}).get("unschedulable") \
                    and not any(t.get("key") in LIFECYCLE_TAINTS
                                for t in (n.get("spec") or {}).get("taints") or [])
        return False

    try:
        kube.wait([Source("v1", "Node")], back, timeout=timeout,
                  what=f"node {node} Ready and schedulable in the Node view")
    except WaitTimeout:
        return False
    return True


def next_node(facts: list[dict[str, Any]], node: str, play: list[str]) -> str:
    """The node Rancher drains after ``node`` by the facts now (Rancher's order, the first
    not upgraded), if it is a host of ``play`` (every node when empty); ``""`` if none."""
    for f in facts:
        if f["name"] != node and not f["upgraded"]:
            return str(f["name"]) if not play or f["name"] in play else ""
    return ""


def prepare(kube: Kube, writer: PlanWriter, node: str, play: list[str],
            restore: bool = False) -> str:
    """Before the event that lets the head start begin (``node``'s reboot, or the cluster
    upgrade's end for the first node, ``node`` ``""``): start, in a thread, the informer of
    the VMIs on the node expected next (:func:`next_node`) and read the KubeVirt CR (the
    migration mechanism, stable for the node loop), so that the head start's plan finds
    both in memory instead of listing when Rancher asks. Nothing is decided on them until
    then: the informer follows every change (the plan is made on the VMIs as they are when
    Rancher asks, as before), and these are the reads the head start makes anyway (a wrong
    guess costs one list and watch of that node's VMIs); and start the Pod informer, whose
    totals of what each node's pods request the capacity plan reads at the cordon
    (:func:`node_evacuation.evacuation_views`). Only for a client with informers
    (:class:`cycle_kube.CycleKube`), never in check mode. ``restore``: VMs stopped for
    ``node`` are restarted before the head start (node_cycle): the informer of every VMI,
    which that restore's wait for them to be scheduled reads, is started too. Returns the
    node expected."""
    if kube.check_mode or not hasattr(kube, "warm"):
        return ""
    try:
        nxt = next_node(cluster_facts(kube, writer.plan, light=True), node, play)
    except Exception:  # noqa: BLE001 - the head start reads them itself
        return ""
    cyc: Any = kube

    def run() -> None:
        try:
            cyc.warm(*c.KUBEVIRT, "kubevirt", mt.KUBEVIRT_NS)
            if nxt:
                cyc.prefetch(scoped=[(VMI_API, "VirtualMachineInstance", None, on_node(nxt))],
                             informed=False)
                # the Pod informer, whose totals the capacity plan reads at the cordon
                cyc.by_total(*c.POD, None, ev.POD_REQUESTS)
            if restore:   # a plain read starts the cluster-wide informer (cycle_kube.SCOPED)
                cyc.list(VMI_API, "VirtualMachineInstance")
        except Exception:  # noqa: BLE001 - the head start's own reads raise it
            pass
    threading.Thread(target=run, daemon=True, name="head-start-prepare").start()
    return nxt


def head_start_text(r: dict[str, Any]) -> str:
    """One line saying what :func:`head_start` (or :func:`first_head_start`) did."""
    done = ""
    pods = pe.short(r.get("pod_evictions"))
    if r.get("answered"):
        done = "its pre-drain answered" + (", its OS upgrade started" if r.get("job") else "")
    if r.get("started") or r.get("stopping"):
        return (f"{len(r['started'])} migration(s) started off {r['next']}, "
                f"{len(r['stopping'])} VM(s) asked to stop"
                + (f"; {pods}" if pods else "")
                + (f"; {len(r['migrated'])} migrated, {done}" if done else "")
                + (f" ({r['why']})" if r.get("why") else ""))
    if done:
        return f"nothing to move off {r['next']}; " + (f"{pods}; " if pods else "") + done
    return f"nothing started{' for ' + r['next'] if r.get('next') else ''}: {r['why']}"


def finish_head_start(kube: Kube, writer: PlanWriter, node: str, secret: str, timeout: float,
                      *, stopped: bool = False, drain: str | None = None) -> dict[str, Any]:
    """The end of ``node``'s evacuation after :func:`head_start` started it (``secret``: its
    machine-plan Secret): wait (watch) up to ``timeout`` seconds for no running VMI to be left
    on the node, or for every one left to be under way (:func:`all_under_way`: the last
    migrations in KubeVirt's lanes, none pinned by a node selector any more), then —
    Longhorn allowing it within ``timeout`` (a volume whose other replicas are still being
    rebuilt), the PDBs now, the plan still in NodeUpgrading — create its
    pre-drain Job, taint the node as soon as the Job exists, wait for the Job (whose script
    waits for the VMs to be off the node) and for the migrations to have ended, none failed,
    and answer Rancher's pre-drain (node ``PreDrained``), what the node's own :func:`evacuate`
    and :func:`answer_hook` do next (they taint first: two steps); then, time
    left, start its OS upgrade once Rancher drained it (:func:`_start_os_upgrade`). Gives up,
    changing nothing, when time runs out, when one of this run's migrations off the node
    failed (the node's own cycle retries it, counting the attempt) or when a check would make
    the evacuation wait; never fails the plan. Before the Job, the second round of
    :func:`node_pod_eviction.evict_early` under Rancher's drain options ``drain`` (the node's
    pre-drain value), as the node's own evacuation does after its migrations.

    Returns ``{"changed", "answered", "migrated", "why", "job", "pod_evictions"}``."""
    out: dict[str, Any] = {"changed": False, "answered": False, "migrated": [], "why": "",
                           "job": "", "pod_evictions": {}}
    deadline = time.monotonic() + timeout
    run = run_id()
    sel = ours_selector(writer, node)
    ours: list[dict[str, Any]] = []   # this plan's migrations off the node, as last seen

    def off(view: dict[str, dict[str, dict[str, Any]]], under_way: bool = True) -> Any:
        ours[:] = view[VMIM_KIND].values()
        for m in view[VMIM_KIND].values():
            md = m.get("metadata") or {}
            if (md.get("annotations") or {}).get(RUN_ANNOTATION) == run and \
                    (m.get("status") or {}).get("phase") == "Failed":
                return {"failed": md.get("name")}
        left = [v for v in view["VirtualMachineInstance"].values()
                if active_vmi(v) and (v.get("status") or {}).get("nodeName") == node]
        if not left:
            return {"failed": None, "under_way": False}
        if under_way and all_under_way(left, view[VMIM_KIND].values(), run):
            return {"failed": None, "under_way": True}
        return None

    sources = [Source(VMI_API, "VirtualMachineInstance", label_selector=on_node(node)),
               Source(VMI_API, VMIM_KIND, label_selector=sel)]
    try:
        res = kube.wait(sources, off, timeout=timeout,
                        what=f"the VMs off node {node} (head start)")
        if res["failed"]:
            return {**out, "why": f"migration {res['failed']} failed; {node}'s own cycle "
                                  "retries it"}
        # the migrations may have started beside Longhorn's rebuilds (node_evacuation
        # _volumes_before): the Job waits, within the time left, for no volume to be at risk
        wait_volumes_safe(kube, node, max(0.0, deadline - time.monotonic()))
        wait_pdbs(kube, node, 0)
        wait_nodes_ready(kube, node, 0)
    except WaitTimeout as exc:
        return {**out, "why": f"left to {node}'s own cycle: {exc}"[:300]}
    check_phase(writer.refresh())
    if node in paused_nodes(writer.plan):   # paused meanwhile: its own cycle holds it
        return {**out, "why": f"{node} was paused (pauseNodes) meanwhile"}
    # after the checks (the PDB check above must not count what this round evicts), sent
    # beside the taint and the pre-drain Job, answered before the hook answer
    n = kube.get("v1", "Node", node) or {}
    rnd = pe.start_round(kube, node, drain,
                         cordoned=bool((n.get("spec") or {}).get("unschedulable")))

    def ended(**why: Any) -> dict[str, Any]:
        res = rnd.result()
        return {**out, "pod_evictions": res, "changed": out["changed"] or bool(res["evicted"]),
                **why}

    def taint() -> None:
        # right after the Job's creation (its pod starts for seconds and taints the node
        # itself too), so that neither write holds up the other: every VM is off the node and
        # Rancher cordoned it, nothing lands on it meanwhile
        out["changed"] |= taint_node(kube, node)
        if not stopped:   # as evacuate() says when nothing had to stop
            no_shutdown_event(writer, node)

    job = run_pre_drain_job(kube, writer, node, timeout=max(0.0, deadline - time.monotonic()),
                            fail=False, on_created=taint)
    out["changed"] |= bool(job["changed"])
    if not job["complete"]:
        return ended(why=f"pre-drain Job of {node} not done in time; its own cycle waits for "
                         f"it ({job.get('why') or 'running'})"[:300])
    if res["under_way"]:
        # the Job began beside the last migrations: its script waited for the VMs to be off
        # the node; the migrations as they ended (counted below), and none of ours failed
        try:
            last = kube.wait(sources, lambda v: off(v, under_way=False),
                             timeout=max(0.0, deadline - time.monotonic()),
                             what=f"the VMs off node {node} (head start)")
        except WaitTimeout as exc:
            return ended(why=f"left to {node}'s own cycle: {exc}"[:300])
        if last["failed"]:
            return ended(why=f"migration {last['failed']} failed; {node}'s own cycle "
                             "counts it")
    try:    # what may have changed while the Job ran (a node NotReady, a replica lost)
        wait_nodes_ready(kube, node, 0)
        wait_volumes_safe(kube, node, 0)
    except WaitTimeout as exc:
        return ended(why=f"left to {node}'s own cycle: {exc}"[:300])
    out = ended()
    ans = answer_hook(kube, writer, node, "pre-drain", pre_drain_job={**job, "changed": False})
    out["changed"] |= bool(ans.get("changed"))
    out["answered"] = not ans.get("passed")
    counted: dict[str, Any] = {"migrated": []}
    count_ours(kube, writer, node, counted, migs=ours)
    out["migrated"] = counted["migrated"]
    if out["answered"]:
        out["job"] = _start_os_upgrade(kube, writer, node, secret, deadline - time.monotonic())
    return out


def _start_os_upgrade(kube: Kube, writer: PlanWriter, node: str, secret: str,
                      timeout: float) -> str:
    """After :func:`finish_head_start` answered ``node``'s pre-drain: wait (up to
    ``timeout``) for Rancher to drain it and ask for the post-drain, then create its OS
    upgrade Job and mark it ``PostDraining``, as its own cycle's next step would;
    the node's cycle then awaits that Job and the reboot. Returns the Job's name, or ``""``
    when Rancher did not get there in time (nothing changed)."""
    def asked(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        ann = secret_ann(view["Secret"].get(f"{c.FLEET_NS}/{secret}"))
        return {"value": ann[no.POST_DRAIN]} if ann.get(no.POST_DRAIN) else None

    try:
        kube.wait([Source("v1", "Secret", c.FLEET_NS)], asked, timeout=max(0.0, timeout),
                  what=f"Rancher's post-drain on node {node} (head start)")
    except WaitTimeout:
        return ""
    check_phase(writer.refresh())
    if node in paused_nodes(writer.plan):
        return ""
    with writer.events_held():   # the Job is what the node waits for; the Events can wait
        res = start_post_drain_job(kube, writer, node)
    return str(res["job"]) if res.get("started") else ""


def first_head_start(kube: Kube, writer: PlanWriter, play: list[str], wait: float,
                     finish: float = 0, started: Callable[[], Any] | None = None
                     ) -> dict[str, Any]:
    """:func:`head_start` for the first node of the loop, right after the phase is entered
    (no node is done yet). Never raises: whatever is not done here, the node's own cycle
    does."""
    try:
        return head_start(kube, writer, "", play, wait=wait, finish=finish, started=started)
    except Exception as exc:  # noqa: BLE001 - the node's cycle evacuates it anyway
        return {"changed": False, "next": None, "started": [], "stopping": [],
                "answered": False, "migrated": [], "job": "",
                "why": f"nothing more done ({exc})"[:300]}


def enter_with_head_start(kube: Kube, writer: PlanWriter, play: list[str], wait: float,
                          finish: float = 0, *, entered: Callable[[], Any] | None = None,
                          **enter: Any) -> dict[str, Any]:
    """NodeUpgrade entered (:func:`node_phase.enter_phase` with ``enter``), then, the plan in
    NodeUpgrading on a cluster of more than one node, :func:`first_head_start` for the node
    play's hosts ``play`` (empty: every managed node, in Rancher's order) as ``head_start``:
    for node_gate ``step=enter`` and for ClusterUpgrade's call entering NodeUpgrade
    (``then``, phase_table), whichever of the two the playbook lets do it first.
    ``entered``: called between the two (ClusterUpgrade's call starts the informers of the
    head start's reads there: listed beside the entry's writes they delay Rancher's upgrade
    as much as they gain after it, while after the entry they overlap Rancher's own start).
    The entry's Events wait for the first node's first migrations
    (``PlanWriter.hold_events``), and so does a record it held (``hold_record``), which is
    written at the latest when this returns."""
    writer.hold_events()
    try:
        res = enter_phase(kube, writer, **enter)
        if res.get("phase") == "NodeUpgrading" and not res.get("single_node"):
            if entered is not None:
                entered()
            res["head_start"] = first_head_start(
                kube, writer, list(play or res.get("order") or []), wait, finish,
                started=writer.send_events)
            res["changed"] = bool(res.get("changed")) | bool(
                res["head_start"].pop("changed", False))
    except Exception:
        try:   # what was held still goes out; the entry's own error is the one raised
            writer.flush()
        except Exception:  # noqa: BLE001 - see above (a resumed entry records it again)
            pass
        writer.send_events()
        raise
    writer.flush()   # a record the entry held for the head start's first write (hold_record)
    writer.send_events()
    return res
