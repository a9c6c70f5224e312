"""Patch types: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch.

Server-side apply lives in :mod:`.apply` (it needs field ownership, not just a merge).

Strategic merge patch follows apimachinery's ``strategicpatch`` semantics for the list fields
of the built-in kinds (the ``patchStrategy``/``patchMergeKey`` struct tags of k8s.io/api):
lists with a merge key are merged element by element, ``metadata.finalizers`` is merged as a
set, every other list is replaced whole (taints and tolerations included, as in the real
API). Directives: ``$patch: replace|delete|merge``, ``$setElementOrder/<list>``,
``$deleteFromPrimitiveList/<list>``, ``$retainKeys``, ``null`` deletes.
"""

from __future__ import annotations

from typing import Any

from .jsoncopy import json_copy

Path = tuple[str, ...]


class PatchError(Exception):
    """A patch that cannot be applied. ``code`` 400 = malformed, 422 = failed operation."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------ JSON merge patch
def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    result = json_copy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# ------------------------------------------------------------------ JSON patch
def _unescape(tok: str) -> str:
    return tok.replace("~1", "/").replace("~0", "~")


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError("json patch path must be a string", 400)
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f'invalid JSON pointer "{path}"', 422)
    return [_unescape(p) for p in path[1:].split("/")]


def _index(container: list[Any], tok: str, allow_end: bool) -> int:
    if tok == "-" and allow_end:
        return len(container)
    if not tok.isdigit() or (len(tok) > 1 and tok.startswith("0")):
        raise PatchError(f"invalid array index: {tok}")
    i = int(tok)
    limit = len(container) + (1 if allow_end else 0)
    if i >= limit:
        raise PatchError(f"array index out of bounds: {i}")
    return i


def _parent(doc: Any, toks: list[str]) -> Any:
    cur = doc
    for t in toks[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError(f"missing path segment {t!r}")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, False)]
        else:
            raise PatchError(f"cannot traverse into {t!r}")
    return cur


def _get(doc: Any, toks: list[str]) -> Any:
    if not toks:
        return doc
    par = _parent(doc, toks)
    last = toks[-1]
    if isinstance(par, dict):
        if last not in par:
            raise PatchError(f"missing value at /{'/'.join(toks)}")
        return par[last]
    if isinstance(par, list):
        return par[_index(par, last, False)]
    raise PatchError("path does not exist")


def _add(doc: Any, toks: list[str], value: Any) -> Any:
    if not toks:
        return value
    par = _parent(doc, toks)
    last = toks[-1]
    if isinstance(par, dict):
        par[last] = value
    elif isinstance(par, list):
        par.insert(_index(par, last, True), value)
    else:
        raise PatchError("cannot add to a scalar")
    return doc


def _remove(doc: Any, toks: list[str]) -> Any:
    if not toks:
        raise PatchError("cannot remove the whole document")
    par = _parent(doc, toks)
    last = toks[-1]
    if isinstance(par, dict):
        if last not in par:
            raise PatchError(f"unable to remove nonexistent key: {last}")
        del par[last]
    elif isinstance(par, list):
        del par[_index(par, last, False)]
    else:
        raise PatchError("cannot remove from a scalar")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    """Apply an RFC 6902 patch to a copy of ``doc``."""
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations", 400)
    doc = json_copy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError("invalid json patch operation", 400)
        kind = op["op"]
        toks = _pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f'missing value for "{kind}" operation', 400)
        if kind == "add":
            doc = _add(doc, toks, json_copy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, toks)
        elif kind == "replace":
            _get(doc, toks)
            if not toks:
                doc = json_copy(op["value"])
            else:
                par = _parent(doc, toks)
                if isinstance(par, dict):
                    par[toks[-1]] = json_copy(op["value"])
                else:
                    par[_index(par, toks[-1], False)] = json_copy(op["value"])
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from"))
            val = json_copy(_get(doc, src))
            if kind == "move":
                if toks[:len(src)] == src and len(toks) > len(src):
                    raise PatchError("cannot move a value into one of its children")
                doc = _remove(doc, src)
            doc = _add(doc, toks, val)
        elif kind == "test":
            if _get(doc, toks) != op["value"]:
                raise PatchError(f"testing value /{'/'.join(toks)} failed")
        else:
            raise PatchError(f'unexpected kind of operation "{kind}"', 400)
    return doc


# ------------------------------------------------------------------ strategic merge patch
_NAME_KEYED = {"containers", "initContainers", "ephemeralContainers", "env", "volumes",
               "imagePullSecrets", "resourceClaims", "schedulingGates"}
_IP_KEYED = {"hostAliases", "podIPs", "hostIPs"}
_CONTAINER_LISTS = {"containers", "initContainers", "ephemeralContainers"}


def list_strategy(kind: str, path: Path) -> tuple[str, str]:
    """("merge", key) | ("set", "") | ("replace", "") for the list at ``path``."""
    if not path:
        return ("replace", "")
    last = path[-1]
    if path == ("metadata", "finalizers"):
        return ("set", "")
    if path == ("metadata", "ownerReferences"):
        return ("merge", "uid")
    if last in _NAME_KEYED:
        return ("merge", "name")
    if last in _IP_KEYED:
        return ("merge", "ip")
    if last == "conditions":
        return ("merge", "type")
    if last == "volumeMounts":
        return ("merge", "mountPath")
    if last == "volumeDevices":
        return ("merge", "devicePath")
    if last == "topologySpreadConstraints":
        return ("merge", "topologyKey")
    if last == "ports":
        if len(path) >= 2 and path[-2] in _CONTAINER_LISTS:
            return ("merge", "containerPort")
        if kind == "Service" and path == ("spec", "ports"):
            return ("merge", "port")
    if last == "addresses" and kind == "Node" and path == ("status", "addresses"):
        return ("merge", "type")
    return ("replace", "")


_DELETE = object()


def _strip_directives(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip_directives(x) for k, x in v.items()
                if not k.startswith("$") and x is not None}
    if isinstance(v, list):
        return [_strip_directives(x) for x in v
                if not (isinstance(x, dict) and x.get("$patch") == "delete")]
    return v


def strategic_merge(target: Any, patch: Any, kind: str, path: Path = ()) -> Any:
    """Apply a strategic merge patch (2-way, as the server does) to a copy of ``target``."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be an object", 400)
    out = _smp_map(json_copy(target) if isinstance(target, dict) else {}, patch, kind, path)
    return {} if out is _DELETE else out


