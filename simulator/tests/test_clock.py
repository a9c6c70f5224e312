"""The simulated clock is held while the runtime thread stalls (harvester_sim/clock.py).

The runtime tests block the runtime thread on purpose and check bounds that hold on any
machine, however loaded: the hold caps simulated time exactly (no wall-clock margins), and
the blocks are long enough that the unheld clock would be far past every bound.
"""

from __future__ import annotations

import threading
import time
import types
from typing import Any

import pytest

from harvester_sim import clock as clock_module
from harvester_sim.api.resources import Registry
from harvester_sim.api.store import Store
from harvester_sim.clock import Clock
from harvester_sim.controllers.runtime import Runtime


class _Wall:
    """A settable ``time.monotonic`` for the clock module."""

    def __init__(self, t: float) -> None:
        self.t = t

    def monotonic(self) -> float:
        return self.t


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> _Wall:
    w = _Wall(100.0)
    monkeypatch.setattr(clock_module, "time", types.SimpleNamespace(monotonic=w.monotonic))
    return w


def test_clock_holds_past_the_cap_and_resumes_without_a_jump(wall: _Wall) -> None:
    c = Clock(10.0, lead=1.0)
    wall.t = 105.0
    assert c.now() == pytest.approx(50.0)          # no tick yet: not capped
    c.tick()                                         # the runtime ran at 5 s
    wall.t = 105.5
    assert c.now() == pytest.approx(55.0)          # within the lead
    wall.t = 106.5
    assert c.now() == pytest.approx(60.0)          # held at the cap (5 s + 1 s lead)
    wall.t = 109.0
    assert c.now() == pytest.approx(60.0)
    c.tick()                                         # the runtime is back: 3 s held
    assert c.now() == pytest.approx(60.0)          # no jump
    wall.t = 109.5
    assert c.now() == pytest.approx(65.0)          # runs on from the cap
    c.tick()
    wall.t = 112.5
    c.tick()                                         # a second hold, of 2 s
    assert c.now() == pytest.approx(75.0)
    assert c.hold_stats() == {"clock_held_s": 5.0, "clock_longest_hold_s": 3.0,
                              "clock_holds": 2}
    assert c.wall_elapsed() == pytest.approx(12.5)  # wall time is not held
    assert c.run_elapsed() == pytest.approx(7.5)
    c.free_run()                                     # the runtime stopped
    wall.t = 122.5
    assert c.now() == pytest.approx(175.0)


def test_clock_never_goes_backwards_across_ticks(wall: _Wall) -> None:
    c = Clock(300.0, lead=0.1)
    c.tick()
    seen = [c.now()]
    # irregular ticks and reads, with stalls of every size
    for step, tick in [(0.05, True), (0.3, False), (0.01, True), (1.19, True), (0.0, True),
                       (0.099, False), (0.002, True), (2.5, False), (0.001, True)]:
        wall.t += step
        seen.append(c.now())
        if tick:
            c.tick()
            seen.append(c.now())
    assert seen == sorted(seen)
    assert seen[-1] - seen[0] <= (sum([0.05, 0.3, 0.01, 1.19, 0.0, 0.099, 0.002, 2.5,
                                       0.001]) + 0.1) * 300.0


def test_clock_is_monotonic_across_threads_while_it_ticks_and_holds() -> None:
    """Readers on several threads, serialised by a lock (so the log is in real-time order),
    while another thread ticks irregularly, with pauses longer than the lead (holds)."""
    c = Clock(300.0, lead=0.01)
    log: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            with lock:
                log.append(c.now())
            time.sleep(0.0002)

    def ticker() -> None:
        pauses = [0.001, 0.03, 0.0, 0.004, 0.05, 0.002, 0.02]
        i = 0
        while not stop.is_set():
            c.tick()
            time.sleep(pauses[i % len(pauses)])
            i += 1

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(3)]
    threads.append(threading.Thread(target=ticker, daemon=True))
    for t in threads:
        t.start()
    time.sleep(0.6)
    stop.set()
    for t in threads:
        t.join(5)
    assert len(log) > 100
    assert log == sorted(log)
    assert c.holds > 0


def test_clock_rejects_a_bad_lead() -> None:
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="lead"):
            Clock(1.0, lead=bad)


def test_sleep_until_follows_simulated_time() -> None:
    c = Clock(1000.0)
    stop = threading.Event()
    start = c.now()
    assert c.sleep_until(start + 20.0, stop) is False
    assert c.now() >= start + 20.0
    stop.set()
    assert c.sleep_until(c.now() + 1e9, stop) is True


# ------------------------------------------------------------------ with the runtime
SPEED = 1000.0
LEAD = 0.05                 # wall s: the clock may run LEAD * SPEED = 50 simulated s ahead
BLOCK_S = 0.6               # wall s the handler blocks: 600 simulated s on an unheld clock


