"""Field ownership (``metadata.managedFields``) and server-side apply.

A simplified structured-merge-diff: a field is a path of map keys and every list is atomic
(owned whole). Each write records, for its manager, the fields whose value it changed
(operation ``Update``); an apply (``application/apply-patch+yaml``) makes its manager own
exactly the fields of the applied configuration (operation ``Apply``), removes the fields it
owned before and no longer applies (unless someone else owns them), and fails with 409
``Apply failed with N conflict(s)`` when it would change a field another manager owns,
unless ``force=true`` (then ownership moves to the applier).
"""

from __future__ import annotations

import json
from typing import Any

from ..clock import Clock
from . import errors
from .jsoncopy import json_copy
from .resources import ResourceType

Obj = dict[str, Any]
FPath = tuple[str, ...]

_SYSTEM_META = {"name", "namespace", "uid", "resourceVersion", "generation",
                "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                "managedFields", "selfLink", "generateName"}


def _now() -> str:
    return Clock.timestamp()


def leaves(obj: Any, prefix: FPath = ()) -> dict[FPath, Any]:
    """Leaf paths -> values; lists and empty maps are leaves."""
    out: dict[FPath, Any] = {}
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            if isinstance(v, dict) and v:
                out.update(leaves(v, prefix + (k,)))
            else:
                out[prefix + (k,)] = v
    elif prefix:
        out[prefix] = obj
    return out


def content_leaves(rt: ResourceType, obj: Obj, subresource: str | None) -> dict[FPath, Any]:
    """The fields a manager can own in ``obj`` (system metadata excluded)."""
    out: dict[FPath, Any] = {}
    for k, v in obj.items():
        if k in ("apiVersion", "kind"):
            continue
        if subresource == "status":
            if k != "status":
                continue
        elif k == "status" and rt.has_status:
            continue
        if k == "metadata":
            if isinstance(v, dict):
                for mk, mv in v.items():
                    if mk in _SYSTEM_META:
                        continue
                    if isinstance(mv, dict) and mv:
                        out.update(leaves(mv, ("metadata", mk)))
                    else:
                        out[("metadata", mk)] = mv
            continue
        if isinstance(v, dict) and v:
            out.update(leaves(v, (k,)))
        else:
            out[(k,)] = v
    return out


def to_fields_v1(paths: set[FPath]) -> Obj:
    root: Obj = {}
    for p in sorted(paths):
        cur = root
        for part in p:
            cur = cur.setdefault(f"f:{part}", {})
    return root


def from_fields_v1(fields: Any, prefix: FPath = ()) -> set[FPath]:
    out: set[FPath] = set()
    if not isinstance(fields, dict) or not fields:
        if prefix:
            out.add(prefix)
        return out
    sub = False
    for k, v in fields.items():
        if k.startswith("f:"):
            sub = True
            out |= from_fields_v1(v, prefix + (k[2:],))
        elif k.startswith(("k:", "v:", "i:")):
            # an element of an associative list: we own lists whole
            if prefix:
                out.add(prefix)
            sub = True
    if not sub and prefix:
        out.add(prefix)
    return out


def _overlap(a: FPath, b: FPath) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _get_path(obj: Any, path: FPath) -> tuple[bool, Any]:
    cur = obj
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return False, None
        cur = cur[p]
    return True, cur


def _set_path(obj: Obj, path: FPath, value: Any) -> None:
    cur = obj
    for p in path[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[p] = nxt
        cur = nxt
    cur[path[-1]] = json_copy(value)


def _del_path(obj: Obj, path: FPath) -> None:
    chain = [obj]
    cur: Any = obj
    for p in path[:-1]:
        if not isinstance(cur, dict) or p not in cur:
            return
        cur = cur[p]
        chain.append(cur)
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
    # drop maps emptied by the removal (but never top-level sections)
    for i in range(len(path) - 1, 1, -1):
        parent, key = chain[i - 1], path[i - 1]
        if isinstance(parent.get(key), dict) and not parent[key]:
            del parent[key]
        else:
            break


class _Entry:
    __slots__ = ("manager", "operation", "api_version", "time", "subresource", "fields", "raw")

    def __init__(self, raw: Obj) -> None:
        self.raw = raw
        self.manager = str(raw.get("manager", ""))
        self.operation = str(raw.get("operation", "Update"))
        self.api_version = str(raw.get("apiVersion", ""))
        self.time = raw.get("time")
        self.subresource = raw.get("subresource") or None
        self.fields = from_fields_v1(raw.get("fieldsV1") or {})

    def key(self) -> tuple[str, str, str | None]:
        return (self.manager, self.operation, self.subresource)

    def dump(self) -> Obj:
        out: Obj = {"manager": self.manager, "operation": self.operation,
                    "apiVersion": self.api_version, "time": self.time,
                    "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(self.fields)}
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def _entries(obj: Obj) -> list[_Entry]:
    return [_Entry(e) for e in (obj.get("metadata") or {}).get("managedFields") or []
            if isinstance(e, dict)]


def _store_entries(obj: Obj, entries: list[_Entry]) -> None:
    kept = [e for e in entries if e.fields]
    md = obj.setdefault("metadata", {})
    if kept:
        md["managedFields"] = [e.dump() for e in kept]
    else:
        md.pop("managedFields", None)


class ManagedFields:
    """Keeps ``metadata.managedFields`` current on every write that goes through the server."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled

    def on_create(self, rt: ResourceType, obj: Obj, manager: str, operation: str,
                  subresource: str | None = None) -> None:
        if not self.enabled:
            return
        fields = set(content_leaves(rt, obj, subresource))
        if not fields:
            return
        e = _Entry({"manager": manager, "operation": operation, "apiVersion": rt.api_version,
                    "time": _now()})
        e.fields = fields
        obj.setdefault("metadata", {})["managedFields"] = [e.dump()]

    def on_update(self, rt: ResourceType, old: Obj, new: Obj, manager: str,
                  subresource: str | None) -> None:
        """Record ``manager`` (operation Update) as owner of the fields it changed."""
        if not self.enabled:
            return
        old_mf = (old.get("metadata") or {}).get("managedFields")
        new_md = new.setdefault("metadata", {})
        base = new if "managedFields" in new_md and new_md["managedFields"] != old_mf else old
        before = content_leaves(rt, old, subresource)
        after = content_leaves(rt, new, subresource)
        changed = {p for p in set(before) | set(after) if before.get(p, _MISSING) !=
                   after.get(p, _MISSING)}
        entries = _entries(base)
        if changed:
            live = set(content_leaves(rt, new, None)) | set(content_leaves(rt, new, "status"))
            mine = None
            for e in entries:
                if e.key() == (manager, "Update", subresource):
                    mine = e
                    continue
                e.fields = {f for f in e.fields
                            if not any(_overlap(f, c) for c in changed) and
                            any(_overlap(f, lv) for lv in live)}
            if mine is None:
                mine = _Entry({"manager": manager, "operation": "Update",
                               "apiVersion": rt.api_version, "subresource": subresource})
                entries.append(mine)
            mine.fields = ({f for f in mine.fields if f in after or
                            any(_overlap(f, a) for a in after)} |
                           {c for c in changed if c in after})
            mine.time = _now()
        _store_entries(new, entries)
        if new_md.get("managedFields") is None and old_mf is None:
            new_md.pop("managedFields", None)


class _Missing:
    pass


_MISSING = _Missing()


def _conflict_error(rt: ResourceType, name: str,
                    conflicts: list[tuple[_Entry, FPath]]) -> errors.ApiError:
    def fp(p: FPath) -> str:
        return "".join(f".{x}" for x in p)

    causes = [{"reason": "FieldManagerConflict",
               "message": f'conflict with "{e.manager}"'
                          + (f' using {e.api_version}' if e.operation == "Update" else ""),
               "field": fp(p)} for e, p in conflicts]
    n = len(conflicts)
    managers = sorted({e.manager for e, _ in conflicts})
    if n == 1:
        e, p = conflicts[0]
        text = (f'Apply failed with 1 conflict: conflict with "{e.manager}"'
                + (f" using {e.api_version}" if e.operation == "Update" else "") + f": {fp(p)}")
    else:
        lines = []
        for m in managers:
            ps = [p for e, p in conflicts if e.manager == m]
            e0 = next(e for e, _ in conflicts if e.manager == m)
            using = f" using {e0.api_version}" if e0.operation == "Update" else ""
            lines.append(f'conflicts with "{m}"{using}:\n' +
                         "\n".join(f"- {fp(p)}" for p in ps))
        text = f"Apply failed with {n} conflicts: " + "\n".join(lines)
    det: Obj = {"name": name, "kind": rt.plural, "causes": causes}
    if rt.group:
        det["group"] = rt.group
    return errors.ApiError(409, "Conflict", text, det)


def server_side_apply(store: Any, managed: ManagedFields, rt: ResourceType,
                      namespace: str | None, name: str, config: Any, manager: str,
                      force: bool, subresource: str | None, dry_run: bool,
                      validation: str = "Strict") -> tuple[Obj, bool]:
    """Apply ``config`` as ``manager``; returns (object, created)."""
    if not isinstance(config, dict):
        raise errors.bad_request("the body of the apply patch must be an object")
    av, kind = config.get("apiVersion"), config.get("kind")
    if not av or not kind:
        raise errors.bad_request("invalid object type: " + json.dumps(
            {"apiVersion": av or "", "kind": kind or ""}))
    if av != rt.api_version or kind != rt.kind:
        raise errors.bad_request(
            f"the API version in the data ({av}) does not match the expected API version "
            f"({rt.api_version})" if av != rt.api_version else
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
    config = json_copy(config)
    md = config.get("metadata")
    if not isinstance(md, dict):
        md = config["metadata"] = {}
    if md.get("name") and md["name"] != name:
        raise errors.bad_request(f"the name of the object ({md['name']}) does not match the "
                                 f"name on the URL ({name})")
    md["name"] = name
    if rt.namespaced:
        if md.get("namespace") and md["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
        md["namespace"] = namespace
    md.pop("managedFields", None)
    if rt.custom and rt.schema is not None:
        from .strategies import prune_unknown

        unknown = prune_unknown(config, rt.schema)
        if unknown and validation == "Strict":
            raise errors.bad_request("strict decoding error: " + ", ".join(
                f'unknown field "{u}"' for u in unknown))
    rv_pre = md.pop("resourceVersion", None)
    applied = content_leaves(rt, config, subresource)

    if store.get_ref(rt, namespace, name) is None:
        if subresource is not None:
            raise errors.not_found(rt.plural, rt.group, name)
        e = _Entry({"manager": manager, "operation": "Apply", "apiVersion": rt.api_version,
                    "time": _now()})
        e.fields = set(applied)
        if managed.enabled and e.fields:
            md["managedFields"] = [e.dump()]
        return store.create(rt, config, namespace, dry_run=dry_run), True

    def fn(cur: Obj) -> Obj:
        if rv_pre and rv_pre != cur["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, name)
        entries = _entries(cur)
        mine = next((e for e in entries if e.key() == (manager, "Apply", subresource)), None)
        conflicts: list[tuple[_Entry, FPath]] = []
        for p, v in applied.items():
            if v == {}:
                continue  # an empty map claims the map, not the fields inside it
            present, live_v = _get_path(cur, p)
            if present and live_v == v:
                continue
            for e in entries:
                if e.manager == manager:
                    continue
                hit = next((f for f in e.fields if _overlap(f, p)), None)
                if hit is not None:
                    conflicts.append((e, p))
        if conflicts and not force:
            raise _conflict_error(rt, name, conflicts)
        result = json_copy(cur)
        if mine is not None:
            others = [e for e in entries if e is not mine]
            for f in mine.fields:
                if any(_overlap(f, a) for a, v in applied.items() if v != {}) or f in applied:
                    continue
                if any(f in e.fields for e in others):
                    continue
                _del_path(result, f)
        for p, v in applied.items():
            if v == {}:
                present, live_v = _get_path(result, p)
                if present and isinstance(live_v, dict):
                    continue
            _set_path(result, p, v)
        changed = result != cur
        conflict_paths = {p for _, p in conflicts}
        for e in entries:
            if e is not mine and conflict_paths:
                e.fields = {f for f in e.fields
                            if not any(_overlap(f, c) for c in conflict_paths)}
        if mine is None:
            mine = _Entry({"manager": manager, "operation": "Apply",
                           "apiVersion": rt.api_version, "subresource": subresource})
            entries.append(mine)
        if mine.fields != set(applied) or changed or mine.time is None:
            mine.fields = set(applied)
            mine.time = _now()
        if managed.enabled:
            _store_entries(result, entries)
        return result

    return store.modify(rt, namespace, name, fn, subresource=subresource, dry_run=dry_run), False
