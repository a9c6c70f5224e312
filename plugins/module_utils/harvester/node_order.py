"""The cluster's nodes as the node loop sees them, in the order Rancher drains them.

Pure logic over plain objects (dicts), shared by the ``harvester.upgrade.nodes`` inventory
plugin, the ``node_info`` module (which feeds ``add_host`` when no inventory is given) and the
per-batch "is Rancher asking for this node?" check.

Rancher's planner (reference §C.2) upgrades in tiers: the etcd *init* node (machine label
``rke.cattle.io/init-node=true``), then the other etcd nodes, then control-plane nodes not yet
handled, then worker-only nodes; within a tier by CAPI Machine name (plain string order).
"""

from __future__ import annotations

from typing import Any

MACHINE_ANNOTATION = "cluster.x-k8s.io/machine"
INIT_NODE_LABEL = "rke.cattle.io/init-node"
WITNESS_LABEL = "node-role.harvesterhci.io/witness"
MANAGED_LABEL = "harvesterhci.io/managed"
PRE_DRAIN = "rke.cattle.io/pre-drain"
POST_DRAIN = "rke.cattle.io/post-drain"
RANCHER_DRAIN_ANNOTATIONS = (
    "rke.cattle.io/drain-options", PRE_DRAIN, "rke.cattle.io/drain-done", "rke.cattle.io/uncordon",
    POST_DRAIN, "rke.cattle.io/drain-error",
)
DEFAULT_PRE_HOOK = "management.harvesterhci.io/pre-hook"
DEFAULT_POST_HOOK = "management.harvesterhci.io/post-hook"

# node states at or after which a node counts as upgraded (reference §C.3, ordinal >= 7)
DONE_STATES = ("PostDrained", "SingleNodeUpgraded", "ImageCleaning", "ImageCleaned",
               "ImageCleanFailed")
TIERS = ("init", "etcd", "control-plane", "worker")


def _true(v: Any) -> bool:
    return str(v).lower() == "true"


def roles_of(node: dict[str, Any], machine: dict[str, Any] | None) -> list[str]:
    """etcd / control-plane / worker / witness, from the Machine's role labels (Rancher's
    source of truth), else the Node's role labels."""
    nlabels = (node.get("metadata") or {}).get("labels") or {}
    mlabels = ((machine or {}).get("metadata") or {}).get("labels") or {}
    roles: list[str] = []
    for role in ("etcd", "control-plane", "worker"):
        if mlabels:
            has = _true(mlabels.get(f"rke.cattle.io/{role}-role"))
        else:
            has = f"node-role.kubernetes.io/{role}" in nlabels or (
                role == "control-plane" and "node-role.kubernetes.io/master" in nlabels)
        if has:
            roles.append(role)
    if not mlabels and not roles:
        roles.append("worker")   # a node without role labels is a worker
    if WITNESS_LABEL in nlabels:
        roles.append("witness")
    return roles


def tier_of(roles: list[str], init: bool) -> int:
    if init:
        return 0
    if "etcd" in roles:
        return 1
    if "control-plane" in roles:
        return 2
    return 3


MachineIndex = tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]


def machine_index(machines: list[dict[str, Any]]) -> MachineIndex:
    """The machines by name and by the node they run (``status.nodeRef``), the first of
    each kept: :func:`machine_for` of every node is then a lookup, not a scan of them all."""
    by_name: dict[str, dict[str, Any]] = {}
    by_node: dict[str, dict[str, Any]] = {}
    for m in machines:
        by_name.setdefault(str((m.get("metadata") or {}).get("name") or ""), m)
        ref = ((m.get("status") or {}).get("nodeRef") or {}).get("name")
        if ref:
            by_node.setdefault(str(ref), m)
    return by_name, by_node


def machine_for(node: dict[str, Any], index: MachineIndex) -> dict[str, Any] | None:
    """The node's Machine: the one its ``cluster.x-k8s.io/machine`` annotation names, else
    the one whose ``status.nodeRef`` is the node (``index``: :func:`machine_index`)."""
    meta = node.get("metadata") or {}
    name = (meta.get("annotations") or {}).get(MACHINE_ANNOTATION)
    if name and name in index[0]:
        return index[0][name]
    return index[1].get(str(meta.get("name") or ""))   # no nodeRef is indexed under ""


