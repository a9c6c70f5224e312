"""The Job controller (batch/v1) and the TTL-after-finished controller.

Pods are created from the template with the labels the API server and the controller add
(``batch.kubernetes.io/job-name``, ``job-name``, ``batch.kubernetes.io/controller-uid``,
``controller-uid``), up to ``parallelism`` at a time and ``completions`` in total
(``completions`` unset = work queue: done once a pod succeeded and none is active).
Failed pods (and, with ``restartPolicy: OnFailure``, container restarts) count against
``backoffLimit``; a new pod after failures waits the exponential back-off (10 s doubling,
at most 10 min). ``activeDeadlineSeconds`` runs in simulated time from ``startTime``.
``suspend`` deletes the active pods (Suspended=True JobSuspended) and resuming restarts the
clock (JobResumed). A pod deleted before it finished counts as failed.

Terminal conditions follow Kubernetes 1.31+: first ``FailureTarget`` (reasons
BackoffLimitExceeded / DeadlineExceeded) or ``SuccessCriteriaMet`` (CompletionsReached),
the remaining pods are deleted, then ``Failed`` / ``Complete`` (+ ``completionTime``).
``ttlSecondsAfterFinished`` deletes the finished Job (foreground) after that many
simulated seconds. Pod failure policies, Indexed completion mode, successPolicy and the
``batch.kubernetes.io/job-tracking`` finalizer are not simulated.

Upstream: kubernetes/kubernetes ``v1.32.4`` (RKE2 ``v1.32.4+rke2r1``, Harvester
v1.5.1) and ``v1.33.3`` (RKE2 ``v1.33.3+rke2r1``, Harvester v1.6.0),
``pkg/controller/job/job_controller.go`` (``syncJob``,
``manageJob``, ``getNewFinishedPods``), ``backoff_utils.go``, and
``pkg/controller/ttlafterfinished/ttlafterfinished_controller.go``.
Not modelled: besides the features named above, tracking through
``status.uncountedTerminatedPods`` (written empty), ``podReplacementPolicy: Failed`` (a
terminating pod is always replaced at once, the ``TerminatingOrFailed`` behaviour),
``managedBy``.
"""

from __future__ import annotations

import copy
from typing import Any

from . import podutil as pu

# kubernetes pkg/controller/job/job_controller.go: DefaultJobPodFailureBackOff (10 s),
# MaxJobPodFailureBackOff (10 min)
BACKOFF_S = 10.0
BACKOFF_MAX_S = 600.0
JOB_NAME = "batch.kubernetes.io/job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"


