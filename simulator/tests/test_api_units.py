"""Unit tests of the API machinery: selectors, patch types, SSA ownership, watch cache, GC."""

from __future__ import annotations

from typing import Any

import pytest

from harvester_sim.api import errors
from harvester_sim.api.apply import ManagedFields, server_side_apply
from harvester_sim.api.patches import PatchError, json_patch, merge_patch, strategic_merge
from harvester_sim.api.resources import Registry
from harvester_sim.api.routing import parse
from harvester_sim.api.selectors import parse_field_selector, parse_label_selector
from harvester_sim.api.store import Store
from harvester_sim.api.tables import human_duration, jsonpath
from harvester_sim.clock import Clock


@pytest.fixture
def store() -> Store:
    s = Store(Registry(), Clock(1.0))
    ns_rt = s.registry.get("", "v1", "namespaces")
    assert ns_rt is not None
    s.create(ns_rt, {"metadata": {"name": "default"}})
    return s


def rt(store: Store, group: str, plural: str) -> Any:
    for r in store.registry.all():
        if r.group == group and r.plural == plural:
            return r
    raise KeyError(plural)


# ---------------------------------------------------------------- selectors
@pytest.mark.parametrize("sel,labels,want", [
    ("a=b", {"a": "b"}, True),
    ("a==b", {"a": "c"}, False),
    ("a!=b", {}, True),
    ("a in (x, y)", {"a": "y"}, True),
    ("a notin (x,y)", {"a": "z"}, True),
    ("a notin (x,y)", {}, True),
    ("a", {"a": ""}, True),
    ("!a", {"a": ""}, False),
    ("a=b,c", {"a": "b"}, False),
    ("app.kubernetes.io/name=web,tier in (a)", {"app.kubernetes.io/name": "web", "tier": "a"},
     True),
])
def test_label_selector(sel: str, labels: dict[str, str], want: bool) -> None:
    assert parse_label_selector(sel).matches(labels) is want


@pytest.mark.parametrize("bad", ["a b", "a=b=c=d!", "=x", "a in (b", "-a=b"])
def test_label_selector_errors_are_400(bad: str) -> None:
    with pytest.raises(errors.ApiError) as exc:
        sel = parse_label_selector(bad)
        sel.matches({})
        raise errors.bad_request("parsed")  # some forms fail on value checks only
    assert exc.value.code == 400


def test_field_selector() -> None:
    pod = {"metadata": {"name": "p", "namespace": "n"}, "spec": {"nodeName": "a"},
           "status": {"phase": "Running"}}
    allowed = {"metadata.name", "spec.nodeName", "status.phase"}.__contains__
    assert parse_field_selector("spec.nodeName=a,status.phase!=Failed", allowed).matches(pod)
    assert not parse_field_selector("spec.nodeName==b", allowed).matches(pod)
    with pytest.raises(errors.ApiError) as exc:
        parse_field_selector("spec.foo=1", allowed)
    assert exc.value.code == 400 and "field label not supported: spec.foo" in exc.value.message


# ---------------------------------------------------------------- patches
def test_merge_patch() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": None}, "l": [3]}) == \
        {"a": {"c": 2}, "l": [3]}


def test_json_patch_ops_and_errors() -> None:
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = json_patch(doc, [
        {"op": "add", "path": "/a/-", "value": 3},
        {"op": "add", "path": "/a/0", "value": 0},
        {"op": "remove", "path": "/b/c"},
        {"op": "copy", "from": "/a/1", "path": "/b/x"},
        {"op": "move", "from": "/b/x", "path": "/y~1z"},
        {"op": "replace", "path": "/a/3", "value": 9},
        {"op": "test", "path": "/y~1z", "value": 1},
    ])
    assert out == {"a": [0, 1, 2, 9], "b": {}, "y/z": 1}
    assert doc == {"a": [1, 2], "b": {"c": 1}}  # input untouched
    with pytest.raises(PatchError) as exc:
        json_patch(doc, [{"op": "test", "path": "/a/0", "value": 5}])
    assert exc.value.code == 422
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "remove", "path": "/nope"}])
    with pytest.raises(PatchError) as exc:
        json_patch(doc, {"op": "add"})
    assert exc.value.code == 400


