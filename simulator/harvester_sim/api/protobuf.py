"""Decode ``application/vnd.kubernetes.protobuf`` request bodies into JSON-shaped dicts.

kubectl >= 1.35 sends built-in objects as protobuf: the magic ``k8s\\x00`` and then a
``runtime.Unknown`` message (typeMeta {apiVersion, kind}, raw, contentEncoding, contentType)
whose ``raw`` is the object encoded per the ``generated.proto`` of k8s.io/api (and of
k8s.io/apiextensions-apiserver for CustomResourceDefinitions, which client-go clients such as
system-upgrade-controller also send as protobuf). This module
reads the protobuf wire format itself (varint, 64-bit, length-delimited, 32-bit) and walks the
schema table in :mod:`.pbschema` (generated from upstream sources) to produce the dict that
the JSON encoding of the same object would give: JSON field names, ``omitempty`` honoured,
``Time`` as RFC 3339, ``IntOrString`` as int or str, ``Quantity`` as its string, ``[]byte``
as base64, inline (embedded) structs merged into their parent, and the JSON-schema unions of
``apiextensions.k8s.io/v1`` CustomResourceDefinitions in their ``MarshalJSON`` forms.

Unknown field numbers are skipped (logged once per message and number); malformed input
raises :class:`ProtobufError`. Only decoding is provided: responses stay JSON.
"""

from __future__ import annotations

import base64
import json
import logging
import struct
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from .pbschema import APIEXTENSIONS, LISTS, MESSAGES

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
MAX_DEPTH = 64

_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5
_VARINT_TYPES = frozenset({"int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool"})
_I64_TYPES = {"double": "<d", "fixed64": "<Q", "sfixed64": "<q"}
_I32_TYPES = {"float": "<f", "fixed32": "<I", "sfixed32": "<i"}
_SCALARS = _VARINT_TYPES | set(_I64_TYPES) | set(_I32_TYPES) | {"string", "bytes"}
_ZERO: dict[str, Any] = {"string": "", "bytes": "", "bool": False, "double": 0.0,
                         "float": 0.0}

_warned: set[tuple[str, int]] = set()


class ProtobufError(ValueError):
    """The body is not a well-formed protobuf message of the expected shape."""


