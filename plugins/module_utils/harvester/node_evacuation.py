"""Emptying a node of running VMs (:func:`evacuate`): stop and record the ones that cannot
move, taint the node, live-migrate the rest (:mod:`node_migrations`), after the safety waits
(:mod:`node_safety`). Also the cluster views the planner (:mod:`evacuation`, pure logic) works
on, and the whole roll's plan for ``--check`` (:func:`node_plan`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import evacuation as ev
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    migration_target as mt,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_pod_eviction as pe,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_states,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_facts import (
    RUN_STRATEGY_ANNOTATION,
    STOPPED_BY_ANNOTATION,
    VM_API,
    VMI_API,
    active_vmi,
    cluster_facts,
    fact_for,
    harvester_items,
    is_single_node,
    node_vmis,
    on_node,
    try_items,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_migrations import (
    count_ours,
    migrate_all,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_restore import (
    record_shutdowns,
    restore_entries,
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


def evacuate(kube: Kube, writer: PlanWriter, node: str, *, target_aware: bool = True,
             concurrency: int = 2, retries: int = 2, migration_timeout: float = 900,
             timeout: float = 3600, volume_timeout: float = 1800, pdb_timeout: float = 1800,
             shutdown_all: bool = False, shutdown_timeout: float = 600,
             start_only: bool = False, feed: float = 0,
             then: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Empty ``node`` of running VMs: shut down (and record) the non-migratable ones, taint the
    node, live-migrate the rest to upgraded nodes where possible. Idempotent.

    ``start_only`` (the previous node's head start, node_cycle): ask the non-migratable VMs
    to stop and create every planned migration (KubeVirt runs them as its per-node and
    per-cluster limits allow, the rest wait Pending), then return without waiting,
    tainting or failing anything; the node's own evacuation adopts what was started. When
    a PDB, or Longhorn with a VM to stop (:func:`_volumes_before`), would make the
    evacuation wait, nothing is started (``deferred``).
    With Harvester's migrate action only what KubeVirt runs at once may be started; ``feed``
    > 0 then keeps starting the rest as lanes free, for up to that many seconds
    (:func:`migrate_all` ``feed``). The first migrations are asked for before anything else
    is written (:func:`_start_evacuation`): ``then`` (the head start's state write), the pod
    evictions, the plan's Event and the stops follow them."""
    plan = writer.refresh()
    facts = cluster_facts(kube, plan, light=True)
    fact = fact_for(facts, node)
    state = writer.node_state(node)
    # resume: never evacuate again a node that is past this step (its VMs may be restored)
    past = "WaitingReboot" if shutdown_all else "PreDrained"
    if fact["upgraded"] or node_states.ordinal(state) >= node_states.ordinal(past):
        out: dict[str, Any] = {"changed": False, "plan": ev.EvacuationPlan(node=node).as_dict(),
                               "migrated": [], "shutdown": [], "attempts": {},
                               "skipped": state or "upgraded"}
        if not fact["upgraded"] and not shutdown_all:
            # evacuated already (the previous node's head start, a killed run): say by whom
            count_ours(kube, writer, node, out)
            out["shutdown"] = restore_entries(kube, writer, node)
        return out
    if shutdown_all:
        writer.set_node_state(node, "SingleNodeUpgrading")
    nodes, vms = evacuation_views(kube, plan, facts, only_node=node)
    p = _plan_for(node, vms, nodes, single=shutdown_all, target_aware=target_aware)
    result: dict[str, Any] = {"changed": False, "plan": p.as_dict(), "migrated": [],
                              "shutdown": [s.vm.key for s in p.shutdown], "attempts": {}}
    mechanism = None
    if target_aware and not shutdown_all and p.migrate:
        mechanism = mt.detect(kube)
        result["mechanism"] = mechanism["mechanism"]
        result["mechanism_why"] = mechanism["why"]
    if kube.check_mode:
        if not shutdown_all:
            result["pod_evictions"] = _evictions(kube, node, fact).result()
        return result
    if not shutdown_all:
        try:
            # the head start only starts migrations (no taint): no other node need be Ready
            ready = {"waited": False} if start_only else \
                wait_nodes_ready(kube, node, volume_timeout)
            vol = _volumes_before(kube, node, p, 0 if start_only else volume_timeout)
            pdb = wait_pdbs(kube, node, 0 if start_only else pdb_timeout)
        except WaitTimeout as exc:
            if start_only:
                return {**result, "deferred": str(exc)}
            writer.fail_node(node, "PreDrainFailed", "EvacuationBlocked", str(exc))
            raise
        result["waited_for_nodes"] = ready.get("waited", False)
        result["waited_for_volumes"] = vol.get("waited", False)
        result["waited_for_pdbs"] = pdb.get("waited", False)
    if start_only:
        return _start_evacuation(kube, writer, node, p, nodes, result,
                                 shutdown_timeout=shutdown_timeout, mechanism=mechanism,
                                 feed=feed, then=then,
                                 evictions=lambda: _evictions(kube, node, fact))
    # Rancher has cordoned the node (it sets the pre-drain after the cordon): the pods a
    # PodDisruptionBudget would make its drain wait for are evicted now, beside the
    # migrations (node_pod_eviction); the head start too (after its first migrations), the
    # node it starts being cordoned
    first = _evictions(kube, node, fact) if not shutdown_all else None
    early = first.line() if first else ""
    if p.migrate or p.shutdown or early:
        plan_event(writer, node, p, (mechanism or {}).get("mechanism", ""), early)
    # 1. shut down (recorded) what cannot move
    if p.shutdown:
        res = _shut_down(kube, writer, node, p.shutdown, shutdown_timeout, result)
        result["changed"] = True
        if res["failed"]:
            msg = f"could not shut down VMs on {node}: {'; '.join(res['failed'])}"
            writer.fail_node(node, "PreDrainFailed" if not shutdown_all
                             else "SingleNodeUpgradeFailed", "VMShutdownFailed", msg)
            raise NodeLoopError(msg)
    else:
        no_shutdown_event(writer, node)
    if shutdown_all or first is None:
        return result
    # 2./3. taint + migrations. Target-aware: our own targeted migrations first, then the
    # taint (Rancher cordoned the node already, so nothing lands back meanwhile; tainting
    # first would let KubeVirt's evacuation controller start untargeted migrations of its
    # own). Naive: taint first and let KubeVirt evacuate (upstream behaviour), starting
    # untargeted migrations only for VMIs KubeVirt will not evacuate.
    if not target_aware:
        result["changed"] |= taint_node(kube, node)
    if p.migrate:
        result["changed"] = True
        migrate_all(kube, writer, node, p, nodes, result, target_aware=target_aware,
                    concurrency=concurrency, retries=retries,
                    migration_timeout=migration_timeout, timeout=timeout,
                    mechanism=(mechanism or {}).get("mechanism", mt.ADDED_NODE_SELECTOR))
    result["changed"] |= taint_node(kube, node)
    if vol.get("after_migrations"):
        # the migrations ran beside Longhorn's rebuilds: the node goes down only once no
        # volume would lose its last healthy replica with it (the pre-drain Job next)
        try:
            wait_volumes_safe(kube, node, volume_timeout)
        except WaitTimeout as exc:
            writer.fail_node(node, "PreDrainFailed", "EvacuationBlocked", str(exc))
            raise
        result["waited_for_volumes"] = True
    done = first.result()
    # the rest, now that the first replacements had the migrations' time to be Ready
    again = _evictions(kube, node, fact)
    count_ours(kube, writer, node, result)
    # the VMs shut down for this node earlier (a head start asked them to stop) count too
    result["shutdown"] = sorted(set(result["shutdown"]) | set(restore_entries(kube, writer,
                                                                              node)))
    # 4. never hand the node over with a running VM
    left = [f"{v['metadata'].get('namespace')}/{v['metadata']['name']}"
            for v in node_vmis(kube, node)
            if active_vmi(v) and (v.get("status") or {}).get("nodeName") == node]
    if left:
        msg = f"VMs still running on {node} after evacuation: {', '.join(sorted(left))}"
        writer.fail_node(node, "PreDrainFailed", "EvacuationIncomplete", msg)
        raise NodeLoopError(msg)
    result["pod_evictions"] = pe.merge(done, again.result())
    result["changed"] |= bool(result["pod_evictions"]["evicted"])
    return result


