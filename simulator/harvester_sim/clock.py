"""The simulation clock: the one place that knows what time it is.

Simulated time runs ``speed`` times faster than wall time. Object timestamps use real UTC
time (so ``kubectl`` ages stay sane); durations of simulated work (downloads, migrations,
reboots) are expressed in simulated seconds and converted with :meth:`Clock.sim_to_wall`.
"""

from __future__ import annotations

import datetime as _dt
import time

_TS_CACHE: tuple[int, str] = (-1, "")


class Clock:
    """Monotonic simulated clock scaled by ``speed``."""

    def __init__(self, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.speed = float(speed)
        self._t0 = time.monotonic()

    def now(self) -> float:
        """Simulated seconds since the simulation started."""
        return (time.monotonic() - self._t0) * self.speed

    def wall_elapsed(self) -> float:
        """Real seconds since the simulation started."""
        return time.monotonic() - self._t0

    def sim_to_wall(self, seconds: float) -> float:
        """Real seconds that ``seconds`` of simulated time take."""
        return seconds / self.speed

    def wall_to_sim_deadline(self, sim_time: float) -> float:
        """The ``time.monotonic()`` value at which simulated time reaches ``sim_time``."""
        return self._t0 + sim_time / self.speed

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    @staticmethod
    def wall_now() -> _dt.datetime:
        """Real UTC time, for object timestamps."""
        return _dt.datetime.now(_dt.timezone.utc)

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
