"""A minimal OpenAPI v3 (``/openapi/v3``): enough for ``kubectl apply``/``create`` validation
and patch building, and ``kubectl explain`` on CRDs.

Each group-version document has, per kind, a ``patch`` operation tagged with
``x-kubernetes-group-version-kind`` that accepts the ``fieldValidation`` query parameter (so
kubectl leaves validation to the server). Built-in kinds deliberately do not advertise
strategic merge patch in that operation: kubectl then builds its patches from its compiled-in
Go types (which carry the real merge keys) instead of from our schema-less documents. CRDs get
their ``openAPIV3Schema`` as a component schema, which is what ``kubectl explain`` renders.
``/openapi/v2`` (:class:`OpenAPIV2`) is one Swagger 2.0 document, served as JSON or, when
asked (kubectl, client-go discovery), as the gnostic ``openapi_v2.Document`` protobuf. kubectl
validates on the client side against it whenever the server cannot (a ``v1 List`` - such as
deploy/rbac.yaml - always): definitions of the built-in kinds come from the generated
protobuf schema table (:mod:`.pbschema`, the Go types' JSON fields, so unknown fields are
rejected as a real server's document rejects them), CRDs' from their structural schemas as
apiextensions-apiserver's v2 builder converts them (``ToStructuralOpenAPIV2``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from .pbschema import LISTS, MESSAGES
from .resources import Registry, ResourceType

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _schema_name(rt: ResourceType) -> str:
    if not rt.group:
        return f"io.k8s.api.core.{rt.version}.{rt.kind}"
    if rt.custom:
        rev = ".".join(reversed(rt.group.split(".")))
        return f"{rev}.{rt.version}.{rt.kind}"
    short = rt.group.split(".")[0]
    return f"io.k8s.api.{short}.{rt.version}.{rt.kind}"


def _op_id(rt: ResourceType, verb: str, namespaced: bool) -> str:
    grp = "".join(p.capitalize() for p in (rt.group.split(".")[0] if rt.group else "core")
                  .split("-"))
    ns = "Namespaced" if namespaced else ""
    return f"{verb}{grp}{rt.version.capitalize()}{ns}{rt.kind}"


class OpenAPI:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._gen = -1
        self._docs: dict[str, bytes] = {}
        self._hashes: dict[str, str] = {}

    def _refresh(self) -> None:
        with self._lock:
            if self._gen == self.registry.generation and self._docs:
                return
            gen = self.registry.generation
            by_gv: dict[str, list[ResourceType]] = {}
            for rt in self.registry.all():
                by_gv.setdefault(_gv_path(rt.group, rt.version), []).append(rt)
            docs: dict[str, bytes] = {}
            hashes: dict[str, str] = {}
            for gv, rts in sorted(by_gv.items()):
                doc = json.dumps(self._gv_doc(rts), separators=(",", ":"),
                                 sort_keys=True).encode()
                docs[gv] = doc
                hashes[gv] = hashlib.sha512(doc).hexdigest()[:32].upper()
            self._docs, self._hashes, self._gen = docs, hashes, gen

    def index(self) -> dict[str, Any]:
        self._refresh()
        return {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={h}"}
                          for gv, h in self._hashes.items()}}

    def gv_doc(self, gv: str) -> bytes | None:
        self._refresh()
        return self._docs.get(gv.strip("/"))

    def _gv_doc(self, rts: list[ResourceType]) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        schemas: dict[str, Any] = {
            _OBJECT_META: {"description": "ObjectMeta is metadata that all persisted resources "
                                          "must have.", "type": "object",
                           "x-kubernetes-preserve-unknown-fields": True}}
        for rt in sorted(rts, key=lambda r: r.plural):
            name = _schema_name(rt)
            gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
            schema = self._schema(rt)
            schema["x-kubernetes-group-version-kind"] = [gvk]
            schemas[name] = schema
            ref = {"schema": {"$ref": f"#/components/schemas/{name}"}}
            content = {"application/json-patch+json": ref, "application/merge-patch+json": ref,
                       "application/apply-patch+yaml": ref}
            prefix = "/" + _gv_path(rt.group, rt.version)
            item = (f"{prefix}/namespaces/{{namespace}}/{rt.plural}/{{name}}" if rt.namespaced
                    else f"{prefix}/{rt.plural}/{{name}}")
            coll = item.rsplit("/", 1)[0]
            params = [{"name": "name", "in": "path", "required": True,
                       "schema": {"type": "string", "uniqueItems": True}}]
            if rt.namespaced:
                params.append({"name": "namespace", "in": "path", "required": True,
                               "schema": {"type": "string", "uniqueItems": True}})
            q = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                 for n in ("dryRun", "fieldManager", "fieldValidation")]
            resp = {"200": {"description": "OK", "content": {"application/json": ref}}}
            paths[item] = {
                "get": {"operationId": _op_id(rt, "read", rt.namespaced), "responses": resp,
                        "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk},
                "put": {"operationId": _op_id(rt, "replace", rt.namespaced),
                        "parameters": q, "requestBody": {"content": {"*/*": ref}},
                        "responses": resp, "x-kubernetes-action": "put",
                        "x-kubernetes-group-version-kind": gvk},
                "patch": {"operationId": _op_id(rt, "patch", rt.namespaced),
                          "parameters": q + [{"name": "force", "in": "query",
                                              "schema": {"type": "boolean",
                                                         "uniqueItems": True}}],
                          "requestBody": {"content": content, "required": True},
                          "responses": resp, "x-kubernetes-action": "patch",
                          "x-kubernetes-group-version-kind": gvk},
                "parameters": params,
            }
            paths[coll] = {
                "post": {"operationId": _op_id(rt, "create", rt.namespaced), "parameters": q,
                         "requestBody": {"content": {"*/*": ref}, "required": True},
                         "responses": {"201": resp["200"]}, "x-kubernetes-action": "post",
                         "x-kubernetes-group-version-kind": gvk},
                "parameters": params[1:],
            }
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.31.4"},
                "paths": paths, "components": {"schemas": schemas}}

    def _schema(self, rt: ResourceType) -> dict[str, Any]:
        if rt.custom and rt.schema:
            s = json.loads(json.dumps(rt.schema))
            s.setdefault("type", "object")
            props = s.setdefault("properties", {})
            props.setdefault("apiVersion", {
                "type": "string", "description": "APIVersion defines the versioned schema of "
                                                 "this representation of an object."})
            props.setdefault("kind", {"type": "string", "description": "Kind is a string value "
                                      "representing the REST resource this object represents."})
            props["metadata"] = {"allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META}"}],
                                 "description": "Standard object's metadata."}
            return s  # type: ignore[no-any-return]
        return {"type": "object", "description": f"{rt.kind} ({rt.api_version})",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META}"}]}}}


# ------------------------------------------------------------------ /openapi/v2
# what client-go asks for, and what kube-openapi's handler answers it with
V2_PROTO_ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
V2_PROTO_MEDIA = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

_PB_SCALAR: dict[str, dict[str, Any]] = {
    "string": {"type": "string"}, "bool": {"type": "boolean"},
    "int32": {"type": "integer", "format": "int32"},
    "int64": {"type": "integer", "format": "int64"},
    "uint32": {"type": "integer", "format": "int32"},
    "uint64": {"type": "integer", "format": "int64"},
    "double": {"type": "number", "format": "double"},
    "float": {"type": "number", "format": "double"},
    "bytes": {"type": "string", "format": "byte"},
}
# types whose JSON is not their protobuf message (apimachinery's OpenAPIDefinition overrides)
_PB_SPECIAL: dict[str, dict[str, Any]] = {
    "meta.v1.Time": {"type": "string", "format": "date-time"},
    "meta.v1.MicroTime": {"type": "string", "format": "date-time"},
    "api.resource.Quantity": {"type": "string"},
    "util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
    "runtime.RawExtension": {"type": "object"},
    "meta.v1.FieldsV1": {"type": "object"},
}


def _def_name(msg: str) -> str:
    head = msg.split(".", 1)[0]
    if head in ("meta",):
        return f"io.k8s.apimachinery.pkg.apis.{msg}"
    if head in ("api", "util", "runtime"):
        return f"io.k8s.apimachinery.pkg.{msg}"
    return f"io.k8s.api.{msg}"


def _pb_ref(t: str, need: set[str]) -> dict[str, Any]:
    if t in _PB_SCALAR:
        return dict(_PB_SCALAR[t])
    need.add(t)
    return {"$ref": f"#/definitions/{_def_name(t)}"}


def _pb_definition(msg: str, need: set[str]) -> dict[str, Any]:
    if msg in _PB_SPECIAL:
        return dict(_PB_SPECIAL[msg])
    if msg in LISTS:
        return {"type": "array", "items": {"type": "string"}}
    fields = MESSAGES.get(msg)
    if fields is None:
        return {"type": "object"}
    props: dict[str, Any] = {}
    for _num, (name, flags, typ) in sorted(fields.items()):
        if "i" in flags:
            inner = _pb_definition(typ, need)
            props.update(inner.get("properties") or {})
            continue
        if "m" in flags:
            _k, _, val = typ.partition(",")
            sch: dict[str, Any] = {"type": "object", "additionalProperties": _pb_ref(val, need)}
        elif "r" in flags and typ != "bytes":
            sch = {"type": "array", "items": _pb_ref(typ, need)}
        else:
            sch = _pb_ref(typ, need)
        props[name] = sch
    return {"type": "object", "properties": props}


def _v2_structural(s: Any) -> Any:
    """A CRD schema as ToStructuralOpenAPIV2 leaves it (no oneOf/anyOf/allOf/not, nullable and
    preserve-unknown fields without type or properties)."""
    if not isinstance(s, dict):
        return s
    out = {k: v for k, v in s.items() if k not in ("allOf", "anyOf", "oneOf", "not", "default",
                                                   "example", "x-kubernetes-validations")}
    if out.pop("nullable", False):
        for k in ("type", "items", "properties"):
            out.pop(k, None)
    if out.get("x-kubernetes-preserve-unknown-fields"):
        out.pop("items", None)
        out.pop("properties", None)
        if out.get("type") == "object":
            out.pop("type")
    if out.get("type") == "array" and "items" not in out:
        out.pop("type")
    if isinstance(out.get("properties"), dict):
        props = out["properties"]
        out["properties"] = {k: _v2_structural(v) for k, v in props.items()}
        nullable = {k for k, v in props.items() if isinstance(v, dict) and v.get("nullable")}
        if nullable and isinstance(out.get("required"), list):
            out["required"] = [r for r in out["required"] if r not in nullable]
            if not out["required"]:
                out.pop("required")
    if isinstance(out.get("items"), dict):
        out["items"] = _v2_structural(out["items"])
    ap = out.get("additionalProperties")
    if isinstance(ap, dict):
        out["additionalProperties"] = _v2_structural(ap)
        if ap.get("nullable"):
            out.pop("required", None)
    return out


class OpenAPIV2:
    """``/openapi/v2``: one document for every served kind, rebuilt per registry generation."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._gen = -1
        self._json = b""
        self._pb = b""
        self._etag = ""

    def _refresh(self) -> None:
        with self._lock:
            if self._gen == self.registry.generation and self._json:
                return
            gen = self.registry.generation
            doc = self.document()
            self._json = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
            self._pb = encode_document(doc)
            self._etag = '"' + hashlib.sha512(self._json).hexdigest()[:64].upper() + '"'
            self._gen = gen

    def render(self, protobuf: bool) -> tuple[bytes, str]:
        """(body, ETag)."""
        self._refresh()
        return (self._pb if protobuf else self._json), self._etag

    def document(self) -> dict[str, Any]:
        defs: dict[str, Any] = {}
        paths: dict[str, Any] = {}
        need: set[str] = set()
        done: set[str] = set()
        rts = sorted(self.registry.all(), key=lambda r: (r.group, r.version, r.plural))
        for rt in rts:
            gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
            if rt.custom:
                name = _schema_name(rt)
                sch = _v2_structural(json_copy_any(rt.schema or {"type": "object"}))
                sch.setdefault("type", "object")
                props = sch.setdefault("properties", {})
                props.setdefault("apiVersion", {"type": "string"})
                props.setdefault("kind", {"type": "string"})
                props["metadata"] = {"$ref": f"#/definitions/{_def_name('meta.v1.ObjectMeta')}"}
                need.add("meta.v1.ObjectMeta")
            else:
                from .protobuf import message_for

                msg = message_for(rt.api_version, rt.kind)
                if msg is None:
                    continue
                name = _def_name(msg)
                sch = _pb_definition(msg, need)
                done.add(msg)
                sch.setdefault("properties", {})
                sch["properties"].setdefault("apiVersion", {"type": "string"})
                sch["properties"].setdefault("kind", {"type": "string"})
            prev = defs.get(name)
            gvks = (prev or {}).get("x-kubernetes-group-version-kind", [])
            sch["x-kubernetes-group-version-kind"] = gvks + [gvk]
            defs[name] = sch
            prefix = "/" + _gv_path(rt.group, rt.version)
            item = (f"{prefix}/namespaces/{{namespace}}/{rt.plural}/{{name}}" if rt.namespaced
                    else f"{prefix}/{rt.plural}/{{name}}")
            params = [{"name": n, "in": "query", "type": "string", "uniqueItems": True}
                      for n in ("dryRun", "fieldManager", "fieldValidation")]
            paths[item] = {"patch": {
                "operationId": _op_id(rt, "patch", rt.namespaced),
                "consumes": ["application/json-patch+json", "application/merge-patch+json",
                             "application/apply-patch+yaml"],
                "parameters": [{"name": "body", "in": "body", "required": True,
                                "schema": {"type": "object"}}] + params,
                "responses": {"200": {"description": "OK",
                                      "schema": {"$ref": f"#/definitions/{name}"}}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk}}
        while need - done:
            msg = (need - done).pop()
            done.add(msg)
            defs.setdefault(_def_name(msg), _pb_definition(msg, need))
        return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.35.4"},
                "paths": paths, "definitions": defs}


