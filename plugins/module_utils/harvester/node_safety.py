"""Is it safe to take a node down? Every other node Ready (:func:`wait_nodes_ready`), no
attached Longhorn volume left with its last healthy replica there (:func:`wait_volumes_safe`),
no PodDisruptionBudget forbidding an eviction (:func:`wait_pdbs`). Each waits (watch) until
true or its timeout; Longhorn data that cannot be read fails closed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import constants as c
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import evacuation as ev
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    longhorn_index as li,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_order as no
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
    NotServed,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.longhorn_index import (
    replica_healthy,
    volume_attached,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_facts import (
    LONGHORN_API,
    is_harvester,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source,
    WaitTimeout,
)


def volume_at_risk(vol: dict[str, Any], node: str, replicas: list[dict[str, Any]]) -> str | None:
    """Why draining ``node`` would put the attached volume ``vol`` at risk, else ``None``.

    Counted from Longhorn's Replica objects, not from ``status.robustness``: a volume is
    ``healthy`` as long as it has its full count of healthy replicas, wherever they are, so
    a volume whose every healthy replica sits on ``node`` (replica count 1, or replicas
    rebuilt onto one node) is ``healthy`` and still loses its data path when the node goes
    down. Safe only with at least one healthy replica elsewhere (:func:`replica_healthy`:
    running and RW since it was last built; a replica being rebuilt does not count)."""
    if not volume_attached(vol):
        return None
    robust = (vol.get("status") or {}).get("robustness") or "unknown"
    name = (vol.get("metadata") or {}).get("name")
    mine = [r for r in replicas if (r.get("spec") or {}).get("volumeName") == name]
    healthy = [r for r in mine if replica_healthy(r)]
    elsewhere = [r for r in healthy if (r.get("spec") or {}).get("nodeID") != node]
    if elsewhere:
        return None     # a healthy replica survives elsewhere
    if healthy:
        return (f"volume {name} ({robust}) has its only healthy replica(s) on node {node}: "
                f"{', '.join(sorted(str((r.get('metadata') or {}).get('name')) for r in healthy))}")
    return f"volume {name} ({robust}) has no healthy replica off node {node}"


def replicas_by_volume(replicas: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Longhorn Replicas grouped by ``spec.volumeName``: each volume's check then reads its own
    replicas instead of scanning all of them (volumes x replicas on a big cluster)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in replicas:
        out.setdefault(str((r.get("spec") or {}).get("volumeName") or ""), []).append(r)
    return out


def volumes_at_risk(vols: Iterable[dict[str, Any]], node: str,
                    replicas: Iterable[dict[str, Any]]) -> list[str]:
    """:func:`volume_at_risk` of every volume in ``vols`` (the reasons of those at risk).

    One pass over the replicas finds the volumes with a healthy replica off ``node``, which
    :func:`volume_at_risk` finds safe; only the other attached volumes are looked at with
    their own replicas (on a big cluster nearly every volume is in the first set, and this
    runs on every change of a Volume or Replica while the node waits)."""
    replicas = list(replicas)
    safe: set[str] = set()
    for r in replicas:   # replica_healthy() inline: this runs over every Replica here
        spec = r.get("spec") or {}
        if spec.get("nodeID") != node and not spec.get("failedAt") and \
                spec.get("healthyAt") and (r.get("status") or {}).get("currentState") == "running":
            safe.add(str(spec.get("volumeName") or ""))
    by_volume: dict[str, list[dict[str, Any]]] | None = None
    out = []
    for v in vols:
        name = str((v.get("metadata") or {}).get("name") or "")
        if name in safe or not volume_attached(v):
            continue
        if by_volume is None:
            by_volume = replicas_by_volume(replicas)
        why = volume_at_risk(v, node, by_volume.get(name, []))
        if why:
            out.append(why)
    return out


def any_at_risk_indexed(kube: Kube, node: str) -> bool | None:
    """Whether :func:`volumes_at_risk` would name a volume, from the Longhorn informers'
    indexes (:mod:`longhorn_index`): ``node``'s replicas and the sets of attached volumes and
    of volumes with a healthy replica, instead of a pass over every Replica and Volume.
    ``None`` when the client has no such indexes (a plain client, informers off or not
    healthy): the caller then makes the pass."""
    by_index = getattr(kube, "by_index", None)
    if by_index is None:
        return None
    ns = "longhorn-system"
    attached = by_index(LONGHORN_API, "Volume", ns, li.ATTACHED_VOLUME)
    healthy = by_index(LONGHORN_API, "Replica", ns, li.HEALTHY_REPLICA_VOLUME)
    mine = by_index(LONGHORN_API, "Replica", ns, li.REPLICA_NODE, node)
    if attached is None or healthy is None or mine is None:
        return None
    if not attached <= healthy:
        return True      # an attached volume without any healthy replica
    for r in mine:
        vol = str((r.get("spec") or {}).get("volumeName") or "")
        if vol not in attached or not replica_healthy(r):
            continue
        theirs = by_index(LONGHORN_API, "Replica", ns, li.HEALTHY_REPLICA_VOLUME, vol)
        if theirs is None:
            return None
        if all((o.get("spec") or {}).get("nodeID") == node for o in theirs):
            return True  # its healthy replicas are all on node
    return False


def longhorn_unreadable(exc: Exception, kinds: str, why: str) -> NodeLoopError:
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

    nodes = kube.list("v1", "Node")
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
        # the informers' indexes decide without the lists when nothing is at risk; they
        # start (list) the same sets, so their errors are the lists' errors
        if any_at_risk_indexed(kube, node) is False:
            return {"waited": False}
        vols = kube.list(LONGHORN_API, "Volume", "longhorn-system")
        replicas = kube.list(LONGHORN_API, "Replica", "longhorn-system")
    except NotServed as exc:
        if not is_harvester(kube):
            return {"waited": False, "longhorn": False}
        raise longhorn_unreadable(exc, "Volumes and Replicas", why) from exc
    except ApiError as exc:
        raise longhorn_unreadable(exc, "Volumes and Replicas", why) from exc

    def risky(view: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
        return volumes_at_risk(view["Volume"].values(), node,
                               (view.get("Replica") or {}).values())

    at_risk = volumes_at_risk(vols, node, replicas)
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
        if meta.get("namespace") == c.LONGHORN_NS and \
                labels.get("longhorn.io/component") == "instance-manager":
            # Longhorn's own drain guard: it keeps this PDB while any volume is attached
            # on the node, so it goes only after the VMs have left (longhorn-manager
            # canDeleteInstanceManagerPDB); the data it guards is wait_volumes_safe's
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
    """Wait (watch) until no PDB protecting a pod on the node forbids its eviction: not
    the VMs' (moved by migrations), DaemonSets' (not drained) nor Longhorn's
    instance managers' (released by Longhorn once no volume is attached on the node)."""
    # the node's pods only (a field the API server indexes for Pods), not the cluster's
    pods = kube.list("v1", "Pod", field_selector=f"spec.nodeName={node}")
    pdbs = kube.list("policy/v1", "PodDisruptionBudget")
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
