"""VM evacuation planning for one node: which VMs live-migrate (and where), which shut down.

Pure logic, no API calls: ``vm_evacuate`` (the module), the ``--check`` node plan and the unit
tests feed it plain Kubernetes objects (dicts) and act on the answer.

* :func:`non_migratable_reason` follows upgrade-toolkit's detector (reference §D.1) and goes
  further where KubeVirt would refuse or hang: host devices, GPUs, KubeVirt's own
  ``LiveMigratable=False`` reasons, and a nodeSelector / required node affinity / taints that
  leave no other node to run on.
* :func:`plan_evacuation` places every migratable VM. **Target-aware** placement sends a VM to a
  node that is already upgraded whenever one has room (allocatable minus requests), so the VM
  moves once; it falls back to a not-yet-upgraded node (preferring the one Rancher drains last)
  only when it must. ``target_aware=False`` leaves the choice to the scheduler (the naive
  baseline: a VM may land on the next node to be drained and move again).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.object_memo import (
    ObjectMemo,
)

WITNESS_LABEL = "node-role.harvesterhci.io/witness"
DRAIN_TAINT_KEY = "kubevirt.io/drain"
UPGRADE_REPO_VM_LABEL = "harvesterhci.io/upgrade"

_MEM_SUFFIX = {
    "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4, "Pi": 1024 ** 5,
    "Ei": 1024 ** 6, "k": 1000, "K": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "T": 1000 ** 4,
    "P": 1000 ** 5, "E": 1000 ** 6, "m": 0.001, "": 1,
}
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity ("500m", "4Gi", "2", 3) as a float in base units."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    return _parse_text(str(value))


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> float:
    # a cluster's pods repeat a few dozen request strings thousands of times
    m = _QTY.match(text.strip())
    if not m or m.group(2) not in _MEM_SUFFIX:
        raise ValueError(f"invalid quantity {text!r}")
    return float(m.group(1)) * _MEM_SUFFIX[m.group(2)]


def cpu_millis(value: Any) -> int:
    return round(parse_quantity(value) * 1000)


def mem_bytes(value: Any) -> int:
    return int(parse_quantity(value))


# ---------------------------------------------------------------------------------------------
# Views over API objects
# ---------------------------------------------------------------------------------------------

@dataclass
class NodeView:
    """What placement needs to know about one node."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)
    unschedulable: bool = False
    ready: bool = True
    alloc_cpu_m: int = 0
    alloc_mem: int = 0
    req_cpu_m: int = 0
    req_mem: int = 0
    upgraded: bool = False
    order: int = 0          # position in Rancher's drain order

    @property
    def witness(self) -> bool:
        return WITNESS_LABEL in self.labels

    @property
    def free_cpu_m(self) -> int:
        return self.alloc_cpu_m - self.req_cpu_m

    @property
    def free_mem(self) -> int:
        return self.alloc_mem - self.req_mem

    def fits(self, vm: VmView) -> bool:
        return self.free_cpu_m >= vm.cpu_m and self.free_mem >= vm.mem


@dataclass
class VmView:
    """What evacuation needs to know about one running VMI."""

    namespace: str
    name: str
    node: str
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    host_devices: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    live_migratable: tuple[str, str, str] | None = None   # (status, reason, message)
    paused: bool = False
    repo_vm: bool = False
    cpu_m: int = 0
    mem: int = 0            # scheduling request of the virt-launcher pod (bytes)
    guest_mem: int = 0      # guest memory to copy during a migration (bytes)
    phase: str = "Running"
    migrating: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_requests(pod: dict[str, Any]) -> tuple[int, int]:
    """Sum of container requests (cpu millicores, memory bytes); init containers by max."""
    spec = pod.get("spec") or {}
    cpu = mem = 0
    for c in spec.get("containers") or []:
        req = ((c.get("resources") or {}).get("requests")) or {}
        cpu += cpu_millis(req.get("cpu"))
        mem += mem_bytes(req.get("memory"))
    for c in spec.get("initContainers") or []:
        req = ((c.get("resources") or {}).get("requests")) or {}
        cpu = max(cpu, cpu_millis(req.get("cpu")))
        mem = max(mem, mem_bytes(req.get("memory")))
    return cpu, mem


