"""CustomResourceDefinitions (``apiextensions.k8s.io/v1``) sent as protobuf, the way client-go
clients such as system-upgrade-controller create and update their CRDs at start.

The bodies are built here on the wire the way gogo-protobuf marshals the Go types of
k8s.io/apiextensions-apiserver v0.36.3 (``pkg/apis/apiextensions/v1/generated.pb.go``): fields
in field-number order, every non-pointer field written even when zero, map entries sorted by
key. The expected JSON is what ``encoding/json`` makes of the same object, including the
``MarshalJSON`` of ``JSON`` and the ``JSONSchemaPropsOr*`` unions (``marshal.go``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from harvester_sim.api import protobuf as pb

PB = "application/vnd.kubernetes.protobuf"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


# ------------------------------------------------------------------ wire (tests only)
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _key(num: int, wt: int) -> bytes:
    return _varint(num << 3 | wt)


def _len(num: int, data: bytes) -> bytes:
    return _key(num, 2) + _varint(len(data)) + data


def _s(num: int, text: str) -> bytes:
    return _len(num, text.encode())


def _b(num: int, value: bool) -> bytes:
    return _key(num, 0) + _varint(int(value))


def _i(num: int, value: int) -> bytes:
    return _key(num, 0) + _varint(value)


def _d(num: int, value: float) -> bytes:
    import struct

    return _key(num, 1) + struct.pack("<d", value)


def _map(num: int, entries: dict[str, bytes]) -> bytes:
    return b"".join(_len(num, _s(1, k) + _len(2, v)) for k, v in sorted(entries.items()))


def _envelope(raw: bytes) -> bytes:
    tm = _s(1, "apiextensions.k8s.io/v1") + _s(2, "CustomResourceDefinition")
    return pb.MAGIC + _len(1, tm) + _len(2, raw)


# ------------------------------------------------------------------ Go types, as gogo writes
def props(*, type_: str = "", format_: str = "", description: str = "", pattern: str = "",
          nullable: bool = False, int_or_string: bool = False, extra: bytes = b"",
          properties: dict[str, bytes] | None = None,
          dependencies: dict[str, bytes] | None = None) -> bytes:
    """JSONSchemaProps: the non-pointer fields always, ``extra`` for pointer/repeated ones
    (each already encoded), merged in field-number order by the caller's choice of numbers."""
    fields: list[tuple[int, bytes]] = [
        (1, _s(1, "")), (2, _s(2, "")), (4, _s(4, description)), (5, _s(5, type_)),
        (6, _s(6, format_)), (7, _s(7, "")), (10, _b(10, False)), (12, _b(12, False)),
        (15, _s(15, pattern)), (18, _b(18, False)), (37, _b(37, nullable)),
        (39, _b(39, False)), (40, _b(40, int_or_string)),
    ]
    if properties:
        fields.append((29, _map(29, properties)))
    if dependencies:
        fields.append((32, _map(32, dependencies)))
    body = b"".join(f for _, f in sorted(fields, key=lambda x: x[0]))
    return body + extra


def json_value(num: int, raw: str) -> bytes:
    return _len(num, _len(1, raw.encode()))  # JSON{Raw}


def names(plural: str, singular: str, kind: str, list_kind: str,
          short: tuple[str, ...] = ()) -> bytes:
    return (_s(1, plural) + _s(2, singular) + b"".join(_s(3, x) for x in short) +
            _s(4, kind) + _s(5, list_kind))


def object_meta(name: str, resource_version: str = "") -> bytes:
    # ObjectMeta: name, generateName, namespace, selfLink, uid, resourceVersion, generation,
    # creationTimestamp (an empty Time), as gogo writes a fresh object
    return (_s(1, name) + _s(2, "") + _s(3, "") + _s(4, "") + _s(5, "") +
            _s(6, resource_version) + _i(7, 0) + _len(8, b""))