def _volumes_before(kube: Kube, node: str, p: ev.EvacuationPlan, timeout: float
                    ) -> dict[str, Any]:
    """Longhorn's check before anything moves off ``node`` (:func:`wait_volumes_safe`, up
    to ``timeout``) — unless only migrations are planned: a live migration leaves every
    volume attached and every replica where it is, so with a volume at risk now (its other
    replicas still being rebuilt after the previous nodes' reboots) the migrations start at
    once and the wait comes after them, before the node's pre-drain Job
    (``after_migrations``). A VM to shut down, or a node with nothing to migrate, waits
    first as before: a stop detaches its volume, which ends a rebuild under way
    (longhorn-manager ``closeVolumeDependentResources``), and a run that stops there must
    not leave VMs stopped."""
    if p.shutdown or not p.migrate:
        return wait_volumes_safe(kube, node, timeout)
    try:
        return wait_volumes_safe(kube, node, 0)
    except WaitTimeout:
        return {"waited": False, "after_migrations": True}


def _evictions(kube: Kube, node: str, fact: dict[str, Any]) -> pe.Round:
    """:func:`node_pod_eviction.start_round` for ``node`` (``fact``: its
    :func:`cluster_facts` entry: Rancher's drain options, cordoned or not)."""
    return pe.start_round(kube, node, fact.get("pre_drain"),
                          cordoned=bool(fact.get("unschedulable")), roles=fact.get("roles"))


