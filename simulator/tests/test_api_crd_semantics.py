"""Custom resources as the real kube-apiserver (apiextensions-apiserver v0.35.4) treats them:
pruning, null pruning, defaulting, validation texts, the status subresource, no-op updates.

The CRDs are the tests' own, shaped like upstream ones (the ``Image`` one follows harvesterhci.io
VirtualMachineImage: a non-nullable ``storageClassParameters`` string map, an enum
``sourceType``, conditions in a status subresource). Expected texts are upstream's: the
kube-openapi ``in body`` messages inside apimachinery field errors, see
simulator/docs/api-fidelity.md for how each was settled.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

GROUP = "semantics.test.io"

IMAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["displayName", "sourceType"],
            "properties": {
                "displayName": {"type": "string", "maxLength": 8},
                "sourceType": {"type": "string", "enum": ["download", "upload"]},
                "url": {"type": "string"},
                "pvcName": {"type": "string", "pattern": "^[a-z0-9-]+$"},
                "retry": {"type": "integer", "default": 3, "minimum": 0, "maximum": 10},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0},
                "size": {"type": "integer", "format": "int32"},
                "port": {"x-kubernetes-int-or-string": True},
                "notAfter": {"type": "string", "format": "date-time"},
                "checksum": {"type": "string", "nullable": True},
                "backend": {"type": "string", "default": "backingimage"},
                "mode": {"type": "string", "nullable": True, "default": "auto"},
                "storageClassParameters": {"type": "object",
                                           "additionalProperties": {"type": "string"}},
                "tags": {"type": "array", "minItems": 1, "maxItems": 2,
                         "items": {"type": "string"}},
                "limits": {"type": "object", "maxProperties": 2,
                           "additionalProperties": {"type": "object", "properties": {
                               "value": {"type": "integer"},
                               "unit": {"type": "string", "default": "Gi"}}}},
                "disks": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {
                              "name": {"type": "string"},
                              "bus": {"type": "string", "default": "virtio"}}}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "options": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                            "properties": {"known": {"type": "object", "properties": {
                                "a": {"type": "string"}}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "progress": {"type": "integer"},
                "failed": {"type": "integer", "default": 0},
                "conditions": {"type": "array", "items": {"type": "object", "properties": {
                    "type": {"type": "string"}, "status": {"type": "string"}}}},
            },
        },
    },
}


def _crd(plural: str, kind: str, schema: dict[str, Any], status: bool) -> dict[str, Any]:
    version: dict[str, Any] = {"name": "v1beta1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema}}
    if status:
        version["subresources"] = {"status": {}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": plural[:-1], "kind": kind,
                               "listKind": f"{kind}List"},
                     "versions": [version]}}


@pytest.fixture(scope="module")
def crds(raw: Callable[..., Any]) -> None:
    for crd in (_crd("images", "Image", IMAGE_SCHEMA, True),
                _crd("notes", "Note", {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"text": {"type": "string"}}},
                    "status": {"type": "object", "properties": {
                        "seen": {"type": "boolean"}}}}}, False)):
        r = raw("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        assert r.status in (201, 409), r.body


def _url(ns: str, plural: str = "images", name: str = "", sub: str = "") -> str:
    base = f"/apis/{GROUP}/v1beta1/namespaces/{ns}/{plural}"
    return base + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


def _image(name: str, **spec: Any) -> dict[str, Any]:
    body = {"displayName": "img", "sourceType": "download", **spec}
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "Image",
            "metadata": {"name": name}, "spec": body}


def _name() -> str:
    return f"i-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------ decoding
def test_null_in_non_nullable_field_is_pruned(crds: None, raw: Any, ns: str) -> None:
    """What the real upgrade-toolkit sends for a VirtualMachineImage: 201, the key dropped."""
    r = raw("POST", _url(ns), _image(_name(), storageClassParameters=None, url=None))
    assert r.status == 201, r.body
    spec = r.json()["spec"]
    assert "storageClassParameters" not in spec and "url" not in spec
    assert "Warning" not in r.headers


def test_nulls_nullable_and_defaulted(crds: None, raw: Any, ns: str) -> None:
    r = raw("POST", _url(ns), _image(_name(), checksum=None, backend=None, mode=None,
                                     storageClassParameters={"a": None}))
    assert r.status == 201, r.body
    spec = r.json()["spec"]
    assert spec["checksum"] is None  # nullable: kept
    assert spec["backend"] == "backingimage"  # non-nullable with a default: defaulted
    assert spec["mode"] is None  # nullable with a default: the null stays
    assert spec["storageClassParameters"] == {}  # additionalProperties string: pruned


def test_unknown_fields_dropped_warned_or_rejected(crds: None, raw: Any, ns: str) -> None:
    name = _name()
    body = _image(name, bogus=1)
    body["metadata"]["color"] = "red"
    body["other"] = {"x": 1}
    r = raw("POST", _url(ns), body)
    assert r.status == 201, r.body
    assert "bogus" not in r.json()["spec"] and "other" not in r.json()
    assert "color" not in r.json()["metadata"]
    assert r.headers["Warning"] == ('299 - "unknown field \\"metadata.color\\"", '
                                    '299 - "unknown field \\"other\\"", '
                                    '299 - "unknown field \\"spec.bogus\\""')
    r = raw("POST", _url(ns) + "?fieldValidation=Strict", _image(_name(), bogus=1))
    assert r.status == 400
    assert r.json()["message"] == ('Image in version "v1beta1" cannot be handled as a Image: '
                                   'strict decoding error: unknown field "spec.bogus"')
    r = raw("POST", _url(ns) + "?fieldValidation=Ignore", _image(_name(), bogus=1))
    assert r.status == 201 and "Warning" not in r.headers


def test_preserve_unknown_fields(crds: None, raw: Any, ns: str) -> None:
    r = raw("POST", _url(ns), _image(_name(), extra={"any": {"thing": None}, "n": None},
                                     options={"free": 1, "known": {"a": "x", "b": "y"}}))
    assert r.status == 201, r.body
    spec = r.json()["spec"]
    assert spec["extra"] == {"any": {"thing": None}, "n": None}  # nulls stay too
    assert spec["options"] == {"free": 1, "known": {"a": "x"}}  # declared parts still pruned
    assert r.headers["Warning"] == '299 - "unknown field \\"spec.options.known.b\\""'


def test_embedded_resource_metadata(crds: None, raw: Any, ns: str) -> None:
    tmpl = {"apiVersion": "v1", "kind": "Pod", "spec": {"anything": True},
            "metadata": {"name": "p", "bogus": 1, "labels": {}, "creationTimestamp": None}}
    r = raw("POST", _url(ns), _image(_name(), template=tmpl))
    assert r.status == 201, r.body
    assert r.json()["spec"]["template"] == {"apiVersion": "v1", "kind": "Pod",
                                            "spec": {"anything": True},
                                            "metadata": {"name": "p"}}
    assert r.headers["Warning"] == '299 - "unknown field \\"spec.template.metadata.bogus\\""'
    name = _name()
    r = raw("POST", _url(ns), _image(name, template={"spec": {}}))
    assert r.status == 422
    assert r.json()["message"] == (
        f'Image.{GROUP} "{name}" is invalid: [spec.template.apiVersion: Required value, '
        'spec.template.kind: Required value]')


def test_defaults(crds: None, raw: Any, ns: str) -> None:
    r = raw("POST", _url(ns), _image(_name(), disks=[{"name": "a"}, {"name": "b", "bus": "sata"}],
                                     limits={"cpu": {"value": 2}}))
    assert r.status == 201, r.body
    spec = r.json()["spec"]
    assert spec["retry"] == 3 and spec["backend"] == "backingimage" and spec["mode"] == "auto"
    assert spec["disks"] == [{"name": "a", "bus": "virtio"}, {"name": "b", "bus": "sata"}]
    assert spec["limits"] == {"cpu": {"value": 2, "unit": "Gi"}}


# ------------------------------------------------------------------ validation
def _T(path: str, value: str, msg: str) -> dict[str, str]:  # noqa: N802
    return {"reason": "FieldValueTypeInvalid", "field": path,
            "message": f"Invalid value: {value}: {msg}"}


def _I(path: str, value: str, msg: str) -> dict[str, str]:  # noqa: N802
    return {"reason": "FieldValueInvalid", "field": path,
            "message": f"Invalid value: {value}: {msg}"}


CASES = [
    ({"retry": "x"}, _T("spec.retry", '"string"',
                        'spec.retry in body must be of type integer: "string"')),
    ({"retry": 1.5}, _T("spec.retry", '"number"',
                        'spec.retry in body must be of type integer: "number"')),
    ({"retry": 11}, _I("spec.retry", "11",
                       "spec.retry in body should be less than or equal to 10")),
    ({"retry": -1}, _I("spec.retry", "-1",
                       "spec.retry in body should be greater than or equal to 0")),
    ({"ratio": 0}, _I("spec.ratio", "0", "spec.ratio in body should be greater than 0")),
    ({"sourceType": "ftp"}, {"reason": "FieldValueNotSupported", "field": "spec.sourceType",
                             "message": 'Unsupported value: "ftp": supported values: '
                                        '"download", "upload"'}),
    ({"displayName": "much-too-long"}, {"reason": "FieldValueTooLong",
                                        "field": "spec.displayName",
                                        "message": "Too long: may not be more than 8 bytes"}),
    ({"pvcName": "Bad_Name"}, _I("spec.pvcName", '"Bad_Name"',
                                 "spec.pvcName in body should match '^[a-z0-9-]+$'")),
    ({"notAfter": "tomorrow"}, _T("spec.notAfter", '"tomorrow"',
                                  'spec.notAfter in body must be of type date-time: '
                                  '"tomorrow"')),
    ({"port": {"n": 1}}, _T("spec.port", '"object"',
                            'spec.port in body must be of type integer,string: "object"')),
    ({"tags": []}, _I("spec.tags", "0", "spec.tags in body should have at least 1 items")),
    ({"tags": ["a", "b", "c"]}, {"reason": "FieldValueTooMany", "field": "spec.tags",
                                 "message": "Too many: 3: must have at most 2 items"}),
    ({"tags": ["a", 1]}, _T("spec.tags[1]", '"integer"',
                            'spec.tags[1] in body must be of type string: "integer"')),
    ({"limits": {"a": {}, "b": {}, "c": {}}}, {"reason": "FieldValueTooMany",
                                               "field": "spec.limits",
                                               "message": "Too many: 3: must have at most 2 "
                                                          "items"}),
    ({"limits": {"a": {"value": "1"}}}, _T("spec.limits.a.value", '"string"',
                                           'spec.limits.a.value in body must be of type '
                                           'integer: "string"')),
    ({"checksum": 5}, _T("spec.checksum", '"integer"',
                         'spec.checksum in body must be of type string: "integer"')),
    ({"disks": [{"name": "a"}, {"name": "a"}]}, {"reason": "FieldValueDuplicate",
                                                 "field": "spec.disks[1]",
                                                 "message": 'Duplicate value: {"name":"a"}'}),
    ({"disks": [{"bus": "x"}]}, {"reason": "FieldValueRequired", "field": "spec.disks[0].name",
                                 "message": "Required value"}),
]


@pytest.mark.parametrize(("spec", "cause"), CASES, ids=[json.dumps(c[0]) for c in CASES])
def test_validation_texts(crds: None, raw: Any, ns: str, spec: dict[str, Any],
                          cause: dict[str, str]) -> None:
    name = _name()
    r = raw("POST", _url(ns), _image(name, **spec))
    assert r.status == 422, r.body
    st = r.json()
    assert st["reason"] == "Invalid" and st["code"] == 422
    assert st["details"] == {"name": name, "group": GROUP, "kind": "Image", "causes": [cause]}
    assert st["message"] == f'Image.{GROUP} "{name}" is invalid: {cause["field"]}: ' \
                            f'{cause["message"]}'


def test_valid_values_accepted(crds: None, raw: Any, ns: str) -> None:
    """int32 ranges are not checked (the format is stripped), int-or-string takes both,
    numbers with an integral value pass as integers, RFC 3339 times pass."""
    r = raw("POST", _url(ns), _image(_name(), size=2**40, port="http", retry=2.0,
                                     notAfter="2025-01-02T03:04:05.123+01:00", ratio=0.5))
    assert r.status == 201, r.body
    r = raw("POST", _url(ns), _image(_name(), port=8080))
    assert r.status == 201, r.body


def test_required_and_several_errors(crds: None, raw: Any, ns: str) -> None:
    name = _name()
    body = _image(name, retry=20)
    del body["spec"]["displayName"]
    r = raw("POST", _url(ns), body)
    assert r.status == 422
    assert r.json()["message"] == (
        f'Image.{GROUP} "{name}" is invalid: [spec.retry: Invalid value: 20: spec.retry in body '
        'should be less than or equal to 10, spec.displayName: Required value]')


# ------------------------------------------------------------------ status subresource
def test_status_subresource(crds: None, raw: Any, ns: str) -> None:
    name = _name()
    body = _image(name)
    body["status"] = {"progress": 50}
    r = raw("POST", _url(ns), body)
    assert r.status == 201 and "status" not in r.json()  # create cannot set status
    obj = r.json()
    assert obj["metadata"]["generation"] == 1
    obj["status"] = {"progress": 10}
    obj["metadata"]["labels"] = {"a": "b"}
    r = raw("PUT", _url(ns, name=name), obj)
    assert r.status == 200, r.body
    obj = r.json()
    assert "status" not in obj and obj["metadata"]["labels"] == {"a": "b"}
    assert obj["metadata"]["generation"] == 1  # metadata-only change
    # /status takes status only: spec and label changes are dropped
    obj["status"] = {"progress": 20, "conditions": [{"type": "Ready", "status": "True",
                                                     "junk": 1}]}
    obj["spec"]["url"] = "http://x"
    obj["metadata"]["labels"] = {"a": "c"}
    r = raw("PUT", _url(ns, name=name, sub="status"), obj)
    assert r.status == 200, r.body
    got = r.json()
    assert got["status"] == {"progress": 20, "failed": 0,
                             "conditions": [{"type": "Ready", "status": "True"}]}
    assert "url" not in got["spec"] and got["metadata"]["labels"] == {"a": "b"}
    assert got["metadata"]["generation"] == 1
    # status validation is against the status schema: the message is relative to it
    r = raw("PATCH", _url(ns, name=name, sub="status"), {"status": {"progress": "half"}},
            ctype="application/merge-patch+json")
    assert r.status == 422
    assert r.json()["details"]["causes"] == [_T(
        "status.progress", '"string"', 'progress in body must be of type integer: "string"')]
    # a spec change bumps the generation
    r = raw("PATCH", _url(ns, name=name), {"spec": {"url": "http://y"}},
            ctype="application/merge-patch+json")
    assert r.status == 200 and r.json()["metadata"]["generation"] == 2


def test_no_status_subresource(crds: None, raw: Any, ns: str) -> None:
    body = {"apiVersion": f"{GROUP}/v1beta1", "kind": "Note", "metadata": {"name": "n1"},
            "spec": {"text": "a"}, "status": {"seen": True}}
    r = raw("POST", _url(ns, "notes"), body)
    assert r.status == 201 and r.json()["status"] == {"seen": True}
    assert raw("GET", _url(ns, "notes", "n1", "status")).status == 404
    r = raw("PATCH", _url(ns, "notes", "n1"), {"status": {"seen": False}},
            ctype="application/merge-patch+json")
    assert r.status == 200 and r.json()["status"] == {"seen": False}
    assert r.json()["metadata"]["generation"] == 2  # everything but metadata counts


# ------------------------------------------------------------------ no-op updates
def test_identical_update_is_a_no_op(crds: None, raw: Any, ns: str) -> None:
    name = _name()
    obj = raw("POST", _url(ns), _image(name)).json()
    rv = obj["metadata"]["resourceVersion"]
    r = raw("PUT", _url(ns, name=name), obj)
    assert r.status == 200 and r.json()["metadata"]["resourceVersion"] == rv
    # an update that differs only in what decoding removes is a no-op too
    obj["spec"]["bogus"] = 1
    obj["spec"]["storageClassParameters"] = None
    r = raw("PUT", _url(ns, name=name), obj)
    assert r.status == 200 and r.json()["metadata"]["resourceVersion"] == rv
    r = raw("PATCH", _url(ns, name=name, sub="status"), {"status": None},
            ctype="application/merge-patch+json")
    assert r.status == 200 and r.json()["metadata"]["resourceVersion"] == rv
    w = raw("GET", _url(ns) + f"?watch=1&resourceVersion={rv}&timeoutSeconds=1"
            f"&fieldSelector=metadata.name%3D{name}")
    assert w.status == 200 and w.body.strip() == b""


# ------------------------------------------------------------------ ratcheting, CRD changes
def test_ratcheting_and_schema_change(crds: None, raw: Any, ns: str) -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "n": {"type": "integer"}, "m": {"type": "string"}}}}}
    crd = _crd("gauges", "Gauge", schema, False)
    crd_url = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gauges.{GROUP}"
    assert raw("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
               crd).status == 201
    body = {"apiVersion": f"{GROUP}/v1beta1", "kind": "Gauge", "metadata": {"name": "g"},
            "spec": {"n": 50, "m": "a", "old": "x"}}
    assert raw("POST", _url(ns, "gauges"), body).status == 201
    cur = raw("GET", crd_url).json()
    props = cur["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]
    props["n"]["maximum"] = 10
    props["m"]["default"] = "z"
    props["d"] = {"type": "string", "default": "new"}
    assert raw("PUT", crd_url, cur).status == 200
    got = raw("GET", _url(ns, "gauges", "g")).json()
    assert got["spec"] == {"n": 50, "m": "a", "d": "new"}  # read with the new schema
    # the unchanged invalid n is not re-validated; changing it is
    r = raw("PATCH", _url(ns, "gauges", "g"), {"spec": {"m": "b"}},
            ctype="application/merge-patch+json")
    assert r.status == 200, r.body
    r = raw("PATCH", _url(ns, "gauges", "g"), {"spec": {"n": 40}},
            ctype="application/merge-patch+json")
    assert r.status == 422
    assert r.json()["details"]["causes"] == [_I(
        "spec.n", "40", "spec.n in body should be less than or equal to 10")]


def test_in_process_writers_are_decoded_too(crds: None, sim: Any, ns: str) -> None:
    """The simulated controllers write through the same strategy as HTTP clients."""
    out = sim.world.client.create({**_image(_name(), bogus=1, storageClassParameters=None),
                                   "metadata": {"name": _name(), "namespace": ns}})
    assert "bogus" not in out["spec"] and "storageClassParameters" not in out["spec"]
    assert out["spec"]["retry"] == 3


# ------------------------------------------------------------------ /openapi/v2 and kubectl
def _kubectl_path() -> str:
    """The pinned kubectl 1.36 beside the venv when ``make venv`` put one there, else PATH's."""
    pinned = Path(sys.executable).parent.parent / "kubectl-1.36" / "bin" / "kubectl"
    if os.access(pinned, os.X_OK):
        return str(pinned)
    return shutil.which("kubectl") or "kubectl"


