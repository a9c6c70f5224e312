"""Rancher's drain hooks on a node's machine-plan secret: wait for Rancher to ask
(:func:`await_hook`, pre-drain or post-drain), answer it (:func:`answer_hook`: a pre-drain only
after the node's pre-drain Job and the last safety checks), and wait for Rancher to let the
node go (:func:`await_release`)."""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_order as no
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
    cluster_facts,
    fact_for,
    hook_names,
    release,
    secret_ann,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_job import (
    run_pre_drain_job,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_safety import (
    wait_safe_to_go_down,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source,
    WaitTimeout,
)


def await_hook(kube: Kube, writer: PlanWriter, node: str, hook: str, timeout: float,
               batch: list[str] | None = None) -> dict[str, Any]:
    """Wait (watch) for Rancher's ``rke.cattle.io/<hook>`` on the node's machine-plan secret.

    Returns ``{"value", "passed", "changed"}``; ``passed`` when the node is already beyond
    this hook (resume). While waiting for ``pre-drain``, another node getting an unanswered
    pre-drain fails the step naming both nodes."""
    plan = writer.refresh()
    facts = cluster_facts(kube, plan, light=True)
    fact = fact_for(facts, node)
    state = writer.node_state(node)
    rancher_ann = no.PRE_DRAIN if hook == "pre-drain" else no.POST_DRAIN
    beyond = "PreDrained" if hook == "pre-drain" else "PostDrained"
    sec_name = fact["machine_plan_secret"]
    if not sec_name:
        raise NodeLoopError(f"node {node} has no CAPI machine; cannot find its machine-plan")
    pre_hook, post_hook = hook_names(kube)
    ours = {f["machine_plan_secret"]: f["name"] for f in facts}
    allowed = set(batch or [node]) | {node}

    def pred(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        secrets = view["Secret"]
        sec = secrets.get(f"{c.FLEET_NS}/{sec_name}")
        ann = secret_ann(sec)
        if ann.get(rancher_ann):
            return {"value": ann[rancher_ann]}
        if hook == "pre-drain":
            if ann.get(no.POST_DRAIN) or node_states.ordinal(state) >= node_states.ordinal(beyond):
                return {"value": ann.get(no.PRE_DRAIN) or "", "passed": True}
            for key, other in secrets.items():
                oname = ours.get(key.split("/", 1)[1])
                oann = secret_ann(other)
                if oname and oname not in allowed and oann.get(no.PRE_DRAIN) and \
                        oann.get(pre_hook) != oann.get(no.PRE_DRAIN):
                    raise NodeLoopError(
                        f"Rancher asks to drain {oname} while the play is on {node}; refusing "
                        "to act on the wrong node")
        elif node_states.ordinal(state) >= node_states.ordinal("PostDrained") and \
                secret_ann(sec).get(post_hook):
            return {"value": "", "passed": True}
        return None

    def describe(view: dict[str, dict[str, dict[str, Any]]]) -> str:
        ann = secret_ann(view["Secret"].get(f"{c.FLEET_NS}/{sec_name}"))
        shown = {k: v[:40] for k, v in ann.items() if k.startswith("rke.cattle.io/")
                 or k in (pre_hook, post_hook)}
        return f"secret {c.FLEET_NS}/{sec_name} annotations {shown or '{}'}"

    if node_states.ordinal(state) >= node_states.ordinal(beyond) and hook == "post-drain":
        return {"value": "", "passed": True, "changed": False}
    if kube.check_mode:
        return {"value": "", "passed": False, "changed": False, "skipped_wait": True}
    try:
        res = kube.wait([Source("v1", "Secret", c.FLEET_NS)], pred, timeout=timeout,
                        what=f"Rancher's {rancher_ann} on {c.FLEET_NS}/{sec_name} (node {node})",
                        describe=describe)
    except WaitTimeout as exc:
        fail = "PreDrainFailed" if hook == "pre-drain" else "PostDrainFailed"
        writer.fail_node(node, fail, "HookTimeout", str(exc))
        raise
    changed = False
    if not res.get("passed"):
        new_state = "PreDraining" if hook == "pre-drain" else "PostDraining"
        changed = writer.set_node_state(node, new_state)
    return {"value": res.get("value", ""), "passed": bool(res.get("passed")), "changed": changed}


def answer_hook(kube: Kube, writer: PlanWriter, node: str, hook: str, *,
                job_timeout: float = 3600, safety_timeout: float | None = None,
                pre_drain_job: dict[str, Any] | None = None) -> dict[str, Any]:
    """Copy Rancher's ``rke.cattle.io/<hook>`` value into our hook annotation. A pre-drain is
    answered only after the node's pre-drain Job succeeded (:func:`run_pre_drain_job`) and,
    with ``safety_timeout``, once it is still safe to take the node down
    (:func:`wait_safe_to_go_down`: what changed since the evacuation's checks).
    ``pre_drain_job``: what :func:`run_pre_drain_job` returned to the caller just now, the Job
    complete and the restore record merged back after it (a head start): a complete Job
    stays complete and nothing else writes that record then, so neither is read again."""
    plan = writer.refresh()
    fact = fact_for(cluster_facts(kube, plan, light=True), node)
    pre_hook, post_hook = hook_names(kube)
    ours = pre_hook if hook == "pre-drain" else post_hook
    rancher_ann = no.PRE_DRAIN if hook == "pre-drain" else no.POST_DRAIN
    sec = kube.get("v1", "Secret", fact["machine_plan_secret"], c.FLEET_NS)
    ann = secret_ann(sec)
    value = ann.get(rancher_ann)
    changed = False
    if not value:
        if hook == "pre-drain":
            changed = writer.set_node_state(node, "PreDrained") or changed
        if hook == "pre-drain" and (ann.get(no.POST_DRAIN) or fact["upgraded"]):
            return {"changed": changed, "value": "", "passed": True}
        if hook == "post-drain" and fact["upgraded"]:
            return {"changed": changed, "value": "", "passed": True}
        raise NodeLoopError(f"secret {c.FLEET_NS}/{fact['machine_plan_secret']} carries no "
                            f"{rancher_ann}; nothing to answer for node {node}")
    if ann.get(ours) == value:
        if hook == "pre-drain":
            changed = writer.set_node_state(node, "PreDrained") or changed
        return {"changed": changed, "value": value, "passed": False}
    pre_drained = False
    if hook == "pre-drain":
        job = pre_drain_job if pre_drain_job and pre_drain_job.get("complete") else \
            run_pre_drain_job(kube, writer, node, timeout=job_timeout)
        if safety_timeout is not None and not kube.check_mode:
            wait_safe_to_go_down(kube, writer, node, safety_timeout)
        # the state is written before the answer; its Event, which the answer follows at
        # once, says both (one Event where two said the same moment)
        pre_drained = writer.set_node_state(node, "PreDrained", event=False)
        changed = pre_drained or changed or bool(job["changed"])
    if not kube.check_mode:
        kube.patch("v1", "Secret", fact["machine_plan_secret"],
                   {"metadata": {"annotations": {ours: value}}}, c.FLEET_NS)
        if pre_drained:
            writer.event("NodePreDrained",
                         f"Node {node}: PreDrained, answered {rancher_ann} with {ours}")
        else:
            writer.event("DrainHookAnswered",
                         f"Node {node}: answered {rancher_ann} with {ours}")
    return {"changed": True, "value": value, "passed": False}


def await_release(kube: Kube, writer: PlanWriter, node: str, timeout: float) -> dict[str, Any]:
    """Wait (watch) until Rancher is done with the node: no drain annotations on its secret,
    node uncordoned, kubelet at the release's kubernetes version."""
    plan = writer.refresh()
    rel = release(plan)
    fact = fact_for(cluster_facts(kube, plan, light=True), node)
    sec_key = f"{c.FLEET_NS}/{fact['machine_plan_secret']}"

    def pred(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        ann = secret_ann(view["Secret"].get(sec_key))
        n = view["Node"].get(node) or {}
        kubelet = ((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
        return (not any(a in ann for a in no.RANCHER_DRAIN_ANNOTATIONS)
                and not (n.get("spec") or {}).get("unschedulable")
                and no.kubelet_matches(kubelet, rel["kubernetes"]))

    def describe(view: dict[str, dict[str, dict[str, Any]]]) -> str:
        ann = secret_ann(view["Secret"].get(sec_key))
        n = view["Node"].get(node) or {}
        kubelet = ((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
        left = [a for a in no.RANCHER_DRAIN_ANNOTATIONS if a in ann]
        return (f"annotations {left}, unschedulable="
                f"{bool((n.get('spec') or {}).get('unschedulable'))}, kubelet {kubelet} "
                f"(want {rel['kubernetes']})")

    if kube.check_mode:
        return {"changed": False}
    try:
        kube.wait([Source("v1", "Secret", c.FLEET_NS),
                   Source("v1", "Node", field_selector=f"metadata.name={node}")],
                  pred, timeout=timeout, describe=describe,
                  what=f"Rancher to finish node {node} (annotations removed, uncordoned, "
                       "kubelet current)")
    except WaitTimeout as exc:
        writer.fail_node(node, "PostDrainFailed", "RancherTimeout", str(exc))
        raise
    return {"changed": False}
