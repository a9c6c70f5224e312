"""The StatefulSet controller (basic): pods ``<name>-<ordinal>`` with stable names.

OrderedReady (default) creates ordinal *i* only when 0..i-1 are Running and Ready and
removes the highest ordinal first, one at a time; Parallel creates and removes all at once.
PVCs from ``volumeClaimTemplates`` are created as ``<template>-<pod>`` (retained). Failed
pods are deleted and recreated. RollingUpdate replaces pods not at the update revision from
the highest ordinal down to ``partition``, one at a time, when all pods are ready; OnDelete
leaves them. Pods carry ``controller-revision-hash`` (``<name>-<hash>``),
``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``; ``hostname``
and ``subdomain`` (``serviceName``) are set. ControllerRevisions are not written.

Status: replicas, readyReplicas, currentReplicas, updatedReplicas, availableReplicas,
currentRevision, updateRevision, observedGeneration, collisionCount.

Upstream: kubernetes/kubernetes ``v1.32.4`` (RKE2 ``v1.32.4+rke2r1``, Harvester
v1.5.1) and ``v1.33.3`` (RKE2 ``v1.33.3+rke2r1``, Harvester v1.6.0),
``pkg/controller/statefulset/`` (``stateful_set_control.go``,
``stateful_pod_control.go``, ``stateful_set_utils.go``).
Not modelled: ControllerRevisions and rollback, ``persistentVolumeClaimRetentionPolicy``
(PVCs are always retained), ``ordinals.start``, RollingUpdate
``maxUnavailable``, status ``conditions``, orphan adoption.
"""

from __future__ import annotations

import copy
from typing import Any

from ..api import errors
from . import podutil as pu
from .replicasets import availability

HASH = "controller-revision-hash"
POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"


def _ordinal(sts_name: str, pod: dict[str, Any]) -> int | None:
    name = pod["metadata"]["name"]
    prefix = sts_name + "-"
    if not name.startswith(prefix) or not name[len(prefix):].isdigit():
        return None
    return int(name[len(prefix):])


