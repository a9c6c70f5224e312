"""The simulation clock: the one place that knows what time it is.

Simulated time runs ``speed`` times faster than wall time. Object timestamps use real UTC
time (so ``kubectl`` ages stay sane); durations of simulated work (downloads, migrations,
reboots) are expressed in simulated seconds and converted with :meth:`Clock.sim_to_wall`.

No other module of the simulator reads the time: real UTC time through :meth:`Clock.wall_now`,
:meth:`Clock.wall_time`, :meth:`Clock.timestamp` and friends (static, for the parts that have
no clock of their own: TLS, tokens, tables), elapsed real time through
:meth:`Clock.monotonic`, simulated time through :meth:`Clock.now`.

Held time. Every simulated controller runs on one runtime thread
(``controllers/runtime.py``); when that thread stalls (a long handler, a garbage collection
of a large heap, the GIL held by API threads), the work it owes (a migration that completes,
a timer that fires) cannot happen, so simulated time must not run on without it: at speed
300 a 1.2 s stall would otherwise be 360 simulated seconds in which nothing happened, and
an observer would see a migration "hang". The runtime calls :meth:`Clock.tick` on every
loop iteration (at least every ``lead / 2`` wall seconds when idle); a tick lets simulated
time run at most ``lead`` wall seconds ahead of it. Past that cap the clock stands still
until the next tick, which adds the excess wall time to the held total, so simulated time
continues from the cap: it never jumps and never goes backwards, for any reader on any
thread. Until the first tick (a clock with no runtime) and after :meth:`Clock.free_run`
the clock is not capped. Any timer, whatever the load, fires at most ``lead * speed``
simulated seconds after it is due.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import math
import threading
import time

_TS_CACHE: tuple[int, str] = (-1, "")
_DATE_CACHE: tuple[int, str] = (-1, "")


DEFAULT_LEAD_S = 0.1


class Clock:
    """Monotonic simulated clock scaled by ``speed``, held while the runtime stalls.

    ``lead``: how many wall seconds simulated time may run ahead of the runtime's last
    :meth:`tick` (so at most ``lead * speed`` simulated seconds)."""

    def __init__(self, speed: float = 1.0, lead: float = DEFAULT_LEAD_S) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        if not lead > 0 or math.isinf(lead):
            raise ValueError("lead must be a finite number of seconds > 0")
        self.speed = float(speed)
        self.lead = float(lead)
        self._t0 = time.monotonic()
        # (base, floor, cap), published as one tuple so that a reader on any thread sees a
        # consistent triple without a lock: the simulation has run
        # min(max(monotonic() - base, floor), cap) wall seconds. base = t0 + held time;
        # floor (the last tick's value) absorbs float rounding when base moves.
        self._state: tuple[float, float, float] = (self._t0, 0.0, math.inf)
        # written by the ticking thread only
        self.held_s = 0.0
        self.longest_hold_s = 0.0
        self.holds = 0

    def now(self) -> float:
        """Simulated seconds since the simulation started."""
        # the state before the time: a tick reads the time before it publishes, so a reader
        # that sees a new state also reads a time at or after that tick's
        base, floor, cap = self._state
        t = time.monotonic() - base
        if t > cap:
            t = cap
        elif t < floor:
            t = floor
        return t * self.speed

    def run_elapsed(self) -> float:
        """Wall seconds the simulation has run, held time excluded (``now() / speed``): the
        time base for pacing real I/O that stands for simulated work."""
        return self.now() / self.speed

    def wall_elapsed(self) -> float:
        """Real seconds since the simulation started."""
        return time.monotonic() - self._t0

    def sim_to_wall(self, seconds: float) -> float:
        """Real seconds that ``seconds`` of simulated time take (while not held)."""
        return seconds / self.speed

    @property
    def tick_interval(self) -> float:
        """The longest wall time the ticking thread may wait between two ticks."""
        return self.lead / 2

    def tick(self) -> float:
        """The runtime is alive: let simulated time run up to ``lead`` past now. Wall time
        spent past the previous cap is added to the held time. One thread ticks. Returns
        simulated time at the tick."""
        m = time.monotonic()
        base, floor, cap = self._state
        t = m - base
        if t > cap:
            hold = t - cap
            base = m - cap
            t = cap
            self.held_s += hold
            self.holds += 1
            if hold > self.longest_hold_s:
                self.longest_hold_s = hold
        elif t < floor:
            t = floor
        self._state = (base, t, t + self.lead)
        return t * self.speed

    def free_run(self) -> None:
        """No more ticks (the runtime stopped): simulated time runs on from where it is,
        uncapped. Called by the ticking thread."""
        self.tick()
        base, floor, _ = self._state
        self._state = (base, floor, math.inf)

    def sleep_until(self, sim_time: float, stop: threading.Event,
                    poll: float = 0.05) -> bool:
        """Block until simulated time reaches ``sim_time`` (held time does not count);
        True if ``stop`` was set first. Waits at most ``poll`` wall seconds at a time."""
        while not stop.is_set():
            left = sim_time - self.now()
            if left <= 0:
                return False
            stop.wait(min(self.sim_to_wall(left), poll))
        return True

    def hold_stats(self) -> dict[str, float | int]:
        """Wall seconds the clock was held in total and the longest single hold (as of
        the last tick), and how many holds there were."""
        return {"clock_held_s": round(self.held_s, 3),
                "clock_longest_hold_s": round(self.longest_hold_s, 3),
                "clock_holds": self.holds}

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    @staticmethod
    def wall_now() -> _dt.datetime:
        """Real UTC time, for object timestamps."""
        return _dt.datetime.now(_dt.timezone.utc)

    @staticmethod
    def wall_time() -> float:
        """Real UTC time as seconds since the epoch (request and token times)."""
        return time.time()

    @staticmethod
    def rfc3339(ts: float) -> str:
        """Epoch seconds ``ts`` as an RFC 3339 timestamp with second precision."""
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))

    @staticmethod
    def rfc3339_micro(ts: float) -> str:
        """Epoch seconds ``ts`` as an RFC 3339 timestamp with microseconds."""
        return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")

    @staticmethod
    def http_date() -> str:
        """The current time as an HTTP ``Date`` header value (RFC 7231)."""
        global _DATE_CACHE
        sec = int(time.time())
        cached = _DATE_CACHE
        if cached[0] != sec:
            cached = (sec, email.utils.formatdate(sec, usegmt=True))
            _DATE_CACHE = cached
        return cached[1]

    @staticmethod
    def timestamp() -> str:
        """RFC 3339 timestamp with second precision (metav1.Time)."""
        global _TS_CACHE
        sec = int(time.time())
        cached = _TS_CACHE  # (second, text): one atomic read; formatting is costly
        if cached[0] != sec:
            cached = (sec, _dt.datetime.fromtimestamp(sec, _dt.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ"))
            _TS_CACHE = cached
        return cached[1]

    @staticmethod
    def micro_timestamp() -> str:
        """RFC 3339 timestamp with microseconds (metav1.MicroTime)."""
        return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
