"""Structural schemas of CustomResourceDefinitions and what the real apiserver does with them.

Follows k8s.io/apiextensions-apiserver v0.35.4 (``pkg/apiserver/customresource_handler.go``
``unstructuredSchemaCoercer.apply``, ``pkg/apiserver/schema/{pruning,defaulting,objectmeta,
listtype}``, ``pkg/registry/customresource/{strategy,status_strategy,validator}.go``) and the
kube-openapi validator it calls (``pkg/validation/validate``, ``errors``, ``strfmt`` at
589584f1c912), for every write of a custom resource, in the apiserver's order:

1. decode: root ``metadata`` reduced to ObjectMeta fields; unknown fields pruned
   (``properties`` / ``additionalProperties`` / ``items``, ``x-kubernetes-preserve-unknown-fields``
   with and without properties, ``x-kubernetes-embedded-resource`` keeping apiVersion/kind/
   metadata); nulls of non-nullable fields without a default dropped
   (``PruneNonNullableNullsWithoutDefaults``); embedded resources' metadata reduced to ObjectMeta;
2. defaulting (``structuraldefaulting.Default``; a null in a non-nullable field with a default
   becomes the default);
3. validation with the real messages (kube-openapi ``in body`` texts wrapped in field errors),
   ratcheting on update (a value equal to the old one at the same correlated path is not
   re-validated, ``CRDValidationRatcheting`` is GA), embedded-resource apiVersion/kind checks and
   ``x-kubernetes-list-type`` map/set duplicates.

A schema is compiled once into :class:`Node` objects (per CRD version, when the CRD is created
or changed); a write walks only the object's own fields, and the defaulting and embedded-resource
walks only enter branches whose schema has defaults / embedded resources.

Not evaluated: ``x-kubernetes-validations`` (CEL rules) and ``uniqueItems`` (forbidden in
structural schemas anyway). ``allOf``/``anyOf``/``oneOf``/``not`` are checked, their messages
are kube-openapi's but their nesting of sub-errors is simplified.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import math
import re
from datetime import date
from typing import Any

from .jsoncopy import json_copy

Obj = dict[str, Any]
Cause = dict[str, str]

META_FIELDS = frozenset(("apiVersion", "kind", "metadata"))
# metav1.ObjectMeta's JSON fields (k8s.io/apimachinery v0.35.4 types.go); all omitempty.
OBJECT_META_FIELDS = frozenset((
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields"))

# Formats a CRD schema may use at compatibility version 1.35
# (apiextensions-apiserver pkg/apiserver/validation/formats.go); others are ignored.
_SUPPORTED_FORMATS = frozenset((
    "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3",
    "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor",
    "byte", "password", "date", "duration", "datetime", "k8s-short-name", "k8s-long-name"))

_MISSING: Any = object()


class Node:
    """One compiled schema node (a ``structuralschema.Structural`` plus its value validations)."""

    __slots__ = (
        "props", "addl", "addl_set", "items", "preserve", "embedded", "nullable", "has_default",
        "default", "types", "int_or_string", "enum", "required", "fmt", "pattern", "pattern_src",
        "minimum", "maximum", "excl_min", "excl_max", "multiple_of", "min_len", "max_len",
        "min_items", "max_items", "min_props", "max_props", "all_of", "any_of", "one_of", "not_",
        "list_type", "map_keys", "defaulted_props", "sub_defaults", "sub_embedded", "sub_listtype",
        "raw_type")

    def __init__(self) -> None:
        self.props: dict[str, Node] | None = None
        self.addl: Node | None = None
        self.addl_set = False
        self.items: Node | None = None
        self.preserve = False
        self.embedded = False
        self.nullable = False
        self.has_default = False
        self.default: Any = None
        self.types: tuple[str, ...] = ()
        self.raw_type = ""
        self.int_or_string = False
        self.enum: list[Any] | None = None
        self.required: tuple[str, ...] = ()
        self.fmt = ""
        self.pattern: re.Pattern[str] | None = None
        self.pattern_src = ""
        self.minimum: float | None = None
        self.maximum: float | None = None
        self.excl_min = False
        self.excl_max = False
        self.multiple_of: float | None = None
        self.min_len: int | None = None
        self.max_len: int | None = None
        self.min_items: int | None = None
        self.max_items: int | None = None
        self.min_props: int | None = None
        self.max_props: int | None = None
        self.all_of: list[Node] = []
        self.any_of: list[Node] = []
        self.one_of: list[Node] = []
        self.not_: Node | None = None
        self.list_type = ""
        self.map_keys: tuple[str, ...] = ()
        self.defaulted_props: tuple[tuple[str, Node], ...] = ()
        self.sub_defaults = False  # this node or a descendant has a default
        self.sub_embedded = False  # this node or a descendant is an embedded resource
        self.sub_listtype = False  # this node or a descendant is a map or set list


def _go_regex(src: str) -> re.Pattern[str] | None:
    try:
        return re.compile(src)
    except re.error:
        return None


def compile_schema(raw: Any) -> Node | None:
    """Compile an ``openAPIV3Schema`` (JSON-shaped) into a :class:`Node` tree; None for none."""
    if not isinstance(raw, dict):
        return None
    n = Node()
    props = raw.get("properties")
    if isinstance(props, dict):
        n.props = {k: c for k, v in props.items() if (c := compile_schema(v)) is not None}
    addl = raw.get("additionalProperties")
    if isinstance(addl, dict):
        n.addl, n.addl_set = compile_schema(addl), True
    elif addl is True:
        n.addl_set = True
    n.items = compile_schema(raw.get("items"))
    n.preserve = raw.get("x-kubernetes-preserve-unknown-fields") is True
    n.embedded = raw.get("x-kubernetes-embedded-resource") is True
    n.nullable = raw.get("nullable") is True
    n.int_or_string = raw.get("x-kubernetes-int-or-string") is True
    t = raw.get("type")
    n.raw_type = t if isinstance(t, str) else ""
    if n.int_or_string:
        n.types = ("integer", "string")
    elif isinstance(t, str) and t:
        n.types = (t,)
    if isinstance(raw.get("enum"), list):
        n.enum = list(raw["enum"])
    if isinstance(raw.get("required"), list):
        n.required = tuple(str(r) for r in raw["required"])
    fmt = raw.get("format")
    if isinstance(fmt, str) and fmt.replace("-", "") in _SUPPORTED_FORMATS:
        n.fmt = fmt
    if isinstance(raw.get("pattern"), str):
        n.pattern_src = raw["pattern"]
        n.pattern = _go_regex(n.pattern_src)
    for attr, key in (("minimum", "minimum"), ("maximum", "maximum"),
                      ("multiple_of", "multipleOf")):
        v = raw.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            setattr(n, attr, v)
    n.excl_min = raw.get("exclusiveMinimum") is True
    n.excl_max = raw.get("exclusiveMaximum") is True
    for attr, key in (("min_len", "minLength"), ("max_len", "maxLength"),
                      ("min_items", "minItems"), ("max_items", "maxItems"),
                      ("min_props", "minProperties"), ("max_props", "maxProperties")):
        v = raw.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            setattr(n, attr, v)
    for attr, key in (("all_of", "allOf"), ("any_of", "anyOf"), ("one_of", "oneOf")):
        if isinstance(raw.get(key), list):
            setattr(n, attr, [c for s in raw[key] if (c := compile_schema(s)) is not None])
    n.not_ = compile_schema(raw.get("not"))
    lt = raw.get("x-kubernetes-list-type")
    n.list_type = lt if isinstance(lt, str) else ""
    if isinstance(raw.get("x-kubernetes-list-map-keys"), list):
        n.map_keys = tuple(str(k) for k in raw["x-kubernetes-list-map-keys"])
    if "default" in raw and raw["default"] is not None:
        n.has_default = True
        # defaults are pruned by the schema when the CRD is stored (defaulting.PruneDefaults)
        dflt = json_copy(raw["default"])
        if isinstance(dflt, (dict, list)):
            _prune(dflt, n, "", None)
        n.default = dflt
    children = list((n.props or {}).values()) + [c for c in (n.addl, n.items) if c]
    if n.props:
        n.defaulted_props = tuple((k, c) for k, c in n.props.items() if c.has_default)
    n.sub_defaults = n.has_default or any(c.sub_defaults for c in children)
    n.sub_embedded = n.embedded or any(c.sub_embedded for c in children)
    n.sub_listtype = n.list_type in ("map", "set") or any(c.sub_listtype for c in children)
    return n


# ------------------------------------------------------------------ decode: prune + nulls
def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _null_prunable(sub: Node | None) -> bool:
    return sub is not None and not sub.nullable and not sub.has_default


def _prune(x: Any, s: Node | None, path: str, out: list[str] | None) -> None:
    """pruning.prune and PruneNonNullableNullsWithoutDefaults in one walk (in place)."""
    if s is not None and s.preserve:
        _skip_prune(x, s, path, out)
        return
    if type(x) is dict:
        if s is None:
            if out is not None:
                out.extend(_join(path, k) for k in x)
            x.clear()
            return
        props, emb = s.props, s.embedded
        for k in list(x):
            v = x[k]
            if props is not None and k in props:
                sub: Node | None = props[k]
            elif s.addl_set:
                sub = s.addl
            elif emb and k in META_FIELDS:
                continue
            else:
                if out is not None:
                    out.append(_join(path, k))
                del x[k]
                continue
            if v is None:
                if _null_prunable(sub):
                    del x[k]
            elif emb and k in META_FIELDS:
                _prune_nulls(v, sub)
            elif type(v) is dict or type(v) is list:
                _prune(v, sub, _join(path, k) if out is not None else "", out)
    elif type(x) is list:
        items = s.items if s is not None else None
        for i, v in enumerate(x):
            if type(v) is dict or type(v) is list:
                _prune(v, items, f"{path}[{i}]" if out is not None else "", out)


def _skip_prune(x: Any, s: Node, path: str, out: list[str] | None) -> None:
    if type(x) is dict:
        props, emb = s.props, s.embedded
        for k in list(x):
            v = x[k]
            if props is not None and k in props:
                sub: Node | None = props[k]
            elif s.addl_set:
                sub = s.addl
            else:
                continue  # preserved as is (and its nulls too: no schema for them)
            if v is None:
                if _null_prunable(sub):
                    del x[k]
            elif emb and k in META_FIELDS:
                _prune_nulls(v, sub)
            elif type(v) is dict or type(v) is list:
                _prune(v, sub, _join(path, k) if out is not None else "", out)
    elif type(x) is list:
        for i, v in enumerate(x):
            if s.items is not None and (type(v) is dict or type(v) is list):
                _skip_prune(v, s.items, f"{path}[{i}]" if out is not None else "", out)


def _prune_nulls(x: Any, s: Node | None) -> None:
    """PruneNonNullableNullsWithoutDefaults alone (for the metadata-like fields pruning skips)."""
    if s is None:
        return
    if type(x) is dict:
        for k in list(x):
            v = x[k]
            sub = (s.props or {}).get(k) if s.props and k in s.props else (
                s.addl if s.addl_set else None)
            if v is None:
                if _null_prunable(sub):
                    del x[k]
            else:
                _prune_nulls(v, sub)
    elif type(x) is list:
        for v in x:
            _prune_nulls(v, s.items)


def object_meta(md: Any, prefix: str, out: list[str] | None, embedded: bool) -> Any:
    """``md`` as ``metav1.ObjectMeta`` decoded and encoded again (in place): unknown fields
    dropped (reported as ``<prefix>.<field>``), empty omitempty fields dropped; for an embedded
    resource also a zero creationTimestamp."""
    if type(md) is not dict:
        return md
    for k in list(md):
        v = md[k]
        if k not in OBJECT_META_FIELDS:
            if out is not None:
                out.append(f"{prefix}.{k}")
            del md[k]
        elif v is None and k != "creationTimestamp" or v == "" or v == {} or v == [] or (
                k == "generation" and v == 0):
            del md[k]
    if embedded and "creationTimestamp" in md and not md["creationTimestamp"]:
        del md["creationTimestamp"]
    return md


class CoerceError(ValueError):
    """A type error the decoder itself rejects (embedded apiVersion/kind not a string)."""


def _coerce_embedded(x: Any, s: Node, path: str, out: list[str] | None) -> None:
    """objectmeta.Coerce below the root: embedded resources' apiVersion/kind must be strings,
    their metadata is reduced to ObjectMeta."""
    if type(x) is dict:
        if s.embedded:
            for k in ("apiVersion", "kind"):
                if k in x and not isinstance(x[k], str):
                    raise CoerceError(f"{_join(path, k)}: Invalid value: {_go_value(x[k])}: "
                                      "must be a string")
            if "metadata" in x:
                x["metadata"] = object_meta(x["metadata"], _join(path, "metadata"), out, True)
        props = s.props
        for k, v in x.items():
            if props is not None and k in props:
                sub: Node | None = props[k]
                p = _join(path, k)
            elif s.addl_set:
                sub, p = s.addl, f"{path}[{k}]"
            else:
                continue
            if sub is not None and sub.sub_embedded and type(v) in (dict, list):
                _coerce_embedded(v, sub, p, out)
    elif type(x) is list and s.items is not None and s.items.sub_embedded:
        for i, v in enumerate(x):
            _coerce_embedded(v, s.items, f"{path}[{i}]", out)


def coerce(obj: Obj, root: Node | None, track: bool = False,
           skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """What decoding a custom resource does (in place): ObjectMeta, pruning, null pruning,
    embedded metadata. ``skip``: top-level keys to leave alone (already stored, unchanged).
    Returns the unknown field paths (only when ``track``), as the strict decoder lists them."""
    out: list[str] | None = [] if track else None
    meta_unknown: list[str] | None = [] if track else None
    if "metadata" in obj and "metadata" not in skip:
        obj["metadata"] = object_meta(obj["metadata"], "metadata", meta_unknown, False)
    if root is None:
        return meta_unknown or []
    props = root.props
    for k in list(obj):
        if k in skip:
            continue
        v = obj[k]
        if props is not None and k in props:
            sub: Node | None = props[k]
        elif root.addl_set:
            sub = root.addl
        elif k in META_FIELDS:
            continue
        elif root.preserve:
            continue
        else:
            if out is not None:
                out.append(k)
            del obj[k]
            continue
        if v is None:
            if _null_prunable(sub):
                del obj[k]
        elif k in META_FIELDS:
            if k != "metadata":
                _prune_nulls(v, sub)
        elif type(v) is dict or type(v) is list:
            _prune(v, sub, k if out is not None else "", out)
    if root.sub_embedded:
        for k, sub in (props or {}).items():
            if k not in skip and k not in META_FIELDS and sub.sub_embedded and k in obj:
                _coerce_embedded(obj[k], sub, k, out)
    unknown = sorted(out) if out else []
    return (meta_unknown or []) + unknown


# ------------------------------------------------------------------ defaulting
def default(x: Any, s: Node | None) -> None:
    """structuraldefaulting.Default (in place)."""
    if s is None or not s.sub_defaults:
        return
    if type(x) is dict:
        for k, prop in s.defaulted_props:
            if k not in x or (x[k] is None and not prop.nullable):
                x[k] = json_copy(prop.default)
        props = s.props
        for k, v in x.items():
            if props is not None and k in props:
                sub = props[k]
                if sub.sub_defaults and type(v) in (dict, list):
                    default(v, sub)
            elif s.addl_set and s.addl is not None and s.addl.sub_defaults:
                a = s.addl
                if v is None and not a.nullable and a.has_default:
                    x[k] = v = json_copy(a.default)
                if type(v) in (dict, list):
                    default(v, a)
    elif type(x) is list and s.items is not None and s.items.sub_defaults:
        it = s.items
        for i, v in enumerate(x):
            if v is None and not it.nullable and it.has_default:
                x[i] = v = json_copy(it.default)
            if type(v) in (dict, list):
                default(v, it)


def default_object(obj: Obj, root: Node | None, skip: frozenset[str] | set[str] = frozenset()
                   ) -> None:
    if root is None or not root.sub_defaults:
        return
    if skip:
        saved = {k: obj.pop(k) for k in skip if k in obj}
        default(obj, root)
        for k, v in saved.items():
            obj[k] = v
    else:
        default(obj, root)


# ------------------------------------------------------------------ validation
def _go_float(f: float) -> str:
    """Go's %v of a float64 (strconv 'g' with the shortest representation)."""
    if f != f or f in (math.inf, -math.inf):
        return {True: "NaN"}.get(f != f, "+Inf" if f > 0 else "-Inf")
    if f == int(f) and abs(f) < 1e21:
        return str(int(f))
    r = repr(f)
    if "e" in r:
        mant, exp = r.split("e")
        sign = "-" if exp.startswith("-") else "+"
        return f"{mant}e{sign}{int(exp.lstrip('+-')):02d}"
    return r


