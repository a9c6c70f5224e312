"""Small helpers shared by the core controllers (kubelet, scheduler, workloads).

* :class:`Informer`: the latest state of one kind, fed by the runtime's store events, with
  secondary indexes (by namespace, by controller owner uid, by node for pods). One informer
  per kind per world is shared by every controller (``informer(world, "v1", "Pod")``), so
  each event updates one index and then fans out to the controllers' handlers.
* Quantities, conditions, owner references, taints/tolerations and node affinity matching,
  ``int-or-percent`` arithmetic and template hashes.

Objects kept by informers are the store's own read-only dicts (shared with watch events);
they must never be mutated. Writes always go through a :class:`~harvester_sim.client.Client`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from ..api import errors
from ..client import Client

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped kinds
Handler = Callable[[str, Obj, "Obj | None"], None]

# ----------------------------------------------------------------------------- quantities
_SUFFIX = {
    "": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 1024.0, "Mi": 1024.0 ** 2, "Gi": 1024.0 ** 3, "Ti": 1024.0 ** 4,
    "Pi": 1024.0 ** 5, "Ei": 1024.0 ** 6,
}
_QTY_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def parse_quantity(q: Any, default: float = 0.0) -> float:
    """A Kubernetes quantity ("500m", "4Gi", "2", 3) as a float (cores or bytes)."""
    if q is None or q == "":
        return default
    if isinstance(q, (int, float)):
        return float(q)
    if type(q) is str:
        v = _parse_str_quantity(q)
        return default if v is None else v
    m = _QTY_RE.match(str(q).strip())
    if not m or m.group(2) not in _SUFFIX:
        return default
    return float(m.group(1)) * _SUFFIX[m.group(2)]


@functools.lru_cache(maxsize=4096)
def _parse_str_quantity(q: str) -> float | None:
    """Parsed string quantities (the scheduler asks about the same few thousand times)."""
    m = _QTY_RE.match(q.strip())
    if not m or m.group(2) not in _SUFFIX:
        return None
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def cpu_milli(q: Any) -> int:
    return int(math.ceil(parse_quantity(q) * 1000 - 1e-9))


def mem_bytes(q: Any) -> int:
    return int(parse_quantity(q))


def fmt_bytes_ki(n: int) -> str:
    return f"{n // 1024}Ki"


def pod_requests(pod: Obj) -> tuple[int, int]:
    """(cpu millicores, memory bytes) the scheduler accounts for: max(init, sum(app)) +
    overhead, requests defaulting to limits like the API server does."""
    spec = pod.get("spec") or {}

    def one(c: Obj) -> tuple[int, int]:
        res = c.get("resources") or {}
        req = res.get("requests") or {}
        lim = res.get("limits") or {}
        return (cpu_milli(req.get("cpu", lim.get("cpu"))),
                mem_bytes(req.get("memory", lim.get("memory"))))

    cpu = mem = 0
    for c in spec.get("containers") or []:
        a, b = one(c)
        cpu += a
        mem += b
    for c in spec.get("initContainers") or []:
        a, b = one(c)
        cpu = max(cpu, a)
        mem = max(mem, b)
    ov = spec.get("overhead") or {}
    return cpu + cpu_milli(ov.get("cpu")), mem + mem_bytes(ov.get("memory"))


# ----------------------------------------------------------------------------- pods
def key_of(obj: Obj) -> Key:
    md = obj["metadata"]
    return (md.get("namespace", ""), md["name"])


def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminal(pod: Obj) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def is_deleting(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def is_active(pod: Obj) -> bool:
    """What workload controllers count as an existing replica."""
    return not is_terminal(pod) and not is_deleting(pod)


def get_condition(obj: Obj | None, type_: str) -> Obj | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c  # type: ignore[no-any-return]
    return None


def condition_true(obj: Obj, type_: str) -> bool:
    c = get_condition(obj, type_)
    return c is not None and c.get("status") == "True"


def is_pod_ready(pod: Obj) -> bool:
    return phase(pod) == "Running" and condition_true(pod, "Ready")


def set_condition(conds: list[Obj], type_: str, status: str, reason: str | None = None,
                  message: str | None = None, now: str = "", heartbeat: str | None = None,
                  probe: bool = False) -> bool:
    """Set a condition in place; ``lastTransitionTime`` changes only when the status does.
    Returns True when anything changed."""
    for c in conds:
        if c.get("type") != type_:
            continue
        changed = False
        if c.get("status") != status:
            c["status"] = status
            c["lastTransitionTime"] = now
            changed = True
        for k, v in (("reason", reason), ("message", message)):
            if v is None:
                if k in c:
                    del c[k]
                    changed = True
            elif c.get(k) != v:
                c[k] = v
                changed = True
        if heartbeat is not None and (changed or c.get("lastHeartbeatTime") != heartbeat):
            c["lastHeartbeatTime"] = heartbeat
        if changed and "lastUpdateTime" in c:
            c["lastUpdateTime"] = now
        return changed
    c = {"type": type_, "status": status}
    if probe:
        c["lastProbeTime"] = None
    if heartbeat is not None:
        c["lastHeartbeatTime"] = heartbeat
    c["lastTransitionTime"] = now
    if reason is not None:
        c["reason"] = reason
    if message is not None:
        c["message"] = message
    conds.append(c)
    return True


# ----------------------------------------------------------------------------- owners
def controller_ref(obj: Obj) -> Obj | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def owner_ref(owner: Obj, controller: bool = True, block: bool = True) -> Obj:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
            "controller": controller, "blockOwnerDeletion": block}


# ----------------------------------------------------------------------------- int or percent
def int_or_percent(value: Any, total: int, round_up: bool, default: Any = None) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    if value is None:
        value = default
    if value is None:
        return 0
    if isinstance(value, str) and value.endswith("%"):
        pct = float(value[:-1] or 0)
        raw = pct * total / 100.0
        return int(math.ceil(raw - 1e-9)) if round_up else int(math.floor(raw + 1e-9))
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


# ----------------------------------------------------------------------------- hashes
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def safe_encode(n: int, length: int = 10) -> str:
    out = []
    for _ in range(length):
        n, r = divmod(n, len(_SAFE))
        out.append(_SAFE[r])
    return "".join(out)


def template_hash(template: Any, collision: int = 0, length: int = 10) -> str:
    """A stable hash of a pod template (what ``pod-template-hash`` labels carry)."""
    raw = json.dumps(template, sort_keys=True, separators=(",", ":")) + f"/{collision}"
    return safe_encode(int.from_bytes(hashlib.sha256(raw.encode()).digest()[:8], "big"), length)


def strip_hash_label(template: Obj, label: str) -> Obj:
    """The template without ``label`` in its metadata.labels (for comparisons)."""
    md = template.get("metadata") or {}
    labels = md.get("labels") or {}
    if label not in labels:
        return template
    new_labels = {k: v for k, v in labels.items() if k != label}
    new_md = dict(md)
    new_md["labels"] = new_labels
    new = dict(template)
    new["metadata"] = new_md
    return new


# ----------------------------------------------------------------------------- scheduling
def taints_of(node: Obj) -> list[Obj]:
    return list((node.get("spec") or {}).get("taints") or [])


def tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    for t in tolerations:
        effect = t.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        key = t.get("key")
        if not key:
            if op == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if op == "Exists":
            return True
        if (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def expr_matches(expr: Obj, values: dict[str, str]) -> bool:
    """One NodeSelectorRequirement (or label selector expression) against ``values``."""
    k = expr.get("key", "")
    op = expr.get("operator", "In")
    vals = [str(v) for v in expr.get("values") or []]
    has = k in values
    v = values.get(k)
    if op == "In":
        return has and v in vals
    if op == "NotIn":
        return not has or v not in vals
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt") and has and vals:
        try:
            a, b = int(str(v)), int(vals[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def tolerates_taints(pod: Obj, node: Obj) -> bool:
    """``pod`` tolerates every NoSchedule/NoExecute taint of ``node``, a cordon
    (``spec.unschedulable``) counted as the ``node.kubernetes.io/unschedulable`` taint."""
    tols = (pod.get("spec") or {}).get("tolerations") or []
    taints = taints_of(node)
    if (node.get("spec") or {}).get("unschedulable"):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    return all(tolerates(tols, t) for t in taints
               if t.get("effect") in ("NoSchedule", "NoExecute"))


def node_term_matches(term: Obj, node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches no objects
    if not all(expr_matches(e, labels) for e in exprs):
        return False
    fvals = {"metadata.name": node["metadata"]["name"]}
    return all(expr_matches(f, fvals) for f in fields)


def node_affinity_matches(pod: Obj, node: Obj) -> bool:
    """nodeSelector plus required node affinity (terms ORed, expressions ANDed)."""
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    req = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = req.get("nodeSelectorTerms")
    if terms is None:
        return True
    return any(node_term_matches(t, node) for t in terms)


def node_ready(node: Obj) -> bool:
    return condition_true(node, "Ready")


# ----------------------------------------------------------------------------- events
def record_event(client: Client, obj: Obj, type_: str, reason: str, message: str,
                 component: str, host: str | None = None, clock: Any = None) -> None:
    """A core/v1 Event about ``obj`` (best effort: never fails the caller)."""
    md = obj["metadata"]
    ns = md.get("namespace") or "default"
    now = clock.timestamp() if clock is not None else None
    source: Obj = {"component": component}
    if host:
        source["host"] = host
    ev = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{md['name']}.", "namespace": ns},
        "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                           "name": md["name"], "namespace": md.get("namespace"),
                           "uid": md.get("uid"),
                           "resourceVersion": md.get("resourceVersion")},
        "reason": reason, "message": message, "type": type_, "source": source,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        "reportingComponent": component, "reportingInstance": host or "",
    }
    try:
        client.create(ev, ns)
    except errors.ApiError:
        pass


# ----------------------------------------------------------------------------- informers
class Informer:
    """The latest known state of one kind, kept from the runtime's events."""

    def __init__(self, world: Any, api_version: str, kind: str) -> None:
        self.world = world
        self.client = world.client_for("informer")
        rt = self.client.rt(api_version, kind)
        self.api_version = api_version
        self.kind = kind
        self.objs: dict[Key, Obj] = {}
        self.by_ns: dict[str, set[Key]] = {}
        self.by_owner: dict[str, set[Key]] = {}
        self.by_node: dict[str, set[Key]] = {}
        self.is_pod = kind == "Pod" and api_version == "v1"
        self.handlers: list[Handler] = []
        world.runtime.on(rt.group, rt.plural, self._on_event)
        for obj in self.client.list_refs(api_version, kind):  # read-only, like events
            self._put(obj)

    def add_handler(self, fn: Handler) -> None:
        self.handlers.append(fn)

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.objs.get((namespace or "", name))

    def in_namespace(self, namespace: str) -> list[Obj]:
        return [self.objs[k] for k in self.by_ns.get(namespace, ())]

    def owned_by(self, uid: str) -> list[Obj]:
        return [self.objs[k] for k in self.by_owner.get(uid, ()) if k in self.objs]

    def on_node(self, node: str) -> list[Obj]:
        return [self.objs[k] for k in self.by_node.get(node, ()) if k in self.objs]

    def all(self) -> list[Obj]:
        return list(self.objs.values())

    def _unindex(self, k: Key, old: Obj) -> None:
        s = self.by_ns.get(k[0])
        if s is not None:
            s.discard(k)
        ref = controller_ref(old)
        if ref is not None:
            s = self.by_owner.get(ref.get("uid", ""))
            if s is not None:
                s.discard(k)
                if not s:
                    del self.by_owner[ref.get("uid", "")]
        if self.is_pod:
            node = (old.get("spec") or {}).get("nodeName")
            if node:
                s = self.by_node.get(node)
                if s is not None:
                    s.discard(k)

    def observe(self, obj: Obj | None) -> None:
        """Feed the result of our own write (so the next sync sees it before its event)."""
        if obj is not None:
            self._put(obj)

    def observe_deleted(self, obj: Obj | None) -> None:
        """Feed the result of our own delete: still there (deletionTimestamp set: graceful
        or finalizers) or gone."""
        if obj is None:
            return
        if obj["metadata"].get("deletionTimestamp"):
            self._put(obj)
            return
        k = key_of(obj)
        cur = self.objs.get(k)
        if cur is not None and cur["metadata"].get("uid") == obj["metadata"].get("uid"):
            del self.objs[k]
            self._unindex(k, cur)

    def _put(self, obj: Obj) -> None:
        k = key_of(obj)
        old = self.objs.get(k)
        if old is not None:
            if _rv(obj) < _rv(old):
                return  # an older state than we already know (we fed our own write)
            self._unindex(k, old)
        self.objs[k] = obj
        self.by_ns.setdefault(k[0], set()).add(k)
        ref = controller_ref(obj)
        if ref is not None:
            self.by_owner.setdefault(ref.get("uid", ""), set()).add(k)
        if self.is_pod:
            node = (obj.get("spec") or {}).get("nodeName")
            if node:
                self.by_node.setdefault(node, set()).add(k)

    def _on_event(self, type_: str, obj: Obj, old: Obj | None) -> None:
        k = key_of(obj)
        if type_ == "DELETED":
            cur = self.objs.get(k)
            if cur is not None and _rv(cur) <= _rv(obj):
                del self.objs[k]
                self._unindex(k, cur)
        else:
            self._put(obj)
        for h in self.handlers:
            h(type_, obj, old)