def test_strategic_merge_lists_and_directives() -> None:
    dep = {"metadata": {"finalizers": ["a"], "labels": {"x": "1"}},
           "spec": {"template": {"spec": {
               "containers": [{"name": "app", "image": "i:1", "env": [{"name": "A", "value": "1"}],
                               "ports": [{"containerPort": 80, "name": "http"}]},
                              {"name": "side", "image": "s:1"}],
               "tolerations": [{"key": "t1"}],
               "volumes": [{"name": "v", "emptyDir": {}}]}}}}
    out = strategic_merge(dep, {
        "metadata": {"finalizers": ["b", "a"], "labels": {"x": None}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
            "containers": [{"name": "app", "env": [{"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                           {"name": "side", "$patch": "delete"}],
            "tolerations": [{"key": "t2"}],
            "volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"],
                         "hostPath": {"path": "/x"}}]}}}}, "Deployment")
    spec = out["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["app"]
    app = spec["containers"][0]
    assert app["image"] == "i:1" and [e["name"] for e in app["env"]] == ["A", "B"]
    assert app["ports"] == [{"containerPort": 80, "name": "http", "protocol": "TCP"}]
    assert spec["tolerations"] == [{"key": "t2"}]  # replaced whole, as in the real API
    assert spec["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert out["metadata"]["labels"] == {}
    node = {"status": {"conditions": [{"type": "Ready", "status": "True"},
                                      {"type": "DiskPressure", "status": "False"}]}}
    out = strategic_merge(node, {"status": {"conditions": [{"type": "Ready",
                                                            "status": "False"}]}}, "Node")
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "False"},
                                           {"type": "DiskPressure", "status": "False"}]
    out = strategic_merge(node, {"status": {"conditions": [{"$patch": "replace"},
                                                           {"type": "X"}]}}, "Node")
    assert out["status"]["conditions"] == [{"type": "X"}]
    svc = {"spec": {"ports": [{"port": 80, "name": "a"}, {"port": 443, "name": "b"}]}}
    out = strategic_merge(svc, {"spec": {"ports": [{"port": 443, "name": "https"}]}}, "Service")
    assert out["spec"]["ports"] == [{"port": 80, "name": "a"}, {"port": 443, "name": "https"}]


def test_server_side_apply_ownership(store: Store) -> None:
    cm_rt = rt(store, "", "configmaps")
    mf = ManagedFields()
    cfg = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
           "data": {"a": "1", "b": "2"}}
    obj, created = server_side_apply(store, mf, cm_rt, "default", "c", cfg, "alice", False,
                                     None, False)
    assert created and obj["metadata"]["managedFields"][0]["fieldsV1"] == {
        "f:data": {"f:a": {}, "f:b": {}}}
    # bob applies a different value for a -> conflict; same value -> shared, no conflict
    bob = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
           "data": {"a": "9"}}
    with pytest.raises(errors.ApiError) as exc:
        server_side_apply(store, mf, cm_rt, "default", "c", bob, "bob", False, None, False)
    assert exc.value.code == 409
    assert exc.value.message == 'Apply failed with 1 conflict: conflict with "alice": .data.a'
    shared = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
              "data": {"a": "1"}}
    rv = store.get(cm_rt, "default", "c")["metadata"]["resourceVersion"]
    server_side_apply(store, mf, cm_rt, "default", "c", shared, "bob", False, None, False)
    # alice drops b from her config: b is removed; a stays (bob co-owns it)
    mine = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    obj, _ = server_side_apply(store, mf, cm_rt, "default", "c", mine, "alice", False, None,
                               False)
    assert obj["data"] == {"a": "1"}
    assert obj["metadata"]["resourceVersion"] != rv
    obj, _ = server_side_apply(store, mf, cm_rt, "default", "c", bob, "bob", True, None, False)
    assert obj["data"] == {"a": "9"}
    owners = {m["manager"]: m["fieldsV1"] for m in obj["metadata"]["managedFields"]}
    assert owners == {"bob": {"f:data": {"f:a": {}}}}
    # re-applying the same config is a no-op (same resourceVersion)
    again, _ = server_side_apply(store, mf, cm_rt, "default", "c", bob, "bob", False, None,
                                 False)
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


