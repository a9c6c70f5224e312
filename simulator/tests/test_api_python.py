"""The official ``kubernetes`` Python client (typed, dynamic, watch) and raw HTTP semantics."""

from __future__ import annotations

import collections
import json
import threading
import time
from typing import Any

import pytest
from kubernetes import client, dynamic, watch
from kubernetes.client.rest import ApiException


def _cm(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data}


def test_typed_crud_conflict_and_dry_run(api: Any, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    cm = v1.create_namespaced_config_map(ns, _cm("a", {"k": "1"}))
    assert cm.metadata.uid and int(cm.metadata.resource_version) > 0
    stale = cm.metadata.resource_version
    cm.data = {"k": "2"}
    cm2 = v1.replace_namespaced_config_map("a", ns, cm)
    assert cm2.data == {"k": "2"}
    cm.metadata.resource_version = stale
    with pytest.raises(ApiException) as exc:
        v1.replace_namespaced_config_map("a", ns, cm)
    assert exc.value.status == 409
    body = json.loads(exc.value.body)
    assert body["reason"] == "Conflict" and body["kind"] == "Status"
    assert "the object has been modified" in body["message"]
    v1.create_namespaced_config_map(ns, _cm("dry", {}), dry_run="All")
    with pytest.raises(ApiException) as exc:
        v1.read_namespaced_config_map("dry", ns)
    assert exc.value.status == 404 and exc.value.reason == "Not Found"
    # generateName
    gen = v1.create_namespaced_config_map(ns, {"metadata": {"generateName": "gen-"}})
    assert gen.metadata.name.startswith("gen-") and len(gen.metadata.name) == 9
    # no-op patch keeps the resourceVersion
    same = v1.patch_namespaced_config_map("a", ns, {"data": {"k": "2"}})
    assert same.metadata.resource_version == cm2.metadata.resource_version
    v1.delete_namespaced_config_map("a", ns)
    with pytest.raises(ApiException) as exc:
        v1.read_namespaced_config_map("a", ns)
    assert exc.value.status == 404


def test_list_selectors_and_paging(api: Any, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    for i in range(7):
        v1.create_namespaced_config_map(ns, _cm(f"c{i}", {}, {"grp": "odd" if i % 2 else "even",
                                                              "i": str(i)}))
    names = [c.metadata.name for c in v1.list_namespaced_config_map(
        ns, label_selector="grp=odd").items]
    assert names == ["c1", "c3", "c5"]
    assert len(v1.list_namespaced_config_map(ns, label_selector="i in (1,2),grp!=odd").items) \
        == 1
    assert len(v1.list_namespaced_config_map(ns, label_selector="!grp").items) == 0
    assert [c.metadata.name for c in v1.list_namespaced_config_map(
        ns, field_selector="metadata.name=c4").items] == ["c4"]
    page = v1.list_namespaced_config_map(ns, limit=3)
    assert len(page.items) == 3 and page.metadata._continue
    assert page.metadata.remaining_item_count == 4
    seen = [c.metadata.name for c in page.items]
    while page.metadata._continue:
        page = v1.list_namespaced_config_map(ns, limit=3, _continue=page.metadata._continue)
        seen += [c.metadata.name for c in page.items]
    assert seen == [f"c{i}" for i in range(7)]
    with pytest.raises(ApiException) as exc:
        v1.list_namespaced_config_map(ns, field_selector="data.k=1")
    assert exc.value.status == 400 and "field label not supported" in exc.value.body
    with pytest.raises(ApiException) as exc:
        v1.list_namespaced_config_map(ns, label_selector="a b c")
    assert exc.value.status == 400


def test_dynamic_client_patch_types_and_ssa(api: Any, ns: str) -> None:
    dc = dynamic.DynamicClient(api)
    deps = dc.resources.get(api_version="apps/v1", kind="Deployment")
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "dyn", "namespace": ns},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "dyn"}},
                     "template": {"metadata": {"labels": {"app": "dyn"}},
                                  "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}}
    created = deps.create(body=body, namespace=ns)
    assert created.metadata.generation == 1
    assert created.spec.template.spec.containers[0].imagePullPolicy == "IfNotPresent"
    p = deps.patch(name="dyn", namespace=ns, body={"spec": {"replicas": 0, "paused": True}},
                   content_type="application/merge-patch+json")
    assert p.spec.paused is True and p.metadata.generation == 2
    p = deps.patch(name="dyn", namespace=ns,
                   body=[{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}],
                   content_type="application/json-patch+json")
    assert p.metadata.labels.to_dict() == {"a": "b"}
    applied = deps.server_side_apply(
        namespace=ns, field_manager="tester",
        body={"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "dyn", "namespace": ns, "labels": {"owner": "tester"}}})
    assert applied.metadata.labels["owner"] == "tester"
    managers = {m["manager"]: m["operation"] for m in applied.metadata.managedFields}
    assert managers.get("tester") == "Apply"
    # scale subresource as autoscaling/v1 Scale
    apps = client.AppsV1Api(api)
    sc = apps.read_namespaced_deployment_scale("dyn", ns)
    assert sc.spec.replicas == 0 and sc.status.selector == "app=dyn"
    apps.patch_namespaced_deployment_scale("dyn", ns, {"spec": {"replicas": 0}})
    # status subresource ignores spec, main resource ignores status
    cur = apps.read_namespaced_deployment("dyn", ns)
    cur.spec.replicas = 5
    cur.status = client.V1DeploymentStatus(observed_generation=99)
    st = apps.replace_namespaced_deployment_status("dyn", ns, cur)
    assert st.spec.replicas == 0 and st.status.observed_generation == 99
    # dry-run delete keeps the object
    deps.delete(name="dyn", namespace=ns, query_params=[("dryRun", "All")])
    assert deps.get(name="dyn", namespace=ns).metadata.name == "dyn"


def test_watch_resume_from_resource_version(api: Any, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    first = v1.create_namespaced_config_map(ns, _cm("w1", {}))
    v1.create_namespaced_config_map(ns, _cm("w2", {}))
    v1.patch_namespaced_config_map("w1", ns, {"data": {"x": "1"}})
    seen = []
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_config_map, ns,
                       resource_version=first.metadata.resource_version, timeout_seconds=2):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "w2"), ("MODIFIED", "w1")]
    # from "0": synthetic ADDED for what exists
    initial = [ev["object"].metadata.name for ev in watch.Watch().stream(
        v1.list_namespaced_config_map, ns, resource_version="0", timeout_seconds=1)]
    assert sorted(initial) == ["w1", "w2"]


def test_watch_too_old_resource_version_is_410(api: Any, ns: str, sim: Any) -> None:
    v1 = client.CoreV1Api(api)
    store = sim.world.store
    old = v1.create_namespaced_config_map(ns, _cm("old", {})).metadata.resource_version
    with store.lock:
        saved = store._history
        store._history = collections.deque(list(saved)[-3:], maxlen=3)
    try:
        for i in range(5):
            v1.create_namespaced_config_map(ns, _cm(f"n{i}", {}))
        with pytest.raises(ApiException) as exc:
            for _ in watch.Watch().stream(v1.list_namespaced_config_map, ns,
                                          resource_version=old, timeout_seconds=2):
                pass
        assert exc.value.status == 410
    finally:
        with store.lock:
            store._history = collections.deque(saved, maxlen=saved.maxlen)


def test_watch_bookmarks_and_watch_list(raw: Any, sim: Any, ns: str) -> None:
    import http.client
    import ssl
    import tempfile

    sim.world.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "b1", "namespace": ns}})
    ctx = ssl.create_default_context()
    with tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False) as f:
        f.write(sim.server.ca_pem)
    ctx.load_verify_locations(f.name)
    conn = http.client.HTTPSConnection("127.0.0.1", sim.server.port, context=ctx, timeout=10)
    conn.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true"
                 "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
                 headers={"Authorization": f"Bearer {sim.token}"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Transfer-Encoding") == "chunked"
    events = [json.loads(ln) for ln in resp.read().splitlines() if ln.strip()]
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "b1"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    bad = raw("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true")
    assert bad.status == 422


def test_status_errors_auth_and_tables(raw: Any, ns: str, sim: Any) -> None:
    r = raw("GET", "/api/v1/namespaces", token="wrong")
    assert r.status == 401 and r.json()["reason"] == "Unauthorized"
    assert r.headers["Content-Type"] == "application/json"
    r = raw("GET", "/apis/nope/v1/things")
    assert r.status == 404 and r.json()["message"] == \
        "the server could not find the requested resource"
    r = raw("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/missing")
    assert r.json()["details"] == {"name": "missing", "group": "apps", "kind": "deployments"}
    r = raw("POST", f"/api/v1/namespaces/{ns}/pods",
            {"metadata": {"name": "p", "labels": {"a": "b c"}},
             "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert r.status == 422 and r.json()["details"]["kind"] == "Pod"
    assert r.json()["details"]["causes"][0]["field"] == "metadata.labels"
    r = raw("POST", "/api/v1/namespaces/absent/configmaps", {"metadata": {"name": "x"}})
    assert r.status == 404 and r.json()["message"] == 'namespaces "absent" not found'
    r = raw("GET", "/api/v1/nodes", headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    table = r.json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name", "Status", "Roles", "Age", "Version"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    r = raw("GET", "/version", token="")
    assert r.status == 200 and r.json()["major"] == "1"
    assert raw("GET", "/openapi/v3").json()["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert raw("GET", "/openapi/v2").json()["swagger"] == "2.0"
    disc = raw("GET", "/api/v1").json()
    ev = next(r for r in disc["resources"] if r["name"] == "pods/eviction")
    assert (ev["group"], ev["version"], ev["kind"]) == ("policy", "v1", "Eviction")


def test_eviction_pod_log_and_service_proxy(api: Any, ns: str, sim: Any) -> None:
    c = sim.world.client
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "srv", "namespace": ns, "labels": {"app": "srv"}},
           "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                    "ports": [{"name": "http", "containerPort": 8080}]}]}}
    c.create(pod)
    c.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "srv",
                                                                 "namespace": ns},
              "spec": {"selector": {"app": "srv"},
                       "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
    v1 = client.CoreV1Api(api)
    with pytest.raises(ApiException) as exc:
        v1.connect_get_namespaced_service_proxy_with_path("srv:80", ns, "index.html")
    assert exc.value.status == 503
    assert 'no endpoints available for service \\"srv\\"' in exc.value.body
    calls = []

    def handler(method: str, path: str, query: str, headers: dict[str, str],
                body: bytes) -> tuple[int, dict[str, str], bytes]:
        calls.append((method, path))
        return 200, {"Content-Type": "text/plain"}, b"hello from srv"

    sim.world.proxies.register_pod(ns, "srv", 8080, handler)

    def make_ready(p: dict[str, Any]) -> dict[str, Any]:
        p["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        return p

    c.modify("v1", "Pod", "srv", make_ready, ns, subresource="status")
    out = v1.connect_get_namespaced_service_proxy_with_path("srv:http", ns, "index.html")
    assert out == "hello from srv" and calls[-1] == ("GET", "/index.html")
    sim.world.extras["pod_logs"] = lambda n, p, ctr: "line1\nline2\nline3\n"
    try:
        assert v1.read_namespaced_pod_log("srv", ns, tail_lines=2) == "line2\nline3\n"
    finally:
        sim.world.extras.pop("pod_logs", None)
    # eviction of an unscheduled pod skips PDBs and deletes it
    v1.create_namespaced_pod_eviction("srv", ns, client.V1Eviction(
        metadata=client.V1ObjectMeta(name="srv", namespace=ns)))
    deadline = time.time() + 5
    while c.try_get("v1", "Pod", "srv", ns) is not None and time.time() < deadline:
        time.sleep(0.05)
    assert c.try_get("v1", "Pod", "srv", ns) is None


def test_api_faults_for_external_clients(api: Any, ns: str, sim: Any) -> None:
    v1 = client.CoreV1Api(api)
    faults = sim.world.faults
    spec = {"kind": "api_error", "fraction": 1.0, "code": 503, "_armed": True, "_fired": 0,
            "target": {"resource": "secrets"}}
    faults.specs.append(spec)
    try:
        with pytest.raises(ApiException) as exc:
            v1.list_namespaced_secret(ns)
        assert exc.value.status == 503
        assert v1.list_namespaced_config_map(ns).items is not None  # other resources fine
        # in-process controllers are never affected
        assert sim.world.client.list("v1", "Secret", ns) == []
    finally:
        faults.specs.remove(spec)
    assert sim.server.stats()["faults_injected"]["api_error"] >= 1


def test_concurrent_watchers_all_see_the_event(api: Any, ns: str, sim: Any) -> None:
    v1 = client.CoreV1Api(api)
    got: list[str] = []
    lock = threading.Lock()

    def watcher() -> None:
        w = watch.Watch()
        for ev in w.stream(v1.list_namespaced_config_map, ns, timeout_seconds=5):
            if ev["object"].metadata.name == "fan":
                with lock:
                    got.append(ev["type"])
                w.stop()

    threads = [threading.Thread(target=watcher) for _ in range(20)]
    for t in threads:
        t.start()
    deadline = time.time() + 5
    while sim.world.store.watcher_count() < 20 and time.time() < deadline:
        time.sleep(0.05)
    v1.create_namespaced_config_map(ns, _cm("fan", {}))
    for t in threads:
        t.join(10)
    assert got == ["ADDED"] * 20


def test_stale_status_update_is_a_conflict(api: Any, ns: str) -> None:
    """PUT .../status carries the object's resourceVersion as a precondition, like the main
    resource: controller-runtime's status writers (upgrade-toolkit) rely on the 409."""
    v1 = client.CoreV1Api(api)
    pod = v1.create_namespaced_pod(ns, {"metadata": {"name": "st"}, "spec": {
        "nodeName": "nowhere", "containers": [{"name": "c", "image": "busybox"}]}})
    stale = pod.metadata.resource_version
    pod.status.message = "first"
    fresh = v1.replace_namespaced_pod_status("st", ns, pod)
    assert fresh.status.message == "first" and fresh.metadata.resource_version != stale
    pod.metadata.resource_version = stale
    pod.status.message = "stale"
    with pytest.raises(ApiException) as exc:
        v1.replace_namespaced_pod_status("st", ns, pod)
    assert exc.value.status == 409
    assert v1.read_namespaced_pod("st", ns).status.message == "first"