def plan_schema(concurrency_description: str) -> bytes:
    toleration = props(type_="object", properties={"key": props(type_="string"),
                                                   "operator": props(type_="string")})
    spec_props = {
        "concurrency": props(type_="integer", format_="int64",
                             description=concurrency_description,
                             extra=json_value(8, "1") + _d(11, 1.0)),
        "upgrade": props(type_="object", extra=_b(38, True)),
        "tolerations": props(type_="array", extra=_len(24, _len(1, toleration))),
        "nodeSelector": props(type_="object", extra=_len(30, _b(1, True) +
                                                          _len(2, props(type_="string")))),
        "closed": props(type_="object", extra=_len(30, _b(1, False))),
        "mode": props(type_="string", extra=json_value(20, '"drain"') +
                      json_value(20, '"cordon"')),
        "pair": props(type_="array", extra=_len(24, _len(2, props(type_="string")) +
                                                  _len(2, props(type_="integer")))),
        "window": props(type_="object", dependencies={
            "days": _s(2, "startTime") + _s(2, "endTime"),
            "timeZone": _len(1, props(extra=_s(23, "days"))),
        }),
        "port": props(int_or_string=True, extra=_len(27, props(type_="integer")) +
                      _len(27, props(type_="string"))),
        "labels": props(type_="object", extra=_len(44, _s(1, "size(self) < 10") +
                                                    _s(2, "") + _s(3, "") + _s(5, ""))),
    }
    spec = props(type_="object", properties=spec_props, extra=_s(23, "upgrade"))
    status = props(type_="object", nullable=True, extra=_b(38, True))
    return props(type_="object", properties={"spec": spec, "status": status})


def crd_body(description: str, resource_version: str = "") -> bytes:
    column = (_s(1, "Image") + _s(2, "string") + _s(3, "") + _s(4, "") + _i(5, 0) +
              _s(6, ".spec.upgrade.image"))
    version = (_s(1, "v1") + _b(2, True) + _b(3, True) +
               _len(4, _len(1, plan_schema(description))) +
               _len(5, _len(1, b"")) + _len(6, column) + _b(7, False))
    spec = (_s(1, "upgrade.pbcrd.example.com") +
            _len(3, names("plans", "plan", "Plan", "PlanList", ("pl",))) +
            _s(4, "Namespaced") + _len(7, version) + _b(10, False))
    status = _len(2, names("", "", "", ""))  # an empty status: acceptedNames always written
    return _envelope(_len(1, object_meta("plans.upgrade.pbcrd.example.com", resource_version))
                     + _len(2, spec) + _len(3, status))


def expected_schema(description: str) -> dict[str, Any]:
    return {"type": "object", "properties": {
        "spec": {"type": "object", "required": ["upgrade"], "properties": {
            "concurrency": {"type": "integer", "format": "int64", "description": description,
                            "default": 1, "minimum": 1.0},
            "upgrade": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "tolerations": {"type": "array", "items": {"type": "object", "properties": {
                "key": {"type": "string"}, "operator": {"type": "string"}}}},
            "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
            "closed": {"type": "object", "additionalProperties": False},
            "mode": {"type": "string", "enum": ["drain", "cordon"]},
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
            "window": {"type": "object", "dependencies": {
                "days": ["startTime", "endTime"], "timeZone": {"required": ["days"]}}},
            "port": {"x-kubernetes-int-or-string": True,
                     "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "labels": {"type": "object",
                       "x-kubernetes-validations": [{"rule": "size(self) < 10"}]},
        }},
        "status": {"type": "object", "nullable": True,
                   "x-kubernetes-preserve-unknown-fields": True},
    }}


