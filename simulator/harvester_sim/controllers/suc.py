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
* one Job per applying node, as ``upgradejob.New`` of rancher/system-upgrade-controller v0.16.3
  (``pkg/upgrade/job/job.go``, ``pkg/upgrade/container/container.go``; the version whose
  ``pkg/apis`` harvester/upgrade-toolkit pins) builds it with the controller's defaults:
  name ``apply-<plan>-on-<short node name>-with-<hash>`` (wrangler ``SafeConcatName``:
  > 63 chars ⇒ first 57 + ``-`` + 5 hex of the sha256); labels
  ``upgrade.cattle.io/{controller,exclusive,node,plan,version}``,
  ``plan.upgrade.cattle.io/<plan>=<hash>`` plus the Plan's labels whose key does not contain
  ``cattle.io/`` (also on the pod template); the Plan's annotations without ``cattle.io/`` /
  ``kubectl.kubernetes.io/``; ``backoffLimit`` 2, ``ttlSecondsAfterFinished`` 900,
  ``completions`` 1, ``podReplacementPolicy`` TerminatingOrFailed, ``activeDeadlineSeconds``
  from ``spec.jobActiveDeadlineSecs`` (unset/< 0 ⇒ 600, 0 ⇒ none); ``parallelism`` 0 until
  the node is in ``status.applying``, then patched to 1 (SUC issue #134); placed by a
  required node affinity on ``kubernetes.io/hostname`` (no ``nodeName``) with a pod
  anti-affinity on the plan; tolerations ``unschedulable`` + the Plan's; host IPC/PID/network.
  Containers: init ``prepare`` = ``spec.prepare`` (untagged image gets the latest version),
  then init ``drain`` = ``rancher/kubectl:v1.30.3`` ``drain <node> --pod-selector
  '!upgrade.cattle.io/controller' [--ignore-daemonsets] [--delete-emptydir-data] [--force]
  [--timeout] [--grace-period] ...`` when ``spec.drain`` is set, else init ``cordon`` =
  ``kubectl cordon <node>`` when ``spec.cordon``; finally ``upgrade`` = ``spec.upgrade``
  (privileged + ``CAP_SYS_BOOT`` unless the Plan gives a securityContext). Every container
  gets ``/host``, ``/run/system-upgrade/pod``, env ``SYSTEM_UPGRADE_NODE_NAME``/``POD_NAME``/
  ``POD_UID`` (fieldRefs), the container's ``envs``, then ``SYSTEM_UPGRADE_PLAN_NAME``/
  ``PLAN_LATEST_HASH``/``PLAN_LATEST_VERSION``.
* a Job Complete ⇒ node labelled ``plan.upgrade.cattle.io/<plan>=<hash>`` (and uncordoned if
  the plan cordons or drains); the next node gets its Job. Jobs of deleted plans are deleted.

The programs of the init containers are ``programs/kubectl.py`` (``rancher/kubectl``) and
the plan's own images; ``programs/rke2_upgrade.py`` plays ``rancher/rke2-upgrade``.
Not simulated: channel resolution over HTTP, ``window``, ``postCompleteDelay``, the
``SYSTEM_UPGRADE_JOB_*`` controller settings; secrets are mounted but not hashed into
``latestHash``.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from typing import Any

from ..api.selectors import from_label_selector_dict
from ..client import ApiError
from . import podutil as pu
from ._upgrade_util import install_crds, now_ts, set_condition

log = logging.getLogger("harvester_sim.suc")

CONTROLLER_NAME = "system-upgrade-controller"
PLAN_API = "upgrade.cattle.io/v1"
LABEL_CONTROLLER = "upgrade.cattle.io/controller"
LABEL_NODE = "upgrade.cattle.io/node"
LABEL_PLAN = "upgrade.cattle.io/plan"
LABEL_VERSION = "upgrade.cattle.io/version"
ANNOTATION_TTL = "upgrade.cattle.io/ttl-seconds-after-finished"
LABEL_EXCLUSIVE = "upgrade.cattle.io/exclusive"
# SUC v0.16.3 pkg/upgrade/job/job.go defaults (no SYSTEM_UPGRADE_JOB_* overrides)
DEFAULT_ACTIVE_DEADLINE_S = 600
DEFAULT_BACKOFF_LIMIT = 2
DEFAULT_TTL_S = 900
DEFAULT_IMAGE_PULL_POLICY = "IfNotPresent"
KUBECTL_IMAGE = "rancher/kubectl:v1.30.3"


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


def job_name(plan_name: str, node: str, hsh: str) -> str:
    return safe_concat_name("apply", plan_name, "on", node.split(".", 1)[0], "with", hsh)


def munge_version(v: str) -> str:
    return v.replace("+", "-")


def latest_hash(latest_version: str, service_account: str) -> str:
    h = hashlib.sha224()
    h.update(latest_version.encode())
    h.update(service_account.encode())
    return h.hexdigest()


def hostname_of(node: dict[str, Any]) -> str:
    """``upgradenode.Hostname``: the ``kubernetes.io/hostname`` label, else the name."""
    return str((node["metadata"].get("labels") or {}).get("kubernetes.io/hostname")
               or node["metadata"]["name"])


def active_deadline(value: Any) -> int | None:
    """``spec.jobActiveDeadlineSecs``: unset or < 0 -> the controller default, 0 -> none."""
    if value is None or int(value) < 0:
        return DEFAULT_ACTIVE_DEADLINE_S
    return int(value) or None


def drain_args(node: str, drain: dict[str, Any]) -> list[str]:
    """The ``kubectl drain`` arguments SUC gives its ``drain`` init container."""
    reqs = [(LABEL_CONTROLLER, f"!{LABEL_CONTROLLER}")]
    ps = drain.get("podSelector") or {}
    for k, v in (ps.get("matchLabels") or {}).items():
        reqs.append((k, f"{k}={v}"))
    for e in ps.get("matchExpressions") or []:
        k, op, vals = e.get("key", ""), e.get("operator"), sorted(e.get("values") or [])
        text = {"In": f"{k} in ({','.join(vals)})", "NotIn": f"{k} notin ({','.join(vals)})",
                "Exists": k, "DoesNotExist": f"!{k}"}.get(str(op))
        if text:
            reqs.append((k, text))
    # labels.Selector.String(): requirements sorted by key
    selector = ",".join(t for _, t in sorted(reqs, key=lambda r: r[0]))
    args = ["drain", node, "--pod-selector", selector]
    if drain.get("ignoreDaemonSets") is None or drain.get("ignoreDaemonSets"):
        args.append("--ignore-daemonsets")
    if drain.get("deleteLocalData") in (None, True) and \
            drain.get("deleteEmptydirData") in (None, True):
        args.append("--delete-emptydir-data")
    if drain.get("force"):
        args.append("--force")
    timeout = drain.get("timeout")
    if timeout is not None:
        if isinstance(timeout, int):
            args += ["--timeout", _go_duration(timeout)]
        else:
            args += ["--timeout", str(timeout)]
    if drain.get("gracePeriod") is not None:
        args += ["--grace-period", str(int(drain["gracePeriod"]))]
    if drain.get("disableEviction"):
        args.append("--disable-eviction=true")
    if int(drain.get("skipWaitForDeleteTimeout") or 0) > 0:
        args += ["--skip-wait-for-delete-timeout", str(int(drain["skipWaitForDeleteTimeout"]))]
    return args


def _go_duration(nanos: int) -> str:
    """Go's ``time.Duration(n).String()`` for whole seconds/minutes/hours (what an int
    ``drain.timeout`` of nanoseconds becomes)."""
    if nanos == 0:
        return "0s"
    secs, rem = divmod(nanos, 1_000_000_000)
    if rem or secs == 0:
        return f"{nanos / 1e9:g}s"
    h, rest = divmod(secs, 3600)
    m, sec = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{sec}s"
    return out


def _with_latest_tag(image: str, version: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in image or ":" in last or not version:
        return image
    return f"{image}:{version}"


def plan_concurrency(plan: dict[str, Any]) -> int:
    """How many of the Plan's nodes are applied at once (``spec.concurrency``, 0 or unset: 1)."""
    return int((plan.get("spec") or {}).get("concurrency") or 1)


class SystemUpgradeController:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.client = world.client_for(CONTROLLER_NAME)
        install_crds(world, self.client, "upgrade.cattle.io")
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
        concurrency = plan_concurrency(plan)
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
        paused = False
        for node in applying:
            job = self._ensure_job(plan, node, latest, hsh)
            if job is not None and _job_finished(job) == "Failed":
                failed.append(f"{job['metadata']['name']}")
            if job is not None and int((job.get("spec") or {}).get("parallelism", 1)) == 0:
                paused = True
        if failed:
            set_condition(work, "Complete", "False", "JobFailed",
                          "Job(s) failed: " + ", ".join(failed), ts)
        elif not todo:
            was = pu.get_condition(plan, "Complete")
            if was is None or was.get("status") != "True":
                self.world.timeline.record("suc_plan_complete", plan=name, namespace=ns)
            set_condition(work, "Complete", "True", "Complete", "", ts)
        else:
            set_condition(work, "Complete", "False", "", "", ts)
        self._write_status(plan, work["status"])
        if paused:
            # the second pass that unpauses the Jobs now that status.applying names their nodes
            self._enqueue(ns, name)

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
        return job_name(plan_name, node, hsh)

    def _ensure_job(self, plan: dict[str, Any], node: str, latest: str,
                    hsh: str) -> dict[str, Any] | None:
        ns = plan["metadata"]["namespace"]
        pname = plan["metadata"]["name"]
        jname = self.job_name(pname, node, hsh)
        applying = node in ((plan.get("status") or {}).get("applying") or [])
        existing = self.client.try_get("batch/v1", "Job", jname, ns)
        if existing is not None:
            # created paused; unpaused once the node is in status.applying (SUC issue #134)
            if applying and int((existing.get("spec") or {}).get("parallelism", 1)) == 0:
                try:
                    existing = self.client.patch("batch/v1", "Job", jname,
                                                 {"spec": {"parallelism": 1}}, ns)
                except ApiError as exc:
                    if exc.code != 404:
                        raise
            return existing
        # a job of another version for this node goes (SUC keeps one job per node)
        for j in self.client.list("batch/v1", "Job", ns,
                                  label_selector={LABEL_PLAN: pname, LABEL_NODE: node}):
            if (j["metadata"].get("labels") or {}).get(LABEL_VERSION) != latest:
                self.client.delete("batch/v1", "Job", j["metadata"]["name"], ns,
                                   propagation="Background")
        node_obj = self.client.try_get("v1", "Node", node) or {"metadata": {"name": node}}
        job = self.build_job(plan, node_obj, latest, hsh)
        try:
            created = self.client.create(job)
        except ApiError as exc:
            if exc.code == 409:
                return self.client.try_get("batch/v1", "Job", jname, ns)
            log.warning("SUC: cannot create job %s: %s", jname, exc)
            return None
        # the Plan's concurrency bounds how many of its Jobs run at once (the report's limit)
        self.world.timeline.record("suc_job_created", plan=pname, node=node, job=jname,
                                   concurrency=plan_concurrency(plan))
        return created

    def build_job(self, plan: dict[str, Any], node: dict[str, Any] | str, latest: str,
                  hsh: str) -> dict[str, Any]:
        return new_job(plan, node, latest, hsh)

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

        changed: list[bool] = []

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            lbl = cur["metadata"].setdefault("labels", {})
            if lbl.get(plan_label(pname)) == hsh:
                return None
            changed.append(True)
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
        if changed:
            self.world.timeline.record("suc_node_applied", plan=pname, node=node)

    def _delete_jobs_of(self, ns: str, plan_name: str) -> None:
        for j in self.client.list("batch/v1", "Job", ns,
                                  label_selector={LABEL_CONTROLLER: CONTROLLER_NAME,
                                                  LABEL_PLAN: plan_name}):
            self.client.delete("batch/v1", "Job", j["metadata"]["name"], ns,
                               propagation="Background")


def new_job(plan: dict[str, Any], node: dict[str, Any] | str, latest: str,
              hsh: str) -> dict[str, Any]:
    """``upgradejob.New`` of SUC v0.16.3 (pkg/upgrade/job/job.go) with the controller's
    default settings (no ``SYSTEM_UPGRADE_JOB_*`` environment)."""
    if isinstance(node, str):
        node = {"metadata": {"name": node}}
    md = plan["metadata"]
    spec = plan.get("spec") or {}
    status = plan.get("status") or {}
    pname = md["name"]
    nname = node["metadata"]["name"]
    hostname = hostname_of(node)
    exclusive = "true" if spec.get("exclusive") else "false"
    labels = {LABEL_CONTROLLER: CONTROLLER_NAME, LABEL_EXCLUSIVE: exclusive,
              LABEL_NODE: nname, LABEL_PLAN: pname, LABEL_VERSION: latest,
              plan_label(pname): hsh}
    for k, v in (md.get("labels") or {}).items():
        if "cattle.io/" not in k:
            labels[k] = v
    job_ann = {ANNOTATION_TTL: str(DEFAULT_TTL_S)}
    pod_ann: dict[str, str] = {}
    for k, v in (md.get("annotations") or {}).items():
        if "cattle.io/" not in k and "kubectl.kubernetes.io/" not in k:
            job_ann[k] = v
            pod_ann[k] = v
    secrets = list(spec.get("secrets") or [])
    up = dict(spec.get("upgrade") or {})
    plan_env = [{"name": "SYSTEM_UPGRADE_PLAN_NAME", "value": pname},
                {"name": "SYSTEM_UPGRADE_PLAN_LATEST_HASH", "value": hsh},
                {"name": "SYSTEM_UPGRADE_PLAN_LATEST_VERSION", "value": latest}]

    def container(name: str, cspec: dict[str, Any], latest_tag: bool,
                  volumes: list[dict[str, Any]],
                  security: dict[str, Any] | None) -> dict[str, Any]:
        image = str(cspec.get("image") or "")
        c: dict[str, Any] = {
            "name": name,
            "image": _with_latest_tag(image, latest) if latest_tag else image,
            "volumeMounts": [{"name": "host-root", "mountPath": "/host"},
                             {"name": "pod-info", "mountPath": "/run/system-upgrade/pod",
                              "readOnly": True}],
            "env": [{"name": "SYSTEM_UPGRADE_NODE_NAME",
                     "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "SYSTEM_UPGRADE_POD_NAME",
                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "SYSTEM_UPGRADE_POD_UID",
                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]
            + [dict(e) for e in cspec.get("envs") or []] + plan_env,
            "imagePullPolicy": DEFAULT_IMAGE_PULL_POLICY,
        }
        for k in ("command", "args", "envFrom"):
            if cspec.get(k):
                c[k] = list(cspec[k])
        for s in secrets:
            path = str(s.get("path") or "")
            if not path:
                path = f"/run/system-upgrade/secrets/{s.get('name', '')}"
            elif not path.startswith("/"):
                path = f"/run/system-upgrade/secrets/{path}"
            c["volumeMounts"].append({"name": safe_concat_name("secret", str(s["name"])),
                                      "mountPath": path, "readOnly": True})
        for v in volumes:
            c["volumeMounts"].append({"name": v.get("name"),
                                      "mountPath": v.get("destination")})
        if security is not None:
            c["securityContext"] = copy.deepcopy(security)
        return c

    pod_volumes: list[dict[str, Any]] = [
        {"name": "host-root", "hostPath": {"path": "/", "type": "Directory"}},
        {"name": "pod-info", "downwardAPI": {"defaultMode": 420, "items": [
            {"path": "labels",
             "fieldRef": {"fieldPath": "metadata.labels", "apiVersion": "v1"}},
            {"path": "annotations",
             "fieldRef": {"fieldPath": "metadata.annotations", "apiVersion": "v1"}}]}}]
    for s in secrets:
        pod_volumes.append({"name": safe_concat_name("secret", str(s["name"])),
                            "secret": {"secretName": s["name"],
                                       "optional": bool(s.get("ignoreUpdates"))}})
    for v in up.get("volumes") or []:
        pod_volumes.append({"name": v.get("name"), "hostPath": {"path": v.get("source")}})

    inits: list[dict[str, Any]] = []
    if spec.get("prepare"):
        prep = dict(spec["prepare"])
        inits.append(container("prepare", prep, True, list(prep.get("volumes") or []),
                               prep.get("securityContext")))
    drain = spec.get("drain")
    if drain is not None:
        inits.append(container("drain", {"image": KUBECTL_IMAGE,
                                          "args": drain_args(nname, drain)},
                               False, list(up.get("volumes") or []), None))
    elif spec.get("cordon"):
        inits.append(container("cordon", {"image": KUBECTL_IMAGE,
                                           "args": ["cordon", nname]},
                               False, list(up.get("volumes") or []), None))
    security = up.get("securityContext") or {
        "privileged": True, "capabilities": {"add": ["CAP_SYS_BOOT"]}}
    main = container("upgrade", up, True, list(up.get("volumes") or []), security)

    pod_spec: dict[str, Any] = {
        "hostIPC": True,
        "hostPID": True,
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{
                    "key": "kubernetes.io/hostname", "operator": "In",
                    "values": [hostname]}]}]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchExpressions": [{
                    "key": LABEL_EXCLUSIVE if spec.get("exclusive") else LABEL_PLAN,
                    "operator": "In",
                    "values": [exclusive if spec.get("exclusive") else pname]}]},
                "topologyKey": "kubernetes.io/hostname"}]},
        },
        "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                         "effect": "NoSchedule"}] + list(spec.get("tolerations") or []),
        "restartPolicy": "Never",
        "volumes": pod_volumes,
        "containers": [main],
    }
    if spec.get("serviceAccountName"):
        pod_spec["serviceAccountName"] = spec["serviceAccountName"]
    if spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = spec["priorityClassName"]
    if spec.get("imagePullSecrets"):
        pod_spec["imagePullSecrets"] = list(spec["imagePullSecrets"])
    if inits:
        pod_spec["initContainers"] = inits

    job_spec: dict[str, Any] = {
        "podReplacementPolicy": "TerminatingOrFailed",
        "backoffLimit": DEFAULT_BACKOFF_LIMIT,
        "ttlSecondsAfterFinished": DEFAULT_TTL_S,
        "completions": 1,
        # created paused; unpaused once the node is in status.applying (SUC issue #134)
        "parallelism": 1 if hostname in (status.get("applying") or []) else 0,
        "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
    }
    if pod_ann:
        job_spec["template"]["metadata"]["annotations"] = pod_ann
    deadline = active_deadline(spec.get("jobActiveDeadlineSecs"))
    if deadline is not None:
        job_spec["activeDeadlineSeconds"] = deadline
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(pname, nname, hsh), "namespace": md["namespace"],
                     "labels": labels, "annotations": job_ann},
        "spec": job_spec,
    }


def _job_finished(job: dict[str, Any]) -> str | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            return str(c["type"])
    return None


def setup(world: Any) -> SystemUpgradeController:
    return SystemUpgradeController(world)
