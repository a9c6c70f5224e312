"""Waiting by watch, with a deadline, over one or more sets of objects.

:func:`wait` lists every :class:`Source` (in the caller's thread: an error reading a set is
the caller's), then follows each with a watch from its list's resourceVersion and evaluates a
predicate over the sets after each batch of changes, until it returns something truthy. It
never sleeps a fixed time: it blocks on watch events. A cut stream is resumed from the last
resourceVersion seen; a 410 Gone (history expired) relists; transient errors back off. When
the deadline passes it raises :class:`WaitTimeout` naming what was awaited and the last state
seen.

Each source is watched on its own daemon thread feeding one queue (or, under a caching layer
such as ``node_cycle.CycleKube``, fed by that layer's informer); the caller's thread runs the
predicate and ``on_change`` (and any side effect they have, such as recording progress in the
plan). Callers reach it as ``kube.wait(...)`` (:meth:`client.Kube.wait`), so that a caching
layer can bracket it.

A predicate returns any value: truthy ends the wait (and is returned). The cluster phases'
predicates return a :class:`Verdict`, truthy when done or failed, whose ``progress`` is the
last state seen.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.informer import (
    obj_key,
)

if TYPE_CHECKING:
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
        Kube,
    )

MAX_STREAM_SECONDS = 60
TICK_SECONDS = 2.0   # without events, ``on_change`` runs this often (time-based checks)


class WaitTimeout(NodeLoopError):
    """A wait reached its deadline; ``what`` was awaited, ``last_seen`` describes the end."""

    def __init__(self, what: str, seconds: float, last_seen: str) -> None:
        self.what, self.seconds, self.last_seen = what, seconds, last_seen
        super().__init__(f"timed out after {int(seconds)}s waiting for {what}; "
                         f"last seen: {last_seen or 'nothing'}")


@dataclass
class Source:
    """One set of objects: kind, optional namespace and selectors; ``key`` names it for the
    predicate (default: the kind)."""

    api_version: str
    kind: str
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    key: str = ""

    def __post_init__(self) -> None:
        self.key = self.key or self.kind

    @classmethod
    def named(cls, api_version: str, kind: str, name: str, namespace: str | None = None,
              key: str = "") -> Source:
        return cls(api_version, kind, namespace, field_selector=f"metadata.name={name}",
                   key=key or kind)


@dataclass
class Verdict:
    """What a predicate says about the current state.

    ``done``: stop waiting; ``failed``: stop with this failure message; ``progress``: a line
    for the operator (also the ``last_seen`` of a timeout). Truthy when the wait is over.
    """

    done: bool = False
    failed: str | None = None
    progress: str = ""

    def __bool__(self) -> bool:
        return bool(self.done or self.failed)


Snapshot = dict[str, dict[str, dict[str, Any]]]   # source key -> object key -> object
Predicate = Callable[[Snapshot], Verdict]
# a caching layer's feed of one source: (source, resourceVersion, queue, index) -> an
# unsubscribe function, or None when it cannot serve that source (then the server is watched)
Subscribe = Callable[[Source, str, "queue.Queue[Any]", int], "Callable[[], None] | None"]


@dataclass
class _Feed:
    source: Source
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    rv: str = ""


def wait(kube: Kube, sources: Iterable[Source], predicate: Callable[[Snapshot], Any], *,
         what: str, timeout: float,
         describe: Callable[[Snapshot], str] | None = None,
         on_change: Callable[[Snapshot], None] | None = None,
         slice_seconds: float | None = None, subscribe: Subscribe | None = None) -> Any:
    """Watch ``sources`` until ``predicate(snapshot)`` returns something truthy; return it.

    ``snapshot`` maps each source's key to ``{obj_key: object}``. ``predicate`` may raise
    (e.g. :class:`NodeLoopError`) to stop the wait early. ``on_change`` is called after each
    batch of events and every :data:`TICK_SECONDS` without one (e.g. to start more
    migrations, or notice a hung one). ``timeout`` is the deadline (seconds from now): reaching
    it raises :class:`WaitTimeout`, whose ``last_seen`` is ``describe(snapshot)`` (or the
    last Verdict's progress, or the last watch error). ``slice_seconds`` (shorter) ends the
    wait early without error, returning the predicate's last (falsy) result, so the caller
    can report progress and call again.
    """
    start = time.monotonic()
    deadline = start + max(0.0, timeout)
    slice_end = min(deadline, start + slice_seconds) if slice_seconds else deadline
    feeds = [_Feed(s) for s in sources]
    for feed in feeds:
        _relist(kube, feed)

    def snapshot() -> Snapshot:
        return {f.source.key: f.items for f in feeds}

    result = predicate(snapshot())
    if result:
        return result
    if on_change is not None:
        on_change(snapshot())
        result = predicate(snapshot())
        if result:
            return result
    events: queue.Queue[tuple[int, str, dict[str, Any] | None]] = queue.Queue()
    stop = threading.Event()
    errors: list[str] = []
    unsubscribe: list[Callable[[], None]] = []
    try:
        for idx, feed in enumerate(feeds):
            unsub = subscribe(feed.source, feed.rv, events, idx) if subscribe else None
            if unsub is not None:
                unsubscribe.append(unsub)
                continue
            threading.Thread(target=_follow, args=(kube, idx, feed, events, stop, deadline,
                                                   errors), daemon=True).start()
        while True:
            left = slice_end - time.monotonic()
            if left <= 0:
                if slice_end < deadline:
                    return result
                last = describe(snapshot()) if describe else getattr(result, "progress", "")
                raise WaitTimeout(what, timeout, last or (errors[-1] if errors else ""))
            try:
                idx, etype, obj = events.get(timeout=min(left, TICK_SECONDS))
            except queue.Empty:
                if on_change is not None:   # time-based checks (hung migrations)
                    on_change(snapshot())
                    result = predicate(snapshot())
                    if result:
                        return result
                continue
            _apply(feeds[idx], etype, obj)
            while True:   # drain what else arrived, then evaluate once
                try:
                    idx, etype, obj = events.get_nowait()
                except queue.Empty:
                    break
                _apply(feeds[idx], etype, obj)
            if on_change is not None:
                on_change(snapshot())
            result = predicate(snapshot())
            if result:
                return result
    finally:
        stop.set()
        for unsub in unsubscribe:
            unsub()


def only(snapshot: Snapshot, key: str) -> dict[str, Any] | None:
    """The single object of a source watched by name (``None`` if absent)."""
    items = list(snapshot.get(key, {}).values())
    return items[0] if items else None


def _relist(kube: Kube, feed: _Feed) -> None:
    s = feed.source
    items, rv = kube.list_with_rv(s.api_version, s.kind, s.namespace, s.label_selector,
                                  s.field_selector)
    feed.items = {obj_key(o): o for o in items}
    feed.rv = rv


def _apply(feed: _Feed, etype: str, obj: dict[str, Any] | None) -> None:
    if obj is None:
        return
    key = obj_key(obj)
    if etype == "DELETED":
        feed.items.pop(key, None)
    else:
        feed.items[key] = obj


def _follow(kube: Kube, idx: int, feed: _Feed, out: queue.Queue[Any], stop: threading.Event,
            deadline: float, errors: list[str]) -> None:
    """Watch one source from its list's resourceVersion until ``stop``, resumed after cuts;
    a 410 Gone relists (the difference to the wait's view arrives as events)."""
    from kubernetes import watch as kwatch
    from kubernetes.client.exceptions import ApiException
    s = feed.source
    res = kube.resource(s.api_version, s.kind)
    rv = feed.rv
    backoff = 0.2
    while not stop.is_set() and time.monotonic() < deadline:
        w = kwatch.Watch()
        try:
            chunk = max(1, min(MAX_STREAM_SECONDS, int(deadline - time.monotonic()) + 1))
            for ev in kube.stream(res, namespace=s.namespace, label_selector=s.label_selector,
                                  field_selector=s.field_selector,
                                  resource_version=rv or None, timeout=chunk, watcher=w):
                if stop.is_set():
                    w.stop()
                    return
                raw = ev.get("raw_object") or {}
                etype = ev.get("type") or ""
                if etype == "ERROR":
                    if raw.get("code") == 410:
                        raise ApiException(status=410, reason="Gone")
                    continue
                new_rv = (raw.get("metadata") or {}).get("resourceVersion")
                if new_rv:
                    rv = str(new_rv)
                if etype == "BOOKMARK":
                    continue
                out.put((idx, etype, raw))
            backoff = 0.2
        except ApiException as exc:
            if exc.status == 410:
                try:
                    items, rv = kube.list_with_rv(s.api_version, s.kind, s.namespace,
                                                  s.label_selector, s.field_selector)
                except Exception as err:  # noqa: BLE001 - retried below
                    errors.append(f"{s.kind}: {err}")
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                seen = set()
                for o in items:
                    seen.add(obj_key(o))
                    out.put((idx, "MODIFIED", o))
                for key in list(feed.items):
                    if key not in seen:
                        out.put((idx, "DELETED", feed.items[key]))
                continue
            errors.append(f"{s.kind}: {exc.reason}")
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
        except Exception as exc:  # noqa: BLE001 - cut stream / transient error: resume
            errors.append(f"{s.kind}: {str(exc)[:200]}")
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
