"""One node's whole upgrade in one process (module ``node_cycle``, ``node_upgrade_mode: node``).

The step-by-step role (``roles/node_upgrade/tasks/multi_node.yml``) runs each step in its own
module process; every task boundary costs a fork, an AnsiballZ start, the ``kubernetes``
import, API discovery, a lock renewal and a re-read of the plan and of the cluster's
nodes/machines/secrets/VMIs (docs/performance.md). :func:`run_cycle` runs the same steps
(:mod:`node_step_order`: one table for both paths), calling the same step functions with the
same conditions, in one process:

* one :class:`CycleKube` (discovery once), the upgrade lock taken once (its renewal thread
  renews it when a third of the lease is gone, not per step);
* reads that the previous step's view still answers are served from memory
  (:class:`CycleKube`): the CAPI Machines, the Rancher cluster (hook names) and the
  ``server-version`` Setting for the whole cycle; within a step a list or the plan is read
  once (the plan again after a conflicting write); every wait and every write of a kind drop
  what was remembered of that kind, so a decision is never taken on a view older than the
  step's last wait or write; a wait starts its watch from a list the step already read of
  the same kind and selectors (at that list's resourceVersion, as an informer does) instead of
  listing again;
* the reaction between two steps (a hook set → the first migration, the node back → the hook
  answer) is in-process: a few API calls instead of a task boundary.

Each step is idempotent and resumes from the cluster's state exactly as in the step-by-step
mode; errors are the steps' own (:class:`node_kube.WaitTimeout` carries what was awaited and
the last state seen). The result lists one entry per step (what happened, seconds).
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_evacuation,
    node_facts,
    node_gate,
    node_head_start,
    node_hooks,
    node_job,
    node_kube,
    node_restore,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_step_order as order,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import ApiError
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.informer import (
    Informer,
    field_filter,
    rv_int,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_kube import (
    FLEET_NS,
    PLAN_API,
    PLAN_KIND,
    Kube,
    PlanWriter,
    _Stream,
)

CAPI_API = "cluster.x-k8s.io/v1beta1"
VMI_KIND = ("kubevirt.io/v1", "VirtualMachineInstance")
# kept for the whole cycle: nothing in a node's upgrade changes them
STABLE_LISTS = {(CAPI_API, "Machine")}
STABLE_GETS = {("provisioning.cattle.io/v1", "Cluster"), ("harvesterhci.io/v1beta1", "Setting")}
# steps whose decisions read the VMI list (elsewhere it only feeds the facts' vm_count, so the
# last list read in the cycle is good enough there)
VMI_FRESH_STEPS = ("gate", "evacuate", "restore")
# a write of the key kind changes objects of the value kinds
WRITE_TOUCHES = {("kubevirt.io/v1", "VirtualMachine"): [VMI_KIND],
                 ("kubevirt.io/v1", "VirtualMachineInstanceMigration"): [VMI_KIND]}
# the cluster-wide sets every step reads and the waits watch: followed by an informer for the
# whole cycle (module_utils/harvester/informer.py); (api_version, kind, namespace)
# (VirtualMachineInstanceMigrations are read by the VMIs' names instead: finished ones pile up)
INFORMED = {("v1", "Node", None), ("v1", "Secret", FLEET_NS), (*VMI_KIND, None),
            (PLAN_API, PLAN_KIND, None),
            ("v1", "Pod", None),
            ("policy/v1", "PodDisruptionBudget", None),
            ("longhorn.io/v1beta2", "Volume", "longhorn-system"),
            ("longhorn.io/v1beta2", "Replica", "longhorn-system")}


def _matcher(key: tuple[str, str, str | None], namespace: str | None,
             match: Callable[[dict[str, Any]], bool]) -> Callable[[dict[str, Any]], bool]:
    """The objects of informer ``key`` that a read of ``namespace`` filtered by ``match`` (a
    :func:`informer.field_filter`) asks for: a cluster-wide informer serves a namespaced read
    too."""
    if not namespace or key[2] is not None:
        return match

    def in_namespace(o: dict[str, Any]) -> bool:
        return (o.get("metadata") or {}).get("namespace") == namespace and match(o)
    return in_namespace


class CycleKube(Kube):
    """:class:`node_kube.Kube` that remembers reads for the length of a step (see module doc).

    The sets in :data:`INFORMED` are not cached per step but followed by an
    :class:`informer.Informer` for the whole cycle: reads of them (without a label selector,
    with at most a name/namespace/nodeName field selector) are answered from its store once it
    has seen our last write of the kind, and waits on them subscribe to its events.

    ``stats`` counts the reads served from memory (``hits``; ``informed`` of them from an
    informer) and sent (``lists``, ``gets``)."""

    def __init__(self, dyn: Any, check_mode: bool = False) -> None:
        super().__init__(dyn, check_mode)
        self._lock = threading.RLock()
        self._lists: dict[tuple[Any, ...], tuple[list[dict[str, Any]], str]] = {}
        self._gets: dict[tuple[Any, ...], dict[str, Any] | None] = {}
        self._sticky_vmis: tuple[list[dict[str, Any]], str] | None = None
        self._waiting = 0
        self.step = ""
        self.stats = {"hits": 0, "informed": 0, "lists": 0, "gets": 0}
        self._informers: dict[tuple[str, str, str | None], Informer | None] = {}
        self._starting: dict[tuple[str, str, str | None], threading.Event] = {}
        self._need: dict[tuple[str, str, str | None], int] = {}

    # -- informers ---------------------------------------------------------------------------
    def _informer_key(self, api_version: str, kind: str, namespace: str | None
                      ) -> tuple[str, str, str | None] | None:
        for key in ((api_version, kind, namespace), (api_version, kind, None)):
            if key in INFORMED:
                return key
        return None

    def _informer(self, api_version: str, kind: str, namespace: str | None,
                  start: bool = True) -> tuple[Informer, tuple[str, str, str | None]] | None:
        key = self._informer_key(api_version, kind, namespace)
        if key is None:
            return None
        with self._lock:
            if key in self._informers:
                inf = self._informers[key]
                return (inf, key) if inf is not None and inf.usable else None
            if not start:
                return None
            starting = self._starting.get(key)
            if starting is None:
                starting = self._starting[key] = threading.Event()
                mine = True
            else:
                mine = False
        if not mine:   # another thread is listing it: use its informer (or try again)
            starting.wait()
            return self._informer(api_version, kind, namespace, start)
        try:
            base = super()
            res = self.resource(api_version, kind)   # NotServed reaches the caller

            def lister() -> tuple[list[dict[str, Any]], str]:
                return base.list_with_rv(key[0], key[1], key[2])

            def streamer(rv: str, timeout: int) -> Any:
                return self.stream(res, namespace=key[2], resource_version=rv or None,
                                   timeout=timeout, allow_watch_bookmarks=True)
            inf = Informer(key[0], key[1], key[2], lister, streamer)
            inf.start()          # the initial list: its errors are the caller's
            with self._lock:
                self.stats["lists"] += 1
                self._informers[key] = inf
            return (inf, key) if inf.usable else None
        finally:
            with self._lock:
                self._starting.pop(key, None)
            starting.set()

    def _informed_read(self, api_version: str, kind: str, namespace: str | None,
                       label_selector: str | None, field_selector: str | None
                       ) -> tuple[list[dict[str, Any]], str] | None:
        if label_selector or self._informer_key(api_version, kind, namespace) is None:
            return None
        match = field_filter(field_selector)
        found = self._informer(api_version, kind, namespace)
        if match is None or found is None:
            return None
        inf, key = found
        snap = inf.snapshot(self._need.get(key, -1), match=_matcher(key, namespace, match))
        if snap is not None:
            self.stats["hits"] += 1
            self.stats["informed"] += 1
        return snap

    def prefetch(self, wait: bool = True) -> None:
        """Start every informer at once, their initial lists side by side (the server and
        this process work in parallel); a set that is not served is left to its first read.
        ``wait=False`` returns at once: a read of a set still being listed waits for that
        list instead of listing again."""
        def start(key: tuple[str, str, str | None]) -> None:
            try:
                self._informer(*key)
            except Exception:  # noqa: BLE001 - the first real read raises it
                pass
        keys = []
        for key in sorted(INFORMED, key=str):   # discovery first, in this thread
            try:
                self.resource(key[0], key[1])
                keys.append(key)
            except Exception:  # noqa: BLE001 - e.g. no Longhorn: left to its first read
                pass
        threads = [threading.Thread(target=start, args=(k,), daemon=True) for k in keys]
        for t in threads:
            t.start()
        for t in threads if wait else []:
            t.join()

    def close(self) -> None:
        """Stop the informers (the cycle is over)."""
        with self._lock:
            for inf in self._informers.values():
                if inf is not None:
                    inf.stop()

    def _pump(self, idx: int, st: _Stream, out: queue.Queue[Any], stop: threading.Event,
              deadline: float) -> None:
        """A wait on an informed set takes its events from the informer (the wait listed from
        it, at its resourceVersion); anything else watches the server."""
        s = st.source
        found = None if s.label_selector else self._informer(s.api_version, s.kind,
                                                             s.namespace, start=False)
        match = field_filter(s.field_selector)
        if found is not None and match is not None:
            inf, key = found
            sub = inf.subscribe(st.rv, out, idx, _matcher(key, s.namespace, match))
            if sub is not None:
                try:
                    stop.wait(max(0.0, deadline - time.monotonic()))
                finally:
                    inf.unsubscribe(sub)
                return
        super()._pump(idx, st, out, stop, deadline)

    # -- step boundaries -------------------------------------------------------------------
    def begin_step(self, name: str) -> None:
        """A new step reads the cluster afresh (except what is stable for the cycle)."""
        with self._lock:
            self.step = name
            self._lists = {k: v for k, v in self._lists.items() if k[:2] in STABLE_LISTS}
            self._gets = {k: v for k, v in self._gets.items() if k[:2] in STABLE_GETS}

    def forget(self, api_version: str | None = None, kind: str | None = None) -> None:
        """Drop what is remembered (of one kind, or everything but the stable reads)."""
        with self._lock:
            if api_version is None:
                self._lists = {k: v for k, v in self._lists.items() if k[:2] in STABLE_LISTS}
                self._gets = {k: v for k, v in self._gets.items() if k[:2] in STABLE_GETS}
                return
            kinds = [(api_version, kind), *WRITE_TOUCHES.get((api_version, str(kind)), [])]
            self._lists = {k: v for k, v in self._lists.items() if k[:2] not in kinds}
            self._gets = {k: v for k, v in self._gets.items() if k[:2] not in kinds}
            if VMI_KIND in kinds:
                self._sticky_vmis = None

    def _cacheable_get(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) in STABLE_GETS or (api_version, kind) == (PLAN_API,
                                                                             PLAN_KIND)

    # -- reads -------------------------------------------------------------------------------
    def _informed_get(self, api_version: str, kind: str, name: str, namespace: str | None
                      ) -> tuple[dict[str, Any] | None] | None:
        """``(object or None,)`` from the informer of the kind; ``None`` if there is none
        usable (then the server answers)."""
        if self._informer_key(api_version, kind, namespace) is None:
            return None
        found = self._informer(api_version, kind, namespace)
        if found is None:
            return None
        inf, key = found
        hit = inf.lookup(f"{namespace}/{name}" if namespace else name, self._need.get(key, -1))
        if hit is not None:
            self.stats["hits"] += 1
            self.stats["informed"] += 1
            return (None if hit[0] is None else copy.deepcopy(hit[0]),)
        return None

    def get(self, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> dict[str, Any] | None:
        informed = self._informed_get(api_version, kind, name, namespace)
        if informed is not None:
            return informed[0]
        key = (api_version, kind, name, namespace)
        if self._waiting or not self._cacheable_get(api_version, kind):
            return super().get(api_version, kind, name, namespace)
        with self._lock:
            if key in self._gets:
                self.stats["hits"] += 1
                obj = self._gets[key]
                return None if obj is None else copy.deepcopy(obj)
        obj = super().get(api_version, kind, name, namespace)
        self.stats["gets"] += 1
        with self._lock:
            self._gets[key] = obj
        return None if obj is None else copy.deepcopy(obj)

    def list_with_rv(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None, field_selector: str | None = None
                     ) -> tuple[list[dict[str, Any]], str]:
        informed = self._informed_read(api_version, kind, namespace, label_selector,
                                       field_selector)
        if informed is not None:
            return informed
        key = (api_version, kind, namespace, label_selector, field_selector)
        plain_vmis = (api_version, kind) == VMI_KIND and not (
            namespace or label_selector or field_selector)
        with self._lock:
            # a wait lists to start its watch: a list this step already read (nothing of the
            # kind written since, or it would be forgotten) serves as an informer's list does
            # — the watch starts at its resourceVersion, so everything after it arrives as
            # events — but not the sticky VMIs of an earlier step
            hit = self._lists.get(key)
            if hit is None and plain_vmis and not self._waiting and \
                    self.step not in VMI_FRESH_STEPS:
                hit = self._sticky_vmis
            if hit is not None:
                self.stats["hits"] += 1
                return list(hit[0]), hit[1]
        items, rv = super().list_with_rv(api_version, kind, namespace, label_selector,
                                         field_selector)
        if self._waiting:   # not remembered: the wait's view supersedes it at once
            return items, rv
        self.stats["lists"] += 1
        with self._lock:
            self._lists[key] = (items, rv)
            if plain_vmis:
                self._sticky_vmis = (items, rv)
        return list(items), rv

    # -- writes: remember the plan as written, forget the kind otherwise ---------------------
    def _wrote(self, api_version: str, kind: str, obj: dict[str, Any] | None = None) -> None:
        self.forget(api_version, kind)
        meta = (obj or {}).get("metadata") or {}
        key = self._informer_key(api_version, kind, meta.get("namespace"))
        rv = rv_int(meta.get("resourceVersion"))
        if key is not None and rv is not None:   # the next read of the kind includes this write
            with self._lock:
                self._need[key] = max(self._need.get(key, -1), rv)
        if obj and (api_version, kind) == (PLAN_API, PLAN_KIND) and not self._waiting:
            with self._lock:
                self._gets[(api_version, kind, meta.get("name"), meta.get("namespace"))] = \
                    copy.deepcopy(obj)

    def _write(self, api_version: str, kind: str, fn: Callable[[], Any]) -> Any:
        try:
            out = fn()
        except ApiError:
            self.forget(api_version, kind)   # e.g. 409: the next read must be fresh
            raise
        self._wrote(api_version, kind, out if isinstance(out, dict) else None)
        return out

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == "Event":   # Events are never read back: nothing to forget
            return super().create(obj)
        return self._write(obj["apiVersion"], obj["kind"],  # type: ignore[no-any-return]
                           lambda: super(CycleKube, self).create(obj))

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None, subresource: str | None = None) -> dict[str, Any]:
        return self._write(api_version, kind,  # type: ignore[no-any-return]
                           lambda: super(CycleKube, self).patch(api_version, kind, name, patch,
                                                                namespace, subresource))

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._write(obj["apiVersion"], obj["kind"],  # type: ignore[no-any-return]
                           lambda: super(CycleKube, self).replace_status(obj))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               propagation: str = "Background",
               preconditions: dict[str, str] | None = None) -> bool:
        return self._write(api_version, kind,  # type: ignore[no-any-return]
                           lambda: super(CycleKube, self).delete(
                               api_version, kind, name, namespace, propagation,
                               preconditions=preconditions))

    # -- after a wait, what was remembered is older than what the wait saw: forget it --------
    def wait(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._waiting += 1
        try:
            return super().wait(*args, **kwargs)
        finally:
            with self._lock:
                self._waiting -= 1
            self.forget()


# ---------------------------------------------------------------------------------------------
# The cycle
# ---------------------------------------------------------------------------------------------

@dataclass
class Params:
    node: str
    batch: list[str] = field(default_factory=list)
    single_node: bool = False
    pause_timeout: int = 0
    hook_timeout: int = 7200
    target_aware: bool = True
    concurrency: int = 2
    retries: int = 2
    migration_timeout: int = 900
    evacuation_timeout: int = 3600
    volume_timeout: int = 1800
    pdb_timeout: int = 1800
    shutdown_timeout: int = 600
    job_timeout: int = 3600
    node_timeout: int = 1800
    release_timeout: int = 1800
    restore_timeout: int = 900
    restore: bool | None = None
    restore_fail_on_error: bool = False
    play: list[str] = field(default_factory=list)   # the serial play's hosts (head start)
    head_start: bool = True
    head_start_wait: int = 10
    head_start_finish: int = 30


@dataclass
class Cycle:
    """The per-step record the module returns (also on failure)."""

    node: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    changed: bool = False
    t0: float = field(default_factory=time.monotonic)

    def run(self, name: str, kube: CycleKube, fn: Callable[[], dict[str, Any]],
            describe: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
        kube.begin_step(name)
        t = time.monotonic()
        entry: dict[str, Any] = {"step": name, "status": "running", "changed": False}
        self.steps.append(entry)
        try:
            res = fn()
        except Exception as exc:
            entry.update(status="failed", seconds=round(time.monotonic() - t, 3),
                         detail=str(exc)[:300])
            raise
        entry.update(status="passed" if res.get("passed") else "done",
                     changed=bool(res.get("changed")),
                     seconds=round(time.monotonic() - t, 3), detail=describe(res))
        self.changed |= bool(res.get("changed"))
        return res

    def skip(self, name: str, why: str) -> None:
        self.steps.append({"step": name, "status": "skipped", "changed": False, "seconds": 0.0,
                           "detail": why})

    def summary(self) -> list[str]:
        out = []
        for s in self.steps:
            out.append(f"{s['step']:<16} {s['status']:<8} {s['seconds']:8.2f}s"
                       + ("  changed" if s.get("changed") else "         ")
                       + (f"  {s['detail']}" if s.get("detail") else ""))
        out.append(f"{'total':<16} {'':<8} {time.monotonic() - self.t0:8.2f}s")
        return out


def _evac_text(res: dict[str, Any]) -> str:
    if res.get("skipped"):
        done = (f": {len(res.get('migrated') or [])} migrated, "
                f"{len(res.get('shutdown') or [])} shut down earlier in the upgrade"
                if res.get("migrated") or res.get("shutdown") else "")
        return f"already past evacuation ({res['skipped']}){done}"
    plan = res.get("plan") or {}
    migrated = res.get("migrated") or []
    text = f"{len(migrated)} migrated, {len(res.get('shutdown') or [])} shut down"
    if not migrated and plan.get("migrate"):
        text += f" ({len(plan['migrate'])} planned)"
    return text


def run_cycle(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle) -> dict[str, Any]:
    """The steps of :mod:`node_step_order` in its order: the gate and pause check, then the
    node's path (multi-node or single-node); see the module doc.

    Returns the module result (without ``steps``/``summary``, which the caller adds from
    ``cycle`` also on failure)."""
    node = p.node
    result: dict[str, Any] = {"node": node, "done": False, "paused": False, "passed": False,
                              "migrated": [], "shutdown": [], "restored": [], "failed": []}
    if writer.node_state(node) != "PostDrained" and \
            node not in node_gate.paused_nodes(writer.plan):
        # most likely worked on: the gate's own reads (all VMIs for the facts) and the other
        # sets are listed side by side from now on (not for a node the plan says is done)
        kube.prefetch(wait=False)
    for step in order.GATE:
        if RUNNERS[step.name](kube, writer, p, cycle, result, step):
            return result
    kube.prefetch()   # this node is worked on: every set its steps read is listed
    if kube.check_mode:   # the steps in check mode only read; the node entry says the rest
        ev = cycle.run("evacuate", kube, lambda: node_evacuation.evacuate(
            kube, writer, node, target_aware=p.target_aware, shutdown_all=p.single_node),
            lambda r: f"would migrate {len((r.get('plan') or {}).get('migrate') or [])}, "
                      f"shut down {len(r.get('shutdown') or [])}")
        result["evacuation"] = ev.get("plan")
        return result
    for step in order.path(p.single_node):
        if step.resume_skip and result["passed"]:
            cycle.skip(step.name, "node already past pre-drain")
            continue
        RUNNERS[step.name](kube, writer, p, cycle, result, step)
    return result


# One runner per step name of node_step_order: the step's call in this process, how the
# module result reports it, and whether the node's cycle ends there (True).
Runner = Callable[[CycleKube, PlanWriter, Params, Cycle, dict[str, Any], order.Step], bool]


def _gate(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
          result: dict[str, Any], step: order.Step) -> bool:
    node = p.node
    gate = cycle.run(step.name, kube, lambda: node_gate.gate(kube, writer, p.batch or [node],
                                                             node),
                     lambda r: f"todo {r['todo']}, done {r['done']}, Rancher expects "
                               f"{r['expected']} ({r['why']})")
    result.update(todo=gate["todo"], expected=gate["expected"], done=node in gate["done"])
    return bool(result["done"])


def _pause(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
           result: dict[str, Any], step: order.Step) -> bool:
    pause = cycle.run(step.name, kube, lambda: node_gate.wait_unpaused(
        kube, writer, p.node, p.pause_timeout),
        lambda r: "paused (pauseNodes)" if r["paused"] else "not paused")
    result["paused"] = bool(pause["paused"])
    return bool(result["paused"])


def _await_pre_drain(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                     result: dict[str, Any], step: order.Step) -> bool:
    pre = cycle.run(step.name, kube, lambda: node_hooks.await_hook(
        kube, writer, p.node, "pre-drain", p.hook_timeout, p.batch or [p.node]),
        lambda r: "already past it (resumed)" if r.get("passed") else "Rancher asks to drain")
    result["passed"] = bool(pre.get("passed"))
    return False


def _evacuate(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
              result: dict[str, Any], step: order.Step) -> bool:
    res = cycle.run(step.name, kube, lambda: node_evacuation.evacuate(
        kube, writer, p.node, target_aware=p.target_aware, concurrency=p.concurrency,
        retries=p.retries, migration_timeout=p.migration_timeout, timeout=p.evacuation_timeout,
        volume_timeout=p.volume_timeout, pdb_timeout=p.pdb_timeout,
        shutdown_all=bool(step.args.get("shutdown_all")),
        shutdown_timeout=p.shutdown_timeout), _evac_text)
    result["evacuation"] = res.get("plan")
    result["migrated"] = res.get("migrated") or []
    result["shutdown"] = res.get("shutdown") or []
    return False


def _answer_pre_drain(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                      result: dict[str, Any], step: order.Step) -> bool:
    cycle.run(step.name, kube, lambda: node_hooks.answer_hook(
        kube, writer, p.node, "pre-drain", job_timeout=p.job_timeout,
        safety_timeout=p.volume_timeout),
        lambda r: "already answered" if not r.get("changed") else "pre-drain Job done, answered")
    return False


def _await_post_drain(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                      result: dict[str, Any], step: order.Step) -> bool:
    cycle.run(step.name, kube, lambda: node_hooks.await_hook(
        kube, writer, p.node, "post-drain", p.hook_timeout),
        lambda r: "already past it (resumed)" if r.get("passed") else "drained, RKE2 applied")
    return False


def _os_upgrade(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                result: dict[str, Any], step: order.Step) -> bool:
    cycle.run(step.name, kube, lambda: node_job.run_node_job(
        kube, writer, p.node, str(step.args["type"]), job_timeout=p.job_timeout,
        node_timeout=p.node_timeout),
        lambda r: f"job {r['job']}, node back on the new OS" if r.get("changed")
        else "already upgraded")
    return False


def _answer_post_drain(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                       result: dict[str, Any], step: order.Step) -> bool:
    cycle.run(step.name, kube, lambda: node_hooks.answer_hook(
        kube, writer, p.node, "post-drain"),
        lambda r: "already answered" if not r.get("changed") else "answered")
    return False


def _await_release(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                   result: dict[str, Any], step: order.Step) -> bool:
    cycle.run(step.name, kube, lambda: node_hooks.await_release(
        kube, writer, p.node, p.release_timeout),
        lambda r: "uncordoned, annotations cleared, kubelet current")
    return False


def _restore(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
             result: dict[str, Any], step: order.Step) -> bool:
    """Multi-node, head start on, one node per batch: the restore runs around the next
    node's head start (:func:`_restore_around_head_start`); otherwise on its own."""
    if not p.single_node and p.head_start and p.play and p.target_aware and \
            len(p.batch or [p.node]) <= 1:
        _restore_around_head_start(kube, writer, p, cycle, result)
        return False
    res = cycle.run(step.name, kube, lambda: _restored(p, node_restore.restore_vms(
        kube, writer, p.node, timeout=p.restore_timeout, force=p.restore)), _restore_text)
    result["restored"], result["failed"] = res["restored"], res["failed"]
    return False


