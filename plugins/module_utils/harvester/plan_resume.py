"""After a failure mid-roll: take the Failed plan back to its phase, and judge "up to date" on
the cluster, not on Setting ``server-version`` alone.

Once ClusterUpgrade ran, ``server-version`` names the new release and Rancher rolls the nodes to
the new Kubernetes version; a NodeUpgrade that fails leaves a mixed cluster (some nodes on the
new OS, one cordoned by Rancher waiting for a drain hook, others not started). upgrade-toolkit
has no way forward from there (reference §G: "no resume"); the collection's is:

* :func:`resumable` — the newest plan ended ``Failed`` (not ``Aborted``) in NodeUpgrade: the
  next run of ``upgrade.yml`` continues it (:func:`resume_status`): ``currentPhase`` back to
  ``NodeUpgrading``, ``Progressing=True``, each failed node back to the state before the step
  that failed (:func:`node_resets`; forward-only node states are bypassed here, and only here),
  the failed/unfinished node Jobs of those nodes deleted so they run again
  (:func:`stale_node_jobs`). A node already upgraded keeps ``PostDrained`` and is not touched
  again; a node that is on the new OS is never given a Job (``node_job.run_node_job``).
* :func:`not_at_release` — what keeps the cluster from being up to date although no Version is
  newer than ``server-version``: the newest plan to the running release not ``Succeeded``, a
  node whose OS or kubelet is not the release's, Rancher's cluster not ``Updated``.

Pure functions over plain objects (the reads and writes are the caller's).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_order,
    phases,
    plan_status,
)

REASON_RESUMED = "UpgradeResumed"
ABORTED = "Aborted"
# the phases a Failed plan is taken back to (by its last phase before Failed)
RESUMABLE = {"NodeUpgrading": "NodeUpgrading"}
NODE_JOB_TYPES = ("pre-drain", "post-drain", "single-node-upgrade")


def _created(plan: dict[str, Any]) -> str:
    return str((plan.get("metadata") or {}).get("creationTimestamp") or "")


def _phase(plan: dict[str, Any]) -> str:
    return str((plan.get("status") or {}).get("currentPhase") or "")


def aborted(plan: dict[str, Any]) -> bool:
    cond = plan_status.find_condition(plan.get("status") or {}, plan_status.COND_PROGRESSING)
    return bool(cond) and cond.get("reason") == ABORTED


def failed_in(plan: dict[str, Any]) -> str:
    """The ``currentPhase`` a Failed plan had when it failed ("" if unknown)."""
    stamps = (plan.get("status") or {}).get("phaseTransitionTimestamps") or []
    for entry in reversed(stamps):
        value = str(entry.get("phase") or "")
        if value and value != phases.FAILED:
            return value
    return ""


def failure_message(plan: dict[str, Any]) -> str:
    return plan_status.failure_message(plan)


def plan_version(plan: dict[str, Any]) -> str:
    st = plan.get("status") or {}
    return str((plan.get("spec") or {}).get("version")
               or (st.get("releaseMetadata") or {}).get("harvester") or "")


def newest(plans: list[dict[str, Any]]) -> dict[str, Any] | None:
    live = [p for p in plans if not (p.get("metadata") or {}).get("deletionTimestamp")]
    return sorted(live, key=_created)[-1] if live else None


def resumable(plans: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest plan, when it ended Failed (not aborted) in a phase a run can continue."""
    plan = newest(plans)
    if plan is None or _phase(plan) != phases.FAILED or aborted(plan):
        return None
    return plan if failed_in(plan) in RESUMABLE else None


def node_resets(status: dict[str, Any]) -> dict[str, str]:
    """Each failed node and the state its retry starts from: the state before the step that
    failed, so the step runs again and the steps before it are verified, not redone.

    * ``PreDrainFailed`` waiting for Rancher's pre-drain (``HookTimeout``): ``ImagePreloaded``
      (Rancher never asked to drain it); otherwise (evacuation, pre-drain Job):
      ``PreDraining`` — the evacuation adopts what is running and the Job runs again.
    * ``PostDrainFailed``: ``PreDrained`` — the post-drain hook is awaited again (Rancher
      still waits for our answer), the OS Job runs unless the node is on the new OS already or
      a Job of the failed run completed (then the node is awaited back, not rebooted again);
      after ``RancherTimeout`` (only Rancher's uncordon was awaited): ``PostDrained``.
    * ``SingleNodeUpgradeFailed``: ``ImagePreloaded``.
    """
    out: dict[str, str] = {}
    for node, st in sorted(((status.get("nodeUpgradeStatuses") or {}).items())):
        state = (st or {}).get("state")
        if state == "PreDrainFailed":
            out[node] = "ImagePreloaded" if st.get("reason") == "HookTimeout" else "PreDraining"
        elif state == "PostDrainFailed":
            # RancherTimeout: the node was upgraded and the post-drain answered; only
            # Rancher's uncordon was awaited, and is awaited again
            out[node] = "PostDrained" if st.get("reason") == "RancherTimeout" else "PreDrained"
        elif state == "SingleNodeUpgradeFailed":
            out[node] = "ImagePreloaded"
    return out


