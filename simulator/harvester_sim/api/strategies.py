"""Per-kind strategies: what the real registry does for a kind beyond the generic store.

Hooks (called by :class:`~harvester_sim.api.store.Store`): ``prepare_for_create(obj)``,
``prepare_for_update(new, old, subresource)``, ``validate(obj) -> causes`` and
``validate_update(new, old) -> causes`` (causes are ``errors.field_*`` dicts; the store turns a
non-empty list into one 422 Invalid). Also the CRD structural-schema helpers used for
custom resources: pruning of unknown fields, defaults and light type validation.
"""

from __future__ import annotations

import base64
import ipaddress
import threading
import uuid
from typing import Any

from . import crdschema, errors
from .jsoncopy import json_copy

Obj = dict[str, Any]
Causes = list[dict[str, str]]


class Strategy:
    """Default: no changes, no extra validation."""

    def prepare_for_create(self, obj: Obj) -> None:
        return None

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        return None

    def validate(self, obj: Obj) -> Causes:
        return []

    def validate_update(self, new: Obj, old: Obj, subresource: str | None = None) -> Causes:
        return []


def _dns_label(name: str) -> bool:
    import re

    return len(name) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) is not None


def _container_defaults(c: Obj) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = str(c.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    latest = ":" not in tag or tag.endswith(":latest")
    c.setdefault("imagePullPolicy", "Always" if latest and "@" not in image else "IfNotPresent")
    c.setdefault("resources", {})
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")


def pod_spec_defaults(spec: Obj, pod: bool = True) -> None:
    """SetDefaults_PodSpec; for a Pod (not a template) also the admission plugins'
    defaults: priority/preemptionPolicy and the not-ready/unreachable tolerations."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        sa = spec.get("serviceAccountName") or spec.get("serviceAccount")
        spec["serviceAccountName"] = spec["serviceAccount"] = sa
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                _container_defaults(c)
    if not pod:
        return
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    tols = spec.setdefault("tolerations", [])
    have = {(t.get("key"), t.get("effect")) for t in tols if isinstance(t, dict)}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if (key, "NoExecute") not in have:
            tols.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300})


def _template_defaults(tmpl: Obj) -> None:
    spec = tmpl.setdefault("spec", {})
    pod_spec_defaults(spec, pod=False)
    tmpl.setdefault("metadata", {}).setdefault("creationTimestamp", None)


class PodStrategy(Strategy):
    """Pending on create, QoS class, defaults; most of the spec is immutable."""

    _MUTABLE = ("activeDeadlineSeconds", "tolerations", "schedulingGates")

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        pod_spec_defaults(spec)
        if spec.get("nodeName") and spec.get("schedulerName"):
            pass
        obj["status"] = {"phase": "Pending", "qosClass": _qos(spec)}

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        if subresource == "status":
            return
        spec = new.get("spec")
        if isinstance(spec, dict):
            for key in ("containers", "initContainers"):
                for c in spec.get(key) or []:
                    if isinstance(c, dict):
                        _container_defaults(c)

    def validate(self, obj: Obj) -> Causes:
        spec = obj.get("spec") or {}
        causes: Causes = []
        cs = spec.get("containers")
        if not cs:
            causes.append(errors.field_required("spec.containers", "Required value"))
        for i, c in enumerate(cs or []):
            if not isinstance(c, dict) or not c.get("name"):
                causes.append(errors.field_required(f"spec.containers[{i}].name"))
            elif not c.get("image"):
                causes.append(errors.field_required(f"spec.containers[{i}].image"))
        return causes

    def validate_update(self, new: Obj, old: Obj, subresource: str | None = None) -> Causes:
        ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
        if ospec == nspec:
            return []
        strip_o = {k: v for k, v in ospec.items() if k not in self._MUTABLE}
        strip_n = {k: v for k, v in nspec.items() if k not in self._MUTABLE}
        # container images may change; nodeName may be set once (binding)
        for s in (strip_o, strip_n):
            s["containers"] = [{k: v for k, v in c.items() if k != "image"}
                               for c in s.get("containers") or [] if isinstance(c, dict)]
            s["initContainers"] = [{k: v for k, v in c.items() if k != "image"}
                                   for c in s.get("initContainers") or [] if isinstance(c, dict)]
        if not ospec.get("nodeName"):
            strip_o.pop("nodeName", None)
            strip_n.pop("nodeName", None)
        if strip_o != strip_n:
            return [{"reason": "FieldValueForbidden", "field": "spec",
                     "message": "Forbidden: pod updates may not change fields other than "
                                "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                                "`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                                "additions to existing tolerations),"
                                "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 "
                                "if it was previously negative)"}]
        return []


def _qos(spec: Obj) -> str:
    reqs_all, lims_all, any_set = True, True, False
    for c in spec.get("containers") or []:
        res = (c or {}).get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim:
                lims_all = False
            if lim.get(r) is not None and req.get(r, lim.get(r)) != lim.get(r):
                reqs_all = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if lims_all and reqs_all else "Burstable"


class NamespaceStrategy(Strategy):
    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"phase": "Active"}
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        md = obj.setdefault("metadata", {})
        md.setdefault("labels", {})["kubernetes.io/metadata.name"] = md.get("name", "")

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        md = new.setdefault("metadata", {})
        md.setdefault("labels", {})["kubernetes.io/metadata.name"] = md.get("name", "")
        if subresource != "finalize" and "spec" in old:
            new["spec"] = json_copy(old["spec"])
        if new["metadata"].get("deletionTimestamp"):
            new["status"] = {**(new.get("status") or {}), "phase": "Terminating"}

    def validate(self, obj: Obj) -> Causes:
        name = (obj.get("metadata") or {}).get("name", "")
        if name and not _dns_label(name):
            return [errors.field_invalid("metadata.name", name, "a lowercase RFC 1123 label "
                                         "must consist of lower case alphanumeric characters or "
                                         "'-', and must start and end with an alphanumeric "
                                         "character")]
        return []


class ServiceStrategy(Strategy):
    """ClusterIP allocation from 10.43.0.0/16 (RKE2's service CIDR), port defaults."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 10

    def _alloc(self) -> str:
        with self._lock:
            self._next += 1
            n = self._next
        return str(ipaddress.IPv4Address("10.43.0.0") + n)

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            if not spec.get("clusterIP"):
                spec["clusterIP"] = self._alloc()
            if spec["clusterIP"] != "None":
                spec["clusterIPs"] = [spec["clusterIP"]]
            else:
                spec["clusterIPs"] = ["None"]
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for p in spec.get("ports") or []:
            if isinstance(p, dict):
                p.setdefault("protocol", "TCP")
                p.setdefault("targetPort", p.get("port"))
        obj["status"] = {"loadBalancer": {}}

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        if subresource == "status":
            return
        nspec, ospec = new.setdefault("spec", {}), old.get("spec") or {}
        for k in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "type",
                  "sessionAffinity", "internalTrafficPolicy"):
            if k not in nspec and k in ospec:
                nspec[k] = json_copy(ospec[k])
        for p in nspec.get("ports") or []:
            if isinstance(p, dict):
                p.setdefault("protocol", "TCP")
                p.setdefault("targetPort", p.get("port"))

    def validate_update(self, new: Obj, old: Obj, subresource: str | None = None) -> Causes:
        o = (old.get("spec") or {}).get("clusterIP")
        n = (new.get("spec") or {}).get("clusterIP")
        if o and n and o != n:
            return [errors.field_invalid("spec.clusterIPs[0]", n, "may not change once set")]
        return []


def _selector_matches_template(spec: Obj) -> Causes:
    sel = (spec.get("selector") or {}).get("matchLabels") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not spec.get("selector"):
        return [errors.field_required("spec.selector")]
    if any(labels.get(k) != v for k, v in sel.items()):
        return [errors.field_invalid("spec.template.metadata.labels", labels,
                                     "`selector` does not match template `labels`")]
    return []


class DeploymentStrategy(Strategy):
    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        strat = spec.setdefault("strategy", {"type": "RollingUpdate"})
        if strat.get("type", "RollingUpdate") == "RollingUpdate":
            strat["type"] = "RollingUpdate"
            strat.setdefault("rollingUpdate", {"maxUnavailable": "25%", "maxSurge": "25%"})
        _template_defaults(spec.setdefault("template", {}))
        obj["status"] = {}

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        if subresource == "status":
            return
        spec = new.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        if isinstance(spec.get("template"), dict):
            _template_defaults(spec["template"])
        # annotation changes also bump a Deployment's generation
        if (new.get("metadata") or {}).get("annotations") != (old.get("metadata") or {}).get(
                "annotations") and new["metadata"].get("generation") == old["metadata"].get(
                "generation"):
            new["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1

    def validate(self, obj: Obj) -> Causes:
        return _selector_matches_template(obj.get("spec") or {})

    def validate_update(self, new: Obj, old: Obj, subresource: str | None = None) -> Causes:
        if (new.get("spec") or {}).get("selector") != (old.get("spec") or {}).get("selector"):
            return [errors.field_invalid("spec.selector", (new.get("spec") or {}).get(
                "selector"), "field is immutable")]
        return []


class WorkloadStrategy(Strategy):
    """ReplicaSet / DaemonSet / StatefulSet: template defaults, immutable selector."""

    def __init__(self, replicas: bool) -> None:
        self.replicas = replicas

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        if self.replicas:
            spec.setdefault("replicas", 1)
        _template_defaults(spec.setdefault("template", {}))

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        if subresource != "status" and isinstance((new.get("spec") or {}).get("template"),
                                                   dict):
            _template_defaults(new["spec"]["template"])

    def validate(self, obj: Obj) -> Causes:
        return _selector_matches_template(obj.get("spec") or {})

    def validate_update(self, new: Obj, old: Obj, subresource: str | None = None) -> Causes:
        if (new.get("spec") or {}).get("selector") != (old.get("spec") or {}).get("selector"):
            return [errors.field_invalid("spec.selector", (new.get("spec") or {}).get(
                "selector"), "field is immutable")]
        return []


class JobStrategy(Strategy):
    """Generated selector + controller-uid labels, backoffLimit 6, immutable template."""

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        md = obj.setdefault("metadata", {})
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completions", 1) if spec.get("parallelism", 1) == 1 else None
        spec.setdefault("parallelism", 1)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        spec.setdefault("manualSelector", False) if "manualSelector" in spec else None
        tmpl = spec.setdefault("template", {})
        tmd = tmpl.setdefault("metadata", {})
        if not spec.get("manualSelector"):
            # the uid the store will assign is not known yet: pre-assign it
            uid = md.get("uid") or str(uuid.uuid4())
            md["_preassigned_uid"] = uid
            labels = tmd.setdefault("labels", {})
            labels["batch.kubernetes.io/controller-uid"] = uid
            labels["controller-uid"] = uid
            labels["batch.kubernetes.io/job-name"] = md.get("name", "")
            labels["job-name"] = md.get("name", "")
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        _template_defaults(tmpl)
        tmpl["spec"]["restartPolicy"] = tmpl["spec"].get("restartPolicy") or "Never"
        obj["status"] = {}

    def validate(self, obj: Obj) -> Causes:
        rp = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("restartPolicy")
        if rp not in ("Never", "OnFailure"):
            return [{"reason": "FieldValueNotSupported", "field":
                     "spec.template.spec.restartPolicy",
                     "message": f'Unsupported value: "{rp}": supported values: "OnFailure", '
                                '"Never"'}]
        return []

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        if subresource != "status" and isinstance((new.get("spec") or {}).get("template"),
                                                   dict):
            _template_defaults(new["spec"]["template"])

    def validate_update(self, new: Obj, old: Obj, subresource: str | None = None) -> Causes:
        ns, os_ = new.get("spec") or {}, old.get("spec") or {}
        if ns.get("template") != os_.get("template") and not os_.get("suspend"):
            return [errors.field_invalid("spec.template", ns.get("template"),
                                         "field is immutable")]
        if ns.get("selector") != os_.get("selector"):
            return [errors.field_invalid("spec.selector", ns.get("selector"),
                                         "field is immutable")]
        return []


class NodeStrategy(Strategy):
    def prepare_for_create(self, obj: Obj) -> None:
        md = obj.setdefault("metadata", {})
        labels = md.setdefault("labels", {})
        labels.setdefault("kubernetes.io/hostname", md.get("name", ""))
        labels.setdefault("kubernetes.io/os", "linux")
        labels.setdefault("kubernetes.io/arch", "amd64")

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        spec = new.get("spec")
        if isinstance(spec, dict) and spec.get("unschedulable") is False:
            new["spec"] = {k: v for k, v in spec.items() if k != "unschedulable"}


class CRDStrategy(Strategy):
    """Light validation of CustomResourceDefinitions."""

    def validate(self, obj: Obj) -> Causes:
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        causes: Causes = []
        name = (obj.get("metadata") or {}).get("name", "")
        if not spec.get("group"):
            causes.append(errors.field_required("spec.group"))
        for k in ("plural", "kind"):
            if not names.get(k):
                causes.append(errors.field_required(f"spec.names.{k}"))
        if spec.get("group") and names.get("plural") and \
                name != f"{names['plural']}.{spec['group']}":
            causes.append(errors.field_invalid(
                "metadata.name", name, "must be spec.names.plural+\".\"+spec.group"))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append({"reason": "FieldValueNotSupported", "field": "spec.scope",
                           "message": f'Unsupported value: "{spec.get("scope")}": supported '
                                      'values: "Cluster", "Namespaced"'})
        versions = spec.get("versions") or []
        if not versions:
            causes.append(errors.field_invalid("spec.versions", versions,
                                               "must have exactly one version marked as "
                                               "storage version"))
        elif sum(1 for v in versions if v.get("storage")) != 1:
            causes.append(errors.field_invalid("spec.versions", "",
                                               "must have exactly one version marked as "
                                               "storage version"))
        return causes

    def validate_update(self, new: Obj, old: Obj, subresource: str | None = None) -> Causes:
        causes = self.validate(new)
        o, n = old.get("spec") or {}, new.get("spec") or {}
        if o.get("group") != n.get("group"):
            causes.append(errors.field_invalid("spec.group", n.get("group"),
                                               "field is immutable"))
        return causes


class CustomResourceStrategy(Strategy):
    """customResourceStrategy / statusStrategy of apiextensions-apiserver v0.35.4 plus the
    decoding the CR handler does first (see :mod:`.crdschema`). The schema is compiled on first
    use, once per CRD generation (a changed CRD gets a new strategy)."""

    def __init__(self, schema: Obj | None, kind: str, group: str = "") -> None:
        self.schema = schema
        self.kind = kind
        self.group = group
        self._root: crdschema.Node | None = None
        self._compiled = False

    @property
    def root(self) -> crdschema.Node | None:
        if not self._compiled:
            self._root = crdschema.compile_schema(self.schema)
            self._compiled = True
        return self._root

    def decode(self, obj: Obj, track: bool = False,
               skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
        """Prune, drop non-nullable nulls, coerce embedded metadata, then default (in place);
        the unknown field paths when ``track``. ``skip``: top-level keys taken unchanged from
        the stored object."""
        root = self.root
        try:
            unknown = crdschema.coerce(obj, root, track, skip)
        except crdschema.CoerceError as exc:
            raise errors.bad_request(str(exc)) from exc
        crdschema.default_object(obj, root, skip)
        return unknown

    def prepare_for_create(self, obj: Obj) -> None:
        self.decode(obj)

    def coerce_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        """Decoding of the written object, before the status and generation rules; parts that
        are the stored object's own (shared, already decoded) are left alone."""
        skip = {k for k, v in new.items() if old.get(k, _NO) is v}
        self.decode(new, skip=skip)

    def _check(self, obj: Obj, old: Obj | None) -> Causes:
        root = self.root
        if root is None:
            return []
        errs = crdschema.Errors()
        crdschema.validate(obj, root, "", errs, old if old is not None else crdschema._MISSING)
        crdschema.validate_embedded(obj, root, "", errs)
        if old is None or not root.sub_listtype:
            crdschema.validate_list_types(obj, root, "", errs)
        else:  # ratcheting: only when the old object had no such duplicates
            before = crdschema.Errors()
            crdschema.validate_list_types(old, root, "", before)
            if not before.causes:
                crdschema.validate_list_types(obj, root, "", errs)
        return errs.causes

    def validate(self, obj: Obj) -> Causes:
        return self._check(obj, None)

    def validate_update(self, new: Obj, old: Obj, subresource: str | None = None) -> Causes:
        if subresource != "status":
            return self._check(new, old)
        # statusStrategy: only status, against the status schema (messages relative to it)
        root = self.root
        node = (root.props or {}).get("status") if root is not None else None
        if node is None or "status" not in new:
            return []
        errs = crdschema.Errors("status")
        crdschema.validate(new["status"], node, "", errs, old.get("status", crdschema._MISSING))
        if node.sub_listtype:
            before = crdschema.Errors("status")
            crdschema.validate_list_types(old.get("status"), node, "", before)
            if not before.causes:
                crdschema.validate_list_types(new["status"], node, "", errs)
        return errs.causes


_NO = object()
_COMPILED: dict[int, tuple[Any, crdschema.Node | None]] = {}


def _compiled(schema: Obj) -> crdschema.Node | None:
    hit = _COMPILED.get(id(schema))
    if hit is None or hit[0] is not schema:
        if len(_COMPILED) > 512:
            _COMPILED.clear()
        hit = (schema, crdschema.compile_schema(schema))
        _COMPILED[id(schema)] = hit
    return hit[1]


# ------------------------------------------------------------------ structural schemas
def prune_unknown(obj: Any, schema: Obj, path: str = "") -> list[str]:
    """Decode ``obj`` (a whole custom resource) as the CR handler does: ObjectMeta, pruning,
    non-nullable nulls, embedded metadata (in place); returns the unknown field paths."""
    try:
        return crdschema.coerce(obj, _compiled(schema), True)
    except crdschema.CoerceError as exc:
        raise errors.bad_request(str(exc)) from exc


def apply_defaults(obj: Any, schema: Obj) -> None:
    """Fill in the schema's defaults (in place)."""
    crdschema.default(obj, _compiled(schema))


def validate_schema(obj: Any, schema: Obj, path: str = "") -> Causes:
    """The schema's validation errors for ``obj`` (a create: no ratcheting)."""
    root = _compiled(schema)
    if root is None:
        return []
    errs = crdschema.Errors()
    crdschema.validate(obj, root, path, errs)
    return errs.causes


class SecretStrategy(Strategy):
    """``stringData`` is write-only: its entries are base64-encoded into ``data`` (winning over
    keys already there) and the field is dropped, as the real Secret registry does."""

    @staticmethod
    def _merge_string_data(obj: Obj) -> None:
        string_data = obj.pop("stringData", None)
        if not string_data:
            return
        data = dict(obj.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data

    def prepare_for_create(self, obj: Obj) -> None:
        self._merge_string_data(obj)

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        self._merge_string_data(new)


def builtin_strategies() -> dict[tuple[str, str], Strategy]:
    """Strategies by storage key (group, plural)."""
    return {
        ("", "pods"): PodStrategy(),
        ("", "namespaces"): NamespaceStrategy(),
        ("", "services"): ServiceStrategy(),
        ("", "nodes"): NodeStrategy(),
        ("", "secrets"): SecretStrategy(),
        ("apps", "deployments"): DeploymentStrategy(),
        ("apps", "replicasets"): WorkloadStrategy(replicas=True),
        ("apps", "statefulsets"): WorkloadStrategy(replicas=True),
        ("apps", "daemonsets"): WorkloadStrategy(replicas=False),
        ("batch", "jobs"): JobStrategy(),
        ("apiextensions.k8s.io", "customresourcedefinitions"): CRDStrategy(),
    }