class Jobs:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.clock = world.clock
        self.client = world.client_for("job-controller")
        self.jobs = pu.informer(world, "batch/v1", "Job")
        self.pods = pu.informer(world, "v1", "Pod")
        self.batch = pu.Batcher(world, self.sync)
        self.counted: dict[str, set[str]] = {}       # job uid -> pod uids already counted
        self.lost: dict[str, set[str]] = {}          # job uid -> pods deleted before finishing
        self.ours: set[str] = set()                  # pod uids we deleted on purpose
        self.started_at: dict[str, float] = {}       # job uid -> sim time of (re)start
        self.finished_at: dict[str, float] = {}
        self.next_create: dict[str, float] = {}      # job uid -> earliest sim time for a pod
        self.timers: dict[tuple[str, str], Any] = {}
        self.jobs.add_handler(self._on_job)
        self.pods.add_handler(self._on_pod)
        for j in self.jobs.all():
            self.batch.add(pu.key_of(j))

    # ------------------------------------------------------------------ events
    def _on_job(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        uid = obj["metadata"].get("uid", "")
        if type_ == "DELETED":
            for d in (self.counted, self.lost, self.started_at, self.finished_at,
                      self.next_create):
                d.pop(uid, None)  # type: ignore[attr-defined]
            for k in [k for k in self.timers if k[0] == uid]:
                self.timers.pop(k).cancel()
            return
        self.batch.add(pu.key_of(obj))

    def _on_pod(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = pu.controller_ref(obj)
        if ref is None or ref.get("kind") != "Job":
            return
        puid = obj["metadata"].get("uid", "")
        if type_ == "DELETED":
            if not pu.is_terminal(obj) and puid not in self.ours:
                self.lost.setdefault(ref.get("uid", ""), set()).add(puid)
            self.ours.discard(puid)
        self.batch.add((obj["metadata"].get("namespace", ""), ref.get("name", "")))

    def _timer(self, uid: str, what: str, key: pu.Key, seconds: float) -> None:
        tk = (uid, what)
        old = self.timers.pop(tk, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            self.timers.pop(tk, None)
            self.batch.add(key)
        self.timers[tk] = self.world.runtime.after(max(0.0, seconds) + 0.01, fire)

    def _delete_pod(self, pod: dict[str, Any]) -> None:
        self.ours.add(pod["metadata"]["uid"])
        ns, name = pu.key_of(pod)
        self.pods.observe_deleted(self.client.delete("v1", "Pod", name, ns))

    # ------------------------------------------------------------------ sync
    def sync(self, key: pu.Key) -> None:
        job = self.jobs.get(*key)
        if job is None or pu.is_deleting(job):
            return
        uid = job["metadata"]["uid"]
        spec = job.get("spec") or {}
        old_st = job.get("status") or {}
        st = copy.deepcopy(old_st)
        conds: list[dict[str, Any]] = st.setdefault("conditions", [])
        now_ts = self.clock.timestamp()
        now = self.clock.now()
        if pu.condition_true(job, "Complete") or pu.condition_true(job, "Failed"):
            self._ttl(job, key)
            return
        pods = self.pods.owned_by(uid)
        counted = self.counted.get(uid)
        if counted is None:  # first look (also after a restart): trust the recorded counts
            counted = {p["metadata"]["uid"] for p in pods if pu.is_terminal(p)}
            self.counted[uid] = counted
        succeeded = int(st.get("succeeded") or 0)
        failed = int(st.get("failed") or 0)
        for p in pods:
            puid = p["metadata"]["uid"]
            if puid in counted or not pu.is_terminal(p):
                continue
            counted.add(puid)
            if pu.phase(p) == "Succeeded":
                succeeded += 1
            else:
                failed += 1
                self.next_create[uid] = now + min(BACKOFF_S * 2 ** max(0, failed - 1),
                                                  BACKOFF_MAX_S)
        lost = self.lost.pop(uid, set()) - counted
        if lost:
            counted |= lost
            failed += len(lost)
        active = [p for p in pods if pu.is_active(p)]
        terminating = [p for p in pods if pu.is_deleting(p) and not pu.is_terminal(p)]
        policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
        restarts = 0
        if policy == "OnFailure":
            restarts = sum(int(c.get("restartCount") or 0) for p in active
                           for c in (p.get("status") or {}).get("containerStatuses") or [])
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1))
        backoff_limit = int(spec.get("backoffLimit", 6))
        deadline = spec.get("activeDeadlineSeconds")
        suspended = bool(spec.get("suspend"))
        was_suspended = pu.condition_true(job, "Suspended")

        if suspended:
            for p in active:
                self._delete_pod(p)
            active = []
            if not was_suspended:
                pu.set_condition(conds, "Suspended", "True", "JobSuspended", "Job suspended",
                                 now_ts, probe=True)
                _probe(conds, now_ts)
                self._event(job, "Normal", "Suspended", "Job suspended")
        else:
            if was_suspended:
                pu.set_condition(conds, "Suspended", "False", "JobResumed", "Job resumed",
                                 now_ts, probe=True)
                _probe(conds, now_ts)
                st["startTime"] = now_ts
                self.started_at[uid] = now
                self._event(job, "Normal", "Resumed", "Job resumed")
            if not st.get("startTime"):
                st["startTime"] = now_ts
                self.started_at[uid] = now
            self.started_at.setdefault(uid, now)

        # ---- terminal decisions
        target = pu.get_condition({"status": st}, "FailureTarget")
        success = pu.get_condition({"status": st}, "SuccessCriteriaMet")
        if target is None and success is None and not suspended:
            if failed + restarts > backoff_limit:
                target = self._set(conds, "FailureTarget", "BackoffLimitExceeded",
                                   "Job has reached the specified backoff limit", now_ts)
            elif deadline is not None and now - self.started_at[uid] >= float(deadline):
                target = self._set(conds, "FailureTarget", "DeadlineExceeded",
                                   "Job was active longer than specified deadline", now_ts)
            elif completions is not None and succeeded >= int(completions):
                success = self._set(conds, "SuccessCriteriaMet", "CompletionsReached",
                                    "Reached expected number of succeeded pods", now_ts)
            elif completions is None and succeeded > 0 and not active:
                success = self._set(conds, "SuccessCriteriaMet", "CompletionsReached",
                                    "Reached expected number of succeeded pods", now_ts)
        if target is not None or success is not None:
            for p in active:
                self._delete_pod(p)
                terminating.append(p)
            active = []
            if not [p for p in self.pods.owned_by(uid)
                    if not pu.is_terminal(p) and p["metadata"].get("deletionTimestamp")]:
                terminating = []
            if not terminating:
                if target is not None:
                    self._set(conds, "Failed", target.get("reason", ""),
                              target.get("message", ""), now_ts)
                    self._event(job, "Warning", target.get("reason", "Failed"),
                                target.get("message", ""))
                else:
                    self._set(conds, "Complete", "CompletionsReached",
                              "Reached expected number of succeeded pods", now_ts)
                    st["completionTime"] = now_ts
                    self._event(job, "Normal", "Completed", "Job completed")
                self.finished_at[uid] = now
        elif not suspended:
            # ---- create or remove pods
            if completions is not None:
                want = min(parallelism, max(0, int(completions) - succeeded))
            else:
                want = len(active) if succeeded > 0 else parallelism  # work queue: drain
            need = want - len(active)
            if need > 0:
                wait = self.next_create.get(uid, 0.0) - now
                if wait > 0:
                    self._timer(uid, "backoff", key, wait)
                else:
                    for _ in range(need):
                        pod = self.client.create(self._pod(job), key[0])
                        self.pods.observe(pod)
                        # the report counts the program of a Job's pod from here (the pod's
                        # start is part of the Job's run)
                        self.world.timeline.record("job_pod_created", job=key[1],
                                                   pod=pod["metadata"]["name"])
                        active.append(pod)
                        self._event(job, "Normal", "SuccessfulCreate",
                                    f"Created pod: {pod['metadata']['name']}")
            elif need < 0:
                newest = sorted(active, key=lambda p: p["metadata"].get(
                    "creationTimestamp") or "", reverse=True)
                for p in newest[:-need]:
                    self._delete_pod(p)
                    active.remove(p)
            if deadline is not None:
                self._timer(uid, "deadline", key,
                            self.started_at[uid] + float(deadline) - now)

        # ---- status
        for k, v in (("active", len(active)), ("succeeded", succeeded), ("failed", failed)):
            if v:
                st[k] = v
            else:
                st.pop(k, None)
        st["ready"] = sum(1 for p in active if pu.is_pod_ready(p))
        st["terminating"] = len(terminating)
        st["uncountedTerminatedPods"] = {}
        if not conds:
            st.pop("conditions", None)
        if st != old_st:
            def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
                if cur["metadata"]["uid"] != uid:
                    return None
                cur["status"] = st
                return cur
            self.jobs.observe(pu.ignore_missing(lambda: self.client.modify(
                "batch/v1", "Job", key[1], fn, key[0], subresource="status")))
        cur = self.jobs.get(*key)
        if cur is not None and (pu.condition_true(cur, "Complete") or
                                pu.condition_true(cur, "Failed")):
            self._ttl(cur, key)

    def _set(self, conds: list[dict[str, Any]], type_: str, reason: str, message: str,
             now: str) -> dict[str, Any]:
        pu.set_condition(conds, type_, "True", reason, message, now, probe=True)
        _probe(conds, now)
        for c in conds:
            if c.get("type") == type_:
                return c
        raise AssertionError(type_)

    def _pod(self, job: dict[str, Any]) -> dict[str, Any]:
        name = job["metadata"]["name"]
        uid = job["metadata"]["uid"]
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        tmd = template.get("metadata") or {}
        labels = dict(tmd.get("labels") or {})
        labels.update({CONTROLLER_UID: uid, JOB_NAME: name, "controller-uid": uid,
                       "job-name": name})
        md: dict[str, Any] = {"generateName": f"{name}-", "namespace": job["metadata"][
            "namespace"], "labels": labels, "ownerReferences": [pu.owner_ref(job)]}
        if tmd.get("annotations"):
            md["annotations"] = dict(tmd["annotations"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
                "spec": template.get("spec") or {}}

    def _event(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        pu.record_event(self.client, job, type_, reason, message, "job-controller", None,
                        self.clock)

    def _ttl(self, job: dict[str, Any], key: pu.Key) -> None:
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None:
            return
        uid = job["metadata"]["uid"]
        done = self.finished_at.setdefault(uid, self.clock.now())
        left = done + float(ttl) - self.clock.now()
        if left > 0:
            if (uid, "ttl") not in self.timers:
                self._timer(uid, "ttl", key, left)
            return

        def delete() -> Any:
            return self.client.delete("batch/v1", "Job", key[1], key[0],
                                      propagation="Foreground")
        self.jobs.observe_deleted(pu.ignore_missing(delete))


def _probe(conds: list[dict[str, Any]], now: str) -> None:
    for c in conds:
        if c.get("lastProbeTime") is None:
            c["lastProbeTime"] = now


def setup(world: Any) -> Jobs:
    return Jobs(world)
