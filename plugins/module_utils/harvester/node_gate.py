"""The per-batch gate and the pause check: before anything is done to a node, is Rancher
asking for it (:func:`gate`), and is it held in ``spec.nodeUpgradeOption.pauseNodes``
(:func:`wait_unpaused`)?"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_order as no
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_facts import (
    cluster_facts,
    fact_for,
    hook_names,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_phase import (
    check_phase,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_restore import (
    restore_pending,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source,
    WaitTimeout,
)


def gate(kube: Kube, writer: PlanWriter, batch: list[str], node: str | None = None
         ) -> dict[str, Any]:
    """Per-batch check: is Rancher asking for (one of) the batch's node(s)?

    Returns ``{"todo": [...], "done": [...], "expected": [...], "why": str}``; raises when the
    batch holds none of the nodes Rancher is asking for (naming both).
    """
    plan = writer.refresh()
    check_phase(plan)
    facts = cluster_facts(kube, plan, light=True)
    pre_hook, _post_hook = hook_names(kube)
    answered = _answered(kube, facts, pre_hook)
    pending = {n for n in batch
               if fact_for(facts, n)["upgraded"] and restore_pending(kube, writer, n)}
    d = no.batch_decision(facts, batch, answered, pending)
    if d["wrong"]:
        raise NodeLoopError(
            f"Rancher is upgrading {', '.join(d['expected']) or 'no node'} ({d['why']}) but "
            f"this batch of the play is on {', '.join(d['rancher_todo'])}; refusing to act on "
            "the wrong node. Check the inventory order (use the harvester.upgrade.nodes "
            "inventory or no inventory at all)")
    return {"todo": d["todo"], "done": d["done"], "expected": d["expected"], "why": d["why"],
            "restore_only": d["restore_only"]}


def _answered(kube: Kube, facts: list[dict[str, Any]], pre_hook: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for f in facts:
        if f.get("pre_drain"):
            sec = kube.get("v1", "Secret", f["machine_plan_secret"], c.FLEET_NS) or {}
            out[f["name"]] = ((sec.get("metadata") or {}).get("annotations") or {}).get(pre_hook)
    return out


def paused_nodes(plan: dict[str, Any]) -> list[str]:
    return list(((plan.get("spec") or {}).get("nodeUpgradeOption") or {}).get("pauseNodes")
                or [])


def wait_unpaused(kube: Kube, writer: PlanWriter, node: str, timeout: float) -> dict[str, Any]:
    """A paused node waits in ``UpgradePaused`` until removed from pauseNodes or ``timeout``.

    Returns ``{"paused": bool, "changed": bool}``; ``paused`` True means the deadline passed
    (the caller ends the run cleanly; a later run resumes)."""
    plan = writer.refresh()
    if node not in paused_nodes(plan):
        return {"paused": False, "changed": False}
    changed = writer.set_node_state(node, "UpgradePaused", "AdministrativelyPaused",
                                    "Node upgrade paused as requested by the user")
    writer.set_progress_message("node upgrade paused: " + ", ".join(sorted(paused_nodes(plan))))
    if kube.check_mode or timeout <= 0:
        return {"paused": True, "changed": changed}
    name = writer.name
    try:
        kube.wait([Source(writer.plan["apiVersion"], writer.plan["kind"],
                          field_selector=f"metadata.name={name}")],
                  lambda v: all(node not in paused_nodes(p) for p in v["UpgradePlan"].values()),
                  timeout=timeout, what=f"node {node} to be removed from pauseNodes")
    except WaitTimeout:
        return {"paused": True, "changed": changed}
    writer.set_progress_message("")
    return {"paused": False, "changed": True}
