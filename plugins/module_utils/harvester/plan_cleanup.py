"""The plan's finalizer: upgrade-toolkit's cleanup when a plan is aborted or deleted.

Every UpgradePlan the collection creates (or adopts) carries the finalizer
``harvester-upgrade.harvesterhci.io/cleanup`` until its cleanup has run: Finalize (after
``CleanupUpgradeResources``) and an abort remove it. So a plan that still has it is one whose
cleanup is owed, and ``kubectl delete upgradeplan P`` leaves it ``Terminating`` (its
``deletionTimestamp`` set) instead of gone, as the toolkit's finalizer does. With no controller
running between runs, the next run of the collection (``upgrade.yml`` or
``playbooks/abort.yml``) does what the toolkit's controller does on deletion -- the same steps
as an abort: ``CleanupUpgradeResources``, start the VMs the collection stopped, remove its drain
taint -- and then removes the finalizer; Kubernetes' garbage collector deletes what the plan
owns. The toolkit refuses to delete a plan while the cluster or the nodes are being upgraded;
for such a plan the run stops, naming the plan, and ``abort.yml -e upgrade_abort_force=true``
does the cleanup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_evacuation,
    node_order,
    node_restore,
    phase_finalize,
    phases,
    plan_status,
    plan_writer,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
    retry_on_conflict,
)

FINALIZER = c.PLAN_FINALIZER
CONFLICT_RETRIES = 5
HARD = {"ClusterUpgrading": "the cluster is being upgraded",
        "NodeUpgrading": "nodes are being upgraded"}


def finalizers(plan: dict[str, Any]) -> list[str]:
    return list((plan.get("metadata") or {}).get("finalizers") or [])


def being_deleted(plan: dict[str, Any]) -> bool:
    """``kubectl delete`` was asked and the cleanup this finalizer stands for is owed."""
    return bool((plan.get("metadata") or {}).get("deletionTimestamp")) and \
        FINALIZER in finalizers(plan)


def _edit_finalizers(kube: Kube, plan: dict[str, Any] | None, add: bool,
                     check_mode: bool,
                     written: Callable[[dict[str, Any]], None] | None = None) -> bool:
    """Add or drop our finalizer with a conditional write (the plan's resourceVersion); on a
    409 Conflict re-read the plan and decide again, as the status writes do. Returns whether
    the plan needed the change (in check mode: would need it; nothing is written)."""
    current = plan

    def reread() -> None:   # conflicted: decide again on the fresh plan
        nonlocal current
        if current is not None:
            current = kube.get(c.PLAN_API_VERSION, c.PLAN_KIND, current["metadata"]["name"])

    def attempt() -> bool:
        if current is None:
            return False
        meta = current.get("metadata") or {}
        have = finalizers(current)
        if add and (FINALIZER in have or meta.get("deletionTimestamp")):
            return False
        if not add and FINALIZER not in have:
            return False
        if check_mode:
            return True
        wanted = [*have, FINALIZER] if add else [f for f in have if f != FINALIZER]
        answer = kube.patch(c.PLAN_API_VERSION, c.PLAN_KIND, meta["name"],
                            {"metadata": {"finalizers": wanted,
                                          "resourceVersion": meta.get("resourceVersion")}})
        if written is not None and answer:
            written(answer)
        return True

    return retry_on_conflict(attempt, CONFLICT_RETRIES, "UpgradePlan finalizers",
                             reread=reread)


def add_finalizer(kube: Kube, plan: dict[str, Any], check_mode: bool = False) -> bool:
    """Put the finalizer on a plan whose cleanup is owed (not on one being deleted)."""
    return _edit_finalizers(kube, plan, add=True, check_mode=check_mode)


def remove_finalizer(kube: Kube, name: str, check_mode: bool = False) -> bool:
    """Drop the finalizer (the cleanup ran); a plan being deleted then goes away."""
    return _edit_finalizers(kube, kube.get(c.PLAN_API_VERSION, c.PLAN_KIND, name), add=False,
                            check_mode=check_mode)


def drop_finalizer(kube: Kube, writer: Any, check_mode: bool = False) -> bool:
    """:func:`remove_finalizer` for a module that holds the plan (a ``PlanWriter`` whose
    plan is its latest write's answer): decided on that plan instead of a read (the write
    is conditional on its resourceVersion, a conflict re-reads it), and the writer takes
    the write's answer, so the status write that follows needs no read either."""
    return _edit_finalizers(kube, writer.plan, add=False, check_mode=check_mode,
                            written=writer.adopt)


def rancher_mid_node(kube: Kube) -> list[str]:
    secrets = kube.list("v1", "Secret", namespace=c.FLEET_NS) or []
    return [s["metadata"]["name"] for s in secrets
            if node_order.PRE_DRAIN in ((s.get("metadata") or {}).get("annotations") or {})]


def abort(kube: Kube, plan: dict[str, Any], message: str, *, check_mode: bool = False,
          restore_timeout: float = 600) -> list[str]:
    """The toolkit's cleanup of an aborted (or deleted) plan, then ``Failed`` with reason
    ``Aborted`` and the finalizer removed. Idempotent; returns what was done."""
    writer = plan_writer.PlanWriter(kube, plan, check_mode)
    name = writer.name
    actions = phase_finalize.cleanup_resources(kube, writer, check_mode)
    # the VMs the collection shut down, and its drain taint
    nkube = Kube(kube.dyn, check_mode=check_mode)
    nwriter = plan_writer.PlanWriter(nkube, plan)
    cm = kube.get("v1", "ConfigMap", f"{name}-restore-vm", c.UPGRADE_NS) or {}
    for node in sorted((cm.get("data") or {})):
        if check_mode:
            actions.append(f"would restore VMs of {node}")
            continue
        res = node_restore.restore_vms(nkube, nwriter, node, timeout=restore_timeout, force=True)
        if res.get("restored") or res.get("failed"):
            actions.append(f"restore VMs of {node}: {len(res.get('restored') or [])} "
                           f"started, failed: {res.get('failed') or []}")
    # those the node loop asked to start without waiting (the last node's): awaited, unmarked
    actions += node_restore.await_marked_restores(nkube, nwriter, restore_timeout)["lines"]
    busy = rancher_mid_node(kube)
    for node in kube.list(*c.NODE):
        n = node["metadata"]["name"]
        if any(t.get("key") == "kubevirt.io/drain"
               for t in (node.get("spec") or {}).get("taints") or []):
            if busy:
                actions.append(f"left the kubevirt.io/drain taint on {n}: Rancher is "
                               f"mid-node ({', '.join(busy)} has pre-drain)")
            elif node_evacuation.untaint_node(nkube, n):
                actions.append(f"{'would remove' if check_mode else 'removed'} "
                               f"the kubevirt.io/drain taint from {n}")

    def mark(s: dict[str, Any]) -> list[Any]:
        events = plan_status.fail(s, message, writer.now(), writer.generation)
        plan_status.set_condition(s, plan_status.COND_PROGRESSING, "False", "Aborted", message,
                                  writer.now(), writer.generation)
        return events

    if (writer.status.get("currentPhase")) not in (phases.FAILED, phases.SUCCEEDED):
        writer.update(mark)
        actions.append(f"marked UpgradePlan {name} Failed (Aborted)")
    if remove_finalizer(kube, name, check_mode):
        actions.append(f"removed finalizer {FINALIZER} from UpgradePlan {name}")
    return actions


def deletion_refused(plan: dict[str, Any]) -> str | None:
    """Why the toolkit would have refused to delete this plan (its phase), else None."""
    current = (plan.get("status") or {}).get("currentPhase") or ""
    if current in HARD:
        name = plan["metadata"]["name"]
        return (f"UpgradePlan {name} was deleted while {HARD[current]} ({current}); the "
                "toolkit refuses that deletion, so its cleanup has not run and the plan stays "
                f"Terminating (finalizer {FINALIZER}). Run playbooks/abort.yml -e "
                f"upgrade_plan_name={name} -e upgrade_abort_force=true to clean up and let it "
                "go (the cluster may be left at mixed versions)")
    return None


def finish_deletion(kube: Kube, plan: dict[str, Any], *, check_mode: bool = False,
                    restore_timeout: float = 600) -> list[str]:
    """What the toolkit's controller does when a plan is deleted: the cleanup, then the
    finalizer goes and the garbage collector deletes what the plan owns."""
    return abort(kube, plan, "Aborted: UpgradePlan deleted; cleaned up as upgrade-toolkit's "
                 "finalizer does", check_mode=check_mode, restore_timeout=restore_timeout)
