"""The table of resource types the server knows: built-in kinds plus CRD-defined ones.

A :class:`ResourceType` is plain data (group/version/plural/kind/scope/subresources and a few
policy answers); :class:`Registry` looks types up by GVR or by apiVersion+kind and grows or
shrinks as CustomResourceDefinitions are created and deleted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

COMMON_FIELDS = ("metadata.name", "metadata.namespace")


@dataclass
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    tracks_generation: bool = True
    unconditional_update: bool = True
    graceful_delete: bool = False
    default_propagation: str = "Background"
    selectable_fields: tuple[str, ...] = ()
    custom: bool = False
    # CRD-only: the version's openAPIV3Schema and additionalPrinterColumns.
    schema: dict[str, Any] | None = None
    printer_columns: list[dict[str, Any]] = field(default_factory=list)
    strategy: Any = None

    def __post_init__(self) -> None:
        if not self.singular:
            self.singular = self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: group + plural (one storage per resource, version-independent)."""
        return (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def field_allowed(self, name: str) -> bool:
        return name in COMMON_FIELDS or name in self.selectable_fields


def _rt(group: str, version: str, plural: str, kind: str, namespaced: bool,
        **kw: Any) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, **kw)


POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)


def builtin_types() -> list[ResourceType]:
    """The built-in kinds an upgrade touches, with their real scope, names and subresources."""
    return [
        _rt("", "v1", "namespaces", "Namespace", False, short_names=("ns",),
            subresources=("status", "finalize"), tracks_generation=False,
            selectable_fields=("status.phase",)),
        _rt("", "v1", "nodes", "Node", False, short_names=("no",),
            subresources=("status", "proxy"), tracks_generation=False,
            selectable_fields=("spec.unschedulable",)),
        _rt("", "v1", "pods", "Pod", True, short_names=("po",), categories=("all",),
            subresources=("status", "eviction", "log", "binding"), graceful_delete=True,
            selectable_fields=POD_FIELDS),
        _rt("", "v1", "services", "Service", True, short_names=("svc",), categories=("all",),
            subresources=("status", "proxy"), tracks_generation=False),
        _rt("", "v1", "endpoints", "Endpoints", True, short_names=("ep",),
            tracks_generation=False),
        _rt("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",),
            tracks_generation=False),
        _rt("", "v1", "secrets", "Secret", True, tracks_generation=False,
            selectable_fields=("type",)),
        _rt("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=("sa",),
            subresources=("token",), tracks_generation=False),
        _rt("", "v1", "events", "Event", True, short_names=("ev",), tracks_generation=False,
            selectable_fields=EVENT_FIELDS),
        _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True,
            short_names=("pvc",), subresources=("status",), tracks_generation=False),
        _rt("", "v1", "persistentvolumes", "PersistentVolume", False, short_names=("pv",),
            subresources=("status",), tracks_generation=False),
        _rt("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",),
            tracks_generation=False, selectable_fields=EVENT_FIELDS),
        _rt("apps", "v1", "deployments", "Deployment", True, short_names=("deploy",),
            categories=("all",), subresources=("status", "scale")),
        _rt("apps", "v1", "replicasets", "ReplicaSet", True, short_names=("rs",),
            categories=("all",), subresources=("status", "scale"),
            selectable_fields=("status.replicas",)),
        _rt("apps", "v1", "daemonsets", "DaemonSet", True, short_names=("ds",),
            categories=("all",), subresources=("status",)),
        _rt("apps", "v1", "statefulsets", "StatefulSet", True, short_names=("sts",),
            categories=("all",), subresources=("status", "scale")),
        _rt("apps", "v1", "controllerrevisions", "ControllerRevision", True,
            tracks_generation=False),
        _rt("batch", "v1", "jobs", "Job", True, categories=("all",), subresources=("status",),
            default_propagation="Orphan", selectable_fields=("status.successful",)),
        _rt("batch", "v1", "cronjobs", "CronJob", True, short_names=("cj",),
            categories=("all",), subresources=("status",)),
        _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
            short_names=("pdb",), subresources=("status",)),
        _rt("coordination.k8s.io", "v1", "leases", "Lease", True, tracks_generation=False),
        _rt("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True,
            tracks_generation=False),
        _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False,
            short_names=("sc",), tracks_generation=False),
        _rt("apiextensions.k8s.io", "v1", "customresourcedefinitions",
            "CustomResourceDefinition", False, short_names=("crd", "crds"),
            categories=("api-extensions",), subresources=("status",)),
        _rt("rbac.authorization.k8s.io", "v1", "roles", "Role", True, tracks_generation=False),
        _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True,
            tracks_generation=False),
        _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False,
            tracks_generation=False),
        _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
            False, tracks_generation=False),
        # reviews: create-only, answered by the server from RBAC, never stored
        _rt("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
            False, verbs=("create",), tracks_generation=False),
        _rt("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview",
            False, verbs=("create",), tracks_generation=False),
        _rt("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview",
            False, verbs=("create",), tracks_generation=False),
    ]


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """ResourceTypes for every served version of a CRD object."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    out = []
    for ver in spec.get("versions", []):
        if not ver.get("served", True):
            continue
        subs = []
        if "status" in (ver.get("subresources") or {}):
            subs.append("status")
        if "scale" in (ver.get("subresources") or {}):
            subs.append("scale")
        selectable = tuple(
            f.get("jsonPath", "").lstrip(".") for f in ver.get("selectableFields") or []
        )
        out.append(
            ResourceType(
                group=spec["group"],
                version=ver["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=tuple(subs),
                unconditional_update=False,
                custom=True,
                selectable_fields=selectable,
                schema=(ver.get("schema") or {}).get("openAPIV3Schema"),
                printer_columns=list(ver.get("additionalPrinterColumns") or []),
            )
        )
    return out


class Registry:
    """Resource types by GVR and by apiVersion/kind; CRD types come and go at runtime."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self._crd_types: dict[str, list[ResourceType]] = {}
        self._kind_cache: dict[tuple[str, str], ResourceType | None] = {}
        self.generation = 0
        from .strategies import builtin_strategies

        strategies = builtin_strategies()
        for rt in builtin_types():
            rt.strategy = strategies.get(rt.key)
            self._by_gvr[(rt.group, rt.version, rt.plural)] = rt

    def add_crd(self, crd: dict[str, Any]) -> None:
        name = crd["metadata"]["name"]
        with self._lock:
            self.remove_crd(name)
            types = types_from_crd(crd)
            from .strategies import CustomResourceStrategy

            for rt in types:
                rt.strategy = CustomResourceStrategy(rt.schema, rt.kind, rt.group)
            self._crd_types[name] = types
            for rt in types:
                self._by_gvr[(rt.group, rt.version, rt.plural)] = rt
            self._kind_cache.clear()
            self.generation += 1

    def remove_crd(self, name: str) -> None:
        with self._lock:
            for rt in self._crd_types.pop(name, []):
                self._by_gvr.pop((rt.group, rt.version, rt.plural), None)
            self._kind_cache.clear()
            self.generation += 1

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        cached = self._kind_cache.get((api_version, kind), False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        group, _, version = api_version.rpartition("/")
        with self._lock:
            found = None
            for rt in self._by_gvr.values():
                if rt.group == group and rt.version == version and rt.kind == kind:
                    found = rt
                    break
            self._kind_cache[(api_version, kind)] = found
        return found

    def all(self) -> list[ResourceType]:
        with self._lock:
            return list(self._by_gvr.values())

    def groups(self) -> dict[str, list[str]]:
        """group -> versions (preferred first: highest stable-looking version)."""
        out: dict[str, list[str]] = {}
        with self._lock:
            for rt in self._by_gvr.values():
                vs = out.setdefault(rt.group, [])
                if rt.version not in vs:
                    vs.append(rt.version)
        for vs in out.values():
            vs.sort(key=_version_priority)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        with self._lock:
            return [rt for rt in self._by_gvr.values()
                    if rt.group == group and rt.version == version]


def _version_priority(v: str) -> tuple[int, int, int]:
    """Kubernetes version priority: GA > beta > alpha, then by number (descending)."""
    import re

    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
    if not m:
        return (3, 0, 0)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor)