def node_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def node_facts(nodes: list[dict[str, Any]], machines: list[dict[str, Any]],
               secrets: list[dict[str, Any]], *, plan: dict[str, Any] | None = None,
               vmis: list[dict[str, Any]] | None = None,
               server_version: str | None = None) -> list[dict[str, Any]]:
    """One dict per managed node, sorted in Rancher's drain order.

    Keys: ``name``, ``machine``, ``machine_plan_secret``, ``roles``, ``tier``, ``init``,
    ``order``, ``os_image``, ``kubelet_version``, ``harvester_version``, ``vm_count``,
    ``ready``, ``unschedulable``, ``state`` (from the plan), ``upgraded``, ``pre_drain``,
    ``post_drain`` (Rancher's annotations on the machine-plan secret, or None).
    """
    managed = [n for n in nodes
               if _true(((n.get("metadata") or {}).get("labels") or {}).get(MANAGED_LABEL))]
    if not managed:   # a cluster without the label: take every node
        managed = list(nodes)
    status = (plan or {}).get("status") or {}
    rel = status.get("releaseMetadata") or {}
    states = status.get("nodeUpgradeStatuses") or {}
    sec_by_name = {(s.get("metadata") or {}).get("name"): s for s in secrets}
    vm_counts: dict[str, int] = {}
    for vmi in vmis or []:
        nn = (vmi.get("status") or {}).get("nodeName")
        if nn and (vmi.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            vm_counts[nn] = vm_counts.get(nn, 0) + 1
    index = machine_index(machines)
    out: list[dict[str, Any]] = []
    for n in managed:
        meta = n.get("metadata") or {}
        name = meta.get("name", "")
        machine = machine_for(n, index)
        mname = (machine or {}).get("metadata", {}).get("name") or (
            meta.get("annotations") or {}).get(MACHINE_ANNOTATION) or ""
        roles = roles_of(n, machine)
        init = _true((((machine or {}).get("metadata") or {}).get("labels") or {}).get(
            INIT_NODE_LABEL))
        info = (n.get("status") or {}).get("nodeInfo") or {}
        secret_name = f"{mname}-machine-plan" if mname else ""
        ann = ((sec_by_name.get(secret_name) or {}).get("metadata") or {}).get(
            "annotations") or {}
        state = (states.get(name) or {}).get("state") or ""
        out.append({
            "name": name, "machine": mname, "machine_plan_secret": secret_name,
            "roles": roles, "init": init, "tier": TIERS[tier_of(roles, init)],
            "os_image": info.get("osImage", ""), "kubelet_version": info.get("kubeletVersion", ""),
            "harvester_version": server_version or status.get("previousVersion") or "",
            "vm_count": vm_counts.get(name, 0), "ready": node_ready(n),
            "unschedulable": bool((n.get("spec") or {}).get("unschedulable")),
            "state": state,
            "upgraded": is_upgraded(state, info, rel, ann),
            "pre_drain": ann.get(PRE_DRAIN), "post_drain": ann.get(POST_DRAIN),
        })
    out.sort(key=lambda f: (tier_of(f["roles"], f["init"]), f["machine"] or f["name"]))
    for i, f in enumerate(out):
        f["order"] = i
    return out


def is_upgraded(state: str, node_info: dict[str, Any], release: dict[str, Any],
                annotations: dict[str, Any]) -> bool:
    """Done with this node: the plan says so, or it already runs the target OS and kubelet;
    either way only once Rancher holds no drain annotation on its machine-plan secret.

    A node in a done state whose secret still carries ``rke.cattle.io/pre-drain`` or
    ``post-drain`` is not done: a run stopped between the node's reboot and the answer to
    Rancher's post-drain hook (Rancher waits for that answer forever), or Rancher is still
    finishing it. The node's steps run again and pass through to the missing answer."""
    if any(a in annotations for a in RANCHER_DRAIN_ANNOTATIONS):
        return False
    if state in DONE_STATES:
        return True
    os_target, k8s_target = release.get("os"), release.get("kubernetes")
    if not os_target or not k8s_target:
        return False
    return (node_info.get("osImage") == os_target
            and kubelet_matches(node_info.get("kubeletVersion", ""), k8s_target))


def kubelet_matches(kubelet: str, target: str) -> bool:
    """``v1.32.4+rke2r1`` vs a release's ``v1.32.4+rke2r1`` (or ``-rke2r1``; ``-rcN`` ignored)."""
    def norm(v: str) -> str:
        v = v.replace("-rke2", "+rke2")
        if "-rc" in v:
            head, _sep, tail = v.partition("-rc")
            rest = tail.split("+", 1)
            v = head + ("+" + rest[1] if len(rest) > 1 else "")
        return v
    return bool(kubelet) and norm(kubelet) == norm(target)


def rancher_asks_for(facts: list[dict[str, Any]], pre_hook_values: dict[str, str | None]
                     ) -> list[str]:
    """The node(s) Rancher is upgrading now: their machine-plan secret carries
    ``rke.cattle.io/pre-drain`` or ``post-drain``. Nodes whose pre-drain our hook has not
    answered yet come first. ``pre_hook_values`` maps node -> current pre-hook value."""
    unanswered, between = [], []
    for f in facts:
        pre = f.get("pre_drain")
        if pre and pre_hook_values.get(f["name"]) != pre:
            unanswered.append(f["name"])
        elif pre or f.get("post_drain"):
            between.append(f["name"])
    return unanswered + between


def expected_nodes(facts: list[dict[str, Any]], answered: dict[str, str | None],
                   count: int = 1) -> tuple[list[str], str]:
    """Which node(s) the next batch must be on, and why.

    Rancher's current request (an unanswered ``pre-drain``, or a node between its hooks) wins;
    otherwise the next ``count`` nodes in order that are not upgraded yet.
    """
    asked = rancher_asks_for(facts, answered)
    if asked:
        return asked, "Rancher is draining it (machine-plan secret carries rke.cattle.io/pre-drain)"
    pending = [f["name"] for f in facts if not f.get("upgraded")]
    return pending[:max(1, count)], "next not-yet-upgraded node in Rancher's order"


def batch_decision(facts: list[dict[str, Any]], batch: list[str],
                   answered: dict[str, str | None], restore_pending: set[str] | frozenset[str]
                   ) -> dict[str, Any]:
    """Which of the play batch's nodes still need work, and whether Rancher agrees.

    ``done``: upgraded and no VM of theirs waits for restore. ``restore_only``: upgraded (Rancher
    released them) but some VM the collection stopped for them is still stopped -- a run killed
    between the release and the restore; finishing them needs nothing from Rancher, which may
    already be on the next node (or on none, after the last one). ``todo``: the rest of the
    batch, ``restore_only`` included. ``wrong``: the nodes that need Rancher are not the ones
    Rancher is asking for (``expected``, ``why``)."""
    by_name = {f["name"]: f for f in facts}
    restore_only = [n for n in batch if by_name[n]["upgraded"] and n in restore_pending]
    done = [n for n in batch if by_name[n]["upgraded"] and n not in restore_pending]
    todo = [n for n in batch if n not in done]
    rancher_todo = [n for n in todo if n not in restore_only]
    expected, why = expected_nodes(facts, answered, count=max(1, len(rancher_todo)))
    return {"todo": todo, "done": done, "restore_only": restore_only, "expected": expected,
            "why": why, "wrong": bool(rancher_todo) and not set(rancher_todo) & set(expected),
            "rancher_todo": rancher_todo}


def groups_for(fact: dict[str, Any]) -> list[str]:
    groups = ["harvester_nodes"]
    for role in fact.get("roles") or []:
        groups.append(role.replace("-", "_"))
    groups.append("upgraded" if fact.get("upgraded") else "pending")
    return groups


def host_vars(fact: dict[str, Any]) -> dict[str, Any]:
    """Inventory variables of one node host (prefixed ``harvester_``)."""
    hv = {f"harvester_{k}": v for k, v in fact.items() if k not in ("name",)}
    hv["harvester_node_name"] = fact["name"]
    hv["ansible_connection"] = "local"
    return hv