def plan_event(writer: PlanWriter, node: str, p: ev.EvacuationPlan, mechanism: str,
               pods: str = "") -> None:
    """One ``VMEvacuationStarted`` Event per evacuation: where each VM goes and why, which
    are shut down and why (the migrations themselves are the VMIM objects, labelled with the
    plan and the node; a retry gets its own ``VMMigrationStarted``), and ``pods``: the line
    saying which pods are evicted ahead of Rancher's drain
    (:meth:`node_pod_eviction.Round.line`)."""
    moves = [f"{m.vm.key} to {m.target or 'a node the scheduler chooses'} ({m.why})"
             for m in p.migrate]
    stops = [f"{s.vm.key} ({s.reason})" for s in p.shutdown]
    msg = (f"Evacuating node {node}: {len(moves)} VM(s) to migrate"
           + (f" through {mechanism}" if mechanism and moves else "")
           + (f": {'; '.join(moves)}" if moves else "")
           + (f"; {len(stops)} to shut down: {'; '.join(stops)}" if stops else ""))
    pods = pods[:300]
    room = 1000 - (len(pods) + 2 if pods else 0)   # client-go's recorder truncates at 1024
    if len(msg) > room:
        msg = msg[:room - 10].rsplit(";", 1)[0] + "; ..."
    writer.event("VMEvacuationStarted", msg + (f"; {pods}" if pods else ""))


def _plan_for(node: str, vms: list[ev.VmView], nodes: list[ev.NodeView], *, single: bool,
              target_aware: bool) -> ev.EvacuationPlan:
    """A single-node upgrade stops every VM on the node; otherwise the planner places them."""
    if single:
        return ev.EvacuationPlan(node=node, shutdown=[
            ev.Shutdown(v, "SingleNode: single-node upgrade stops every VM")
            for v in vms if v.node == node])
    return ev.plan_evacuation(node, vms, nodes, target_aware=target_aware)


def no_shutdown_event(writer: PlanWriter, node: str) -> None:
    writer.event("VMShutdownCompleted",
                 f"Shutdown completed for 0 VM(s) on node {node}, success: 0, failed: 0",
                 component="vm-live-migrate-detector", namespace=c.UPGRADE_NS)


def _shut_down(kube: Kube, writer: PlanWriter, node: str, shutdowns: list[ev.Shutdown],
               timeout: float, result: dict[str, Any], wait: bool = True) -> dict[str, Any]:
    """Record the VMs to restart (not the repo VM), then stop them (:func:`stop_vms`)."""
    keys = [s.vm.key for s in shutdowns if not s.vm.repo_vm]
    result["changed"] |= record_shutdowns(kube, writer, node, keys)
    return stop_vms(kube, writer, node, shutdowns, timeout, wait=wait)


