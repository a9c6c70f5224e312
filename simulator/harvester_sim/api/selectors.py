"""Label and field selectors: parsing the query-string forms and matching objects.

Label selector grammar (apimachinery labels.Parse): comma-separated requirements
``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``.
Field selectors support ``=``, ``==`` and ``!=`` on the fields a resource declares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import errors

_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                     r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        has = self.key in labels
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in ("=", "in"):
            return has and labels[self.key] in self.values
        if self.op in ("!=", "notin"):
            return not has or labels[self.key] not in self.values
        return False


class LabelSelector:
    """A parsed label selector; empty matches everything."""

    def __init__(self, reqs: list[Requirement] | None = None, nothing: bool = False) -> None:
        self.reqs = reqs or []
        self.nothing = nothing

    def matches(self, labels: dict[str, str] | None) -> bool:
        if self.nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.reqs)

    @property
    def empty(self) -> bool:
        return not self.reqs and not self.nothing

    def exact(self) -> dict[str, str]:
        """key=value pairs every match must have (for index lookups)."""
        return {r.key: r.values[0] for r in self.reqs if r.op == "=" and len(r.values) == 1}


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _check_key(key: str, raw: str) -> str:
    if not _KEY_RE.match(key):
        raise errors.bad_request(f"unable to parse requirement: invalid label key \"{key}\": "
                                 f"in selector \"{raw}\"")
    return key


def _check_value(v: str, raw: str) -> str:
    if len(v) > 63 or not _VALUE_RE.match(v):
        raise errors.bad_request(f"unable to parse requirement: invalid label value: \"{v}\": "
                                 f"in selector \"{raw}\"")
    return v


def parse_label_selector(raw: str | None) -> LabelSelector:
    if raw is None or raw.strip() == "":
        return LabelSelector()
    reqs: list[Requirement] = []
    for part in _split_top(raw):
        p = part.strip()
        if not p:
            raise errors.bad_request(f"unable to parse requirement: found '', expected: identifier"
                                     f" in selector \"{raw}\"")
        m = re.fullmatch(r"(\S+)\s+(in|notin)\s*\((.*)\)", p)
        if m:
            vals = tuple(_check_value(v.strip(), raw) for v in m.group(3).split(",") if v.strip()
                         or True)
            reqs.append(Requirement(_check_key(m.group(1), raw), m.group(2), vals))
            continue
        for op in ("==", "!=", "="):
            if op in p:
                k, v = p.split(op, 1)
                reqs.append(Requirement(_check_key(k.strip(), raw), "!=" if op == "!=" else "=",
                                        (_check_value(v.strip(), raw),)))
                break
        else:
            if p.startswith("!"):
                reqs.append(Requirement(_check_key(p[1:].strip(), raw), "!"))
            else:
                reqs.append(Requirement(_check_key(p, raw), "exists"))
    return LabelSelector(reqs)


def from_label_selector_dict(sel: dict[str, Any] | None,
                             empty_matches_all: bool = True) -> LabelSelector:
    """metav1.LabelSelector (matchLabels/matchExpressions) as used in object specs."""
    if sel is None:
        return LabelSelector() if empty_matches_all else LabelSelector(nothing=True)
    reqs = [Requirement(k, "=", (str(v),)) for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}[e["operator"]]
        reqs.append(Requirement(e["key"], op, tuple(e.get("values") or ())))
    if not reqs and not empty_matches_all:
        return LabelSelector(nothing=True)
    return LabelSelector(reqs)


def from_match_labels(labels: dict[str, str] | None) -> LabelSelector:
    return LabelSelector([Requirement(k, "=", (v,)) for k, v in (labels or {}).items()])


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str


class FieldSelector:
    def __init__(self, reqs: list[FieldRequirement] | None = None) -> None:
        self.reqs = reqs or []

    @property
    def empty(self) -> bool:
        return not self.reqs

    def matches(self, obj: dict[str, Any]) -> bool:
        for r in self.reqs:
            v = field_value(obj, r.field)
            if (v == r.value) != (r.op == "="):
                return False
        return True

    def value_of(self, field: str) -> str | None:
        for r in self.reqs:
            if r.field == field and r.op == "=":
                return r.value
        return None


def field_value(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            cur = None
            break
        cur = cur.get(part)
    if cur is None:
        if path == "spec.unschedulable" or path == "spec.hostNetwork":
            return "false"
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, dict) and path == "source":
        return str(cur.get("component", ""))
    return str(cur)


def parse_field_selector(raw: str | None, allowed: Any = None) -> FieldSelector:
    """Parse ``a=b,c!=d``; ``allowed(field) -> bool`` rejects unsupported labels with 400."""
    if raw is None or raw.strip() == "":
        return FieldSelector()
    reqs = []
    for part in raw.split(","):
        p = part.strip()
        if not p:
            continue
        for op in ("==", "!=", "="):
            if op in p:
                f, v = p.split(op, 1)
                f = f.strip()
                if allowed is not None and not allowed(f):
                    raise errors.bad_request(f'field label not supported: {f}')
                reqs.append(FieldRequirement(f, "!=" if op == "!=" else "=", v.strip()))
                break
        else:
            raise errors.bad_request(f"invalid selector: '{raw}'; can't understand '{p}'")
    return FieldSelector(reqs)
