"""Subresources and create-only virtual kinds: what kube-apiserver's REST storage does for them.

Beside :mod:`.strategies` (the per-kind rules every write of a kind goes through), this is the
per-kind REST of the requests that are not plain CRUD of an object, after
kubernetes/kubernetes ``pkg/registry`` (release-1.30):

* ``pods/binding``: ``core/pod/storage/storage.go`` ``BindingREST`` (``assignPod``).
* ``pods/eviction``: ``core/pod/storage/eviction.go`` ``EvictionREST``; the body is checked
  here, the PodDisruptionBudget accounting is :meth:`.store.Store.evict` (under the store's
  lock, as it updates the budget and deletes the pod together).
* ``pods/log``: ``core/pod/rest/log.go`` ``LogREST`` (container choice, ``tailLines``,
  ``limitBytes``); the HTTP stream of ``follow`` is the server's.
* ``<workload>/scale``: ``apps/deployment/storage`` ``ScaleREST`` and its siblings.
* ``serviceaccounts/token``: ``core/serviceaccount/storage/token.go`` ``TokenREST``.
* ``nodes/proxy`` and ``services/proxy``: ``core/node/rest/proxy.go`` and
  ``core/service/proxy.go``: which backend a proxied request goes to.
* ``SelfSubjectAccessReview``, ``SelfSubjectRulesReview`` (``authorization/``) and
  ``SelfSubjectReview`` (``authentication/selfsubjectreview``): create-only kinds answered
  from the requesting user.

Every function takes what it works on (store, registry, user, parsed body) and returns the
object to answer with, or raises :class:`~.errors.ApiError`; none knows about HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..clock import Clock
from . import errors
from .rbac import Request as AuthzRequest
from .rbac import UserInfo
from .resources import Registry, ResourceType
from .store import Obj, Store

# a proxy backend: (method, path, query, headers, body) -> (status, headers, body)
Backend = Callable[..., tuple[int, dict[str, str], bytes]]

REVIEWS = {("authorization.k8s.io", "selfsubjectaccessreviews"),
           ("authorization.k8s.io", "selfsubjectrulesreviews"),
           ("authentication.k8s.io", "selfsubjectreviews")}

_CREATED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}


# ----------------------------------------------------------------------------- pods/binding
def bind(store: Store, rt: ResourceType, ns: str | None, name: str, binding: Any,
         dry_run: bool) -> Obj:
    """Assign the pod to ``binding.target.name``; 409 when it is bound already."""
    target = (binding or {}).get("target") or {}
    node = target.get("name")
    if not node:
        raise errors.invalid("Binding", "", name, [errors.field_required("target.name")])

    def fn(cur: Obj) -> Obj:
        spec = cur.setdefault("spec", {})
        if spec.get("nodeName"):
            raise errors.conflict(rt.plural, rt.group, name,
                                  f"pod {name} is already assigned to node "
                                  f"\"{spec['nodeName']}\"")
        spec["nodeName"] = node
        return cur

    store.modify(rt, ns, name, fn, dry_run=dry_run)
    return dict(_CREATED)


# ----------------------------------------------------------------------------- pods/eviction
def evict(store: Store, rt: ResourceType, ns: str | None, name: str, ev: Any,
          dry_run: bool) -> Obj:
    """A policy/v1 Eviction of pod ``name`` (the body checked against the URL)."""
    if not isinstance(ev, dict):
        raise errors.bad_request("the object provided is unrecognized")
    if ev.get("kind") not in (None, "Eviction"):
        raise errors.bad_request(f"unexpected kind {ev.get('kind')!r} for eviction")
    ev_name = (ev.get("metadata") or {}).get("name")
    if ev_name and ev_name != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    return store.evict(rt, ns or "", name, ev, dry_run=dry_run)


# ----------------------------------------------------------------------------- pods/log
def log_container(pod: Obj, name: str, container: str | None) -> str:
    """The container whose log is asked for: the one named, or the pod's only container."""
    spec = pod.get("spec") or {}
    containers = [c.get("name") for c in spec.get("containers") or []]
    init = [c.get("name") for c in spec.get("initContainers") or []]
    if not container:
        if len(containers) != 1:
            raise errors.bad_request(
                f"a container name must be specified for pod {name}, choose one of: "
                f"[{' '.join(str(c) for c in containers)}]"
                + (f" or one of the init containers: [{' '.join(str(c) for c in init)}]"
                   if init else ""))
        return str(containers[0])
    if container not in containers and container not in init:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    return container


