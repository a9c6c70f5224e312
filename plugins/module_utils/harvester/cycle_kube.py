"""The node cycle's client: :class:`CycleKube`, a :class:`client.Kube` that caches reads for
the length of a step and follows the busy sets with informers (``node_cycle``, docs/performance.md
"Informers in the node cycle").

* reads that the previous step's view still answers are served from memory: the CAPI
  Machines, the Rancher cluster (hook names) and the ``server-version`` Setting for the whole
  cycle; within a step a list or the plan is read once (the plan again after a conflicting
  write); every wait and every write of a kind drop what was remembered of that kind, so a
  decision is never taken on a view older than the step's last wait or write;
* a wait starts its watch from a list the step already read of the same kind and selectors (at
  that list's resourceVersion, as an informer does) instead of listing again;
* the sets in :data:`INFORMED` are listed once and followed by an :class:`informer.Informer`
  for the whole cycle; reads of them are answered from its store, waits on them subscribe to
  its events; the sets in :data:`SCOPED` likewise, one informer per node-scoped label
  selector they are read with (the VMIs of the node), so that the cycle does not list and
  follow every VMI of the cluster.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import evacuation as ev
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    longhorn_index as li,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import waiting
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
    json_copy,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.informer import (
    Indexer,
    Informer,
    Totaller,
    field_filter,
    label_filter,
    rv_int,
    selected_node,
)

# kept for the whole cycle: nothing in a node's upgrade changes them (the KubeVirt CR's
# version, which picks the migration mechanism, changes with Harvester's chart upgrade in the
# ClusterUpgrade phase, before any node: the head start and the evacuation read it once)
STABLE_LISTS = {c.CAPI_MACHINE}
STABLE_GETS = {c.RANCHER_CLUSTER, c.SETTING, c.KUBEVIRT}
# kept from one step to the next until a wait or a write of the kind: the restore-vm
# ConfigMap, read at the end of the evacuation and again as the pre-drain step begins, with
# nothing awaited in between. (Its other writer, the node Jobs' VM detector, may write it at
# any moment, before or after either read: the steps merge their record back after each Job.)
STEP_SPANNING_GETS = {c.CONFIGMAP}
# steps whose decisions read the plain (cluster-wide) VMI list; elsewhere the last one read
# in the cycle is good enough (the node steps read their node's VMIs by label instead)
VMI_FRESH_STEPS = ("gate", "evacuate", "restore")
# a write of the key kind changes objects of the value kinds
WRITE_TOUCHES = {c.VM: [c.VMI], c.VMIM: [c.VMI]}
# the cluster-wide sets every step reads and the waits watch: followed by an informer for the
# whole cycle (module_utils/harvester/informer.py); (api_version, kind, namespace)
# (VirtualMachineInstanceMigrations are read by the VMIs' names instead: finished ones pile up).
# The Engines are read once per node, right before its pre-drain Job, as upgrade_node.sh
# reads them (every running one): listed with the others while the node reboots instead of
# between the node's last migration and that Job.
INFORMED = {(*c.NODE, None), (*c.SECRET, c.FLEET_NS),
            (c.PLAN_API_VERSION, c.PLAN_KIND, None), (*c.POD, None), (*c.PDB, None),
            (*c.LH_VOLUME, c.LONGHORN_NS), (*c.LH_REPLICA, c.LONGHORN_NS),
            (*c.LH_ENGINE, c.LONGHORN_NS)}
# sets a step reads by a label naming one node (the VMIs of the node being evacuated:
# ``kubevirt.io/nodeName``): an informer per label selector, so that the cycle's cost does
# not grow with the cluster (docs/performance.md "Node-scoped reads"). A plain read of the
# whole set (the restore's VMs, wherever they start) gets a cluster-wide informer of its own,
# started by that read; a read by name or namespace only uses one that is running.
SCOPED = {(*c.VMI, None)}
# the indexes an informed set keeps beside its store (informer.Informer ``indexers``): the
# Longhorn check of one node reads that node's replicas and two sets of names instead of
# every Replica and Volume (node_safety.any_at_risk_indexed), the pre-drain Job's checks from
# sets of volume names instead of every Engine (node_job._engines_indexed)
INDEXERS: dict[tuple[str, str, str | None], dict[str, Indexer]] = {
    (*c.LH_REPLICA, c.LONGHORN_NS): li.REPLICA_INDEXERS,
    (*c.LH_VOLUME, c.LONGHORN_NS): li.VOLUME_INDEXERS,
    (*c.LH_ENGINE, c.LONGHORN_NS): li.ENGINE_INDEXERS}
# the sums an informed set keeps by value (informer.Informer ``totals``): what the active pods
# of each node request, which the evacuation's plan reads for every candidate target
# (node_evacuation.evacuation_views) instead of looking at every pod of the cluster
TOTALS: dict[tuple[str, str, str | None], dict[str, Totaller]] = {
    (*c.POD, None): {ev.POD_REQUESTS: ev.pod_requests_by_node}}
# an informer's key: (api_version, kind, namespace, label selector or None)
Key = tuple[str, str, "str | None", "str | None"]
T = TypeVar("T")


def _matcher(key: Key, namespace: str | None,
             match: Callable[[dict[str, Any]], bool]) -> Callable[[dict[str, Any]], bool]:
    """The objects of informer ``key`` that a read of ``namespace`` filtered by ``match`` (a
    :func:`informer.field_filter`) asks for: a cluster-wide informer serves a namespaced read
    too."""
    if not namespace or key[2] is not None:
        return match

    def in_namespace(o: dict[str, Any]) -> bool:
        return (o.get("metadata") or {}).get("namespace") == namespace and match(o)
    return in_namespace


@contextmanager
def informed_beside(kube: Kube, writer: Any) -> Iterator[CycleKube]:
    """A :class:`CycleKube` on ``kube``'s connection (its API client and the kinds it has
    looked up), the plan writer ``writer`` writing through it, for the part of a call made
    with a plain client that reads as the node steps do (ClusterUpgrade's call entering
    NodeUpgrade and head-starting the first node, phase_table): what was written through
    ``kube`` before is in what its informers list, what the writer writes after is awaited
    by them. Its informers start with the first read of each set (or :meth:`CycleKube.
    prefetch`); afterwards the writer writes through ``kube`` again and they are stopped."""
    cyc = CycleKube(kube.dyn, kube.check_mode)
    cyc._resources = kube._resources
    plain, writer.kube = writer.kube, cyc
    try:
        yield cyc
    finally:
        writer.kube = plain
        cyc.close()


class CycleKube(Kube):
    """:class:`client.Kube` that remembers reads for the length of a step (see module doc).

    The sets in :data:`INFORMED` are not cached per step but followed by an
    :class:`informer.Informer` for the whole cycle: reads of them (without a label selector,
    with at most a name/namespace/nodeName field selector) are answered from its store once it
    has seen our last write of the kind, and waits on them subscribe to its events. The sets
    in :data:`SCOPED` get an informer per label selector they are read with (see there).

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
        self._informers: dict[Key, Informer | None] = {}
        self._starting: dict[Key, threading.Event] = {}
        self._need: dict[Key, int] = {}
        # False: no informer is started, every read goes to the server (or the step's cache)
        self.informing = True

    # -- informers ---------------------------------------------------------------------------
    def _informer_key(self, api_version: str, kind: str, namespace: str | None,
                      label_selector: str | None = None) -> Key | None:
        """The informer that answers a read of ``namespace`` with ``label_selector``: the
        set's cluster-wide one (:data:`INFORMED`, no label selector), or one per equality
        label selector of a :data:`SCOPED` set (or its plain whole-set read); ``None``: the
        server answers."""
        if not self.informing:
            return None
        for base in ((api_version, kind, namespace), (api_version, kind, None)):
            if base in INFORMED:
                return None if label_selector else (*base, None)
            if base in SCOPED:
                if label_selector and label_filter(label_selector) is None:
                    return None
                return (*base, label_selector or None)
        return None

    def _informer(self, key: Key, start: bool = True) -> Informer | None:
        """The usable informer of ``key``, started (listed) first if ``start``; one being
        started by another thread is waited for."""
        with self._lock:
            if key in self._informers:
                inf = self._informers[key]
                return inf if inf is not None and inf.usable else None
            starting = self._starting.get(key)
            if starting is None and not start:
                return None
            if starting is None:
                starting = self._starting[key] = threading.Event()
                mine = True
            else:
                mine = False
        if not mine:   # another thread is listing it: use its informer (or try again)
            starting.wait()
            return self._informer(key, start)
        try:
            base = super()
            res = self.resource(key[0], key[1])   # NotServed reaches the caller

            def lister() -> tuple[list[dict[str, Any]], str]:
                return base.list_with_rv(key[0], key[1], key[2], key[3])

            def streamer(rv: str, timeout: int) -> Any:
                return self.stream(res, namespace=key[2], label_selector=key[3],
                                   resource_version=rv or None, timeout=timeout,
                                   allow_watch_bookmarks=True)
            whole = key[3] is None
            inf = Informer(key[0], key[1], key[2], lister, streamer,
                           indexers=INDEXERS.get(key[:3]) if whole else None,
                           totals=TOTALS.get(key[:3]) if whole else None)
            inf.start()          # the initial list: its errors are the caller's
            with self._lock:
                self.stats["lists"] += 1
                self._informers[key] = inf
            return inf if inf.usable else None
        finally:
            with self._lock:
                self._starting.pop(key, None)
            starting.set()

    def _serving(self, api_version: str, kind: str, namespace: str | None,
                 label_selector: str | None, field_selector: str | None
                 ) -> tuple[Informer, Key] | None:
        """The informer that serves this read (started if the read is its own: a read by
        name or namespace of a :data:`SCOPED` set only uses a running one)."""
        key = self._informer_key(api_version, kind, namespace, label_selector)
        if key is None:
            return None
        start = key[:3] not in SCOPED or key[3] is not None or not field_selector
        inf = self._informer(key, start=start)
        return None if inf is None else (inf, key)

    def _informed_read(self, api_version: str, kind: str, namespace: str | None,
                       label_selector: str | None, field_selector: str | None
                       ) -> tuple[list[dict[str, Any]], str] | None:
        match = field_filter(field_selector)
        if match is None:
            return None
        found = self._serving(api_version, kind, namespace, label_selector, field_selector)
        if found is None:
            return None
        inf, key = found
        # no field selector on the informer's own scope: every object, without a test each
        whole = not field_selector and (not namespace or key[2] is not None)
        snap = inf.snapshot(self._need.get(key, -1),
                            match=None if whole else _matcher(key, namespace, match),
                            node=selected_node(field_selector))
        if snap is not None:
            self.stats["hits"] += 1
            self.stats["informed"] += 1
        return snap

    def by_index(self, api_version: str, kind: str, namespace: str | None, index: str,
                 value: str | None = None) -> set[str] | list[dict[str, Any]] | None:
        """What the informer of the set keeps under ``index`` (:data:`INDEXERS`): without
        ``value`` the values some object is under, with it the objects under it; ``None``
        when no healthy informer with that index serves the set (the caller reads the set)."""
        return self._kept(api_version, kind, namespace,
                          lambda inf, rv: inf.indexed(index, value, rv))

    def by_total(self, api_version: str, kind: str, namespace: str | None, total: str
                 ) -> dict[str, tuple[int, ...]] | None:
        """The sums the informer of the set keeps for ``total`` (:data:`TOTALS`) by value;
        ``None`` when no healthy informer with that total serves the set."""
        return self._kept(api_version, kind, namespace,
                          lambda inf, rv: inf.totalled(total, rv))

    def _kept(self, api_version: str, kind: str, namespace: str | None,
              read: Callable[[Informer, int], T]) -> T | None:
        """``read`` of the set's informer at our last write's resourceVersion (None: no
        healthy informer serves the set, or it has not caught up)."""
        found = self._serving(api_version, kind, namespace, None, None)
        if found is None:
            return None
        inf, key = found
        got = read(inf, self._need.get(key, -1))
        if got is not None:
            self.stats["hits"] += 1
            self.stats["informed"] += 1
        return got

    def prefetch(self, wait: bool = True, scoped: Iterable[Key] = (),
                 informed: bool = True) -> None:
        """Start every informer of :data:`INFORMED` (and the ``scoped`` ones, e.g. the VMIs
        of the node: ``(*c.VMI, None, "kubevirt.io/nodeName=<node>")``) at once, their
        initial lists side by side (the server and this process work in parallel); a set
        that is not served is left to its first read. ``wait=False`` returns at once: a
        read of a set still being listed waits for that list instead of listing again.
        ``informed=False``: the ``scoped`` ones only."""
        def start(key: Key) -> None:
            try:
                self._informer(key)
            except Exception:  # noqa: BLE001 - the first real read raises it
                pass
        keys = []
        wanted: list[Key] = [(*k, None) for k in sorted(INFORMED, key=str)] if informed else []
        wanted += [k for k in scoped if k[:3] in SCOPED and k[3] and label_filter(k[3])]
        for key in wanted:   # discovery first, in this thread
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

    def _subscribe(self, source: waiting.Source, rv: str, out: queue.Queue[Any], idx: int
                   ) -> Callable[[], None] | None:
        """A wait on an informed set takes its events from the informer (the wait listed from
        it, at its resourceVersion): the unsubscribe function; ``None`` for anything else
        (the wait watches the server)."""
        key = self._informer_key(source.api_version, source.kind, source.namespace,
                                 source.label_selector)
        inf = None if key is None else self._informer(key, start=False)
        match = field_filter(source.field_selector)
        if key is None or inf is None or match is None:
            return None
        sub = inf.subscribe(rv, out, idx, _matcher(key, source.namespace, match))
        if sub is None:
            return None
        return lambda: inf.unsubscribe(sub)

    # -- step boundaries -------------------------------------------------------------------
    def begin_step(self, name: str) -> None:
        """A new step reads the cluster afresh (except what is stable for the cycle)."""
        with self._lock:
            self.step = name
            self._lists = {k: v for k, v in self._lists.items() if k[:2] in STABLE_LISTS}
            self._gets = {k: v for k, v in self._gets.items()
                          if k[:2] in STABLE_GETS or k[:2] in STEP_SPANNING_GETS}

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
            if c.VMI in kinds:
                self._sticky_vmis = None

    def warm(self, api_version: str, kind: str, name: str, namespace: str | None = None
             ) -> None:
        """Read a :data:`STABLE_GETS` object ahead (from any thread, also while another
        thread waits, when :meth:`get` would not remember it), for the step that reads it
        later to find it in memory; a read that fails is left to that step."""
        key = (api_version, kind, name, namespace)
        with self._lock:
            if (api_version, kind) not in STABLE_GETS or key in self._gets:
                return
        try:
            obj = Kube.get(self, api_version, kind, name, namespace)
        except Exception:  # noqa: BLE001 - the step's own read raises it
            return
        with self._lock:
            self.stats["gets"] += 1
            self._gets.setdefault(key, obj)

    def _cacheable_get(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) in STABLE_GETS or (api_version, kind) in \
            STEP_SPANNING_GETS or (api_version, kind) == (c.PLAN_API_VERSION, c.PLAN_KIND)

    # -- reads -------------------------------------------------------------------------------
    def _informed_get(self, api_version: str, kind: str, name: str, namespace: str | None
                      ) -> tuple[dict[str, Any] | None] | None:
        """``(object or None,)`` from the informer of the kind; ``None`` if there is none
        usable (then the server answers)."""
        found = self._serving(api_version, kind, namespace, None, f"metadata.name={name}")
        if found is None:
            return None
        inf, key = found
        hit = inf.lookup(f"{namespace}/{name}" if namespace else name, self._need.get(key, -1))
        if hit is not None:
            self.stats["hits"] += 1
            self.stats["informed"] += 1
            return (None if hit[0] is None else json_copy(hit[0]),)
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
                return None if obj is None else json_copy(obj)
        obj = super().get(api_version, kind, name, namespace)
        self.stats["gets"] += 1
        with self._lock:
            self._gets[key] = obj
        return None if obj is None else json_copy(obj)

    def list_with_rv(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None, field_selector: str | None = None
                     ) -> tuple[list[dict[str, Any]], str]:
        informed = self._informed_read(api_version, kind, namespace, label_selector,
                                       field_selector)
        if informed is not None:
            return informed
        key = (api_version, kind, namespace, label_selector, field_selector)
        plain_vmis = (api_version, kind) == c.VMI and not (
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
        rv = rv_int(meta.get("resourceVersion"))
        if rv is not None:   # the next read of the kind includes this write
            with self._lock:
                # every informer of the kind the written object is in (a label-scoped one
                # never sees an object outside its selector: it must not wait for it)
                for key in [k for k in [*self._informers, *self._starting]
                            if k[:2] == (api_version, kind)
                            and k[2] in (None, meta.get("namespace"))]:
                    sel = label_filter(key[3]) if key[3] else None
                    if key[3] and (sel is None or not sel(obj or {})):
                        continue
                    self._need[key] = max(self._need.get(key, -1), rv)
        if obj and (api_version, kind) in STABLE_GETS and meta.get("name"):
            # the object as written: what a read of it would return now (the Rancher
            # cluster, patched to start its upgrade, is read next for its hook names)
            with self._lock:
                self._gets[(api_version, kind, meta.get("name"), meta.get("namespace"))] = \
                    json_copy(obj)
        if obj and (api_version, kind) == (c.PLAN_API_VERSION, c.PLAN_KIND) and \
                not self._waiting:
            with self._lock:
                self._gets[(api_version, kind, meta.get("name"), meta.get("namespace"))] = \
                    json_copy(obj)

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

    def evict(self, name: str, namespace: str, grace_period: int | None = None) -> None:
        # the pod is marked deleted and its PodDisruptionBudget's status written: both kinds
        # are read afresh (the answer is a Status, no resourceVersion to wait for)
        self.forget(*c.PDB)
        self._write(*c.POD, lambda: super(CycleKube, self).evict(name, namespace,
                                                                 grace_period))

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
    def wait(self, sources: Iterable[waiting.Source],
             predicate: Callable[[waiting.Snapshot], Any], *, what: str, timeout: float,
             describe: Callable[[waiting.Snapshot], str] | None = None,
             on_change: Callable[[waiting.Snapshot], None] | None = None,
             slice_seconds: float | None = None) -> Any:
        with self._lock:
            self._waiting += 1
        try:
            return waiting.wait(self, sources, predicate, what=what, timeout=timeout,
                                describe=describe, on_change=on_change,
                                slice_seconds=slice_seconds, subscribe=self._subscribe)
        finally:
            with self._lock:
                self._waiting -= 1
            self.forget()
