"""The DaemonSet controller: one pod per eligible node.

A node is eligible when the template's nodeSelector / required node affinity match it and
its NoSchedule/NoExecute taints are tolerated by the template plus the tolerations the
controller adds to every daemon pod (not-ready, unreachable, disk/memory/pid pressure,
unschedulable; network-unavailable for hostNetwork). Pods are created with a required node
affinity on ``metadata.name`` (the scheduler binds them, as in Kubernetes), labels
``controller-revision-hash`` and ``pod-template-generation``. Failed daemon pods are
deleted and replaced; pods on nodes that are no longer eligible are deleted.
RollingUpdate replaces outdated pods at most ``maxUnavailable`` (default 1) at a time;
OnDelete leaves them. ControllerRevision objects are not written.

Status: desired/current/updatedNumberScheduled, numberMisscheduled, numberReady,
numberAvailable, numberUnavailable, observedGeneration.

Upstream: kubernetes/kubernetes ``v1.32.4`` (RKE2 ``v1.32.4+rke2r1``, Harvester
v1.5.1) and ``v1.33.3`` (RKE2 ``v1.33.3+rke2r1``, Harvester v1.6.0),
``pkg/controller/daemon/`` (``daemon_controller.go``, ``update.go``,
``util/daemonset_util.go`` for the added tolerations and the node-name affinity).
Not modelled: ControllerRevisions and rollback (history), RollingUpdate ``maxSurge``, the
failed-pod deletion back-off, slow-start batched creation, orphan adoption/release,
``status.collisionCount`` and ``conditions``.
"""

from __future__ import annotations

import copy
from typing import Any

from . import podutil as pu
from .replicasets import availability

HASH = "controller-revision-hash"
GEN = "pod-template-generation"
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
     "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
HOST_NETWORK_TOLERATION = {"key": "node.kubernetes.io/network-unavailable",
                           "operator": "Exists", "effect": "NoSchedule"}


def _target_node(pod: dict[str, Any]) -> str:
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    req = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in req.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return str(f["values"][0])
    return ""


