"""Legacy discovery documents: /version, /api, /apis, /apis/<g>, /api/v1, /apis/<g>/<v>.

Aggregated discovery is not offered: clients fall back to these when ``/api`` and ``/apis``
answer plain ``application/json`` (a supported path in client-go).
"""

from __future__ import annotations

import hashlib
from typing import Any

from .resources import Registry, ResourceType

KUBE_VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.4",
                "gitCommit": "a78aa47129b8539636eb86a9d00e31b2720fe06b",
                "gitTreeState": "clean", "buildDate": "2024-12-10T11:43:21Z",
                "goVersion": "go1.22.9", "compiler": "gc", "platform": "linux/amd64"}

_SUB_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "eviction": ["create"],
    "log": ["get"],
    "binding": ["create"],
    "proxy": ["create", "delete", "get", "patch", "update"],
    "finalize": ["update"],
    "token": ["create"],
}


def version_doc() -> dict[str, Any]:
    return dict(KUBE_VERSION)


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_doc(group: str, versions: list[str]) -> dict[str, Any]:
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": vs, "preferredVersion": dict(vs[0])}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = registry.groups()
    out = []
    for g in sorted((g for g in groups if g), key=_group_order):
        out.append(_group_doc(g, groups[g]))
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.groups().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, versions)}


def _storage_hash(rt: ResourceType) -> str:
    raw = f"{rt.group}/{rt.version}/{rt.kind}".encode()
    return hashlib.sha256(raw).digest()[:8].hex()


def resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
        "kind": rt.kind, "verbs": list(rt.verbs), "storageVersionHash": _storage_hash(rt)}
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    out = [main]
    for sub in rt.subresources:
        entry: dict[str, Any] = {"name": f"{rt.plural}/{sub}", "singularName": "",
                                 "namespaced": rt.namespaced, "kind": rt.kind,
                                 "verbs": list(_SUB_VERBS.get(sub, ["get"]))}
        if sub == "scale":
            entry.update(group="autoscaling", version="v1", kind="Scale")
        elif sub == "eviction":
            entry.update(group="policy", version="v1", kind="Eviction")
        elif sub == "binding":
            entry["kind"] = "Binding"
        elif sub == "token":
            entry.update(group="authentication.k8s.io", version="v1", kind="TokenRequest")
        elif sub == "proxy":
            entry["kind"] = f"{rt.kind}ProxyOptions"
        out.append(entry)
    return out


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    rts = registry.in_group_version(group, version)
    if not rts:
        return None
    resources: list[dict[str, Any]] = []
    for rt in sorted(rts, key=lambda r: r.plural):
        resources.extend(resource_entries(rt))
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": resources}


def _group_order(g: str) -> tuple[int, str]:
    # built-in groups first (roughly the real server's order), then CRD groups by name
    order = ["apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io",
             "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io", "policy",
             "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
             "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io",
             "node.k8s.io", "discovery.k8s.io", "flowcontrol.apiserver.k8s.io"]
    return (order.index(g), g) if g in order else (len(order), g)
