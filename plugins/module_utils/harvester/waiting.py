"""Waiting by watch, with a deadline, over one or more sets of objects.

:func:`wait` keeps a local cache of every :class:`Source` (a list, then a watch from the
list's resourceVersion) and evaluates a predicate over the caches after each change. It
never sleeps a fixed time: it blocks on watch events. A cut stream is resumed from the last
resourceVersion seen; a 410 Gone (history expired) relists; transient API errors back off.
When the deadline passes it raises :class:`WaitTimeout` naming what was awaited and the last
state the predicate described.

Each source is watched on its own daemon thread feeding one queue; the caller's thread runs
the predicate (and any side effect it has, such as recording node progress in the plan).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)

MAX_STREAM_SECONDS = 60


class WaitTimeout(Exception):
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
    for the operator (also the ``last_seen`` of a timeout).
    """

    done: bool = False
    failed: str | None = None
    progress: str = ""


Snapshot = dict[str, dict[str, dict[str, Any]]]   # source key -> "ns/name" -> object
Predicate = Callable[[Snapshot], Verdict]


def _obj_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name')}"


@dataclass
class _Feed:
    source: Source
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    rv: str = ""


def _follow(kube: Kube, feed: _Feed, out: queue.Queue[tuple[str, Any]],
            stop: threading.Event, deadline: float) -> None:
    """List then watch one source until ``stop``; push ("sync"/"event"/"error", ...)."""
    s = feed.source
    backoff = 0.5
    need_list = True
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            if need_list:
                items, rv = kube.list_with_rv(s.api_version, s.kind, s.namespace,
                                              s.label_selector, s.field_selector)
                out.put(("sync", (s.key, {_obj_key(i): i for i in items})))
                feed.rv = rv
                need_list = False
            remaining = max(1, min(MAX_STREAM_SECONDS, int(deadline - time.monotonic()) + 1))
            for ev in kube.watch(s.api_version, s.kind, s.namespace, s.label_selector,
                                 s.field_selector, feed.rv, timeout=remaining):
                if stop.is_set():
                    return
                obj = ev.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    feed.rv = str(rv)
                if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    out.put(("event", (s.key, ev["type"], obj)))
            backoff = 0.5    # stream ended normally (server timeout or cut): resume from rv
        except ApiError as exc:
            if exc.status == 410:
                need_list = True       # history expired: relist
                continue
            out.put(("error", f"{s.kind}: {exc.message}"))
            stop.wait(backoff)
            backoff = min(8.0, backoff * 2)
            need_list = True


def wait(kube: Kube, sources: list[Source], predicate: Predicate, *, what: str,
         timeout: float, slice_seconds: float | None = None,
         on_progress: Callable[[str], None] | None = None) -> tuple[Verdict, bool]:
    """Wait until ``predicate`` says done or failed, or time runs out.

    ``timeout`` is the real deadline (seconds from now): reaching it raises
    :class:`WaitTimeout`. ``slice_seconds`` (shorter) ends the wait early without error so
    the caller can report progress and call again; the second element of the result is
    ``True`` when the wait ended for that reason (pending).
    """
    start = time.monotonic()
    deadline = start + max(0.0, timeout)
    slice_end = min(deadline, start + slice_seconds) if slice_seconds else deadline
    out: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()
    feeds = [_Feed(s) for s in sources]
    snapshot: Snapshot = {s.key: {} for s in sources}
    synced: set[str] = set()
    threads = [threading.Thread(target=_follow, args=(kube, f, out, stop, deadline),
                                daemon=True) for f in feeds]
    for t in threads:
        t.start()
    verdict = Verdict(progress="not listed yet")
    last_error = ""
    try:
        while True:
            now = time.monotonic()
            if now >= slice_end:
                if slice_end < deadline:
                    return verdict, True
                raise WaitTimeout(what, now - start, verdict.progress or last_error)
            try:
                kind, payload = out.get(timeout=slice_end - now)
            except queue.Empty:
                continue
            if kind == "sync":
                key, items = payload
                snapshot[key] = items
                synced.add(key)
            elif kind == "event":
                key, etype, obj = payload
                if etype == "DELETED":
                    snapshot[key].pop(_obj_key(obj), None)
                else:
                    snapshot[key][_obj_key(obj)] = obj
            else:
                last_error = str(payload)
                continue
            if len(synced) < len(sources) or not out.empty():
                continue
            previous = verdict.progress
            verdict = predicate(snapshot)
            if verdict.done or verdict.failed:
                return verdict, False
            if on_progress and verdict.progress and verdict.progress != previous:
                on_progress(verdict.progress)
    finally:
        stop.set()


def only(snapshot: Snapshot, key: str) -> dict[str, Any] | None:
    """The single object of a source watched by name (``None`` if absent)."""
    items = list(snapshot.get(key, {}).values())
    return items[0] if items else None