def log_filters(text: str, tail_lines: str | None, limit_bytes: str | None) -> str:
    """``tailLines`` then ``limitBytes`` (query values as given) applied to a log."""
    lines = text.splitlines(keepends=True)
    if (tail_lines or "").isdigit():
        n = int(tail_lines or 0)
        lines = lines[-n:] if n else []
    out = "".join(lines)
    if (limit_bytes or "").isdigit():
        out = out.encode()[: int(limit_bytes or 0)].decode(errors="ignore")
    return out


# ----------------------------------------------------------------------------- */scale
def scale_of(rt: ResourceType, obj: Obj) -> Obj:
    """The autoscaling/v1 Scale of a workload."""
    md = obj["metadata"]
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    sel = spec.get("selector")
    if isinstance(sel, dict):
        from .tables import _selector_str

        sel_txt = _selector_str(sel)
        sel_txt = "" if sel_txt == "<none>" else sel_txt
    else:
        sel_txt = st.get("selector") or ""
    smd = {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
           if k in md}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": smd,
            "spec": {"replicas": spec.get("replicas", 0)},
            "status": {"replicas": st.get("replicas", 0), "selector": sel_txt}}


def write_scale(store: Store, managed: Any, rt: ResourceType, ns: str | None, name: str,
                scale: Obj, manager: str, dry_run: bool) -> Obj:
    """Set the workload's ``spec.replicas`` from ``scale``; the Scale after the write."""
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise errors.invalid("Scale", "autoscaling", name, [errors.field_invalid(
            "spec.replicas", replicas, "must be greater than or equal to 0")])
    rv = (scale.get("metadata") or {}).get("resourceVersion")

    def fn(cur: Obj) -> Obj:
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, name)
        new = dict(cur)
        new["spec"] = dict(cur.get("spec") or {})
        new["spec"]["replicas"] = replicas
        new["metadata"] = dict(cur["metadata"])
        managed.on_update(rt, cur, new, manager, None)
        return new

    return scale_of(rt, store.modify(rt, ns, name, fn, dry_run=dry_run))


# ---------------------------------------------------------------- serviceaccounts/token
def token_request(auth: Any, sa_uid: Callable[[str, str], str | None], ns: str, name: str,
                  req: Any, dry_run: bool) -> Obj:
    """TokenRequest (authentication.k8s.io/v1) for a ServiceAccount: a bound token."""
    if not isinstance(req, dict) or req.get("kind") not in (None, "TokenRequest"):
        raise errors.bad_request("the object provided is unrecognized (must be a "
                                 "TokenRequest)")
    spec = req.get("spec") or {}
    exp = spec.get("expirationSeconds")
    exp = 3600 if exp is None else exp  # defaulted, as the real API does
    if not isinstance(exp, int) or exp < 600:
        raise errors.invalid("TokenRequest", "authentication.k8s.io", name, [
            errors.field_invalid("spec.expirationSeconds", exp,
                                 "may not specify a duration less than 10 minutes")])
    if exp > 2**32:
        raise errors.invalid("TokenRequest", "authentication.k8s.io", name, [
            errors.field_invalid("spec.expirationSeconds", exp,
                                 "may not specify a duration larger than 2^32 seconds")])
    uid = sa_uid(ns, name)
    if uid is None:
        raise errors.not_found("serviceaccounts", "", name)
    audiences = list(spec.get("audiences") or
                     ["https://kubernetes.default.svc.cluster.local"])
    token, expires = ("", None) if dry_run else auth.issue_service_account_token(
        ns, name, uid, exp, tuple(audiences))
    now = Clock.wall_time()
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "uid": uid,
                         "creationTimestamp": Clock.rfc3339(now)},
            "spec": {"audiences": audiences, "expirationSeconds": exp,
                     "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": token,
                       "expirationTimestamp": Clock.rfc3339(expires.timestamp())
                       if expires is not None else Clock.rfc3339(now + exp)}}


