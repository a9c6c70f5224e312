"""The VMs stopped for a node: recorded in ConfigMap ``<plan>-restore-vm``
(:func:`record_shutdowns`) and started again after the node's upgrade when the plan's
``restoreVM`` asks for it (:func:`restore_vms`, or :func:`start_restores` then
:func:`await_restores`; :func:`await_marked_restores` for the ones nobody waited for)."""

from __future__ import annotations

import json
import time
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_facts import (
    RESTORING_ANNOTATION,
    RUN_STRATEGY_ANNOTATION,
    STOPPED_BY_ANNOTATION,
    VM_API,
    VMI_API,
    try_items,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source,
    WaitTimeout,
)


def _restore_cm_name(writer: PlanWriter) -> str:
    return f"{writer.name}-restore-vm"


# Our own copy of each node's entry, in the ConfigMap's annotations: Harvester's VM detector
# (the pre-drain Job's ``vm-live-migrate-detector --shutdown``, harvester v1.6.0
# pkg/upgradehelper/vmlivemigratedetector/detector.go createOrUpdateConfigMap) sets
# ``data[<node>]`` to the VMs it finds running, which drops the ones this collection has
# already stopped; it updates the object it read, so the annotations stay. A run killed
# between the Job's rewrite and our merge back still finds what it stopped here.
RECORD_ANNOTATION = "harvester-upgrade.harvesterhci.io/stopped-vms"


def _recorded(cm: dict[str, Any], node: str) -> set[str]:
    """The node's entry: Harvester's ``data[<node>]`` and our copy (:data:`RECORD_ANNOTATION`)."""
    out = {k for k in ((cm.get("data") or {}).get(node) or "").split(",") if k}
    return out | set(_ours(cm).get(node) or [])


def _ours(cm: dict[str, Any]) -> dict[str, list[str]]:
    raw = ((cm.get("metadata") or {}).get("annotations") or {}).get(RECORD_ANNOTATION)
    try:
        got = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(got, dict):
        return {}
    return {str(n): [str(k) for k in v] for n, v in got.items() if isinstance(v, list)}


def record_shutdowns(kube: Kube, writer: PlanWriter, node: str, keys: list[str]) -> bool:
    """Add ``keys`` (ns/name) to ConfigMap ``<plan>-restore-vm`` under the node's key, and to
    our copy of it (:data:`RECORD_ANNOTATION`), before the VMs are stopped."""
    name = _restore_cm_name(writer)
    cm = kube.get("v1", "ConfigMap", name, c.UPGRADE_NS)
    if cm is None:
        if kube.check_mode:
            return True
        value = sorted(set(keys))
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": c.UPGRADE_NS,
                             "labels": writer.labels("node-upgrade"),
                             "annotations": {RECORD_ANNOTATION: json.dumps({node: value})},
                             "ownerReferences": [writer.owner_reference()]},
                "data": {node: ",".join(value)}}
        kube.create_in("v1", "ConfigMap", body, c.UPGRADE_NS)
        writer.event("RestoreVMConfigMapCreated",
                     f"ConfigMap {c.UPGRADE_NS}/{name} created",
                     component="vm-live-migrate-detector", namespace=c.UPGRADE_NS)
        return True
    have = [k for k in ((cm.get("data") or {}).get(node) or "").split(",") if k]
    ours = _ours(cm)
    merged = sorted(_recorded(cm, node) | set(keys))
    if merged == sorted(set(have)) and merged == sorted(set(ours.get(node) or [])):
        return False
    if not kube.check_mode:
        ours[node] = merged
        kube.patch("v1", "ConfigMap", name, {
            "metadata": {"annotations": {RECORD_ANNOTATION: json.dumps(ours, sort_keys=True)}},
            "data": {node: ",".join(merged)}}, c.UPGRADE_NS)
    return True


def restore_entries(kube: Kube, writer: PlanWriter, node: str) -> list[str]:
    cm = kube.get("v1", "ConfigMap", _restore_cm_name(writer), c.UPGRADE_NS) or {}
    return sorted(_recorded(cm, node))


def restore_enabled(plan: dict[str, Any], force: bool | None = None) -> bool:
    """Whether the VMs stopped for a node are to be started again: ``force`` when given,
    else the plan's ``spec.restoreVM``."""
    return bool((plan.get("spec") or {}).get("restoreVM")) if force is None else force