def pod_is_active(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not (pod.get("metadata") or {}).get(
        "deletionTimestamp")


def _active_requests(pod: dict[str, Any]) -> tuple[str, bool, int, int]:
    """(node, active, cpu millicores, memory bytes) of a pod."""
    c, m = pod_requests(pod)
    return str((pod.get("spec") or {}).get("nodeName") or ""), pod_is_active(pod), c, m


# what a pod version takes of its node, looked at once per version: by the Pod informer's
# totals as pods change (pod_requests_by_node), by a plain client's plan at each evacuation
_pod_facts = ObjectMemo(_active_requests)


# the name of the Pod informer's total of :func:`pod_requests_by_node` (cycle_kube.TOTALS)
POD_REQUESTS = "requests"


def pod_requests_by_node(pod: dict[str, Any]) -> tuple[str, tuple[int, ...]] | None:
    """What an active pod bound to a node takes of it: ``(node, (cpu millicores, memory
    bytes))``; ``None`` for a pod that takes nothing (not bound, or done)."""
    on, active, c, m = _pod_facts(pod)
    return (on, (c, m)) if active and on else None


def node_view(node: dict[str, Any], pods: list[dict[str, Any]], *, upgraded: bool = False,
              order: int = 0) -> NodeView:
    """A :class:`NodeView` from a Node and the pods bound to it (any namespace)."""
    cpu = mem = 0
    name = (node.get("metadata") or {}).get("name")
    for p in pods:
        on, active, c, m = _pod_facts(p)
        if active and on == name:
            cpu += c
            mem += m
    return node_view_of(node, cpu, mem, upgraded=upgraded, order=order)


def node_view_of(node: dict[str, Any], req_cpu_m: int, req_mem: int, *, upgraded: bool = False,
                 order: int = 0) -> NodeView:
    """A :class:`NodeView` from a Node and what the pods bound to it request."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    return NodeView(
        name=meta.get("name", ""), labels=dict(meta.get("labels") or {}),
        taints=list(spec.get("taints") or []), unschedulable=bool(spec.get("unschedulable")),
        ready=ready, alloc_cpu_m=cpu_millis(alloc.get("cpu")),
        alloc_mem=mem_bytes(alloc.get("memory")), req_cpu_m=req_cpu_m, req_mem=req_mem,
        upgraded=upgraded, order=order)


def vm_view(vmi: dict[str, Any], launcher: dict[str, Any] | None = None) -> VmView:
    """A :class:`VmView` from a VirtualMachineInstance and (if known) its virt-launcher pod."""
    meta = vmi.get("metadata") or {}
    spec = vmi.get("spec") or {}
    status = vmi.get("status") or {}
    domain = spec.get("domain") or {}
    devices = domain.get("devices") or {}
    lm: tuple[str, str, str] | None = None
    paused = False
    for c in status.get("conditions") or []:
        if c.get("type") == "LiveMigratable":
            lm = (str(c.get("status")), str(c.get("reason") or ""), str(c.get("message") or ""))
        if c.get("type") == "Paused" and c.get("status") == "True":
            paused = True
    res = domain.get("resources") or {}
    req = res.get("requests") or {}
    guest = mem_bytes((domain.get("memory") or {}).get("guest") or req.get("memory")
                      or (res.get("limits") or {}).get("memory"))
    if launcher is not None:
        cpu_m, mem = pod_requests(launcher)
    else:
        cpu_m = cpu_millis(req.get("cpu") or (domain.get("cpu") or {}).get("cores") or 0)
        mem = mem_bytes(req.get("memory")) or guest
    ms = status.get("migrationState") or {}
    migrating = bool(ms) and not ms.get("completed") and not ms.get("failed")
    return VmView(
        namespace=meta.get("namespace", "default"), name=meta.get("name", ""),
        node=status.get("nodeName") or "",
        node_selector=dict(spec.get("nodeSelector") or {}),
        affinity=dict(spec.get("affinity") or {}),
        tolerations=list(spec.get("tolerations") or []),
        host_devices=[d.get("name") or d.get("deviceName") or "?"
                      for d in devices.get("hostDevices") or []],
        gpus=[d.get("name") or d.get("deviceName") or "?" for d in devices.get("gpus") or []],
        live_migratable=lm, paused=paused,
        repo_vm=UPGRADE_REPO_VM_LABEL in (meta.get("labels") or {}),
        cpu_m=cpu_m, mem=mem, guest_mem=guest or mem, phase=status.get("phase") or "",
        migrating=migrating)


# ---------------------------------------------------------------------------------------------
# Scheduling predicates (the subset the scheduler and KubeVirt apply to a migration target)
# ---------------------------------------------------------------------------------------------

def _expr_matches(expr: dict[str, Any], values: dict[str, str]) -> bool:
    key, op = expr.get("key", ""), expr.get("operator", "In")
    wanted = [str(v) for v in expr.get("values") or []]
    present = key in values
    val = values.get(key)
    if op == "In":
        return present and val in wanted
    if op == "NotIn":
        return not present or val not in wanted
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and wanted:
        try:
            a, b = int(str(val)), int(wanted[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def term_matches(term: dict[str, Any], node: NodeView) -> bool:
    """One NodeSelectorTerm: all its expressions and fields must match."""
    exprs = term.get("matchExpressions") or []
    fields_ = term.get("matchFields") or []
    if not exprs and not fields_:
        return False   # an empty term matches nothing (Kubernetes semantics)
    if not all(_expr_matches(e, node.labels) for e in exprs):
        return False
    return all(_expr_matches(f, {"metadata.name": node.name}) for f in fields_)


def required_affinity_matches(affinity: dict[str, Any], node: NodeView) -> bool:
    req = ((affinity.get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution")) or {}
    terms = req.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(term_matches(t, node) for t in terms)


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key") and op == "Exists":
            return True
        if t.get("key") != taint.get("key"):
            continue
        if op == "Exists" or str(t.get("value") or "") == str(taint.get("value") or ""):
            return True
    return False


def schedulable_for(vm: VmView, node: NodeView) -> bool:
    """Could the VM's target pod be scheduled on ``node``, ignoring capacity?"""
    if node.witness or node.unschedulable or not node.ready:
        return False
    if any(node.labels.get(k) != v for k, v in vm.node_selector.items()):
        return False
    if not required_affinity_matches(vm.affinity, node):
        return False
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(
                vm.tolerations, taint):
            return False
    return True


def candidate_nodes(vm: VmView, nodes: list[NodeView]) -> list[NodeView]:
    return [n for n in nodes if n.name != vm.node and schedulable_for(vm, n)]


# ---------------------------------------------------------------------------------------------
# Decisions
# ---------------------------------------------------------------------------------------------

def non_migratable_reason(vm: VmView, nodes: list[NodeView],
                          candidates: list[NodeView] | None = None) -> str | None:
    """Why ``vm`` cannot be live-migrated off its node, or ``None`` if it can.

    The reason starts with a CamelCase word (KubeVirt's reason where KubeVirt gives one),
    followed by a sentence for people. ``candidates``: :func:`candidate_nodes` of ``vm``,
    when the caller has them.
    """
    if not any(n.name != vm.node and not n.witness for n in nodes):
        return "SingleNode: no other non-witness node to migrate to"
    if vm.host_devices:
        return ("HostDeviceNotLiveMigratable: uses host devices "
                f"({', '.join(vm.host_devices)})")
    if vm.gpus:
        return f"GPUNotLiveMigratable: uses GPUs ({', '.join(vm.gpus)})"
    if vm.paused:
        return "Paused: a paused VMI cannot be live-migrated"
    if vm.live_migratable is not None and vm.live_migratable[0] == "False":
        reason = vm.live_migratable[1] or "NotLiveMigratable"
        msg = vm.live_migratable[2] or "KubeVirt reports LiveMigratable=False"
        return f"{reason}: {msg}"
    if not (candidates if candidates is not None else candidate_nodes(vm, nodes)):
        if vm.node_selector:
            sel = ",".join(f"{k}={v}" for k, v in sorted(vm.node_selector.items()))
            return f"NodeSelectorPinned: nodeSelector {sel} matches no other schedulable node"
        if ((vm.affinity.get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution")):
            return ("NodeAffinityPinned: required node affinity matches no other "
                    "schedulable node")
        return "NoCandidateNode: no other schedulable node tolerates this VM"
    return None


@dataclass
class Move:
    vm: VmView
    target: str | None           # None: the scheduler chooses (naive, or no room anywhere)
    why: str


@dataclass
class Shutdown:
    vm: VmView
    reason: str


@dataclass
class EvacuationPlan:
    node: str
    migrate: list[Move] = field(default_factory=list)
    shutdown: list[Shutdown] = field(default_factory=list)

    def as_dict(self, bandwidth_mib_s: float = 0.0, overhead_s: float = 0.0,
                concurrency: int = 1) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node": self.node,
            "migrate": [{"vm": m.vm.key, "target": m.target, "why": m.why,
                         "memory_mib": m.vm.guest_mem // (1024 * 1024)} for m in self.migrate],
            "shutdown": [{"vm": s.vm.key, "reason": s.reason} for s in self.shutdown],
        }
        if bandwidth_mib_s > 0:
            out["estimated_seconds"] = round(estimate_evacuation_seconds(
                [m.vm for m in self.migrate], bandwidth_mib_s, overhead_s, concurrency), 1)
        return out


def estimate_migration_seconds(vm: VmView, bandwidth_mib_s: float, overhead_s: float) -> float:
    mib = vm.guest_mem / (1024 * 1024)
    return overhead_s + (mib / bandwidth_mib_s if bandwidth_mib_s > 0 else 0.0)


def estimate_evacuation_seconds(vms: list[VmView], bandwidth_mib_s: float, overhead_s: float,
                                concurrency: int = 1) -> float:
    """Makespan of migrating ``vms`` with ``concurrency`` lanes sharing the bandwidth."""
    if not vms:
        return 0.0
    conc = max(1, concurrency)
    # concurrent migrations share the link: total copy time is bytes / bandwidth; the fixed
    # per-migration overheads overlap across lanes.
    copy = sum(v.guest_mem for v in vms) / (1024 * 1024) / max(bandwidth_mib_s, 1e-9)
    over = overhead_s * -(-len(vms) // conc)
    return copy + over


def _pick(candidates: list[NodeView], vm: VmView, prefer_late: bool) -> NodeView | None:
    fitting = [n for n in candidates if n.fits(vm)]
    if not fitting:
        return None
    if prefer_late:
        # not-yet-upgraded nodes: the one Rancher drains last, so the VM's second move waits
        # until as much upgraded capacity as possible exists; then the most free memory.
        return max(fitting, key=lambda n: (n.order, n.free_mem, n.free_cpu_m, n.name))
    return max(fitting, key=lambda n: (n.free_mem, n.free_cpu_m, n.name))


def choose_target(vm: VmView, nodes: list[NodeView], *, exclude: set[str] | None = None,
                  candidates: list[NodeView] | None = None) -> tuple[NodeView | None, str]:
    """Best target for ``vm`` (upgraded nodes first); does not reserve capacity.
    ``candidates``: :func:`candidate_nodes` of ``vm``, when the caller has them."""
    excl = exclude or set()
    cands = [n for n in (candidates if candidates is not None else candidate_nodes(vm, nodes))
             if n.name not in excl]
    up = [n for n in cands if n.upgraded]
    pick = _pick(up, vm, prefer_late=False)
    if pick is not None:
        return pick, "upgraded node with room"
    pending = [n for n in cands if not n.upgraded]
    pick = _pick(pending, vm, prefer_late=True)
    if pick is not None:
        why = ("no upgraded node has room; not-yet-upgraded node drained last"
               if up else "no node upgraded yet; not-yet-upgraded node drained last")
        return pick, why
    return None, "no candidate node has room by requests; the scheduler chooses"


def plan_evacuation(node: str, vms: list[VmView], nodes: list[NodeView], *,
                    target_aware: bool = True) -> EvacuationPlan:
    """Decide, for every VM running on ``node``, a migration target or a shutdown.

    ``nodes`` is every node of the cluster (including ``node``); capacity is reserved on the
    chosen targets as VMs are placed, largest VMs first.
    """
    plan = EvacuationPlan(node=node)
    pool = [dataclasses.replace(n) for n in nodes]   # copies: we reserve capacity
    # where a VM could be scheduled depends on its constraints and the nodes' labels, taints
    # and state, not on capacity: worked out once per set of constraints (a node's VMs mostly
    # share theirs), the capacity left is read on the pool's nodes as VMs are placed
    by_constraints: dict[str, list[NodeView]] = {}

    def candidates(vm: VmView) -> list[NodeView]:
        key = json.dumps([vm.node, vm.node_selector, vm.affinity, vm.tolerations],
                         sort_keys=True)
        found = by_constraints.get(key)
        if found is None:
            found = by_constraints[key] = candidate_nodes(vm, pool)
        return found

    movable: list[VmView] = []
    for vm in sorted(vms, key=lambda v: v.key):
        if vm.node != node:
            continue
        reason = non_migratable_reason(vm, pool, candidates(vm))
        if reason is not None:
            plan.shutdown.append(Shutdown(vm, reason))
        else:
            movable.append(vm)
    for vm in sorted(movable, key=lambda v: (-v.mem, -v.cpu_m, v.key)):
        if not target_aware:
            plan.migrate.append(Move(vm, None, "target-aware placement off; scheduler chooses"))
            continue
        target, why = choose_target(vm, pool, candidates=candidates(vm))
        if target is not None:
            target.req_cpu_m += vm.cpu_m
            target.req_mem += vm.mem
        plan.migrate.append(Move(vm, target.name if target else None, why))
    return plan


def lower_bound_migrations(order: list[str], vms_by_node: dict[str, int]) -> int:
    """Fewest migrations a rolling upgrade needs: every migratable VM once, and those that
    start on the first node once more (nothing is upgraded yet when it is drained)."""
    if not order:
        return 0
    total = sum(vms_by_node.values())
    return total + vms_by_node.get(order[0], 0) if len(order) > 1 else 0