def _start_evacuation(kube: Kube, writer: PlanWriter, node: str, p: ev.EvacuationPlan,
                      nodes: list[ev.NodeView], result: dict[str, Any], *,
                      shutdown_timeout: float,
                      mechanism: dict[str, Any] | None = None,
                      feed: float = 0, then: Callable[[], Any] | None = None,
                      evictions: Callable[[], pe.Round] | None = None) -> dict[str, Any]:
    """``evacuate(start_only=True)``: its planned migrations created and the stops asked.

    The first migrations go first; right after them (:func:`migrate_all` ``started``)
    ``then`` runs, the round of pod evictions ``evictions`` starts, the plan's Event is sent
    and the non-migratable VMs are asked to stop (each one's record written before its
    stop). None of these is needed before a migration starts: the eviction round and the
    PDB check before it leave the VMs' launcher pods alone, and a stop frees nothing the
    plan counts on; each would add a request the first migration waits for."""
    how = (mechanism or {}).get("mechanism", mt.ADDED_NODE_SELECTOR)
    after: dict[str, Any] = {}

    def rest() -> None:
        if after:
            return
        after["round"] = None
        if then is not None:
            then()
        rnd = after["round"] = evictions() if evictions is not None else None
        early = rnd.line() if rnd is not None else ""
        if p.migrate or p.shutdown or early:
            plan_event(writer, node, p, (mechanism or {}).get("mechanism", ""), early)
        if p.shutdown:
            res = _shut_down(kube, writer, node, p.shutdown, shutdown_timeout, result,
                             wait=False)
            result["changed"] |= bool(res["stopped"])
            if res["failed"]:
                after["deferred"] = "; ".join(res["failed"])

    out = _start_migrations(kube, writer, node, p, nodes, result, how, feed, rest)
    rest()   # nothing was migrated: the rest now
    if after["round"] is not None:
        out["pod_evictions"] = after["round"].result()
        out["changed"] |= bool(out["pod_evictions"]["evicted"])
    if after.get("deferred"):
        out["deferred"] = after["deferred"]
    return out


def _start_migrations(kube: Kube, writer: PlanWriter, node: str, p: ev.EvacuationPlan,
                      nodes: list[ev.NodeView], result: dict[str, Any], how: str,
                      feed: float, started: Callable[[], None]) -> dict[str, Any]:
    """The migrations of :func:`_start_evacuation`; ``started`` is called once the first
    ones were asked for."""
    if p.migrate:   # all of them: KubeVirt queues them by its own limits (per node, cluster)
        # Harvester's action pins a migration that waits in KubeVirt's queue only loosely
        # (v1.6.x drops the VM's pin as soon as the migration is seen): start only what
        # KubeVirt runs at once from one node (parallelOutboundMigrationsPerNode, 2)
        limit = len(p.migrate) if how == mt.ADDED_NODE_SELECTOR else 2
        if len(p.migrate) > limit and feed > 0:
            # the next one as a lane frees, until all are started (failures, and what time
            # leaves, are the node's own cycle's: no retry, no abort here)
            migrate_all(kube, writer, node, p, nodes, result, target_aware=True,
                        concurrency=limit, retries=0, migration_timeout=float("inf"),
                        timeout=feed, feed=True, mechanism=how, started=started)
            result["changed"] |= bool(result["started"])
            return result
        migrate_all(kube, writer, node, p, nodes, result, target_aware=True,
                    concurrency=limit, retries=0, migration_timeout=0, timeout=0,
                    start_only=True, mechanism=how, started=started)
        if len(p.migrate) > limit:   # the node's own cycle moves the rest: nothing to await
            result["partial"] = (f"{len(p.migrate) - limit} more left to {node}'s own cycle "
                                 "(Harvester's migrate action pins only what runs at once)")
        result["changed"] |= bool(result["started"])
    return result


