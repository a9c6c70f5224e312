"""The simulated kube-scheduler (``default-scheduler``).

Binds pending pods (no ``spec.nodeName``, ``schedulerName`` default or absent) to a node
that passes the filters the real scheduler applies first: ``spec.unschedulable`` (unless the
``node.kubernetes.io/unschedulable`` taint is tolerated), nodeSelector and required node
affinity (matchExpressions and matchFields), taints with NoSchedule/NoExecute effects vs the
pod's tolerations, not-Ready nodes, and cpu/memory/pod-count requests vs allocatable (a
per-node usage index fed by pod events). Among fitting nodes it picks the least allocated
(ties by name), which spreads pods deterministically.

Pods that fit nowhere get ``PodScheduled=False`` reason ``Unschedulable`` with the real
scheduler's message (``0/3 nodes are available: 1 Insufficient memory, 2 node(s) had
untolerated taint {...}. preemption: ...``) and are retried when nodes change, pods leave or
a claim is bound, once their backoff is over, as the scheduling queue does
(kubernetes/kubernetes ``pkg/scheduler/internal/queue/scheduling_queue.go``, release-1.30:
``MoveAllToActiveOrBackoffQueue`` on a cluster event; a pod still backing off waits for the
end of its backoff, ``calculateBackoffDuration``: 1 s doubled per failed attempt, at most
10 s, ``DefaultPodInitialBackoffDuration``/``DefaultPodMaxBackoffDuration``).

Volumes (the VolumeBinding plugin, kubernetes/kubernetes ``pkg/scheduler/framework/plugins/
volumebinding``, release-1.30): a pod whose claim does not exist, is being deleted, or is
unbound with an ``Immediate`` StorageClass is unschedulable (``persistentvolumeclaim "x" not
found``, ``pod has unbound immediate PersistentVolumeClaims``); for unbound claims of a
``WaitForFirstConsumer`` class the scheduler picks the node, annotates the claims with
``volume.kubernetes.io/selected-node`` (PreBind) and binds the pod once the provisioner and
PV controller (``controllers/volumes.py``) have bound them. Volume topology is not checked.

Initial placement: a pod annotated ``sim.harvesterhci.io/initial-node`` (KubeVirt's first
launcher pod of a VM the scenario placed on a node) goes to that node when it passes the
filters, as a pod's nominated node is tried first; otherwise to the least allocated one. The
annotation is the scenario's, not Kubernetes': it stands for "this VM was running there
before the simulation started".

``pick_node(pod_like, exclude=set()) -> str | None`` is the same decision without binding,
for tests; controllers never call the scheduler: they create pods and it binds them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..api import errors
from ..scenarios.objects import INITIAL_NODE_ANNOTATION
from . import podutil as pu

SCHEDULER = "default-scheduler"
BACKOFF_INITIAL_S = 1.0
BACKOFF_MAX_S = 10.0


@dataclass(frozen=True)
class _NodeFacts:
    ready: bool
    taints: list[dict[str, Any]]
    pods: int
    cpu: int
    mem: int
    cpu_score: int
    mem_score: int


class Scheduler:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.clock = world.clock
        self.client = world.client_for("scheduler")
        self.pods = pu.informer(world, "v1", "Pod")
        self.nodes = pu.informer(world, "v1", "Node")
        # node -> [cpu_m, mem_b, pods]; pod key -> (node, cpu_m, mem_b)
        self.usage: dict[str, list[int]] = {}
        self.accounted: dict[pu.Key, tuple[str, int, int]] = {}
        self.queue: set[pu.Key] = set()
        self.unschedulable: set[pu.Key] = set()
        # pod -> (failed scheduling attempts, simulated time of the last one): its backoff
        self.attempts: dict[pu.Key, tuple[int, float]] = {}
        self._scheduled = False
        self._retry_timer: Any = None
        self._node_facts: dict[str, tuple[dict[str, Any], _NodeFacts]] = {}
        self.bound = 0
        self.pvcs = pu.informer(world, "v1", "PersistentVolumeClaim")
        self.scs = pu.informer(world, "storage.k8s.io/v1", "StorageClass")
        self.waiting: dict[pu.Key, tuple[str, list[str]]] = {}  # pod -> (node, claims)
        for pod in self.pods.all():
            self._account(pod)
        self.pods.add_handler(self._on_pod)
        self.pvcs.add_handler(self._on_pvc)
        self.nodes.add_handler(self._on_node)
        for pod in self.pods.all():
            self._maybe_queue(pod)

    # ------------------------------------------------------------------ indexes
    def _account(self, pod: dict[str, Any] | None, key: pu.Key | None = None) -> None:
        """Keep the node usage index in step with one pod's latest state."""
        if key is None:
            assert pod is not None
            key = pu.key_of(pod)
        prev = self.accounted.pop(key, None)
        if prev is not None:
            u = self.usage.get(prev[0])
            if u is not None:
                u[0] -= prev[1]
                u[1] -= prev[2]
                u[2] -= 1
        if pod is None or pu.is_terminal(pod):
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        cpu, mem = pu.pod_requests(pod)
        u = self.usage.setdefault(node, [0, 0, 0])
        u[0] += cpu
        u[1] += mem
        u[2] += 1
        self.accounted[key] = (node, cpu, mem)

    def _responsible(self, pod: dict[str, Any]) -> bool:
        spec = pod.get("spec") or {}
        return (not spec.get("nodeName") and (spec.get("schedulerName") or SCHEDULER) ==
                SCHEDULER and not pu.is_terminal(pod) and not pu.is_deleting(pod))

    def _maybe_queue(self, pod: dict[str, Any]) -> None:
        if self._responsible(pod):
            self.queue.add(pu.key_of(pod))
            self._kick()

    def _on_pod(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = pu.key_of(obj)
        freed = key in self.accounted
        if type_ == "DELETED":
            self._account(None, key)
            self.attempts.pop(key, None)
            self.waiting.pop(key, None)
            self.queue.discard(key)
            self.unschedulable.discard(key)
        else:
            self._account(obj)
            if self._responsible(obj):
                if key in self.unschedulable and old is not None and \
                        obj.get("spec") != old.get("spec"):
                    self.unschedulable.discard(key)
                if key not in self.unschedulable:
                    self.queue.add(key)
                    self._kick()
            else:
                self.queue.discard(key)
                self.unschedulable.discard(key)
        if freed and key not in self.accounted and self.unschedulable:
            self._retry_soon()

    def _on_pvc(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ == "DELETED":
            return
        bound = bool((obj.get("spec") or {}).get("volumeName"))
        was = bool(((old or {}).get("spec") or {}).get("volumeName"))
        if old is not None and bound == was:
            return
        ns, name = pu.key_of(obj)
        for key, (_, claims) in list(self.waiting.items()):
            if key[0] == ns and name in claims:
                self.queue.add(key)
                self._kick()
        if self.unschedulable:
            self._retry_soon()

    def _on_node(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ == "DELETED":
            self.usage.pop(obj["metadata"]["name"], None)
        if self.unschedulable and (old is None or type_ == "DELETED" or
                                   _sched_view(obj) != _sched_view(old)):
            self._retry_soon()

    def _failed(self, key: pu.Key) -> None:
        """A scheduling attempt of ``key`` failed: it waits for an event and its backoff."""
        n, _ = self.attempts.get(key, (0, 0.0))
        self.attempts[key] = (n + 1, self.clock.now())
        self.unschedulable.add(key)

    def _backoff_until(self, key: pu.Key) -> float:
        n, last = self.attempts.get(key, (0, 0.0))
        if not n:
            return 0.0
        return float(last) + min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * float(2 ** (n - 1)))

    def _retry_soon(self) -> None:
        """A cluster event: the unschedulable pods go back to the queue, each once its backoff
        is over (the ones still backing off at the end of theirs)."""
        now = self.clock.now()
        due = {k for k in self.unschedulable if self._backoff_until(k) <= now}
        if due:
            self.unschedulable -= due
            self.queue |= due
            self._kick()
        if self.unschedulable and self._retry_timer is None:
            until = min(self._backoff_until(k) for k in self.unschedulable)
            self._retry_timer = self.world.runtime.after(max(0.0, until - now), self._retry)

    def _retry(self) -> None:
        self._retry_timer = None
        self._retry_soon()

    def _kick(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.world.runtime.call_soon(self._run)

    # ------------------------------------------------------------------ filtering
    def _fits(self, pod: dict[str, Any], node: dict[str, Any],
              req: tuple[int, int]) -> str | None:
        """None when the pod fits the node, else the reason (the scheduler's words)."""
        spec = pod.get("spec") or {}
        tols = spec.get("tolerations") or []
        nspec = node.get("spec") or {}
        if nspec.get("unschedulable") and not pu.tolerates(
                tols, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return "node(s) were unschedulable"
        if not pu.node_affinity_matches(pod, node):
            return "node(s) didn't match Pod's node affinity/selector"
        facts = self._facts(node)
        for t in facts.taints:
            if t.get("effect") in ("NoSchedule", "NoExecute") and not pu.tolerates(tols, t):
                return f"node(s) had untolerated taint {{{t.get('key')}: {t.get('value', '')}}}"
        if not facts.ready:
            taint = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
            if not pu.tolerates(tols, taint):
                return "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
        used = self.usage.get(node["metadata"]["name"], [0, 0, 0])
        reasons = []
        if used[2] + 1 > facts.pods:
            reasons.append("Too many pods")
        if req[0] and used[0] + req[0] > facts.cpu:
            reasons.append("Insufficient cpu")
        if req[1] and used[1] + req[1] > facts.mem:
            reasons.append("Insufficient memory")
        if reasons:
            return ", ".join(reasons)
        return None

    def _facts(self, node: dict[str, Any]) -> _NodeFacts:
        """What the filters need of a node, parsed once per stored version of it (stored
        objects are immutable, so the object's identity is its version)."""
        name = node["metadata"]["name"]
        hit = self._node_facts.get(name)
        if hit is not None and hit[0] is node:
            return hit[1]
        alloc = (node.get("status") or {}).get("allocatable") or {}
        facts = _NodeFacts(
            ready=pu.node_ready(node), taints=list(pu.taints_of(node)),
            pods=int(pu.parse_quantity(alloc.get("pods"), 110)),
            cpu=pu.cpu_milli(alloc.get("cpu", "0")), mem=pu.mem_bytes(alloc.get("memory", "0")),
            cpu_score=max(pu.cpu_milli(alloc.get("cpu", "1")), 1),
            mem_score=max(pu.mem_bytes(alloc.get("memory", "1")), 1))
        self._node_facts[name] = (node, facts)
        return facts

    def _score(self, node: dict[str, Any], req: tuple[int, int]) -> float:
        facts = self._facts(node)
        used = self.usage.get(node["metadata"]["name"], [0, 0, 0])
        return ((used[0] + req[0]) / facts.cpu_score + (used[1] + req[1]) / facts.mem_score) / 2.0

    def _rank(self, node: dict[str, Any], req: tuple[int, int]) -> tuple[float, int, str]:
        """Least allocated first, then fewest pods (spreads pods without requests), name."""
        name = node["metadata"]["name"]
        return (round(self._score(node, req), 6), self.usage.get(name, [0, 0, 0])[2], name)

    def filter(self, pod: dict[str, Any], exclude: set[str] | None = None
               ) -> tuple[list[dict[str, Any]], Counter[str], int]:
        req = pu.pod_requests(pod)
        fit: list[dict[str, Any]] = []
        why: Counter[str] = Counter()
        total = 0
        for name in sorted(self.nodes.objs):
            node = self.nodes.objs[name]
            total += 1
            if exclude and node["metadata"]["name"] in exclude:
                why["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            reason = self._fits(pod, node, req)
            if reason is None:
                fit.append(node)
            else:
                for r in reason.split(", "):
                    why[r] += 1
        return fit, why, total

    def pick_node(self, pod: dict[str, Any], exclude: set[str] | None = None) -> str | None:
        """The node the scheduler would choose for ``pod`` now (nothing is bound)."""
        fit, _, _ = self.filter(pod, exclude)
        return self._choose(pod, fit) if fit else None

    def _choose(self, pod: dict[str, Any], fit: list[dict[str, Any]]) -> str:
        """The scenario's initial node when it fits, else the best ranked of ``fit``."""
        want = (pod["metadata"].get("annotations") or {}).get(INITIAL_NODE_ANNOTATION)
        if want and any(n["metadata"]["name"] == want for n in fit):
            return str(want)
        req = pu.pod_requests(pod)
        return str(min(fit, key=lambda n: self._rank(n, req))["metadata"]["name"])

    def _initial_node(self, pod: dict[str, Any]) -> str | None:
        """The pod's initial node if it passes the filters there (what ``_choose`` would
        pick without filtering every other node first)."""
        want = (pod["metadata"].get("annotations") or {}).get(INITIAL_NODE_ANNOTATION)
        node = self.nodes.objs.get(("", want)) if want else None
        if node is None or self._fits(pod, node, pu.pod_requests(pod)) is not None:
            return None
        return str(want)

    def why_unschedulable(self, pod: dict[str, Any], exclude: set[str] | None = None) -> str:
        _, why, total = self.filter(pod, exclude)
        return _message(why, total)

    # ------------------------------------------------------------------ binding
    def _run(self) -> None:
        self._scheduled = False
        keys = sorted(self.queue)
        self.queue.clear()
        for key in keys:
            pod = self.pods.get(*key)
            if pod is None or not self._responsible(pod):
                continue
            try:
                self._schedule_one(pod)
            except errors.ApiError as exc:
                if exc.code not in (404, 409):
                    raise
                if exc.code == 409:
                    self._failed(key)
                    self._retry_soon()

    def _claims(self, pod: dict[str, Any]) -> tuple[str | None, list[str]]:
        """VolumeBinding PreFilter: (why the pod cannot be scheduled, unbound
        WaitForFirstConsumer claims that need a selected node)."""
        ns = pod["metadata"].get("namespace", "")
        delayed: list[str] = []
        for v in (pod.get("spec") or {}).get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvc = self.pvcs.get(ns, claim)
            if pvc is None:
                return f'persistentvolumeclaim "{claim}" not found', []
            if pu.is_deleting(pvc):
                return f'persistentvolumeclaim "{claim}" is being deleted', []
            if (pvc.get("spec") or {}).get("volumeName"):
                continue
            sc = self.scs.get("", (pvc.get("spec") or {}).get("storageClassName") or "")
            if sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                delayed.append(str(claim))
                continue
            return "pod has unbound immediate PersistentVolumeClaims", []
        return None, delayed

    def _schedule_one(self, pod: dict[str, Any]) -> None:
        key = pu.key_of(pod)
        problem, delayed = self._claims(pod)
        if problem is not None:
            self.waiting.pop(key, None)
            self._failed(key)
            total = len(self.nodes.objs)
            self._mark_unschedulable(
                pod, f"0/{total} nodes are available: {problem}. preemption: 0/{total} nodes "
                f"are available: {total} Preemption is not helpful for scheduling.")
            return
        wait = self.waiting.get(key)
        if wait is not None:
            if not delayed:
                del self.waiting[key]
                self._bind(pod, wait[0])
            return  # PreBind: waiting for the claims to be bound
        best = self._initial_node(pod)
        if best is None:
            fit, why, total = self.filter(pod)
            if not fit:
                self._failed(key)
                self._mark_unschedulable(pod, _message(why, total))
                return
            best = self._choose(pod, fit)
        if delayed:
            self.waiting[key] = (best, delayed)
            self._account({**pod, "spec": {**pod["spec"], "nodeName": best}})  # assumed
            for claim in delayed:
                self._select_node(key[0], claim, best)
            return
        self._bind(pod, best)

    def _select_node(self, ns: str, claim: str, node: str) -> None:
        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            ann = cur["metadata"].setdefault("annotations", {})
            if ann.get("volume.kubernetes.io/selected-node") == node:
                return None
            ann["volume.kubernetes.io/selected-node"] = node
            return cur
        self.pvcs.observe(pu.ignore_missing(lambda: self.client.modify(
            "v1", "PersistentVolumeClaim", claim, fn, ns)))

    def _bind(self, pod: dict[str, Any], node: str) -> None:
        ns, name = pu.key_of(pod)
        uid = pod["metadata"]["uid"]

        def bind(cur: dict[str, Any]) -> dict[str, Any]:
            if cur["metadata"]["uid"] != uid or (cur.get("spec") or {}).get("nodeName"):
                raise errors.conflict("pods", "", name, f"pod {ns}/{name} is already assigned "
                                      "to a node or was replaced")
            cur["spec"]["nodeName"] = node
            return cur

        bound = self.client.modify("v1", "Pod", name, bind, ns)
        self.attempts.pop((ns, name), None)
        self._account(bound)  # assume it at once so the next pod in this pass sees it
        now = self.clock.timestamp()

        def cond(cur: dict[str, Any]) -> dict[str, Any]:
            conds = cur.setdefault("status", {}).setdefault("conditions", [])
            pu.set_condition(conds, "PodScheduled", "True", None, None, now, probe=True)
            return cur

        pu.ignore_missing(lambda: self.client.modify("v1", "Pod", name, cond, ns,
                                                     subresource="status"))
        self.unschedulable.discard((ns, name))
        self.bound += 1

    def _mark_unschedulable(self, pod: dict[str, Any], message: str) -> None:
        ns, name = pu.key_of(pod)
        now = self.clock.timestamp()
        cur_c = pu.get_condition(pod, "PodScheduled")
        if cur_c is not None and cur_c.get("status") == "False" and \
                cur_c.get("message") == message:
            return

        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            conds = cur.setdefault("status", {}).setdefault("conditions", [])
            pu.set_condition(conds, "PodScheduled", "False", "Unschedulable", message, now,
                             probe=True)
            cur["status"].setdefault("phase", "Pending")
            return cur

        pu.ignore_missing(lambda: self.client.modify("v1", "Pod", name, fn, ns,
                                                     subresource="status"))
        pu.record_event(self.client, pod, "Warning", "FailedScheduling", message, SCHEDULER,
                        None, self.clock)


def _message(why: Counter[str], total: int) -> str:
    parts = [f"{n} {r}" for r, n in sorted(why.items())]
    head = f"0/{total} nodes are available"
    if parts:
        head += ": " + ", ".join(parts)
    return (f"{head}. preemption: 0/{total} nodes are available: {total} Preemption is not "
            "helpful for scheduling.")


def _sched_view(node: dict[str, Any] | None) -> Any:
    """What of a node matters for scheduling (retry unschedulable pods when it changes)."""
    if node is None:
        return None
    st = node.get("status") or {}
    return (node["metadata"].get("labels"), node.get("spec"), st.get("allocatable"),
            pu.node_ready(node))


def setup(world: Any) -> Scheduler:
    return Scheduler(world)
