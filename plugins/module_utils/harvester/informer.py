"""Informers for the node cycle: one list and one watch per resource set, kept in memory.

A node's upgrade (:mod:`node_cycle`) reads the same cluster-wide sets step after step — every
Node for the facts, the machine-plan Secrets of ``fleet-local`` for the hooks, every
VirtualMachineInstance and VirtualMachineInstanceMigration for the evacuation — and its waits
watch them, and on a big cluster listing them again per step costs more than the step
(docs/performance.md). An :class:`Informer` lists a
set once and then follows it with one watch, as client-go's informers do; reads are answered
from its store and a wait on the set subscribes to its events instead of opening a watch.

Consistency (what a step may rely on), docs/performance.md "Informers in the node cycle":

* **read your writes**: after our own write of an informed kind, a read waits until the
  informer has seen that write's resourceVersion (:meth:`Informer.snapshot` ``min_rv``);
* **read after wait**: a wait's view comes from the same informer, so what a step reads after
  a wait is at least as new as what the wait decided on;
* **never silently stale**: while the watch is broken (stream cut, server gone) the informer is
  not ``healthy`` and readers go to the server instead; a 410 Gone relists.

The ordering relies on resourceVersions being integers that grow with every write, as
etcd's revisions (and the simulator's) do. Kubernetes calls them opaque: if one does not
parse as an integer the informer declares itself unusable and every read goes to the server,
as before.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any


def obj_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class WatchError(Exception):
    """An ERROR event in a watch stream (other than 410 Gone, which relists)."""

    def __init__(self, status: Any, message: Any) -> None:
        super().__init__(f"watch error {status}: {message}")
        self.status = status


def rv_int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


# an index function: the value an object is indexed under (``None`` or ``""``: not indexed)
Indexer = Callable[[dict[str, Any]], "str | None"]
NODE_NAME = "spec.nodeName"
# a total's function: the value an object counts under and what it counts (``None``: nothing)
Totaller = Callable[[dict[str, Any]], "tuple[str, tuple[int, ...]] | None"]


def _node_of(obj: dict[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("nodeName") or "")


def _field_terms(field_selector: str) -> list[tuple[str, str]] | None:
    """The ``(path, value)`` equality terms of a field selector on the fields the node cycle
    reads informed sets by (``metadata.name``, ``metadata.namespace``, ``spec.nodeName``);
    ``None`` for anything else."""
    terms: list[tuple[str, str]] = []
    for term in field_selector.split(","):
        path, sep, want = term.partition("=")
        if not sep or want.startswith("=") or path.endswith("!") or \
                path not in ("metadata.name", "metadata.namespace", "spec.nodeName"):
            return None
        terms.append((path, want))
    return terms


def selected_node(field_selector: str | None) -> str | None:
    """The node a field selector's ``spec.nodeName=X`` term names (non-empty), else None."""
    for path, want in _field_terms(field_selector or "") or ():
        if path == "spec.nodeName" and want:
            return want
    return None


def field_filter(field_selector: str | None) -> Callable[[dict[str, Any]], bool] | None:
    """A client-side test for the field selectors the node cycle uses on informed sets
    (``metadata.name=X``, ``metadata.namespace=X``, ``spec.nodeName=X``; ``,``-joined);
    ``None`` for anything else (the caller then asks the server)."""
    if not field_selector:
        return lambda obj: True
    parsed = _field_terms(field_selector)
    if parsed is None:
        return None
    terms = [(path.split("."), want) for path, want in parsed]

    def match(obj: dict[str, Any]) -> bool:
        for path, want in terms:
            cur: Any = obj
            for part in path:
                cur = (cur or {}).get(part) if isinstance(cur, dict) else None
            if str(cur or "") != want:
                return False
        return True
    return match


def label_filter(label_selector: str | None) -> Callable[[dict[str, Any]], bool] | None:
    """A client-side test for an equality label selector (``k=v`` / ``k==v``, ``,``-joined:
    what the node cycle's scoped informers use); ``None`` for anything else (set-based
    terms, ``!=``, existence), which the server answers instead."""
    if not label_selector:
        return lambda obj: True
    terms: list[tuple[str, str]] = []
    for term in label_selector.split(","):
        key, sep, want = term.partition("=")
        want = want[1:] if want.startswith("=") else want
        key, want = key.strip(), want.strip()
        if not sep or not key or key.endswith("!") or any(ch in key + want for ch in "()! ="):
            return None
        terms.append((key, want))

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(labels.get(k) == v for k, v in terms)
    return match


