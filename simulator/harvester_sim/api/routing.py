"""URL -> request attributes, the way the apiserver's RequestInfoFactory does it.

``/api/v1/...`` is the core group, ``/apis/<group>/<version>/...`` the others; then
``[namespaces/<ns>/]<resource>[/<name>[/<subresource>[/<rest...>]]]``. ``/api/v1/namespaces/<n>``
addresses the namespace object itself (with ``status`` and ``finalize`` subresources).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from .selectors import parse_field_selector

_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass
class RequestInfo:
    is_resource: bool
    path: str
    verb: str = ""
    group: str = ""
    version: str = ""
    namespace: str | None = None
    resource: str = ""
    name: str | None = None
    subresource: str | None = None
    rest: str = ""  # the part after a proxy subresource, with its leading '/'
    parts: tuple[str, ...] = ()  # for non-resource paths

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def authz_name(info: RequestInfo, field_selector: str | None) -> str:
    """The name the authorizer sees: a list or watch asking for exactly one
    ``metadata.name`` through its field selector carries that name, so a rule with
    ``resourceNames`` can allow it (k8s.io/apiserver pkg/endpoints/request/requestinfo.go,
    ``RequestInfoFactory.NewRequestInfo``: ``FieldSelector.RequiresExactMatch("metadata.name")``
    and a name valid as a path segment). A selector that does not parse gives no name."""
    if info.name or info.verb not in ("list", "watch") or not field_selector:
        return info.name or ""
    try:
        name = parse_field_selector(field_selector).value_of("metadata.name")
    except Exception:  # noqa: BLE001 - the apiserver logs and goes on without a name
        return ""
    if not name or name in (".", "..") or "/" in name or "%" in name:
        return ""
    return name


def parse(method: str, path: str, watch_param: bool) -> RequestInfo:
    raw_parts = [p for p in path.split("/") if p != ""]
    parts = [unquote(p) for p in raw_parts]
    if not parts or parts[0] not in ("api", "apis"):
        return RequestInfo(False, path, parts=tuple(parts))
    if parts[0] == "api":
        if len(parts) < 2:
            return RequestInfo(False, path, parts=tuple(parts))
        group, version, cur = "", parts[1], parts[2:]
    else:
        if len(parts) < 3:
            return RequestInfo(False, path, parts=tuple(parts))
        group, version, cur = parts[1], parts[2], parts[3:]
    if not cur:
        return RequestInfo(False, path, group=group, version=version, parts=tuple(parts))
    info = RequestInfo(True, path, group=group, version=version)
    legacy_watch = False
    if cur[0] in ("watch", "proxy") and len(cur) > 1:
        legacy_watch = cur[0] == "watch"
        cur = cur[1:]
    if cur[0] == "namespaces":
        if len(cur) > 1:
            info.namespace = cur[1]
            if len(cur) > 2 and cur[2] not in _NAMESPACE_SUBRESOURCES:
                cur = cur[2:]
    info.resource = cur[0]
    if len(cur) > 1:
        info.name = cur[1]
    if len(cur) > 2:
        info.subresource = cur[2]
    if len(cur) > 3:
        # keep the original (still-escaped) tail for proxying
        start = len(raw_parts) - (len(cur) - 3)
        info.rest = "/" + "/".join(raw_parts[start:])
        if path.endswith("/"):
            info.rest += "/"
    elif info.subresource == "proxy" and path.endswith("/"):
        info.rest = "/"
    if info.resource == "namespaces" and info.name is None and info.namespace is not None:
        info.name = info.namespace
    if info.resource == "namespaces":
        # a namespace is cluster-scoped: its own name is not a namespace filter
        info.namespace = None if info.name is None else info.name
    m = method.upper()
    if legacy_watch or (watch_param and m == "GET"):
        info.verb = "watch"
    elif m in ("GET", "HEAD"):
        info.verb = "get" if info.name else "list"
    elif m == "POST":
        info.verb = "create"
    elif m == "PUT":
        info.verb = "update"
    elif m == "PATCH":
        info.verb = "patch"
    elif m == "DELETE":
        info.verb = "delete" if info.name else "deletecollection"
    else:
        info.verb = m.lower()
    return info
