"""The Deployment controller: Deployment -> ReplicaSets (``pod-template-hash``) -> Pods.

The ReplicaSet whose template equals the Deployment's (ignoring ``pod-template-hash``) is
the new one; a template change creates a ReplicaSet ``<deploy>-<hash>`` and rolls:
RollingUpdate scales the new one up within ``maxSurge`` and the old ones down while
``maxUnavailable`` allows (unhealthy old replicas first), Recreate scales the old ones to
zero and waits for their pods to go before scaling the new one up. ``paused`` stops
scaling. Old ReplicaSets beyond ``revisionHistoryLimit`` are deleted.

Status: ``replicas``, ``updatedReplicas``, ``readyReplicas``, ``availableReplicas``,
``unavailableReplicas``, ``observedGeneration`` and the conditions ``Available``
(MinimumReplicasAvailable / MinimumReplicasUnavailable) and ``Progressing``
(NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated, NewReplicaSetAvailable,
ProgressDeadlineExceeded after ``progressDeadlineSeconds`` of simulated time).

The ``deployment.kubernetes.io/revision`` annotation is kept on the ReplicaSets only: the
real controller also copies it onto the Deployment through the status endpoint (which keeps
annotations there); our store's status endpoint does not, and a main-resource write would
bump the Deployment's generation.

Upstream: kubernetes/kubernetes ``v1.32.4`` (RKE2 ``v1.32.4+rke2r1``, Harvester
v1.5.1) and ``v1.33.3`` (RKE2 ``v1.33.3+rke2r1``, Harvester v1.6.0),
``pkg/controller/deployment/`` (``deployment_controller.go``, ``sync.go``,
``rolling.go``, ``recreate.go``, ``progress.go``, ``util/deployment_util.go``).
Not modelled: the revision annotation on the Deployment (above), proportional scaling of a
scale change during a rollout (not checked), orphan adoption/release, the ``ReplicaFailure``
condition.
"""

from __future__ import annotations

import copy
from typing import Any

from . import podutil as pu

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX = "deployment.kubernetes.io/max-replicas"


