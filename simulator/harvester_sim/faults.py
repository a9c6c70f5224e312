"""Fault injection: named faults switched on by a scenario, asked for by controllers.

Interface used by controllers, programs and the API server:

* ``faults.match(kind, **ctx)`` returns the fault spec (a dict) when a fault of ``kind`` is
  active for this context now (its target matches ``ctx`` and its trigger has fired), else
  ``None``. One-shot faults are consumed by the match. Besides the trigger's ``probability``
  a spec may carry ``fraction`` (the share of matching calls it applies to, e.g. the API
  server's ``api_error``); both are rolled on every call.
* ``faults.notify(event, **ctx)`` tells the fault engine that something happened (e.g.
  ``migration_started`` with ``node=``), arming faults triggered "on event".
* ``faults.clear(kind, **target)`` removes faults (the operator fixed the cause): from then on
  ``match`` no longer returns them. What a fault already did stays done unless the component
  that asked for it models the fix (``planner_stuck``: the planner steps again;
  ``node_never_returns``: ``Kubelet.repair`` powers the node back on); a program that hangs
  keeps hanging until its pod is deleted, as a hung process does.

The scenario format (kind + target + trigger) is documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

from .clock import Clock

_API_KEYS = ("verb", "resource", "group", "namespace", "name", "user", "user_agent")
_DOWNLOAD_KEYS = ("version", "file")
_POD_KEYS = ("namespace", "pod", "container", "image", "node", "owner", "owner_kind", "job")
_MIGRATION_KEYS = ("vm", "name", "namespace", "node", "source", "target")

# Every fault kind and the context keys its call site passes: what ``target`` may name (the
# scenario loader rejects other keys, which would never match). The schema's enum is this.
CONTEXT_KEYS: dict[str, tuple[str, ...]] = {
    "migration_fail": _MIGRATION_KEYS,
    "migration_hang": _MIGRATION_KEYS,
    "node_never_returns": ("node",),
    "pod_fail": _POD_KEYS,
    "job_fail": _POD_KEYS,
    "job_hang": _POD_KEYS,
    "node_job_fail": ("node", "job", "pod", "plan", "program"),
    "node_job_hang": ("node", "job", "pod", "plan", "program"),
    "image_download_corrupt": _DOWNLOAD_KEYS,
    "image_download_slow": _DOWNLOAD_KEYS,
    "image_download_404": _DOWNLOAD_KEYS,
    "image_download_cut": _DOWNLOAD_KEYS,
    "api_error": _API_KEYS,
    "api_latency": _API_KEYS,
    "api_conflict": _API_KEYS,
    "watch_cut": ("verb", "resource", "group", "namespace", "user", "user_agent"),
    "volume_degraded": ("volume", "namespace", "pvc"),
    "disk_nearly_full": ("node",),
    "cert_near_expiry": ("endpoint",),
    "planner_stuck": ("node", "machine", "cluster"),
    "chart_stuck": ("chart",),
    "api_outage": ("endpoint",),
    "api_restart": ("endpoint",),
    "node_not_ready": ("node",),
    "replica_lost": ("volume", "namespace", "pvc", "node"),
}


class Faults:
    def __init__(self, clock: Clock, specs: list[dict[str, Any]] | None = None,
                 seed: int | None = None) -> None:
        self.clock = clock
        self.rng = random.Random(seed)
        self._lock = threading.Lock()
        self.specs: list[dict[str, Any]] = [dict(s) for s in specs or []]
        for s in self.specs:
            s.setdefault("_armed", "on" not in (s.get("trigger") or {}))
            s.setdefault("_fired", 0)
        self.fired: list[dict[str, Any]] = []
        self.cleared: list[dict[str, Any]] = []
        self._clear_listeners: list[Callable[[str], None]] = []

    def add(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Switch a fault on while the world runs (a test provoking an outage at a moment of
        its choosing); ``spec`` as in a scenario's ``faults:`` list. Returns the live spec."""
        s = dict(spec)
        if s.get("kind") not in CONTEXT_KEYS:
            raise ValueError(f"unknown fault kind {s.get('kind')!r}")
        bad = set(s.get("target") or {}) - set(CONTEXT_KEYS[s["kind"]])
        if bad:
            raise ValueError(f"{s['kind']} faults have no {sorted(bad)} to match")
        s.setdefault("_armed", "on" not in (s.get("trigger") or {}))
        s.setdefault("_fired", 0)
        with self._lock:
            self.specs.append(s)
        return s

    def remove(self, spec: dict[str, Any]) -> None:
        """Switch one live spec (from :meth:`add`) off; as :meth:`clear` for that spec."""
        with self._lock:
            kept = [s for s in self.specs if s is not spec]
            gone = len(kept) != len(self.specs)
            self.specs = kept
            listeners = list(self._clear_listeners) if gone else []
        for fn in listeners:
            fn(str(spec.get("kind") or ""))

    def _target_matches(self, spec: dict[str, Any], ctx: dict[str, Any]) -> bool:
        target = spec.get("target") or {}
        for k, v in target.items():
            if k not in ctx:
                return False
            if isinstance(v, list):
                if ctx[k] not in v:
                    return False
            elif str(ctx[k]) != str(v) and v != "*":
                return False
        return True

    def match(self, kind: str, when: Callable[[dict[str, Any]], bool] | None = None,
              **ctx: Any) -> dict[str, Any] | None:
        """The spec of ``kind`` that fires now for ``ctx`` (counted and recorded), else None.
        ``when(spec)``, if given, is a caller's extra condition checked before anything is
        rolled or counted (e.g. the API server's "watch open for ``seconds``")."""
        with self._lock:
            for s in self.specs:
                if s.get("kind") != kind or not self._target_matches(s, ctx):
                    continue
                if when is not None and not when(s):
                    continue
                trig = s.get("trigger") or {}
                if not s["_armed"]:
                    continue
                if "at" in trig and self.clock.now() < float(trig["at"]):
                    continue
                times = s.get("times")
                if times is not None and s["_fired"] >= int(times):
                    continue
                if "probability" in trig and self.rng.random() >= float(trig["probability"]):
                    continue
                if "fraction" in s and self.rng.random() >= float(s["fraction"]):
                    continue
                s["_fired"] += 1
                self.fired.append({"kind": kind, "t": round(self.clock.now(), 3), **{
                    k: v for k, v in ctx.items() if isinstance(v, (str, int, float))}})
                return s
        return None

    def clear(self, kind: str, **target: Any) -> int:
        """Remove the faults of ``kind`` whose ``target`` has every key/value of ``target``
        (none given: all of that kind). Returns how many were removed; each removal is
        appended to ``cleared`` (``{"kind", "t", "target"}``)."""
        with self._lock:
            gone = [s for s in self.specs if s.get("kind") == kind and all(
                str((s.get("target") or {}).get(k)) == str(v) for k, v in target.items())]
            for s in gone:
                self.specs.remove(s)
                self.cleared.append({"kind": kind, "t": round(self.clock.now(), 3),
                                     "target": dict(s.get("target") or {})})
            listeners = list(self._clear_listeners) if gone else []
        for fn in listeners:
            fn(kind)
        return len(gone)

    def on_clear(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(kind)`` after faults of ``kind`` were cleared (on the caller's thread)."""
        with self._lock:
            self._clear_listeners.append(fn)

    def present(self, kind: str) -> bool:
        """Whether a fault of ``kind`` is still configured (not cleared), armed or not."""
        with self._lock:
            return any(s.get("kind") == kind for s in self.specs)

    def active(self, kind: str) -> list[dict[str, Any]]:
        """Specs of ``kind`` (for always-on faults such as API latency)."""
        with self._lock:
            return [s for s in self.specs if s.get("kind") == kind and s["_armed"]]

    def notify(self, event: str, **ctx: Any) -> None:
        with self._lock:
            for s in self.specs:
                trig = s.get("trigger") or {}
                on = trig.get("on")
                if s["_armed"] or not on:
                    continue
                if isinstance(on, str):
                    name, cond = on, {}
                else:
                    name, cond = on.get("event"), {k: v for k, v in on.items() if k != "event"}
                if name != event:
                    continue
                if all(str(ctx.get(k)) == str(v) for k, v in cond.items()):
                    s["_armed"] = True