def json_copy_any(v: Any) -> Any:
    return json.loads(json.dumps(v))


# gnostic openapi_v2 protobuf (google/gnostic-models openapiv2/OpenAPIv2.proto)
def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _f_len(num: int, data: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def _f_str(num: int, s: str) -> bytes:
    return _f_len(num, s.encode()) if s else b""


def _f_bool(num: int, b: bool) -> bytes:
    return _varint(num << 3) + b"\x01" if b else b""


def _f_int(num: int, n: int) -> bytes:
    return _varint(num << 3) + _varint(n) if n else b""


def _f_double(num: int, d: float) -> bytes:
    import struct

    return _varint(num << 3 | 1) + struct.pack("<d", float(d))


def _any_yaml(v: Any) -> bytes:
    import yaml

    return _f_str(2, yaml.safe_dump(v, default_flow_style=False))


def _named_any(name: str, v: Any) -> bytes:
    return _f_str(1, name) + _f_len(2, _any_yaml(v))


def _schema_pb(s: dict[str, Any]) -> bytes:  # noqa: C901
    out = bytearray()
    out += _f_str(1, s.get("$ref", ""))
    out += _f_str(2, s.get("format", "") if isinstance(s.get("format"), str) else "")
    out += _f_str(4, s.get("description", "") if isinstance(s.get("description"), str) else "")
    for num, key in ((6, "multipleOf"), (7, "maximum"), (9, "minimum")):
        if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool):
            out += _f_double(num, s[key])
    out += _f_bool(8, s.get("exclusiveMaximum") is True)
    out += _f_bool(10, s.get("exclusiveMinimum") is True)
    for num, key in ((11, "maxLength"), (12, "minLength"), (14, "maxItems"), (15, "minItems"),
                     (17, "maxProperties"), (18, "minProperties")):
        if isinstance(s.get(key), int) and not isinstance(s.get(key), bool):
            out += _f_int(num, s[key])
    out += _f_str(13, s.get("pattern", "") if isinstance(s.get("pattern"), str) else "")
    for r in s.get("required") or []:
        out += _f_str(19, str(r))
    for e in s.get("enum") or []:
        out += _f_len(20, _any_yaml(e))
    ap = s.get("additionalProperties")
    if isinstance(ap, dict):
        out += _f_len(21, _f_len(1, _schema_pb(ap)))
    elif isinstance(ap, bool):
        out += _f_len(21, _varint(2 << 3) + (b"\x01" if ap else b"\x00"))
    t = s.get("type")
    if isinstance(t, str) and t:
        out += _f_len(22, _f_str(1, t))
    if isinstance(s.get("items"), dict):
        out += _f_len(23, _f_len(1, _schema_pb(s["items"])))
    props = s.get("properties")
    if isinstance(props, dict):
        body = b"".join(_f_len(1, _f_str(1, k) + _f_len(2, _schema_pb(v)))
                        for k, v in props.items() if isinstance(v, dict))
        out += _f_len(25, body)
    for k, v in s.items():
        if k.startswith("x-"):
            out += _f_len(31, _named_any(k, v))
    return bytes(out)