def _go_value(v: Any) -> str:
    """How field.Error.ErrorBody prints a bad value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _num(v: float) -> str:
    return _go_float(float(v)) if isinstance(v, float) else str(v)


def _type_of(x: Any) -> str:
    if isinstance(x, bool):
        return "boolean"
    if isinstance(x, str):
        return "string"
    if isinstance(x, int):
        return "integer"
    if isinstance(x, float):
        return "number"
    if isinstance(x, list):
        return "array"
    if isinstance(x, dict):
        return "object"
    return ""


class Errors:
    """field.ErrorList being built: each entry is (reason, field, message-body)."""

    __slots__ = ("causes", "prefix")

    def __init__(self, prefix: str = "") -> None:
        self.causes: list[Cause] = []
        self.prefix = prefix

    def field(self, name: str) -> str:
        name = name[1:] if name.startswith(".") else name
        if not self.prefix:
            return name
        return f"{self.prefix}.{name}" if name else self.prefix

    def add(self, reason: str, name: str, body: str) -> None:
        self.causes.append({"reason": reason, "message": body, "field": self.field(name)})

    def invalid(self, name: str, value: Any, detail: str) -> None:
        self.add("FieldValueInvalid", name, f"Invalid value: {_go_value(value)}: {detail}")

    def type_invalid(self, name: str, value: Any, detail: str) -> None:
        self.add("FieldValueTypeInvalid", name, f"Invalid value: {_go_value(value)}: {detail}")


def _in(path: str) -> str:
    return f"{path} in body"


def _type_ok(x: Any, s: Node) -> tuple[str, str] | None:
    """typeValidator: None when fine, else (the value it reports, the kube-openapi message)."""
    tname = _type_of(x)
    types = s.types
    fits = tname in types or (tname == "number" and "integer" in types and
                              float(x).is_integer()) or (tname == "integer" and "number" in types)
    if s.fmt and tname not in ("string", "array") and not fits:
        got = {"integer": "int64", "number": "float64"}.get(tname, "")
        return got, f'must be of type {s.fmt}: "{got}"'
    if not types or fits:
        return None
    if s.fmt and tname == "string" and "number" not in types and "integer" not in types:
        return None
    return tname, f'must be of type {",".join(types)}: "{tname}"'


_RX_HOSTNAME = re.compile(
    r"^([a-zA-Z0-9]((-?[a-zA-Z0-9]{0,62})?)|([a-zA-Z0-9](([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)"
    r"(\.)){1,}([a-zA-Z]){2,63})$")
_RX_UUID = {
    "uuid": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "uuid3": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?"
                        r"[0-9a-f]{12}$"),
    "uuid4": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?"
                        r"[0-9a-f]{12}$"),
    "uuid5": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?"
                        r"[0-9a-f]{12}$"),
}
_RX_TIME = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_RX_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{2}[:-]){7}"
                     r"([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$|^([0-9A-Fa-f]{4}"
                     r"\.){3}[0-9A-Fa-f]{4}$")
_RX_SHORT = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RX_LONG = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_RX_DURATION = re.compile(r"^(([0-9]*(\.[0-9]*)?)(ns|us|µs|ms|s|m|h))+$|^[0-9]+ ?(ns|us|µs|ms|"
                          r"s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|"
                          r"minutes?|hours?|days?|weeks?)$")


def _is_date(s: str) -> bool:
    try:
        date.fromisoformat(s)
    except ValueError:
        return False
    return len(s) == 10


def _format_ok(fmt: str, v: str) -> bool:  # noqa: PLR0911
    """strfmt.Default's checks for the formats the simulator's CRDs use; the rarer ones
    (isbn, creditcard, ssn, colours, bsonobjectid, email, uri) are accepted unchecked."""
    f = fmt.replace("-", "")
    if f == "datetime":
        if len(v) < 4:
            return False
        parts = v.lower().split("t")
        if len(parts) < 2 or not _is_date(parts[0]):
            return False
        m = _RX_TIME.match(parts[1])
        return bool(m) and m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"
    if f == "date":
        return _is_date(v)
    if f in _RX_UUID:
        return bool(_RX_UUID[f].match(v))
    if f == "ipv4":
        try:
            ipaddress.IPv4Address(v)
        except ValueError:
            return False
        return True
    if f == "ipv6":
        try:
            ipaddress.IPv6Address(v)
        except ValueError:
            return False
        return True
    if f == "cidr":
        try:
            ipaddress.ip_network(v, strict=False)
        except ValueError:
            return False
        return "/" in v
    if f == "mac":
        return bool(_RX_MAC.match(v))
    if f == "hostname":
        return bool(_RX_HOSTNAME.match(v))
    if f == "byte":
        try:
            base64.b64decode(v, validate=True)
        except ValueError:
            return False
        return True
    if f == "k8sshortname":
        return len(v) <= 63 and bool(_RX_SHORT.match(v))
    if f == "k8slongname":
        return len(v) <= 253 and bool(_RX_LONG.match(v))
    if f == "duration":
        return bool(_RX_DURATION.match(v))
    return True


def _child(path: str, k: str) -> str:
    return f"{path}.{k}" if path else k


def validate(x: Any, s: Node, path: str, errs: Errors, old: Any = _MISSING) -> None:
    """kube-openapi SchemaValidator.Validate with apiextensions' ratcheting: when ``old`` (the
    correlated old value) equals ``x``, errors below are not reported, so nothing is walked."""
    if old is not _MISSING and old == x:
        return
    if x is None:
        if s.types and not s.nullable:
            errs.type_invalid(path, "null", f'{_in(path)} must be of type '
                                            f'{",".join(s.types)}: "null"')
        if s.enum:
            _enum(x, s, path, errs)
        return
    bad = _type_ok(x, s)
    if bad is not None:
        errs.type_invalid(path, bad[0], f"{_in(path)} {bad[1]}")
    if s.all_of or s.any_of or s.one_of or s.not_ is not None:
        _schema_props(x, s, path, errs)
    is_bool = isinstance(x, bool)
    if isinstance(x, str):
        if s.max_len is not None and len(x) > s.max_len:
            errs.add("FieldValueTooLong", path, "Too long: may not be more than "
                     f"{s.max_len} {'byte' if s.max_len == 1 else 'bytes'}")
        elif s.min_len is not None and len(x) < s.min_len:
            errs.invalid(path, x, f"{_in(path)} should be at least {s.min_len} chars long")
        elif s.pattern_src and (s.pattern is None or not s.pattern.search(x)):
            errs.invalid(path, x, f"{_in(path)} should match '{s.pattern_src}'")
        if s.fmt and not _format_ok(s.fmt, x):
            errs.type_invalid(path, x, f'{_in(path)} must be of type {s.fmt}: '
                                       f'{json.dumps(x, ensure_ascii=False)}')
    elif (isinstance(x, (int, float))) and not is_bool:
        _number(x, s, path, errs)
    elif isinstance(x, list):
        _slice(x, s, path, errs, old)
    if s.enum:
        _enum(x, s, path, errs)
    if isinstance(x, dict):
        _object(x, s, path, errs, old)


def _enum(x: Any, s: Node, path: str, errs: Errors) -> None:
    assert s.enum is not None
    for e in s.enum:
        if x is not None and type(e) is type(x) and e == x:
            return
        if isinstance(e, (int, float)) and isinstance(x, (int, float)) and \
                not isinstance(e, bool) and not isinstance(x, bool) and \
                (isinstance(e, float) or not isinstance(x, float)) and e == x:
            return
    vals = ", ".join(json.dumps(v if isinstance(v, str) else json.dumps(
        v, separators=(",", ":")), ensure_ascii=False) for v in s.enum)
    errs.add("FieldValueNotSupported", path,
             f"Unsupported value: {_go_value(x) if x is not None else 'null'}: "
             f"supported values: {vals}")


def _number(x: float, s: Node, path: str, errs: Errors) -> None:
    isint = isinstance(x, int)
    if s.multiple_of is not None:
        f = s.multiple_of
        if f <= 0:
            errs.invalid(path, x, f"factor MultipleOf declared for {path} must be positive: "
                                  f"{_num(f)}")
        elif isint and not isinstance(f, float) or isint and float(f).is_integer():
            if x % int(f):
                errs.invalid(path, x, f"{_in(path)} should be a multiple of {int(f)}")
        elif not (x / f).is_integer():
            errs.invalid(path, x, f"{_in(path)} should be a multiple of {_go_float(float(f))}")
    if s.minimum is not None:
        m = s.minimum
        lo = int(m) if isint else m
        if (x < lo) if not s.excl_min else (x <= lo):
            shown = str(int(m)) if isint else _go_float(float(m))
            rel = "greater than" if s.excl_min else "greater than or equal to"
            errs.invalid(path, x, f"{_in(path)} should be {rel} {shown}")
    if s.maximum is not None:
        m = s.maximum
        hi = int(m) if isint else m
        if (x > hi) if not s.excl_max else (x >= hi):
            shown = str(int(m)) if isint else _go_float(float(m))
            rel = "less than" if s.excl_max else "less than or equal to"
            errs.invalid(path, x, f"{_in(path)} should be {rel} {shown}")


def _correlate_items(x: list[Any], s: Node, old: Any) -> list[Any]:
    """Old values correlated with the items of ``x`` (CorrelatedObject.Index): by key for
    ``x-kubernetes-list-type: map``, by value for ``set``; atomic lists do not correlate."""
    if not isinstance(old, list) or not old:
        return [_MISSING] * len(x)
    if s.list_type == "map" and s.map_keys:
        keys = s.map_keys
        by_key: dict[str, Any] = {}
        for o in old:
            if isinstance(o, dict):
                by_key.setdefault(json.dumps([o.get(k) for k in keys]), o)
        return [by_key.get(json.dumps([v.get(k) for k in keys]), _MISSING)
                if isinstance(v, dict) else _MISSING for v in x]
    if s.list_type == "set":
        return [v if v in old else _MISSING for v in x]
    return [_MISSING] * len(x)


def _slice(x: list[Any], s: Node, path: str, errs: Errors, old: Any) -> None:
    it = s.items
    if it is not None:
        olds = _correlate_items(x, s, old) if old is not _MISSING else None
        for i, v in enumerate(x):
            validate(v, it, f"{path}[{i}]", errs, olds[i] if olds else _MISSING)
    if s.min_items is not None and len(x) < s.min_items:
        errs.invalid(path, len(x), f"{_in(path)} should have at least {s.min_items} items")
    if s.max_items is not None and len(x) > s.max_items:
        errs.add("FieldValueTooMany", path, f"Too many: {len(x)}: must have at most "
                 f"{s.max_items} {'item' if s.max_items == 1 else 'items'}")


def _object(x: Obj, s: Node, path: str, errs: Errors, old: Any) -> None:
    n = len(x)
    if s.min_props is not None and n < s.min_props:
        errs.invalid(path, n, f"{_in(path)} should have at least {s.min_props} properties")
    if s.max_props is not None and n > s.max_props:
        errs.add("FieldValueTooMany", path, f"Too many: {n}: must have at most "
                 f"{s.max_props} {'item' if s.max_props == 1 else 'items'}")
    props = s.props or {}
    oldd = old if isinstance(old, dict) else None
    if s.addl is not None:
        for k, v in x.items():
            if k not in props:
                validate(v, s.addl, f"{path}.{k}", errs,
                         oldd.get(k, _MISSING) if oldd is not None else _MISSING)
    for k, sub in props.items():
        if k in x:
            validate(x[k], sub, _child(path, k), errs,
                     oldd.get(k, _MISSING) if oldd is not None else _MISSING)
    for k in s.required:
        if k not in x:
            errs.add("FieldValueRequired", f"{path}.{k}", "Required value")


def _schema_props(x: Any, s: Node, path: str, errs: Errors) -> None:
    def ok(sub: Node) -> bool:
        e = Errors()
        validate(x, sub, path, e)
        return not e.causes

    q = json.dumps(path)
    if s.all_of:
        bad = [sub for sub in s.all_of if not ok(sub)]
        if bad:
            errs.invalid(path, "", f"{q} must validate all the schemas (allOf)")
            for sub in bad:
                validate(x, sub, path, errs)
    if s.any_of and not any(ok(sub) for sub in s.any_of):
        errs.invalid(path, "", f"{q} must validate at least one schema (anyOf)")
        validate(x, s.any_of[0], path, errs)
    if s.one_of:
        n = sum(1 for sub in s.one_of if ok(sub))
        if n != 1:
            errs.invalid(path, "", f"{q} must validate one and only one schema (oneOf). " +
                         ("Found none valid" if n == 0 else f"Found {n} valid alternatives"))
    if s.not_ is not None and ok(s.not_):
        errs.invalid(path, "", f"{q} must not validate the schema (not)")


# ------------------------------------------------------------------ after the schema
_RX_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def validate_embedded(x: Any, s: Node | None, path: str, errs: Errors) -> None:
    """objectmeta.Validate: embedded resources need a string apiVersion and kind."""
    if s is None or not s.sub_embedded:
        return
    if type(x) is dict:
        if s.embedded:
            for k in ("apiVersion", "kind"):
                if k not in x:
                    errs.add("FieldValueRequired", _child(path, k), "Required value")
            av, kind = x.get("apiVersion", _MISSING), x.get("kind", _MISSING)
            if av is not _MISSING:
                if not isinstance(av, str):
                    errs.invalid(_child(path, "apiVersion"), av, "must be a string")
                elif not av:
                    errs.invalid(_child(path, "apiVersion"), av, "must not be empty")
                elif av.count("/") > 1:
                    errs.invalid(_child(path, "apiVersion"), av,
                                 f"unexpected GroupVersion string: {av}")
            if kind is not _MISSING:
                if not isinstance(kind, str):
                    errs.invalid(_child(path, "kind"), kind, "must be a string")
                elif not kind:
                    errs.invalid(_child(path, "kind"), kind, "must not be empty")
                elif len(kind) > 63 or not _RX_DNS1035.match(kind.lower()):
                    errs.invalid(_child(path, "kind"), kind,
                                 "may have mixed case, but should otherwise match: a DNS-1035 "
                                 "label must consist of lower case alphanumeric characters or "
                                 "'-', start with an alphabetic character, and end with an "
                                 "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex "
                                 "used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
        props = s.props or {}
        for k, v in x.items():
            if k in props:
                validate_embedded(v, props[k], _child(path, k), errs)
            elif s.addl_set:
                validate_embedded(v, s.addl, f"{path}[{k}]", errs)
    elif type(x) is list:
        for i, v in enumerate(x):
            validate_embedded(v, s.items, f"{path}[{i}]", errs)


def validate_list_types(x: Any, s: Node | None, path: str, errs: Errors) -> None:
    """listtype.ValidateListSetsAndMaps: no duplicate keys in map lists, no duplicate values in
    set lists."""
    if s is None or not s.sub_listtype:
        return
    if type(x) is list:
        if s.list_type == "set":
            seen: list[Any] = []
            for i, v in enumerate(x):
                if v in seen:
                    errs.add("FieldValueDuplicate", f"{path}[{i}]",
                             f"Duplicate value: {_go_value(v)}")
                else:
                    seen.append(v)
        elif s.list_type == "map" and s.map_keys:
            seen_keys: set[str] = set()
            for i, v in enumerate(x):
                if not isinstance(v, dict):
                    errs.invalid(f"{path}[{i}]", v,
                                 "must be an object for an array of list-type map")
                    continue
                key = {k: v[k] for k in s.map_keys if k in v}
                sk = json.dumps(key, sort_keys=True)
                if sk in seen_keys:
                    errs.add("FieldValueDuplicate", f"{path}[{i}]",
                             f"Duplicate value: {_go_value(key)}")
                seen_keys.add(sk)
        if s.items is not None:
            for i, v in enumerate(x):
                if type(v) in (dict, list):
                    validate_list_types(v, s.items, f"{path}[{i}]", errs)
    elif type(x) is dict:
        props = s.props or {}
        for k, v in x.items():
            if type(v) not in (dict, list):
                continue
            if k in props:
                validate_list_types(v, props[k], _child(path, k), errs)
            elif s.addl is not None:
                validate_list_types(v, s.addl, f"{path}[{k}]", errs)

