"""The timeline: timestamped significant events, recorded by controllers for the report.

``record(kind, **data)`` stores simulated and wall time; ``spans`` are durations of
unavoidable simulated work (downloads, pulls, migrations, jobs, reboots) that the report
uses to compute the critical path.
"""

from __future__ import annotations

import threading
from typing import Any

from .clock import Clock


class Timeline:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self.counters: dict[str, int] = {}

    def record(self, kind: str, **data: Any) -> None:
        entry = {"t": round(self.clock.now(), 3), "wall": round(self.clock.wall_elapsed(), 3),
                 "event": kind}
        entry.update(data)
        with self._lock:
            self.events.append(entry)

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + n

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)