def restore_pending(kube: Kube, writer: PlanWriter, node: str) -> bool:
    """Some VM this collection stopped for ``node`` is still stopped and the plan wants it
    back (``restoreVM``): the node is not finished even when it is upgraded (a run stopped
    between Rancher's release of the node and the restore)."""
    if not restore_enabled(writer.plan):
        return False
    for key in restore_entries(kube, writer, node):
        ns, _sep, name = key.partition("/")
        vm = kube.get(VM_API, "VirtualMachine", name, ns)
        if vm is not None and STOPPED_BY_ANNOTATION in (
                (vm.get("metadata") or {}).get("annotations") or {}):
            return True
    return False


def restore_vms(kube: Kube, writer: PlanWriter, node: str, *, timeout: float = 900,
                force: bool | None = None) -> dict[str, Any]:
    """Start the VMs recorded for ``node`` (when the plan's ``restoreVM`` is set) and wait for
    them to run. Only VMs this collection stopped (marked) are started, once.
    (:func:`start_restores` then :func:`await_restores`.)"""
    res = start_restores(kube, writer, node, force=force)
    return await_restores(kube, writer, node, res, timeout=timeout)


def start_restores(kube: Kube, writer: PlanWriter, node: str, *, force: bool | None = None,
                   scheduled_timeout: float = 0, mark: bool = False) -> dict[str, Any]:
    """Ask the VMs recorded for ``node`` to start again (plan ``restoreVM`` or ``force``): only
    those this collection stopped (marked), once. ``scheduled_timeout`` > 0: then wait up to
    that long for their VMIs to be scheduled (KubeVirt phase Scheduled or Running, the
    launcher pod bound), so that the node's capacity they take shows in the pods another
    node's evacuation plans with; ``"scheduled"`` in the result says whether they got there.
    ``mark``: leave :data:`RESTORING_ANNOTATION` on them for :func:`await_marked_restores`,
    when the caller does not await them itself.

    Returns ``{"changed", "restored", "failed", "recorded", "enabled", "starting",
    "scheduled"}``; ``starting`` lists the VMs started now, :func:`await_restores` waits for
    them to run."""
    plan = writer.refresh()
    enabled = restore_enabled(plan, force)
    entries = restore_entries(kube, writer, node)
    result: dict[str, Any] = {"changed": False, "restored": [], "failed": [],
                              "recorded": entries, "enabled": enabled, "starting": [],
                              "scheduled": True}
    if not enabled or not entries:
        return result
    to_start = []
    for key in entries:
        ns, _sep, name = key.partition("/")
        vm = kube.get(VM_API, "VirtualMachine", name, ns)
        if vm is None:
            result["failed"].append(f"{key}: VirtualMachine not found")
            continue
        ann = (vm.get("metadata") or {}).get("annotations") or {}
        if STOPPED_BY_ANNOTATION not in ann:
            continue        # not stopped by us, or already restored
        to_start.append((key, ns, name, vm, ann))
    if kube.check_mode:
        result["changed"] = bool(to_start)
        result["restored"] = [k for k, *_rest in to_start]
        return result
    for key, ns, name, vm, ann in to_start:
        spec = vm.get("spec") or {}
        prev = ann.get(RUN_STRATEGY_ANNOTATION) or "Always"
        patch: dict[str, Any] = {"metadata": {"annotations": {
            RUN_STRATEGY_ANNOTATION: None, STOPPED_BY_ANNOTATION: None}}}
        if mark:
            patch["metadata"]["annotations"][RESTORING_ANNOTATION] = node
        if "running" in spec and "runStrategy" not in spec:
            patch["spec"] = {"running": True}
        else:
            patch["spec"] = {"runStrategy": prev if prev != "Halted" else "Always"}
        kube.patch(VM_API, "VirtualMachine", name, patch, ns)
        result["changed"] = True
        result["starting"].append(key)
    if result["starting"] and scheduled_timeout > 0:
        keys = set(result["starting"])

        def scheduled(view: dict[str, dict[str, dict[str, Any]]]) -> bool:
            vmis = view["VirtualMachineInstance"]
            return all(_phase_of(vmis.get(k)) in ("Scheduled", "Running") for k in keys)
        try:
            kube.wait([Source(VMI_API, "VirtualMachineInstance")], scheduled,
                      timeout=scheduled_timeout,
                      what=f"restored VMs {', '.join(sorted(keys))} to be scheduled")
        except WaitTimeout:
            result["scheduled"] = False
    return result


