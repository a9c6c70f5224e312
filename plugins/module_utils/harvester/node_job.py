"""The node Jobs (``upgrade_node.sh`` of the upgrade-toolkit image): the pre-drain Job before
Rancher drains the node (:func:`run_pre_drain_job`), and the post-drain or single-node OS
upgrade Job followed by the wait for the node to come back Ready on the new OS
(:func:`run_node_job`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import evacuation as ev
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    longhorn_index as li,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_order as no
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_states,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
    NotServed,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_evacuation import (
    untaint_node,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_facts import (
    DEFAULT_TOOLKIT_REPO,
    LONGHORN_API,
    PENDING_OS_ANNOTATION,
    TOOLKIT_IMAGE_ANNOTATION,
    is_harvester,
    release,
    safe_name,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_restore import (
    record_shutdowns,
    restore_entries,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_safety import (
    longhorn_unreadable,
    replicas_by_volume,
    volume_at_risk,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source,
    WaitTimeout,
)

# the pre-drain Job's volume holding upgrade_node.sh's per-volume bypass files
SKIP_VOLUME = "skip-volumes"


def toolkit_image(plan: dict[str, Any]) -> str:
    ann = (plan.get("metadata") or {}).get("annotations") or {}
    repo = ann.get(TOOLKIT_IMAGE_ANNOTATION) or DEFAULT_TOOLKIT_REPO
    tag = (plan.get("spec") or {}).get("upgrade") or release(plan).get("harvester") or "latest"
    return f"{repo}:{tag}"


def job_name(plan_name: str, job_type: str, node: str) -> str:
    return safe_name(f"{plan_name}-node-upgrade-{job_type}-{node}")


def job_body(writer: PlanWriter, job_type: str, node: str,
             skip_volumes: list[str] | None = None) -> dict[str, Any]:
    """The node Job (reference §C.5). ``skip_volumes`` (pre-drain): Longhorn volumes the
    script's ``wait_longhorn_engines`` is to pass over — its documented bypass, a file
    ``/tmp/skip-<volume>`` in the container: one item per volume of a downwardAPI volume,
    each mounted at its path with ``subPath`` (the rest of ``/tmp`` stays the container's
    own, writable: the script keeps files there). The kubelet writes them before the
    container starts, so the bypass costs the pod no second container start (an init
    container that touched them did)."""
    labels = {**writer.labels("node-upgrade"), c.LABEL_JOB_TYPE: job_type, c.LABEL_NODE: node}
    # what upgrade_node.sh reads (lib.sh: the plan name builds the repo URL; the node name
    # for kubectl; the pod name for the reboot service after an OS install)
    env: list[dict[str, Any]] = [
        {"name": "HARVESTER_UPGRADEPLAN_NAME", "value": writer.name},
        {"name": "HARVESTER_UPGRADE_NODE_NAME", "value": node}]
    if job_type in ("post-drain", "single-node-upgrade"):
        env.append({"name": "HARVESTER_UPGRADE_POD_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    tolerations = [{"key": k, "operator": "Exists"} for k in (
        "node.kubernetes.io/unschedulable", "node.kubernetes.io/unreachable",
        "node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/etcd",
        ev.DRAIN_TAINT_KEY, "CriticalAddonsOnly")]
    body: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job_name(writer.name, job_type, node), "namespace": c.UPGRADE_NS,
                     "labels": labels, "ownerReferences": [writer.owner_reference()]},
        "spec": {
            "ttlSecondsAfterFinished": 604800,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeName": node, "hostPID": True, "restartPolicy": "Never",
                    "tolerations": tolerations,
                    "containers": [{
                        "name": "apply", "image": toolkit_image(writer.plan),
                        "command": ["upgrade_node.sh"], "args": [job_type], "env": env,
                        "securityContext": {"privileged": True},
                        "volumeMounts": [{"name": "host-root", "mountPath": "/host"}],
                    }],
                    "volumes": [{"name": "host-root", "hostPath": {"path": "/", "type":
                                                                   "Directory"}}],
                },
            },
        },
    }
    if skip_volumes:
        pod = body["spec"]["template"]["spec"]
        files = [f"skip-{v}" for v in sorted(set(skip_volumes))]
        # the file's content is never read (``[ -f ]``): the pod's name will do
        pod["volumes"].append({"name": SKIP_VOLUME, "downwardAPI": {"items": [
            {"path": f, "fieldRef": {"fieldPath": "metadata.name"}} for f in files]}})
        pod["containers"][0]["volumeMounts"] += [
            {"name": SKIP_VOLUME, "mountPath": f"/tmp/{f}", "subPath": f, "readOnly": True}
            for f in files]
    return body


def _job_outcome(job: dict[str, Any] | None) -> tuple[str, str, str]:
    """("complete"|"failed"|"running"|"absent", reason, message)."""
    if job is None:
        return "absent", "", ""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            return "complete", "", ""
        if cond.get("type") == "Failed":
            return "failed", cond.get("reason") or "JobFailed", cond.get("message") or ""
    return "running", "", ""


def _await_job(kube: Kube, name: str, timeout: float) -> tuple[str, str, str]:
    """Wait (watch) until Job ``name`` completed or failed; its :func:`_job_outcome`."""
    outcome: tuple[str, str, str] = kube.wait(
        [Source("batch/v1", "Job", c.UPGRADE_NS, field_selector=f"metadata.name={name}")],
        lambda v: next((o for o in (_job_outcome(j) for j in v["Job"].values())
                        if o[0] in ("complete", "failed")), None),
        timeout=timeout, what=f"Job {c.UPGRADE_NS}/{name} to finish",
        describe=lambda v: ", ".join(
            f"{k}: {_job_outcome(j)[0]} {(j.get('status') or {}).get('failed', 0)} "
            "failed pod(s)" for k, j in v["Job"].items()) or "job missing")
    return outcome


def _node_summary(n: dict[str, Any] | None) -> str:
    if not n:
        return "node not found"
    st = n.get("status") or {}
    ready = next((cond.get("status") for cond in st.get("conditions") or []
                  if cond.get("type") == "Ready"), "Unknown")
    return f"Ready={ready}, osImage={(st.get('nodeInfo') or {}).get('osImage')!r}"


def _job_event(writer: PlanWriter, node: str, job: str, single: bool) -> None:
    """``NodeJobCreated`` for the single-node Job only: the post-drain Job is what
    ``PostDraining`` means (docs/node-upgrade.md), and the node's ``NodePostDraining`` Event,
    written just before the Job is created, says so already."""
    if single:
        writer.event("NodeJobCreated", f"Job {c.UPGRADE_NS}/{job} created for {node}")


def run_node_job(kube: Kube, writer: PlanWriter, node: str, job_type: str, *,
                 job_timeout: float = 3600, node_timeout: float = 1800,
                 on_back: Callable[[], Any] | None = None,
                 later: list[Callable[[], Any]] | None = None) -> dict[str, Any]:
    """Run the post-drain (or single-node-upgrade) Job and wait for the node to come back
    Ready on the release's OS. Never reboots a node that already runs the target OS.

    ``on_back``: called as soon as the wait sees the node back, before anything is written
    (node_cycle holds the Events there). ``later``: the removal of our pending-OS
    annotation is appended there for the caller to run when it has time, instead of being
    written before the node's done state (node_cycle: after the next node's first
    migrations; Finalize removes the annotation from every node anyway)."""
    plan = writer.refresh()
    rel = release(plan)
    single = job_type == "single-node-upgrade"
    running_state = "SingleNodeUpgrading" if single else "PostDraining"
    done_state = "SingleNodeUpgraded" if single else "PostDrained"
    fail_state = "SingleNodeUpgradeFailed" if single else "PostDrainFailed"
    state = writer.node_state(node)
    result: dict[str, Any] = {"changed": False, "job": job_name(writer.name, job_type, node)}
    if node_states.ordinal(state) >= node_states.ordinal(done_state):
        return result
    n = kube.get("v1", "Node", node)
    if n is None:
        raise NodeLoopError(f"node {node} not found")
    on_target = ((n.get("status") or {}).get("nodeInfo") or {}).get("osImage") == rel["os"]
    job = kube.get("batch/v1", "Job", result["job"], c.UPGRADE_NS)
    outcome = _job_outcome(job)
    if kube.check_mode:
        result["changed"] = not on_target
        return result
    if on_target and no.node_ready(n) and outcome[0] in ("absent", "complete"):
        # already on the new OS (a previous run got past the reboot): no job, no reboot
        result["changed"] |= untaint_node(kube, node)
        writer.set_node_state(node, done_state)
        result["changed"] = True
        _drop_pending_os(kube, node)
        return result
    if outcome[0] == "failed":
        msg = f"{result['job']} failed: {outcome[1]}: {outcome[2]}".rstrip(": ")
        writer.fail_node(node, fail_state, outcome[1], msg)
        raise NodeLoopError(msg)
    # the single-node script's VM detector rewrites the node's key of <plan>-restore-vm;
    # post-drain runs no detector (upgrade_node.sh command_post_drain, v1.6.0 and 5ac1bbe)
    recorded = restore_entries(kube, writer, node) if single else []
    if outcome[0] == "absent" and state != "WaitingReboot":
        # the Job, then the state it means (upstream's secret controller creates the Job,
        # its job controller then records the state)
        kube.seed(kube.create_in("batch/v1", "Job", job_body(writer, job_type, node),
                                 c.UPGRADE_NS))   # the wait below starts from it
        writer.set_node_state(node, running_state)
        _job_event(writer, node, result["job"], single)
        result["changed"] = True
    if state != "WaitingReboot":
        if job is not None and outcome[0] == "running":
            kube.seed(job)   # as read above: the wait starts from it
        try:
            outcome = _await_job(kube, result["job"], job_timeout)
        except WaitTimeout as exc:
            writer.fail_node(node, fail_state, "JobTimeout", str(exc))
            raise
        if outcome[0] == "failed":
            msg = f"{result['job']} failed: {outcome[1]}: {outcome[2]}".rstrip(": ")
            writer.fail_node(node, fail_state, outcome[1], msg)
            raise NodeLoopError(msg)
        if recorded:
            record_shutdowns(kube, writer, node, recorded)
        writer.set_node_state(node, "WaitingReboot")
        kube.patch("v1", "Node", node,
                   {"metadata": {"annotations": {PENDING_OS_ANNOTATION: rel["os"]}}})
        result["changed"] = True

    def back(view: dict[str, dict[str, dict[str, Any]]]) -> bool:
        obj = view["Node"].get(node)
        return bool(obj) and no.node_ready(obj) and (
            (obj.get("status") or {}).get("nodeInfo") or {}).get("osImage") == rel["os"]

    try:
        kube.wait([Source("v1", "Node", field_selector=f"metadata.name={node}")], back,
                  timeout=node_timeout,
                  what=f"node {node} to come back Ready on {rel['os']!r}",
                  describe=lambda v: _node_summary(v["Node"].get(node)))
    except WaitTimeout as exc:
        writer.fail_node(node, fail_state, "NodeNotReady", str(exc))
        raise
    if on_back is not None:
        on_back()
    if later is None:
        _drop_pending_os(kube, node)
    else:
        later.append(lambda: _drop_pending_os(kube, node))
    writer.set_node_state(node, done_state)
    result["changed"] = True
    return result


def start_post_drain_job(kube: Kube, writer: PlanWriter, node: str) -> dict[str, Any]:
    """The previous node's head start, once Rancher asked for ``node``'s post-drain: as
    upstream's secret controller, create the node's post-drain Job when the node is
    ``PreDrained`` and not on the release's OS yet, then record ``PostDraining`` (what its job
    controller writes for a Job that exists); neither waits nor fails anything. Decides on
    the plan as the caller holds it (read right before), and sends the Job without reading
    it first: one that exists already (a run stopped after creating it) answers 409 and is
    left to the node's own cycle, which follows it (:func:`run_node_job`). Returns
    ``{"changed", "job", "started"}``."""
    name = job_name(writer.name, "post-drain", node)
    result: dict[str, Any] = {"changed": False, "job": name, "started": False}
    if writer.node_state(node) != "PreDrained" or kube.check_mode:
        return result
    n = kube.get("v1", "Node", node)
    if n is None or ((n.get("status") or {}).get("nodeInfo") or {}).get("osImage") == \
            release(writer.plan)["os"]:
        return result
    try:
        kube.create_in("batch/v1", "Job", job_body(writer, "post-drain", node), c.UPGRADE_NS)
        result["started"] = True
    except ApiError as exc:
        if exc.status != 409:
            raise
    result["changed"] = writer.set_node_state(node, "PostDraining") or result["started"]
    return result


# the Longhorn Engines and the Volumes by name, as one pre-drain read (both empty on a
# cluster without Harvester's CRDs, where Longhorn is not expected either)
EngineView = tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]


def _engine_view(kube: Kube, what: str, why: str) -> EngineView:
    """The Engines and Volumes of longhorn-system (:data:`EngineView`); fails closed."""
    try:
        engines = kube.list(LONGHORN_API, "Engine", "longhorn-system")
        vols = {v["metadata"]["name"]: v for v in kube.list(LONGHORN_API, "Volume",
                                                            "longhorn-system")}
    except NotServed as exc:
        if not is_harvester(kube):
            return [], {}
        raise longhorn_unreadable(exc, what, why) from exc
    except ApiError as exc:
        raise longhorn_unreadable(exc, what, why) from exc
    return engines, vols


def _engines_settled(kube: Kube, view: EngineView | None = None) -> str | None:
    """None when no running Longhorn engine belongs to a volume that is not attached: the
    pre-drain script lists the running engines once and then waits for each one's volume to
    be healthy, forever for a volume that detaches meanwhile (one of the VMs we just
    stopped). ``view``: an :func:`_engine_view` read just now (None: read here)."""
    engines, vols = view if view is not None else _engine_view(
        kube, "Engines and Volumes", "tell whether the stopped VMs' volumes detached")
    for name, vol in _running_engine_volumes(engines, vols):
        state = ((vol or {}).get("status") or {}).get("state")
        if vol is not None and state != "attached":
            return f"volume {name} is {state or 'changing state'}"
    return None


def _engines_indexed(kube: Kube) -> tuple[bool, bool] | None:
    """(settled, some running engine's volume not healthy) as :func:`_engines_settled` and
    :func:`_volumes_to_skip` see them, from the informers' indexes (:mod:`longhorn_index`):
    the volumes of the running engines against the sets of volumes not attached and not
    healthy. ``None`` when the client has no such indexes or they cannot be read (the caller
    then reads the Engines and Volumes, failing closed as ever)."""
    by_index = getattr(kube, "by_index", None)
    if by_index is None:
        return None
    ns = "longhorn-system"
    try:
        running = by_index(LONGHORN_API, "Engine", ns, li.RUNNING_ENGINE_VOLUME)
        detached = by_index(LONGHORN_API, "Volume", ns, li.NOT_ATTACHED_VOLUME)
        unhealthy = by_index(LONGHORN_API, "Volume", ns, li.NOT_HEALTHY_VOLUME)
    except (NotServed, ApiError):
        return None
    if running is None or detached is None or unhealthy is None:
        return None
    return not (running & detached), bool(running & unhealthy)


def _running_engine_volumes(engines: list[dict[str, Any]], vols: dict[str, dict[str, Any]]
                            ) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """The volume of each running engine, as the pre-drain script reads them: its name (the
    engine's ``longhornvolume`` label) and the Volume (None when there is none by that
    name)."""
    for e in engines:
        if (e.get("status") or {}).get("currentState") != "running":
            continue
        name = ((e.get("metadata") or {}).get("labels") or {}).get("longhornvolume", "")
        yield name, vols.get(name)


def _unhealthy_running_volumes(engines: list[dict[str, Any]], vols: dict[str, dict[str, Any]]
                               ) -> Iterator[tuple[str, dict[str, Any]]]:
    """The volumes the pre-drain script's ``wait_longhorn_engines`` waits for: those of the
    running engines (:func:`_running_engine_volumes`) that are not healthy."""
    for name, vol in _running_engine_volumes(engines, vols):
        if vol is not None and (vol.get("status") or {}).get("robustness") != "healthy":
            yield name, vol


def cannot_place_replica(vol: dict[str, Any]) -> bool:
    """Whether Longhorn reports it cannot place a replica the volume needs: its condition
    ``Scheduled`` is ``False`` (longhorn-manager ``volume_controller.go``: reasons
    ``ReplicaSchedulingFailure`` / ``LocalReplicaSchedulingFailure``, set when a replica
    finds no node or the pre-check of a new one fails). Such a volume does not heal by
    waiting; any other unhealthy one is being rebuilt or waits for its replicas' nodes."""
    for cond in (vol.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Scheduled":
            return str(cond.get("status")) == "False"
    return False


def _volumes_to_skip(kube: Kube, node: str, view: EngineView | None = None) -> list[str]:
    """Volumes with a running engine that are not healthy, that Longhorn cannot heal
    (:func:`cannot_place_replica`) and that draining ``node`` does not put at risk (a
    healthy replica lives elsewhere: :func:`volume_at_risk`). The pre-drain script waits for
    every running engine's volume to be healthy (≥ 3 nodes) or to have two RW replicas, with
    no end, as Harvester does: a volume being rebuilt (the previous node's replicas, back
    with it) is waited for, so no node goes down while another one's data is still short
    of copies. Only a volume that cannot heal would hold it forever: that one is handed to
    the script's bypass. ``view``: an :func:`_engine_view` read just now (None: read here)."""
    what = "Engines, Volumes and Replicas"
    why = f"tell which volumes are safe to drain {node} past"
    engines, vols = view if view is not None else _engine_view(kube, what, why)
    stuck = [vol for _name, vol in _unhealthy_running_volumes(engines, vols)
             if cannot_place_replica(vol)]
    if not stuck:   # nothing the script would wait for forever: no Replica to read
        return []
    try:
        replicas = kube.list(LONGHORN_API, "Replica", "longhorn-system")
    except NotServed as exc:
        if not is_harvester(kube):
            return []
        raise longhorn_unreadable(exc, what, why) from exc
    except ApiError as exc:
        raise longhorn_unreadable(exc, what, why) from exc
    out = set()
    by_volume = replicas_by_volume(replicas)
    for vol in stuck:
        if volume_at_risk(vol, node, by_volume.get(vol["metadata"]["name"], [])) is None:
            out.add(vol["metadata"]["name"])
    return sorted(out)


def _longhorn_hold(kube: Kube) -> str:
    """What the pre-drain script's ``wait_longhorn_engines`` is still waiting for, to follow
    a timeout's message: the running engines' volumes that are not healthy (Longhorn still
    rebuilding them, or unable to). Empty when there are none or they cannot be read now;
    the timeout stands either way."""
    try:
        engines, vols = _engine_view(kube, "Engines and Volumes", "name what the Job waits for")
    except NodeLoopError:
        return ""
    waiting = sorted(f"{name} ({(vol.get('status') or {}).get('robustness') or 'unknown'}"
                     + (", Longhorn cannot place a replica" if cannot_place_replica(vol)
                        else "") + ")"
                     for name, vol in _unhealthy_running_volumes(engines, vols))
    if not waiting:
        return ""
    shown = ", ".join(waiting[:10]) + (f" and {len(waiting) - 10} more" if len(waiting) > 10
                                       else "")
    return ("; upgrade_node.sh waits for every running Longhorn volume to be healthy, and "
            f"{len(waiting)} are not: {shown}")


def run_pre_drain_job(kube: Kube, writer: PlanWriter, node: str, *, timeout: float = 3600,
                      start_only: bool = False, fail: bool = True,
                      on_created: Callable[[], None] | None = None) -> dict[str, Any]:
    """Job ``<plan>-node-upgrade-pre-drain-<node>`` (``upgrade_node.sh pre-drain``): on the
    host it undoes the rancher-system-agent drop-in the cluster upgrade left (without that,
    RKE2 does not restart into the new version), removes RKE2's canal config and disables
    the RKE2 snapshot charts; our evacuation moved the VMs, or (a head start) has its last
    migrations under way, so its own wait for them ends when they do. Its VM detector
    rewrites the node's entry of ``<plan>-restore-vm``: our record is merged back
    afterwards. Waits for the Job (``timeout``); failure ⇒
    ``PreDrainFailed``. ``start_only``: create it and return (``started``/``complete``).
    ``fail=False`` (a head start): a failure or the timeout only returns ``why``.
    ``on_created``: called once the Job exists (created now, or found running or complete),
    before it is awaited — what is to follow its creation at once without holding it up."""
    name = job_name(writer.name, "pre-drain", node)
    out: dict[str, Any] = {"changed": False, "job": name, "started": False, "complete": False}
    job = kube.get("batch/v1", "Job", name, c.UPGRADE_NS)
    outcome = _job_outcome(job)
    if kube.check_mode:
        out["changed"] = outcome[0] != "complete"
        return out
    if outcome[0] == "failed":
        return _pre_drain_failed(writer, node, outcome, out, fail)
    recorded = restore_entries(kube, writer, node)
    if outcome[0] == "absent":
        # one read of the Engines and Volumes answers both questions (settled, what to skip),
        # or the informers' indexes do when every running engine's volume is attached and
        # healthy (nothing to wait for, nothing to skip)
        clear = _engines_indexed(kube) == (True, False)
        view: EngineView | None = None if clear else _engine_view(
            kube, "Engines and Volumes", "tell whether the stopped VMs' volumes detached")
        if view is not None and _engines_settled(kube, view) is not None:
            if start_only:
                return out
            try:
                kube.wait([Source(LONGHORN_API, "Engine", "longhorn-system"),
                           Source(LONGHORN_API, "Volume", "longhorn-system")],
                          lambda v: _engines_settled(kube) is None, timeout=timeout,
                          what="Longhorn volumes of the stopped VMs to detach",
                          describe=lambda v: _engines_settled(kube) or "settled")
            except WaitTimeout as exc:
                if not fail:
                    return {**out, "why": str(exc)}
                writer.fail_node(node, "PreDrainFailed", "VolumesNotSettled", str(exc))
                raise
            view = None   # read again: they changed
        skip = [] if clear else _volumes_to_skip(kube, node, view)
        created = kube.create_in("batch/v1", "Job", job_body(writer, "pre-drain", node, skip),
                                 c.UPGRADE_NS)
        if not start_only:
            kube.seed(created)   # the wait below starts from it
        writer.event("NodeJobCreated", f"Job {c.UPGRADE_NS}/{name} created for {node}"
                     + (f" (volumes Longhorn cannot heal, safe to drain past: {', '.join(skip)})"
                        if skip else ""))
        out["changed"] = out["started"] = True
        out["skip_volumes"] = skip
        if on_created is not None:
            on_created()
        if start_only:
            return out
    else:
        if on_created is not None:
            on_created()
        if outcome[0] == "running" and start_only:
            return out
    if outcome[0] != "complete":
        if job is not None and outcome[0] == "running":
            kube.seed(job)   # as read above: the wait starts from it
        try:
            outcome = _await_job(kube, name, timeout)
        except WaitTimeout as exc:
            why = f"{exc}{_longhorn_hold(kube)}"
            if not fail:
                return {**out, "why": why}
            writer.fail_node(node, "PreDrainFailed", "JobTimeout", why)
            raise
        if outcome[0] == "failed":
            return _pre_drain_failed(writer, node, outcome, out, fail)
    if recorded:
        out["changed"] |= record_shutdowns(kube, writer, node, recorded)
    out["complete"] = True
    return out


def _pre_drain_failed(writer: PlanWriter, node: str, outcome: tuple[str, str, str],
                      out: dict[str, Any], fail: bool) -> dict[str, Any]:
    """The pre-drain Job (``out["job"]``) failed: the node fails ``PreDrainFailed`` (raised),
    or with ``fail=False`` (a head start) the result only says why."""
    msg = f"{out['job']} failed: {outcome[1]}: {outcome[2]}".rstrip(": ")
    if not fail:
        return {**out, "why": msg}
    writer.fail_node(node, "PreDrainFailed", outcome[1], msg)
    raise NodeLoopError(msg)


def _drop_pending_os(kube: Kube, node: str) -> None:
    n = kube.get("v1", "Node", node) or {}
    if PENDING_OS_ANNOTATION in ((n.get("metadata") or {}).get("annotations") or {}):
        kube.patch("v1", "Node", node,
                   {"metadata": {"annotations": {PENDING_OS_ANNOTATION: None}}})