# ---------------------------------------------------------------- watch cache / 410
def test_watch_history_and_410(store: Store) -> None:
    cm_rt = rt(store, "", "configmaps")
    first = store.create(cm_rt, {"metadata": {"name": "a"}}, "default")
    store.create(cm_rt, {"metadata": {"name": "b"}}, "default")
    w = store.watch(cm_rt, "default", first["metadata"]["resourceVersion"])
    item = w.next(timeout=1)
    assert item is not None and item[0] == "ADDED" and item[1].obj["metadata"]["name"] == "b"
    w.stop()
    import collections

    store._history = collections.deque(list(store._history)[-1:], maxlen=1)
    store.create(cm_rt, {"metadata": {"name": "c"}}, "default")
    with pytest.raises(errors.ApiError) as exc:
        store.watch(cm_rt, "default", first["metadata"]["resourceVersion"])
    assert exc.value.code == 410 and exc.value.reason == "Expired"
    # selector transitions: leaving the selector is DELETED for that watcher
    w = store.watch(cm_rt, "default", None, label_selector="x=1")
    store.modify(cm_rt, "default", "a", lambda o: {**o, "metadata": {**o["metadata"],
                                                                        "labels": {"x": "1"}}})
    store.modify(cm_rt, "default", "a", lambda o: {**o, "metadata": {**o["metadata"],
                                                                        "labels": {"x": "2"}}})
    types = [w.next(timeout=1) for _ in range(2)]
    assert [t[0] for t in types if t] == ["ADDED", "DELETED"]
    w.stop()


def test_watch_from_a_middle_resource_version_replays_only_later_events_in_order(
        store: Store) -> None:
    cm_rt = rt(store, "", "configmaps")
    sec_rt = rt(store, "", "secrets")
    rvs = []
    for i in range(6):
        rvs.append(store.create(cm_rt, {"metadata": {"name": f"c{i}"}}, "default")
                   ["metadata"]["resourceVersion"])
        store.create(sec_rt, {"metadata": {"name": f"s{i}"}}, "default")
    store.delete(cm_rt, "default", "c1")
    w = store.watch(cm_rt, "default", rvs[2])
    got = []
    while (item := w.next(timeout=0.2)) is not None:
        got.append((item[0], item[1].obj["metadata"]["name"]))
    w.stop()
    assert got == [("ADDED", "c3"), ("ADDED", "c4"), ("ADDED", "c5"), ("DELETED", "c1")]
    # from the newest revision: nothing to replay
    w = store.watch(cm_rt, "default", str(store.current_rv()))
    assert w.next(timeout=0.1) is None
    w.stop()


def _names(store: Store, r: Any, sel: str, ns: str | None = "default") -> list[str]:
    return [o["metadata"]["name"] for o in store.list(r, ns, sel)[0]]


