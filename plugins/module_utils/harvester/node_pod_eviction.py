"""Evicting, while a node's VMs migrate, the workload pods that a PodDisruptionBudget would
make Rancher's drain of that node wait for (:func:`evict_early`).

Rancher drains a node after its pre-drain hook is answered, through the eviction API
(rancher/rancher ``pkg/controllers/capr/machinedrain/machinedrain.go`` runs
``k8s.io/kubectl/pkg/drain``'s ``RunNodeDrain``; the helper's ``evictPods`` retries a 429
every 5 s). Two pods of one Deployment whose budget allows one disruption therefore cost the
drain the time the first one's replacement takes to be Ready, after the hook answer, with the
node out of service. The same evictions made while the VMs migrate — once Rancher has
cordoned the node (``machinedrain.go`` cordons before it sets the pre-drain annotation), so
a replacement never lands back on it — cost nothing: the first round before the migrations
start, one more after they end (the first replacements are Ready by then). Whatever the
budget refuses (429) or any other failure leaves the pod to Rancher's drain, as before;
nothing here waits for a budget. A round asks for no more of a budget's Ready pods than its
``status.disruptionsAllowed`` (counted down as they go, :func:`allowed_disruptions`): the
rest would be answered 429, and are left to the drain with the same reason without asking.

Which pods (:func:`select`): those Rancher's drain would evict with these drain options and
that a budget governs — on the node, not terminal, not being deleted, not a mirror pod, not a
DaemonSet's, not a VM's launcher (the evacuation moves those), created by a controller that
recreates them elsewhere (ReplicaSet, StatefulSet, ReplicationController; a bare pod, or a
Job's, is never evicted early), outside the platform's namespaces
(:data:`constants.SYSTEM_NAMESPACES`), and selected by exactly one PodDisruptionBudget of
its namespace (the eviction API refuses a pod two budgets select). A pod with ``emptyDir``
data is left alone unless the drain options allow deleting it (``deleteEmptyDirData``). With
drain options ``enabled: false`` Rancher does not drain the node and its pods stay where
they are; with ``disableEviction`` Rancher deletes pods without consulting any budget, so no
budget makes that drain wait: nothing is evicted early in either case."""

from __future__ import annotations

import json
import threading
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import evacuation as ev
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    manifests,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# controllers that create a pod's replacement on another node once it is evicted
RECREATING_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})


def system_namespace(ns: str) -> bool:
    return ns in c.SYSTEM_NAMESPACES or ns.startswith(c.SYSTEM_NAMESPACE_PREFIXES)


def drain_options(value: str | None) -> dict[str, Any] | None:
    """Rancher's drain options for a node, as it writes them into the machine-plan Secret's
    drain annotations (``rke.cattle.io/pre-drain``: the ``rkev1.DrainOptions`` JSON); ``None``
    when absent or unreadable."""
    if not value:
        return None
    try:
        opts = json.loads(value)
    except ValueError:
        return None
    return opts if isinstance(opts, dict) else None


def own_drain_options(roles: list[str]) -> dict[str, Any]:
    """The drain options the collection gives Rancher (NodeUpgrade's cluster patch) for a
    node with ``roles``: what check mode assumes before Rancher has written them."""
    strategy = manifests.upgrade_strategy()
    key = "workerDrainOptions" if roles == ["worker"] else "controlPlaneDrainOptions"
    return dict(strategy[key])


def not_early(opts: dict[str, Any] | None) -> str:
    """Why no pod is evicted early under drain options ``opts`` ("" when pods may be)."""
    if opts is None:
        return "Rancher's drain options for the node are not known yet (no pre-drain)"
    if not opts.get("enabled"):
        return "Rancher does not drain this node (drain option enabled is false): its pods stay"
    if opts.get("disableEviction"):
        return ("Rancher's drain deletes pods without the eviction API (disableEviction): no "
                "PodDisruptionBudget makes it wait")
    return ""


def _selects(pdb: dict[str, Any], labels: dict[str, str]) -> bool:
    """policy/v1: a null selector selects no pod, an empty one every pod of the namespace."""
    sel = (pdb.get("spec") or {}).get("selector")
    if sel is None:
        return False
    ml = sel.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in ml.items()):
        return False
    return all(ev._expr_matches(e, labels) for e in sel.get("matchExpressions") or [])


