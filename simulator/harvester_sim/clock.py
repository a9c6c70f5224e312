"""The simulation clock: the one place that knows what time it is.

Simulated time runs ``speed`` times faster than wall time. Object timestamps use real UTC
time (so ``kubectl`` ages stay sane); durations of simulated work (downloads, migrations,
reboots) are expressed in simulated seconds and converted with :meth:`Clock.sim_to_wall`.

No other module of the simulator reads the time: real UTC time through :meth:`Clock.wall_now`,
:meth:`Clock.wall_time`, :meth:`Clock.timestamp` and friends (static, for the parts that have
no clock of their own: TLS, tokens, tables), elapsed real time through
:meth:`Clock.monotonic`, simulated time through :meth:`Clock.now`.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import time

_TS_CACHE: tuple[int, str] = (-1, "")
_DATE_CACHE: tuple[int, str] = (-1, "")


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
