"""The simulation runtime: one thread that runs every simulated controller.

Controllers register handlers for store events of a kind (``on``) and schedule work at
simulated times (``after``). Everything a controller does happens on this thread, one step
at a time, so controllers need no locks of their own. Store events reach the runtime
through a queue the store fills right after each commit.

Timers are kept on simulated time: ``after(s, fn)`` is due at ``clock.now() + s``; a timer
that falls due while events are queued runs within ``TIMER_CHECK_EVERY`` of them, before the
rest. The loop
ticks the clock (``Clock.tick``) on every iteration and wakes at least every
``clock.tick_interval`` wall seconds, so simulated time never runs more than ``clock.lead``
wall seconds ahead of the loop: while this thread is stalled the clock is held, and a timer
keeps its simulated delay however long the stall (harvester_sim/clock.py).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import traceback
from collections.abc import Callable
from typing import Any

from ..api.store import Event, Store
from ..clock import Clock

log = logging.getLogger("harvester_sim.runtime")

TIMER_CHECK_EVERY = 8
Handler = Callable[[str, dict[str, Any], "dict[str, Any] | None"], None]


class Timer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Runtime:
    """Event + timer loop on simulated time."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._heap: list[tuple[float, int, Callable[[], None], Timer]] = []
        self._seq = itertools.count()
        self._handlers: dict[tuple[str, str], list[Handler]] = {}
        self._thread: threading.Thread | None = None
        self._ident: int | None = None
        self._stopping = False
        self.errors: list[str] = []
        self.busy_seconds = 0.0
        store.subscribe(self._on_store_event)

    # registration -----------------------------------------------------------
    def on(self, group: str, plural: str, handler: Handler) -> None:
        """Call ``handler(event_type, obj, old)`` for every change of ``group``/``plural``."""
        self._handlers.setdefault((group, plural), []).append(handler)

    def after(self, sim_seconds: float, fn: Callable[[], None]) -> Timer:
        """Run ``fn`` on the runtime thread after ``sim_seconds`` of simulated time."""
        t = Timer()
        due = self.clock.now() + max(0.0, sim_seconds)
        if sim_seconds > 0 and threading.get_ident() == self._ident:
            # on the runtime thread: straight onto the heap, so that it falls due at its
            # time and not behind the events queued meanwhile (a delay of 0 stays behind
            # them: "once what is queued now is handled")
            heapq.heappush(self._heap, (due, next(self._seq), fn, t))
        else:
            self._queue.put(("timer", due, fn, t))
        return t

    def call_soon(self, fn: Callable[[], None]) -> None:
        self._queue.put(("call", fn))

    def _on_store_event(self, ev: Event) -> None:
        if ev.rt is not None and ev.rt.key in self._handlers:
            self._queue.put(("event", ev))

    # loop ---------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="sim-runtime", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._queue.put(("stop",))
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self, fn: Callable[[], None]) -> None:
        t0 = self.clock.monotonic()
        try:
            fn()
        except Exception:  # noqa: BLE001 - a controller bug must not stop the world
            tb = traceback.format_exc()
            log.error("controller error: %s", tb)
            self.errors.append(tb)
        self.busy_seconds += self.clock.monotonic() - t0

    def _dispatch(self, item: Any) -> None:
        kind = item[0]
        if kind == "event":
            ev: Event = item[1]
            assert ev.rt is not None
            for h in self._handlers.get(ev.rt.key, ()):
                self._run(lambda h=h: h(ev.type, ev.obj, ev.old))
        elif kind == "timer":
            _, due, fn, t = item
            heapq.heappush(self._heap, (due, next(self._seq), fn, t))
        elif kind == "call":
            self._run(item[1])

    def _loop(self) -> None:
        self._ident = threading.get_ident()
        try:
            self._run_loop()
        finally:
            self.clock.free_run()

    def _run_loop(self) -> None:
        clock = self.clock
        interval = clock.tick_interval
        while not self._stopping:
            # the tick's own time, not a later reading: a timer then fires at most one lead
            # after it is due
            now = clock.tick()
            while self._heap and self._heap[0][0] <= now:
                _, _, fn, t = heapq.heappop(self._heap)
                if not t.cancelled:
                    self._run(fn)
            timeout = interval
            if self._heap:
                timeout = min(interval,
                              max(0.0, clock.sim_to_wall(self._heap[0][0] - clock.now())))
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                continue
            if item[0] == "stop":
                return
            self._dispatch(item)
            # drain whatever else is queued, but a timer that fell due goes before what is
            # left of a burst (a node's replicas failing at once must not hold back a drain's
            # poll or a pod's termination, as separate controllers would not); looked at
            # every TIMER_CHECK_EVERY steps, so that a short chain of reactions (Rancher's
            # uncordon, its next node) is not put behind every timer due meanwhile
            heap = self._heap
            for n in range(1, 1001):
                if n % TIMER_CHECK_EVERY == 0 and heap and heap[0][0] <= clock.now():
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item[0] == "stop":
                    return
                self._dispatch(item)

    def run_sync(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Run ``fn`` on the runtime thread and wait for its result (for tests / loaders)."""
        done = threading.Event()
        box: dict[str, Any] = {}

        def wrapper() -> None:
            try:
                box["v"] = fn()
            except Exception as exc:  # noqa: BLE001
                box["e"] = exc
            finally:
                done.set()

        self.call_soon(wrapper)
        if not done.wait(timeout):
            raise TimeoutError("runtime did not run the call in time")
        if "e" in box:
            raise box["e"]
        return box.get("v")
