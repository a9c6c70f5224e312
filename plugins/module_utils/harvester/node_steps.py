"""The steps of upgrading one node, each idempotent and resumable from the cluster's truth.

Called by the node-loop modules; each function takes a :class:`node_kube.Kube`, a
:class:`node_kube.PlanWriter` and plain parameters, and returns a result dict for the module
(``changed`` plus facts). Failures raise :class:`node_kube.NodeLoopError` after recording the
node failure in the plan where the protocol says so (``PreDrainFailed``, ``PostDrainFailed``,
``SingleNodeUpgradeFailed``).

Step order for a multi-node cluster (docs/protocol.md, NodeUpgrade rows):
``await_hook(pre-drain)`` → ``evacuate`` → ``answer_hook(pre-drain)`` → ``await_hook(post-drain)``
→ ``run_node_job(post-drain)`` → ``answer_hook(post-drain)`` → ``await_release`` → ``restore_vms``.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    evacuation as ev,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    lock_run,
    node_settings,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    migration_target as mt,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_order as no,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.informer import (
    obj_key,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_kube import (
    FLEET_NS,
    JOB_TYPE_LABEL,
    NODE_LABEL,
    UPGRADE_NS,
    Kube,
    NodeLoopError,
    NotServed,
    PlanWriter,
    Source,
    WaitTimeout,
    state_ordinal,
)

VM_API, VMI_API = "kubevirt.io/v1", "kubevirt.io/v1"
VMI_NAME_LABEL = "kubevirt.io/vmi-name"    # KubeVirt labels each migration with its VMI
VMIM_KIND = "VirtualMachineInstanceMigration"
CAPI_API = "cluster.x-k8s.io/v1beta1"
LONGHORN_API = "longhorn.io/v1beta2"
RUN_STRATEGY_ANNOTATION = "harvester-upgrade.harvesterhci.io/run-strategy-before-upgrade"
# which upgrade run created a migration: a migration the head start created that failed before
# the node's own cycle saw it is one of that VM's attempts (migration retries) in the same run,
# never in a later run
RUN_ANNOTATION = "harvester-upgrade.harvesterhci.io/run"
# the node a migration started through Harvester's migrate action was sent to (that migration
# has no addedNodeSelector to read it from)
TARGET_ANNOTATION = "harvester-upgrade.harvesterhci.io/target-node"
STOPPED_BY_ANNOTATION = "harvester-upgrade.harvesterhci.io/stopped-for-node"
# set when a VM is asked to start again but nobody waits for it in the node's cycle (the last
# node: its VMs boot while ImageCleanup runs); Finalize (or an abort) awaits it and removes it
RESTORING_ANNOTATION = "harvester-upgrade.harvesterhci.io/restoring-for-node"
PENDING_OS_ANNOTATION = "management.harvesterhci.io/pendingOSImage"
TOOLKIT_IMAGE_ANNOTATION = "management.harvesterhci.io/upgrade-toolkit-image"
DEFAULT_TOOLKIT_REPO = "rancher/harvester-upgrade-toolkit"


def run_id() -> str:
    """This upgrade run: the lock holder and its ansible-playbook (RUN_ANNOTATION)."""
    return f"{lock_run.identity()}#{lock_run.playbook_pid()}"


# ---------------------------------------------------------------------------------------------
# Reading the cluster
# ---------------------------------------------------------------------------------------------

def cluster_facts(kube: Kube, plan: dict[str, Any] | None) -> list[dict[str, Any]]:
    nodes = kube.items("v1", "Node")
    machines = _try_items(kube, CAPI_API, "Machine", FLEET_NS)
    secrets = kube.items("v1", "Secret", FLEET_NS)
    secrets = [s for s in secrets if s.get("type") == "rke.cattle.io/machine-plan"
               or (s.get("metadata") or {}).get("name", "").endswith("-machine-plan")]
    vmis = _try_items(kube, VMI_API, "VirtualMachineInstance")
    setting = _try_get(kube, "harvesterhci.io/v1beta1", "Setting", "server-version")
    version = (setting or {}).get("value") if setting else None
    return no.node_facts(nodes, machines, secrets, plan=plan, vmis=vmis, server_version=version)


def _try_items(kube: Kube, api: str, kind: str, ns: str | None = None) -> list[dict[str, Any]]:
    try:
        return kube.items(api, kind, ns)
    except Exception as exc:
        if isinstance(exc, NotServed) or "ResourceNotFound" in type(exc).__name__ or \
                getattr(exc, "status", None) == 404:
            return []
        raise


def _harvester_items(kube: Kube, api: str, kind: str, why: str,
                     ns: str | None = None) -> list[dict[str, Any]]:
    """``kube.items`` of a kind every Harvester cluster serves (KubeVirt's): not served on a
    Harvester cluster fails, naming it (an empty list would let a safety step pass on no
    data); on a cluster without Harvester's CRDs it is empty."""
    try:
        return kube.items(api, kind, ns)
    except NotServed as exc:
        if not is_harvester(kube):
            return []
        raise NodeLoopError(f"cannot {why}: {kind} ({api}) is not served ({exc}) although "
                            "every Harvester cluster serves it; nothing was changed") from exc


def _try_get(kube: Kube, api: str, kind: str, name: str,
             ns: str | None = None) -> dict[str, Any] | None:
    try:
        return kube.get(api, kind, name, ns)
    except Exception as exc:
        if isinstance(exc, NotServed) or "ResourceNotFound" in type(exc).__name__:
            return None
        raise


def inventory(facts: list[dict[str, Any]]) -> dict[str, Any]:
    """The nodes as the playbook's ``add_host`` takes them, in Rancher's drain order, and
    whether the cluster has a single (non-witness) node."""
    return {"nodes": [{"name": f["name"], "groups": no.groups_for(f), "vars": no.host_vars(f)}
                      for f in facts],
            "order": [f["name"] for f in facts],
            "single_node": is_single_node(facts)}


def is_single_node(facts: list[dict[str, Any]]) -> bool:
    """Exactly one node that is not a witness."""
    return len([f for f in facts if "witness" not in f["roles"]]) == 1


def fact_for(facts: list[dict[str, Any]], node: str) -> dict[str, Any]:
    for f in facts:
        if f["name"] == node:
            return f
    raise NodeLoopError(f"node {node} is not a managed node of this cluster")


def hook_names(kube: Kube) -> tuple[str, str]:
    """The pre/post hook annotations Rancher waits for (from the cluster's upgradeStrategy)."""
    cluster = _try_get(kube, "provisioning.cattle.io/v1", "Cluster", "local", FLEET_NS) or {}
    strat = ((cluster.get("spec") or {}).get("rkeConfig") or {}).get("upgradeStrategy") or {}
    pre, post = no.DEFAULT_PRE_HOOK, no.DEFAULT_POST_HOOK
    for opt in ("controlPlaneDrainOptions", "workerDrainOptions"):
        d = strat.get(opt) or {}
        for h in d.get("preDrainHooks") or []:
            pre = h.get("annotation") or pre
        for h in d.get("postDrainHooks") or []:
            post = h.get("annotation") or post
    return pre, post


def release(plan: dict[str, Any]) -> dict[str, Any]:
    rel = (plan.get("status") or {}).get("releaseMetadata") or {}
    if not rel.get("os") or not rel.get("kubernetes"):
        raise NodeLoopError(f"UpgradePlan {plan['metadata']['name']} has no releaseMetadata "
                            "(os, kubernetes); run the earlier phases first")
    return rel


# ---------------------------------------------------------------------------------------------
# Phase entry/exit and the per-batch gate
# ---------------------------------------------------------------------------------------------

BEFORE_NODES = ("Initializing", "Initialized", "ISODownloading", "ISODownloaded",
                "RepoCreating", "RepoCreated", "MetadataPopulating", "MetadataPopulated",
                "ImagePreloading", "ImagePreloaded", "ClusterUpgrading")
AFTER_NODES = ("NodeUpgraded", "CleaningUp", "CleanedUp", "Succeeded")


def check_phase(plan: dict[str, Any]) -> str:
    phase = (plan.get("status") or {}).get("currentPhase") or ""
    if phase in BEFORE_NODES or not phase:
        raise NodeLoopError(
            f"UpgradePlan {plan['metadata']['name']} is in phase {phase or '(none)'}; the node "
            "upgrade needs ClusterUpgraded (run the earlier phases first)")
    if phase == "Failed":
        msg = next((c.get("message") for c in (plan.get("status") or {}).get("conditions") or []
                    if c.get("type") == "Progressing"), "")
        raise NodeLoopError(f"UpgradePlan {plan['metadata']['name']} has Failed: {msg}")
    return phase


def gate(kube: Kube, writer: PlanWriter, batch: list[str], node: str | None = None
         ) -> dict[str, Any]:
    """Per-batch check: is Rancher asking for (one of) the batch's node(s)?

    Returns ``{"todo": [...], "done": [...], "expected": [...], "why": str}``; raises when the
    batch holds none of the nodes Rancher is asking for (naming both).
    """
    plan = writer.refresh()
    check_phase(plan)
    facts = cluster_facts(kube, plan)
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
            sec = kube.get("v1", "Secret", f["machine_plan_secret"], FLEET_NS) or {}
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


# ---------------------------------------------------------------------------------------------
# Drain hooks
# ---------------------------------------------------------------------------------------------

def _secret_ann(sec: dict[str, Any] | None) -> dict[str, str]:
    return dict(((sec or {}).get("metadata") or {}).get("annotations") or {})


def await_hook(kube: Kube, writer: PlanWriter, node: str, hook: str, timeout: float,
               batch: list[str] | None = None) -> dict[str, Any]:
    """Wait (watch) for Rancher's ``rke.cattle.io/<hook>`` on the node's machine-plan secret.

    Returns ``{"value", "passed", "changed"}``; ``passed`` when the node is already beyond
    this hook (resume). While waiting for ``pre-drain``, another node getting an unanswered
    pre-drain fails the step naming both nodes."""
    plan = writer.refresh()
    facts = cluster_facts(kube, plan)
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
        sec = secrets.get(f"{FLEET_NS}/{sec_name}")
        ann = _secret_ann(sec)
        if ann.get(rancher_ann):
            return {"value": ann[rancher_ann]}
        if hook == "pre-drain":
            if ann.get(no.POST_DRAIN) or state_ordinal(state) >= state_ordinal(beyond):
                return {"value": ann.get(no.PRE_DRAIN) or "", "passed": True}
            for key, other in secrets.items():
                oname = ours.get(key.split("/", 1)[1])
                oann = _secret_ann(other)
                if oname and oname not in allowed and oann.get(no.PRE_DRAIN) and \
                        oann.get(pre_hook) != oann.get(no.PRE_DRAIN):
                    raise NodeLoopError(
                        f"Rancher asks to drain {oname} while the play is on {node}; refusing "
                        "to act on the wrong node")
        elif state_ordinal(state) >= state_ordinal("PostDrained") and \
                _secret_ann(sec).get(post_hook):
            return {"value": "", "passed": True}
        return None

    def describe(view: dict[str, dict[str, dict[str, Any]]]) -> str:
        ann = _secret_ann(view["Secret"].get(f"{FLEET_NS}/{sec_name}"))
        shown = {k: v[:40] for k, v in ann.items() if k.startswith("rke.cattle.io/")
                 or k in (pre_hook, post_hook)}
        return f"secret {FLEET_NS}/{sec_name} annotations {shown or '{}'}"

    if state_ordinal(state) >= state_ordinal(beyond) and hook == "post-drain":
        return {"value": "", "passed": True, "changed": False}
    if kube.check_mode:
        return {"value": "", "passed": False, "changed": False, "skipped_wait": True}
    try:
        res = kube.wait([Source("v1", "Secret", FLEET_NS)], pred, timeout=timeout,
                        what=f"Rancher's {rancher_ann} on {FLEET_NS}/{sec_name} (node {node})",
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
                job_timeout: float = 3600, safety_timeout: float | None = None
                ) -> dict[str, Any]:
    """Copy Rancher's ``rke.cattle.io/<hook>`` value into our hook annotation. A pre-drain is
    answered only after the node's pre-drain Job succeeded (:func:`run_pre_drain_job`) and,
    with ``safety_timeout``, once it is still safe to take the node down
    (:func:`wait_safe_to_go_down`: what changed since the evacuation's checks)."""
    plan = writer.refresh()
    fact = fact_for(cluster_facts(kube, plan), node)
    pre_hook, post_hook = hook_names(kube)
    ours = pre_hook if hook == "pre-drain" else post_hook
    rancher_ann = no.PRE_DRAIN if hook == "pre-drain" else no.POST_DRAIN
    sec = kube.get("v1", "Secret", fact["machine_plan_secret"], FLEET_NS)
    ann = _secret_ann(sec)
    value = ann.get(rancher_ann)
    changed = False
    if not value:
        if hook == "pre-drain":
            changed = writer.set_node_state(node, "PreDrained") or changed
        if hook == "pre-drain" and (ann.get(no.POST_DRAIN) or fact["upgraded"]):
            return {"changed": changed, "value": "", "passed": True}
        if hook == "post-drain" and fact["upgraded"]:
            return {"changed": changed, "value": "", "passed": True}
        raise NodeLoopError(f"secret {FLEET_NS}/{fact['machine_plan_secret']} carries no "
                            f"{rancher_ann}; nothing to answer for node {node}")
    if ann.get(ours) == value:
        if hook == "pre-drain":
            changed = writer.set_node_state(node, "PreDrained") or changed
        return {"changed": changed, "value": value, "passed": False}
    if hook == "pre-drain":
        job = run_pre_drain_job(kube, writer, node, timeout=job_timeout)
        if safety_timeout is not None and not kube.check_mode:
            wait_safe_to_go_down(kube, writer, node, safety_timeout)
        changed = writer.set_node_state(node, "PreDrained") or changed or bool(job["changed"])
    if not kube.check_mode:
        kube.patch("v1", "Secret", fact["machine_plan_secret"],
                   {"metadata": {"annotations": {ours: value}}}, FLEET_NS)
        writer.event("DrainHookAnswered", f"Node {node}: answered {rancher_ann} with {ours}")
    return {"changed": True, "value": value, "passed": False}


def await_release(kube: Kube, writer: PlanWriter, node: str, timeout: float) -> dict[str, Any]:
    """Wait (watch) until Rancher is done with the node: no drain annotations on its secret,
    node uncordoned, kubelet at the release's kubernetes version."""
    plan = writer.refresh()
    rel = release(plan)
    fact = fact_for(cluster_facts(kube, plan), node)
    sec_key = f"{FLEET_NS}/{fact['machine_plan_secret']}"

    def pred(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        ann = _secret_ann(view["Secret"].get(sec_key))
        n = view["Node"].get(node) or {}
        kubelet = ((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
        return (not any(a in ann for a in no.RANCHER_DRAIN_ANNOTATIONS)
                and not (n.get("spec") or {}).get("unschedulable")
                and no.kubelet_matches(kubelet, rel["kubernetes"]))

    def describe(view: dict[str, dict[str, dict[str, Any]]]) -> str:
        ann = _secret_ann(view["Secret"].get(sec_key))
        n = view["Node"].get(node) or {}
        kubelet = ((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
        left = [a for a in no.RANCHER_DRAIN_ANNOTATIONS if a in ann]
        return (f"annotations {left}, unschedulable="
                f"{bool((n.get('spec') or {}).get('unschedulable'))}, kubelet {kubelet} "
                f"(want {rel['kubernetes']})")

    if kube.check_mode:
        return {"changed": False}
    try:
        kube.wait([Source("v1", "Secret", FLEET_NS), Source("v1", "Node",
                                                            field_selector=f"metadata.name={node}")],
                  pred, timeout=timeout, describe=describe,
                  what=f"Rancher to finish node {node} (annotations removed, uncordoned, "
                       "kubelet current)")
    except WaitTimeout as exc:
        writer.fail_node(node, "PostDrainFailed", "RancherTimeout", str(exc))
        raise
    return {"changed": False}


def head_start(kube: Kube, writer: PlanWriter, node: str, play: list[str], *, wait: float,
               shutdown_timeout: float = 600, finish: float = 0) -> dict[str, Any]:
    """After ``node`` is done: when Rancher asks to drain another node of the play (``play``,
    the serial play's hosts) within ``wait`` seconds, start that node's evacuation — mark it
    ``PreDraining``, ask its non-migratable VMs to stop, create its planned migrations — and
    return without waiting. That node's own cycle then adopts what was started (its
    evacuation adopts running migrations, as on a resume), so Rancher's pre-drain is answered
    by an action within the watch latency instead of after the play's hand-over to the next
    host. Nothing is started for a paused node, a node the gate would refuse, a node
    Longhorn or a PDB makes wait, or a node outside the play; nothing here fails the plan.

    ``finish`` > 0: then wait up to that many seconds for the node's VMs to be off it (every
    migration succeeded, every stop done) and answer its pre-drain as its own cycle would
    (:func:`finish_head_start`), then start its OS upgrade Job once Rancher drained it; the
    hand-over to the next host then overlaps the OS install and reboot instead of delaying the
    answer and the Job. Anything short of that is left to the node's own cycle.

    Returns ``{"changed", "next", "why", "started", "stopping", "answered", "migrated",
    "job"}``."""
    out: dict[str, Any] = {"changed": False, "next": None, "why": "", "started": [],
                           "stopping": [], "answered": False, "migrated": [], "job": ""}
    plan = writer.refresh()
    check_phase(plan)
    facts = cluster_facts(kube, plan)
    pre_hook, _post_hook = hook_names(kube)
    if not others_left(facts, node, play):
        return {**out, "why": "no other node of the play is left to upgrade"}
    by_secret = {f["machine_plan_secret"]: f for f in facts if f["machine_plan_secret"]}

    def asked(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        for key, sec in view["Secret"].items():
            f = by_secret.get(key.split("/", 1)[1])
            ann = _secret_ann(sec)
            if f and f["name"] != node and ann.get(no.PRE_DRAIN) and \
                    ann.get(pre_hook) != ann.get(no.PRE_DRAIN):
                return {"node": f["name"], "secret": f["machine_plan_secret"]}
        return None

    try:
        found = kube.wait([Source("v1", "Secret", FLEET_NS)], asked, timeout=wait,
                          what="Rancher's pre-drain on the next node")
    except WaitTimeout:
        return {**out, "why": f"Rancher asked to drain no other node within {wait:g}s"}
    nxt = found["node"]
    out["next"] = nxt
    if nxt not in play:
        return {**out, "why": f"Rancher drains {nxt}, which is not a host of this play"}
    if nxt in paused_nodes(writer.plan):
        return {**out, "why": f"{nxt} is paused (pauseNodes)"}
    try:
        g = gate(kube, writer, [nxt], nxt)
    except NodeLoopError as exc:
        return {**out, "why": str(exc)}
    if nxt not in g["todo"] or g.get("restore_only"):
        return {**out, "why": f"{nxt} has nothing to evacuate ({g['why']})"}
    out["changed"] = writer.set_node_state(nxt, "PreDraining")
    res = evacuate(kube, writer, nxt, shutdown_timeout=shutdown_timeout, start_only=True)
    out["changed"] |= bool(res.get("changed"))
    out["started"] = res.get("started") or []
    out["stopping"] = res.get("shutdown") or []
    out["why"] = res.get("deferred") or res.get("skipped") or res.get("partial") or ""
    if finish > 0 and not out["why"]:
        fin = finish_head_start(kube, writer, nxt, found["secret"], finish,
                                stopped=bool(out["stopping"]))
        out["changed"] |= fin["changed"]
        out.update(answered=fin["answered"], migrated=fin["migrated"], why=fin["why"],
                   job=fin["job"])
    return out


def head_start_text(r: dict[str, Any]) -> str:
    """One line saying what :func:`head_start` (or :func:`first_head_start`) did."""
    done = ""
    if r.get("answered"):
        done = "its pre-drain answered" + (", its OS upgrade started" if r.get("job") else "")
    if r.get("started") or r.get("stopping"):
        return (f"{len(r['started'])} migration(s) started off {r['next']}, "
                f"{len(r['stopping'])} VM(s) asked to stop"
                + (f"; {len(r['migrated'])} migrated, {done}" if done else "")
                + (f" ({r['why']})" if r.get("why") else ""))
    if done:
        return f"nothing to move off {r['next']}; {done}"
    return f"nothing started{' for ' + r['next'] if r.get('next') else ''}: {r['why']}"


def finish_head_start(kube: Kube, writer: PlanWriter, node: str, secret: str, timeout: float,
                      *, stopped: bool = False) -> dict[str, Any]:
    """The end of ``node``'s evacuation after :func:`head_start` started it (``secret``: its
    machine-plan Secret): wait (watch) up to ``timeout`` seconds for no running VMI to be left
    on the node, then — Longhorn and the PDBs allowing it now, the plan still in
    NodeUpgrading — taint the node and answer Rancher's pre-drain (node ``PreDrained``),
    exactly what the node's own :func:`evacuate` and :func:`answer_hook` do next; then, time
    left, start its OS upgrade once Rancher drained it (:func:`_start_os_upgrade`). Gives up,
    changing nothing, when time runs out, when one of this run's migrations off the node
    failed (the node's own cycle retries it, counting the attempt) or when a check would make
    the evacuation wait; never fails the plan.

    Returns ``{"changed", "answered", "migrated", "why", "job"}``."""
    out: dict[str, Any] = {"changed": False, "answered": False, "migrated": [], "why": "",
                           "job": ""}
    deadline = time.monotonic() + timeout
    run = run_id()
    labels = {**writer.labels("node-upgrade"), NODE_LABEL: node}
    sel = ",".join(f"{k}={v}" for k, v in labels.items())

    def off(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        for m in view[VMIM_KIND].values():
            md = m.get("metadata") or {}
            if (md.get("annotations") or {}).get(RUN_ANNOTATION) == run and \
                    (m.get("status") or {}).get("phase") == "Failed":
                return {"failed": md.get("name")}
        if any(_active_vmi(v) and (v.get("status") or {}).get("nodeName") == node
               for v in view["VirtualMachineInstance"].values()):
            return None
        return {"failed": None}

    try:
        res = kube.wait([Source(VMI_API, "VirtualMachineInstance"),
                         Source(VMI_API, VMIM_KIND, label_selector=sel)], off,
                        timeout=timeout, what=f"the VMs off node {node} (head start)")
        if res["failed"]:
            return {**out, "why": f"migration {res['failed']} failed; {node}'s own cycle "
                                  "retries it"}
        wait_volumes_safe(kube, node, 0)
        wait_pdbs(kube, node, 0)
        wait_nodes_ready(kube, node, 0)
    except WaitTimeout as exc:
        return {**out, "why": f"left to {node}'s own cycle: {exc}"[:300]}
    check_phase(writer.refresh())
    if node in paused_nodes(writer.plan):   # paused meanwhile: its own cycle holds it
        return {**out, "why": f"{node} was paused (pauseNodes) meanwhile"}
    out["changed"] = taint_node(kube, node)
    if not stopped:   # as evacuate() says when nothing had to stop
        _no_shutdown_event(writer, node)
    job = run_pre_drain_job(kube, writer, node, timeout=max(0.0, deadline - time.monotonic()),
                            fail=False)
    out["changed"] |= bool(job["changed"])
    if not job["complete"]:
        return {**out, "why": f"pre-drain Job of {node} not done in time; its own cycle "
                              f"waits for it ({job.get('why') or 'running'})"[:300]}
    try:    # what may have changed while the Job ran (a node NotReady, a replica lost)
        wait_nodes_ready(kube, node, 0)
        wait_volumes_safe(kube, node, 0)
    except WaitTimeout as exc:
        return {**out, "why": f"left to {node}'s own cycle: {exc}"[:300]}
    ans = answer_hook(kube, writer, node, "pre-drain")
    out["changed"] |= bool(ans.get("changed"))
    out["answered"] = not ans.get("passed")
    counted: dict[str, Any] = {"migrated": []}
    _count_ours(kube, writer, node, counted)
    out["migrated"] = counted["migrated"]
    if out["answered"]:
        out["job"] = _start_os_upgrade(kube, writer, node, secret, deadline - time.monotonic())
    return out


def _start_os_upgrade(kube: Kube, writer: PlanWriter, node: str, secret: str,
                      timeout: float) -> str:
    """After :func:`finish_head_start` answered ``node``'s pre-drain: wait (up to
    ``timeout``) for Rancher to drain it and ask for the post-drain, then mark it
    ``PostDraining`` and create its OS upgrade Job, as its own cycle's next two steps would;
    the node's cycle then awaits that Job and the reboot. Returns the Job's name, or ``""``
    when Rancher did not get there in time (nothing changed)."""
    def asked(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        ann = _secret_ann(view["Secret"].get(f"{FLEET_NS}/{secret}"))
        return {"value": ann[no.POST_DRAIN]} if ann.get(no.POST_DRAIN) else None

    try:
        kube.wait([Source("v1", "Secret", FLEET_NS)], asked, timeout=max(0.0, timeout),
                  what=f"Rancher's post-drain on node {node} (head start)")
    except WaitTimeout:
        return ""
    check_phase(writer.refresh())
    if node in paused_nodes(writer.plan):
        return ""
    writer.set_node_state(node, "PostDraining")
    res = run_node_job(kube, writer, node, "post-drain", start_only=True)
    return str(res["job"]) if res.get("started") else ""


def first_head_start(kube: Kube, writer: PlanWriter, play: list[str], wait: float,
                     finish: float = 0) -> dict[str, Any]:
    """:func:`head_start` for the first node of the loop, right after the phase is entered
    (no node is done yet). Never raises: whatever is not done here, the node's own cycle
    does."""
    try:
        return head_start(kube, writer, "", play, wait=wait, finish=finish)
    except Exception as exc:  # noqa: BLE001 - the node's cycle evacuates it anyway
        return {"changed": False, "next": None, "started": [], "stopping": [],
                "answered": False, "migrated": [], "job": "",
                "why": f"nothing more done ({exc})"[:300]}


# ---------------------------------------------------------------------------------------------
# Evacuation
# ---------------------------------------------------------------------------------------------

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


def _active_vmi(v: dict[str, Any]) -> bool:
    st = v.get("status") or {}
    return st.get("phase") not in ("Succeeded", "Failed") and not (
        v.get("metadata") or {}).get("deletionTimestamp")


def evacuation_views(kube: Kube, plan: dict[str, Any] | None, facts: list[dict[str, Any]],
                     only_node: str | None = None
                     ) -> tuple[list[ev.NodeView], list[ev.VmView]]:
    """Every node's view (capacity left, from the pods bound to it) and the VMs' views — of
    the VMs on ``only_node`` when given (an evacuation plans that node's VMs only)."""
    nodes = kube.items("v1", "Node")
    pods = kube.items("v1", "Pod")
    vmis = [v for v in _harvester_items(kube, VMI_API, "VirtualMachineInstance",
                                        "plan which VMs leave the node")
            if _active_vmi(v)
            and (only_node is None or (v.get("status") or {}).get("nodeName") == only_node)]
    by_name = {f["name"]: f for f in facts}
    pods_on: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:   # once, not once per node (3,200 pods x 100 nodes at hundred-node)
        pods_on.setdefault(str((pod.get("spec") or {}).get("nodeName") or ""), []).append(pod)
    views = []
    for n in nodes:
        name = n["metadata"]["name"]
        f = by_name.get(name) or {}
        views.append(ev.node_view(n, pods_on.get(name, []), upgraded=bool(f.get("upgraded")),
                                  order=int(f.get("order", 0))))
    launchers = _launchers(pods if only_node is None else pods_on.get(only_node, []))
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
        if single:
            p = ev.EvacuationPlan(node=name, shutdown=[
                ev.Shutdown(v, "SingleNode: single-node upgrade stops every VM")
                for v in vms if v.node == name])
        else:
            p = ev.plan_evacuation(name, vms, nodes, target_aware=target_aware)
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
    for v in _try_items(kube, VMI_API, "VirtualMachineInstance"):
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


def _restore_cm_name(writer: PlanWriter) -> str:
    return f"{writer.name}-restore-vm"


def record_shutdowns(kube: Kube, writer: PlanWriter, node: str, keys: list[str]) -> bool:
    """Add ``keys`` (ns/name) to ConfigMap ``<plan>-restore-vm`` under the node's key."""
    name = _restore_cm_name(writer)
    cm = kube.get("v1", "ConfigMap", name, UPGRADE_NS)
    if cm is None:
        if kube.check_mode:
            return True
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": UPGRADE_NS,
                             "labels": writer.labels("node-upgrade"),
                             "ownerReferences": [writer.owner_reference()]},
                "data": {node: ",".join(sorted(set(keys)))}}
        kube.create_in("v1", "ConfigMap", body, UPGRADE_NS)
        writer.event("RestoreVMConfigMapCreated",
                     f"ConfigMap {UPGRADE_NS}/{name} created",
                     component="vm-live-migrate-detector", namespace=UPGRADE_NS)
        return True
    have = [k for k in ((cm.get("data") or {}).get(node) or "").split(",") if k]
    merged = sorted(set(have) | set(keys))
    if merged == sorted(set(have)):
        return False
    if not kube.check_mode:
        kube.patch("v1", "ConfigMap", name, {"data": {node: ",".join(merged)}}, UPGRADE_NS)
    return True


def restore_entries(kube: Kube, writer: PlanWriter, node: str) -> list[str]:
    cm = kube.get("v1", "ConfigMap", _restore_cm_name(writer), UPGRADE_NS) or {}
    return [k for k in ((cm.get("data") or {}).get(node) or "").split(",") if k]


def restore_pending(kube: Kube, writer: PlanWriter, node: str) -> bool:
    """Some VM this collection stopped for ``node`` is still stopped and the plan wants it
    back (``restoreVM``): the node is not finished even when it is upgraded (a run stopped
    between Rancher's release of the node and the restore)."""
    if not bool((writer.plan.get("spec") or {}).get("restoreVM")):
        return False
    for key in restore_entries(kube, writer, node):
        ns, _sep, name = key.partition("/")
        vm = kube.get(VM_API, "VirtualMachine", name, ns)
        if vm is not None and STOPPED_BY_ANNOTATION in (
                (vm.get("metadata") or {}).get("annotations") or {}):
            return True
    return False


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
            kube.wait([Source(VMI_API, "VirtualMachineInstance")],
                      lambda v: not any(k in keys and _active_vmi(o) and
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
                 component="vm-live-migrate-detector", namespace=UPGRADE_NS)
    return {"stopped": ok, "failed": failed}


def _volume_at_risk(vol: dict[str, Any], node: str, replicas: list[dict[str, Any]]) -> str | None:
    """Why draining ``node`` would put the attached volume ``vol`` at risk, else ``None``.

    Counted from Longhorn's Replica objects, not from ``status.robustness``: a volume is
    ``healthy`` as long as it has its full count of healthy replicas, wherever they are, so
    a volume whose every healthy replica sits on ``node`` (replica count 1, or replicas
    rebuilt onto one node) is ``healthy`` and still loses its data path when the node goes
    down. Safe only with at least one healthy replica (running, never failed) elsewhere."""
    st = vol.get("status") or {}
    if st.get("state") not in ("attached", "attaching"):
        return None
    robust = st.get("robustness") or "unknown"
    name = (vol.get("metadata") or {}).get("name")
    mine = [r for r in replicas if (r.get("spec") or {}).get("volumeName") == name]
    healthy = [r for r in mine if (r.get("status") or {}).get("currentState") == "running"
               and not (r.get("spec") or {}).get("failedAt")]
    elsewhere = [r for r in healthy if (r.get("spec") or {}).get("nodeID") != node]
    if elsewhere:
        return None     # a healthy replica survives elsewhere
    if healthy:
        return (f"volume {name} ({robust}) has its only healthy replica(s) on node {node}: "
                f"{', '.join(sorted(str((r.get('metadata') or {}).get('name')) for r in healthy))}")
    return f"volume {name} ({robust}) has no healthy replica off node {node}"


def is_harvester(kube: Kube) -> bool:
    """Whether the cluster is a Harvester cluster, whose every release ships Longhorn (its
    storage) and KubeVirt: Harvester's Setting kind is served. Only a cluster that is not
    Harvester at all (no harvesterhci.io CRDs) may lack them; an error reading discovery
    counts as Harvester (the caller then fails rather than skip a check)."""
    try:
        kube.resource("harvesterhci.io/v1beta1", "Setting")
        return True
    except NotServed:
        return False
    except ApiError:
        return True


def _longhorn_unreadable(exc: Exception, kinds: str, why: str) -> NodeLoopError:
    if isinstance(exc, NotServed):
        return NodeLoopError(
            f"cannot {why}: {kinds} (longhorn.io/v1beta2) not served ({exc}); every Harvester "
            "release ships Longhorn, so its CRDs missing means the storage layer is broken, "
            "not absent; nothing was changed")
    return NodeLoopError(f"cannot {why}: reading {kinds} (longhorn.io/v1beta2, namespace "
                         f"longhorn-system) failed: {exc}; nothing was changed")


def wait_nodes_ready(kube: Kube, node: str, timeout: float) -> dict[str, Any]:
    """Wait (watch) until every node but ``node`` is Ready. A node whose kubelet stopped
    posting status may be down for good: taking another one down as well could cost the
    workloads' capacity and, with control-plane nodes, etcd's quorum."""
    def not_ready(view: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
        return sorted((n.get("metadata") or {}).get("name") or "" for n in view["Node"].values()
                      if (n.get("metadata") or {}).get("name") != node and
                      not no.node_ready(n))

    nodes = kube.items("v1", "Node")
    if not not_ready({"Node": {str(i): n for i, n in enumerate(nodes)}}):
        return {"waited": False}
    kube.wait([Source("v1", "Node")], lambda v: not not_ready(v), timeout=timeout,
              what=f"every other node to be Ready before node {node} goes down",
              describe=lambda v: "not Ready: " + ", ".join(not_ready(v)))
    return {"waited": True}


def wait_safe_to_go_down(kube: Kube, writer: PlanWriter, node: str, timeout: float
                         ) -> dict[str, Any]:
    """Right before Rancher is let drain ``node``: every other node Ready and no attached
    volume left with its last healthy replica there (a replica lost, or a node gone
    NotReady, after the evacuation's checks). Past ``timeout`` the node fails
    ``PreDrainFailed``, naming what is not safe."""
    try:
        nodes = wait_nodes_ready(kube, node, timeout)
        vols = wait_volumes_safe(kube, node, timeout)
    except WaitTimeout as exc:
        writer.fail_node(node, "PreDrainFailed", "EvacuationBlocked", str(exc))
        raise
    return {"waited_for_nodes": nodes["waited"], "waited_for_volumes": vols["waited"]}


def wait_volumes_safe(kube: Kube, node: str, timeout: float) -> dict[str, Any]:
    """Longhorn safety: wait (watch) until no attached volume would lose its last healthy
    replica when ``node`` goes down (rebuilds finished). Fails closed: Volumes or Replicas
    that cannot be read (403, 5xx, CRD missing on a Harvester cluster) raise
    :class:`NodeLoopError` naming them; only a cluster without Harvester's CRDs, where
    Longhorn is not expected either, skips the check."""
    why = f"check Longhorn volumes before node {node} goes down"
    try:
        vols = kube.items(LONGHORN_API, "Volume", "longhorn-system")
        replicas = kube.items(LONGHORN_API, "Replica", "longhorn-system")
    except NotServed as exc:
        if not is_harvester(kube):
            return {"waited": False, "longhorn": False}
        raise _longhorn_unreadable(exc, "Volumes and Replicas", why) from exc
    except ApiError as exc:
        raise _longhorn_unreadable(exc, "Volumes and Replicas", why) from exc

    def risky(view: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
        reps = list((view.get("Replica") or {}).values())
        return [r for v in view["Volume"].values() if (r := _volume_at_risk(v, node, reps))]

    at_risk = [r for v in vols if (r := _volume_at_risk(v, node, replicas))]
    if not at_risk:
        return {"waited": False}
    if kube.check_mode:
        return {"waited": False, "at_risk": at_risk}
    kube.wait([Source(LONGHORN_API, "Volume", "longhorn-system"),
               Source(LONGHORN_API, "Replica", "longhorn-system")],
              lambda v: not risky(v), timeout=timeout,
              what=f"Longhorn volumes to be healthy before node {node} goes down",
              describe=lambda v: "; ".join(risky(v)))
    return {"waited": True}


def _pdb_blocking(pdbs: list[dict[str, Any]], pods: list[dict[str, Any]], node: str
                  ) -> list[str]:
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.evacuation import (
        _expr_matches,
    )
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if (pod.get("spec") or {}).get("nodeName") != node or not ev.pod_is_active(pod):
            continue
        if labels.get("kubevirt.io") == "virt-launcher":
            continue
        owners = meta.get("ownerReferences") or []
        if any(o.get("kind") == "DaemonSet" for o in owners):
            continue
        for pdb in pdbs:
            pm = pdb.get("metadata") or {}
            if pm.get("namespace") != meta.get("namespace"):
                continue
            sel = (pdb.get("spec") or {}).get("selector") or {}
            if not sel:
                continue
            ml = sel.get("matchLabels") or {}
            if any(labels.get(k) != v for k, v in ml.items()):
                continue
            if not all(_expr_matches(e, labels) for e in sel.get("matchExpressions") or []):
                continue
            if int((pdb.get("status") or {}).get("disruptionsAllowed") or 0) < 1:
                out.append(f"PodDisruptionBudget {pm.get('namespace')}/{pm.get('name')} "
                           f"allows no disruption of pod {meta.get('name')}")
    return out


def wait_pdbs(kube: Kube, node: str, timeout: float) -> dict[str, Any]:
    """Wait (watch) until no PDB protecting a pod on the node forbids its eviction."""
    pods = [p for p in kube.items("v1", "Pod") if (p.get("spec") or {}).get("nodeName") == node]
    pdbs = kube.items("policy/v1", "PodDisruptionBudget")
    if not _pdb_blocking(pdbs, pods, node) or kube.check_mode:
        return {"waited": False}
    kube.wait([Source("policy/v1", "PodDisruptionBudget"),
               Source("v1", "Pod", field_selector=f"spec.nodeName={node}")],
              lambda v: not _pdb_blocking(list(v["PodDisruptionBudget"].values()),
                                          list(v["Pod"].values()), node),
              timeout=timeout, what=f"PodDisruptionBudgets to allow draining {node}",
              describe=lambda v: "; ".join(_pdb_blocking(list(v["PodDisruptionBudget"].values()),
                                                         list(v["Pod"].values()), node)))
    return {"waited": True}


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


def _migration_failure(m: dict[str, Any], vmi: dict[str, Any] | None) -> str:
    st = m.get("status") or {}
    ms = ((vmi or {}).get("status") or {}).get("migrationState") or {}
    for c in st.get("conditions") or []:
        if c.get("message"):
            return f"{c.get('reason') or c.get('type')}: {c['message']}"
    return str(ms.get("failureReason") or st.get("phase") or "migration failed")


def evacuate(kube: Kube, writer: PlanWriter, node: str, *, target_aware: bool = True,
             concurrency: int = 2, retries: int = 2, migration_timeout: float = 900,
             timeout: float = 3600, volume_timeout: float = 1800, pdb_timeout: float = 1800,
             shutdown_all: bool = False, shutdown_timeout: float = 600,
             start_only: bool = False) -> dict[str, Any]:
    """Empty ``node`` of running VMs: shut down (and record) the non-migratable ones, taint the
    node, live-migrate the rest to upgraded nodes where possible. Idempotent.

    ``start_only`` (the previous node's head start, node_cycle): ask the non-migratable VMs
    to stop and create every planned migration (KubeVirt runs them as its per-node and
    per-cluster limits allow, the rest wait Pending), then return without waiting,
    tainting or failing anything; the node's own evacuation adopts what was started. When
    Longhorn or a PDB would make the evacuation wait, nothing is started (``deferred``)."""
    plan = writer.refresh()
    facts = cluster_facts(kube, plan)
    fact = fact_for(facts, node)
    state = writer.node_state(node)
    # resume: never evacuate again a node that is past this step (its VMs may be restored)
    past = "WaitingReboot" if shutdown_all else "PreDrained"
    if fact["upgraded"] or state_ordinal(state) >= state_ordinal(past):
        out: dict[str, Any] = {"changed": False, "plan": ev.EvacuationPlan(node=node).as_dict(),
                               "migrated": [], "shutdown": [], "attempts": {},
                               "skipped": state or "upgraded"}
        if not fact["upgraded"] and not shutdown_all:
            # evacuated already (the previous node's head start, a killed run): say by whom
            _count_ours(kube, writer, node, out)
            out["shutdown"] = restore_entries(kube, writer, node)
        return out
    if shutdown_all:
        writer.set_node_state(node, "SingleNodeUpgrading")
    nodes, vms = evacuation_views(kube, plan, facts, only_node=node)
    if shutdown_all:
        p = ev.EvacuationPlan(node=node, shutdown=[
            ev.Shutdown(v, "SingleNode: single-node upgrade stops every VM")
            for v in vms if v.node == node])
    else:
        p = ev.plan_evacuation(node, vms, nodes, target_aware=target_aware)
    result: dict[str, Any] = {"changed": False, "plan": p.as_dict(), "migrated": [],
                              "shutdown": [s.vm.key for s in p.shutdown], "attempts": {}}
    mechanism = None
    if target_aware and not shutdown_all and p.migrate:
        mechanism = mt.detect(kube)
        result["mechanism"] = mechanism["mechanism"]
        result["mechanism_why"] = mechanism["why"]
    if kube.check_mode:
        return result
    if not shutdown_all:
        try:
            # the head start only starts migrations (no taint): no other node need be Ready
            ready = {"waited": False} if start_only else \
                wait_nodes_ready(kube, node, volume_timeout)
            vol = wait_volumes_safe(kube, node, 0 if start_only else volume_timeout)
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
                                 shutdown_timeout=shutdown_timeout, mechanism=mechanism)
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
        _no_shutdown_event(writer, node)
    if shutdown_all:
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
        _migrate_all(kube, writer, node, p, nodes, result, target_aware=target_aware,
                     concurrency=concurrency, retries=retries,
                     migration_timeout=migration_timeout, timeout=timeout,
                     mechanism=(mechanism or {}).get("mechanism", mt.ADDED_NODE_SELECTOR))
    result["changed"] |= taint_node(kube, node)
    _count_ours(kube, writer, node, result)
    # the VMs shut down for this node earlier (a head start asked them to stop) count too
    result["shutdown"] = sorted(set(result["shutdown"]) | set(restore_entries(kube, writer,
                                                                              node)))
    # 4. never hand the node over with a running VM
    left = [f"{v['metadata'].get('namespace')}/{v['metadata']['name']}"
            for v in _try_items(kube, VMI_API, "VirtualMachineInstance")
            if _active_vmi(v) and (v.get("status") or {}).get("nodeName") == node]
    if left:
        msg = f"VMs still running on {node} after evacuation: {', '.join(sorted(left))}"
        writer.fail_node(node, "PreDrainFailed", "EvacuationIncomplete", msg)
        raise NodeLoopError(msg)
    return result


def _no_shutdown_event(writer: PlanWriter, node: str) -> None:
    writer.event("VMShutdownCompleted",
                 f"Shutdown completed for 0 VM(s) on node {node}, success: 0, failed: 0",
                 component="vm-live-migrate-detector", namespace=UPGRADE_NS)


def _shut_down(kube: Kube, writer: PlanWriter, node: str, shutdowns: list[ev.Shutdown],
               timeout: float, result: dict[str, Any], wait: bool = True) -> dict[str, Any]:
    """Record the VMs to restart (not the repo VM), then stop them (:func:`stop_vms`)."""
    keys = [s.vm.key for s in shutdowns if not s.vm.repo_vm]
    result["changed"] |= record_shutdowns(kube, writer, node, keys)
    return stop_vms(kube, writer, node, shutdowns, timeout, wait=wait)


def _start_evacuation(kube: Kube, writer: PlanWriter, node: str, p: ev.EvacuationPlan,
                      nodes: list[ev.NodeView], result: dict[str, Any], *,
                      shutdown_timeout: float,
                      mechanism: dict[str, Any] | None = None) -> dict[str, Any]:
    """``evacuate(start_only=True)``: the stops asked and its planned migrations created."""
    if p.shutdown:
        res = _shut_down(kube, writer, node, p.shutdown, shutdown_timeout, result, wait=False)
        result["changed"] |= bool(res["stopped"])
        if res["failed"]:
            return {**result, "deferred": "; ".join(res["failed"])}
    if p.migrate:   # all of them: KubeVirt queues them by its own limits (per node, cluster)
        how = (mechanism or {}).get("mechanism", mt.ADDED_NODE_SELECTOR)
        # Harvester's action pins a migration that waits in KubeVirt's queue only loosely
        # (v1.6.x drops the VM's pin as soon as the migration is seen): start only what
        # KubeVirt runs at once from one node (parallelOutboundMigrationsPerNode, 2)
        limit = len(p.migrate) if how == mt.ADDED_NODE_SELECTOR else 2
        _migrate_all(kube, writer, node, p, nodes, result, target_aware=True,
                     concurrency=limit, retries=0, migration_timeout=0, timeout=0,
                     start_only=True, mechanism=how)
        if len(p.migrate) > limit:   # the node's own cycle moves the rest: nothing to await
            result["partial"] = (f"{len(p.migrate) - limit} more left to {node}'s own cycle "
                                 "(Harvester's migrate action pins only what runs at once)")
        result["changed"] |= bool(result["started"])
    return result


def _migrate_all(kube: Kube, writer: PlanWriter, node: str, p: ev.EvacuationPlan,
                 nodes: list[ev.NodeView], result: dict[str, Any], *, target_aware: bool,
                 concurrency: int, retries: int, migration_timeout: float,
                 timeout: float, start_only: bool = False,
                 mechanism: str = mt.ADDED_NODE_SELECTOR) -> None:
    queue_ = list(p.migrate)
    by_key = {m.vm.key: m for m in p.migrate}
    active: dict[str, dict[str, Any]] = {}     # vm key -> {"name", "started", "target"}
    attempts: dict[str, int] = {}
    failures: dict[str, list[str]] = {}
    done: set[str] = set()
    excluded: dict[str, set[str]] = {}
    labels = {**writer.labels("node-upgrade"), NODE_LABEL: node}
    host_label = {n.name: n.labels.get("kubernetes.io/hostname", n.name) for n in nodes}
    final_failed: dict[str, str] = {}
    run = run_id()
    known: set[str] = set()    # migrations this call created, adopted or counted

    def start(move: ev.Move) -> None:
        key = move.vm.key
        attempts[key] = attempts.get(key, 0) + 1
        if target_aware and move.target and mechanism == mt.HARVESTER_ACTION:
            start_by_action(move)
            return
        spec: dict[str, Any] = {"vmiName": move.vm.name}
        if target_aware and move.target:
            spec["addedNodeSelector"] = {"kubernetes.io/hostname": host_label.get(
                move.target, move.target)}
        # unique per VM, source node and attempt: a VM moved again off a later node gets a new
        # name (KubeVirt keeps finished migrations; the same name would be a 409)
        digest = hashlib.sha1(f"{key}/{node}/{attempts[key]}".encode()).hexdigest()[:5]
        body = {"apiVersion": VMI_API, "kind": VMIM_KIND,
                "metadata": {"name": _safe_name(f"{move.vm.name}-upgrade-{digest}"),
                             "namespace": move.vm.namespace,
                             # KubeVirt's webhook sets it too; ours for the watch's selector
                             "labels": {**labels, VMI_NAME_LABEL: move.vm.name},
                             "annotations": {RUN_ANNOTATION: run}},
                "spec": spec}
        obj = kube.create_in(VMI_API, VMIM_KIND, body, move.vm.namespace)
        known.add(obj["metadata"]["name"])
        active[key] = {"name": obj["metadata"]["name"], "started": time.monotonic(),
                       "target": move.target}
        writer.event("VMMigrationStarted",
                     f"Migrating VM {key} off node {node} to "
                     f"{move.target or 'a node the scheduler chooses'} ({move.why}), "
                     f"attempt {attempts[key]}")

    def start_by_action(move: ev.Move) -> None:
        """Harvester creates the migration (``generateName: <vm>-``); it is then labelled and
        annotated as ours, so the watch, a resume and the head start's accounting see it."""
        key, ns = move.vm.key, move.vm.namespace
        before = {m["metadata"]["name"] for m in kube.items(
            VMI_API, VMIM_KIND, ns, f"{VMI_NAME_LABEL}={move.vm.name}")}
        mt.harvester_migrate(kube, ns, move.vm.name, str(move.target))
        created = [m for m in kube.items(VMI_API, VMIM_KIND, ns,
                                         f"{VMI_NAME_LABEL}={move.vm.name}")
                   if m["metadata"]["name"] not in before and
                   (m.get("spec") or {}).get("vmiName") == move.vm.name]
        if not created:
            raise mt.ActionRefused(204, "no migration of the VM found after the action")
        mig = max(created, key=lambda m: str(m["metadata"].get("creationTimestamp") or ""))
        name = mig["metadata"]["name"]
        kube.patch(VMI_API, VMIM_KIND, name, {"metadata": {
            "labels": {**labels, VMI_NAME_LABEL: move.vm.name},
            "annotations": {RUN_ANNOTATION: run, TARGET_ANNOTATION: str(move.target)}}}, ns)
        known.add(name)
        active[key] = {"name": name, "started": time.monotonic(), "target": move.target}
        writer.event("VMMigrationStarted",
                     f"Migrating VM {key} off node {node} to {move.target} ({move.why}) "
                     f"through Harvester's migrate action, attempt {attempts[key]}")

    def earlier_failures(move: ev.Move, vmi: dict[str, Any],
                         migs: dict[str, dict[str, Any]]) -> bool:
        """Count the failed migrations of this VM off this node that this run started before
        (the head start) as attempts; True when no attempt is left."""
        key = move.vm.key
        for m in migs.values():
            md = m.get("metadata") or {}
            if md.get("name") in known or md.get("namespace") != move.vm.namespace or \
                    (m.get("spec") or {}).get("vmiName") != move.vm.name or \
                    (md.get("labels") or {}).get(NODE_LABEL) != node or \
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
            vmi = vmi_state(view, key)
            ns = key.split("/", 1)[0]
            mig = migs.get(f"{ns}/{info['name']}")
            moved = vmi is None or not _active_vmi(vmi) or \
                (vmi.get("status") or {}).get("nodeName") not in (node, None, "")
            phase = ((mig or {}).get("status") or {}).get("phase")
            if moved and phase != "Failed":
                done.add(key)
                active.pop(key)
                tgt = ((vmi or {}).get("status") or {}).get("nodeName")
                result["migrated"].append({"vm": key, "to": tgt, "attempts": attempts[key]})
                continue
            if phase == "Succeeded":
                # the migration and its VMI come on two streams: the VMI's move (KubeVirt
                # writes it before the migration's phase) may still be on its way. Done is
                # when the VMI is seen off the node, never on the migration's word alone.
                continue
            hung = now - info["started"] > migration_timeout
            if phase == "Failed" or hung or (mig is None and vmi is not None
                                             and now - info["started"] > 5):
                reason = (f"no progress within {int(migration_timeout)}s (phase "
                          f"{phase or 'unknown'})" if hung and phase != "Failed"
                          else _migration_failure(mig or {}, vmi))
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
            if vmi is None or not _active_vmi(vmi) or \
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
            try:
                start(move)
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

    def still_on_node(v: dict[str, Any] | None) -> bool:
        return v is not None and _active_vmi(v) and (v.get("status") or {}).get("nodeName") == node

    def pred(view: dict[str, dict[str, dict[str, Any]]]) -> Any:
        if final_failed:
            raise _MigrationFailed(dict(final_failed))
        if active:
            return False
        # queued VMs that left the node meanwhile (moved by KubeVirt) are done
        return not [m for m in queue_ if still_on_node(vmi_state(view, m.vm.key))]

    def describe(view: dict[str, dict[str, dict[str, Any]]]) -> str:
        parts = []
        for key, info in active.items():
            ns = key.split("/", 1)[0]
            mig = view[VMIM_KIND].get(f"{ns}/{info['name']}") or {}
            parts.append(f"{key}: migration {info['name']} "
                         f"{(mig.get('status') or {}).get('phase') or 'Pending'}")
        if queue_:
            parts.append(f"queued: {', '.join(m.vm.key for m in queue_)}")
        return "; ".join(parts)

    # the migrations of these VMs only (KubeVirt labels each with its VMI's name; finished
    # ones pile up cluster-wide: 3,000 by the last node of a 100-node cluster)
    vmims = Source(VMI_API, VMIM_KIND, label_selector=_vmim_selector(p.migrate))
    if start_only:   # one decision on the current view: start what may start, leave
        on_change({"VirtualMachineInstance": {obj_key(o): o for o in _try_items(
            kube, VMI_API, "VirtualMachineInstance")},
            VMIM_KIND: {obj_key(o): o for o in kube.list_with_rv(
                VMI_API, VMIM_KIND, label_selector=vmims.label_selector)[0]}})
        result["started"] = sorted(active)
        return
    try:
        kube.wait([Source(VMI_API, "VirtualMachineInstance"), vmims],
                  pred, on_change=on_change, timeout=timeout, describe=describe,
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


def _vmim_selector(moves: list[ev.Move]) -> str | None:
    """``kubevirt.io/vmi-name in (...)`` for the VMs to move (``None``: too many for a URL)."""
    names = sorted({m.vm.name for m in moves})
    if not names or sum(len(n) + 1 for n in names) > 4000:
        return None
    return f"{VMI_NAME_LABEL} in ({','.join(names)})"


def _count_ours(kube: Kube, writer: PlanWriter, node: str, result: dict[str, Any]) -> None:
    """VMs our own earlier migrations moved off ``node`` (the previous node's head start, a
    killed run) count as migrated, once each."""
    labels = {**writer.labels("node-upgrade"), NODE_LABEL: node}
    sel = ",".join(f"{k}={v}" for k, v in labels.items())
    try:
        migs = kube.items(VMI_API, VMIM_KIND, None, sel)
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


def _safe_name(name: str, limit: int = 63) -> str:
    """A DNS label: ``name`` or, when too long, a prefix plus a short hash."""
    name = name.lower()
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:limit - 9].rstrip('-.')}-{digest}"


# ---------------------------------------------------------------------------------------------
# Node jobs and reboot
# ---------------------------------------------------------------------------------------------

def toolkit_image(plan: dict[str, Any]) -> str:
    ann = (plan.get("metadata") or {}).get("annotations") or {}
    repo = ann.get(TOOLKIT_IMAGE_ANNOTATION) or DEFAULT_TOOLKIT_REPO
    tag = (plan.get("spec") or {}).get("upgrade") or release(plan).get("harvester") or "latest"
    return f"{repo}:{tag}"


def job_name(plan_name: str, job_type: str, node: str) -> str:
    return _safe_name(f"{plan_name}-node-upgrade-{job_type}-{node}")


def job_body(writer: PlanWriter, job_type: str, node: str,
             skip_volumes: list[str] | None = None) -> dict[str, Any]:
    """The node Job (reference §C.5). ``skip_volumes`` (pre-drain): Longhorn volumes the
    script's ``wait_longhorn_engines`` is to pass over — its documented bypass, a file
    ``/tmp/skip-<volume>`` in the container, left by an init container in an emptyDir
    mounted at ``/tmp``."""
    labels = {**writer.labels("node-upgrade"), JOB_TYPE_LABEL: job_type, NODE_LABEL: node}
    # what upgrade_node.sh reads (lib.sh: the plan name builds the repo URL; the node name
    # for kubectl; the pod name for the reboot service after an OS install)
    env: list[dict[str, Any]] = [
        {"name": "HARVESTER_UPGRADEPLAN_NAME", "value": writer.name},
        {"name": "HARVESTER_UPGRADE_NODE_NAME", "value": node}]
    if job_type in ("post-drain", "single-node-upgrade"):
        env.append({"name": "HARVESTER_UPGRADE_POD_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    tolerations = [{"key": k, "operator": "Exists"} for k in (
        "node.kubernetes.io/unschedulable", "node.kubernetes.io/unreachable",
        "node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/etcd",
        ev.DRAIN_TAINT_KEY, "CriticalAddonsOnly")]
    body: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job_name(writer.name, job_type, node), "namespace": UPGRADE_NS,
                     "labels": labels, "ownerReferences": [writer.owner_reference()]},
        "spec": {
            "ttlSecondsAfterFinished": 604800,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeName": node, "hostPID": True, "restartPolicy": "Never",
                    "tolerations": tolerations,
                    "containers": [{
                        "name": "apply", "image": toolkit_image(writer.plan),
                        "command": ["upgrade_node.sh"], "args": [job_type], "env": env,
                        "securityContext": {"privileged": True},
                        "volumeMounts": [{"name": "host-root", "mountPath": "/host"}],
                    }],
                    "volumes": [{"name": "host-root", "hostPath": {"path": "/", "type":
                                                                   "Directory"}}],
                },
            },
        },
    }
    if skip_volumes:
        pod = body["spec"]["template"]["spec"]
        pod["volumes"].append({"name": "tmp", "emptyDir": {}})
        pod["containers"][0]["volumeMounts"].append({"name": "tmp", "mountPath": "/tmp"})
        pod["initContainers"] = [{
            "name": "skip-volumes", "image": toolkit_image(writer.plan),
            "command": ["sh", "-c", "touch " + " ".join(
                f"/tmp/skip-{v}" for v in sorted(skip_volumes))],
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}]
    return body


def _job_outcome(job: dict[str, Any] | None) -> tuple[str, str, str]:
    """("complete"|"failed"|"running"|"absent", reason, message)."""
    if job is None:
        return "absent", "", ""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("status") != "True":
            continue
        if c.get("type") == "Complete":
            return "complete", "", ""
        if c.get("type") == "Failed":
            return "failed", c.get("reason") or "JobFailed", c.get("message") or ""
    return "running", "", ""


def _node_summary(n: dict[str, Any] | None) -> str:
    if not n:
        return "node not found"
    st = n.get("status") or {}
    ready = next((c.get("status") for c in st.get("conditions") or []
                  if c.get("type") == "Ready"), "Unknown")
    return f"Ready={ready}, osImage={(st.get('nodeInfo') or {}).get('osImage')!r}"


def run_node_job(kube: Kube, writer: PlanWriter, node: str, job_type: str, *,
                 job_timeout: float = 3600, node_timeout: float = 1800,
                 start_only: bool = False) -> dict[str, Any]:
    """Run the post-drain (or single-node-upgrade) Job and wait for the node to come back
    Ready on the release's OS. Never reboots a node that already runs the target OS.

    ``start_only`` (the previous node's head start): create the Job if it is due and return,
    neither waiting nor failing anything (``started``: whether it was created)."""
    plan = writer.refresh()
    rel = release(plan)
    single = job_type == "single-node-upgrade"
    running_state = "SingleNodeUpgrading" if single else "PostDraining"
    done_state = "SingleNodeUpgraded" if single else "PostDrained"
    fail_state = "SingleNodeUpgradeFailed" if single else "PostDrainFailed"
    state = writer.node_state(node)
    result: dict[str, Any] = {"changed": False, "job": job_name(writer.name, job_type, node)}
    if state_ordinal(state) >= state_ordinal(done_state):
        return result
    n = kube.get("v1", "Node", node)
    if n is None:
        raise NodeLoopError(f"node {node} not found")
    on_target = ((n.get("status") or {}).get("nodeInfo") or {}).get("osImage") == rel["os"]
    job = kube.get("batch/v1", "Job", result["job"], UPGRADE_NS)
    outcome = _job_outcome(job)
    if kube.check_mode:
        result["changed"] = not on_target
        return result
    if start_only:
        result["started"] = False
        if not on_target and outcome[0] == "absent" and state == running_state:
            kube.create_in("batch/v1", "Job", job_body(writer, job_type, node), UPGRADE_NS)
            writer.event("NodeJobCreated", f"Job {UPGRADE_NS}/{result['job']} created for {node}")
            result["changed"] = result["started"] = True
        return result
    if on_target and no.node_ready(n) and outcome[0] in ("absent", "complete"):
        # already on the new OS (a previous run got past the reboot): no job, no reboot
        result["changed"] |= untaint_node(kube, node)
        writer.set_node_state(node, done_state)
        result["changed"] = True
        _drop_pending_os(kube, node)
        return result
    if outcome[0] == "failed":
        msg = f"{result['job']} failed: {outcome[1]}: {outcome[2]}".rstrip(": ")
        writer.fail_node(node, fail_state, outcome[1], msg)
        raise NodeLoopError(msg)
    # the single-node script's VM detector rewrites the node's key of <plan>-restore-vm
    recorded = restore_entries(kube, writer, node)
    if outcome[0] == "absent" and state != "WaitingReboot":
        writer.set_node_state(node, running_state)
        kube.create_in("batch/v1", "Job", job_body(writer, job_type, node), UPGRADE_NS)
        writer.event("NodeJobCreated", f"Job {UPGRADE_NS}/{result['job']} created for {node}")
        result["changed"] = True
    if state != "WaitingReboot":
        try:
            outcome = kube.wait(
                [Source("batch/v1", "Job", UPGRADE_NS,
                        field_selector=f"metadata.name={result['job']}")],
                lambda v: next((o for o in (_job_outcome(j) for j in v["Job"].values())
                                if o[0] in ("complete", "failed")), None),
                timeout=job_timeout, what=f"Job {UPGRADE_NS}/{result['job']} to finish",
                describe=lambda v: ", ".join(
                    f"{k}: {_job_outcome(j)[0]} {(j.get('status') or {}).get('failed', 0)} "
                    "failed pod(s)" for k, j in v["Job"].items()) or "job missing")
        except WaitTimeout as exc:
            writer.fail_node(node, fail_state, "JobTimeout", str(exc))
            raise
        if outcome[0] == "failed":
            msg = f"{result['job']} failed: {outcome[1]}: {outcome[2]}".rstrip(": ")
            writer.fail_node(node, fail_state, outcome[1], msg)
            raise NodeLoopError(msg)
        if recorded:
            record_shutdowns(kube, writer, node, recorded)
        writer.set_node_state(node, "WaitingReboot")
        kube.patch("v1", "Node", node,
                   {"metadata": {"annotations": {PENDING_OS_ANNOTATION: rel["os"]}}})
        result["changed"] = True

    def back(view: dict[str, dict[str, dict[str, Any]]]) -> bool:
        obj = view["Node"].get(node)
        return bool(obj) and no.node_ready(obj) and (
            (obj.get("status") or {}).get("nodeInfo") or {}).get("osImage") == rel["os"]

    try:
        kube.wait([Source("v1", "Node", field_selector=f"metadata.name={node}")], back,
                  timeout=node_timeout,
                  what=f"node {node} to come back Ready on {rel['os']!r}",
                  describe=lambda v: _node_summary(v["Node"].get(node)))
    except WaitTimeout as exc:
        writer.fail_node(node, fail_state, "NodeNotReady", str(exc))
        raise
    _drop_pending_os(kube, node)
    writer.set_node_state(node, done_state)
    result["changed"] = True
    return result


def _engines_settled(kube: Kube) -> str | None:
    """None when no running Longhorn engine belongs to a volume that is not attached: the
    pre-drain script lists the running engines once and then waits for each one's volume to
    be healthy, forever for a volume that detaches meanwhile (one of the VMs we just
    stopped)."""
    try:
        engines = kube.items(LONGHORN_API, "Engine", "longhorn-system")
        vols = {v["metadata"]["name"]: v for v in kube.items(LONGHORN_API, "Volume",
                                                             "longhorn-system")}
    except NotServed as exc:
        if not is_harvester(kube):
            return None
        raise _longhorn_unreadable(exc, "Engines and Volumes",
                                   "tell whether the stopped VMs' volumes detached") from exc
    except ApiError as exc:
        raise _longhorn_unreadable(exc, "Engines and Volumes",
                                   "tell whether the stopped VMs' volumes detached") from exc
    for e in engines:
        if (e.get("status") or {}).get("currentState") != "running":
            continue
        vol = ((e.get("metadata") or {}).get("labels") or {}).get("longhornvolume", "")
        state = ((vols.get(vol) or {}).get("status") or {}).get("state")
        if vol in vols and state != "attached":
            return f"volume {vol} is {state or 'changing state'}"
    return None


def _volumes_to_skip(kube: Kube, node: str) -> list[str]:
    """Volumes with a running engine that are not healthy but not at risk from draining
    ``node`` (a healthy replica lives elsewhere: :func:`_volume_at_risk`). The pre-drain
    script waits for every running engine's volume to be healthy (≥ 3 nodes) or to have two
    RW replicas, forever — also for a volume that cannot heal (too few nodes with disks, a
    replica lost for good) and that our own check already judged safe."""
    try:
        engines = kube.items(LONGHORN_API, "Engine", "longhorn-system")
        vols = {v["metadata"]["name"]: v for v in kube.items(LONGHORN_API, "Volume",
                                                             "longhorn-system")}
        replicas = kube.items(LONGHORN_API, "Replica", "longhorn-system")
    except NotServed as exc:
        if not is_harvester(kube):
            return []
        raise _longhorn_unreadable(exc, "Engines, Volumes and Replicas",
                                   f"tell which volumes are safe to drain {node} past") from exc
    except ApiError as exc:
        raise _longhorn_unreadable(exc, "Engines, Volumes and Replicas",
                                   f"tell which volumes are safe to drain {node} past") from exc
    out = set()
    for e in engines:
        if (e.get("status") or {}).get("currentState") != "running":
            continue
        vol = vols.get(((e.get("metadata") or {}).get("labels") or {}).get("longhornvolume", ""))
        if vol is None or (vol.get("status") or {}).get("robustness") == "healthy":
            continue
        if _volume_at_risk(vol, node, replicas) is None:
            out.add(vol["metadata"]["name"])
    return sorted(out)


def run_pre_drain_job(kube: Kube, writer: PlanWriter, node: str, *, timeout: float = 3600,
                      start_only: bool = False, fail: bool = True) -> dict[str, Any]:
    """Job ``<plan>-node-upgrade-pre-drain-<node>`` (``upgrade_node.sh pre-drain``): on the
    host it undoes the rancher-system-agent drop-in the cluster upgrade left (without that,
    RKE2 does not restart into the new version), removes RKE2's canal config and disables
    the RKE2 snapshot charts; our evacuation already moved the VMs, so its own wait for them
    ends at once. Its VM detector rewrites the node's entry of ``<plan>-restore-vm``: our
    record is merged back afterwards. Waits for the Job (``timeout``); failure ⇒
    ``PreDrainFailed``. ``start_only``: create it and return (``started``/``complete``).
    ``fail=False`` (a head start): a failure or the timeout only returns ``why``."""
    name = job_name(writer.name, "pre-drain", node)
    out: dict[str, Any] = {"changed": False, "job": name, "started": False, "complete": False}
    job = kube.get("batch/v1", "Job", name, UPGRADE_NS)
    outcome = _job_outcome(job)
    if kube.check_mode:
        out["changed"] = outcome[0] != "complete"
        return out
    if outcome[0] == "failed":
        msg = f"{name} failed: {outcome[1]}: {outcome[2]}".rstrip(": ")
        if not fail:
            return {**out, "why": msg}
        writer.fail_node(node, "PreDrainFailed", outcome[1], msg)
        raise NodeLoopError(msg)
    recorded = restore_entries(kube, writer, node)
    if outcome[0] == "absent":
        if _engines_settled(kube) is not None:
            if start_only:
                return out
            try:
                kube.wait([Source(LONGHORN_API, "Engine", "longhorn-system"),
                           Source(LONGHORN_API, "Volume", "longhorn-system")],
                          lambda v: _engines_settled(kube) is None, timeout=timeout,
                          what="Longhorn volumes of the stopped VMs to detach",
                          describe=lambda v: _engines_settled(kube) or "settled")
            except WaitTimeout as exc:
                if not fail:
                    return {**out, "why": str(exc)}
                writer.fail_node(node, "PreDrainFailed", "VolumesNotSettled", str(exc))
                raise
        skip = _volumes_to_skip(kube, node)
        kube.create_in("batch/v1", "Job", job_body(writer, "pre-drain", node, skip),
                       UPGRADE_NS)
        writer.event("NodeJobCreated", f"Job {UPGRADE_NS}/{name} created for {node}"
                     + (f" (volumes judged safe to drain past: {', '.join(skip)})"
                        if skip else ""))
        out["changed"] = out["started"] = True
        out["skip_volumes"] = skip
        if start_only:
            return out
    elif outcome[0] == "running" and start_only:
        return out
    if outcome[0] != "complete":
        try:
            outcome = kube.wait(
                [Source("batch/v1", "Job", UPGRADE_NS, field_selector=f"metadata.name={name}")],
                lambda v: next((o for o in (_job_outcome(j) for j in v["Job"].values())
                                if o[0] in ("complete", "failed")), None),
                timeout=timeout, what=f"Job {UPGRADE_NS}/{name} to finish",
                describe=lambda v: ", ".join(
                    f"{k}: {_job_outcome(j)[0]} {(j.get('status') or {}).get('failed', 0)} "
                    "failed pod(s)" for k, j in v["Job"].items()) or "job missing")
        except WaitTimeout as exc:
            if not fail:
                return {**out, "why": str(exc)}
            writer.fail_node(node, "PreDrainFailed", "JobTimeout", str(exc))
            raise
        if outcome[0] == "failed":
            msg = f"{name} failed: {outcome[1]}: {outcome[2]}".rstrip(": ")
            if not fail:
                return {**out, "why": msg}
            writer.fail_node(node, "PreDrainFailed", outcome[1], msg)
            raise NodeLoopError(msg)
    if recorded:
        out["changed"] |= record_shutdowns(kube, writer, node, recorded)
    out["complete"] = True
    return out


def _drop_pending_os(kube: Kube, node: str) -> None:
    n = kube.get("v1", "Node", node) or {}
    if PENDING_OS_ANNOTATION in ((n.get("metadata") or {}).get("annotations") or {}):
        kube.patch("v1", "Node", node,
                   {"metadata": {"annotations": {PENDING_OS_ANNOTATION: None}}})


# ---------------------------------------------------------------------------------------------
# Restore
# ---------------------------------------------------------------------------------------------

def restore_vms(kube: Kube, writer: PlanWriter, node: str, *, timeout: float = 900,
                force: bool | None = None) -> dict[str, Any]:
    """Start the VMs recorded for ``node`` (when the plan's ``restoreVM`` is set) and wait for
    them to run. Only VMs this collection stopped (marked) are started, once.
    (:func:`start_restores` then :func:`await_restores`.)"""
    res = start_restores(kube, writer, node, force=force)
    return await_restores(kube, writer, node, res, timeout=timeout)


def start_restores(kube: Kube, writer: PlanWriter, node: str, *, force: bool | None = None,
                   scheduled_timeout: float = 0, mark: bool = False) -> dict[str, Any]:
    """Ask the VMs recorded for ``node`` to start again (plan ``restoreVM`` or ``force``): only
    those this collection stopped (marked), once. ``scheduled_timeout`` > 0: then wait up to
    that long for their VMIs to be scheduled (KubeVirt phase Scheduled or Running, the
    launcher pod bound), so that the node's capacity they take shows in the pods another
    node's evacuation plans with; ``"scheduled"`` in the result says whether they got there.
    ``mark``: leave :data:`RESTORING_ANNOTATION` on them for :func:`await_marked_restores`,
    when the caller does not await them itself.

    Returns ``{"changed", "restored", "failed", "recorded", "enabled", "starting",
    "scheduled"}``; ``starting`` lists the VMs started now, :func:`await_restores` waits for
    them to run."""
    plan = writer.refresh()
    enabled = bool((plan.get("spec") or {}).get("restoreVM")) if force is None else force
    entries = restore_entries(kube, writer, node)
    result: dict[str, Any] = {"changed": False, "restored": [], "failed": [],
                              "recorded": entries, "enabled": enabled, "starting": [],
                              "scheduled": True}
    if not enabled or not entries:
        return result
    to_start = []
    for key in entries:
        ns, _sep, name = key.partition("/")
        vm = kube.get(VM_API, "VirtualMachine", name, ns)
        if vm is None:
            result["failed"].append(f"{key}: VirtualMachine not found")
            continue
        ann = (vm.get("metadata") or {}).get("annotations") or {}
        if STOPPED_BY_ANNOTATION not in ann:
            continue        # not stopped by us, or already restored
        to_start.append((key, ns, name, vm, ann))
    if kube.check_mode:
        result["changed"] = bool(to_start)
        result["restored"] = [k for k, *_rest in to_start]
        return result
    for key, ns, name, vm, ann in to_start:
        spec = vm.get("spec") or {}
        prev = ann.get(RUN_STRATEGY_ANNOTATION) or "Always"
        patch: dict[str, Any] = {"metadata": {"annotations": {
            RUN_STRATEGY_ANNOTATION: None, STOPPED_BY_ANNOTATION: None}}}
        if mark:
            patch["metadata"]["annotations"][RESTORING_ANNOTATION] = node
        if "running" in spec and "runStrategy" not in spec:
            patch["spec"] = {"running": True}
        else:
            patch["spec"] = {"runStrategy": prev if prev != "Halted" else "Always"}
        kube.patch(VM_API, "VirtualMachine", name, patch, ns)
        result["changed"] = True
        result["starting"].append(key)
    if result["starting"] and scheduled_timeout > 0:
        keys = set(result["starting"])

        def scheduled(view: dict[str, dict[str, dict[str, Any]]]) -> bool:
            vmis = view["VirtualMachineInstance"]
            return all(_phase_of(vmis.get(k)) in ("Scheduled", "Running") for k in keys)
        try:
            kube.wait([Source(VMI_API, "VirtualMachineInstance")], scheduled,
                      timeout=scheduled_timeout,
                      what=f"restored VMs {', '.join(sorted(keys))} to be scheduled")
        except WaitTimeout:
            result["scheduled"] = False
    return result


def await_restores(kube: Kube, writer: PlanWriter, node: str, started: dict[str, Any], *,
                   timeout: float = 900) -> dict[str, Any]:
    """Wait up to ``timeout`` for the VMs :func:`start_restores` started (``started``, its
    result) to run, and say how it went (event ``RestoreVMCompleted``/``RestoreVMFailed``).
    Returns ``started`` with ``restored`` and ``failed`` filled in."""
    result = dict(started)
    if kube.check_mode or not result.get("enabled") or not result.get("recorded"):
        return result
    keys = set(result.get("starting") or [])
    result["failed"] = list(result.get("failed") or [])
    if keys:
        def running(view: dict[str, dict[str, dict[str, Any]]]) -> bool:
            return all(_phase_of(view["VirtualMachineInstance"].get(k)) == "Running"
                       for k in keys)
        try:
            kube.wait([Source(VMI_API, "VirtualMachineInstance")], running, timeout=timeout,
                      what=f"restored VMs {', '.join(sorted(keys))} to run",
                      describe=lambda v: ", ".join(
                          f"{k}={_phase_of(v['VirtualMachineInstance'].get(k))}"
                          for k in sorted(keys)))
            result["restored"] = sorted(keys)
        except WaitTimeout as exc:
            vmis = {k: o for k, o in _vmi_map(kube).items() if k in keys}
            result["restored"] = sorted(k for k in keys if _phase_of(vmis.get(k)) == "Running")
            result["failed"] += [f"{k}: not running ({exc.last_seen})"
                                 for k in sorted(keys - set(result["restored"]))]
    n_ok, n_fail = len(result["restored"]), len(result["failed"])
    writer.event("RestoreVMCompleted" if not n_fail else "RestoreVMFailed",
                 f"Restored {n_ok + n_fail} VMs for node {node} during upgrade {writer.name}, "
                 f"success: {n_ok}, failed: {n_fail}", warning=bool(n_fail),
                 component="restore-vm", namespace=UPGRADE_NS)
    return result


def await_marked_restores(kube: Kube, writer: PlanWriter, timeout: float) -> dict[str, Any]:
    """Await the VMs :func:`start_restores` left marked (:data:`RESTORING_ANNOTATION`: asked
    to start, nobody waited), node by node as :func:`await_restores` does (its event
    included), then remove the mark. Returns ``{"lines": [a line per node], "restored",
    "failed"}``."""
    out: list[str] = []
    restored: list[str] = []
    failed: list[str] = []
    by_node: dict[str, list[str]] = {}
    for vm in _try_items(kube, VM_API, "VirtualMachine"):
        md = vm.get("metadata") or {}
        node = (md.get("annotations") or {}).get(RESTORING_ANNOTATION)
        if node:
            by_node.setdefault(str(node), []).append(f"{md.get('namespace')}/{md['name']}")
    deadline = time.monotonic() + timeout
    for node, keys in sorted(by_node.items()):
        if kube.check_mode:
            out.append(f"would await the restored VMs of {node}: {', '.join(sorted(keys))}")
            continue
        res = await_restores(kube, writer, node, {"enabled": True, "recorded": keys,
                                                  "starting": keys, "restored": [],
                                                  "failed": []},
                             timeout=max(0.0, deadline - time.monotonic()))
        for key in keys:
            ns, _sep, name = key.partition("/")
            try:
                kube.patch(VM_API, "VirtualMachine", name,
                           {"metadata": {"annotations": {RESTORING_ANNOTATION: None}}}, ns)
            except ApiError as exc:   # deleted meanwhile: nothing left to unmark
                if exc.status != 404:
                    raise
        restored += res["restored"]
        failed += res["failed"]
        out.append(f"restored VMs of {node}: {len(res['restored'])} running"
                   + (f", failed: {'; '.join(res['failed'])}" if res["failed"] else ""))
    return {"lines": out, "restored": restored, "failed": failed}


def others_left(facts: list[dict[str, Any]], node: str, play: list[str]) -> bool:
    """Is a node of the serial play other than ``node`` still to be upgraded (``facts``:
    :func:`cluster_facts`)?"""
    return any(f["name"] in play and f["name"] != node and not f["upgraded"] for f in facts)


def _phase_of(vmi: dict[str, Any] | None) -> str:
    return str(((vmi or {}).get("status") or {}).get("phase") or "absent")


def _vmi_map(kube: Kube) -> dict[str, dict[str, Any]]:
    return {f"{v['metadata'].get('namespace')}/{v['metadata']['name']}": v
            for v in _try_items(kube, VMI_API, "VirtualMachineInstance")}


# ---------------------------------------------------------------------------------------------
# Phase bookkeeping (minimal; the phase machine itself belongs to upgrade_plan)
# ---------------------------------------------------------------------------------------------

def all_nodes_done(kube: Kube, writer: PlanWriter) -> tuple[bool, list[str]]:
    plan = writer.refresh()
    facts = cluster_facts(kube, plan)
    pending = [f["name"] for f in facts if writer.node_state(f["name"]) not in no.DONE_STATES]
    return not pending, pending


def wait_rancher_settled(kube: Kube, timeout: float) -> None:
    """upgrade-toolkit's NodeUpgrade PostRun: no machine-plan secret still has post-drain."""
    def pred(view: dict[str, dict[str, dict[str, Any]]]) -> bool:
        return not any(no.POST_DRAIN in _secret_ann(s) for s in view["Secret"].values())
    kube.wait([Source("v1", "Secret", FLEET_NS)], pred, timeout=timeout,
              what="Rancher to complete node upgrades (no machine-plan secret with post-drain)",
              describe=lambda v: ", ".join(k for k, s in v["Secret"].items()
                                           if no.POST_DRAIN in _secret_ann(s)))


def _phase(kube: Kube, writer: PlanWriter, completed: bool,
           statuses: dict[str, Any] | None = None) -> bool:
    """Enter/complete NodeUpgrade through upgrade_plan's transitions (plan_status)."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        phases,
        plan_status,
    )
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_kube import (
        now_iso,
    )
    phase = phases.get("NodeUpgrade")
    gen = (writer.plan.get("metadata") or {}).get("generation")

    def mutate(st: dict[str, Any]) -> list[Any]:
        if statuses:
            merged = dict(st.get("nodeUpgradeStatuses") or {})
            for n, v in statuses.items():
                merged.setdefault(n, v)
            st["nodeUpgradeStatuses"] = merged
        if completed:
            return plan_status.complete_phase(st, phase, now_iso(), gen)
        if st.get("currentPhase") == phase.active:
            return []
        return plan_status.start_phase(st, phase, now_iso(), gen)

    return writer.update_status(mutate)


RANCHER_CLUSTER_API = "provisioning.cattle.io/v1"


def _rke2_version(v: Any) -> str:
    """``v1.33.3-rke2r1`` and ``v1.33.3+rke2r1`` name the same release."""
    s = str(v or "").strip()
    return s.replace("-rke2", "+rke2", 1) if "+" not in s else s


def start_rancher_upgrade(kube: Kube, writer: PlanWriter) -> dict[str, Any]:
    """Hand the node roll to Rancher (reference §C.1; seed 000 ``upgradeKubernetes``): one
    merge patch of ``clusters.provisioning.cattle.io fleet-local/local`` with
    ``spec.kubernetesVersion`` = ``releaseMetadata.kubernetes``,
    ``spec.rkeConfig.provisionGeneration`` + 1 and the ``upgradeStrategy`` with our drain
    hooks, recorded in ``status.provisionGeneration``. Once: a plan that recorded it, a
    single-node plan (its job patches the version itself) or a cluster that already carries
    both the version and our strategy (a run stopped between the patch and the status write)
    is not patched again."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import manifests

    plan = writer.plan
    st = plan.get("status") or {}
    if st.get("singleNode") or st.get("provisionGeneration") is not None:
        return {"changed": False}
    target = release(plan)["kubernetes"]
    cluster = kube.get(RANCHER_CLUSTER_API, "Cluster", "local", FLEET_NS)
    if cluster is None:
        raise NodeLoopError(f"clusters.provisioning.cattle.io {FLEET_NS}/local not found")
    spec = cluster.get("spec") or {}
    rke = spec.get("rkeConfig") or {}
    generation = int(rke.get("provisionGeneration") or 0)
    strategy = manifests.upgrade_strategy()
    done = _rke2_version(spec.get("kubernetesVersion")) == _rke2_version(target) and \
        rke.get("upgradeStrategy") == strategy
    out = {"changed": True, "kubernetesVersion": target,
           "provisionGeneration": generation if done else generation + 1}
    if kube.check_mode:
        return out
    if not done:
        kube.patch(RANCHER_CLUSTER_API, "Cluster", "local",
                   {"spec": {"kubernetesVersion": target,
                             "rkeConfig": {"provisionGeneration": generation + 1,
                                           "upgradeStrategy": strategy}}}, FLEET_NS)
        writer.event("KubernetesUpgradeStarted",
                     f"Rancher cluster {FLEET_NS}/local: kubernetesVersion {target}, "
                     f"provisionGeneration {generation + 1}, drain hooks "
                     f"{no.DEFAULT_PRE_HOOK}/{no.DEFAULT_POST_HOOK}")

    def record(status: dict[str, Any]) -> list[Any]:
        status["provisionGeneration"] = out["provisionGeneration"]
        return []

    writer.update_status(record)
    return out


def enter_phase(kube: Kube, writer: PlanWriter) -> dict[str, Any]:
    """Check the plan reached ClusterUpgraded (or is already in/after NodeUpgrading) and set
    NodeUpgrading; nodes without a state start at ImagePreloaded (toolkit's PreRun). Returns
    the nodes in Rancher's order too (:func:`inventory`), read before the write."""
    plan = writer.refresh()
    phase = check_phase(plan)
    facts = cluster_facts(kube, plan)
    if phase in AFTER_NODES:
        return {"changed": False, "phase": phase, **inventory(facts)}
    statuses = dict((plan.get("status") or {}).get("nodeUpgradeStatuses") or {})
    missing = [f["name"] for f in facts if f["name"] not in statuses]
    for n in missing:
        statuses[n] = {"state": "ImagePreloaded"}
    # PreRun: Longhorn/descheduler settings held for the roll, their originals saved on the
    # plan before any change; again on a resumed run (idempotent: keeps the saved originals)
    held = node_settings.hold(kube, plan, single_node=is_single_node(facts),
                              check_mode=bool(kube.check_mode))
    changed = held["changed"] and not kube.check_mode
    if phase != "NodeUpgrading" or missing:
        changed = _phase(kube, writer, False, statuses if missing else None) or changed
    if not is_single_node(facts):
        rancher = start_rancher_upgrade(kube, writer)
        changed |= bool(rancher["changed"])
    return {"changed": changed, "phase": "NodeUpgrading", "settings": held["actions"],
            **inventory(facts)}


def finish_phase(kube: Kube, writer: PlanWriter, timeout: float) -> dict[str, Any]:
    """All nodes done: wait for Rancher to settle, then NodeUpgraded (PhaseCompleted)."""
    plan = writer.refresh()
    phase = check_phase(plan)
    if phase in AFTER_NODES:
        return {"changed": False, "phase": phase, "pending": []}
    done, pending = all_nodes_done(kube, writer)
    if not done:
        return {"changed": False, "phase": phase, "pending": pending}
    if kube.check_mode:
        return {"changed": True, "phase": "NodeUpgraded", "pending": []}
    single = bool((plan.get("status") or {}).get("singleNode"))
    if not single:
        try:
            wait_rancher_settled(kube, timeout)
        except WaitTimeout as exc:
            writer.fail_plan(str(exc))
            raise
    changed = _phase(kube, writer, True)
    return {"changed": changed, "phase": "NodeUpgraded", "pending": []}