def _replicas(obj: dict[str, Any]) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _st(obj: dict[str, Any], field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def _revision(rs: dict[str, Any]) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


class Deployments:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.clock = world.clock
        self.client = world.client_for("deployment-controller")
        self.deps = pu.informer(world, "apps/v1", "Deployment")
        self.rs = pu.informer(world, "apps/v1", "ReplicaSet")
        self.pods = pu.informer(world, "v1", "Pod")
        self.batch = pu.Batcher(world, self.sync)
        self.progress_at: dict[str, float] = {}   # deployment uid -> sim time of last progress
        self._deadline_timers: dict[pu.Key, Any] = {}
        self.deps.add_handler(self._on_dep)
        self.rs.add_handler(self._on_rs)
        for d in self.deps.all():
            self.batch.add(pu.key_of(d))

    def _on_dep(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ == "DELETED":
            self.progress_at.pop(obj["metadata"].get("uid", ""), None)
            return
        self.batch.add(pu.key_of(obj))

    def _on_rs(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = pu.controller_ref(obj)
        if ref is not None and ref.get("kind") == "Deployment":
            self.batch.add((obj["metadata"].get("namespace", ""), ref.get("name", "")))

    # ------------------------------------------------------------------ helpers
    def _scale(self, rs: dict[str, Any], n: int, dep: dict[str, Any],
               surge: int) -> dict[str, Any]:
        if _replicas(rs) == n and (rs["metadata"].get("annotations") or {}).get(DESIRED) == \
                str(_replicas(dep)):
            return rs
        ns, name = pu.key_of(rs)
        uid = rs["metadata"]["uid"]

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            if cur["metadata"]["uid"] != uid:
                return None
            cur.setdefault("spec", {})["replicas"] = n
            ann = cur["metadata"].setdefault("annotations", {})
            ann[DESIRED] = str(_replicas(dep))
            ann[MAX] = str(_replicas(dep) + surge)
            return cur

        out = self.client.modify("apps/v1", "ReplicaSet", name, fn, ns)
        self.rs.observe(out)
        if _replicas(rs) != n:
            pu.record_event(self.client, dep, "Normal", "ScalingReplicaSet",
                            f"Scaled {'up' if n > _replicas(rs) else 'down'} replica set "
                            f"{name} from {_replicas(rs)} to {n}", "deployment-controller",
                            None, self.clock)
        return out  # type: ignore[no-any-return]

    def _create_rs(self, dep: dict[str, Any], replicas: int, revision: int,
                   surge: int) -> dict[str, Any]:
        ns, dname = pu.key_of(dep)
        spec = dep.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        h = pu.template_hash(template, int((dep.get("status") or {}).get("collisionCount") or 0))
        tmd = template.setdefault("metadata", {})
        tmd.setdefault("labels", {})[HASH_LABEL] = h
        sel = copy.deepcopy(spec.get("selector") or {})
        sel.setdefault("matchLabels", {})[HASH_LABEL] = h
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": f"{dname}-{h}", "namespace": ns,
                           "labels": dict(tmd["labels"]),
                           "annotations": {REVISION: str(revision),
                                           DESIRED: str(_replicas(dep)),
                                           MAX: str(_replicas(dep) + surge)},
                           "ownerReferences": [pu.owner_ref(dep)]},
              "spec": {"replicas": replicas, "minReadySeconds": int(spec.get(
                  "minReadySeconds") or 0), "selector": sel, "template": template}}
        out = self.client.create(rs, ns)
        self.rs.observe(out)
        pu.record_event(self.client, dep, "Normal", "ScalingReplicaSet",
                        f"Scaled up replica set {out['metadata']['name']} from 0 to {replicas}",
                        "deployment-controller", None, self.clock)
        return out  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ sync
    def sync(self, key: pu.Key) -> None:
        dep = self.deps.get(*key)
        if dep is None or pu.is_deleting(dep):
            return
        spec = dep.get("spec") or {}
        uid = dep["metadata"]["uid"]
        template = spec.get("template") or {}
        rss = sorted(self.rs.owned_by(uid),
                     key=lambda r: (r["metadata"].get("creationTimestamp") or "",
                                    _revision(r), r["metadata"]["name"]))
        new_rs = None
        for r in rss:
            if pu.strip_hash_label((r.get("spec") or {}).get("template") or {},
                                   HASH_LABEL) == template:
                new_rs = r
        olds = [r for r in rss if r is not new_rs]
        replicas = _replicas(dep)
        strategy = spec.get("strategy") or {}
        rolling = (strategy.get("type") or "RollingUpdate") == "RollingUpdate"
        ru = strategy.get("rollingUpdate") or {}
        surge = pu.int_or_percent(ru.get("maxSurge"), replicas, True, "25%") if rolling else 0
        unavail = pu.int_or_percent(ru.get("maxUnavailable"), replicas, False, "25%") \
            if rolling else replicas
        if rolling and surge == 0 and unavail == 0:
            unavail = 1
        created_new = False
        if not spec.get("paused"):
            if new_rs is None:
                revision = max([_revision(r) for r in rss] + [0]) + 1
                if rolling:
                    total = sum(_replicas(r) for r in olds)
                    start = max(0, min(replicas, replicas + surge - total))
                else:
                    old_pods = any(pu.is_active(p) for r in olds
                                   for p in self.pods.owned_by(r["metadata"]["uid"]))
                    start = 0 if (old_pods or any(_replicas(r) for r in olds)) else replicas
                new_rs = self._create_rs(dep, start, revision, surge)
                created_new = True
                self.progress_at[uid] = self.clock.now()
            if rolling:
                olds = self._roll(dep, new_rs, olds, replicas, surge, unavail)
            else:
                olds = self._recreate(dep, new_rs, olds, replicas)
            self._cleanup(dep, olds)
        self._status(dep, new_rs, olds, replicas, unavail, created_new)

    def _roll(self, dep: dict[str, Any], new: dict[str, Any], olds: list[dict[str, Any]],
              replicas: int, surge: int, unavail: int) -> list[dict[str, Any]]:
        cur = _replicas(new)
        if cur < replicas:
            total = cur + sum(_replicas(r) for r in olds)
            up = min(replicas + surge - total, replicas - cur)
            if up > 0:
                new = self._scale(new, cur + up, dep, surge)
        elif cur > replicas:
            new = self._scale(new, replicas, dep, surge)
        if not olds:
            return olds
        all_pods = _replicas(new) + sum(_replicas(r) for r in olds)
        min_available = replicas - unavail
        new_unavailable = _replicas(new) - _st(new, "availableReplicas")
        budget = all_pods - min_available - new_unavailable
        out = []
        for r in olds:  # oldest first: clean up unhealthy replicas
            bad = _replicas(r) - _st(r, "availableReplicas")
            if budget > 0 and bad > 0:
                d = min(budget, bad)
                r = self._scale(r, _replicas(r) - d, dep, surge)
                budget -= d
            out.append(r)
        available = _st(new, "availableReplicas") + sum(
            min(_st(r, "availableReplicas"), _replicas(r)) for r in out)
        can = available - min_available
        olds, out = out, []
        for r in olds:
            if can > 0 and _replicas(r) > 0:
                d = min(can, _replicas(r))
                r = self._scale(r, _replicas(r) - d, dep, surge)
                can -= d
            out.append(r)
        return out

    def _recreate(self, dep: dict[str, Any], new: dict[str, Any], olds: list[dict[str, Any]],
                  replicas: int) -> list[dict[str, Any]]:
        out = [self._scale(r, 0, dep, 0) if _replicas(r) else r for r in olds]
        old_pods = any(pu.is_active(p) or not pu.is_terminal(p) for r in out
                       for p in self.pods.owned_by(r["metadata"]["uid"]))
        if not old_pods and _replicas(new) != replicas:
            self._scale(new, replicas, dep, 0)
        return out

    def _cleanup(self, dep: dict[str, Any], olds: list[dict[str, Any]]) -> None:
        limit = int((dep.get("spec") or {}).get("revisionHistoryLimit", 10))
        idle = [r for r in olds if _replicas(r) == 0 and _st(r, "replicas") == 0 and
                not pu.is_deleting(r)]
        for r in idle[:max(0, len(idle) - limit)]:
            self.rs.observe_deleted(self.client.delete(
                "apps/v1", "ReplicaSet", r["metadata"]["name"], r["metadata"]["namespace"]))

    # ------------------------------------------------------------------ status
    def _status(self, dep: dict[str, Any], new: dict[str, Any] | None,
                olds: list[dict[str, Any]], replicas: int, unavail: int,
                created_new: bool) -> None:
        ns, name = pu.key_of(dep)
        uid = dep["metadata"]["uid"]
        all_rs = ([new] if new is not None else []) + olds
        total_spec = sum(_replicas(r) for r in all_rs)
        available = sum(_st(r, "availableReplicas") for r in all_rs)
        st: dict[str, Any] = {
            "observedGeneration": dep["metadata"].get("generation", 1),
            "replicas": sum(_st(r, "replicas") for r in all_rs),
            "updatedReplicas": _st(new, "replicas") if new is not None else 0,
            "readyReplicas": sum(_st(r, "readyReplicas") for r in all_rs),
            "availableReplicas": available,
            "unavailableReplicas": max(0, total_spec - available),
        }
        st = {k: v for k, v in st.items() if v or k == "observedGeneration"}
        old_st = dep.get("status") or {}
        if old_st.get("collisionCount") is not None:
            st["collisionCount"] = old_st["collisionCount"]
        now_ts = self.clock.timestamp()
        now = self.clock.now()
        conds = copy.deepcopy(old_st.get("conditions") or [])
        if available >= replicas - unavail:
            _cond(conds, "Available", "True", "MinimumReplicasAvailable",
                  "Deployment has minimum availability.", now_ts)
        else:
            _cond(conds, "Available", "False", "MinimumReplicasUnavailable",
                  "Deployment does not have minimum availability.", now_ts)
        rs_name = new["metadata"]["name"] if new is not None else ""
        complete = (new is not None and _replicas(new) == replicas and
                    _st(new, "replicas") == replicas and
                    _st(new, "availableReplicas") >= replicas and
                    sum(_st(r, "replicas") for r in olds) == 0)
        progressed = _progress_view(st) != _progress_view(old_st)
        deadline = (dep.get("spec") or {}).get("progressDeadlineSeconds", 600)
        prog = pu.get_condition(dep, "Progressing")
        if dep.get("spec", {}).get("paused"):
            _cond(conds, "Progressing", "Unknown", "DeploymentPaused",
                  "Deployment is paused", now_ts)
        elif complete:
            _cond(conds, "Progressing", "True", "NewReplicaSetAvailable",
                  f'ReplicaSet "{rs_name}" has successfully progressed.', now_ts)
        elif created_new:
            _cond(conds, "Progressing", "True", "NewReplicaSetCreated",
                  f'Created new replica set "{rs_name}"', now_ts)
        elif progressed or prog is None or prog.get("reason") == "NewReplicaSetAvailable":
            self.progress_at[uid] = now
            reason = "ReplicaSetUpdated" if prog is not None else "FoundNewReplicaSet"
            msg = (f'ReplicaSet "{rs_name}" is progressing.' if prog is not None
                   else f'Found new replica set "{rs_name}"')
            _cond(conds, "Progressing", "True", reason, msg, now_ts)
        elif deadline is not None and prog.get("reason") != "ProgressDeadlineExceeded":
            since = self.progress_at.setdefault(uid, now)
            left = since + float(deadline) - now
            if left <= 0:
                _cond(conds, "Progressing", "False", "ProgressDeadlineExceeded",
                      f'ReplicaSet "{rs_name}" has timed out progressing.', now_ts)
            else:
                self._deadline_timer(pu.key_of(dep), left)
        if conds:
            conds.sort(key=lambda c: {"Available": 0, "Progressing": 1}.get(c.get("type"), 2))
            st["conditions"] = conds
        if st == old_st:
            return

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            if cur["metadata"]["uid"] != uid:
                return None
            cur["status"] = st
            return cur

        self.deps.observe(pu.ignore_missing(lambda: self.client.modify(
            "apps/v1", "Deployment", name, fn, ns, subresource="status")))

    def _deadline_timer(self, key: pu.Key, left: float) -> None:
        if key in self._deadline_timers:
            return

        def fire() -> None:
            self._deadline_timers.pop(key, None)
            self.batch.add(key)
        self._deadline_timers[key] = self.world.runtime.after(left + 0.01, fire)


def _progress_view(st: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(st.get(k, 0) for k in ("replicas", "updatedReplicas", "readyReplicas",
                                        "availableReplicas"))


def _cond(conds: list[dict[str, Any]], type_: str, status: str, reason: str, message: str,
          now: str) -> None:
    for c in conds:
        if c.get("type") == type_:
            if (c.get("status"), c.get("reason"), c.get("message")) == (status, reason, message):
                return
            if c.get("status") != status:
                c["lastTransitionTime"] = now
            c.update({"status": status, "reason": reason, "message": message,
                      "lastUpdateTime": now})
            return
    conds.append({"type": type_, "status": status, "lastUpdateTime": now,
                  "lastTransitionTime": now, "reason": reason, "message": message})


def setup(world: Any) -> Deployments:
    return Deployments(world)