def test_list_by_label_follows_creates_label_changes_and_deletes(store: Store) -> None:
    cm_rt = rt(store, "", "configmaps")
    ns_rt = rt(store, "", "namespaces")
    store.create(ns_rt, {"metadata": {"name": "other"}})
    for i in range(5):
        store.create(cm_rt, {"metadata": {"name": f"c{i}", "labels": {
            "vm": f"v{i % 2}", "app": "a"}}}, "default")
    store.create(cm_rt, {"metadata": {"name": "o0", "labels": {"vm": "v0"}}}, "other")
    assert _names(store, cm_rt, "vm=v0") == ["c0", "c2", "c4"]
    assert _names(store, cm_rt, "vm=v0", None) == ["c0", "c2", "c4", "o0"]
    assert _names(store, cm_rt, "vm=v0,app=a") == ["c0", "c2", "c4"]
    assert _names(store, cm_rt, "vm=v0,app!=a") == []
    assert _names(store, cm_rt, "vm=v9") == []
    assert _names(store, cm_rt, "vm in (v1)") == ["c1", "c3"]
    # a label changed, one dropped, one added
    store.modify(cm_rt, "default", "c2", lambda o: {**o, "metadata": {
        **o["metadata"], "labels": {"vm": "v1", "app": "a"}}})
    store.modify(cm_rt, "default", "c4", lambda o: {**o, "metadata": {
        **o["metadata"], "labels": {"app": "a"}}})
    store.modify(cm_rt, "default", "c3", lambda o: {**o, "metadata": {
        **o["metadata"], "labels": {"vm": "v1", "app": "a", "new": "x"}}})
    assert _names(store, cm_rt, "vm=v0") == ["c0"]
    assert _names(store, cm_rt, "vm=v1") == ["c1", "c2", "c3"]
    assert _names(store, cm_rt, "new=x") == ["c3"]
    # a delete drops them
    store.delete(cm_rt, "default", "c1")
    assert _names(store, cm_rt, "vm=v1") == ["c2", "c3"]
    # a delete held by a finalizer keeps the object (and its labels) listed
    store.modify(cm_rt, "default", "c0", lambda o: {**o, "metadata": {
        **o["metadata"], "finalizers": ["example.com/hold"]}})
    store.delete(cm_rt, "default", "c0")
    assert _names(store, cm_rt, "vm=v0") == ["c0"]
    store.modify(cm_rt, "default", "c0", lambda o: {**o, "metadata": {
        **o["metadata"], "finalizers": []}})
    assert _names(store, cm_rt, "vm=v0") == []
    # every selected list is what a scan of the kind finds
    for sel in ("vm=v1", "app=a", "app=a,vm=v1", "new=x", "vm=v0"):
        want = sorted(o["metadata"]["name"] for o in store.list(cm_rt, "default")[0]
                      if all(o["metadata"].get("labels", {}).get(k) == v
                             for k, v in (kv.split("=") for kv in sel.split(","))))
        assert _names(store, cm_rt, sel) == want, sel
    # paging over an equality selector
    items, _, cont, remaining = store.list(cm_rt, "default", "app=a", limit=1)
    assert [o["metadata"]["name"] for o in items] == ["c2"] and cont and remaining == 2
    items, _, cont, _ = store.list(cm_rt, "default", "app=a", limit=5, continue_token=cont)
    assert [o["metadata"]["name"] for o in items] == ["c3", "c4"] and cont is None


def test_list_of_pods_by_node_follows_binding_and_deletes(store: Store) -> None:
    """The pods-by-node index answers ``spec.nodeName=<node>`` exactly as a scan does."""
    pod_rt = rt(store, "", "pods")
    store.create(rt(store, "", "namespaces"), {"metadata": {"name": "other"}})

    def pod(name: str, node: str = "", ns: str = "default") -> None:
        spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
        if node:
            spec["nodeName"] = node
        store.create(pod_rt, {"metadata": {"name": name}, "spec": spec}, ns)

    def on(node: str, ns: str | None = "default", sel: str | None = None) -> list[str]:
        return [o["metadata"]["name"] for o in store.list(
            pod_rt, ns, sel, f"spec.nodeName={node}")[0]]

    def scan(node: str, ns: str | None = "default") -> list[str]:
        return sorted(o["metadata"]["name"] for o in store.list(pod_rt, ns)[0]
                      if (o.get("spec") or {}).get("nodeName", "") == node)

    for i in range(6):
        pod(f"p{i}", f"n{i % 3}")
    pod("q0", "n0", "other")
    pod("unbound")
    assert on("n0") == ["p0", "p3"] and on("n0", None) == ["p0", "p3", "q0"]
    assert on("n9") == [] and on("") == ["unbound"]
    # bound by the scheduler (an update from no node to one)
    store.modify(pod_rt, "default", "unbound", lambda o: {
        **o, "spec": {**o["spec"], "nodeName": "n2"}})
    assert on("n2") == ["p2", "p5", "unbound"] and on("") == []
    store.delete(pod_rt, "default", "p5", grace_period=0)
    store.modify(pod_rt, "default", "p2", lambda o: {**o, "metadata": {
        **o["metadata"], "labels": {"a": "b"}}})
    assert on("n2") == ["p2", "unbound"] and on("n2", sel="a=b") == ["p2"]
    for node in ("n0", "n1", "n2", "n9", ""):
        assert on(node) == scan(node) and on(node, None) == scan(node, None), node


