"""The invariant monitor: watches every committed change and records what must never happen.

``setup(world)`` (called by ``World.start()`` after the scenario is loaded) subscribes a
:class:`Monitor` to the store, so it sees every write of every client (HTTP or in-process)
in commit order, independent of any controller. Violations are dicts
``{"kind", "t" (simulated s), "message", ...objects}`` in :attr:`Monitor.violations`:

``monitor_error``
    a check itself crashed (a handler raised on a store event, or an end check raised): the
    monitor cannot vouch for what it did not check, so the crash is a violation, never a log
    line only. One per (where, error), with ``count`` of the repeats.
``vmi_on_two_nodes``
    launcher pods of one VMI Running on two nodes for longer than
    ``invariants.dual_running_grace_s`` (default 60 s) with no migration of that VMI in
    progress, or, while a migration is in progress, for longer than KubeVirt lets a migration
    run before it cancels it (``migration_completion_timeout_per_gib_s``, default 150 s per
    GiB of guest memory, KubeVirt's ``MigrationCompletionTimeoutPerGiB`` in
    ``pkg/virt-config/virt-config.go``) plus that grace: a hung migration does not hold the
    timer back for ever. The timer starts when the second node's launcher runs; when the
    migration ends, the launcher it leaves behind gets ``dual_running_grace_s`` from then.
``vm_killed``
    a Running VM lost its guest: its active launcher pod was deleted without graceful
    termination (forced delete, node reboot), its pod or VMI went Failed, or a controller
    recorded a ``vm_killed`` timeline event.
``vm_restarted_not_migrated``
    the guest of a VM that ran at the start stopped (VMI Running -> Succeeded/Failed or
    deleted while Running; runStrategy ``Halted``, a VMI delete, a launcher pod deleted
    without migration) while its VMI was ``LiveMigratable=True`` and another node could take
    it (Ready, schedulable, no ``kubevirt.io/drain`` taint, matching the VMI's nodeSelector
    and required node affinity, its NoSchedule/NoExecute taints tolerated): it should have
    been live-migrated. A kill (``vm_killed``) and a deleted VM are not counted again.
``vm_not_running_at_end``
    (from :meth:`Monitor.check_end`, at report time) a VM that was to run at start is not
    running: never stopped, or stopped (runStrategy set to ``Halted`` or ``spec.running:
    false``) and never restarted, or restarted and never came back. Only a deleted VM is
    exempt. Explicit stops are kept in :attr:`Monitor.explicit_stops` with who made them.
``volume_without_healthy_replica``
    a Longhorn volume became ``faulted`` or lost its last healthy replica.
``pdb_violated``
    a healthy pod covered by a PodDisruptionBudget with ``disruptionsAllowed == 0`` was
    disrupted (deleted or killed) on a cordoned or NotReady node without an eviction that
    the budget granted (the eviction API records granted evictions in
    ``status.disruptedPods``).
``too_many_unavailable``
    more nodes unavailable at once than ``invariants.max_unavailable`` (default:
    ``max_cordoned``, 1); a node is unavailable while it is cordoned, NotReady or carries the
    ``kubevirt.io/drain`` taint. Once per episode. The upgrade is blamed for what it does: an
    episode is recorded when a node is cordoned, drain-tainted, or goes NotReady while
    cordoned or drain-tainted (a reboot the upgrade asked for) with the count over the limit;
    a node that goes NotReady by itself (neither cordoned nor tainted: a failure outside the
    upgrade) pushing it over does not count until the upgrade takes something more down.
``etcd_quorum_lost``
    more etcd members (nodes labelled ``node-role.kubernetes.io/etcd=true``) NotReady at once
    than the cluster tolerates (``(members - 1) // 2``); checked with 3 or more members (with
    fewer, any member down loses quorum and a node upgrade cannot avoid it). Once per
    episode.

End state (from :meth:`Monitor.check_end`, only when the newest UpgradePlan is
``Succeeded``: a Failed or running upgrade keeps its holds on purpose, for the resume):

``volume_not_fully_replicated``
    a Longhorn volume has fewer replicas without ``failedAt`` than ``spec.numberOfReplicas``,
    or is attached and not ``healthy`` while none of its replicas is being rebuilt (a volume
    already short at the start must only not be worse). Replicas Longhorn reused for a
    rebuild and still rebuilding, or waiting for one of their node's
    ``concurrent-replica-rebuild-per-node-limit`` slots, are Longhorn restoring the volume
    after the upgrade, which does not wait for it (nor does upstream's).
``setting_not_restored``
    a Longhorn Setting's ``value`` or the ``kube-system/descheduler`` Addon's
    ``spec.enabled`` differs from its value when the monitor started.
``upgrade_taint_left``
    a node still carries the ``kubevirt.io/drain`` taint.
``hook_annotation_left``
    a machine-plan Secret (type ``rke.cattle.io/machine-plan``) still carries a Rancher
    drain annotation (``rke.cattle.io/drain-options``, ``pre-drain``, ``drain-done``,
    ``uncordon``, ``post-drain``, ``drain-error``) or a drain-hook answer (the annotations
    named in the provisioning cluster's ``preDrainHooks`` / ``postDrainHooks``).
``node_left_cordoned``
    a node is cordoned that was not at the start.

Who made a change: the store does not know its caller, so the monitor asks
``world.extras['request_actor']()`` (the API server may provide it: the user agent of the
request being served on this thread) and falls back to the last ``managedFields`` manager.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

from .api.selectors import from_label_selector_dict
from .controllers.kubevirt import vmi_memory_mib
from .controllers.longhorn import replica_available, replica_restoring
from .controllers.podutil import get_condition, node_affinity_matches, node_ready, tolerates_taints

log = logging.getLogger("harvester_sim.invariants")

#: Outcome kinds: how an upgrade treated the workloads and left the cluster, by its own design
#: (a VM shut down gracefully that could have migrated; the end-state checks once it
#: Succeeded). upgrade-toolkit 5ac1bbe, for one, shuts down what its detector names
#: non-migratable, restarts none of them and ends without waiting for the last node's replicas.
#: Every other kind, including one added later, harms on the spot while the upgrade runs (a
#: guest killed, a VMI on two nodes, data without a healthy replica, a budget, quorum or
#: availability limit broken, a check that could not run).
OUTCOME_KINDS = frozenset({
    "vm_restarted_not_migrated", "vm_not_running_at_end", "volume_not_fully_replicated",
    "setting_not_restored", "upgrade_taint_left", "hook_annotation_left", "node_left_cordoned",
})


def harms_on_the_spot(violation: dict[str, Any]) -> bool:
    """Whether ``violation`` harms while the upgrade runs (not one of :data:`OUTCOME_KINDS`)."""
    return str(violation.get("kind")) not in OUTCOME_KINDS

Obj = dict[str, Any]
Key = tuple[str, str]

KV = "kubevirt.io"
STOPPED_STRATEGIES = ("Halted",)
FINAL_MIGRATION_PHASES = ("Succeeded", "Failed")
# KubeVirt's default (pkg/virt-config/virt-config.go MigrationCompletionTimeoutPerGiB): a
# migration still running after this many seconds per GiB of guest memory is cancelled
MIGRATION_COMPLETION_TIMEOUT_PER_GIB_S = 150.0
DRAIN_TAINT = "kubevirt.io/drain"
ETCD_LABEL = "node-role.kubernetes.io/etcd"
MACHINE_PLAN_TYPE = "rke.cattle.io/machine-plan"
# Rancher's drain annotations on a machine-plan Secret (rancher/rancher pkg/capr/planner
# drain.go, pkg/controllers/capr/machinedrain; simulator/harvester_sim/controllers/rancher.py)
RANCHER_DRAIN_ANNOTATIONS = ("rke.cattle.io/drain-options", "rke.cattle.io/pre-drain",
                             "rke.cattle.io/drain-done", "rke.cattle.io/uncordon",
                             "rke.cattle.io/post-drain", "rke.cattle.io/drain-error")
DESCHEDULER_ADDON = ("kube-system", "descheduler")
PLAN_GROUP = "management.harvesterhci.io"


def _by_volume(replicas: list[Obj]) -> dict[str, list[Obj]]:
    """Longhorn replicas by ``spec.volumeName``: one pass, so that counting every volume's
    replicas does not scan every replica per volume (18,000 x 6,000 at 200 nodes)."""
    out: dict[str, list[Obj]] = {}
    for r in replicas:
        out.setdefault(str((r.get("spec") or {}).get("volumeName") or ""), []).append(r)
    return out


def _md(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _key(obj: Obj) -> Key:
    md = _md(obj)
    return (md.get("namespace") or "", md.get("name") or "")


def _phase(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def _has_drain_taint(node: Obj) -> bool:
    return any(t.get("key") == DRAIN_TAINT for t in (node.get("spec") or {}).get("taints") or [])


def _pod_healthy(pod: Obj | None) -> bool:
    if pod is None or _phase(pod) != "Running" or _md(pod).get("deletionTimestamp"):
        return False
    conds = (pod.get("status") or {}).get("conditions")
    if not conds:
        return True
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _launcher_vmi(pod: Obj) -> tuple[str, str] | None:
    """(vmi name, vmi uid) of a virt-launcher pod, else None."""
    md = _md(pod)
    for ref in md.get("ownerReferences") or []:
        if ref.get("kind") == "VirtualMachineInstance":
            return str(ref.get("name")), str(ref.get("uid") or "")
    labels = md.get("labels") or {}
    if labels.get("kubevirt.io") == "virt-launcher":
        name = labels.get("vm.kubevirt.io/name") or labels.get("kubevirt.io/domain")
        if name:
            return str(name), str(labels.get("kubevirt.io/created-by") or "")
    return None


def _run_strategy(vm: Obj) -> str:
    spec = vm.get("spec") or {}
    if spec.get("runStrategy"):
        return str(spec["runStrategy"])
    if "running" in spec:
        return "Always" if spec.get("running") else "Halted"
    return "Halted"


def _is_true(v: Any) -> bool:
    return str(v).strip().lower() == "true"


class Monitor:
    """Continuously checked invariants (see the module docstring)."""

    def __init__(self, world: Any) -> None:
        self.world = world
        cfg = (getattr(world, "scenario", None) or {}).get("invariants") or {}
        self.max_cordoned = int(cfg.get("max_cordoned", 1))
        self.max_unavailable = int(cfg.get("max_unavailable", self.max_cordoned))
        self.dual_grace_s = float(cfg.get("dual_running_grace_s", 60.0))
        self.migration_timeout_per_gib_s = float(
            cfg.get("migration_completion_timeout_per_gib_s",
                    MIGRATION_COMPLETION_TIMEOUT_PER_GIB_S))
        self._lock = threading.RLock()
        self._violations: list[dict[str, Any]] = []
        self._errors: dict[tuple[str, str], dict[str, Any]] = {}
        self.explicit_stops: dict[str, dict[str, Any]] = {}
        self.initial_running: set[Key] = set()
        self.nodes: dict[str, Obj] = {}
        self.node_ready: dict[str, bool] = {}
        self.cordoned: set[str] = set()
        self.drain_tainted: set[str] = set()
        self.etcd_members: set[str] = set()
        self.initially_cordoned: set[str] = set()
        self.max_cordoned_seen = 0
        self.max_unavailable_seen = 0
        self._unavailable_breach = False
        self._last_unavailable: dict[str, list[str]] = {}
        self._quorum_breach = False
        self.node_reboots: Counter[str] = Counter()
        self.pdbs: dict[Key, Obj] = {}
        self.vmis: dict[Key, Obj] = {}
        self.vms: dict[Key, Obj] = {}
        self.migrations: dict[Key, Obj] = {}
        # (namespace, vmiName) -> names of its migrations (finished ones pile up: 3,000 by
        # the end of hundred-node, scanned per VMI running on two nodes otherwise)
        self._migrations_of: dict[Key, set[str]] = {}
        self.migrations_per_vm: Counter[str] = Counter()
        self.launchers: dict[Key, dict[str, str]] = {}   # (ns, vmi) -> running pod -> node
        self._dual_since: dict[Key, float] = {}
        self._dual_reported: set[Key] = set()
        self._dual_migrating: set[Key] = set()
        self._dual_after_migration: dict[Key, float] = {}   # when its migration ended
        self._killed: set[str] = set()
        self._stops_checked: set[str] = set()
        self.volume_robustness: dict[str, str] = {}
        self.replicas: dict[str, dict[str, bool]] = {}     # volume -> replica -> healthy
        self._volume_bad: set[str] = set()
        self._volumes_deleted: set[str] = set()
        # end-state baseline, taken by seed()
        self.initial_settings: dict[str, Any] = {}
        self.initial_descheduler: bool | None = None
        self.initial_volume_replicas: dict[str, tuple[int, str]] = {}
        self.end_state_checked: str | None = None   # the Succeeded plan the end check saw
        self.started = False

    # ------------------------------------------------------------------------- plumbing
    def now(self) -> float:
        return round(float(self.world.clock.now()), 3)

    @property
    def violations(self) -> list[dict[str, Any]]:
        """Everything recorded so far, plus ``vm_killed`` timeline events of controllers."""
        with self._lock:
            self._guarded("dual-running check", self._check_dual)
            out = list(self._violations)
        seen = {(v.get("namespace"), v.get("vm")) for v in out if v["kind"] == "vm_killed"}
        timeline = getattr(self.world, "timeline", None)
        for ev in timeline.snapshot() if timeline is not None else []:
            if ev.get("event") != "vm_killed":
                continue
            ref = str(ev.get("vm") or ev.get("name") or "")
            key = (ref.split("/", 1)[0], ref.split("/", 1)[1]) if "/" in ref else \
                (str(ev.get("namespace", "default")), ref)
            if key in seen:
                continue
            seen.add(key)
            out.append({"kind": "vm_killed", "t": ev.get("t"), "vm": key[1],
                        "namespace": key[0], "node": ev.get("node"),
                        "reason": ev.get("reason", "timeline"),
                        "message": f"VM {key[0]}/{key[1]} killed on node {ev.get('node')} "
                                   f"({ev.get('reason', 'recorded by a controller')})"})
        out.sort(key=lambda v: (v.get("t") or 0.0))
        return out

    def record(self, kind: str, message: str, **objects: Any) -> dict[str, Any]:
        v = {"kind": kind, "t": self.now(), "message": message, **objects}
        with self._lock:
            self._violations.append(v)
        log.warning("invariant violated: %s", message)
        tl = getattr(self.world, "timeline", None)
        if tl is not None:
            tl.record("invariant_violation", violation=kind, message=message)
        return v

    def _error(self, where: str, exc: BaseException, keep: bool = True) -> dict[str, Any]:
        """A crashed check: a ``monitor_error`` violation (one per where+error, counted).
        ``keep=False`` (end checks, which are re-run per report) only returns it."""
        err = f"{type(exc).__name__}: {exc}"
        frames = traceback.extract_tb(exc.__traceback__)
        at = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
        message = f"invariant check crashed ({where}): {err}" + (f" at {at}" if at else "") \
            + "; what it checks is unverified"
        if not keep:
            return {"kind": "monitor_error", "t": self.now(), "message": message,
                    "where": where, "error": err, "at": at, "count": 1}
        tag = (where, err)
        with self._lock:
            seen = self._errors.get(tag)
            if seen is not None:
                seen["count"] += 1
                return seen
            v = self.record("monitor_error", message, where=where, error=err, at=at, count=1)
            self._errors[tag] = v
            return v

    def _guarded(self, where: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - a crashed check is a violation, not a crash
            log.exception("invariant monitor error (%s)", where)
            self._error(where, exc)
            return None

    def actor(self, obj: Obj | None = None) -> str:
        fn = self.world.extras.get("request_actor") if hasattr(self.world, "extras") else None
        if callable(fn):
            try:
                who = fn()
            except Exception:  # noqa: BLE001 - a broken hook must not break the store
                who = None
            if who:
                return str(who)
        mf = _md(obj or {}).get("managedFields") or []
        if mf:
            return str(mf[-1].get("manager") or "unknown")
        return "unknown"

    def _list(self, group: str, plural: str) -> list[Obj] | None:
        """Every stored object of a kind (copies); None when the kind is not served."""
        store = self.world.store
        for rt in store.registry.all():
            if rt.key == (group, plural):
                items, _, _, _ = store.list(rt)
                return items  # type: ignore[no-any-return]
        return None

    # ----------------------------------------------------------------------------- seed
    def seed(self) -> None:
        """Take the state the scenario created as the baseline (not violations)."""
        store = self.world.store
        with store.lock:
            for rt in store.registry.all():
                if rt.key not in _HANDLED:
                    continue
                items, _, _, _ = store.list(rt, copy_items=False)
                for obj in items:
                    self.observe(rt.key, "ADDED", obj, None, seeding=True)
            for ns_name, vm in self.vms.items():
                if _run_strategy(vm) in ("Always", "RerunOnFailure"):
                    self.initial_running.add(ns_name)
            self.initially_cordoned = set(self.cordoned)
            self._seed_end_state()
        self.started = True

    def _seed_end_state(self) -> None:
        replicas = _by_volume(self._list("longhorn.io", "replicas") or [])
        for v in self._list("longhorn.io", "volumes") or []:
            name = _md(v).get("name") or ""
            self.initial_volume_replicas[name] = (
                self._good_replicas(name, replicas.get(name, [])),
                str((v.get("status") or {}).get("robustness") or ""))

    # --------------------------------------------------------------------------- events
    def on_event(self, ev: Any) -> None:
        rt = ev.rt
        if rt is None or rt.key not in _HANDLED:
            return
        try:
            self.observe(rt.key, ev.type, ev.obj, ev.old)
        except Exception as exc:  # noqa: BLE001 - never break a store write; still a violation
            log.exception("invariant monitor error")
            ns, name = _key(ev.obj or {})
            where = f"{_HANDLED[rt.key]} on {ev.type} {rt.plural} " \
                    f"{ns + '/' if ns else ''}{name}"
            try:
                self._error(where, exc)
            except Exception:  # noqa: BLE001 - last resort: the write must go through
                log.exception("invariant monitor could not record its own error")

    def observe(self, key: tuple[str, str], etype: str, obj: Obj, old: Obj | None,
                seeding: bool = False) -> None:
        with self._lock:
            handler = getattr(self, _HANDLED[key])
            handler(etype, obj, old, seeding)
            if not seeding and self._dual_since:
                self._check_dual()

    # nodes ---------------------------------------------------------------------------
    def _on_node(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        name = _md(obj).get("name", "")
        if etype == "DELETED":
            self.nodes.pop(name, None)
            self.node_ready.pop(name, None)
            self.cordoned.discard(name)
            self.drain_tainted.discard(name)
            self.etcd_members.discard(name)
            return
        self.nodes[name] = obj
        ready = node_ready(obj)
        was = self.node_ready.get(name)
        self.node_ready[name] = ready
        if was and not ready and not seeding:
            self.node_reboots[name] += 1
        for flag, members in (((obj.get("spec") or {}).get("unschedulable"), self.cordoned),
                              (_has_drain_taint(obj), self.drain_tainted),
                              (_is_true((_md(obj).get("labels") or {}).get(ETCD_LABEL)),
                               self.etcd_members)):
            if flag:
                members.add(name)
            else:
                members.discard(name)
        self.max_cordoned_seen = max(self.max_cordoned_seen, len(self.cordoned))
        self._check_availability(seeding)

    def unavailable(self) -> dict[str, list[str]]:
        """node -> why it is unavailable (cordoned, NotReady, drain taint)."""
        out: dict[str, list[str]] = {}
        for name, ready in self.node_ready.items():
            why = []
            if name in self.cordoned:
                why.append("cordoned")
            if not ready:
                why.append("NotReady")
            if name in self.drain_tainted:
                why.append(DRAIN_TAINT)
            if why:
                out[name] = why
        return out

    def _check_availability(self, seeding: bool) -> None:
        down = self.unavailable()
        n = len(down)
        self.max_unavailable_seen = max(self.max_unavailable_seen, n)
        before, self._last_unavailable = self._last_unavailable, down
        # what just became unavailable, and whether the upgrade did it (see the module doc)
        by_upgrade = any(why != "NotReady" or name in self.cordoned or
                         name in self.drain_tainted
                         for name, whys in down.items() for why in whys
                         if why not in before.get(name, []))
        if n > self.max_unavailable and not self._unavailable_breach and not seeding \
                and by_upgrade:
            self._unavailable_breach = True
            self.record("too_many_unavailable",
                        f"{n} nodes unavailable at once (limit {self.max_unavailable}): "
                        + ", ".join(f"{k} ({'+'.join(v)})" for k, v in sorted(down.items())),
                        nodes=sorted(down), reasons={k: v for k, v in sorted(down.items())},
                        limit=self.max_unavailable)
        elif n <= self.max_unavailable:
            self._unavailable_breach = False
        members = self.etcd_members
        if len(members) < 3:
            self._quorum_breach = False
            return
        lost = sorted(m for m in members if not self.node_ready.get(m, False))
        tolerance = (len(members) - 1) // 2
        if len(lost) > tolerance and not self._quorum_breach and not seeding:
            self._quorum_breach = True
            self.record("etcd_quorum_lost",
                        f"etcd quorum lost: {len(lost)} of {len(members)} members NotReady "
                        f"({', '.join(lost)}; the cluster tolerates {tolerance})",
                        nodes=lost, members=sorted(members), tolerance=tolerance)
        elif len(lost) <= tolerance:
            self._quorum_breach = False

    # VMs -----------------------------------------------------------------------------
    def _on_vm(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        k = _key(obj)
        ref = f"{k[0]}/{k[1]}"
        if etype == "DELETED":
            self.vms.pop(k, None)
            if not seeding and k in self.initial_running and ref not in self.explicit_stops:
                self.explicit_stops[ref] = {"t": self.now(), "by": self.actor(obj),
                                            "how": "deleted"}
            elif not seeding and ref in self.explicit_stops:
                self.explicit_stops[ref]["how"] = "deleted"
            return
        self.vms[k] = obj
        if seeding:
            return
        new_rs = _run_strategy(obj)
        old_rs = _run_strategy(old) if old is not None else None
        if new_rs in STOPPED_STRATEGIES and old_rs not in STOPPED_STRATEGIES:
            self.explicit_stops[ref] = {"t": self.now(), "by": self.actor(obj),
                                        "how": f"runStrategy {old_rs} -> {new_rs}"}
        elif new_rs not in STOPPED_STRATEGIES and old_rs in STOPPED_STRATEGIES:
            stop = self.explicit_stops.get(ref)
            if stop is not None and stop.get("how") != "deleted":
                stop["restarted_at"] = self.now()
                stop["restarted_by"] = self.actor(obj)

    def _on_vmi(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        k = _key(obj)
        if etype == "DELETED":
            self.vmis.pop(k, None)
            if not seeding and _phase(obj) == "Running":
                self._guest_stopped(k, obj, "its VMI was deleted")
            return
        self.vmis[k] = obj
        if seeding:
            return
        if _phase(obj) == "Failed" and _phase(old) == "Running":
            node = str((obj.get("status") or {}).get("nodeName") or "")
            reason = "node_not_ready" if node and not self.node_ready.get(node, True) else \
                "vmi_failed"
            self._kill(k, str(_md(obj).get("uid") or ""), node, reason)
        if _phase(old) == "Running" and _phase(obj) in ("Succeeded", "Failed"):
            self._guest_stopped(k, old or obj, f"its VMI went {_phase(obj)}")

    def _guest_stopped(self, k: Key, vmi: Obj, how: str) -> None:
        """A running guest stopped without a kill: was it live-migratable somewhere?"""
        uid = str(_md(vmi).get("uid") or "") or f"{k[0]}/{k[1]}@{self.now()}"
        if uid in self._killed or uid in self._stops_checked:
            return
        self._stops_checked.add(uid)
        ref = f"{k[0]}/{k[1]}"
        stop = self.explicit_stops.get(ref)
        if k not in self.initial_running or (stop is not None and stop.get("how") == "deleted"):
            return
        if k not in self.vms:
            return   # the VM is gone: its VMI goes with it
        lm = get_condition(vmi, "LiveMigratable")
        if lm is None or lm.get("status") != "True":
            return
        node = str((vmi.get("status") or {}).get("nodeName") or "")
        targets = self.migration_targets(vmi, node)
        if not targets:
            return
        if stop is not None and "restarted_at" not in stop:
            how = f"{how}; stopped by {stop['by']} ({stop['how']})"
        self.record("vm_restarted_not_migrated",
                    f"VM {ref} was live-migratable (LiveMigratable=True; node(s) "
                    f"{', '.join(targets)} could take it) but its guest on {node or '?'} was "
                    f"shut down instead of migrated ({how})",
                    vm=k[1], namespace=k[0], node=node, targets=targets,
                    by=(stop or {}).get("by"))

    def migration_targets(self, vmi: Obj, source: str) -> list[str]:
        """Nodes a live migration of ``vmi`` off ``source`` could go to now (placement rules
        only: Ready, schedulable, no drain taint, selector/affinity, taints tolerated)."""
        out = []
        for name, node in sorted(self.nodes.items()):
            if name == source or not self.node_ready.get(name) or name in self.cordoned \
                    or name in self.drain_tainted:
                continue
            if not node_affinity_matches(vmi, node) or not tolerates_taints(vmi, node):
                continue
            out.append(name)
        return out

    def _migration_active(self, k: Key) -> bool:
        for name in self._migrations_of.get(k, ()):
            m = self.migrations.get((k[0], name))
            if m is not None and _phase(m) not in FINAL_MIGRATION_PHASES:
                return True
        vmi = self.vmis.get(k)
        ms = ((vmi or {}).get("status") or {}).get("migrationState") or {}
        return bool(ms) and bool(ms.get("startTimestamp")) and not ms.get("completed") and \
            not ms.get("failed")

    def _on_migration(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        k = (_md(obj).get("namespace") or "", _md(obj).get("name") or "")
        prev = self.migrations.get(k)
        if prev is not None:
            of = (k[0], (prev.get("spec") or {}).get("vmiName") or "")
            self._migrations_of.get(of, set()).discard(k[1])
        if etype == "DELETED":
            self.migrations.pop(k, None)
            return
        self.migrations[k] = obj
        self._migrations_of.setdefault(
            (k[0], (obj.get("spec") or {}).get("vmiName") or ""), set()).add(k[1])
        if _phase(obj) == "Succeeded" and _phase(old) != "Succeeded" and not seeding:
            vmi = (obj.get("spec") or {}).get("vmiName", "")
            self.migrations_per_vm[f"{k[0]}/{vmi}"] += 1

    def _kill(self, k: Key, uid: str, node: str, reason: str) -> None:
        tag = uid or f"{k[0]}/{k[1]}@{node}"
        if tag in self._killed:
            return
        self._killed.add(tag)
        self.record("vm_killed", f"VM {k[0]}/{k[1]} killed on node {node or '?'} ({reason})",
                    vm=k[1], namespace=k[0], node=node, reason=reason)

    # pods ----------------------------------------------------------------------------
    def _on_pod(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        if not seeding:
            self._check_pdb(etype, obj, old)
        owner = _launcher_vmi(obj)
        if owner is None:
            return
        ns = _md(obj).get("namespace") or ""
        k = (ns, owner[0])
        pod = _md(obj).get("name") or ""
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        running = etype != "DELETED" and _phase(obj) == "Running" and \
            not _md(obj).get("deletionTimestamp")
        pods = self.launchers.setdefault(k, {})
        if running:
            pods[pod] = node
        else:
            pods.pop(pod, None)
            if not pods:
                self.launchers.pop(k, None)
        if seeding:
            return
        # killed: the VMI's active pod vanished without graceful termination, or failed
        vmi = self.vmis.get(k)
        active = vmi is not None and _phase(vmi) == "Running" and \
            (vmi.get("status") or {}).get("nodeName") == node and \
            (not owner[1] or _md(vmi).get("uid") == owner[1])
        was_running = old is not None and _phase(old) == "Running" and \
            not _md(old).get("deletionTimestamp")
        if active and was_running and not self._migration_active(k):
            forced = etype == "DELETED"
            failed = etype != "DELETED" and _phase(obj) == "Failed"
            if forced or failed:
                reason = "node_not_ready" if node and not self.node_ready.get(node, True) \
                    else ("forced_delete" if forced else "pod_failed")
                self._kill(k, str(_md(vmi).get("uid") or ""), node, reason)
        self._update_dual(k)

    def _update_dual(self, k: Key) -> None:
        nodes = set((self.launchers.get(k) or {}).values())
        if len(nodes) >= 2:
            self._dual_since.setdefault(k, self.now())
        else:
            self._dual_since.pop(k, None)
            self._dual_reported.discard(k)
            self._dual_migrating.discard(k)
            self._dual_after_migration.pop(k, None)

    def migration_limit_s(self, k: Key) -> float:
        """How long KubeVirt lets a migration of this VMI run before it cancels it."""
        mib = vmi_memory_mib((self.vmis.get(k) or {}).get("spec") or {})
        return self.migration_timeout_per_gib_s * max(1.0, mib / 1024.0)

    def _check_dual(self) -> None:
        now = self.now()
        for k, since in list(self._dual_since.items()):
            if k in self._dual_reported:
                continue
            migrating = self._migration_active(k)
            if migrating:
                self._dual_migrating.add(k)
                start = since
                limit = self.dual_grace_s + self.migration_limit_s(k)
            else:
                if k in self._dual_migrating:   # it just ended: the source pod gets the grace
                    self._dual_migrating.discard(k)
                    self._dual_after_migration[k] = now
                start = max(since, self._dual_after_migration.get(k, since))
                limit = self.dual_grace_s
            if now - start < limit:
                continue
            self._dual_reported.add(k)
            pods = dict(self.launchers.get(k) or {})
            nodes = sorted(set(pods.values()))
            why = (f"a migration still running after {now - since:.0f} s (KubeVirt cancels "
                   f"it after {limit - self.dual_grace_s:.0f} s)") if migrating else \
                "no migration"
            self.record("vmi_on_two_nodes",
                        f"VMI {k[0]}/{k[1]} running on {len(nodes)} nodes "
                        f"({', '.join(nodes)}) with {why}",
                        vm=k[1], namespace=k[0], nodes=nodes, pods=sorted(pods), since=since,
                        migrating=migrating)

    def _on_pdb(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        k = _key(obj)
        if etype == "DELETED":
            self.pdbs.pop(k, None)
        else:
            self.pdbs[k] = obj

    def _check_pdb(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if old is None or not _pod_healthy(old):
            return
        deleted = etype == "DELETED"
        started_delete = not deleted and bool(_md(obj).get("deletionTimestamp"))
        failed = not deleted and _phase(obj) in ("Failed", "Succeeded")
        if not (deleted or started_delete or failed):
            return
        node = str((old.get("spec") or {}).get("nodeName") or "")
        if not (node in self.cordoned or not self.node_ready.get(node, True)):
            return
        ns = _md(obj).get("namespace") or ""
        name = _md(obj).get("name") or ""
        labels = _md(old).get("labels") or {}
        for (pns, pname), pdb in self.pdbs.items():
            if pns != ns:
                continue
            sel = from_label_selector_dict((pdb.get("spec") or {}).get("selector"),
                                           empty_matches_all=False)
            if not sel.matches(labels):
                continue
            st = pdb.get("status") or {}
            if name in (st.get("disruptedPods") or {}):
                continue
            if int(st.get("disruptionsAllowed", 0) or 0) > 0:
                continue
            how = "deleted" if deleted or started_delete else "killed"
            self.record("pdb_violated",
                        f"pod {ns}/{name} on node {node} {how} while PodDisruptionBudget "
                        f"{pname} allowed no disruption "
                        f"({st.get('currentHealthy', '?')}/{st.get('desiredHealthy', '?')} "
                        "healthy)", pod=name, namespace=ns, pdb=pname, node=node,
                        by=self.actor(obj))

    # settings --------------------------------------------------------------------------
    # The baseline of a setting is its value when the monitor first sees it: at the start,
    # or when its controller creates it (Longhorn creates its defaults once it runs).
    def _chart_longhorn_settings(self) -> dict[str, str]:
        """The Longhorn settings the ``harvester`` ManagedChart sets
        (``spec.values.longhorn.defaultSettings``, by Setting name): Harvester's upgrade
        writes some there for good (``upgrade_manifests.sh`` ``patch_longhorn_settings``),
        so they are not the upgrader's to restore."""
        mc = next((m for m in self._list("management.cattle.io", "managedcharts") or []
                   if _key(m) == ("fleet-local", "harvester")), None)
        values = ((mc or {}).get("spec") or {}).get("values") or {}
        defaults = (values.get("longhorn") or {}).get("defaultSettings") or {}
        return {re.sub(r"(?<!^)([A-Z])", r"-\1", k).lower(): str(v)
                for k, v in defaults.items()}

    def _on_lh_setting(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        name = _md(obj).get("name") or ""
        if etype != "DELETED" and name not in self.initial_settings:
            self.initial_settings[name] = obj.get("value")

    def _on_addon(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        if etype != "DELETED" and _key(obj) == DESCHEDULER_ADDON and \
                self.initial_descheduler is None:
            self.initial_descheduler = bool((obj.get("spec") or {}).get("enabled"))

    # Longhorn ------------------------------------------------------------------------
    def _on_volume(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        name = _md(obj).get("name") or ""
        if etype == "DELETED" or _md(obj).get("deletionTimestamp"):
            # a deleted volume's replicas go with it: that is no data loss
            self._volumes_deleted.add(name)
        if etype == "DELETED":
            self.volume_robustness.pop(name, None)
            self._volume_bad.discard(name)
            return
        rob = str((obj.get("status") or {}).get("robustness") or "unknown")
        self.volume_robustness[name] = rob
        if rob == "faulted":
            self._bad_volume(name, "faulted", seeding, node=(obj.get("status") or {})
                             .get("currentNodeID"))
        elif rob in ("healthy", "degraded") and self._replicas_healthy(name) != 0:
            self._volume_bad.discard(name)

    def _replicas_healthy(self, volume: str) -> int | None:
        reps = self.replicas.get(volume)
        if not reps:
            return None
        return sum(1 for ok in reps.values() if ok)

    def _on_replica(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        spec = obj.get("spec") or {}
        vol = str(spec.get("volumeName") or "")
        name = _md(obj).get("name") or ""
        reps = self.replicas.setdefault(vol, {})
        before = self._replicas_healthy(vol)
        if etype == "DELETED" and vol in self._volumes_deleted:
            reps.pop(name, None)
            return
        if etype == "DELETED":
            reps.pop(name, None)
        else:
            # a replica being rebuilt (reused or new) holds no complete copy of the data yet
            reps[name] = replica_available(obj)
        after = self._replicas_healthy(vol)
        if after == 0 and (before or 0) > 0:
            self._bad_volume(vol, "no healthy replica left", seeding)
        elif after:
            if self.volume_robustness.get(vol) != "faulted":
                self._volume_bad.discard(vol)

    def _bad_volume(self, name: str, why: str, seeding: bool, **extra: Any) -> None:
        if name in self._volume_bad:
            return
        self._volume_bad.add(name)
        if seeding:
            return
        self.record("volume_without_healthy_replica",
                    f"Longhorn volume {name}: {why}", volume=name, **extra)

    @staticmethod
    def _good_replicas(volume: str, replicas: list[Obj]) -> int:
        """Replicas of ``volume`` that hold its data: not failed, not being deleted (a
        detached volume's replicas are ``stopped`` and still count)."""
        return sum(1 for r in replicas
                   if (r.get("spec") or {}).get("volumeName") == volume
                   and not (r.get("spec") or {}).get("failedAt")
                   and not _md(r).get("deletionTimestamp")
                   and (r.get("status") or {}).get("currentState") in ("running", "stopped"))

    # ------------------------------------------------------------------------ end check
    def vm_running(self, k: Key) -> bool:
        vm = self.vms.get(k)
        st = (vm or {}).get("status") or {}
        if st.get("printableStatus") == "Running" or st.get("ready") is True:
            return True
        return _phase(self.vmis.get(k)) == "Running"

    def check_end(self) -> list[dict[str, Any]]:
        """What must hold once the run is over (see the module docstring): VMs running at
        start run; after a Succeeded upgrade, the cluster is as the upgrade found it."""
        out: list[dict[str, Any]] = []
        for where, fn in (("end check: VMs running", self._end_vms),
                          ("end check: upgrade finished", self._end_state)):
            try:
                # the store's lock first, as every write takes it before the monitor's (a write
                # calls on_event with it held): the other order deadlocked a report built while
                # the controllers still ran (two-hundred-node, a kubelet heartbeat)
                with self.world.store.lock, self._lock:
                    out += fn()
            except Exception as exc:  # noqa: BLE001 - a crashed end check is a violation
                log.exception("invariant end check crashed")
                out.append(self._error(where, exc, keep=False))
        return out

    def _end_vms(self) -> list[dict[str, Any]]:
        out = []
        for k in sorted(self.initial_running):
            ref = f"{k[0]}/{k[1]}"
            if self.vm_running(k):
                continue
            stop = self.explicit_stops.get(ref)
            if stop is not None and stop.get("how") == "deleted":
                continue
            vm = self.vms.get(k)
            status = ((vm or {}).get("status") or {}).get("printableStatus") or "Unknown"
            msg = f"VM {ref} was running at start and is {status} at the end"
            if stop is None:
                msg += " without an explicit stop"
            elif "restarted_at" in stop:
                msg += f" (stopped by {stop['by']}, restarted by " \
                       f"{stop.get('restarted_by', '?')}, never came back)"
            else:
                msg += f" (stopped by {stop['by']}: {stop['how']}; never restarted)"
            out.append({"kind": "vm_not_running_at_end", "t": self.now(), "message": msg,
                        "vm": k[1], "namespace": k[0], "status": status,
                        "stopped_by": (stop or {}).get("by")})
        return out

    def upgrade_succeeded(self) -> str | None:
        """The name of the newest UpgradePlan when it is Succeeded, else None."""
        plans = self._list(PLAN_GROUP, "upgradeplans") or []
        if not plans:
            return None
        newest = max(plans, key=lambda p: (str(_md(p).get("creationTimestamp") or ""),
                                           int(_md(p).get("resourceVersion") or 0)))
        if ((newest.get("status") or {}).get("currentPhase") or "") != "Succeeded":
            return None
        return str(_md(newest).get("name") or "")

    def _end_state(self) -> list[dict[str, Any]]:
        plan = self.upgrade_succeeded()
        self.end_state_checked = plan
        if plan is None:
            return []
        out: list[dict[str, Any]] = []
        now = self.now()

        def add(kind: str, message: str, **objects: Any) -> None:
            out.append({"kind": kind, "t": now, "message": message, "plan": plan, **objects})

        replicas = _by_volume(self._list("longhorn.io", "replicas") or [])
        for v in self._list("longhorn.io", "volumes") or []:
            name = _md(v).get("name") or ""
            if _md(v).get("deletionTimestamp"):
                continue
            want = int((v.get("spec") or {}).get("numberOfReplicas") or 0)
            st = v.get("status") or {}
            have = self._good_replicas(name, replicas.get(name, []))
            base_have, base_rob = self.initial_volume_replicas.get(name, (want, "healthy"))
            need = min(want, base_have)
            rob = str(st.get("robustness") or "")
            attached = st.get("state") == "attached"
            # Longhorn still rebuilding after the plan's end is Longhorn restoring the
            # volume, which the upgrade does not wait for (nor does upstream's)
            restoring = any(replica_restoring(r) for r in replicas.get(name, []))
            bad_rob = attached and rob != "healthy" and not restoring and \
                base_rob in ("healthy", "unknown", "")
            if have < need or bad_rob:
                add("volume_not_fully_replicated",
                    f"Longhorn volume {name}: {have} of {want} replicas hold its data"
                    + (f" (at the start {base_have})" if base_have < want else "")
                    + (f", robustness {rob or '?'} while attached" if bad_rob else "")
                    + f" after UpgradePlan {plan} Succeeded",
                    volume=name, replicas=have, wanted=want, robustness=rob)

        chosen = self._chart_longhorn_settings()
        for s in self._list("longhorn.io", "settings") or []:
            name = _md(s).get("name") or ""
            if name in chosen and str(s.get("value")) == chosen[name]:
                continue   # Harvester's upgrade chose it (upgrade_manifests.sh)
            if name in self.initial_settings and s.get("value") != self.initial_settings[name]:
                add("setting_not_restored",
                    f"Longhorn setting {name} is {s.get('value')!r}, was "
                    f"{self.initial_settings[name]!r} before UpgradePlan {plan}",
                    setting=f"longhorn.io/{name}", value=s.get("value"),
                    before=self.initial_settings[name])
        if self.initial_descheduler is not None:
            addon = next((a for a in self._list("harvesterhci.io", "addons") or []
                          if _key(a) == DESCHEDULER_ADDON), None)
            enabled = None if addon is None else bool((addon.get("spec") or {}).get("enabled"))
            if enabled != self.initial_descheduler:
                add("setting_not_restored",
                    f"Addon {'/'.join(DESCHEDULER_ADDON)} enabled={enabled}, was "
                    f"{self.initial_descheduler} before UpgradePlan {plan}",
                    setting="addon/" + "/".join(DESCHEDULER_ADDON), value=enabled,
                    before=self.initial_descheduler)

        for n in self._list("", "nodes") or []:
            name = _md(n).get("name") or ""
            if _has_drain_taint(n):
                add("upgrade_taint_left", f"node {name} still carries the {DRAIN_TAINT} taint "
                    f"after UpgradePlan {plan} Succeeded", node=name, taint=DRAIN_TAINT)
            if (n.get("spec") or {}).get("unschedulable") and name not in \
                    self.initially_cordoned:
                add("node_left_cordoned", f"node {name} is still cordoned after UpgradePlan "
                    f"{plan} Succeeded", node=name)

        hooks = set(self._hook_annotations())
        for sec in self._list("", "secrets") or []:
            if sec.get("type") != MACHINE_PLAN_TYPE:
                continue
            ann = _md(sec).get("annotations") or {}
            left = sorted(a for a in ann if a in RANCHER_DRAIN_ANNOTATIONS or a in hooks)
            if left:
                ns, name = _key(sec)
                add("hook_annotation_left",
                    f"machine-plan secret {ns}/{name} still carries {', '.join(left)} after "
                    f"UpgradePlan {plan} Succeeded", secret=f"{ns}/{name}", annotations=left)
        return out

    def _hook_annotations(self) -> list[str]:
        """The drain-hook answer annotations the provisioning cluster declares."""
        out = []
        for cl in self._list("provisioning.cattle.io", "clusters") or []:
            strategy = (((cl.get("spec") or {}).get("rkeConfig") or {})
                        .get("upgradeStrategy") or {})
            for opts in (strategy.get("controlPlaneDrainOptions") or {},
                         strategy.get("workerDrainOptions") or {}):
                for key in ("preDrainHooks", "postDrainHooks"):
                    for h in opts.get(key) or []:
                        if h.get("annotation"):
                            out.append(str(h["annotation"]))
        return out

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {"max_cordoned_seen": self.max_cordoned_seen,
                    "max_unavailable_seen": self.max_unavailable_seen,
                    "node_not_ready_transitions": dict(self.node_reboots),
                    "migrations_succeeded": dict(self.migrations_per_vm),
                    "explicit_stops": {k: dict(v) for k, v in self.explicit_stops.items()},
                    "vms_expected_running": len(self.initial_running),
                    "end_state_checked": self.end_state_checked,
                    "baseline": {"longhorn_settings": len(self.initial_settings),
                                 "descheduler_enabled": self.initial_descheduler,
                                 "volumes": len(self.initial_volume_replicas)}}


_HANDLED: dict[tuple[str, str], str] = {
    ("", "nodes"): "_on_node",
    ("", "pods"): "_on_pod",
    ("policy", "poddisruptionbudgets"): "_on_pdb",
    (KV, "virtualmachines"): "_on_vm",
    (KV, "virtualmachineinstances"): "_on_vmi",
    (KV, "virtualmachineinstancemigrations"): "_on_migration",
    ("longhorn.io", "volumes"): "_on_volume",
    ("longhorn.io", "replicas"): "_on_replica",
    ("longhorn.io", "settings"): "_on_lh_setting",
    ("harvesterhci.io", "addons"): "_on_addon",
}


def setup(world: Any) -> Monitor:
    """Create the monitor, take the loaded cluster as its baseline, subscribe to the store."""
    mon = Monitor(world)
    with world.store.lock:
        mon.seed()
        world.store.subscribe(mon.on_event)
    world.extras["invariants"] = mon
    return mon