def resume_status(status: dict[str, Any], resets: dict[str, str], now: str,
                  gen: int | None) -> list[plan_status.EventSpec]:
    """The Failed plan back to the phase it failed in, its failed nodes to their retry state."""
    if status.get("currentPhase") != phases.FAILED:
        return []
    plan = {"status": status}
    value = RESUMABLE[failed_in(plan)]
    cause = plan_status.failure_message(plan)
    plan_status.set_phase(status, value, now)
    statuses = status.setdefault("nodeUpgradeStatuses", {})
    for node, state in resets.items():
        old = statuses.get(node) or {}
        statuses[node] = {"state": state, "reason": "Retrying",
                          "message": f"retried after {old.get('state')}: "
                                     f"{old.get('message') or old.get('reason') or ''}"[:1000]}
    plan_status.set_condition(status, plan_status.COND_PROGRESSING, "True", value,
                              f"resumed after the failure: {cause}"[:1000], now, gen)
    plan_status.set_condition(status, plan_status.COND_DEGRADED, "False", "ReconcileSuccess",
                              "", now, gen)
    plan_status.set_condition(status, plan_status.COND_AVAILABLE, "True", "Executable", "",
                              now, gen)
    nodes = ", ".join(f"{n} from {s}" for n, s in resets.items()) or "no node to retry"
    return [plan_status.EventSpec("Normal", REASON_RESUMED,
                                  f"Resumed in phase {value} after the failure "
                                  f"({cause[:300]}); retrying {nodes}")]


def stale_node_jobs(jobs: list[dict[str, Any]], nodes: list[str]) -> list[dict[str, Any]]:
    """The node-upgrade Jobs of ``nodes`` that did not complete (failed, or still running past
    the deadline that failed the plan): deleted on resume so the node's step runs them anew.
    A completed Job is kept: its work is done (a post-drain Job that completed installed the
    OS; its node is awaited, not upgraded again)."""
    out = []
    for job in jobs:
        labels = (job.get("metadata") or {}).get("labels") or {}
        if labels.get(c.LABEL_NODE) not in nodes or \
                labels.get(c.LABEL_JOB_TYPE) not in NODE_JOB_TYPES:
            continue
        complete = any(x.get("type") == "Complete" and x.get("status") == "True"
                       for x in (job.get("status") or {}).get("conditions") or [])
        if not complete:
            out.append(job)
    return out


def _condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return {}


def not_at_release(running: str, plans: list[dict[str, Any]], nodes: list[dict[str, Any]],
                   rancher_cluster: dict[str, Any] | None) -> list[str]:
    """Why a cluster whose ``server-version`` is ``running`` is not at that release (empty:
    it is). Judged on the cluster: the newest plan to ``running`` (if any) must have
    ``Succeeded``; every node must run the OS and kubelet of its release metadata (without a
    plan, the kubelet Rancher's cluster asks for); Rancher's cluster must be ``Updated``."""
    out: list[str] = []
    mine = [p for p in plans if plan_version(p) == running
            and not (p.get("metadata") or {}).get("deletionTimestamp")]
    last = newest(mine)
    rel: dict[str, Any] = {}
    if last is not None:
        phase = _phase(last)
        rel = (last.get("status") or {}).get("releaseMetadata") or {}
        if phase != phases.SUCCEEDED:
            why = plan_status.failure_message(last)
            out.append(f"UpgradePlan {last['metadata']['name']} to {running} is "
                       f"{phase or 'not started'}"
                       + (f" ({'aborted: ' if aborted(last) else ''}{why})" if why else ""))
    want_k8s = str(rel.get("kubernetes") or ((rancher_cluster or {}).get("spec") or {}).get(
        "kubernetesVersion") or "")
    want_os = str(rel.get("os") or "")
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        info = (node.get("status") or {}).get("nodeInfo") or {}
        wrong = []
        if want_os and info.get("osImage") != want_os:
            wrong.append(f"OS {info.get('osImage')!r} (want {want_os!r})")
        kubelet = str(info.get("kubeletVersion") or "")
        if want_k8s and not node_order.kubelet_matches(kubelet, want_k8s):
            wrong.append(f"kubelet {info.get('kubeletVersion')} (want {want_k8s})")
        if wrong:
            out.append(f"node {name} runs " + ", ".join(wrong))
    if rancher_cluster is not None:
        updated = _condition(rancher_cluster, "Updated")
        if updated and updated.get("status") != "True":
            out.append("Rancher's cluster fleet-local/local is not Updated"
                       + (f" ({updated.get('message')})" if updated.get("message") else ""))
    return out