def _rv(obj: Obj) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def informer(world: Any, api_version: str, kind: str) -> Informer:
    """The world's shared informer for a kind (created on first use)."""
    cache: dict[tuple[str, str], Informer] = world.extras.setdefault("core_informers", {})
    inf = cache.get((api_version, kind))
    if inf is None:
        inf = Informer(world, api_version, kind)
        cache[(api_version, kind)] = inf
    return inf


class Batcher:
    """Coalesces "sync this key" requests into one pass on the runtime thread."""

    def __init__(self, world: Any, sync: Callable[[Key], None], delay: float = 0.0) -> None:
        self.world = world
        self.sync = sync
        self.delay = delay
        self.dirty: set[Key] = set()
        self._scheduled = False

    def add(self, key: Key) -> None:
        self.dirty.add(key)
        if not self._scheduled:
            self._scheduled = True
            if self.delay > 0:
                self.world.runtime.after(self.delay, self._run)
            else:
                self.world.runtime.call_soon(self._run)

    def add_after(self, key: Key, seconds: float) -> Any:
        return self.world.runtime.after(seconds, lambda: self.add(key))

    def _run(self) -> None:
        self._scheduled = False
        keys = sorted(self.dirty)
        self.dirty.clear()
        for k in keys:
            try:
                self.sync(k)
            except errors.ApiError as exc:
                if exc.code == 409:
                    self.add_after(k, 1.0)  # stale read: try again a little later
                elif exc.code != 404:  # 404: raced with a delete; its event re-syncs
                    raise


def ignore_missing(fn: Callable[[], Any]) -> Any:
    """Run an API write; a 404 (object gone meanwhile) is not an error for a controller."""
    try:
        return fn()
    except errors.ApiError as exc:
        if exc.code == 404:
            return None
        raise
