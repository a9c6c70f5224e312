"""The errors the collection's API plumbing raises.

:class:`ApiError` is every failed API call (``status`` 0 for a transport failure);
:class:`NotServed` a kind the cluster does not serve; :class:`ConflictsExhausted` a write
that kept answering 409. :class:`NodeLoopError` is a step that cannot go on, with the text a
person should read; the waits' timeout (:class:`waiting.WaitTimeout`) and the plan writer's
errors (:class:`plan_writer.PlanError`) are kinds of it, so a step that catches it covers them.
"""

from __future__ import annotations

import json
from typing import Any

PATH_NOT_FOUND = "the server could not find the requested resource"


class ApiError(Exception):
    """An API call failed; ``status`` is the HTTP status (0 for transport errors)."""

    def __init__(self, status: int, reason: str, message: str = "") -> None:
        self.status, self.reason, self.message = status, reason, message or reason
        super().__init__(self.message)


class NotServed(ApiError):
    """The cluster does not serve this apiVersion/kind (CRD not installed)."""


class ConflictsExhausted(ApiError):
    """:func:`retry.retry_on_conflict` saw a 409 Conflict on every attempt (an
    :class:`ApiError` with status 409, so callers that handle the API's 409 handle this
    too)."""

    def __init__(self, message: str) -> None:
        super().__init__(409, "Conflict", message)


class NodeLoopError(Exception):
    """A step cannot go on; ``message`` is what a person should read."""


def unserved_path(exc: ApiError) -> bool:
    """The apiserver's 404 for a path it does not serve (an object that does not exist
    names itself in its 404 instead)."""
    return exc.status == 404 and exc.message.startswith(PATH_NOT_FOUND)


def message_of(exc: Any) -> tuple[int, str, str]:
    """``(status, reason, message)`` of a kubernetes client exception (the message from
    the Status body when there is one)."""
    status = int(getattr(exc, "status", 0) or 0)
    reason = str(getattr(exc, "reason", "") or type(exc).__name__)
    body = getattr(exc, "body", None)
    message = ""
    if body:
        try:
            data = json.loads(body if isinstance(body, str | bytes) else str(body))
            message = str(data.get("message") or "")
        except (ValueError, AttributeError):
            message = str(body)[:500]
    return status, reason, message or str(exc)[:500]