def test_a_list_of_a_whole_kind_stays_in_order_through_creates_updates_and_deletes(
        store: Store) -> None:
    """Lists answer (namespace, name) order whatever order objects came and went in (the
    order of a whole kind is kept between lists, not sorted again for each)."""
    cm_rt = rt(store, "", "configmaps")
    store.create(rt(store, "", "namespaces"), {"metadata": {"name": "a-ns"}})

    def names(ns: str | None = None, limit: int | None = None) -> list[str]:
        return [f"{o['metadata']['namespace']}/{o['metadata']['name']}"
                for o in store.list(cm_rt, ns, limit=limit)[0]]

    for name in ("m", "c", "x", "a"):
        store.create(cm_rt, {"metadata": {"name": name}}, "default")
    assert names() == ["default/a", "default/c", "default/m", "default/x"]
    store.create(cm_rt, {"metadata": {"name": "b"}}, "default")
    store.create(cm_rt, {"metadata": {"name": "z"}}, "a-ns")
    assert names() == ["a-ns/z", "default/a", "default/b", "default/c", "default/m",
                       "default/x"]
    store.modify(cm_rt, "default", "m", lambda o: {**o, "data": {"k": "v"}})
    store.delete(cm_rt, "default", "c")
    store.create(cm_rt, {"metadata": {"name": "d"}}, "default")   # as many as before
    assert names() == ["a-ns/z", "default/a", "default/b", "default/d", "default/m",
                       "default/x"]
    assert names("default", limit=2) == ["default/a", "default/b"]
    assert store.list(cm_rt, "default")[0][3]["data"] == {"k": "v"}
    # one namespace of the kind, beside namespaces its name is a prefix of or follows
    for ns in ("a", "a-b", "ab", "a0"):
        store.create(rt(store, "", "namespaces"), {"metadata": {"name": ns}})
        store.create(cm_rt, {"metadata": {"name": "q"}}, ns)
    assert names("a") == ["a/q"] and names("a-b") == ["a-b/q"] and names("ab") == ["ab/q"]
    assert names("a-ns") == ["a-ns/z"] and names("none") == []
    assert names() == ["a/q", "a-b/q", "a-ns/z", "a0/q", "ab/q", "default/a", "default/b",
                       "default/d", "default/m", "default/x"]


# ---------------------------------------------------------------- GC
def _owned(store: Store, owner: dict[str, Any], name: str) -> dict[str, Any]:
    cm_rt = rt(store, "", "configmaps")
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    return store.create(cm_rt, {"metadata": {"name": name, "ownerReferences": [ref]}},
                        "default")


