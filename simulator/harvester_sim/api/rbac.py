"""RBAC authorization, evaluated like kube-apiserver's RBAC authorizer (plugin/pkg/auth/
authorizer/rbac and pkg/registry/rbac/validation).

A request is allowed when any rule of any role bound to the user allows it:

- ClusterRoleBindings grant their ClusterRole everywhere; RoleBindings in the request's
  namespace grant their Role (same namespace) or ClusterRole in that namespace only.
- Subjects: ``User`` (name), ``Group`` (any of the user's groups), ``ServiceAccount``
  (``system:serviceaccount:<ns>:<name>``; a RoleBinding's subject without a namespace means the
  binding's namespace).
- Rules: ``verbs``, ``apiGroups``, ``resources`` (``plural``, ``plural/subresource``,
  ``*/subresource``, ``*``), ``resourceNames`` (never matches a request without a name:
  create, or a list/watch unless its field selector asks for exactly one ``metadata.name``,
  which the request's attributes then carry, see ``routing.authz_name``),
  ``nonResourceURLs`` (exact, ``/prefix/*`` or ``*``); ``*`` everywhere.
- ``system:masters`` is allowed everything (the superuser group, before RBAC).
- The bootstrap policy every cluster has is built in (not stored): ``cluster-admin``,
  ``system:discovery`` and ``system:basic-user`` for ``system:authenticated``,
  ``system:public-info-viewer`` for everyone. A stored ClusterRole of the same name wins.
- A binding whose role does not exist denies with the real reason text
  (``RBAC: [clusterrole.rbac.authorization.k8s.io "x" not found, ...]``).

Aggregated ClusterRoles (``aggregationRule``) are not expanded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .resources import Registry

RBAC_GROUP = "rbac.authorization.k8s.io"
SUPERUSER_GROUP = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
SA_PREFIX = "system:serviceaccount:"

Rule = dict[str, Any]


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user (apiserver user.Info)."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_superuser(self) -> bool:
        return SUPERUSER_GROUP in self.groups


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    """The user a ServiceAccount token authenticates as."""
    return UserInfo(f"{SA_PREFIX}{namespace}:{name}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                     AUTHENTICATED), uid)


def parse_service_account(username: str) -> tuple[str, str] | None:
    """``system:serviceaccount:ns:name`` -> (ns, name)."""
    if not username.startswith(SA_PREFIX):
        return None
    ns, _, name = username[len(SA_PREFIX):].partition(":")
    return (ns, name) if ns and name and ":" not in name else None


@dataclass(frozen=True)
class Request:
    """What is asked (apiserver authorizer.Attributes)."""

    verb: str
    resource_request: bool
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


# ------------------------------------------------------------------------ rule matching
def _verb_matches(rule: Rule, verb: str) -> bool:
    verbs = rule.get("verbs") or []
    return "*" in verbs or verb in verbs


def _group_matches(rule: Rule, group: str) -> bool:
    groups = rule.get("apiGroups") or []
    return "*" in groups or group in groups


def _resource_matches(rule: Rule, combined: str, subresource: str) -> bool:
    for r in rule.get("resources") or []:
        if r == "*" or r == combined:
            return True
        if subresource and r == f"*/{subresource}":
            return True
    return False


def _name_matches(rule: Rule, name: str) -> bool:
    names = rule.get("resourceNames") or []
    if not names:
        return True
    return bool(name) and name in names


def _url_matches(rule: Rule, path: str) -> bool:
    for u in rule.get("nonResourceURLs") or []:
        if u == "*" or u == path:
            return True
        if u.endswith("*") and path.startswith(u[:-1]):
            return True
    return False


def rule_allows(rule: Rule, req: Request) -> bool:
    if not _verb_matches(rule, req.verb):
        return False
    if req.resource_request:
        return (_group_matches(rule, req.group)
                and _resource_matches(rule, req.full_resource, req.subresource)
                and _name_matches(rule, req.name))
    return _url_matches(rule, req.path)


# ------------------------------------------------------------------------ bootstrap policy
_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                   "/openapi/*", "/readyz", "/version", "/version/"]
BOOTSTRAP_CLUSTER_ROLES: dict[str, list[Rule]] = {
    "cluster-admin": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                      {"nonResourceURLs": ["*"], "verbs": ["*"]}],
    "system:discovery": [{"nonResourceURLs": _DISCOVERY_URLS, "verbs": ["get"]}],
    "system:public-info-viewer": [{"nonResourceURLs": ["/healthz", "/livez", "/readyz",
                                                       "/version", "/version/"],
                                   "verbs": ["get"]}],
    "system:basic-user": [
        {"apiGroups": ["authorization.k8s.io"],
         "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
         "verbs": ["create"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
         "verbs": ["create"]}],
}
# (binding name, cluster role, groups)
BOOTSTRAP_BINDINGS: list[tuple[str, str, tuple[str, ...]]] = [
    ("cluster-admin", "cluster-admin", (SUPERUSER_GROUP,)),
    ("system:discovery", "system:discovery", (AUTHENTICATED,)),
    ("system:basic-user", "system:basic-user", (AUTHENTICATED,)),
    ("system:public-info-viewer", "system:public-info-viewer",
     (AUTHENTICATED, UNAUTHENTICATED)),
]


# ------------------------------------------------------------------------ the authorizer
def _applies(subject: dict[str, Any], user: UserInfo, binding_ns: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name") or ""
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return bool(ns) and user.name == f"{SA_PREFIX}{ns}:{name}"
    return False


class RBACAuthorizer:
    """``authorize(user, request) -> (allowed, reason)`` over the RBAC objects in ``store``."""

    def __init__(self, store: Any) -> None:
        self.store = store
        registry: Registry = store.registry
        self._rt = {p: registry.get(RBAC_GROUP, "v1", p) for p in
                    ("roles", "rolebindings", "clusterroles", "clusterrolebindings")}

    def _items(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        rt = self._rt[plural]
        if rt is None:
            return []
        items, _, _, _ = self.store.list(rt, namespace, copy_items=False)
        return items

    def _cluster_role_rules(self, name: str) -> list[Rule] | None:
        rt = self._rt["clusterroles"]
        obj = self.store.get_ref(rt, None, name) if rt is not None else None
        if obj is not None:
            return list(obj.get("rules") or [])
        return BOOTSTRAP_CLUSTER_ROLES.get(name)

    def _role_rules(self, ref: dict[str, Any], namespace: str) -> tuple[list[Rule] | None, str]:
        kind, name = ref.get("kind"), ref.get("name") or ""
        if kind == "ClusterRole":
            return (self._cluster_role_rules(name),
                    f'clusterrole.{RBAC_GROUP} "{name}" not found')
        if kind == "Role":
            rt = self._rt["roles"]
            obj = self.store.get_ref(rt, namespace, name) if rt is not None else None
            return ((list(obj.get("rules") or []) if obj is not None else None),
                    f'role.{RBAC_GROUP} "{name}" not found')
        return None, f"unknown roleRef kind {kind!r}"

    def visit(self, user: UserInfo, namespace: str) -> list[tuple[list[Rule] | None, str]]:
        """(rules, error) of every role bound to ``user`` for ``namespace`` ('' = cluster),
        cluster role bindings first, as the real rule visitor walks them."""
        out: list[tuple[list[Rule] | None, str]] = []
        with self.store.lock:
            for _, role, groups in BOOTSTRAP_BINDINGS:
                if any(g in user.groups for g in groups):
                    out.append((self._cluster_role_rules(role), ""))
            for crb in self._items("clusterrolebindings"):
                if any(_applies(s, user, "") for s in crb.get("subjects") or []):
                    out.append(self._role_rules(crb.get("roleRef") or {}, ""))
            if namespace:
                for rb in self._items("rolebindings", namespace):
                    if any(_applies(s, user, namespace) for s in rb.get("subjects") or []):
                        out.append(self._role_rules(rb.get("roleRef") or {}, namespace))
        return out

    def authorize(self, user: UserInfo, req: Request) -> tuple[bool, str]:
        if user.is_superuser:
            return True, ""
        errs: list[str] = []
        for rules, err in self.visit(user, req.namespace):
            if rules is None:
                errs.append(err)
                continue
            if any(rule_allows(r, req) for r in rules):
                return True, ""
        reason = f"RBAC: [{', '.join(errs)}]" if len(errs) > 1 else (
            f"RBAC: {errs[0]}" if errs else "")
        return False, reason

    def rules_review(self, user: UserInfo, namespace: str) -> dict[str, Any]:
        """A SelfSubjectRulesReview status: the rules that apply in ``namespace``."""
        resource_rules: list[dict[str, Any]] = []
        non_resource: list[dict[str, Any]] = []
        errs: list[str] = []
        if user.is_superuser:
            resource_rules.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
            non_resource.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
        for rules, err in self.visit(user, namespace):
            if rules is None:
                errs.append(err)
                continue
            for r in rules:
                if r.get("nonResourceURLs"):
                    non_resource.append({"verbs": list(r.get("verbs") or []),
                                         "nonResourceURLs": list(r["nonResourceURLs"])})
                else:
                    entry = {"verbs": list(r.get("verbs") or []),
                             "apiGroups": list(r.get("apiGroups") or []),
                             "resources": list(r.get("resources") or [])}
                    if r.get("resourceNames"):
                        entry["resourceNames"] = list(r["resourceNames"])
                    resource_rules.append(entry)
        out: dict[str, Any] = {"resourceRules": resource_rules,
                               "nonResourceRules": non_resource, "incomplete": bool(errs)}
        if errs:
            out["evaluationError"] = ", ".join(errs)
        return out