def _operation_pb(op: dict[str, Any]) -> bytes:
    out = bytearray()
    out += _f_str(5, op.get("operationId", ""))
    for c in op.get("consumes") or []:
        out += _f_str(7, c)
    for p in op.get("parameters") or []:
        if p.get("in") == "body":
            body = (_f_str(2, p["name"]) + _f_str(3, "body") + _f_bool(4, bool(p.get("required")))
                    + _f_len(5, _schema_pb(p.get("schema") or {})))
            param = _f_len(1, body)
        else:
            q = (_f_str(2, "query") + _f_str(4, p["name"]) + _f_str(6, p.get("type", "string"))
                 + _f_bool(20, bool(p.get("uniqueItems"))))
            param = _f_len(2, _f_len(3, q))
        out += _f_len(8, _f_len(1, param))
    resps = b""
    for code, r in (op.get("responses") or {}).items():
        resp = _f_str(1, r.get("description", ""))
        if isinstance(r.get("schema"), dict):
            resp += _f_len(2, _f_len(1, _schema_pb(r["schema"])))
        resps += _f_len(1, _f_str(1, code) + _f_len(2, _f_len(1, resp)))
    out += _f_len(9, resps)
    for k, v in op.items():
        if k.startswith("x-"):
            out += _f_len(13, _named_any(k, v))
    return bytes(out)