# ------------------------------------------------------------------ wire format
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("unexpected EOF in varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise ProtobufError("varint overflow")


def iter_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield (field number, wire type, value) for each field of one message.

    Varints are returned as unsigned ints, fixed32/fixed64 as unsigned ints, length-delimited
    fields as bytes. Groups (wire types 3/4, unused by Kubernetes) are rejected.
    """
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise ProtobufError("illegal field number 0")
        if wt == _VARINT:
            val, pos = _varint(buf, pos)
            yield num, wt, val
        elif wt == _I64:
            if pos + 8 > end:
                raise ProtobufError("unexpected EOF in fixed64")
            yield num, wt, int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wt == _LEN:
            n, pos = _varint(buf, pos)
            if pos + n > end:
                raise ProtobufError("unexpected EOF in length-delimited field")
            yield num, wt, buf[pos:pos + n]
            pos += n
        elif wt == _I32:
            if pos + 4 > end:
                raise ProtobufError("unexpected EOF in fixed32")
            yield num, wt, int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wt} for field {num}")


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _scalar(typ: str, wt: int, val: int | bytes) -> Any:
    """One scalar value (never packed) of the declared proto type."""
    if typ in _VARINT_TYPES:
        assert isinstance(val, int) and wt == _VARINT
        if typ == "bool":
            return val != 0
        if typ in ("int32", "int64"):
            v = _signed64(val)
            return v if typ == "int64" else ((v + (1 << 31)) % (1 << 32)) - (1 << 31)
        if typ in ("sint32", "sint64"):
            return (val >> 1) ^ -(val & 1)
        return val if typ == "uint64" else val & 0xFFFFFFFF
    if typ in _I64_TYPES:
        assert isinstance(val, int) and wt == _I64
        return struct.unpack(_I64_TYPES[typ], val.to_bytes(8, "little"))[0]
    if typ in _I32_TYPES:
        assert isinstance(val, int) and wt == _I32
        return struct.unpack(_I32_TYPES[typ], val.to_bytes(4, "little"))[0]
    assert isinstance(val, bytes) and wt == _LEN
    if typ == "string":
        try:
            return val.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtobufError(f"invalid UTF-8 in a string field: {exc}") from exc
    return base64.b64encode(val).decode("ascii")  # bytes: JSON form of a Go []byte


def _wire_of(typ: str) -> int:
    if typ in _VARINT_TYPES:
        return _VARINT
    if typ in _I64_TYPES:
        return _I64
    if typ in _I32_TYPES:
        return _I32
    return _LEN


def _packed(typ: str, val: bytes) -> list[Any]:
    """A packed repeated numeric field."""
    out: list[Any] = []
    wt = _wire_of(typ)
    pos = 0
    while pos < len(val):
        if wt == _VARINT:
            v, pos = _varint(val, pos)
            out.append(_scalar(typ, wt, v))
        else:
            size = 8 if wt == _I64 else 4
            if pos + size > len(val):
                raise ProtobufError("unexpected EOF in packed field")
            out.append(_scalar(typ, wt, int.from_bytes(val[pos:pos + size], "little")))
            pos += size
    return out


# ------------------------------------------------------------------ well-known k8s types
def _go_duration(ns: int) -> str:
    """time.Duration.String()."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns / size) + unit
    h, rem = divmod(ns, 3_600_000_000_000)
    m, rem = divmod(rem, 60_000_000_000)
    s = _trim(rem / 1e9) + "s"
    if h:
        return f"{sign}{h}h{m}m{s}"
    if m:
        return f"{sign}{m}m{s}"
    return sign + s


def _trim(v: float) -> str:
    text = f"{v:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def _time(d: dict[str, Any], micro: bool) -> str | None:
    secs, nanos = int(d.get("seconds") or 0), int(d.get("nanos") or 0)
    if secs == 0 and nanos == 0:
        return None  # the zero Time (marshalled as an empty message): JSON null, omitted
    dt = datetime.fromtimestamp(secs, tz=timezone.utc)
    if micro:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{nanos // 1000:06d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def _raw_json(raw: bytes, what: str, depth: int) -> Any:
    if not raw:
        return None
    if raw.startswith(MAGIC):
        return decode_object(raw, depth=depth + 1)
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ProtobufError(f"{what}: raw content is not JSON: {exc}") from exc


# ------------------------------------------------------------------ messages
def _special(msg: str, buf: bytes, depth: int) -> tuple[bool, Any]:
    """(handled, value) for the messages whose JSON form is not an object."""
    if msg in ("meta.v1.Time", "meta.v1.MicroTime"):
        return True, _time(decode_message(buf, msg, depth), msg == "meta.v1.MicroTime")
    if msg == "meta.v1.Duration":
        d = {n: _scalar("int64", wt, v) for n, wt, v in iter_fields(buf) if wt == _VARINT}
        return True, _go_duration(int(d.get(1, 0)))
    if msg == "api.resource.Quantity":
        d = decode_message(buf, msg, depth)
        return True, d.get("string") or "0"
    if msg == "util.intstr.IntOrString":
        d = decode_message(buf, msg, depth)
        if d.get("type") == 1:
            return True, d.get("strVal", "")
        return True, d.get("intVal", 0)
    if msg in ("meta.v1.FieldsV1", "runtime.RawExtension"):
        raw = b""
        for n, wt, v in iter_fields(buf):
            if n == 1 and wt == _LEN:
                assert isinstance(v, bytes)
                raw = v
        return True, _raw_json(raw, msg, depth)
    if msg in LISTS:
        items = decode_message(buf, msg, depth).get("items") or []
        return True, items
    if msg.startswith("apiextensions.v1.JSON"):
        return _json_schema_special(msg, buf, depth)
    return False, None


def _json_schema_special(msg: str, buf: bytes, depth: int) -> tuple[bool, Any]:
    """The apiextensions/v1 types with their own ``MarshalJSON`` (k8s.io/apiextensions-apiserver
    ``pkg/apis/apiextensions/v1/marshal.go``): ``JSON`` is its raw bytes (``null`` when
    empty); ``JSONSchemaPropsOrArray`` the array when it has items, else the schema;
    ``JSONSchemaPropsOrBool`` the schema when set, else the boolean;
    ``JSONSchemaPropsOrStringArray`` the strings when there are any, else the schema, else
    ``null``."""
    if msg == "apiextensions.v1.JSON":
        raw = b""
        for n, wt, v in iter_fields(buf):
            if n == 1 and wt == _LEN:
                assert isinstance(v, bytes)
                raw = v
        if not raw:
            return True, None
        try:
            return True, json.loads(raw)
        except ValueError as exc:
            raise ProtobufError(f"{msg}: raw content is not JSON: {exc}") from exc
    if msg == "apiextensions.v1.JSONSchemaPropsOrArray":
        d = decode_message(buf, msg, depth)
        return True, d["jSONSchemas"] if d.get("jSONSchemas") else d.get("schema")
    if msg == "apiextensions.v1.JSONSchemaPropsOrBool":
        d = decode_message(buf, msg, depth)
        return True, d["schema"] if "schema" in d else bool(d.get("allows"))
    if msg == "apiextensions.v1.JSONSchemaPropsOrStringArray":
        d = decode_message(buf, msg, depth)
        return True, d["property"] if d.get("property") else d.get("schema")
    return False, None


def _value(typ: str, wt: int, val: int | bytes, depth: int) -> Any:
    if typ in _SCALARS:
        return _scalar(typ, wt, val)
    assert isinstance(val, bytes)
    handled, out = _special(typ, val, depth + 1)
    if handled:
        return out
    return decode_message(val, typ, depth + 1)


def _zero_of(typ: str) -> Any:
    if typ in _ZERO:
        return _ZERO[typ]
    if typ in _SCALARS:
        return 0
    handled, out = _special(typ, b"", 0)
    return out if handled else {}


def _map_entry(types: str, buf: bytes, depth: int) -> tuple[Any, Any]:
    ktype, vtype = types.split(",")
    key: Any = None
    value: Any = None
    for n, wt, v in iter_fields(buf):
        if n == 1 and wt == _wire_of(ktype):
            key = _scalar(ktype, wt, v)
        elif n == 2 and (wt == _wire_of(vtype) or vtype not in _SCALARS and wt == _LEN):
            value = _value(vtype, wt, v, depth)
    if key is None:
        key = _zero_of(ktype)
    if value is None:
        value = _zero_of(vtype)
    return key, value


def _is_zero(v: Any) -> bool:
    return v is None or v is False or v == "" or (
        isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0)


def _skip(msg: str, num: int, why: str) -> None:
    if (msg, num) not in _warned:
        _warned.add((msg, num))
        log.warning("protobuf: skipping field %d of %s (%s)", num, msg, why)


def decode_message(buf: bytes, msg: str, depth: int = 0) -> dict[str, Any]:
    """Decode one message of the schema table into its JSON-shaped dict."""
    if depth > MAX_DEPTH:
        raise ProtobufError("message nesting too deep")
    schema = MESSAGES.get(msg) or APIEXTENSIONS.get(msg)
    if schema is None:
        raise ProtobufError(f"no protobuf schema for {msg}")
    out: dict[str, Any] = {}
    for num, wt, val in iter_fields(buf):
        field = schema.get(num)
        if field is None:
            _skip(msg, num, "unknown field number")
            continue
        name, flags, typ = field
        if name == "-":
            continue
        if "m" in flags:
            if wt != _LEN:
                _skip(msg, num, f"wire type {wt} for a map")
                continue
            assert isinstance(val, bytes)
            k, v = _map_entry(typ, val, depth + 1)
            out.setdefault(name, {})[str(k) if not isinstance(k, str) else k] = v
            continue
        expected = _wire_of(typ)
        if "r" in flags and typ in _SCALARS and expected != _LEN and wt == _LEN:
            assert isinstance(val, bytes)
            out.setdefault(name, []).extend(_packed(typ, val))
            continue
        if wt != expected:
            _skip(msg, num, f"wire type {wt}, expected {expected} for {typ}")
            continue
        v = _value(typ, wt, val, depth)
        if "r" in flags:
            out.setdefault(name, []).append(v)
        elif "i" in flags:
            if isinstance(v, dict):
                out.update(v)
        elif v is None or ("z" in flags and typ in _SCALARS and _is_zero(v)):
            # omitempty on a non-pointer: the Go marshaller always writes the field, JSON
            # drops the zero value (last one wins, as for any repeated scalar on the wire)
            out.pop(name, None)
        elif isinstance(v, dict) and isinstance(out.get(name), dict):
            out[name].update(v)  # a non-repeated message seen twice merges
        else:
            out[name] = v
    return out


# ------------------------------------------------------------------ objects
def _message_name(api_version: str, kind: str) -> str:
    group, _, version = api_version.rpartition("/")
    pkg = "core" if group == "" else group.split(".", 1)[0]
    return f"{pkg}.{version}.{kind}"


def message_for(api_version: str, kind: str) -> str | None:
    """The schema message of a built-in kind of k8s.io/api, or None when the table lacks it."""
    name = _message_name(api_version, kind)
    return name if name in MESSAGES else None


def decodable_message(api_version: str, kind: str) -> str | None:
    """The message a protobuf body of this kind decodes with: a kind of k8s.io/api, or an
    ``apiextensions.k8s.io`` kind (CustomResourceDefinition)."""
    name = _message_name(api_version, kind)
    return name if name in MESSAGES or name in APIEXTENSIONS else None


def unwrap(data: bytes) -> tuple[str, str, bytes]:
    """The ``k8s\\x00`` + runtime.Unknown envelope -> (apiVersion, kind, raw)."""
    if not data:
        raise ProtobufError("empty data")
    if not data.startswith(MAGIC):
        raise ProtobufError("provided data does not appear to be a protobuf message, "
                            "expected prefix [107 56 115 0]")
    if len(data) == len(MAGIC):
        raise ProtobufError("empty body")
    api_version = kind = ""
    raw = b""
    for num, wt, val in iter_fields(data[len(MAGIC):]):
        if num == 1 and wt == _LEN:
            assert isinstance(val, bytes)
            tm = decode_message(val, "runtime.TypeMeta", 1)
            api_version, kind = tm.get("apiVersion", ""), tm.get("kind", "")
        elif num == 2 and wt == _LEN:
            assert isinstance(val, bytes)
            raw = val
    return api_version, kind, raw


def decode_object(data: bytes, api_version: str = "", kind: str = "",
                  depth: int = 0) -> dict[str, Any]:
    """A whole protobuf request body -> the object as the JSON decoder would give it.

    ``api_version``/``kind`` are the defaults used when the envelope carries no type (the
    apiserver's "default GVK" of the endpoint).
    """
    av, k, raw = unwrap(data)
    av, k = av or api_version, k or kind
    if not av or not k:
        raise ProtobufError("Object 'Kind' is missing in '<protobuf encoded body - must "
                            "provide default type>'")
    msg = decodable_message(av, k)
    if msg is None:
        raise LookupError(f"no protobuf schema for {k} in {av}")
    obj = decode_message(raw, msg, depth)
    return {"kind": k, "apiVersion": av, **obj}
