"""The ReplicaSet controller: keep ``spec.replicas`` active pods from the template.

Active pods = owned (controller ownerReference) pods that are neither terminal nor being
deleted. Scale-down deletes the least useful pods first (unscheduled, pending, not ready,
most restarts, newest). Status: ``replicas``, ``fullyLabeledReplicas``, ``readyReplicas``,
``availableReplicas`` (ready for ``minReadySeconds``, counted in simulated time) and
``observedGeneration``. Orphan adoption by selector is not simulated.

Upstream: kubernetes/kubernetes ``v1.32.4`` (RKE2 ``v1.32.4+rke2r1``, Harvester
v1.5.1) and ``v1.33.3`` (RKE2 ``v1.33.3+rke2r1``, Harvester v1.6.0),
``pkg/controller/replicaset/replica_set.go`` (``manageReplicas``,
``getPodsToDelete``), ``replica_set_utils.go`` and ``pkg/controller/controller_utils.go``
(``ActivePodsWithRanks`` for the deletion order).
Not modelled: orphan adoption/release, slow-start batches and ``burstReplicas``,
expectations, the ``ReplicaFailure`` condition, the pod-deletion-cost annotation and
co-location ranking in the deletion order (not checked here).
"""

from __future__ import annotations

from typing import Any

from ..api.selectors import from_label_selector_dict
from . import podutil as pu

BURST = 500  # pods created per sync (the real controller's slow-start batches)


def pod_from_template(owner: dict[str, Any], template: dict[str, Any],
                      extra_labels: dict[str, str] | None = None,
                      name: str | None = None) -> dict[str, Any]:
    tmd = template.get("metadata") or {}
    md: dict[str, Any] = {"namespace": owner["metadata"]["namespace"],
                          "labels": {**(tmd.get("labels") or {}), **(extra_labels or {})},
                          "ownerReferences": [pu.owner_ref(owner)]}
    if name:
        md["name"] = name
    else:
        md["generateName"] = f"{owner['metadata']['name']}-"
    if tmd.get("annotations"):
        md["annotations"] = dict(tmd["annotations"])
    if tmd.get("finalizers"):
        md["finalizers"] = list(tmd["finalizers"])
    import copy

    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": copy.deepcopy(template.get("spec") or {})}