def await_restores(kube: Kube, writer: PlanWriter, node: str, started: dict[str, Any], *,
                   timeout: float = 900) -> dict[str, Any]:
    """Wait up to ``timeout`` for the VMs :func:`start_restores` started (``started``, its
    result) to run, and say how it went (event ``RestoreVMCompleted``/``RestoreVMFailed``).
    Returns ``started`` with ``restored`` and ``failed`` filled in."""
    result = dict(started)
    if kube.check_mode or not result.get("enabled") or not result.get("recorded"):
        return result
    keys = set(result.get("starting") or [])
    result["failed"] = list(result.get("failed") or [])
    if keys:
        def running(view: dict[str, dict[str, dict[str, Any]]]) -> bool:
            return all(_phase_of(view["VirtualMachineInstance"].get(k)) == "Running"
                       for k in keys)
        try:
            kube.wait([Source(VMI_API, "VirtualMachineInstance")], running, timeout=timeout,
                      what=f"restored VMs {', '.join(sorted(keys))} to run",
                      describe=lambda v: ", ".join(
                          f"{k}={_phase_of(v['VirtualMachineInstance'].get(k))}"
                          for k in sorted(keys)))
            result["restored"] = sorted(keys)
        except WaitTimeout as exc:
            vmis = {k: o for k, o in _vmi_map(kube).items() if k in keys}
            result["restored"] = sorted(k for k in keys if _phase_of(vmis.get(k)) == "Running")
            result["failed"] += [f"{k}: not running ({exc.last_seen})"
                                 for k in sorted(keys - set(result["restored"]))]
    n_ok, n_fail = len(result["restored"]), len(result["failed"])
    writer.event("RestoreVMCompleted" if not n_fail else "RestoreVMFailed",
                 f"Restored {n_ok + n_fail} VMs for node {node} during upgrade {writer.name}, "
                 f"success: {n_ok}, failed: {n_fail}", warning=bool(n_fail),
                 component="restore-vm", namespace=c.UPGRADE_NS)
    return result


def await_marked_restores(kube: Kube, writer: PlanWriter, timeout: float) -> dict[str, Any]:
    """Await the VMs :func:`start_restores` left marked (:data:`RESTORING_ANNOTATION`: asked
    to start, nobody waited), node by node as :func:`await_restores` does (its event
    included), then remove the mark. Returns ``{"lines": [a line per node], "restored",
    "failed"}``."""
    out: list[str] = []
    restored: list[str] = []
    failed: list[str] = []
    by_node: dict[str, list[str]] = {}
    for vm in try_items(kube, VM_API, "VirtualMachine"):
        md = vm.get("metadata") or {}
        node = (md.get("annotations") or {}).get(RESTORING_ANNOTATION)
        if node:
            by_node.setdefault(str(node), []).append(f"{md.get('namespace')}/{md['name']}")
    deadline = time.monotonic() + timeout
    for node, keys in sorted(by_node.items()):
        if kube.check_mode:
            out.append(f"would await the restored VMs of {node}: {', '.join(sorted(keys))}")
            continue
        res = await_restores(kube, writer, node, {"enabled": True, "recorded": keys,
                                                  "starting": keys, "restored": [],
                                                  "failed": []},
                             timeout=max(0.0, deadline - time.monotonic()))
        for key in keys:
            ns, _sep, name = key.partition("/")
            try:
                kube.patch(VM_API, "VirtualMachine", name,
                           {"metadata": {"annotations": {RESTORING_ANNOTATION: None}}}, ns)
            except ApiError as exc:   # deleted meanwhile: nothing left to unmark
                if exc.status != 404:
                    raise
        restored += res["restored"]
        failed += res["failed"]
        out.append(f"restored VMs of {node}: {len(res['restored'])} running"
                   + (f", failed: {'; '.join(res['failed'])}" if res["failed"] else ""))
    return {"lines": out, "restored": restored, "failed": failed}


def _phase_of(vmi: dict[str, Any] | None) -> str:
    return str(((vmi or {}).get("status") or {}).get("phase") or "absent")


def _vmi_map(kube: Kube) -> dict[str, dict[str, Any]]:
    return {f"{v['metadata'].get('namespace')}/{v['metadata']['name']}": v
            for v in try_items(kube, VMI_API, "VirtualMachineInstance")}