RUNNERS: dict[str, Runner] = {
    "gate": _gate, "pause": _pause, "await pre-drain": _await_pre_drain,
    "evacuate": _evacuate, "answer pre-drain": _answer_pre_drain,
    "await post-drain": _await_post_drain, "os upgrade": _os_upgrade,
    "answer post-drain": _answer_post_drain, "await release": _await_release,
    "restore": _restore,
}


def _restore_text(r: dict[str, Any]) -> str:
    return ((f"{len(r['restored'])} restored, {len(r['failed'])} failed"
             if r["enabled"] else "restoreVM off")
            + (f" of {len(r['recorded'])} recorded" if r["recorded"] else ""))


def _restored(p: Params, res: dict[str, Any]) -> dict[str, Any]:
    if res["failed"] and p.restore_fail_on_error:
        raise node_kube.NodeLoopError("could not restore: " + "; ".join(res["failed"]))
    return res


def _restore_around_head_start(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                               result: dict[str, Any]) -> None:
    """The restore and the head start side by side: the VMs stopped for this node are asked
    to start and, once scheduled (their launcher pods hold this node's capacity that the next
    node's evacuation plan sees), the next node's evacuation starts while they boot; then
    they are awaited. (As in the upgrade-toolkit, where the restore-vm Job runs beside
    Rancher's next drain.) Restored VMs not scheduled within ``head_start_wait``: no head
    start, the next node's own cycle evacuates it.

    The play's last node (no other node left, and ``restore_fail_on_error`` off): nobody
    waits for its VMs here; they are marked and boot while ImageCleanup runs, and Finalize
    awaits them (:func:`node_restore.await_marked_restores`) before it marks the plan
    Succeeded."""
    node = p.node
    last = not p.restore_fail_on_error and not node_facts.others_left(
        node_facts.cluster_facts(kube, writer.plan), node, p.play)
    started = cycle.run("restore start", kube, lambda: node_restore.start_restores(
        kube, writer, node, force=p.restore, scheduled_timeout=p.head_start_wait, mark=last),
        lambda r: (f"{len(r['starting'])} VM(s) asked to start"
                   + ("" if r["scheduled"] else ", not all scheduled yet")
                   + ("; they boot while ImageCleanup runs, Finalize awaits them"
                      if last else "")
                   if r["starting"] else _restore_text(r)))
    if last:
        cycle.skip("head start", "no other node of the play is left to upgrade")
        result["restoring"] = started["starting"]
        result["restored"], result["failed"] = started["restored"], started["failed"]
        return
    if started["scheduled"]:
        _head_start(kube, writer, p, cycle, result)
    else:
        cycle.skip("head start", "restored VMs not scheduled yet; the next node's own cycle "
                                 "evacuates it")
    res = cycle.run("restore", kube, lambda: _restored(p, node_restore.await_restores(
        kube, writer, node, started, timeout=p.restore_timeout)), _restore_text)
    result["restored"], result["failed"] = res["restored"], res["failed"]


def _head_start(kube: CycleKube, writer: PlanWriter, p: Params, cycle: Cycle,
                result: dict[str, Any]) -> None:
    """Start the evacuation of the node Rancher drains next (node_head_start.head_start). A
    failure here fails nothing: that node's own cycle does the whole evacuation anyway."""
    try:
        res = cycle.run("head start", kube, lambda: node_head_start.head_start(
            kube, writer, p.node, p.play, wait=p.head_start_wait,
            shutdown_timeout=p.shutdown_timeout, finish=p.head_start_finish),
            node_head_start.head_start_text)
    except Exception as exc:  # noqa: BLE001 - the next node's cycle does the work itself
        cycle.steps[-1]["status"] = "skipped"
        cycle.steps[-1]["detail"] = f"nothing more started ({exc}"[:280] + \
            "); the next node's own cycle evacuates it"
        return
    keys = ("next", "started", "stopping", "why", "answered", "migrated", "job")
    result["head_start"] = {k: res.get(k) for k in keys}
