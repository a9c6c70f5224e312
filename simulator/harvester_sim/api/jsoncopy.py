"""A deep copy specialised for JSON-shaped data (dicts, lists and immutable scalars).

API objects are JSON documents: ``copy.deepcopy``'s generality (memo dict, ``__deepcopy__``
lookups, reductors) costs about twice the time of this copier, and copying is what the store
does most. Scalars (str, int, float, bool, None) are immutable and shared; anything else
(tuples, datetimes from YAML, ...) falls back to ``copy.deepcopy``.
"""

from __future__ import annotations

import copy
from typing import TypeVar

T = TypeVar("T")

_str, _int, _float, _bool, _dict, _list = str, int, float, bool, dict, list


def json_copy(o: T) -> T:
    """A deep copy of ``o``: new dicts and lists, shared immutable scalars."""
    t = type(o)
    if t is _dict:
        return {k: v if ((tv := type(v)) is _str or tv is _int or v is None or tv is _bool
                         or tv is _float) else json_copy(v)
                for k, v in o.items()}  # type: ignore[attr-defined, return-value]
    if t is _list:
        return [v if ((tv := type(v)) is _str or tv is _int or v is None or tv is _bool
                      or tv is _float) else json_copy(v)
                for v in o]  # type: ignore[attr-defined, return-value]
    if t is _str or t is _int or o is None or t is _bool or t is _float:
        return o
    return copy.deepcopy(o)


__all__ = ["json_copy"]