def _smp_map(orig: dict[str, Any], patch: dict[str, Any], kind: str, path: Path) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip_directives({k: v for k, v in patch.items() if k != "$patch"})
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch type: {directive}", 400)
    orders: dict[str, list[Any]] = {}
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys"):
            continue
        if k.startswith("$setElementOrder/"):
            orders[k.split("/", 1)[1]] = v if isinstance(v, list) else []
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            cur = orig.get(field)
            if isinstance(cur, list) and isinstance(v, list):
                orig[field] = [x for x in cur if x not in v]
            continue
        if v is None:
            orig.pop(k, None)
            continue
        sub = path + (k,)
        cur = orig.get(k)
        if isinstance(v, dict):
            merged = _smp_map(cur if isinstance(cur, dict) else {}, v, kind, sub)
            if merged is _DELETE:
                orig.pop(k, None)
            else:
                orig[k] = merged
        elif isinstance(v, list):
            orig[k] = _smp_list(cur if isinstance(cur, list) else [], v, kind, sub)
        else:
            orig[k] = json_copy(v)
    for field, order in orders.items():
        if isinstance(orig.get(field), list):
            orig[field] = _reorder(orig[field], order, list_strategy(kind, path + (field,)))
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        keep = set(retain)
        for k in [k for k in orig if k not in keep]:
            del orig[k]
    return orig


def _smp_list(orig: list[Any], patch: list[Any], kind: str, path: Path) -> list[Any]:
    strat, key = list_strategy(kind, path)
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [_strip_directives(x) for x in patch
                if not (isinstance(x, dict) and x.get("$patch") == "replace")]
    if strat == "set":
        out = list(orig)
        for x in patch:
            if x not in out:
                out.append(json_copy(x))
        return out
    if strat == "replace" or not all(isinstance(x, dict) for x in patch):
        return [_strip_directives(x) for x in patch]
    out = [json_copy(x) for x in orig]
    for el in patch:
        kv = el.get(key)
        idx = next((i for i, o in enumerate(out) if isinstance(o, dict) and o.get(key) == kv
                    and kv is not None), None)
        if el.get("$patch") == "delete":
            if kv is None:
                out = [o for o in out if not all(o.get(a) == b for a, b in el.items()
                                                 if a != "$patch")]
            elif idx is not None:
                out = [o for o in out if not (isinstance(o, dict) and o.get(key) == kv)]
            continue
        if idx is None:
            out.append(_strip_directives(el))
        else:
            merged = _smp_map(out[idx], el, kind, path)
            if merged is _DELETE:
                del out[idx]
            else:
                out[idx] = merged
    return out


def _reorder(items: list[Any], order: list[Any], strat: tuple[str, str]) -> list[Any]:
    kind, key = strat
    if kind == "merge":
        keys = [o.get(key) for o in order if isinstance(o, dict)]

        def pos(x: Any) -> int:
            k = x.get(key) if isinstance(x, dict) else None
            return keys.index(k) if k in keys else len(keys)
    else:
        def pos(x: Any) -> int:
            return order.index(x) if x in order else len(order)
    return sorted(items, key=pos)
