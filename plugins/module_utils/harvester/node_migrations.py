"""The live migrations off a node (:func:`migrate_all`): create them (a
VirtualMachineInstanceMigration, or Harvester's migrate action), watch them, retry a failed
one on another target, adopt the ones a previous run or the head start began, and count what
was moved (:func:`count_ours`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import evacuation as ev
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    migration_target as mt,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
    NotServed,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.informer import obj_key
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_facts import (
    RUN_ANNOTATION,
    TARGET_ANNOTATION,
    VMI_API,
    VMI_NAME_LABEL,
    VMIM_KIND,
    active_vmi,
    node_vmis,
    on_node,
    run_id,
    safe_name,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source,
    WaitTimeout,
)


def migrate_all(kube: Kube, writer: PlanWriter, node: str, p: ev.EvacuationPlan,
                nodes: list[ev.NodeView], result: dict[str, Any], *, target_aware: bool,
                concurrency: int, retries: int, migration_timeout: float,
                timeout: float, start_only: bool = False, feed: bool = False,
                mechanism: str = mt.ADDED_NODE_SELECTOR,
                started: Callable[[], None] | None = None) -> None:
    """Move the planned VMs off ``node``, at most ``concurrency`` migrations at once, and wait
    until every one is off (a failure beyond ``retries`` or ``timeout`` fails the node).

    ``start_only``: one decision on the current view (start what may start) and return.
    ``feed`` (the head start with Harvester's migrate action, which pins only what KubeVirt
    runs at once): keep starting the next migration as one ends, and return once every one
    is started and seen, within ``timeout``; a failure or the time running out is left to
    the node's own cycle (``result["partial"]``), nothing is failed or aborted here.
    ``started``: called once, right after the first round of migrations was asked for (the
    head start's writes that the migrations need not wait for)."""
    queue_ = list(p.migrate)
    by_key = {m.vm.key: m for m in p.migrate}
    active: dict[str, dict[str, Any]] = {}     # vm key -> {"name", "started", "target"}
    attempts: dict[str, int] = {}
    failures: dict[str, list[str]] = {}
    done: set[str] = set()
    excluded: dict[str, set[str]] = {}
    labels = {**writer.labels("node-upgrade"), c.LABEL_NODE: node}
    host_label = {n.name: n.labels.get("kubernetes.io/hostname", n.name) for n in nodes}
    final_failed: dict[str, str] = {}
    run = run_id()
    known: set[str] = set()    # migrations this call created, adopted or counted
    first_round: list[bool] = []   # the first round of starts was made (``started``)
    # the adoption patches of the action's migrations go out beside the wait (a lane freed
    # meanwhile is fed without waiting for them)
    labeller = _Labeller(kube)

    def start(move: ev.Move, migs: dict[str, dict[str, Any]]) -> None:
        key = move.vm.key
        attempts[key] = attempts.get(key, 0) + 1
        if target_aware and move.target and mechanism == mt.HARVESTER_ACTION:
            start_by_action(move, migs)
            return
        spec: dict[str, Any] = {"vmiName": move.vm.name}
        if target_aware and move.target:
            spec["addedNodeSelector"] = {"kubernetes.io/hostname": host_label.get(
                move.target, move.target)}
        # unique per VM, source node and attempt: a VM moved again off a later node gets a new
        # name (KubeVirt keeps finished migrations; the same name would be a 409)
        digest = hashlib.sha1(f"{key}/{node}/{attempts[key]}".encode()).hexdigest()[:5]
        body = {"apiVersion": VMI_API, "kind": VMIM_KIND,
                "metadata": {"name": safe_name(f"{move.vm.name}-upgrade-{digest}"),
                             "namespace": move.vm.namespace,
                             # KubeVirt's webhook sets it too; ours for the watch's selector
                             "labels": {**labels, VMI_NAME_LABEL: move.vm.name},
                             "annotations": {RUN_ANNOTATION: run}},
                "spec": spec}
        obj = kube.create_in(VMI_API, VMIM_KIND, body, move.vm.namespace)
        known.add(obj["metadata"]["name"])
        active[key] = {"name": obj["metadata"]["name"], "started": time.monotonic(),
                       "target": move.target}
        retried(move)

    def start_by_action(move: ev.Move, migs: dict[str, dict[str, Any]]) -> None:
        """Harvester creates the migration (``generateName: <vm>-``): the one of the VM that
        was not in the view before the action. The wait's watch brings it
        (:func:`adopt_created`); the head start, which has no watch, lists the migrations
        once after all its actions."""
        key, ns = move.vm.key, move.vm.namespace
        before = set(_migrations_of(migs, ns, move.vm.name))
        mt.harvester_migrate(kube, ns, move.vm.name, str(move.target))
        active[key] = {"name": "", "started": time.monotonic(), "target": move.target,
                       "before": before}
        retried(move, " through Harvester's migrate action")

    def retried(move: ev.Move, how: str = "") -> None:
        """An Event for a retried migration only: a first attempt is the migration object
        itself (labelled with the plan and the node, its target in its spec or annotation;
        ``kubectl get vmim -A -w``), an Event per VM repeated it (docs/performance.md, "API
        requests, round two"); a retry tells what the objects alone do not."""
        if attempts[move.vm.key] > 1:
            writer.event("VMMigrationStarted",
                         f"Migrating VM {move.vm.key} off node {node} to "
                         f"{move.target or 'a node the scheduler chooses'} ({move.why}){how}, "
                         f"attempt {attempts[move.vm.key]}")

    def adopt_created(key: str, migs: dict[str, dict[str, Any]]) -> bool:
        """The migration Harvester's action created for ``key`` (the newest of the VM's not
        seen before the action), labelled and annotated as ours so that a resume, the head
        start's accounting and its failed attempts see it; False while it is not in ``migs``."""
        info, move = active[key], by_key[key]
        ns = move.vm.namespace
        created = [m for name, m in _migrations_of(migs, ns, move.vm.name).items()
                   if name not in info["before"]]
        if not created:
            return False
        mig = max(created, key=lambda m: str(m["metadata"].get("creationTimestamp") or ""))
        name = mig["metadata"]["name"]
        labeller.patch(VMI_API, VMIM_KIND, name, {"metadata": {
            "labels": {**labels, VMI_NAME_LABEL: move.vm.name},
            "annotations": {RUN_ANNOTATION: run, TARGET_ANNOTATION: str(info["target"])}}},
            ns)
        known.add(name)
        info["name"] = name
        info.pop("before")
        return True

    def earlier_failures(move: ev.Move, vmi: dict[str, Any],
                         migs: dict[str, dict[str, Any]]) -> bool:
        """Count the failed migrations of this VM off this node that this run started before
        (the head start) as attempts; True when no attempt is left."""
        key = move.vm.key
        for m in migs.values():
            md = m.get("metadata") or {}
            if md.get("name") in known or md.get("namespace") != move.vm.namespace or \
                    (m.get("spec") or {}).get("vmiName") != move.vm.name or \
                    (md.get("labels") or {}).get(c.LABEL_NODE) != node or \
                    (md.get("annotations") or {}).get(RUN_ANNOTATION) != run or \
                    ((m.get("status") or {}).get("phase")) != "Failed":
                continue
            known.add(md["name"])
            attempts[key] = attempts.get(key, 0) + 1
            failures.setdefault(key, []).append(_migration_failure(m, vmi))
            target = ((((m.get("spec") or {}).get("addedNodeSelector") or {})
                       .get("kubernetes.io/hostname")) or
                      (md.get("annotations") or {}).get(TARGET_ANNOTATION))
            if target:
                excluded.setdefault(key, set()).add(
                    next((n for n, h in host_label.items() if h == target), target))
        if failures.get(key) and attempts.get(key, 0) > retries and key not in final_failed:
            final_failed[key] = "; ".join(failures[key])
        return key in final_failed

    def vmi_state(view: dict[str, dict[str, dict[str, Any]]], key: str) -> dict[str, Any] | None:
        return view["VirtualMachineInstance"].get(key)

    def on_change(view: dict[str, dict[str, dict[str, Any]]]) -> None:
        now = time.monotonic()
        migs = view[VMIM_KIND]
        for key, info in list(active.items()):
            if not info["name"]:   # requested through Harvester's action: has it come?
                adopt_created(key, migs)
            vmi = vmi_state(view, key)
            ns = key.split("/", 1)[0]
            mig = migs.get(f"{ns}/{info['name']}") if info["name"] else None
            # the view holds the VMIs labelled as on the node (node_facts.VMI_NODE_LABEL):
            # one that left it moved (KubeVirt moves the label with status.nodeName) or is gone
            moved = vmi is None or not active_vmi(vmi) or \
                (vmi.get("status") or {}).get("nodeName") not in (node, None, "")
            phase = ((mig or {}).get("status") or {}).get("phase")
            if moved and phase != "Failed":
                done.add(key)
                active.pop(key)
                # (out of the view: where the migration took it, if it says)
                tgt = ((vmi.get("status") or {}).get("nodeName") if vmi is not None else
                       (((mig or {}).get("status") or {}).get("migrationState") or {})
                       .get("targetNode"))
                result["migrated"].append({"vm": key, "to": tgt, "attempts": attempts[key]})
                continue
            if phase == "Succeeded":
                # the migration and its VMI come on two streams: the VMI's move (KubeVirt
                # writes it before the migration's phase) may still be on its way. Done is
                # when the VMI is seen off the node, never on the migration's word alone.
                continue
            hung = now - info["started"] > migration_timeout
            # (the one Harvester's action creates is awaited on the watch up to the timeout)
            if phase == "Failed" or hung or (mig is None and vmi is not None and info["name"]
                                             and now - info["started"] > 5):
                reason = (f"no progress within {int(migration_timeout)}s (phase "
                          f"{phase or 'unknown'})" if hung and phase != "Failed"
                          else _migration_failure(mig or {}, vmi))
                if not info["name"]:
                    reason = (f"no migration of the VM seen within {int(migration_timeout)}s "
                              "of Harvester's migrate action")
                if hung and mig is not None:
                    kube.delete(VMI_API, VMIM_KIND, info["name"], ns)   # aborts the migration
                failures.setdefault(key, []).append(reason)
                active.pop(key)
                if info.get("target"):
                    excluded.setdefault(key, set()).add(info["target"])
                if attempts[key] <= retries:
                    move = by_key[key]
                    if target_aware:
                        tgt, why = ev.choose_target(move.vm, nodes, exclude=excluded.get(key))
                        move = ev.Move(move.vm, tgt.name if tgt else None, f"retry: {why}")
                    queue_.insert(0, move)
                else:
                    final_failed[key] = "; ".join(failures[key])
        if final_failed:
            return
        for move in list(queue_):   # already gone (resume, head start, moved by others)
            vmi = vmi_state(view, move.vm.key)
            if vmi is None or not active_vmi(vmi) or \
                    (vmi.get("status") or {}).get("nodeName") != node:
                queue_.remove(move)
                done.add(move.vm.key)
        requeue: list[ev.Move] = []
        while queue_ and len(active) < max(1, concurrency):
            move = queue_.pop(0)
            key = move.vm.key
            vmi = vmi_state(view, key)
            if vmi is None:   # (the sweep above left only VMs still on the node)
                continue
            # a migration someone else started (a previous run, KubeVirt's evacuation): adopt
            mig_name = next((m["metadata"]["name"] for m in migs.values()
                             if (m.get("spec") or {}).get("vmiName") == move.vm.name
                             and m["metadata"].get("namespace") == move.vm.namespace
                             and ((m.get("status") or {}).get("phase") not in
                                  ("Succeeded", "Failed"))), None)
            if earlier_failures(move, vmi, migs):
                continue
            if target_aware and move.target and move.target in excluded.get(key, set()):
                tgt, why = ev.choose_target(move.vm, nodes, exclude=excluded[key])
                move = ev.Move(move.vm, tgt.name if tgt else None, f"retry: {why}")
            if mig_name:
                known.add(mig_name)
                attempts[key] = attempts.get(key, 0) + 1
                active[key] = {"name": mig_name, "started": time.monotonic(),
                               "target": move.target}
                continue
            if not target_aware and _kubevirt_evacuates(vmi):
                requeue.append(move)     # KubeVirt's evacuation controller will start one
                continue
            refused = mt.action_refuses(vmi) if mechanism == mt.HARVESTER_ACTION and \
                target_aware and move.target else None
            if refused:   # Harvester's policy for its action; KubeVirt migrates such a VM
                move = ev.Move(move.vm, None, f"{move.why}; Harvester's migrate action "
                               f"refuses it ({refused}): KubeVirt chooses")
            try:
                start(move, migs)
            except mt.ActionRefused as exc:
                if exc.status in (0, 429, 503) or "already in a migrating state" in exc.text:
                    # Harvester's API not reachable right now, or its pin of an earlier
                    # migration not yet removed: try again
                    attempts[key] -= 1
                    requeue.append(move)
                    continue
                if "is not live migratable as" in exc.text:
                    # Harvester's own policy (ValidateVMMigratable: CD-ROM, container disk,
                    # ...) for its action; KubeVirt migrates such a VM, without a target
                    attempts[key] -= 1
                    requeue.append(ev.Move(move.vm, None, f"{move.why}; Harvester's migrate "
                                           f"action refuses it ({exc.text}): KubeVirt chooses"))
                    continue
                # refused (VM not ready, target not migratable, ...): a failed attempt
                failures.setdefault(key, []).append(str(exc))
                if move.target:
                    excluded.setdefault(key, set()).add(move.target)
                if attempts[key] <= retries:
                    tgt, why = ev.choose_target(move.vm, nodes, exclude=excluded.get(key))
                    requeue.append(ev.Move(move.vm, tgt.name if tgt else None,
                                           f"retry: {why}"))
                else:
                    final_failed[key] = "; ".join(failures[key])
            except Exception as exc:  # noqa: BLE001 - e.g. a migration already in flight
                if getattr(exc, "status", 0) in (400, 409, 422, 429):
                    requeue.append(move)
                else:
                    raise
        queue_.extend(requeue)
        if started is not None and not first_round:
            first_round.append(True)
            started()

    def still_on_node(v: dict[str, Any] | None) -> bool:
        return v is not None and active_vmi(v) and (v.get("status") or {}).get("nodeName") == node

    def pred(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        labeller.check()
        if final_failed:
            raise _MigrationFailed(dict(final_failed))
        if feed:   # every one started, and each of Harvester's actions' migrations adopted
            return not queue_ and all(info["name"] for info in active.values())
        if active:
            return False
        # queued VMs that left the node meanwhile (moved by KubeVirt) are done
        return not [m for m in queue_ if still_on_node(vmi_state(view, m.vm.key))]

    def describe(view: dict[str, dict[str, dict[str, Any]]]) -> str:
        parts = []
        for key, info in active.items():
            ns = key.split("/", 1)[0]
            if not info["name"]:
                parts.append(f"{key}: migration asked of Harvester's migrate action, not seen "
                             "yet")
                continue
            mig = view[VMIM_KIND].get(f"{ns}/{info['name']}") or {}
            parts.append(f"{key}: migration {info['name']} "
                         f"{(mig.get('status') or {}).get('phase') or 'Pending'}")
        if queue_:
            parts.append(f"queued: {', '.join(m.vm.key for m in queue_)}")
        return "; ".join(parts)

    def finish() -> None:
        # the migrations of these VMs only (KubeVirt labels each with its VMI's name; finished
        # ones pile up cluster-wide: 3,000 by the last node of a 100-node cluster)
        vmims = Source(VMI_API, VMIM_KIND, label_selector=_vmim_selector(p.migrate))
        if start_only:   # one decision on the current view: start what may start, leave
            on_change({
                "VirtualMachineInstance": {obj_key(o): o for o in node_vmis(kube, node)},
                VMIM_KIND: {obj_key(o): o for o in kube.list_with_rv(
                    VMI_API, VMIM_KIND, label_selector=vmims.label_selector)[0]}})
            asked = [key for key, info in active.items() if not info["name"]]
            if asked:   # what Harvester's actions created, in one list
                now = {obj_key(o): o for o in kube.list_with_rv(
                    VMI_API, VMIM_KIND, label_selector=vmims.label_selector)[0]}
                for key in asked:
                    if not adopt_created(key, now):
                        active.pop(key)   # not created after all: the node's own cycle moves it
            result["started"] = sorted(active)
            return
        # the VMIs labelled as on the node: one that leaves the set has moved (on_change)
        sources = [Source(VMI_API, "VirtualMachineInstance", label_selector=on_node(node)), vmims]
        if feed:
            try:
                kube.wait(sources, pred, on_change=on_change, timeout=timeout, describe=describe,
                          what=f"live migrations started off node {node}")
            except _MigrationFailed as exc:
                result["partial"] = (f"migration of {', '.join(sorted(exc.failed))} failed; "
                                     f"{node}'s own cycle retries it")
            except WaitTimeout:
                result["partial"] = (f"not every migration started within {timeout:g}s; "
                                     f"{node}'s own cycle moves the rest")
            result["started"] = sorted(attempts)
            return
        try:
            kube.wait(sources, pred, on_change=on_change, timeout=timeout, describe=describe,
                      what=f"live migrations off node {node}")
        except _MigrationFailed as exc:
            names = ", ".join(sorted(exc.failed))
            detail = "; ".join(f"{k}: {v}" for k, v in sorted(exc.failed.items()))
            msg = (f"live migration of VM(s) {names} off node {node} failed after "
                   f"{retries + 1} attempt(s): {detail}; the VMs keep running on {node} and the "
                   "node was not handed to Rancher")
            writer.fail_node(node, "PreDrainFailed", "MigrationFailed", msg)
            raise NodeLoopError(msg) from None
        except WaitTimeout as exc:
            stuck = ", ".join(sorted(active)) or ", ".join(m.vm.key for m in queue_)
            msg = (f"evacuation of node {node} did not finish: VM(s) {stuck} still on the node; "
                   f"{exc}")
            writer.fail_node(node, "PreDrainFailed", "EvacuationTimeout", msg)
            raise NodeLoopError(msg) from None
        result["attempts"] = attempts

    try:
        finish()
    except BaseException:
        labeller.close(quiet=True)   # the error that ended the wait is the one raised
        raise
    labeller.close()


class _Labeller:
    """Merge patches sent one after the other by a thread of their own; an error of one is
    raised by :meth:`check` and :meth:`close` (which waits for them all), as the patch itself
    would have raised it."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.pool: ThreadPoolExecutor | None = None
        self.sent: list[Future[Any]] = []

    def patch(self, api_version: str, kind: str, name: str, body: dict[str, Any],
              namespace: str) -> None:
        if self.pool is None:
            self.pool = ThreadPoolExecutor(1, thread_name_prefix="adopt")
        self.sent.append(self.pool.submit(self.kube.patch, api_version, kind, name, body,
                                          namespace))

    def check(self) -> None:
        for f in self.sent:
            if f.done() and f.exception() is not None:
                raise f.exception()  # type: ignore[misc]

    def close(self, quiet: bool = False) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        if not quiet:
            self.check()


def _migration_failure(m: dict[str, Any], vmi: dict[str, Any] | None) -> str:
    st = m.get("status") or {}
    ms = ((vmi or {}).get("status") or {}).get("migrationState") or {}
    for cond in st.get("conditions") or []:
        if cond.get("message"):
            return f"{cond.get('reason') or cond.get('type')}: {cond['message']}"
    return str(ms.get("failureReason") or st.get("phase") or "migration failed")


def _migrations_of(migs: dict[str, dict[str, Any]], namespace: str, vmi: str
                   ) -> dict[str, dict[str, Any]]:
    """The migrations of VMI ``namespace/vmi`` in ``migs``, by name."""
    return {m["metadata"]["name"]: m for m in migs.values()
            if (m.get("metadata") or {}).get("namespace") == namespace
            and (m.get("spec") or {}).get("vmiName") == vmi}


def _vmim_selector(moves: list[ev.Move]) -> str | None:
    """``kubevirt.io/vmi-name in (...)`` for the VMs to move (``None``: too many for a URL)."""
    names = sorted({m.vm.name for m in moves})
    if not names or sum(len(n) + 1 for n in names) > 4000:
        return None
    return f"{VMI_NAME_LABEL} in ({','.join(names)})"


def ours_selector(writer: PlanWriter, node: str) -> str:
    """The label selector of the migrations this plan made off ``node``."""
    labels = {**writer.labels("node-upgrade"), c.LABEL_NODE: node}
    return ",".join(f"{k}={v}" for k, v in labels.items())


def count_ours(kube: Kube, writer: PlanWriter, node: str, result: dict[str, Any],
               migs: list[dict[str, Any]] | None = None) -> None:
    """VMs our own earlier migrations moved off ``node`` (the previous node's head start, a
    killed run) count as migrated, once each. ``migs``: those migrations (selected by
    :func:`ours_selector`) as a wait that saw every VM off the node has just seen them (none
    is created after that), instead of a list."""
    if migs is None:
        try:
            migs = kube.list(VMI_API, VMIM_KIND, None, ours_selector(writer, node))
        except NotServed:
            return
    seen = {m["vm"] for m in result["migrated"]}
    for m in migs:
        st = m.get("status") or {}
        key = f"{m['metadata'].get('namespace')}/{(m.get('spec') or {}).get('vmiName')}"
        if st.get("phase") == "Succeeded" and key not in seen:
            seen.add(key)
            result["migrated"].append({"vm": key, "attempts": 1,
                                       "to": (st.get("migrationState") or {}).get("targetNode")})


def _kubevirt_evacuates(vmi: dict[str, Any]) -> bool:
    """KubeVirt's evacuation controller migrates this VMI off a node tainted for drain."""
    return (vmi.get("spec") or {}).get("evictionStrategy") in (
        "LiveMigrate", "LiveMigrateIfPossible")


class _MigrationFailed(NodeLoopError):
    def __init__(self, failed: dict[str, str]) -> None:
        self.failed = failed
        super().__init__("; ".join(f"{k}: {v}" for k, v in failed.items()))
