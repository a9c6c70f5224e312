"""The disruption controller: PodDisruptionBudget status.

For each PDB: the pods of its namespace its selector matches (policy/v1: an empty selector
matches every pod, a missing one none); ``expectedPods`` is the pod count for an integer
``minAvailable``, else the sum of the scale of the pods' controllers (Deployment via its
ReplicaSet, ReplicaSet, StatefulSet; pods of other owners count as one each);
``desiredHealthy`` from ``minAvailable`` (int or % of expected, rounded up) or
``expected - maxUnavailable`` (% rounded up); ``currentHealthy`` = Ready pods that are not
being deleted and not in ``disruptedPods``; ``disruptionsAllowed`` = max(0, current -
desired); condition ``DisruptionAllowed`` (SufficientPods / InsufficientPods);
``observedGeneration``. Entries in ``disruptedPods`` (written by the eviction endpoint) are
dropped once the pod is deleting or gone, or after 2 minutes.

Upstream: kubernetes/kubernetes ``v1.32.4`` (RKE2 ``v1.32.4+rke2r1``, Harvester
v1.5.1) and ``v1.33.3`` (RKE2 ``v1.33.3+rke2r1``, Harvester v1.6.0),
``pkg/controller/disruption/disruption.go`` (``getExpectedPodCount``,
``getExpectedScale``, ``countHealthyPods``, ``buildDisruptedPodMap`` with ``DeletionTimeout``
2 min).
Not modelled: the generic ``/scale`` finder and ReplicationControllers; the fail-safe of
``getExpectedScale``: upstream, a pod without a controller (or whose controller has no scale)
under a percentage ``minAvailable`` or a ``maxUnavailable`` is an error (event
``NoControllerRef``, condition ``SyncFailed``, ``disruptionsAllowed: 0``), where this module
counts it as one pod (more lenient); the stale ``DisruptionTarget`` pod condition cleanup;
``unhealthyPodEvictionPolicy`` lives in the eviction endpoint (``api/store.py``).
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from ..api.selectors import LabelSelector, from_label_selector_dict
from . import podutil as pu

DISRUPTED_TIMEOUT_S = 120.0


def _selector(pdb: dict[str, Any]) -> LabelSelector:
    sel = (pdb.get("spec") or {}).get("selector")
    if sel is None:
        return LabelSelector(nothing=True)
    return from_label_selector_dict(sel)


class Disruption:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.clock = world.clock
        self.client = world.client_for("disruption-controller")
        self.pdbs = pu.informer(world, "policy/v1", "PodDisruptionBudget")
        self.pods = pu.informer(world, "v1", "Pod")
        self.rs = pu.informer(world, "apps/v1", "ReplicaSet")
        self.deps = pu.informer(world, "apps/v1", "Deployment")
        self.sts = pu.informer(world, "apps/v1", "StatefulSet")
        self.batch = pu.Batcher(world, self.sync)
        self._sel_cache: dict[pu.Key, tuple[str, LabelSelector]] = {}
        self.pdbs.add_handler(self._on_pdb)
        self.pods.add_handler(self._on_pod)
        for inf in (self.rs, self.deps, self.sts):
            inf.add_handler(self._on_scalable)
        for p in self.pdbs.all():
            self.batch.add(pu.key_of(p))

    def _sel(self, pdb: dict[str, Any]) -> LabelSelector:
        k = pu.key_of(pdb)
        rv = pdb["metadata"].get("resourceVersion", "")
        hit = self._sel_cache.get(k)
        if hit is None or hit[0] != rv:
            hit = (rv, _selector(pdb))
            self._sel_cache[k] = hit
        return hit[1]

    def _on_pdb(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ == "DELETED":
            self._sel_cache.pop(pu.key_of(obj), None)
            return
        self.batch.add(pu.key_of(obj))

    def _touch_ns(self, ns: str, labels_list: list[dict[str, str]]) -> None:
        for pdb in self.pdbs.in_namespace(ns):
            sel = self._sel(pdb)
            if any(sel.matches(lbl) for lbl in labels_list):
                self.batch.add(pu.key_of(pdb))

    def _on_pod(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        ns = obj["metadata"].get("namespace", "")
        if not self.pdbs.by_ns.get(ns):
            return
        labels = [obj["metadata"].get("labels") or {}]
        if old is not None:
            labels.append(old["metadata"].get("labels") or {})
        self._touch_ns(ns, labels)

    def _on_scalable(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        ns = obj["metadata"].get("namespace", "")
        if self.pdbs.by_ns.get(ns):
            tl = ((((obj.get("spec") or {}).get("template") or {}).get("metadata") or {})
                  .get("labels") or {})
            self._touch_ns(ns, [tl])

    def _scale_of(self, pod: dict[str, Any]) -> tuple[str, int] | None:
        ref = pu.controller_ref(pod)
        if ref is None:
            return None
        ns = pod["metadata"].get("namespace", "")
        kind = ref.get("kind")
        if kind == "ReplicaSet":
            rs = self.rs.get(ns, ref.get("name", ""))
            if rs is None:
                return None
            dref = pu.controller_ref(rs)
            if dref is not None and dref.get("kind") == "Deployment":
                d = self.deps.get(ns, dref.get("name", ""))
                if d is not None:
                    return d["metadata"]["uid"], int((d.get("spec") or {}).get("replicas", 1))
            return rs["metadata"]["uid"], int((rs.get("spec") or {}).get("replicas", 1))
        if kind == "StatefulSet":
            s = self.sts.get(ns, ref.get("name", ""))
            if s is not None:
                return s["metadata"]["uid"], int((s.get("spec") or {}).get("replicas", 1))
        return None

    def sync(self, key: pu.Key) -> None:
        pdb = self.pdbs.get(*key)
        if pdb is None or pu.is_deleting(pdb):
            return
        spec = pdb.get("spec") or {}
        sel = self._sel(pdb)
        pods = [p for p in self.pods.in_namespace(key[0])
                if sel.matches(p["metadata"].get("labels") or {})]
        old_st = pdb.get("status") or {}
        disrupted = dict(old_st.get("disruptedPods") or {})
        by_name = {p["metadata"]["name"]: p for p in pods}
        now_wall = self.world.clock.wall_now()
        for name, ts in list(disrupted.items()):
            p = by_name.get(name)
            if p is None or pu.is_deleting(p) or _age(ts, now_wall) > DISRUPTED_TIMEOUT_S:
                del disrupted[name]
        healthy = sum(1 for p in pods if pu.is_pod_ready(p) and not pu.is_deleting(p) and
                      p["metadata"]["name"] not in disrupted)
        min_av = spec.get("minAvailable")
        max_un = spec.get("maxUnavailable")

        def scale_total() -> int:
            seen: dict[str, int] = {}
            extra = 0
            for p in pods:
                sc = self._scale_of(p)
                if sc is None:
                    extra += 0 if pu.is_terminal(p) else 1
                else:
                    seen[sc[0]] = sc[1]
            return sum(seen.values()) + extra

        if max_un is not None:
            expected = scale_total()
            desired = max(0, expected - pu.int_or_percent(max_un, expected, True))
        elif min_av is not None and isinstance(min_av, str) and min_av.endswith("%"):
            expected = scale_total()
            desired = pu.int_or_percent(min_av, expected, True)
        elif min_av is not None:
            expected = sum(1 for p in pods if not pu.is_terminal(p))
            desired = int(min_av)
        else:
            expected = desired = 0
        allowed = max(0, healthy - desired)
        st: dict[str, Any] = {"observedGeneration": pdb["metadata"].get("generation", 1)}
        if disrupted:
            st["disruptedPods"] = disrupted
        st.update({"disruptionsAllowed": allowed, "currentHealthy": healthy,
                   "desiredHealthy": desired, "expectedPods": expected})
        conds = copy.deepcopy(old_st.get("conditions") or [])
        now = self.clock.timestamp()
        if allowed > 0:
            pu.set_condition(conds, "DisruptionAllowed", "True", "SufficientPods", "", now)
        else:
            pu.set_condition(conds, "DisruptionAllowed", "False", "InsufficientPods", "", now)
        for c in conds:
            c.setdefault("observedGeneration", st["observedGeneration"])
            c["observedGeneration"] = st["observedGeneration"]
        st["conditions"] = conds
        if st == old_st:
            return
        uid = pdb["metadata"]["uid"]

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            if cur["metadata"]["uid"] != uid:
                return None
            cur["status"] = st
            return cur

        self.pdbs.observe(pu.ignore_missing(lambda: self.client.modify(
            "policy/v1", "PodDisruptionBudget", key[1], fn, key[0], subresource="status")))


def _age(ts: str, now: dt.datetime) -> float:
    try:
        t = dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except (TypeError, ValueError):
        return 0.0
    return (now - t).total_seconds()


def setup(world: Any) -> Disruption:
    return Disruption(world)