@pytest.fixture
def runtime() -> Any:
    c = Clock(SPEED, lead=LEAD)
    rt = Runtime(Store(Registry(), c), c)
    rt.start()
    yield rt
    rt.stop()


def test_a_stalled_runtime_holds_the_clock(runtime: Runtime) -> None:
    clock = runtime.clock
    ahead = LEAD * SPEED
    blocking = threading.Event()
    stop_reading = threading.Event()
    samples: list[float] = []
    in_block: list[float] = []
    box: dict[str, float] = {}
    fired = threading.Event()

    def reader() -> None:
        while not stop_reading.is_set():
            before = blocking.is_set()
            v = clock.now()
            if before and blocking.is_set():
                in_block.append(v)
            samples.append(v)
            time.sleep(0.001)

    def on_timer() -> None:
        box["fired"] = clock.now()
        fired.set()

    def stall() -> None:
        box["s0"] = clock.now()
        runtime.after(200.0, on_timer)
        blocking.set()
        t_end = time.monotonic() + BLOCK_S
        give_up = t_end + 10.0
        # long enough for the other thread to read the clock during the block
        while time.monotonic() < t_end or (len(in_block) < 20 and time.monotonic() < give_up):
            time.sleep(0.01)
        blocking.clear()
        box["s1"] = clock.now()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        runtime.run_sync(stall, timeout=60)
        assert fired.wait(30), "the timer did not fire"
    finally:
        stop_reading.set()
        t.join(5)
    s0 = box["s0"]
    eps = 1e-6
    # held: the whole block moved simulated time by at most the lead
    assert box["s1"] - s0 <= ahead + eps
    assert len(in_block) >= 20
    assert max(in_block) <= s0 + ahead + eps
    # monotonic for the other thread, across the hold and its release
    assert samples == sorted(samples)
    # the timer kept its simulated delay: due at s0 + 200 or up to `ahead` later (the
    # reading in `after` may be later than s0), fired at the first tick at or past that
    # (at most one lead late), and read the clock before the next cap
    assert 200.0 <= box["fired"] - s0 <= 200.0 + 3 * ahead + eps
    stats = clock.hold_stats()
    assert stats["clock_holds"] >= 1
    assert stats["clock_held_s"] >= BLOCK_S - 2 * LEAD
    assert stats["clock_longest_hold_s"] >= BLOCK_S - 2 * LEAD


def test_an_idle_runtime_keeps_the_clock_running(runtime: Runtime) -> None:
    clock = runtime.clock
    start = clock.now()
    deadline = time.monotonic() + 30.0
    # far past one lead: only a runtime that keeps ticking while idle gets there
    while clock.now() < start + 20 * LEAD * SPEED:
        assert time.monotonic() < deadline, "simulated time stopped on an idle runtime"
        time.sleep(0.02)


def test_stopping_the_runtime_frees_the_clock() -> None:
    c = Clock(SPEED, lead=LEAD)
    rt = Runtime(Store(Registry(), c), c)
    rt.start()
    rt.run_sync(lambda: None)
    rt.stop()
    start = c.now()
    deadline = time.monotonic() + 30.0
    while c.now() < start + 20 * LEAD * SPEED:
        assert time.monotonic() < deadline, "simulated time stopped with the runtime"
        time.sleep(0.02)


@pytest.mark.parametrize("timer_first", [True, False], ids=["timer-then-events",
                                                            "events-then-timer"])
def test_a_timer_that_falls_due_runs_before_the_events_still_queued(timer_first: bool) -> None:
    """A burst of queued steps (a node's replicas failing at once) does not hold back a timer
    that falls due meanwhile (a drain's poll), whether it was set before or after the burst
    was queued."""
    c = Clock(1000.0, lead=1.0)
    rt = Runtime(Store(Registry(), c), c)
    rt.start()
    order: list[str] = []

    def busy(i: int) -> None:
        end = time.monotonic() + 0.0005
        while time.monotonic() < end:
            pass
        order.append(f"step {i}")

    def burst() -> None:
        if timer_first:
            rt.after(5.0, lambda: order.append("timer"))   # due 5 ms of wall time later
        for i in range(200):                                # ~100 ms of queued work
            rt.call_soon(lambda i=i: busy(i))
        if not timer_first:
            rt.after(5.0, lambda: order.append("timer"))

    try:
        rt.run_sync(burst)
        rt.run_sync(lambda: None, timeout=30)
        deadline = time.monotonic() + 30
        while "timer" not in order and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        rt.stop()
    assert "timer" in order
    assert order.index("timer") < 150, order.index("timer")