def encode_document(doc: dict[str, Any]) -> bytes:
    """A Swagger 2.0 document (as produced by :meth:`OpenAPIV2.document`) as gnostic's
    ``openapi_v2.Document`` protobuf."""
    out = bytearray()
    out += _f_str(1, doc.get("swagger", "2.0"))
    info = doc.get("info") or {}
    out += _f_len(2, _f_str(1, info.get("title", "")) + _f_str(2, info.get("version", "")))
    paths = b""
    for name, item in (doc.get("paths") or {}).items():
        pi = bytearray()
        for num, verb in ((2, "get"), (3, "put"), (4, "post"), (5, "delete"), (8, "patch")):
            if isinstance(item.get(verb), dict):
                pi += _f_len(num, _operation_pb(item[verb]))
        paths += _f_len(2, _f_str(1, name) + _f_len(2, bytes(pi)))
    out += _f_len(8, paths)
    defs = b"".join(_f_len(1, _f_str(1, k) + _f_len(2, _schema_pb(v)))
                    for k, v in (doc.get("definitions") or {}).items())
    out += _f_len(9, defs)
    return bytes(out)


# ------------------------------------------------------------------ built-in strict decoding
def _fields_by_json(msg: str) -> dict[str, tuple[str, str]] | None:
    fields = MESSAGES.get(msg)
    if fields is None or msg in _PB_SPECIAL:
        return None
    out: dict[str, tuple[str, str]] = {}
    for name, flags, typ in fields.values():
        if "i" in flags:
            out.update(_fields_by_json(typ) or {})
        else:
            out[name] = (flags, typ)
    return out