def _deployment(store: Store, name: str) -> dict[str, Any]:
    dep_rt = rt(store, "apps", "deployments")
    return store.create(dep_rt, {"metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}}}}, "default")


def test_gc_background_foreground_orphan(store: Store) -> None:
    cm_rt = rt(store, "", "configmaps")
    dep_rt = rt(store, "apps", "deployments")
    d = _deployment(store, "bg")
    _owned(store, d, "bg-child")
    store.delete(dep_rt, "default", "bg", propagation="Background")
    assert store.get_ref(cm_rt, "default", "bg-child") is None

    d = _deployment(store, "orph")
    _owned(store, d, "orph-child")
    store.delete(dep_rt, "default", "orph", propagation="Orphan")
    child = store.get(cm_rt, "default", "orph-child")
    assert "ownerReferences" not in child["metadata"]
    assert store.get_ref(dep_rt, "default", "orph") is None

    d = _deployment(store, "fg")
    c = _owned(store, d, "fg-child")
    fins = {"metadata": {**c["metadata"], "finalizers": ["test/hold"]}}
    store.update(cm_rt, {**c, **fins}, "default")
    store.delete(dep_rt, "default", "fg", propagation="Foreground")
    owner = store.get(dep_rt, "default", "fg")
    assert owner["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in owner["metadata"]["finalizers"]
    # the child is held by its finalizer; releasing it lets the owner go
    store.modify(cm_rt, "default", "fg-child",
                 lambda o: {**o, "metadata": {**o["metadata"], "finalizers": []}})
    assert store.get_ref(cm_rt, "default", "fg-child") is None
    assert store.get_ref(dep_rt, "default", "fg") is None


def test_job_defaults_and_pod_strategy(store: Store) -> None:
    job_rt = rt(store, "batch", "jobs")
    job = store.create(job_rt, {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}, "default")
    uid = job["metadata"]["uid"]
    assert job["spec"]["backoffLimit"] == 6
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "j"
    pod_rt = rt(store, "", "pods")
    pod = store.create(pod_rt, {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"}}, "default")
    assert pod["status"]["phase"] == "Pending" and pod["status"]["qosClass"] == "BestEffort"
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    with pytest.raises(errors.ApiError) as exc:
        store.modify(pod_rt, "default", "p", lambda o: {**o, "spec": {
            **o["spec"], "restartPolicy": "Never"}})
    assert exc.value.code == 422


# ---------------------------------------------------------------- routing, tables
def test_routing() -> None:
    i = parse("GET", "/api/v1/namespaces/ns1/pods/p/log", False)
    assert (i.resource, i.namespace, i.name, i.subresource, i.verb) == (
        "pods", "ns1", "p", "log", "get")
    i = parse("GET", "/api/v1/namespaces/ns1", False)
    assert (i.resource, i.name, i.verb) == ("namespaces", "ns1", "get")
    i = parse("GET", "/apis/apps/v1/deployments", True)
    assert (i.group, i.resource, i.namespace, i.verb) == ("apps", "deployments", None, "watch")
    i = parse("GET", "/api/v1/namespaces/n/services/web:80/proxy/a/b?x", False)
    assert (i.name, i.subresource, i.rest) == ("web:80", "proxy", "/a/b?x")
    assert not parse("GET", "/version", False).is_resource


def test_human_duration_and_jsonpath() -> None:
    assert [human_duration(s) for s in (5, 130, 600, 3 * 3600 + 60, 50 * 3600)] == \
        ["5s", "2m10s", "10m", "3h1m", "2d2h"]
    obj = {"status": {"conditions": [{"type": "A", "status": "False"},
                                     {"type": "Ready", "status": "True"}]},
           "spec": {"items": [{"n": 1}, {"n": 2}]}}
    assert jsonpath(obj, '.status.conditions[?(@.type=="Ready")].status') == ["True"]
    assert jsonpath(obj, ".spec.items[*].n") == [1, 2]
    assert jsonpath(obj, ".spec.items[1].n") == [2]
    assert jsonpath(obj, ".spec.missing") == []


def test_secret_string_data_is_merged_into_data(store: Store) -> None:
    sec_rt = rt(store, "", "secrets")
    created = store.create(sec_rt, {"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eQ=="},
                                    "stringData": {"b": "bee", "c": "sea"}}, "default")
    assert "stringData" not in created
    assert created["data"] == {"a": "eA==", "b": "YmVl", "c": "c2Vh"}
    updated = store.update(sec_rt, {**created, "stringData": {"a": "ay"}}, "default")
    assert "stringData" not in updated and updated["data"]["a"] == "YXk="


# ---------------------------------------------------------------- list bodies
def test_list_items_json_is_the_objects_json_and_follows_writes(store: Store) -> None:
    """server.ItemJson (list items serialised once per resourceVersion) gives the bytes of
    json.dumps of the stored objects, before and after a write, a delete and a re-create."""
    import json

    from harvester_sim.api.server import ItemJson
    cm = rt(store, "", "configmaps")
    for i in range(3):
        store.create(cm, {"metadata": {"name": f"c{i}", "namespace": "default"},
                          "data": {"k": str(i)}})
    cache = ItemJson(limit=4)

    def listed() -> tuple[bytes, bytes]:
        items = store.list(cm, "default", copy_items=False)[0]
        return cache.items(cm, items), json.dumps(items, separators=(",", ":")).encode()

    got, want = listed()
    assert got == want and b'"k":"1"' in got
    assert listed()[0] == want                       # served again, unchanged
    cur = store.get(cm, "default", "c1")
    assert cur is not None
    cur["data"] = {"k": "changed"}
    store.update(cm, cur, "default")
    got, want = listed()
    assert got == want and b'"k":"changed"' in got   # the new version, not the cached one
    store.delete(cm, "default", "c2")
    store.create(cm, {"metadata": {"name": "c2", "namespace": "default"}, "data": {"k": "new"}})
    store.create(cm, {"metadata": {"name": "c3", "namespace": "default"}})   # past the limit
    got, want = listed()
    assert got == want and b'"k":"new"' in got
    assert cache.items(cm, []) == b"[]"
