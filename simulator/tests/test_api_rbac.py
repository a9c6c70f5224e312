"""RBAC enforcement, ServiceAccount tokens and self-subject reviews.

403 bodies are checked against what kube-apiserver v1.35 answers (same messages, reasons and
details); the rule-matching table follows pkg/registry/rbac/validation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harvester_sim import testing
from harvester_sim.api.rbac import Request, UserInfo, rule_allows, service_account_user

RBAC = "rbac.authorization.k8s.io/v1"
KUBECTL = shutil.which("kubectl") or "kubectl"
RawFn = Callable[..., Any]  # conftest's ``raw`` fixture


# --------------------------------------------------------------------------- rule matching
@pytest.mark.parametrize(("rule", "req", "allowed"), [
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
     Request("get", True, "", "pods", namespace="n", name="x"), True),
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
     Request("list", True, "", "pods", namespace="n"), False),
    ({"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["get"]},
     Request("get", True, "", "pods", name="x"), False),
    ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
     Request("delete", True, "apps", "deployments", "scale", name="d"), True),
    # a subresource needs its own rule (or */sub, or *)
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]},
     Request("create", True, "", "pods", "eviction", name="p"), False),
    ({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
     Request("create", True, "", "pods", "eviction", name="p"), True),
    ({"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]},
     Request("patch", True, "", "nodes", "status", name="n"), True),
    ({"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]},
     Request("patch", True, "", "nodes", name="n"), False),
    # resourceNames never match requests without a name (list, watch, create)
    ({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"],
      "resourceNames": ["a"]}, Request("get", True, "", "configmaps", name="a"), True),
    ({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"],
      "resourceNames": ["a"]}, Request("get", True, "", "configmaps", name="b"), False),
    ({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"],
      "resourceNames": ["a"]}, Request("list", True, "", "configmaps"), False),
    ({"nonResourceURLs": ["/healthz"], "verbs": ["get"]},
     Request("get", False, path="/healthz"), True),
    ({"nonResourceURLs": ["/apis/*"], "verbs": ["get"]},
     Request("get", False, path="/apis/apps/v1"), True),
    ({"nonResourceURLs": ["/apis/*"], "verbs": ["get"]},
     Request("get", False, path="/api"), False),
    # a resource rule never matches a non-resource request and vice versa
    ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
     Request("get", False, path="/metrics"), False),
    ({"nonResourceURLs": ["*"], "verbs": ["*"]},
     Request("get", True, "", "pods", name="x"), False),
])
def test_rule_allows(rule: dict[str, Any], req: Request, allowed: bool) -> None:
    assert rule_allows(rule, req) is allowed


def test_service_account_user() -> None:
    u = service_account_user("harvester-system", "harvester-upgrade", "u1")
    assert u.name == "system:serviceaccount:harvester-system:harvester-upgrade"
    assert u.groups == ("system:serviceaccounts", "system:serviceaccounts:harvester-system",
                        "system:authenticated")
    assert not u.is_superuser and UserInfo("a", ("system:masters",)).is_superuser


# --------------------------------------------------------------------------- over HTTP
@pytest.fixture
def sa(sim: testing.Running, ns: str) -> Iterator[tuple[str, str]]:
    """A fresh ServiceAccount in ``ns`` and a bound token for it."""
    yield ns, sim.server.service_account_token(ns, "robot")


def _apply(sim: testing.Running, *objs: dict[str, Any]) -> None:
    for o in objs:
        sim.world.client.create(o)


def _role(ns: str, name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": name, "namespace": ns},
            "rules": rules}


def _binding(ns: str | None, name: str, role_kind: str, role: str,
             subjects: list[dict[str, Any]]) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": RBAC, "kind": "RoleBinding" if ns else "ClusterRoleBinding",
            "metadata": md, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": role}}


def test_forbidden_bodies_match_the_real_apiserver(raw: RawFn, sa: tuple[str, str]) -> None:
    ns, tok = sa
    user = f"system:serviceaccount:{ns}:robot"
    cases = [
        ("GET", f"/api/v1/namespaces/{ns}/pods",
         f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" in '
         f'the namespace "{ns}"', {"kind": "pods"}),
        ("GET", f"/api/v1/namespaces/{ns}/pods/x/log",
         f'pods "x" is forbidden: User "{user}" cannot get resource "pods/log" in API group '
         f'"" in the namespace "{ns}"', {"name": "x", "kind": "pods"}),
        ("GET", "/api/v1/nodes/n1",
         f'nodes "n1" is forbidden: User "{user}" cannot get resource "nodes" in API group "" '
         f'at the cluster scope', {"name": "n1", "kind": "nodes"}),
        ("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/d",
         f'deployments.apps "d" is forbidden: User "{user}" cannot get resource "deployments" '
         f'in API group "apps" in the namespace "{ns}"',
         {"name": "d", "group": "apps", "kind": "deployments"}),
        ("GET", f"/api/v1/namespaces/{ns}",
         f'namespaces "{ns}" is forbidden: User "{user}" cannot get resource "namespaces" in '
         f'API group "" in the namespace "{ns}"', {"name": ns, "kind": "namespaces"}),
        # authorization comes before routing: unknown resources are 403, not 404
        ("GET", "/apis/nope.io/v1/foos",
         f'foos.nope.io is forbidden: User "{user}" cannot list resource "foos" in API group '
         f'"nope.io" at the cluster scope', {"group": "nope.io", "kind": "foos"}),
        ("GET", f"/api/v1/namespaces/{ns}/pods?watch=1",
         f'pods is forbidden: User "{user}" cannot watch resource "pods" in API group "" in '
         f'the namespace "{ns}"', {"kind": "pods"}),
        ("GET", f"/api/v1/namespaces/{ns}/services/svc:80/proxy/a/b",
         f'services "svc:80" is forbidden: User "{user}" cannot get resource "services/proxy" '
         f'in API group "" in the namespace "{ns}"', {"name": "svc:80", "kind": "services"}),
        ("GET", "/x/y", f'forbidden: User "{user}" cannot get path "/x/y"', {}),
    ]
    for method, path, message, details in cases:
        r = raw(method, path, token=tok)
        body = r.json()
        assert r.status == 403, (path, body)
        assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Failure", "message": message, "reason": "Forbidden",
                        "details": details, "code": 403}, path
    r = raw("POST", f"/api/v1/namespaces/{ns}/configmaps", token=tok,
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    assert r.status == 403 and r.json()["message"].startswith(
        f'configmaps is forbidden: User "{user}" cannot create resource "configmaps"')


def test_discovery_version_and_health_for_every_authenticated_user(
        raw: RawFn, sa: tuple[str, str]) -> None:
    _, tok = sa
    for path in ("/version", "/api", "/api/v1", "/apis", "/apis/apps/v1", "/openapi/v3",
                 "/healthz", "/readyz"):
        assert raw("GET", path, token=tok).status == 200, path
    assert raw("GET", "/version").status == 200  # anonymous: public-info-viewer
    assert raw("GET", "/api/v1/namespaces", token="wrong").status == 401


def test_role_binding_grants_in_its_namespace_only(sim: testing.Running, raw: RawFn,
                                                   sa: tuple[str, str]) -> None:
    ns, tok = sa
    other = f"t-{uuid.uuid4().hex[:8]}"
    _apply(sim, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}},
           _role(ns, "reader", [{"apiGroups": [""], "resources": ["configmaps"],
                                 "verbs": ["get", "list", "watch"]}]),
           # a ServiceAccount subject without a namespace means the binding's namespace
           _binding(ns, "reader", "Role", "reader", [{"kind": "ServiceAccount",
                                                      "name": "robot"}]))
    assert raw("GET", f"/api/v1/namespaces/{ns}/configmaps", token=tok).status == 200
    assert raw("GET", f"/api/v1/namespaces/{other}/configmaps", token=tok).status == 403
    assert raw("GET", "/api/v1/configmaps", token=tok).status == 403  # all namespaces
    assert raw("DELETE", f"/api/v1/namespaces/{ns}/configmaps/x", token=tok).status == 403


def test_cluster_role_via_group_and_resource_names(sim: testing.Running, raw: RawFn,
                                                   sa: tuple[str, str]) -> None:
    ns, tok = sa
    cr = f"cr-{ns}"
    _apply(sim, {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": cr},
                 "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"],
                            "resourceNames": ["node-1"]},
                           {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]},
           _binding(None, cr, "ClusterRole", cr,
                    [{"kind": "Group", "name": f"system:serviceaccounts:{ns}",
                      "apiGroup": "rbac.authorization.k8s.io"}]))
    try:
        assert raw("GET", "/api/v1/nodes/node-1", token=tok).status == 200
        assert raw("GET", "/api/v1/nodes/node-2", token=tok).status == 403
        assert raw("GET", "/api/v1/nodes", token=tok).status == 403
        # pods/log granted, pods not: 404 for a missing pod means authorization passed
        assert raw("GET", f"/api/v1/namespaces/{ns}/pods/x/log", token=tok).status == 404
        assert raw("GET", f"/api/v1/namespaces/{ns}/pods/x", token=tok).status == 403
    finally:
        sim.world.client.delete(RBAC, "ClusterRoleBinding", cr)
    assert raw("GET", "/api/v1/nodes/node-1", token=tok).status == 403


def test_resource_names_allow_a_list_or_watch_of_that_one_name(
        sim: testing.Running, raw: RawFn, sa: tuple[str, str]) -> None:
    """A list/watch whose field selector asks for exactly ``metadata.name=x`` is authorized
    with name ``x`` (requestinfo.go); any other selector, or none, has no name."""
    ns, tok = sa
    _apply(sim, _role(ns, "one-cm", [{"apiGroups": [""], "resources": ["configmaps"],
                                      "resourceNames": ["a"], "verbs": ["list", "watch"]}]),
           _binding(ns, "one-cm", "Role", "one-cm", [{"kind": "ServiceAccount",
                                                      "name": "robot"}]))
    base = f"/api/v1/namespaces/{ns}/configmaps"
    assert raw("GET", f"{base}?fieldSelector=metadata.name%3Da", token=tok).status == 200
    assert raw("GET", f"{base}?fieldSelector=metadata.name%3D%3Da", token=tok).status == 200
    r = raw("GET", f"{base}?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Da",
            token=tok)
    assert r.status == 200
    assert raw("GET", base, token=tok).status == 403
    r = raw("GET", f"{base}?fieldSelector=metadata.name%3Db", token=tok)
    assert r.status == 403
    assert r.json()["message"].startswith(
        f'configmaps "b" is forbidden: User "system:serviceaccount:{ns}:robot" cannot list '
        'resource "configmaps"'), r.json()["message"]
    assert raw("GET", f"{base}?fieldSelector=metadata.name%21%3Da", token=tok).status == 403
    assert raw("GET", f"{base}?fieldSelector=metadata.namespace%3D{ns}",
               token=tok).status == 403
    # the name is the authorizer's only: a get of that name is a different verb
    assert raw("GET", f"{base}/a", token=tok).status == 403


def test_missing_roles_are_named_in_the_reason(sim: testing.Running, raw: RawFn,
                                               sa: tuple[str, str]) -> None:
    ns, tok = sa
    crb = f"crb-{ns}"
    _apply(sim, _binding(ns, "rb", "Role", "missing", [{"kind": "ServiceAccount",
                                                        "name": "robot", "namespace": ns}]),
           _binding(None, crb, "ClusterRole", "missing2",
                    [{"kind": "ServiceAccount", "name": "robot", "namespace": ns}]))
    try:
        msg = raw("GET", f"/api/v1/namespaces/{ns}/pods?watch=1", token=tok).json()["message"]
        assert msg.endswith(': RBAC: [clusterrole.rbac.authorization.k8s.io "missing2" not '
                            'found, role.rbac.authorization.k8s.io "missing" not found]'), msg
        msg = raw("GET", "/api/v1/nodes", token=tok).json()["message"]
        assert msg.endswith(': RBAC: clusterrole.rbac.authorization.k8s.io "missing2" not '
                            'found'), msg
    finally:
        sim.world.client.delete(RBAC, "ClusterRoleBinding", crb)


def test_user_subject_and_cluster_admin_binding(sim: testing.Running, raw: RawFn) -> None:
    name = f"alice-{uuid.uuid4().hex[:6]}"
    tok = sim.server.auth.add_user(name)
    assert raw("GET", "/api/v1/nodes", token=tok).status == 403
    _apply(sim, _binding(None, name, "ClusterRole", "cluster-admin",
                         [{"kind": "User", "name": name,
                           "apiGroup": "rbac.authorization.k8s.io"}]))
    try:
        assert raw("GET", "/api/v1/nodes", token=tok).status == 200
        assert raw("GET", "/metrics", token=tok).status == 404  # allowed, not served
    finally:
        sim.world.client.delete(RBAC, "ClusterRoleBinding", name)
    assert raw("GET", "/api/v1/nodes", token=sim.token).status == 200  # system:masters


def test_token_request_bound_to_the_service_account(sim: testing.Running, raw: RawFn,
                                                    ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/serviceaccounts/robot/token"
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    r = raw("POST", path, body=body, token=sim.token)
    assert r.status == 404 and r.json()["message"] == 'serviceaccounts "robot" not found'
    sim.world.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "robot", "namespace": ns}})
    r = raw("POST", path, body={**body, "spec": {"expirationSeconds": 60}}, token=sim.token)
    assert r.status == 422 and "less than 10 minutes" in r.json()["message"]
    r = raw("POST", path, body=body, token=sim.token)
    assert r.status == 201, r.body
    tr = r.json()
    assert tr["kind"] == "TokenRequest" and tr["spec"]["expirationSeconds"] == 3600
    tok = tr["status"]["token"]
    assert tok.count(".") == 2 and tr["status"]["expirationTimestamp"].endswith("Z")
    who = raw("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", token=tok,
              body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert who.status == 201
    info = who.json()["status"]["userInfo"]
    assert info["username"] == f"system:serviceaccount:{ns}:robot"
    assert info["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{ns}",
                              "system:authenticated"]
    # the ServiceAccount may not mint tokens for itself without a rule
    assert raw("POST", path, body=body, token=tok).status == 403
    # expiry and deletion revoke
    tok2 = raw("POST", path, body=body, token=sim.token).json()["status"]["token"]
    sim.server.auth.expire(tok2)
    assert raw("GET", "/version", token=tok2).status == 401
    sim.world.client.delete("v1", "ServiceAccount", "robot", ns)
    deadline = time.monotonic() + 30
    while raw("GET", "/version", token=tok).status != 401 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert raw("GET", "/version", token=tok).status == 401


def test_kubectl_auth_can_i_and_create_token(sim: testing.Running, sa: tuple[str, str],
                                             kubectl: Any) -> None:
    ns, _ = sa
    _apply(sim, _role(ns, "pods", [{"apiGroups": [""], "resources": ["pods"],
                                    "verbs": ["list"]}]),
           _binding(ns, "pods", "Role", "pods", [{"kind": "ServiceAccount", "name": "robot"}]))
    tok = kubectl("create", "token", "robot", "-n", ns).stdout.strip()
    kc = sim.kubeconfig.with_name(f"kubeconfig-{ns}")
    sim.server.write_kubeconfig(kc, "robot", token=tok)
    env = {**os.environ, **sim.env_for(kc)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True,
                              timeout=60)

    assert run("auth", "can-i", "list", "pods", "-n", ns).stdout.strip() == "yes"
    no = run("auth", "can-i", "delete", "pods", "-n", ns)
    assert no.returncode == 1 and no.stdout.strip() == "no"
    assert f"system:serviceaccount:{ns}:robot" in run("auth", "whoami").stdout
    listed = run("auth", "can-i", "--list", "-n", ns).stdout
    assert "pods" in listed and "selfsubjectaccessreviews" in listed
    denied = run("get", "nodes")
    assert denied.returncode != 0
    assert ('Error from server (Forbidden): nodes is forbidden: User '
            f'"system:serviceaccount:{ns}:robot" cannot list resource "nodes" in API group "" '
            'at the cluster scope') in denied.stderr


def test_running_yields_service_account_kubeconfigs() -> None:
    with testing.running("empty:1", service_accounts=["harvester-system/harvester-upgrade"]
                         ) as sim:
        kc = sim.sa_kubeconfigs["harvester-system/harvester-upgrade"]
        assert sim.sa_tokens["harvester-system/harvester-upgrade"] in kc.read_text()
        env = {**os.environ, **sim.env_for(kc)}
        out = subprocess.run([KUBECTL, "auth", "whoami", "-o", "jsonpath={.status.userInfo"
                              ".username}"], env=env, capture_output=True, text=True,
                             timeout=60)
        assert out.stdout == "system:serviceaccount:harvester-system:harvester-upgrade"
        assert sim.world.client.try_get("v1", "ServiceAccount", "harvester-upgrade",
                                        "harvester-system") is not None
