"""A minimal OpenAPI v3 (``/openapi/v3``): enough for ``kubectl apply``/``create`` validation
and patch building, and ``kubectl explain`` on CRDs.

Each group-version document has, per kind, a ``patch`` operation tagged with
``x-kubernetes-group-version-kind`` that accepts the ``fieldValidation`` query parameter (so
kubectl leaves validation to the server). Built-in kinds deliberately do not advertise
strategic merge patch in that operation: kubectl then builds its patches from its compiled-in
Go types (which carry the real merge keys) instead of from our schema-less documents. CRDs get
their ``openAPIV3Schema`` as a component schema, which is what ``kubectl explain`` renders.
``/openapi/v2`` is not served (404), which kubectl copes with when v3 is present.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

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