# ------------------------------------------------------------------ decoder
def test_crd_decodes_as_its_json_encoding() -> None:
    obj = pb.decode_object(crd_body("how many nodes at once"))
    assert obj["kind"] == "CustomResourceDefinition"
    assert obj["apiVersion"] == "apiextensions.k8s.io/v1"
    assert obj["metadata"] == {"name": "plans.upgrade.pbcrd.example.com"}
    spec = obj["spec"]
    assert spec["group"] == "upgrade.pbcrd.example.com" and spec["scope"] == "Namespaced"
    assert spec["names"] == {"plural": "plans", "singular": "plan", "shortNames": ["pl"],
                             "kind": "Plan", "listKind": "PlanList"}
    assert "preserveUnknownFields" not in spec  # false, omitempty
    v = spec["versions"][0]
    assert v["subresources"] == {"status": {}}  # an empty message that is set
    assert v["additionalPrinterColumns"] == [{"name": "Image", "type": "string",
                                              "jsonPath": ".spec.upgrade.image"}]
    assert "deprecated" not in v
    assert v["schema"]["openAPIV3Schema"] == expected_schema("how many nodes at once")
    # Names' plural and kind have no omitempty: an empty acceptedNames keeps them
    assert obj["status"] == {"acceptedNames": {"plural": "", "kind": ""}}


def test_json_schema_unions_in_their_json_forms() -> None:
    msg = "apiextensions.v1.JSONSchemaProps"
    # JSONSchemaPropsOrBool: a schema wins; else the boolean (false when nothing is set)
    assert pb.decode_message(_len(30, b""), msg) == {"additionalProperties": False}
    assert pb.decode_message(_len(33, _b(1, True)), msg) == {"additionalItems": True}
    # JSONSchemaPropsOrArray: the array when it has items, else the schema
    one = pb.decode_message(_len(24, _len(1, props(type_="string"))), msg)
    assert one == {"items": {"type": "string"}}
    # JSONSchemaPropsOrStringArray: the strings, else the schema, else null (omitted)
    deps = pb.decode_message(_map(32, {"a": _s(2, "b"), "c": b""}), msg)
    assert deps == {"dependencies": {"a": ["b"], "c": None}}
    # JSON: the raw bytes as a JSON value, any type
    ex = pb.decode_message(json_value(36, '{"k": [1, "x", null]}') + json_value(8, "false"),
                           msg)
    assert ex == {"example": {"k": [1, "x", None]}, "default": False}
    with pytest.raises(pb.ProtobufError, match="raw content is not JSON"):
        pb.decode_message(json_value(8, "{nope"), msg)


# ------------------------------------------------------------------ server
def _wait_served(raw: Any, path: str) -> None:
    deadline = time.monotonic() + 10
    while raw("GET", path).status != 200:
        assert time.monotonic() < deadline, f"{path} never served"
        time.sleep(0.1)


def test_server_creates_and_updates_a_crd_from_protobuf(raw: Any, sim: Any) -> None:
    name = "plans.upgrade.pbcrd.example.com"
    hdrs = {"Accept": f"{PB}, application/json"}
    r = raw("POST", CRD_PATH, crd_body("first"), ctype=PB, headers=hdrs)
    assert r.status == 201, r.body
    created = r.json()
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
    got = raw("GET", f"{CRD_PATH}/{name}").json()
    assert got["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == expected_schema("first")
    # an update as client-go sends it: the object read back, changed, with its resourceVersion
    rv = got["metadata"]["resourceVersion"]
    r = raw("PUT", f"{CRD_PATH}/{name}", crd_body("second", rv), ctype=PB, headers=hdrs)
    assert r.status == 200, r.body
    assert r.json()["metadata"]["generation"] == 2
    got = raw("GET", f"{CRD_PATH}/{name}").json()
    assert got["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == expected_schema("second")
    # a stale resourceVersion is a conflict, as for any update
    r = raw("PUT", f"{CRD_PATH}/{name}", crd_body("third", rv), ctype=PB, headers=hdrs)
    assert r.status == 409, r.body
    # the decoded schema is the one custom resources get: the JSON default (a number) applies
    path = "/apis/upgrade.pbcrd.example.com/v1/namespaces/default/plans"
    _wait_served(raw, path)
    r = raw("POST", path, {"apiVersion": "upgrade.pbcrd.example.com/v1", "kind": "Plan",
                           "metadata": {"name": "p1"},
                           "spec": {"upgrade": {"image": "x"}, "closed": {"no": 1}}})
    assert r.status == 201, r.body
    spec = r.json()["spec"]
    assert spec["concurrency"] == 1
    assert spec["closed"] == {}  # additionalProperties: false prunes