_FIELDS_CACHE: dict[str, dict[str, tuple[str, str]] | None] = {}


def unknown_builtin_fields(obj: Any, msg: str, path: str = "", drop: bool = True) -> list[str]:
    """The fields of a built-in object its Go type does not have (what the strict JSON decoder
    reports as ``unknown field "<path>"``); removed from ``obj`` when ``drop`` (what the
    non-strict decoder does)."""
    if type(obj) is not dict:
        return []
    fields = _FIELDS_CACHE.get(msg, False)
    if fields is False:
        fields = _FIELDS_CACHE[msg] = _fields_by_json(msg)
    if fields is None:
        return []
    out: list[str] = []
    for k in list(obj):
        if not path and k in ("apiVersion", "kind"):
            continue
        f = fields.get(k)
        p = f"{path}.{k}" if path else k
        if f is None:
            out.append(p)
            if drop:
                del obj[k]
            continue
        flags, typ = f
        v = obj[k]
        if typ in _PB_SCALAR or typ in _PB_SPECIAL or typ in LISTS:
            continue
        if "m" in flags:
            val = typ.partition(",")[2]
            if val not in _PB_SCALAR and type(v) is dict:
                for mk, mv in v.items():
                    out.extend(unknown_builtin_fields(mv, val, f"{p}[{mk}]", drop))
        elif "r" in flags:
            if type(v) is list:
                for i, it in enumerate(v):
                    out.extend(unknown_builtin_fields(it, typ, f"{p}[{i}]", drop))
        else:
            out.extend(unknown_builtin_fields(v, typ, p, drop))
    return out