@pytest.fixture(scope="module")
def kctl(sim: Any) -> Callable[..., subprocess.CompletedProcess[str]]:
    env = dict(os.environ)
    env.update(sim.env)
    path = _kubectl_path()

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([path, *args], env=env, capture_output=True, text=True,
                              timeout=120, input=stdin)

    return run


def test_openapi_v2_json_and_protobuf(crds: None, raw: Any) -> None:
    r = raw("GET", "/openapi/v2")
    assert r.status == 200 and r.headers["Content-Type"] == "application/json"
    doc = r.json()
    assert doc["swagger"] == "2.0"
    cm = doc["definitions"]["io.k8s.api.core.v1.ConfigMap"]
    assert cm["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "ConfigMap", "version": "v1"}]
    assert cm["properties"]["data"] == {"type": "object",
                                        "additionalProperties": {"type": "string"}}
    img = doc["definitions"]["io.test.semantics.v1beta1.Image"]
    spec = img["properties"]["spec"]
    assert spec["required"] == ["displayName", "sourceType"]
    assert "type" not in spec["properties"]["checksum"]  # nullable: no type in v2
    assert "properties" not in spec["properties"]["options"]  # preserve-unknown: free
    pb = raw("GET", "/openapi/v2", headers={
        "Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert pb.status == 200
    assert pb.headers["Content-Type"] == \
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert pb.body.startswith(b"\n\x032.0")  # field 1 (swagger) = "2.0"
    again = raw("GET", "/openapi/v2", headers={"If-None-Match": r.headers["ETag"]})
    assert again.status == 304


def test_kubectl_apply_rbac_list(crds: None, kctl: Any) -> None:
    """A v1 List is validated on the client against /openapi/v2 (kubectl cannot leave it to
    the server): deploy/rbac.yaml as a new user applies it."""
    rbac = Path(__file__).resolve().parents[2] / "deploy" / "rbac.yaml"
    out = kctl("apply", "-f", str(rbac))
    assert out.returncode == 0, out.stderr
    assert "clusterrole.rbac.authorization.k8s.io/harvester-upgrade" in out.stdout


def test_kubectl_rejects_unknown_fields(crds: None, kctl: Any, ns: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "c1", "namespace": ns}, "data": {"a": "b"}, "bogus": 1}
    lst = json.dumps({"apiVersion": "v1", "kind": "List", "items": [cm]})
    out = kctl("apply", "-f", "-", stdin=lst)
    assert out.returncode == 1
    assert 'ValidationError(ConfigMap): unknown field "bogus" in io.k8s.api.core.v1.ConfigMap' \
        in out.stderr
    # one object: kubectl leaves it to the server (fieldValidation=Strict)
    out = kctl("apply", "-f", "-", stdin=json.dumps(cm))
    assert out.returncode == 1
    assert 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding ' \
           'error: unknown field "bogus"' in out.stderr
    img = _image("k1", bogus=1)
    img["metadata"]["namespace"] = ns
    out = kctl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                     "items": [img]}))
    assert out.returncode == 1
    assert 'unknown field "bogus" in io.test.semantics.v1beta1.Image.spec' in out.stderr
    out = kctl("apply", "-f", "-", stdin=json.dumps(img))
    assert out.returncode == 1
    assert 'Image in version "v1beta1" cannot be handled as a Image: strict decoding error: ' \
           'unknown field "spec.bogus"' in out.stderr
    out = kctl("apply", "--validate=warn", "-f", "-", stdin=json.dumps(img))
    assert out.returncode == 0, out.stderr
    assert 'Warning: unknown field "spec.bogus"' in out.stderr
