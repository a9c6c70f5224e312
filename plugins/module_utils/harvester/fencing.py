"""The upgrade lock's fence over every API request a module makes.

``lock.hold`` installs a check (:func:`set_fence`) that the client calls before each request
(:func:`fence`); it raises (an ApiError naming the lock) once the run may no longer hold the
lock, so a run that lost it sends nothing more. The lock's own requests pass
(:class:`unfenced`). While requests are fenced, the lock's renew deadline bounds how long an
unreachable API server is retried (:func:`lock_bounds_retries`, docs/resilience.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_fence: Callable[[], None] | None = None
_unfenced = threading.local()


def set_fence(check: Callable[[], None] | None) -> None:
    global _fence
    _fence = check


class unfenced:  # noqa: N801 - used as a context manager
    """Requests made inside are not fenced (the lock's own requests); ``guard``, if given, is
    called before each of them instead (the renewal stops retrying once it is too late)."""

    def __init__(self, guard: Callable[[], None] | None = None) -> None:
        self.guard = guard

    def __enter__(self) -> None:
        stack = getattr(_unfenced, "stack", None)
        if stack is None:
            stack = _unfenced.stack = []
        stack.append(self.guard)

    def __exit__(self, *_exc: Any) -> None:
        _unfenced.stack.pop()


def lock_bounds_retries() -> bool:
    """Requests made now are fenced by the upgrade lock (this run holds it, or this is the
    lock's own renewal with its deadline guard): the renew deadline bounds how long they may
    be retried."""
    stack = getattr(_unfenced, "stack", None)
    if stack:
        return stack[-1] is not None
    return _fence is not None


def fence() -> None:
    stack = getattr(_unfenced, "stack", None)
    if stack:
        guard = stack[-1]
        if guard is not None:
            guard()
        return
    check = _fence
    if check is not None:
        check()