def skip_reason(pod: dict[str, Any], node: str, opts: dict[str, Any]) -> str:
    """Why ``pod`` is not one to evict early, whatever the budgets ("" when it may be)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if spec.get("nodeName") != node or not ev.pod_is_active(pod):
        return "not running on the node"
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return "mirror pod"
    if (meta.get("labels") or {}).get("kubevirt.io") == "virt-launcher":
        return "VM launcher (the evacuation moves it)"
    if system_namespace(str(meta.get("namespace") or "")):
        return "system namespace"
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    if owner is None:
        return "no controller"
    if owner.get("kind") not in RECREATING_OWNERS:
        return f"owned by a {owner.get('kind')}"
    if any("emptyDir" in v for v in spec.get("volumes") or []) and \
            not opts.get("deleteEmptyDirData"):
        return "emptyDir data the drain options do not allow deleting"
    return ""


def select(pods: list[dict[str, Any]], pdbs: list[dict[str, Any]], node: str,
           opts: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods of ``node`` to evict early (see the module doc), sorted:
    ``{"pod": "ns/name", "pdb": "ns/name", "namespace", "name"}``."""
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for b in pdbs:
        by_ns.setdefault(str((b.get("metadata") or {}).get("namespace") or ""), []).append(b)
    out = []
    for pod in pods:
        if skip_reason(pod, node, opts):
            continue
        meta = pod.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        labels = meta.get("labels") or {}
        budgets = [b for b in by_ns.get(ns, []) if _selects(b, labels)]
        if len(budgets) != 1:
            continue
        out.append({"pod": f"{ns}/{name}", "namespace": ns, "name": name,
                    "pdb": f"{ns}/{(budgets[0].get('metadata') or {}).get('name')}",
                    "budgeted": budgeted(pod)})
    return sorted(out, key=lambda e: e["pod"])


def budgeted(pod: dict[str, Any]) -> bool:
    """Whether an Eviction of ``pod`` takes one of its budget's allowed disruptions: a
    Running pod that is Ready. kube-apiserver (``pkg/registry/core/pod/storage/
    eviction.go``) evicts a Pending pod without consulting any budget, and a pod that is not
    Ready without taking a disruption when the budget's unhealthy-pod policy lets it
    (``AlwaysAllow``, or ``IfHealthyBudget`` with the application healthy): such a pod is
    always asked for, the apiserver decides."""
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    return any(cond.get("type") == "Ready" and cond.get("status") == "True"
               for cond in st.get("conditions") or [])


