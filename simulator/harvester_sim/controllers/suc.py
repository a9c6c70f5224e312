"""Simulated rancher/system-upgrade-controller (``upgrade.cattle.io/v1`` Plan).

For each Plan (behaviour of SUC's plan status handler + generating handler + job handler):

* status: ``latestVersion`` = ``spec.version`` with ``+`` replaced by ``-`` (a ``channel``
  can't be resolved offline: its last path element is used), ``latestHash`` = sha224 of
  latestVersion + serviceAccountName; conditions ``Validated``, ``LatestResolved``,
  ``Complete`` (True when every selected node carries the plan label, False with reason
  ``JobFailed`` when a Job failed).
* nodes: those matching ``spec.nodeSelector`` whose label ``plan.upgrade.cattle.io/<plan>``
  is neither the latest hash nor ``disabled``; ``status.applying`` keeps the nodes being
  applied and is topped up to ``spec.concurrency`` in SUC's order (sha256 of node uid +
  plan uid + hash).
* one Job per applying node: ``apply-<plan>-on-<node>-with-<hash>`` (wrangler
  ``SafeConcatName``: > 63 chars ⇒ first 57 + ``-`` + 5 hex of the sha256), labels
  ``upgrade.cattle.io/{controller,node,plan,version}``, ``plan.upgrade.cattle.io/<plan>``
  plus the Plan's own labels, pinned to the node, tolerating ``unschedulable`` plus the
  Plan's tolerations, container ``upgrade`` = ``spec.upgrade`` (image tagged with the
  latest version when untagged, command/args/``envs``/envFrom) + ``SYSTEM_UPGRADE_*`` env
  (:func:`job_env`; rancher/system-upgrade-controller pkg/apis/upgrade.cattle.io/v1/types.go
  ``ContainerSpec``: the env list's JSON name is ``envs``),
  ``backoffLimit`` 2, ``activeDeadlineSeconds`` = ``spec.jobActiveDeadlineSecs`` or 900,
  TTL 900 s.
* a Job Complete ⇒ node labelled ``plan.upgrade.cattle.io/<plan>=<hash>`` (and uncordoned if
  the plan cordons); the next node gets its Job. Jobs of deleted plans are deleted.

Not simulated: ``prepare``/``drain``/``cordon`` init containers (Harvester plans use none),
channel resolution over HTTP, ``window``, ``postCompleteDelay``, secrets.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from typing import Any

from ..api.selectors import from_label_selector_dict
from ..client import ApiError
from ..programs import (  # noqa: F401 - registers the upgrade programs
    host_scripts,
    nginx_iso,
    toolkit,
)
from ._upgrade_util import get_condition, install_crds, now_ts, set_condition

log = logging.getLogger("harvester_sim.suc")

CONTROLLER_NAME = "system-upgrade-controller"
PLAN_API = "upgrade.cattle.io/v1"
LABEL_CONTROLLER = "upgrade.cattle.io/controller"
LABEL_NODE = "upgrade.cattle.io/node"
LABEL_PLAN = "upgrade.cattle.io/plan"
LABEL_VERSION = "upgrade.cattle.io/version"
ANNOTATION_TTL = "upgrade.cattle.io/ttl-seconds-after-finished"
DEFAULT_ACTIVE_DEADLINE_S = 900
DEFAULT_BACKOFF_LIMIT = 2
DEFAULT_TTL_S = 900


def plan_label(plan_name: str) -> str:
    return f"plan.upgrade.cattle.io/{plan_name}"


def safe_concat_name(*parts: str) -> str:
    """wrangler ``name.SafeConcatName``."""
    full = "-".join(parts)
    if len(full) < 64:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()
    c = full[56]
    if c.isdigit() or "a" <= c <= "z":
        return full[:57] + "-" + digest[:5]
    return full[:56] + "-" + digest[:6]


def munge_version(v: str) -> str:
    return v.replace("+", "-")


def latest_hash(latest_version: str, service_account: str) -> str:
    h = hashlib.sha224()
    h.update(latest_version.encode())
    h.update(service_account.encode())
    return h.hexdigest()


def _with_latest_tag(image: str, version: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in image or ":" in last or not version:
        return image
    return f"{image}:{version}"


class SystemUpgradeController:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.client = world.client_for(CONTROLLER_NAME)
        install_crds(self.client, "upgrade.cattle.io.yaml")
        self._pending: set[tuple[str, str]] = set()
        rt = world.runtime
        rt.on("upgrade.cattle.io", "plans", self._on_plan)
        rt.on("batch", "jobs", self._on_job)
        rt.on("", "nodes", self._on_node)
        rt.call_soon(self._resync)

    # ------------------------------------------------------------------ events
    def _resync(self) -> None:
        for plan in self.client.list(PLAN_API, "Plan"):
            self._enqueue(plan["metadata"]["namespace"], plan["metadata"]["name"])

    def _enqueue(self, ns: str, name: str) -> None:
        key = (ns, name)
        if key in self._pending:
            return
        self._pending.add(key)

        def run() -> None:
            self._pending.discard(key)
            self.reconcile(ns, name)

        self.world.runtime.call_soon(run)

    def _on_plan(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        md = obj["metadata"]
        if etype == "DELETED":
            self._delete_jobs_of(md["namespace"], md["name"])
            return
        if etype == "MODIFIED" and old is not None and obj.get("spec") == old.get("spec") \
                and md.get("labels") == old["metadata"].get("labels") \
                and md.get("annotations") == old["metadata"].get("annotations"):
            return  # our own status write
        self._enqueue(md["namespace"], md["name"])

    def _on_job(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        labels = obj["metadata"].get("labels") or {}
        if labels.get(LABEL_CONTROLLER) != CONTROLLER_NAME or LABEL_PLAN not in labels:
            return
        ns = obj["metadata"]["namespace"]
        if etype != "DELETED" and _job_finished(obj) == "Complete":
            self._label_node(ns, obj)
        self._enqueue(ns, labels[LABEL_PLAN])

    def _on_node(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if etype == "MODIFIED" and old is not None and \
                (obj["metadata"].get("labels") == old["metadata"].get("labels")):
            return
        for plan in self.client.list(PLAN_API, "Plan"):
            self._enqueue(plan["metadata"]["namespace"], plan["metadata"]["name"])

    # --------------------------------------------------------------- reconcile
    def reconcile(self, ns: str, name: str) -> None:
        plan = self.client.try_get(PLAN_API, "Plan", name, ns)
        if plan is None or plan["metadata"].get("deletionTimestamp"):
            return
        spec = plan.get("spec") or {}
        status = copy.deepcopy(plan.get("status") or {})
        work: dict[str, Any] = {"status": status}
        ts = now_ts(self.world)
        set_condition(work, "Validated", "True", "PlanIsValid", "", ts)
        version = str(spec.get("version") or "")
        channel = str(spec.get("channel") or "")
        if not version and not channel:
            set_condition(work, "LatestResolved", "False", "Error",
                          "plan does not specify version or channel", ts)
            self._write_status(plan, work["status"])
            return
        if version:
            latest = munge_version(version)
            set_condition(work, "LatestResolved", "True", "Version", "", ts)
        else:
            latest = munge_version(channel.rstrip("/").rsplit("/", 1)[-1])
            set_condition(work, "LatestResolved", "True", "Channel", "", ts)
        hsh = latest_hash(latest, str(spec.get("serviceAccountName") or ""))
        if status.get("latestHash") != hsh:
            status["applying"] = []
        status["latestVersion"] = latest
        status["latestHash"] = hsh

        label = plan_label(name)
        sel_spec = spec.get("nodeSelector")
        selector = from_label_selector_dict(sel_spec, empty_matches_all=True) \
            if sel_spec is not None else None
        nodes = self.client.list_refs("v1", "Node") if selector is not None else []
        todo = [n for n in nodes if selector is not None
                and selector.matches(n["metadata"].get("labels") or {})
                and (n["metadata"].get("labels") or {}).get(label) not in (hsh, "disabled")]
        todo_names = {n["metadata"]["name"] for n in todo}
        applying = [n for n in status.get("applying") or [] if n in todo_names]
        concurrency = int(spec.get("concurrency") or 1)
        if len(applying) < concurrency:
            puid = plan["metadata"].get("uid", "")
            cands = sorted((n for n in todo if n["metadata"]["name"] not in applying),
                           key=lambda n: hashlib.sha256(
                               (n["metadata"].get("uid", "") + puid + hsh).encode()).hexdigest())
            for n in cands[: concurrency - len(applying)]:
                applying.append(n["metadata"]["name"])
        applying.sort()
        status["applying"] = applying

        failed: list[str] = []
        for node in applying:
            job = self._ensure_job(plan, node, latest, hsh)
            if job is not None and _job_finished(job) == "Failed":
                failed.append(f"{job['metadata']['name']}")
        if failed:
            set_condition(work, "Complete", "False", "JobFailed",
                          "Job(s) failed: " + ", ".join(failed), ts)
        elif not todo:
            was = get_condition(plan, "Complete")
            if was is None or was.get("status") != "True":
                self.world.timeline.record("suc_plan_complete", plan=name, namespace=ns)
            set_condition(work, "Complete", "True", "Complete", "", ts)
        else:
            set_condition(work, "Complete", "False", "", "", ts)
        self._write_status(plan, work["status"])

    def _write_status(self, plan: dict[str, Any], status: dict[str, Any]) -> None:
        if plan.get("status") == status:
            return
        md = plan["metadata"]

        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            cur["status"] = status
            return cur

        try:
            self.client.modify(PLAN_API, "Plan", md["name"], fn, md["namespace"],
                               subresource="status")
        except ApiError as exc:
            if exc.code != 404:
                raise

    # -------------------------------------------------------------------- jobs
    def job_name(self, plan_name: str, node: str, hsh: str) -> str:
        return safe_concat_name("apply", plan_name, "on", node, "with", hsh)

    def _ensure_job(self, plan: dict[str, Any], node: str, latest: str,
                    hsh: str) -> dict[str, Any] | None:
        ns = plan["metadata"]["namespace"]
        pname = plan["metadata"]["name"]
        jname = self.job_name(pname, node, hsh)
        existing = self.client.try_get("batch/v1", "Job", jname, ns)
        if existing is not None:
            return existing
        # a job of another version for this node goes (SUC keeps one job per node)
        for j in self.client.list("batch/v1", "Job", ns,
                                  label_selector={LABEL_PLAN: pname, LABEL_NODE: node}):
            if (j["metadata"].get("labels") or {}).get(LABEL_VERSION) != latest:
                self.client.delete("batch/v1", "Job", j["metadata"]["name"], ns,
                                   propagation="Background")
        job = self.build_job(plan, node, latest, hsh)
        try:
            created = self.client.create(job)
        except ApiError as exc:
            if exc.code == 409:
                return self.client.try_get("batch/v1", "Job", jname, ns)
            log.warning("SUC: cannot create job %s: %s", jname, exc)
            return None
        self.world.timeline.record("suc_job_created", plan=pname, node=node, job=jname)
        return created

    def build_job(self, plan: dict[str, Any], node: str, latest: str,
                  hsh: str) -> dict[str, Any]:
        md = plan["metadata"]
        spec = plan.get("spec") or {}
        pname = md["name"]
        labels = dict(md.get("labels") or {})
        labels.update({LABEL_CONTROLLER: CONTROLLER_NAME, LABEL_NODE: node, LABEL_PLAN: pname,
                       LABEL_VERSION: latest, plan_label(pname): hsh})
        up = dict(spec.get("upgrade") or {})
        env = job_env(up, pname, latest, hsh)
        container: dict[str, Any] = {
            "name": "upgrade",
            "image": _with_latest_tag(str(up.get("image") or ""), latest),
            "imagePullPolicy": "IfNotPresent",
            "env": env,
            "securityContext": {"privileged": True,
                                "capabilities": {"add": ["CAP_SYS_BOOT"]}},
            "volumeMounts": [{"name": "host-root", "mountPath": "/host"},
                             {"name": "pod-info", "mountPath": "/run/system-upgrade/pod",
                              "readOnly": True}],
        }
        for k in ("command", "args", "envFrom", "volumes"):
            if up.get(k) and k != "volumes":
                container[k] = list(up[k])
        deadline = int(spec.get("jobActiveDeadlineSecs") or 0) or DEFAULT_ACTIVE_DEADLINE_S
        tolerations = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                        "effect": "NoSchedule"}] + list(spec.get("tolerations") or [])
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": self.job_name(pname, node, hsh),
                "namespace": md["namespace"],
                "labels": labels,
                "annotations": {ANNOTATION_TTL: str(DEFAULT_TTL_S)},
            },
            "spec": {
                "backoffLimit": DEFAULT_BACKOFF_LIMIT,
                "activeDeadlineSeconds": deadline,
                "ttlSecondsAfterFinished": DEFAULT_TTL_S,
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {
                        "nodeName": node,
                        "hostIPC": True,
                        "hostPID": True,
                        "hostNetwork": True,
                        "dnsPolicy": "ClusterFirstWithHostNet",
                        "serviceAccountName": spec.get("serviceAccountName") or "default",
                        "affinity": {"nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [{
                                    "key": "kubernetes.io/hostname", "operator": "In",
                                    "values": [node]}]}]}}},
                        "tolerations": tolerations,
                        "restartPolicy": "Never",
                        "containers": [container],
                        "volumes": [
                            {"name": "host-root", "hostPath": {"path": "/",
                                                               "type": "Directory"}},
                            {"name": "pod-info", "downwardAPI": {"items": [
                                {"path": "labels",
                                 "fieldRef": {"fieldPath": "metadata.labels"}},
                                {"path": "annotations",
                                 "fieldRef": {"fieldPath": "metadata.annotations"}}]}},
                        ],
                    },
                },
            },
        }

    def _label_node(self, ns: str, job: dict[str, Any]) -> None:
        labels = job["metadata"].get("labels") or {}
        pname = labels.get(LABEL_PLAN, "")
        node = labels.get(LABEL_NODE)
        hsh = labels.get(plan_label(pname))
        if not node or not hsh:
            return
        plan = self.client.try_get(PLAN_API, "Plan", pname, ns)
        if plan is None:
            return
        cordons = bool((plan.get("spec") or {}).get("cordon")) or \
            (plan.get("spec") or {}).get("drain") is not None

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            lbl = cur["metadata"].setdefault("labels", {})
            if lbl.get(plan_label(pname)) == hsh:
                return None
            lbl[plan_label(pname)] = hsh
            if cordons and (cur.get("spec") or {}).get("unschedulable"):
                cur["spec"]["unschedulable"] = False
            return cur

        try:
            self.client.modify("v1", "Node", node, fn)
        except ApiError as exc:
            if exc.code != 404:
                raise
            return
        self.world.timeline.record("suc_node_applied", plan=pname, node=node)

    def _delete_jobs_of(self, ns: str, plan_name: str) -> None:
        for j in self.client.list("batch/v1", "Job", ns,
                                  label_selector={LABEL_CONTROLLER: CONTROLLER_NAME,
                                                  LABEL_PLAN: plan_name}):
            self.client.delete("batch/v1", "Job", j["metadata"]["name"], ns,
                               propagation="Background")


def job_env(up: dict[str, Any], plan_name: str, latest: str, hsh: str) -> list[dict[str, Any]]:
    """The upgrade container's env as SUC builds it (pkg/upgrade/container/container.go
    ``New`` + ``WithPlanEnvironment``): the downward-API trio, then the Plan's
    ``upgrade.envs`` (``ContainerSpec.Env`` is serialised as ``envs``; a field ``env`` is not
    part of the type and never reaches the Job), then the plan name/hash/version."""
    return [
        {"name": "SYSTEM_UPGRADE_NODE_NAME",
         "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "SYSTEM_UPGRADE_POD_NAME",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "SYSTEM_UPGRADE_POD_UID",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        *[dict(e) for e in up.get("envs") or []],
        {"name": "SYSTEM_UPGRADE_PLAN_NAME", "value": plan_name},
        {"name": "SYSTEM_UPGRADE_PLAN_LATEST_HASH", "value": hsh},
        {"name": "SYSTEM_UPGRADE_PLAN_LATEST_VERSION", "value": latest},
    ]


def _job_finished(job: dict[str, Any]) -> str | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            return str(c["type"])
    return None


def setup(world: Any) -> SystemUpgradeController:
    return SystemUpgradeController(world)