def stop_vms(kube: Kube, writer: PlanWriter, node: str, shutdowns: list[ev.Shutdown],
             timeout: float, wait: bool = True) -> dict[str, Any]:
    """Stop each VM (runStrategy Halted, previous strategy kept in an annotation) and wait
    for its VMI to be gone (``wait=False``: only ask; the caller's next evacuation waits)."""
    ok, failed = [], []
    for s in shutdowns:
        vm = kube.get(VM_API, "VirtualMachine", s.vm.name, s.vm.namespace)
        if vm is None:
            # a VMI without a VirtualMachine cannot be restarted later: delete it, say so
            kube.delete(VMI_API, "VirtualMachineInstance", s.vm.name, s.vm.namespace)
            ok.append(s.vm.key)
            continue
        spec = vm.get("spec") or {}
        ann = (vm.get("metadata") or {}).get("annotations") or {}
        prev = ann.get(RUN_STRATEGY_ANNOTATION) or spec.get("runStrategy") or "Always"
        patch: dict[str, Any] = {"metadata": {"annotations": {
            RUN_STRATEGY_ANNOTATION: prev, STOPPED_BY_ANNOTATION: node}}}
        if "running" in spec and "runStrategy" not in spec:
            patch["spec"] = {"running": False}
        else:
            patch["spec"] = {"runStrategy": "Halted"}
        try:
            kube.patch(VM_API, "VirtualMachine", s.vm.name, patch, s.vm.namespace)
            ok.append(s.vm.key)
        except Exception as exc:  # noqa: BLE001 - reported below, fails the step
            failed.append(f"{s.vm.key}: {exc}")
    if not wait:
        return {"stopped": ok, "failed": failed}
    keys = {s.vm.key for s in shutdowns}
    if keys and not failed:
        try:
            kube.wait([Source(VMI_API, "VirtualMachineInstance",
                              label_selector=on_node(node))],
                      lambda v: not any(k in keys and active_vmi(o) and
                                        (o.get("status") or {}).get("nodeName") == node
                                        for k, o in v["VirtualMachineInstance"].items()),
                      timeout=timeout, what=f"VMs {', '.join(sorted(keys))} to shut down",
                      describe=lambda v: ", ".join(
                          f"{k}={(o.get('status') or {}).get('phase')}"
                          for k, o in v["VirtualMachineInstance"].items() if k in keys))
        except WaitTimeout as exc:
            failed.append(str(exc))
    writer.event("VMShutdownCompleted",
                 f"Shutdown completed for {len(shutdowns)} VM(s) on node {node}, "
                 f"success: {len(shutdowns) - len(failed)}, failed: {len(failed)}",
                 component="vm-live-migrate-detector", namespace=c.UPGRADE_NS)
    return {"stopped": ok, "failed": failed}


def taint_node(kube: Kube, node: str) -> bool:
    n = kube.get("v1", "Node", node) or {}
    taints = list((n.get("spec") or {}).get("taints") or [])
    if any(t.get("key") == ev.DRAIN_TAINT_KEY and t.get("effect") == "NoSchedule"
           for t in taints):
        return False
    if not kube.check_mode:
        taints = [t for t in taints if t.get("key") != ev.DRAIN_TAINT_KEY]
        taints.append({"key": ev.DRAIN_TAINT_KEY, "value": "draining", "effect": "NoSchedule"})
        kube.patch("v1", "Node", node, {"spec": {"taints": taints}})
    return True


def untaint_node(kube: Kube, node: str) -> bool:
    n = kube.get("v1", "Node", node) or {}
    taints = list((n.get("spec") or {}).get("taints") or [])
    keep = [t for t in taints if t.get("key") != ev.DRAIN_TAINT_KEY]
    if keep == taints:
        return False
    if not kube.check_mode:
        kube.patch("v1", "Node", node, {"spec": {"taints": keep}})
    return True