class StatefulSets:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.client = world.client_for("statefulset-controller")
        self.sts = pu.informer(world, "apps/v1", "StatefulSet")
        self.pods = pu.informer(world, "v1", "Pod")
        self.av = availability(world)
        self.batch = pu.Batcher(world, self.sync)
        self.sts.add_handler(self._on_sts)
        self.pods.add_handler(self._on_pod)
        for s in self.sts.all():
            self.batch.add(pu.key_of(s))

    def _on_sts(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ != "DELETED":
            self.batch.add(pu.key_of(obj))

    def _on_pod(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = pu.controller_ref(obj)
        if ref is not None and ref.get("kind") == "StatefulSet":
            self.batch.add((obj["metadata"].get("namespace", ""), ref.get("name", "")))

    def _revision(self, sts: dict[str, Any]) -> str:
        h = pu.template_hash((sts.get("spec") or {}).get("template") or {})
        return f"{sts['metadata']['name']}-{h}"

    def _pod(self, sts: dict[str, Any], i: int, rev: str) -> dict[str, Any]:
        name = sts["metadata"]["name"]
        ns = sts["metadata"]["namespace"]
        spec = sts.get("spec") or {}
        t = copy.deepcopy(spec.get("template") or {})
        md = t.get("metadata") or {}
        pname = f"{name}-{i}"
        labels = {**(md.get("labels") or {}), HASH: rev, POD_NAME: pname, POD_INDEX: str(i)}
        pspec = t.get("spec") or {}
        pspec["hostname"] = pname
        if spec.get("serviceName"):
            pspec["subdomain"] = spec["serviceName"]
        vols = list(pspec.get("volumes") or [])
        for vct in spec.get("volumeClaimTemplates") or []:
            vname = (vct.get("metadata") or {}).get("name", "data")
            claim = f"{vname}-{pname}"
            self._ensure_pvc(sts, vct, claim)
            if not any(v.get("name") == vname for v in vols):
                vols.append({"name": vname, "persistentVolumeClaim": {"claimName": claim}})
        if vols:
            pspec["volumes"] = vols
        pmd: dict[str, Any] = {"name": pname, "namespace": ns, "labels": labels,
                               "ownerReferences": [pu.owner_ref(sts)]}
        if md.get("annotations"):
            pmd["annotations"] = dict(md["annotations"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pmd, "spec": pspec}

    def _ensure_pvc(self, sts: dict[str, Any], vct: dict[str, Any], claim: str) -> None:
        ns = sts["metadata"]["namespace"]
        if self.client.try_get("v1", "PersistentVolumeClaim", claim, ns) is not None:
            return
        sel = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": claim, "namespace": ns, "labels": dict(sel)},
               "spec": copy.deepcopy(vct.get("spec") or {})}
        try:
            self.client.create(pvc, ns)
        except errors.ApiError as exc:
            if exc.code != 409:
                raise

    def _delete(self, pod: dict[str, Any]) -> None:
        ns, name = pu.key_of(pod)
        self.pods.observe_deleted(self.client.delete("v1", "Pod", name, ns))

    def sync(self, key: pu.Key) -> None:
        sts = self.sts.get(*key)
        if sts is None or pu.is_deleting(sts):
            return
        spec = sts.get("spec") or {}
        name = key[1]
        replicas = int(spec.get("replicas", 1))
        parallel = spec.get("podManagementPolicy") == "Parallel"
        rev = self._revision(sts)
        min_ready = float(spec.get("minReadySeconds") or 0)
        pods: dict[int, dict[str, Any]] = {}
        for p in self.pods.owned_by(sts["metadata"]["uid"]):
            i = _ordinal(name, p)
            if i is not None:
                pods[i] = p
        for i, p in list(pods.items()):
            if pu.phase(p) == "Failed" and not pu.is_deleting(p):
                self._delete(p)
        # create missing ordinals
        for i in range(replicas):
            p = pods.get(i)
            if p is None:
                created = self.client.create(self._pod(sts, i, rev), key[0])
                self.pods.observe(created)
                pods[i] = created
                if not parallel:
                    break
            elif not parallel and (not pu.is_pod_ready(p) or pu.is_deleting(p)):
                break
        # remove ordinals beyond replicas, highest first
        extra = sorted((i for i in pods if i >= replicas), reverse=True)
        for i in extra:
            p = pods[i]
            if not pu.is_deleting(p):
                self._delete(p)
            if not parallel:
                break
        # rolling update
        strategy = spec.get("updateStrategy") or {}
        if (strategy.get("type") or "RollingUpdate") == "RollingUpdate":
            partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
            live = [pods[i] for i in range(replicas) if i in pods]
            if len(live) == replicas and all(pu.is_pod_ready(p) and not pu.is_deleting(p)
                                             for p in live):
                for i in range(replicas - 1, partition - 1, -1):
                    p = pods[i]
                    if (p["metadata"].get("labels") or {}).get(HASH) != rev:
                        self._delete(p)
                        break
        self._status(sts, rev, min_ready)

    def _status(self, sts: dict[str, Any], rev: str, min_ready: float) -> None:
        pods = [p for p in self.pods.owned_by(sts["metadata"]["uid"])
                if not pu.is_terminal(p) and _ordinal(sts["metadata"]["name"], p) is not None]
        old_st = dict(sts.get("status") or {})
        updated = sum(1 for p in pods if (p["metadata"].get("labels") or {}).get(HASH) == rev)
        current_rev = old_st.get("currentRevision") or rev
        if updated == len(pods) == int((sts.get("spec") or {}).get("replicas", 1)):
            current_rev = rev
        st: dict[str, Any] = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
            "readyReplicas": sum(1 for p in pods if pu.is_pod_ready(p)),
            "currentReplicas": sum(1 for p in pods if (p["metadata"].get("labels") or {})
                                   .get(HASH) == current_rev),
            "updatedReplicas": updated,
            "availableReplicas": sum(1 for p in pods if self.av.available(p, min_ready)[0]),
            "currentRevision": current_rev, "updateRevision": rev,
            "collisionCount": int(old_st.get("collisionCount") or 0),
        }
        st = {k: v for k, v in st.items() if v or k in ("replicas", "availableReplicas",
                                                        "observedGeneration",
                                                        "collisionCount")}
        if old_st.get("conditions"):
            st["conditions"] = old_st["conditions"]
        if st == old_st:
            return
        uid = sts["metadata"]["uid"]

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            if cur["metadata"]["uid"] != uid:
                return None
            cur["status"] = st
            return cur

        ns, name = pu.key_of(sts)
        self.sts.observe(pu.ignore_missing(lambda: self.client.modify(
            "apps/v1", "StatefulSet", name, fn, ns, subresource="status")))


def setup(world: Any) -> StatefulSets:
    return StatefulSets(world)