def allowed_disruptions(pdbs: list[dict[str, Any]]) -> dict[str, int]:
    """``{"ns/name": status.disruptionsAllowed}`` of the budgets whose status is current
    (``observedGeneration`` not behind ``metadata.generation``); the apiserver's Eviction
    answers 429 for a Ready pod of a budget at 0 (``checkAndDecrement``), so a round asks
    for no more of those than the budget allows. A budget whose status is behind is left
    out: its pods are asked for, and the first 429 says it allows none."""
    out: dict[str, int] = {}
    for b in pdbs:
        meta, st = b.get("metadata") or {}, b.get("status")
        if not isinstance(st, dict) or "disruptionsAllowed" not in st:
            continue
        try:
            if int(st.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
                continue
            out[f"{meta.get('namespace')}/{meta.get('name')}"] = int(st["disruptionsAllowed"])
        except (TypeError, ValueError):   # not a number: asked for, the apiserver decides
            continue
    return out


class Round:
    """One round of early evictions: which pods (``chosen``, read at once) and their
    Evictions, sent from a thread beside the evacuation's own work (its migrations, the
    pre-drain Job) so that they add no time to it; :meth:`result` waits for the answers."""

    def __init__(self, kube: Kube, node: str, chosen: list[dict[str, Any]],
                 grace: int | None, skipped: str = "",
                 allowed: dict[str, int] | None = None) -> None:
        self.kube, self.node, self.chosen, self.grace = kube, node, chosen, grace
        self.skipped = skipped
        # what each budget allows now (allowed_disruptions): counted down as its Ready pods
        # are evicted, so a round sends no Eviction the budget is known to refuse
        self.allowed = dict(allowed or {})
        self._out: dict[str, Any] | None = None
        self._thread: threading.Thread | None = None
        if chosen and not kube.check_mode:
            self._thread = threading.Thread(target=self._send, daemon=True,
                                            name=f"harvester-upgrade-evict-{node}")
            self._thread.start()

    def _send(self) -> None:
        out: dict[str, Any] = {"evicted": [], "left": [], "skipped": ""}
        try:
            for e in self.chosen:
                refused = f"{e['pod']}: PodDisruptionBudget {e['pdb']} allows no disruption now"
                budget = self.allowed.get(e["pdb"])
                if e.get("budgeted", True) and budget is not None and budget <= 0:
                    # the apiserver would answer 429: left to the drain without asking
                    out["left"].append(refused)
                    continue
                try:
                    self.kube.evict(e["name"], e["namespace"], self.grace)
                    out["evicted"].append(e["pod"])
                    if e.get("budgeted", True) and budget is not None:
                        self.allowed[e["pdb"]] = budget - 1
                except ApiError as exc:
                    if exc.status == 404:     # gone meanwhile: nothing left for the drain
                        continue
                    if exc.status == 429:
                        self.allowed[e["pdb"]] = 0
                        out["left"].append(refused)
                        continue
                    out["left"].append(f"{e['pod']}: eviction refused ({exc.status}: "
                                       f"{str(exc.message)[:120]})")
        except Exception as exc:  # noqa: BLE001 - e.g. the lock lost: the drain evicts them
            done = set(out["evicted"]) | {x.split(":", 1)[0] for x in out["left"]}
            out["left"] += [f"{e['pod']}: not sent ({exc})"[:200] for e in self.chosen
                            if e["pod"] not in done]
        self._out = out

    def line(self) -> str:
        """The pods of this round, for the evacuation's Event ("" when none)."""
        if not self.chosen:
            return ""
        verb = "would evict" if self.kube.check_mode else "evicting"
        return (f"{verb} {len(self.chosen)} pod(s) ahead of Rancher's drain "
                f"(PodDisruptionBudget): {', '.join(e['pod'] for e in self.chosen)}")

    def result(self) -> dict[str, Any]:
        """``{"evicted": [ns/name], "left": [ns/name: why], "skipped": why}`` once every
        Eviction was answered (check mode: ``"would_evict"`` instead of ``"evicted"``)."""
        if self.kube.check_mode:
            return {"would_evict": [e["pod"] for e in self.chosen], "left": [],
                    "skipped": self.skipped}
        if self._thread is not None:
            self._thread.join()
        return dict(self._out or {"evicted": [], "left": [], "skipped": self.skipped})


def start_round(kube: Kube, node: str, drain_value: str | None, *, cordoned: bool,
                roles: list[str] | None = None) -> Round:
    """A round of early evictions for ``node``: the pods :func:`select` picks under Rancher's
    drain options ``drain_value`` (the pre-drain annotation), once the node is ``cordoned``,
    their Evictions (policy/v1) started in a thread (:class:`Round`). Idempotent: an evicted
    pod is gone or being deleted, and not picked again. Check mode sends nothing and says
    what would be evicted (under the collection's own drain options, for ``roles``, while
    Rancher has not written the node's)."""
    opts = drain_options(drain_value)
    if opts is None and kube.check_mode:
        opts = own_drain_options(roles or [])
    why = not_early(opts)
    if why or opts is None:
        return Round(kube, node, [], None, why)
    if not cordoned and not kube.check_mode:
        # a replacement could be scheduled back onto the node
        return Round(kube, node, [], None, f"node {node} is not cordoned yet")
    pods = kube.list(*c.POD, field_selector=f"spec.nodeName={node}")
    pdbs = kube.list(*c.PDB) if pods else []
    chosen = select(pods, pdbs, node, opts) if pods else []
    grace = opts.get("gracePeriod")
    # kubectl's drain helper sends the drain's grace period only when it is >= 0 (-1: the
    # pod's own terminationGracePeriodSeconds)
    return Round(kube, node, chosen, grace if isinstance(grace, int) and grace >= 0 else None,
                 allowed=allowed_disruptions(pdbs))


def evict_early(kube: Kube, node: str, drain_value: str | None, *, cordoned: bool,
                roles: list[str] | None = None) -> dict[str, Any]:
    """:func:`start_round` and its :meth:`Round.result`: one round, answered."""
    return start_round(kube, node, drain_value, cordoned=cordoned, roles=roles).result()


def merge(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two rounds as one result: every pod evicted; left, what the last round left."""
    return {"evicted": sorted(set(first.get("evicted") or []) |
                              set(second.get("evicted") or [])),
            "left": list(second.get("left") or []),
            "skipped": second.get("skipped") or first.get("skipped") or ""}


def short(res: dict[str, Any] | None) -> str:
    """A round's (or rounds') result in a few words, for a step's one-line detail ("" when
    nothing was evicted, left or would be)."""
    if not res:
        return ""
    if res.get("would_evict"):
        return f"{len(res['would_evict'])} pod(s) to evict ahead of Rancher's drain"
    parts = []
    if res.get("evicted"):
        parts.append(f"{len(res['evicted'])} pod(s) evicted ahead of Rancher's drain")
    if res.get("left"):
        parts.append(f"{len(res['left'])} left to its drain")
    return ", ".join(parts)