# ----------------------------------------------------------------------------- reviews
def review(rt: ResourceType, user: UserInfo, body: Obj, rbac: Any,
           authorize: Callable[[UserInfo, AuthzRequest], tuple[bool, str]]) -> Obj:
    """SelfSubjectAccessReview / SelfSubjectRulesReview / SelfSubjectReview (whoami)."""
    out: Obj = {"kind": rt.kind, "apiVersion": rt.api_version,
                "metadata": {"creationTimestamp": Clock.rfc3339(Clock.wall_time())}}
    spec = body.get("spec") or {}
    if rt.plural == "selfsubjectreviews":
        info: Obj = {"username": user.name, "groups": list(user.groups)}
        if user.uid:
            info["uid"] = user.uid
        if user.extra:
            info["extra"] = user.extra
        out["status"] = {"userInfo": info}
    elif rt.plural == "selfsubjectrulesreviews":
        ns = spec.get("namespace") or ""
        out["spec"] = {"namespace": ns} if ns else {}
        out["status"] = rbac.rules_review(user, ns)
    else:
        ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if not ra and not nra or ra and nra:
            raise errors.invalid(rt.kind, rt.group, "", [errors.field_invalid(
                "spec.resourceAttributes", None,
                "exactly one of nonResourceAttributes or resourceAttributes must be "
                "specified")])
        if ra:
            req = AuthzRequest(str(ra.get("verb") or ""), True, str(ra.get("group") or ""),
                               str(ra.get("resource") or ""),
                               str(ra.get("subresource") or ""),
                               str(ra.get("namespace") or ""), str(ra.get("name") or ""))
        else:
            req = AuthzRequest(str(nra.get("verb") or ""), False,
                               path=str(nra.get("path") or ""))
        allowed, why = authorize(user, req)
        out["spec"] = spec
        out["status"] = {"allowed": allowed, **({"reason": why} if why else {})}
    return out


# ----------------------------------------------------------------------------- proxy
def node_backend(store: Store, proxies: Any, rt: ResourceType, name: str) -> Backend:
    """The kubelet endpoint behind ``nodes/<name>/proxy``."""
    node = store.get_ref(rt, None, name)
    if node is None:
        raise errors.not_found(rt.plural, rt.group, name)
    handler = proxies.node_handler(name) if proxies is not None else None
    if handler is None:
        raise errors.ApiError(503, "ServiceUnavailable",
                              f"error trying to reach service: dial tcp "
                              f"{_node_ip(node)}:10250: connect: connection refused")
    return handler  # type: ignore[no-any-return]


def service_backend(store: Store, registry: Registry, proxies: Any, rt: ResourceType,
                    ns: str | None, name: str) -> Backend:
    """The ready pod endpoint behind ``services/[scheme:]<name>[:port]/proxy``."""
    parts = name.split(":")
    if len(parts) == 3:
        _scheme, svc_name, port_ref = parts
    elif len(parts) == 2:
        svc_name, port_ref = parts
    else:
        svc_name, port_ref = parts[0], ""
    svc = store.get_ref(rt, ns, svc_name)
    if svc is None:
        raise errors.not_found(rt.plural, rt.group, svc_name)
    ports = (svc.get("spec") or {}).get("ports") or []
    sp = None
    for p in ports:
        if port_ref == "" or str(p.get("port")) == port_ref or p.get("name") == port_ref:
            sp = p
            break
    if sp is None:
        raise errors.ApiError(503, "ServiceUnavailable",
                              f"no endpoints available for service \"{svc_name}\"")
    target = sp.get("targetPort", sp.get("port"))
    selector = (svc.get("spec") or {}).get("selector") or {}
    pod_rt = registry.get("", "v1", "pods")
    assert pod_rt is not None
    pods, _, _, _ = store.list(pod_rt, ns, ",".join(f"{k}={v}" for k, v in
                                                    sorted(selector.items())),
                               copy_items=False) if selector else ([], "", None, None)
    refused = False
    for pod in pods:
        md, st = pod["metadata"], pod.get("status") or {}
        if md.get("deletionTimestamp"):
            continue
        if not any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in st.get("conditions") or []):
            continue
        port = _resolve_port(pod, target)
        if port is None:
            continue
        handler = proxies.pod_handler(ns, md["name"], port) if proxies is not None else None
        if handler is not None:
            return handler  # type: ignore[no-any-return]
        refused = True
    if refused:
        raise errors.ApiError(503, "ServiceUnavailable",
                              "error trying to reach service: dial tcp: connect: "
                              "connection refused")
    raise errors.ApiError(503, "ServiceUnavailable",
                          f"no endpoints available for service \"{svc_name}\"")


def _resolve_port(pod: Obj, target: Any) -> int | None:
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == target:
                return int(p.get("containerPort"))
    return None


def _node_ip(node: Obj) -> str:
    for a in (node.get("status") or {}).get("addresses") or []:
        if a.get("type") == "InternalIP":
            return str(a.get("address"))
    return str(node["metadata"]["name"])
