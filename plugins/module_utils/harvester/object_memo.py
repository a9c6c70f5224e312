"""What a function finds in an API object, remembered per object version.

The capacity plan looks at every Pod of the cluster at each node's evacuation
(evacuation.node_view), and between two looks only the pods that changed differ: an
object's ``metadata.uid`` and ``resourceVersion`` name one version of it (a write gives it a
new resourceVersion), so what was found in that version holds until it changes. Objects
without both (a client's own bodies, test fixtures) are looked at every time. It pays only
for work dearer than the lookup: the Longhorn check's facts of a Replica are not (measured,
docs/performance.md round ten).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# entries kept before the memo starts again (each a key and a small value; a hundred-node
# cluster has ~3,200 Pods, each changing a few times over the upgrade)
LIMIT = 100_000


class ObjectMemo(Generic[T]):
    """``memo(obj)`` = ``fn(obj)``, computed once per object version."""

    def __init__(self, fn: Callable[[dict[str, Any]], T], limit: int = LIMIT) -> None:
        self._fn = fn
        self._limit = limit
        self._memo: dict[tuple[str, str], T] = {}

    def __call__(self, obj: dict[str, Any]) -> T:
        md = obj.get("metadata") or {}
        uid, rv = md.get("uid"), md.get("resourceVersion")
        if not uid or not rv:
            return self._fn(obj)
        key = (uid, rv)
        try:
            return self._memo[key]
        except KeyError:
            pass
        value = self._fn(obj)
        if len(self._memo) >= self._limit:
            self._memo.clear()
        self._memo[key] = value
        return value