class Availability:
    """When pods became Ready, in simulated time (for ``minReadySeconds``)."""

    def __init__(self, world: Any) -> None:
        self.clock = world.clock
        self.since: dict[str, float] = {}

    def observe(self, type_: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"].get("uid", "")
        if type_ == "DELETED" or not pu.is_pod_ready(pod):
            self.since.pop(uid, None)
        elif uid not in self.since:
            self.since[uid] = self.clock.now()

    def available(self, pod: dict[str, Any], min_ready: float) -> tuple[bool, float]:
        """(available now, seconds until it will be if it stays ready)."""
        if not pu.is_pod_ready(pod) or pu.is_deleting(pod):
            return False, 0.0
        if min_ready <= 0:
            return True, 0.0
        since = self.since.get(pod["metadata"].get("uid", ""))
        if since is None:
            return False, min_ready
        left = since + min_ready - self.clock.now()
        return left <= 0, max(0.0, left)


def availability(world: Any) -> Availability:
    av = world.extras.get("core_availability")
    if av is None:
        av = Availability(world)
        world.extras["core_availability"] = av
        pods = pu.informer(world, "v1", "Pod")
        pods.add_handler(lambda t, o, old: av.observe(t, o))
        for p in pods.all():
            av.observe("ADDED", p)
    return av  # type: ignore[no-any-return]


def _deletion_rank(pod: dict[str, Any]) -> tuple[Any, ...]:
    spec = pod.get("spec") or {}
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(pu.phase(pod), 0)
    restarts = sum(int(c.get("restartCount") or 0)
                   for c in (pod.get("status") or {}).get("containerStatuses") or [])
    created = pod["metadata"].get("creationTimestamp") or ""
    return (1 if spec.get("nodeName") else 0, phase_rank, 1 if pu.is_pod_ready(pod) else 0,
            -restarts, _neg(created), pod["metadata"]["name"])


def _neg(ts: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in ts)


class ReplicaSets:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.client = world.client_for("replicaset-controller")
        self.rs = pu.informer(world, "apps/v1", "ReplicaSet")
        self.pods = pu.informer(world, "v1", "Pod")
        self.av = availability(world)
        self.batch = pu.Batcher(world, self.sync)
        self._timers: dict[pu.Key, Any] = {}
        self.rs.add_handler(self._on_rs)
        self.pods.add_handler(self._on_pod)
        for obj in self.rs.all():
            self.batch.add(pu.key_of(obj))

    def _on_rs(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ != "DELETED":
            self.batch.add(pu.key_of(obj))

    def _on_pod(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = pu.controller_ref(obj)
        if ref is not None and ref.get("kind") == "ReplicaSet":
            self.batch.add((obj["metadata"].get("namespace", ""), ref.get("name", "")))

    def sync(self, key: pu.Key) -> None:
        rs = self.rs.get(*key)
        if rs is None or pu.is_deleting(rs):
            return
        spec = rs.get("spec") or {}
        uid = rs["metadata"]["uid"]
        pods = self.pods.owned_by(uid)
        active = [p for p in pods if pu.is_active(p)]
        want = int(spec.get("replicas", 1))
        diff = want - len(active)
        if diff > 0:
            template = spec.get("template") or {}
            for _ in range(min(diff, BURST)):
                self.pods.observe(self.client.create(pod_from_template(rs, template), key[0]))
        elif diff < 0:
            for p in sorted(active, key=_deletion_rank)[:-diff]:
                self.pods.observe_deleted(
                    self.client.delete("v1", "Pod", p["metadata"]["name"], key[0]))
        if diff:
            pods = self.pods.owned_by(uid)
        self._status(rs, pods)

    def _status(self, rs: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        spec = rs.get("spec") or {}
        min_ready = float(spec.get("minReadySeconds") or 0)
        sel = from_label_selector_dict(spec.get("selector"))
        tlabels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        active = [p for p in pods if pu.is_active(p)]
        ready = available = labeled = 0
        wait = None
        for p in active:
            if pu.is_pod_ready(p):
                ready += 1
            ok, left = self.av.available(p, min_ready)
            if ok:
                available += 1
            elif pu.is_pod_ready(p):
                wait = left if wait is None else min(wait, left)
            labels = p["metadata"].get("labels") or {}
            if sel.matches(labels) and all(labels.get(k) == v for k, v in tlabels.items()):
                labeled += 1
        key = pu.key_of(rs)
        if wait is not None and key not in self._timers:
            def again() -> None:
                self._timers.pop(key, None)
                self.batch.add(key)
            self._timers[key] = self.world.runtime.after(wait + 0.01, again)
        st = {"replicas": len(active), "fullyLabeledReplicas": labeled,
              "readyReplicas": ready, "availableReplicas": available,
              "observedGeneration": rs["metadata"].get("generation", 1)}
        st = {k: v for k, v in st.items() if v or k in ("replicas", "observedGeneration")}
        cur = dict(rs.get("status") or {})
        conds = cur.pop("conditions", None)
        if cur == st:
            return
        if conds:
            st["conditions"] = conds

        def fn(obj: dict[str, Any]) -> dict[str, Any] | None:
            if obj["metadata"]["uid"] != rs["metadata"]["uid"]:
                return None
            obj["status"] = st
            return obj

        pu.ignore_missing(lambda: self.client.modify("apps/v1", "ReplicaSet", key[1], fn,
                                                     key[0], subresource="status"))


def setup(world: Any) -> ReplicaSets:
    return ReplicaSets(world)
