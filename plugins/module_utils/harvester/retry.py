"""Retries of API calls: backoff on transient failures, and optimistic concurrency.

:func:`call_with_retry` retries 429 (honouring ``Retry-After``), 5xx and transport errors
with exponential backoff, a bounded number of times; transport errors while the run holds
the upgrade lock go on until the lock's renew deadline stops the run
(:func:`fencing.lock_bounds_retries`, docs/resilience.md). :func:`retry_on_conflict` is
client-go's ``RetryOnConflict``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    ApiError,
    ConflictsExhausted,
    message_of,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.fencing import (
    lock_bounds_retries,
)

T = TypeVar("T")
RETRIABLE = frozenset({429, 500, 502, 503, 504})
OUTAGE_RETRY_S = 1.0   # between attempts while the API server is unreachable (see below)
CONFLICT = frozenset({409})


def _retry_after(exc: Any) -> float | None:
    headers = getattr(exc, "headers", None) or {}
    try:
        value = headers.get("Retry-After") if hasattr(headers, "get") else None
        return float(value) if value else None
    except (TypeError, ValueError):
        return None


def call_with_retry(fn: Callable[[], T], attempts: int = 6, base: float = 0.5,
                    cap: float = 8.0, sleep: Callable[[float], None] = time.sleep,
                    also: frozenset[int] = frozenset()) -> T:
    """Run ``fn``; retry on 429/5xx/transport errors (and the statuses in ``also``) with
    exponential backoff.

    Non-retriable API errors are raised at once as :class:`ApiError`.
    """
    retriable = RETRIABLE | also
    delay = base
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except ApiError as exc:
            if exc.status not in retriable or attempt >= attempts:
                raise
            sleep(min(cap, delay))
            delay = min(cap, delay * 2)
        except Exception as exc:  # noqa: BLE001 - classified below
            status, reason, message = message_of(exc)
            transport = status == 0 and type(exc).__module__.startswith(
                ("urllib3", "socket", "ssl", "http"))
            transport = transport or isinstance(exc, ConnectionError | TimeoutError)
            if not (status in retriable or transport):
                raise ApiError(status, reason, message) from exc
            if attempt >= attempts:
                # the API server is unreachable (a control-plane node rebooting): go on
                # trying while the upgrade lock bounds it -- its renew deadline ends the run
                # (the fence raises LockLost in ``fn``) before the lease could expire
                if not (transport and lock_bounds_retries()):
                    raise ApiError(status, reason, message) from exc
                sleep(OUTAGE_RETRY_S)
                continue
            sleep(min(cap, _retry_after(exc) or delay))
            delay = min(cap, delay * 2)


def retry_on_conflict(attempt: Callable[[], T], attempts: int, what: str,
                      reread: Callable[[], Any] | None = None) -> T:
    """Optimistic concurrency, as client-go's ``RetryOnConflict``: ``attempt`` decides on the
    object and writes it conditionally (its resourceVersion); while the write answers 409
    Conflict, call ``reread`` (when the attempt does not read for itself) and run ``attempt``
    again, at most ``attempts`` times. Other errors propagate; when every attempt conflicted,
    :class:`ConflictsExhausted` names ``what``."""
    for tried in range(attempts):
        if tried and reread is not None:
            reread()
        try:
            return attempt()
        except ApiError as exc:
            if exc.status != 409:
                raise
    raise ConflictsExhausted(f"{what}: still conflicting after {attempts} attempts")