def _launchers(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for p in pods:
        labels = (p.get("metadata") or {}).get("labels") or {}
        if labels.get("kubevirt.io") == "virt-launcher" and ev.pod_is_active(p):
            vm_name = labels.get("vm.kubevirt.io/name") or labels.get("kubevirt.io/domain")
            if vm_name:
                ns = (p.get("metadata") or {}).get("namespace")
                out[f"{ns}/{vm_name}"] = p
    return out


def evacuation_views(kube: Kube, plan: dict[str, Any] | None, facts: list[dict[str, Any]],
                     only_node: str | None = None
                     ) -> tuple[list[ev.NodeView], list[ev.VmView]]:
    """Every node's view (capacity left, from the pods bound to it) and the VMs' views — of
    the VMs on ``only_node`` when given (an evacuation plans that node's VMs only)."""
    nodes = kube.list("v1", "Node")
    why = "plan which VMs leave the node"
    vmis = [v for v in (harvester_items(kube, VMI_API, "VirtualMachineInstance", why)
                        if only_node is None else node_vmis(kube, only_node, why))
            if active_vmi(v)
            and (only_node is None or (v.get("status") or {}).get("nodeName") == only_node)]
    by_name = {f["name"]: f for f in facts}
    # what the pods of each node request: as the Pod informer keeps it (cycle_kube.TOTALS),
    # with the node's own pods (its launchers) by the informer's node index; else summed here
    # over every pod, once (not once per node: 3,200 pods x 100 nodes at hundred-node)
    by_total = getattr(kube, "by_total", None)
    totals = by_total("v1", "Pod", None, ev.POD_REQUESTS) if by_total and only_node else None
    if totals is not None:
        mine = kube.list("v1", "Pod", field_selector=f"spec.nodeName={only_node}")
    else:
        pods = kube.list("v1", "Pod")
        totals = {}
        for pod in pods:
            got = ev.pod_requests_by_node(pod)
            if got is not None:
                cpu, mem = totals.get(got[0], (0, 0))
                totals[got[0]] = (cpu + got[1][0], mem + got[1][1])
        mine = pods if only_node is None else [
            p for p in pods if (p.get("spec") or {}).get("nodeName") == only_node]
    views = []
    for n in nodes:
        name = n["metadata"]["name"]
        f = by_name.get(name) or {}
        cpu, mem = totals.get(name, (0, 0))
        views.append(ev.node_view_of(n, cpu, mem, upgraded=bool(f.get("upgraded")),
                                     order=int(f.get("order", 0))))
    launchers = _launchers(mine)
    vms = []
    for v in vmis:
        key = f"{v['metadata'].get('namespace')}/{v['metadata']['name']}"
        vms.append(ev.vm_view(v, launchers.get(key)))
    return views, vms


def node_plan(kube: Kube, plan: dict[str, Any] | None, *, target_aware: bool = True,
              bandwidth_mib_s: float = 1024.0, overhead_s: float = 10.0, concurrency: int = 2,
              node_overhead_s: float = 600.0) -> dict[str, Any]:
    """The whole roll, simulated without touching anything (for ``--check``): per node in
    Rancher's order the VMs that migrate (and where) and those shut down (and why), with an
    estimated duration."""
    facts = cluster_facts(kube, plan)
    nodes, vms = evacuation_views(kube, plan, facts)
    by_name = {n.name: n for n in nodes}
    single = is_single_node(facts)
    out: list[dict[str, Any]] = []
    total = 0.0
    for f in facts:
        name = f["name"]
        entry: dict[str, Any] = {"node": name, "machine": f["machine"], "order": f["order"],
                                 "roles": f["roles"], "upgraded": f["upgraded"]}
        if f["upgraded"]:
            entry.update(migrate=[], shutdown=[], estimated_seconds=0)
            out.append(entry)
            continue
        p = _plan_for(name, vms, nodes, single=single, target_aware=target_aware)
        d = p.as_dict(bandwidth_mib_s, overhead_s, concurrency)
        d["estimated_seconds"] = round(d.get("estimated_seconds", 0.0) + node_overhead_s, 1)
        total += d["estimated_seconds"]
        entry.update(d)
        out.append(entry)
        # apply the moves: later nodes see the VMs where they would be
        for m in p.migrate:
            tgt = m.target or next((n.name for n in sorted(
                nodes, key=lambda n: -n.free_mem) if n.name != name and not n.witness
                and ev.schedulable_for(m.vm, n)), None)
            if tgt:
                m.vm.node = tgt
                by_name[tgt].req_mem += m.vm.mem
                by_name[tgt].req_cpu_m += m.vm.cpu_m
        src = by_name.get(name)
        if src is not None:
            src.upgraded = True
            for m in p.migrate:
                src.req_mem -= m.vm.mem
                src.req_cpu_m -= m.vm.cpu_m
    return {"nodes": out, "estimated_seconds": round(total, 1),
            "migration": mt.detect(kube) if target_aware else
            {"mechanism": "scheduler", "kubevirt": "", "source": "",
             "why": "target-aware placement is off: KubeVirt's evacuation and the scheduler "
                    "choose"},
            "assumptions": {"migration_bandwidth_mib_s": bandwidth_mib_s,
                            "migration_overhead_s": overhead_s,
                            "migration_concurrency": concurrency,
                            "per_node_overhead_s": node_overhead_s}}


def measured_bandwidth(kube: Kube) -> float | None:
    """MiB/s of past successful migrations (memory / duration), if any were recorded."""
    import datetime as dt
    rates = []
    for v in try_items(kube, VMI_API, "VirtualMachineInstance"):
        ms = (v.get("status") or {}).get("migrationState") or {}
        if not ms.get("completed") or ms.get("failed"):
            continue
        try:
            a = dt.datetime.fromisoformat(str(ms["startTimestamp"]))
            b = dt.datetime.fromisoformat(str(ms["endTimestamp"]))
        except (KeyError, ValueError):
            continue
        secs = (b - a).total_seconds()
        mem = ev.vm_view(v).guest_mem / (1024 * 1024)
        if secs > 0 and mem > 0:
            rates.append(mem / secs)
    return sum(rates) / len(rates) if rates else None