class DaemonSets:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.clock = world.clock
        self.client = world.client_for("daemon-set-controller")
        self.ds = pu.informer(world, "apps/v1", "DaemonSet")
        self.nodes = pu.informer(world, "v1", "Node")
        self.pods = pu.informer(world, "v1", "Pod")
        self.av = availability(world)
        self.batch = pu.Batcher(world, self.sync)
        self.ds.add_handler(self._on_ds)
        self.nodes.add_handler(self._on_node)
        self.pods.add_handler(self._on_pod)
        for d in self.ds.all():
            self.batch.add(pu.key_of(d))

    def _on_ds(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ != "DELETED":
            self.batch.add(pu.key_of(obj))

    def _on_node(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if old is not None and type_ == "MODIFIED" and \
                (obj["metadata"].get("labels"), (obj.get("spec") or {}).get("taints")) == \
                (old["metadata"].get("labels"), (old.get("spec") or {}).get("taints")):
            return
        for d in self.ds.all():
            self.batch.add(pu.key_of(d))

    def _on_pod(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = pu.controller_ref(obj)
        if ref is not None and ref.get("kind") == "DaemonSet":
            self.batch.add((obj["metadata"].get("namespace", ""), ref.get("name", "")))

    def _tolerations(self, template: dict[str, Any]) -> list[dict[str, Any]]:
        spec = template.get("spec") or {}
        tols = list(spec.get("tolerations") or [])
        extra = list(DEFAULT_TOLERATIONS)
        if spec.get("hostNetwork"):
            extra.append(HOST_NETWORK_TOLERATION)
        for t in extra:
            if not any(x.get("key") == t["key"] and x.get("effect") == t["effect"]
                       for x in tols):
                tols.append(dict(t))
        return tols

    def _eligible(self, template: dict[str, Any], tols: list[dict[str, Any]],
                  node: dict[str, Any]) -> bool:
        as_pod = {"spec": template.get("spec") or {}}
        if not pu.node_affinity_matches(as_pod, node):
            return False
        return all(pu.tolerates(tols, t) for t in pu.taints_of(node)
                   if t.get("effect") in ("NoSchedule", "NoExecute"))

    def _pod(self, ds: dict[str, Any], template: dict[str, Any], tols: list[dict[str, Any]],
             node: str, h: str) -> dict[str, Any]:
        t = copy.deepcopy(template)
        md = t.get("metadata") or {}
        labels = {**(md.get("labels") or {}), HASH: h,
                  GEN: str(ds["metadata"].get("generation", 1))}
        spec = t.get("spec") or {}
        spec["tolerations"] = tols
        aff = spec.setdefault("affinity", {})
        aff["nodeAffinity"] = {**(aff.get("nodeAffinity") or {}),
                               "requiredDuringSchedulingIgnoredDuringExecution": {
                                   "nodeSelectorTerms": [{"matchFields": [{
                                       "key": "metadata.name", "operator": "In",
                                       "values": [node]}]}]}}
        pmd: dict[str, Any] = {"generateName": f"{ds['metadata']['name']}-",
                               "namespace": ds["metadata"]["namespace"], "labels": labels,
                               "ownerReferences": [pu.owner_ref(ds)]}
        if md.get("annotations"):
            pmd["annotations"] = dict(md["annotations"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pmd, "spec": spec}

    def sync(self, key: pu.Key) -> None:
        ds = self.ds.get(*key)
        if ds is None or pu.is_deleting(ds):
            return
        spec = ds.get("spec") or {}
        template = spec.get("template") or {}
        tols = self._tolerations(template)
        h = pu.template_hash(template)
        uid = ds["metadata"]["uid"]
        pods = self.pods.owned_by(uid)
        by_node: dict[str, list[dict[str, Any]]] = {}
        for p in pods:
            if pu.phase(p) == "Failed" and not pu.is_deleting(p):
                self._delete(p)
                continue
            if pu.is_active(p):
                by_node.setdefault(_target_node(p), []).append(p)
        eligible = sorted(n["metadata"]["name"] for n in self.nodes.all()
                          if self._eligible(template, tols, n))
        eligible_set = set(eligible)
        for node, ps in by_node.items():
            if node not in eligible_set:
                for p in ps:
                    self._delete(p)
            elif len(ps) > 1:
                for p in sorted(ps, key=lambda p: p["metadata"].get("creationTimestamp") or "",
                                reverse=True)[:-1]:
                    self._delete(p)
        for node in eligible:
            if not by_node.get(node):
                created = self.client.create(self._pod(ds, template, tols, node, h), key[0])
                self.pods.observe(created)
        # rolling update
        strategy = spec.get("updateStrategy") or {}
        min_ready = float(spec.get("minReadySeconds") or 0)
        if (strategy.get("type") or "RollingUpdate") == "RollingUpdate":
            budget = pu.int_or_percent((strategy.get("rollingUpdate") or {}).get(
                "maxUnavailable"), len(eligible), True, 1)
            budget = max(budget, 1) if eligible else 0
            unavailable = 0
            old = []
            for node in eligible:
                ps = [p for p in by_node.get(node) or [] if not pu.is_deleting(p)]
                if not ps or not self.av.available(ps[0], min_ready)[0]:
                    unavailable += 1
                if ps and (ps[0]["metadata"].get("labels") or {}).get(HASH) != h:
                    old.append(ps[0])
            old.sort(key=lambda p: (self.av.available(p, min_ready)[0], p["metadata"]["name"]))
            for p in old:
                avail = self.av.available(p, min_ready)[0]
                if avail and unavailable >= budget:
                    break
                self._delete(p)
                if avail:
                    unavailable += 1
        self._status(ds, eligible_set, h, min_ready)

    def _delete(self, pod: dict[str, Any]) -> None:
        ns, name = pu.key_of(pod)
        self.pods.observe_deleted(self.client.delete("v1", "Pod", name, ns))

    def _status(self, ds: dict[str, Any], eligible: set[str], h: str, min_ready: float) -> None:
        pods = [p for p in self.pods.owned_by(ds["metadata"]["uid"]) if pu.is_active(p)]
        scheduled = {}
        for p in pods:
            node = (p.get("spec") or {}).get("nodeName")
            if node:
                scheduled.setdefault(node, p)
        current = sum(1 for n in scheduled if n in eligible)
        mis = sum(1 for n in scheduled if n not in eligible)
        ready = sum(1 for n, p in scheduled.items() if n in eligible and pu.is_pod_ready(p))
        updated = sum(1 for n, p in scheduled.items()
                      if n in eligible and (p["metadata"].get("labels") or {}).get(HASH) == h)
        available = sum(1 for n, p in scheduled.items()
                        if n in eligible and self.av.available(p, min_ready)[0])
        st: dict[str, Any] = {"currentNumberScheduled": current, "numberMisscheduled": mis,
                              "desiredNumberScheduled": len(eligible), "numberReady": ready,
                              "observedGeneration": ds["metadata"].get("generation", 1),
                              "updatedNumberScheduled": updated, "numberAvailable": available,
                              "numberUnavailable": max(0, len(eligible) - available)}
        st = {k: v for k, v in st.items() if v or k in (
            "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled",
            "numberReady")}
        old_st = dict(ds.get("status") or {})
        if old_st.get("conditions"):
            st["conditions"] = old_st["conditions"]
        if st == old_st:
            return
        uid = ds["metadata"]["uid"]

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            if cur["metadata"]["uid"] != uid:
                return None
            cur["status"] = st
            return cur

        ns, name = pu.key_of(ds)
        self.ds.observe(pu.ignore_missing(lambda: self.client.modify(
            "apps/v1", "DaemonSet", name, fn, ns, subresource="status")))


def setup(world: Any) -> DaemonSets:
    return DaemonSets(world)
