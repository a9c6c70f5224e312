"""The invariant monitor: watches every committed change and records what must never happen.

``setup(world)`` (called by ``World.start()`` after the scenario is loaded) subscribes a
:class:`Monitor` to the store, so it sees every write of every client (HTTP or in-process)
in commit order, independent of any controller. Violations are dicts
``{"kind", "t" (simulated s), "message", ...objects}`` in :attr:`Monitor.violations`:

``vmi_on_two_nodes``
    launcher pods of one VMI Running on two nodes for longer than
    ``invariants.dual_running_grace_s`` (default 60 s) with no migration of that VMI in
    progress (during a live migration source and target pods legitimately overlap).
``vm_killed``
    a Running VM lost its guest: its active launcher pod was deleted without graceful
    termination (forced delete, node reboot), its pod or VMI went Failed, or a controller
    recorded a ``vm_killed`` timeline event.
``vm_not_running_at_end``
    (from :meth:`Monitor.check_end`, at report time) a VM that was to run at start is not
    running and nobody stopped it explicitly (runStrategy set to ``Halted`` or
    ``spec.running: false``, or the VM deleted). Explicit stops are kept in
    :attr:`Monitor.explicit_stops` with who made them.
``volume_without_healthy_replica``
    a Longhorn volume became ``faulted`` or lost its last healthy replica.
``pdb_violated``
    a healthy pod covered by a PodDisruptionBudget with ``disruptionsAllowed == 0`` was
    disrupted (deleted or killed) on a cordoned or NotReady node without an eviction that
    the budget granted (the eviction API records granted evictions in
    ``status.disruptedPods``).
``too_many_cordoned``
    more nodes cordoned at once than ``invariants.max_cordoned`` (default 1).

Who made a change: the store does not know its caller, so the monitor asks
``world.extras['request_actor']()`` (the API server may provide it: the user agent of the
request being served on this thread) and falls back to the last ``managedFields`` manager.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from .api.selectors import from_label_selector_dict

log = logging.getLogger("harvester_sim.invariants")

Obj = dict[str, Any]
Key = tuple[str, str]

KV = "kubevirt.io"
STOPPED_STRATEGIES = ("Halted",)
FINAL_MIGRATION_PHASES = ("Succeeded", "Failed")


def _md(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _key(obj: Obj) -> Key:
    md = _md(obj)
    return (md.get("namespace") or "", md.get("name") or "")


def _phase(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def _node_ready(node: Obj) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


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


class Monitor:
    """Continuously checked invariants (see the module docstring)."""

    def __init__(self, world: Any) -> None:
        self.world = world
        cfg = (getattr(world, "scenario", None) or {}).get("invariants") or {}
        self.max_cordoned = int(cfg.get("max_cordoned", 1))
        self.dual_grace_s = float(cfg.get("dual_running_grace_s", 60.0))
        self._lock = threading.RLock()
        self._violations: list[dict[str, Any]] = []
        self.explicit_stops: dict[str, dict[str, Any]] = {}
        self.initial_running: set[Key] = set()
        self.node_ready: dict[str, bool] = {}
        self.cordoned: set[str] = set()
        self.max_cordoned_seen = 0
        self._cordon_breach = False
        self.node_reboots: Counter[str] = Counter()
        self.pdbs: dict[Key, Obj] = {}
        self.vmis: dict[Key, Obj] = {}
        self.vms: dict[Key, Obj] = {}
        self.migrations: dict[Key, Obj] = {}
        self.migrations_per_vm: Counter[str] = Counter()
        self.launchers: dict[Key, dict[str, str]] = {}   # (ns, vmi) -> running pod -> node
        self._dual_since: dict[Key, float] = {}
        self._dual_reported: set[Key] = set()
        self._killed: set[str] = set()
        self.volume_robustness: dict[str, str] = {}
        self.replicas: dict[str, dict[str, bool]] = {}     # volume -> replica -> healthy
        self._volume_bad: set[str] = set()
        self._volumes_deleted: set[str] = set()
        self.started = False

    # ------------------------------------------------------------------------- plumbing
    def now(self) -> float:
        return round(float(self.world.clock.now()), 3)

    @property
    def violations(self) -> list[dict[str, Any]]:
        """Everything recorded so far, plus ``vm_killed`` timeline events of controllers."""
        with self._lock:
            self._check_dual()
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
        self.started = True

    # --------------------------------------------------------------------------- events
    def on_event(self, ev: Any) -> None:
        rt = ev.rt
        if rt is None or rt.key not in _HANDLED:
            return
        try:
            self.observe(rt.key, ev.type, ev.obj, ev.old)
        except Exception:  # noqa: BLE001 - the monitor must never break a store write
            log.exception("invariant monitor error")

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
            self.node_ready.pop(name, None)
            self.cordoned.discard(name)
            return
        ready = _node_ready(obj)
        was = self.node_ready.get(name)
        self.node_ready[name] = ready
        if was and not ready and not seeding:
            self.node_reboots[name] += 1
        if (obj.get("spec") or {}).get("unschedulable"):
            self.cordoned.add(name)
        else:
            self.cordoned.discard(name)
        n = len(self.cordoned)
        self.max_cordoned_seen = max(self.max_cordoned_seen, n)
        if n > self.max_cordoned and not self._cordon_breach and not seeding:
            self._cordon_breach = True
            self.record("too_many_cordoned",
                        f"{n} nodes cordoned at once (limit {self.max_cordoned}): "
                        f"{', '.join(sorted(self.cordoned))}",
                        nodes=sorted(self.cordoned), limit=self.max_cordoned)
        elif n <= self.max_cordoned:
            self._cordon_breach = False

    # VMs -----------------------------------------------------------------------------
    def _on_vm(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        k = _key(obj)
        ref = f"{k[0]}/{k[1]}"
        if etype == "DELETED":
            self.vms.pop(k, None)
            if not seeding and k in self.initial_running and ref not in self.explicit_stops:
                self.explicit_stops[ref] = {"t": self.now(), "by": self.actor(obj),
                                            "how": "deleted"}
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
            return
        self.vmis[k] = obj
        if seeding:
            return
        if _phase(obj) == "Failed" and _phase(old) == "Running":
            node = str((obj.get("status") or {}).get("nodeName") or "")
            reason = "node_not_ready" if node and not self.node_ready.get(node, True) else \
                "vmi_failed"
            self._kill(k, str(_md(obj).get("uid") or ""), node, reason)

    def _migration_active(self, k: Key) -> bool:
        for m in self.migrations.values():
            if _md(m).get("namespace") == k[0] and (m.get("spec") or {}).get("vmiName") == k[1] \
                    and _phase(m) not in FINAL_MIGRATION_PHASES:
                return True
        vmi = self.vmis.get(k)
        ms = ((vmi or {}).get("status") or {}).get("migrationState") or {}
        return bool(ms) and bool(ms.get("startTimestamp")) and not ms.get("completed") and \
            not ms.get("failed")

    def _on_migration(self, etype: str, obj: Obj, old: Obj | None, seeding: bool) -> None:
        k = (_md(obj).get("namespace") or "", _md(obj).get("name") or "")
        if etype == "DELETED":
            self.migrations.pop(k, None)
            return
        self.migrations[k] = obj
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
        if len(nodes) >= 2 and not self._migration_active(k):
            self._dual_since.setdefault(k, self.now())
        else:
            self._dual_since.pop(k, None)
            self._dual_reported.discard(k)

    def _check_dual(self) -> None:
        now = self.now()
        for k, since in list(self._dual_since.items()):
            if k in self._dual_reported:
                continue
            if self._migration_active(k):
                self._dual_since[k] = now
                continue
            if now - since >= self.dual_grace_s:
                self._dual_reported.add(k)
                pods = dict(self.launchers.get(k) or {})
                self.record("vmi_on_two_nodes",
                            f"VMI {k[0]}/{k[1]} running on {len(set(pods.values()))} nodes "
                            f"({', '.join(sorted(set(pods.values())))}) with no migration",
                            vm=k[1], namespace=k[0], nodes=sorted(set(pods.values())),
                            pods=sorted(pods), since=since)

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
            reps[name] = (obj.get("status") or {}).get("currentState") == "running" and \
                not spec.get("failedAt")
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

    # ------------------------------------------------------------------------ end check
    def vm_running(self, k: Key) -> bool:
        vm = self.vms.get(k)
        st = (vm or {}).get("status") or {}
        if st.get("printableStatus") == "Running" or st.get("ready") is True:
            return True
        return _phase(self.vmis.get(k)) == "Running"

    def check_end(self) -> list[dict[str, Any]]:
        """VMs running at start that are not running now and were not stopped explicitly."""
        out = []
        with self._lock:
            for k in sorted(self.initial_running):
                ref = f"{k[0]}/{k[1]}"
                if self.vm_running(k):
                    continue
                stop = self.explicit_stops.get(ref)
                if stop is not None and (stop.get("how") == "deleted" or
                                         "restarted_at" not in stop):
                    continue
                vm = self.vms.get(k)
                status = ((vm or {}).get("status") or {}).get("printableStatus") or "Unknown"
                msg = f"VM {ref} was running at start and is {status} at the end"
                if stop is not None:
                    msg += f" (stopped by {stop['by']}, restarted by " \
                           f"{stop.get('restarted_by', '?')}, never came back)"
                else:
                    msg += " without an explicit stop"
                out.append({"kind": "vm_not_running_at_end", "t": self.now(), "message": msg,
                            "vm": k[1], "namespace": k[0], "status": status})
        return out

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {"max_cordoned_seen": self.max_cordoned_seen,
                    "node_not_ready_transitions": dict(self.node_reboots),
                    "migrations_succeeded": dict(self.migrations_per_vm),
                    "explicit_stops": {k: dict(v) for k, v in self.explicit_stops.items()},
                    "vms_expected_running": len(self.initial_running)}


_HANDLED: dict[tuple[str, str], str] = {
    ("", "nodes"): "_on_node",
    ("", "pods"): "_on_pod",
    ("policy", "poddisruptionbudgets"): "_on_pdb",
    (KV, "virtualmachines"): "_on_vm",
    (KV, "virtualmachineinstances"): "_on_vmi",
    (KV, "virtualmachineinstancemigrations"): "_on_migration",
    ("longhorn.io", "volumes"): "_on_volume",
    ("longhorn.io", "replicas"): "_on_replica",
}


def setup(world: Any) -> Monitor:
    """Create the monitor, take the loaded cluster as its baseline, subscribe to the store."""
    mon = Monitor(world)
    with world.store.lock:
        mon.seed()
        world.store.subscribe(mon.on_event)
    world.extras["invariants"] = mon
    return mon