class Informer:
    """One resource set (``api_version``/``kind``, optionally one namespace) listed once and
    followed by a watch in a background thread.

    ``lister(api_version, kind, namespace)`` returns ``(items, resourceVersion)``;
    ``streamer(resource_version, timeout)`` yields watch events ``{"type", "raw_object"}``
    (both from :class:`client.Kube`). ``history`` events are kept so that a subscriber that
    read a snapshot just before can be replayed what happened since."""

    def __init__(self, api_version: str, kind: str, namespace: str | None,
                 lister: Callable[[], tuple[list[dict[str, Any]], str]],
                 streamer: Callable[[str, int], Any], history: int = 20000,
                 indexers: dict[str, Indexer] | None = None,
                 totals: dict[str, Totaller] | None = None) -> None:
        self.api_version, self.kind, self.namespace = api_version, kind, namespace
        self._lister, self._streamer = lister, streamer
        self._cond = threading.Condition()
        self._items: dict[str, dict[str, Any]] = {}
        # per index, the keys of the objects under each value, kept with every event (as
        # client-go's Indexers): the objects bound to each node (``spec.nodeName``: Pods), so
        # that a read of one node's pods looks at those only, as the API server's own index
        # does, and the caller's (``indexers``)
        self._indexers: dict[str, Indexer] = {NODE_NAME: _node_of, **(indexers or {})}
        self._indexes: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        # per total, the sums of what the objects under each value count (``totals``: the
        # requests of the active pods bound to each node, kept as pods come and go)
        self._totallers: dict[str, Totaller] = dict(totals or {})
        self._totals: dict[str, dict[str, list[int]]] = {name: {} for name in self._totallers}
        self._rv = ""                       # last resourceVersion processed (list or event)
        self._seen = -1                     # the same as an integer
        self._history: deque[tuple[int, str, dict[str, Any]]] = deque(maxlen=history)
        self._floor = -1                    # the history covers every event after this rv
        self._subs: dict[int, tuple[queue.Queue[Any], int, Callable[[dict[str, Any]], bool]]]
        self._subs = {}
        self._next_sub = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.healthy = False
        self.usable = True

    # -- life cycle --------------------------------------------------------------------------
    def start(self) -> None:
        """List (in the caller's thread: errors such as 404/NotServed reach the caller) and
        start following the set."""
        self._relist()
        if not self.usable:
            return
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"informer-{self.kind}")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._unhealthy()

    def _relist(self) -> None:
        items, rv = self._lister()
        seen = rv_int(rv)
        fresh = {obj_key(o): o for o in items}
        with self._cond:
            if seen is None or any(rv_int((o.get("metadata") or {}).get("resourceVersion"))
                                   is None for o in items):
                self.usable = False
                self.healthy = False
                self._cond.notify_all()
                return
            old = self._items
            self._items, self._rv, self._seen = fresh, rv, seen
            self._indexes = {name: {} for name in self._indexers}
            self._totals = {name: {} for name in self._totallers}
            for key, obj in fresh.items():
                self._index(key, None, obj)
            # subscribers see the difference as events; the history starts again here
            # (on the first list nobody has subscribed yet)
            for key, obj in old.items():
                if key not in fresh:
                    self._publish("DELETED", obj)
            for obj in fresh.values():
                self._publish("MODIFIED", obj)
            self._history.clear()
            self._floor = seen
            self.healthy = True
            self._cond.notify_all()

    def _publish(self, etype: str, obj: dict[str, Any]) -> None:
        for q, idx, match in self._subs.values():
            if match(obj):
                q.put((idx, etype, obj))

    def _apply(self, etype: str, obj: dict[str, Any]) -> None:
        rv = rv_int((obj.get("metadata") or {}).get("resourceVersion"))
        with self._cond:
            if rv is None:
                self.usable = self.healthy = False
                self._cond.notify_all()
                return
            self.healthy = True
            if etype != "BOOKMARK":
                key = obj_key(obj)
                if etype == "DELETED":
                    self._index(key, self._items.pop(key, None), None)
                else:
                    self._index(key, self._items.get(key), obj)
                    self._items[key] = obj
                self._history.append((rv, etype, obj))
                if len(self._history) == self._history.maxlen:
                    self._floor = self._history[0][0] - 1
                self._publish(etype, obj)
            if rv > self._seen:
                self._seen, self._rv = rv, str(rv)
            self._cond.notify_all()

    def _index(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for name, count in self._totallers.items():
            totals = self._totals[name]
            for obj, sign in ((old, -1), (new, 1)):
                got = count(obj) if obj is not None else None
                if got is None:
                    continue
                value, amounts = got
                cur = totals.get(value)
                if cur is None:
                    cur = totals[value] = [0] * len(amounts)
                for i, a in enumerate(amounts):
                    cur[i] += sign * a
        for name, fn in self._indexers.items():
            was, now = (fn(old) if old is not None else None), \
                (fn(new) if new is not None else None)
            if was == now:
                continue
            index = self._indexes[name]
            if was:
                keys = index.get(was)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[was]
            if now:
                index.setdefault(now, set()).add(key)

    def _run(self) -> None:
        backoff = 0.2
        while not self._stop.is_set() and self.usable:
            gone = False
            try:
                for ev in self._streamer(self._rv, 60):
                    if self._stop.is_set():
                        return
                    raw = ev.get("raw_object") or {}
                    etype = ev.get("type") or ""
                    if etype == "ERROR":
                        gone = raw.get("code") == 410
                        if not gone:   # e.g. 500: as a cut stream (back off, not healthy)
                            raise WatchError(raw.get("code"), raw.get("message"))
                        break
                    self._apply(etype, raw)
                else:   # the server ended a quiet stream: it was connected all along
                    with self._cond:
                        self.healthy = True
                        self._cond.notify_all()
                    backoff = 0.2
                    continue
            except Exception as exc:  # noqa: BLE001 - cut stream / transient error
                gone = getattr(exc, "status", None) == 410
                if not gone:
                    self._unhealthy()
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
            if gone:
                self._unhealthy()
                try:
                    self._relist()
                except Exception:  # noqa: BLE001 - retried
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 5.0)

    def _unhealthy(self) -> None:
        with self._cond:
            self.healthy = False
            self._cond.notify_all()

    # -- reads -------------------------------------------------------------------------------
    def _caught_up(self, min_rv: int, timeout: float) -> bool:
        """Wait until the informer has seen ``min_rv`` (our own last write of the set); False
        at once if it is not usable, stopped or not healthy (its watch is being re-made: the
        caller asks the server instead of waiting for it — a quiet set's new watch shows it is
        healthy only with its first event), and False if it has not caught up within
        ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.usable and not self._stop.is_set() and self.healthy and \
                    self._seen < min_rv:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return self.usable and self.healthy and not self._stop.is_set()

    def snapshot(self, min_rv: int = -1, timeout: float = 10.0,
                 match: Callable[[dict[str, Any]], bool] | None = None,
                 node: str | None = None) -> tuple[list[dict[str, Any]], str] | None:
        """The set's objects (those ``match`` accepts) and the resourceVersion they are at,
        once the informer has seen ``min_rv``; ``None`` if it is not healthy or has not caught
        up within ``timeout`` (the caller then asks the server). ``node``: only objects bound
        to that node (``spec.nodeName``) can match."""
        with self._cond:
            if not self._caught_up(min_rv, timeout):
                return None
            if node:
                items = [self._items[k] for k in self._indexes[NODE_NAME].get(node, ())]
            else:
                items = list(self._items.values())
            if match is not None:
                items = [o for o in items if match(o)]
            return items, self._rv

    def indexed(self, index: str, value: str | None = None, min_rv: int = -1,
                timeout: float = 10.0) -> set[str] | list[dict[str, Any]] | None:
        """Without ``value``: the values of ``index`` some object is under; with it: the
        objects under ``value``; once the informer has seen ``min_rv``, ``None`` as for
        :meth:`snapshot` (or when the informer has no such index)."""
        with self._cond:
            keys = self._indexes.get(index)
            if keys is None or not self._caught_up(min_rv, timeout):
                return None
            if value is None:
                return set(keys)
            return [self._items[k] for k in keys.get(value, ())]

    def totalled(self, total: str, min_rv: int = -1, timeout: float = 10.0
                 ) -> dict[str, tuple[int, ...]] | None:
        """The sums of ``total`` by value, once the informer has seen ``min_rv``; ``None`` as
        for :meth:`snapshot` (or when the informer keeps no such total)."""
        with self._cond:
            totals = self._totals.get(total)
            if totals is None or not self._caught_up(min_rv, timeout):
                return None
            return {value: tuple(sums) for value, sums in totals.items()}

    def lookup(self, key: str, min_rv: int = -1, timeout: float = 10.0
               ) -> tuple[dict[str, Any] | None] | None:
        """The object stored under ``key`` (:func:`obj_key`), or ``(None,)`` when there is
        none, once the informer has seen ``min_rv``; ``None`` as for :meth:`snapshot`."""
        with self._cond:
            if not self._caught_up(min_rv, timeout):
                return None
            return (self._items.get(key),)

    def seen(self) -> int:
        with self._cond:
            return self._seen

    def subscribe(self, rv: str, out: queue.Queue[Any], idx: int,
                  match: Callable[[dict[str, Any]], bool]) -> int | None:
        """Deliver ``(idx, type, object)`` to ``out`` for every change after ``rv`` (a
        resourceVersion a :meth:`snapshot` returned) of the objects ``match`` accepts, replaying
        what the history holds; ``None`` if it no longer holds all of it."""
        start = rv_int(rv)
        with self._cond:
            if start is None or not self.usable or start < self._floor:
                return None
            for ev_rv, etype, obj in self._history:
                if ev_rv > start and match(obj):
                    out.put((idx, etype, obj))
            sub = self._next_sub
            self._next_sub += 1
            self._subs[sub] = (out, idx, match)
            return sub

    def unsubscribe(self, sub: int) -> None:
        with self._cond:
            self._subs.pop(sub, None)
