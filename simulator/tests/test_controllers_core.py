"""The core simulated controllers (kubelet, scheduler, workloads, PDBs, endpoints), tested
through the API only (the in-process client: same store, semantics and errors as HTTP).

Most tests run a world with just the core controllers so that nothing else (Rancher's
planner, KubeVirt, ...) acts on the test's nodes; one test starts a full built-in scenario
to check the kubelet adopts the loader's nodes. Simulated time runs 100x faster; waits are
short real-time polling loops with deadlines.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harvester_sim import testing
from harvester_sim.api.errors import ApiError
from harvester_sim.programs.base import REGISTRY, ProgramContext
from harvester_sim.world import World

# an ApiError (an object not there yet) counts as "not yet" in this file's waits
wait_for = functools.partial(testing.wait_for, ignore=(ApiError,))

CORE = ["namespaces", "kubelet", "scheduler", "deployments", "replicasets", "daemonsets",
        "statefulsets", "jobs", "endpoints", "disruption"]
SPEED = 100.0
MIB = 1024 * 1024


def _exit_program(ctx: ProgramContext) -> Any:
    """Test program: log, run SECONDS simulated seconds, exit with EXIT."""
    ctx.log(f"started on {ctx.node}")
    yield float(ctx.env.get("SECONDS", "5"))
    code = int(ctx.env.get("EXIT", "0"))
    ctx.log(f"exiting {code}")
    return code


REGISTRY.register("test-core-exit", lambda image, cmd, args: image.startswith("test/exit"),
                  _exit_program)


def node(name: str, labels: dict[str, str] | None = None, cpu: str = "4", memory: str = "8Gi",
         taints: list[dict[str, Any]] | None = None,
         images: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              **(labels or {})}},
        "spec": {},
        "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110",
                                "ephemeral-storage": "100Gi"},
                   "nodeInfo": {"osImage": "Harvester v1.4.0",
                                "kubeletVersion": "v1.30.7+rke2r1"},
                   "images": images or []}}
    if taints:
        obj["spec"]["taints"] = taints
    return obj


def pod(name: str, image: str = "nginx:1.25", ns: str = "default", **spec: Any
        ) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    for k in ("resources", "env"):
        if k in spec:
            container[k] = spec.pop(k)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": spec.pop("labels", {})},
            "spec": {"containers": [container], **spec}}


@pytest.fixture
def world() -> Iterator[World]:
    w = World({}, speed=SPEED)
    for name in CORE:
        mod = importlib.import_module(f"harvester_sim.controllers.{name}")
        w.controllers[name] = mod.setup(w)
    w.runtime.start()
    for i in range(3):
        w.client.create(node(f"node-{i}", {"zone": "a" if i < 2 else "b"}))
    yield w
    w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


def get(w: World, kind: str, name: str, ns: str | None = "default",
        api: str = "v1") -> dict[str, Any] | None:
    return w.client.try_get(api, kind, name, ns)


def phase(w: World, name: str, ns: str = "default") -> str | None:
    p = get(w, "Pod", name, ns)
    return None if p is None else (p.get("status") or {}).get("phase")


def cond(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c  # type: ignore[no-any-return]
    return None


# ------------------------------------------------------------------------------ kubelet
def test_kubelets_renew_their_leases_each_on_its_own_phase() -> None:
    """Six kubelets adopted in one step do not renew their Leases in one step for ever after:
    the renewal after the first comes at each node's own phase of the interval, as kubelets
    started at different moments do (a cluster's every Lease written at once is a burst the
    runtime's other work waits behind)."""
    w = World({}, speed=100)
    w.controllers["kubelet"] = importlib.import_module(
        "harvester_sim.controllers.kubelet").setup(w)
    renewals: dict[str, list[float]] = {}

    def seen(ev: Any) -> None:
        if ev.rt is not None and ev.rt.kind == "Lease" and ev.type in ("ADDED", "MODIFIED"):
            renewals.setdefault(ev.obj["metadata"]["name"], []).append(w.clock.now())
    w.store.subscribe(seen)
    w.runtime.start()
    try:
        for i in range(6):
            w.client.create(node(f"node-{i}", {}))
        interval = w.controllers["kubelet"]._lease_interval()
        wait_for(lambda: len(renewals) == 6 and all(len(v) >= 3 for v in renewals.values()),
                 timeout=30, what="three renewals of every Lease")
    finally:
        w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]
    second = sorted(v[1] for v in renewals.values())
    assert second[-1] - second[0] > interval / 4, (interval, second)
    for v in renewals.values():   # then every interval, from the node's own phase
        assert v[2] - v[1] == pytest.approx(interval, abs=interval / 10), (interval, v)


def test_kubelet_adopts_nodes_lease_and_stats(world: World) -> None:
    c = world.client
    n = wait_for(lambda: cond(get(world, "Node", "node-0", None), "Ready"), what="Ready")
    assert n["status"] == "True" and n["reason"] == "KubeletReady"
    nd = c.get("v1", "Node", "node-0")
    assert nd["status"]["nodeInfo"]["osImage"] == "Harvester v1.4.0"   # kept
    assert nd["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert nd["status"]["allocatable"]["cpu"] == "4"
    assert any(a["type"] == "InternalIP" for a in nd["status"]["addresses"])
    lease = wait_for(lambda: get(world, "Lease", "node-0", "kube-node-lease",
                                 "coordination.k8s.io/v1"), what="lease")
    assert lease["spec"]["holderIdentity"] == "node-0"
    first = lease["spec"]["renewTime"]
    wait_for(lambda: get(world, "Lease", "node-0", "kube-node-lease",
                         "coordination.k8s.io/v1")["spec"]["renewTime"] != first,
             what="lease renewal")
    handler = world.proxies.node_handler("node-0")
    assert handler is not None
    code, _, body = handler("GET", "/stats/summary", "", {}, b"")
    import json

    fs = json.loads(body)["node"]["fs"]
    assert code == 200 and fs["capacityBytes"] == 100 * 1024 ** 3
    assert fs["usedBytes"] + fs["availableBytes"] == fs["capacityBytes"]
    code, _, body = handler("GET", "/configz", "", {}, b"")
    assert json.loads(body)["kubeletconfig"]["imageGCHighThresholdPercent"] == 85


def test_pod_runs_program_logs_and_succeeds(world: World) -> None:
    c = world.client
    c.create(pod("once", "test/exit:1", restartPolicy="Never",
                 env=[{"name": "EXIT", "value": "0"}]))
    wait_for(lambda: phase(world, "once") == "Succeeded", what="Succeeded")
    p = c.get("v1", "Pod", "once", "default")
    term = p["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"
    assert cond(p, "Ready")["reason"] == "PodCompleted"
    logs = world.extras["pod_logs"]("default", "once", "main")
    assert "started on" in logs and "exiting 0" in logs


def test_failing_pod_and_restart_policy(world: World) -> None:
    c = world.client
    c.create(pod("fails", "test/exit:1", restartPolicy="Never",
                 env=[{"name": "EXIT", "value": "3"}]))
    c.create(pod("crashes", "test/exit:1", restartPolicy="Always",
                 env=[{"name": "EXIT", "value": "1"}, {"name": "SECONDS", "value": "1"}]))
    wait_for(lambda: phase(world, "fails") == "Failed", what="Failed")
    p = c.get("v1", "Pod", "fails", "default")
    assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    wait_for(lambda: c.get("v1", "Pod", "crashes", "default")["status"]
             ["containerStatuses"][0]["restartCount"] >= 1, what="restart")
    assert phase(world, "crashes") == "Running"


def test_image_pull_adds_to_node_images(world: World) -> None:
    c = world.client
    c.create(pod("puller", "registry.example.com/team/app:v9", nodeName="node-1"))
    wait_for(lambda: phase(world, "puller") == "Running", what="Running")
    imgs = c.get("v1", "Node", "node-1")["status"]["images"]
    assert any("registry.example.com/team/app:v9" in i["names"] and i["sizeBytes"] > 0
               for i in imgs)
    kubelet = world.controllers["kubelet"]
    assert world.runtime.run_sync(lambda: kubelet.has_image(
        "node-1", "registry.example.com/team/app:v9"))
    events = c.list("v1", "Event", "default")
    assert any(e["reason"] == "Pulling" for e in events)
    # a second pod with the same image does not pull again
    pulls = world.controllers["kubelet"].stats["image_pulls"]
    c.create(pod("puller2", "registry.example.com/team/app:v9", nodeName="node-1"))
    wait_for(lambda: phase(world, "puller2") == "Running", what="Running")
    assert world.controllers["kubelet"].stats["image_pulls"] == pulls


def _report(w: World, name: str) -> list[dict[str, Any]]:
    return list(w.client.get("v1", "Node", name)["status"].get("images") or [])


def _seeded_node(w: World, name: str, store: list[dict[str, Any]]) -> Any:
    """A Node created with ``store`` as its images, once its kubelet reports it."""
    w.client.create(node(name, images=store))
    kubelet = w.controllers["kubelet"]
    wait_for(lambda: w.runtime.run_sync(lambda: len(kubelet.images(name))) == len(store) and
             len(_report(w, name)) == min(50, len(store)), what=f"{name} adopted")
    return kubelet


def test_status_images_reports_the_50_largest_images_with_at_most_5_names(
        world: World) -> None:
    """kubelet's nodestatus.Images: nodeStatusMaxImages (50) images, largest first (equal
    sizes by image ID, descending), at most MaxNamesPerImageInNodeStatus (5) names each; the
    rest of the store is still the node's."""
    from harvester_sim.controllers.kubelet import image_id

    # 70 images in no particular order, one with 7 names, two of the same size
    sizes = [((i * 37) % 70 + 1) * 1000 for i in range(70)]
    store = [{"names": [f"example.com/img-{i}:v1"], "sizeBytes": s}
             for i, s in enumerate(sizes)]
    store[5]["names"] = [f"example.com/many-{k}:v1" for k in range(7)]
    store[5]["sizeBytes"] = 10**9
    tie = [{"names": [f"example.com/tie-{k}:v1"], "sizeBytes": 500_000_000} for k in range(2)]
    store += tie
    kubelet = _seeded_node(world, "node-img", store)

    report = _report(world, "node-img")
    assert len(report) == 50
    sizes_reported = [i["sizeBytes"] for i in report]
    assert sizes_reported == sorted(sizes_reported, reverse=True)
    assert sizes_reported == sorted((i["sizeBytes"] for i in store), reverse=True)[:50]
    assert report[0]["names"] == [f"example.com/many-{k}:v1" for k in range(5)]
    assert all(len(i["names"]) <= 5 for i in report)
    by_id = sorted(tie, key=lambda i: image_id(tuple(i["names"])), reverse=True)
    assert [i["names"] for i in report[1:3]] == [i["names"] for i in by_id]
    # the smallest images are not reported but are still in the store
    smallest = min(store, key=lambda i: i["sizeBytes"])["names"][0]
    assert not any(smallest in i["names"] for i in report)
    assert world.runtime.run_sync(lambda: kubelet.has_image("node-img", smallest))
    assert world.runtime.run_sync(lambda: kubelet.has_image("node-img",
                                                            "example.com/many-6:v1"))
    assert len(world.runtime.run_sync(lambda: kubelet.images("node-img"))) == len(store)


def test_image_store_changes_only_through_the_kubelet(world: World) -> None:
    c = world.client
    store = [{"names": [f"example.com/base-{i}:v1"], "sizeBytes": (i + 1) * MIB}
             for i in range(60)]
    kubelet = _seeded_node(world, "node-img", store)
    ns = kubelet.nodes["node-img"]

    def names() -> list[str]:
        return [i["names"][0] for i in _report(world, "node-img")]

    # a pull larger than everything comes first; a small one is stored but not reported
    world.runtime.run_sync(lambda: kubelet.add_images(
        "node-img", [("example.com/huge:1", 900 * MIB), ("example.com/tiny:1", 1)]))
    wait_for(lambda: names()[0] == "example.com/huge:1", what="huge reported")
    assert "example.com/tiny:1" not in names() and len(names()) == 50
    assert world.runtime.run_sync(lambda: kubelet.has_image("node-img", "example.com/tiny:1"))
    assert world.runtime.run_sync(lambda: kubelet.remove_images(
        "node-img", ["example.com/huge:1"])) == ["example.com/huge:1"]
    wait_for(lambda: "example.com/huge:1" not in names(), what="huge removed")
    assert names()[0] == "example.com/base-59:v1"
    assert not world.runtime.run_sync(lambda: kubelet.has_image("node-img",
                                                                "example.com/huge:1"))

    # a heartbeat does not rebuild the report while the store is unchanged
    doc = world.runtime.run_sync(ns.images_status)
    world.runtime.run_sync(lambda: kubelet._write_node_status("node-img", heartbeat=True))
    assert world.runtime.run_sync(ns.images_status) is doc

    # a client's edit of status.images changes nothing in the store, and the kubelet's
    # next status update writes its report back
    before = world.runtime.run_sync(lambda: kubelet.images("node-img"))
    report = _report(world, "node-img")

    def edit(n: dict[str, Any]) -> dict[str, Any]:
        n["status"]["images"] = [{**i, "extra": "x"} for i in n["status"]["images"][1:]] + \
            [{"names": ["example.com/injected:1"], "sizeBytes": 10**12}]
        return n
    c.modify("v1", "Node", "node-img", edit, subresource="status")
    assert "example.com/injected:1" in names()
    assert world.runtime.run_sync(lambda: kubelet.images("node-img")) == before
    assert not world.runtime.run_sync(lambda: kubelet.has_image("node-img",
                                                                "example.com/injected:1"))
    assert world.runtime.run_sync(lambda: kubelet.has_image("node-img", report[0]["names"][0]))
    # 10 simulated seconds: well before the next periodic report (10 wall seconds at most)
    wait_for(lambda: _report(world, "node-img") == report, timeout=5,
             what="report written back")
    assert all(sorted(i) == ["names", "sizeBytes"] for i in _report(world, "node-img"))


def test_graceful_delete_finishes_after_stop(world: World) -> None:
    c = world.client
    c.create(pod("svc", terminationGracePeriodSeconds=30))
    wait_for(lambda: phase(world, "svc") == "Running", what="Running")
    out = c.delete("v1", "Pod", "svc", "default")
    assert out is not None and out["metadata"].get("deletionTimestamp")
    assert get(world, "Pod", "svc") is not None          # still Terminating
    wait_for(lambda: get(world, "Pod", "svc") is None, what="pod gone")


def test_node_reboot_kills_pods_and_returns_with_new_os(world: World) -> None:
    c = world.client
    c.create(pod("victim", nodeName="node-2"))
    wait_for(lambda: phase(world, "victim") == "Running", what="Running")
    kubelet = world.controllers["kubelet"]
    assert kubelet.reboot("node-2", new_os_image="Harvester v1.5.0",
                          new_kubelet_version="v1.31.4+rke2r1")
    wait_for(lambda: phase(world, "victim") == "Failed", what="pod killed")
    p = c.get("v1", "Pod", "victim", "default")
    assert p["status"]["reason"] == "Terminated"
    n = c.get("v1", "Node", "node-2")
    assert cond(n, "Ready")["status"] == "Unknown"
    assert {"node.kubernetes.io/unreachable"} == {t["key"] for t in n["spec"]["taints"]}
    # the scheduler avoids it meanwhile
    c.create(pod("pinned", nodeSelector={"kubernetes.io/hostname": "node-2"}))
    wait_for(lambda: (cond(get(world, "Pod", "pinned"), "PodScheduled") or {}).get(
        "reason") == "Unschedulable", what="unschedulable")
    wait_for(lambda: cond(get(world, "Node", "node-2", None), "Ready")["status"] == "True",
             timeout=15, what="node back")
    n = c.get("v1", "Node", "node-2")
    assert n["status"]["nodeInfo"]["osImage"] == "Harvester v1.5.0"
    assert n["status"]["nodeInfo"]["kubeletVersion"] == "v1.31.4+rke2r1"
    assert not n["spec"].get("taints")
    assert phase(world, "victim") == "Failed"              # not restarted
    wait_for(lambda: phase(world, "pinned") == "Running", what="pinned pod runs after reboot")
    assert world.timeline.counters.get("node_reboots") == 1
    assert any(e["event"] == "node_reboot" and "default/victim" in e["pods_killed"]
               for e in world.timeline.snapshot())


def test_node_never_returns_fault() -> None:
    w = World({"faults": [{"kind": "node_never_returns", "target": {"node": "lost"}}]},
              speed=SPEED)
    for name in ("namespaces", "kubelet", "scheduler"):
        w.controllers[name] = importlib.import_module(
            f"harvester_sim.controllers.{name}").setup(w)
    w.runtime.start()
    try:
        w.client.create(node("lost"))
        wait_for(lambda: cond(get(w, "Node", "lost", None), "Ready"), what="Ready")
        w.controllers["kubelet"].reboot("lost")
        time.sleep(w.timings.reboot_s / SPEED * 1.5)
        assert cond(get(w, "Node", "lost", None), "Ready")["status"] == "Unknown"
    finally:
        w.stop()


def test_restart_kubelet_keeps_pods(world: World) -> None:
    c = world.client
    c.create(pod("keeper", nodeName="node-0"))
    wait_for(lambda: phase(world, "keeper") == "Running", what="Running")
    uid = c.get("v1", "Pod", "keeper", "default")["metadata"]["uid"]
    world.controllers["kubelet"].restart_kubelet("node-0", "v1.31.4+rke2r1")
    wait_for(lambda: c.get("v1", "Node", "node-0")["status"]["nodeInfo"]["kubeletVersion"]
             == "v1.31.4+rke2r1", what="new kubelet")
    p = c.get("v1", "Pod", "keeper", "default")
    assert p["metadata"]["uid"] == uid and p["status"]["phase"] == "Running"


# ------------------------------------------------------------------------------ scheduler
def test_scheduler_constraints(world: World) -> None:
    c = world.client
    c.create(pod("sel", nodeSelector={"zone": "b"}))
    c.create(pod("aff", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]},
                                  {"key": "kubernetes.io/hostname", "operator": "In",
                                   "values": ["node-1", "node-2"]}]}]}}}))
    c.create(pod("big", resources={"requests": {"cpu": "3", "memory": "1Gi"}}))
    c.create(pod("bigger", resources={"requests": {"memory": "100Gi"}}))
    wait_for(lambda: all(get(world, "Pod", n)["spec"].get("nodeName")
                         for n in ("sel", "aff", "big")), what="bound")
    assert c.get("v1", "Pod", "sel", "default")["spec"]["nodeName"] == "node-2"
    assert c.get("v1", "Pod", "aff", "default")["spec"]["nodeName"] == "node-1"
    msg = wait_for(lambda: (cond(get(world, "Pod", "bigger"), "PodScheduled") or {}).get(
        "message"), what="unschedulable message")
    assert msg.startswith("0/3 nodes are available: 3 Insufficient memory.")
    # taints: only tolerating pods land on a tainted node; cordon = unschedulable
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    for n in ("node-0", "node-1"):
        c.patch("v1", "Node", n, {"spec": {"unschedulable": True}})
    c.patch("v1", "Node", "node-2", {"spec": {"taints": [taint]}})
    c.create(pod("plain"))
    c.create(pod("tolerant", tolerations=[{"key": "dedicated", "operator": "Equal",
                                           "value": "gpu", "effect": "NoSchedule"}]))
    wait_for(lambda: get(world, "Pod", "tolerant")["spec"].get("nodeName") == "node-2",
             what="tolerant bound")
    msg = wait_for(lambda: (cond(get(world, "Pod", "plain"), "PodScheduled") or {}).get(
        "message"), what="plain unschedulable")
    assert "2 node(s) were unschedulable" in msg
    assert "1 node(s) had untolerated taint {dedicated: gpu}" in msg
    wait_for(lambda: any(t["key"] == "node.kubernetes.io/unschedulable" for t in
                         c.get("v1", "Node", "node-0")["spec"].get("taints") or []),
             what="cordon taint")
    # uncordon: the pending pod is retried and bound
    c.patch("v1", "Node", "node-0", {"spec": {"unschedulable": None}})
    wait_for(lambda: get(world, "Pod", "plain")["spec"].get("nodeName") == "node-0",
             what="retry after uncordon")
    sched = world.controllers["scheduler"]
    assert sched.pick_node(pod("x", nodeSelector={"zone": "b"})) is None   # tainted
    assert sched.pick_node(pod("x"), exclude={"node-0"}) is None


# ------------------------------------------------------------------------------ workloads
def deployment(name: str, replicas: int, image: str = "nginx:1.25",
               **strategy: Any) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": labels},
                            "template": {"metadata": {"labels": labels},
                                         "spec": {"containers": [{"name": "web",
                                                                  "image": image}]}}}
    if strategy:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def dep_done(w: World, name: str, replicas: int) -> bool:
    d = get(w, "Deployment", name, api="apps/v1")
    st = (d or {}).get("status") or {}
    return bool(d and st.get("observedGeneration") == d["metadata"]["generation"] and
                st.get("updatedReplicas") == replicas == st.get("availableReplicas") ==
                st.get("replicas") and not st.get("unavailableReplicas"))


def test_deployment_rollout(world: World) -> None:
    c = world.client
    c.create(deployment("web", 4))
    wait_for(lambda: dep_done(world, "web", 4), what="rollout 1")
    d = c.get("apps/v1", "Deployment", "web", "default")
    assert cond(d, "Available")["reason"] == "MinimumReplicasAvailable"
    assert cond(d, "Progressing")["reason"] == "NewReplicaSetAvailable"
    rss = c.list("apps/v1", "ReplicaSet", "default")
    assert len(rss) == 1 and rss[0]["metadata"]["ownerReferences"][0]["name"] == "web"
    h = rss[0]["metadata"]["labels"]["pod-template-hash"]
    assert rss[0]["metadata"]["name"] == f"web-{h}"
    assert rss[0]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    # roll to a new image: never fewer than 3 available (maxUnavailable 25% of 4 = 1)
    c.patch("apps/v1", "Deployment", "web", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.27"}]}}}}, "default")
    seen_min = 4
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not dep_done(world, "web", 4):
        st = c.get("apps/v1", "Deployment", "web", "default").get("status") or {}
        if st.get("observedGeneration") == 2:
            seen_min = min(seen_min, int(st.get("availableReplicas") or 0))
        time.sleep(0.005)
    assert dep_done(world, "web", 4)
    assert seen_min >= 3
    pods = c.list("v1", "Pod", "default", label_selector="app=web")
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert {p["spec"]["containers"][0]["image"] for p in live} == {"nginx:1.27"}
    rss = sorted(c.list("apps/v1", "ReplicaSet", "default"),
                 key=lambda r: r["metadata"]["annotations"]["deployment.kubernetes.io/revision"])
    assert [r["spec"]["replicas"] for r in rss] == [0, 4]
    # scale through the store (what the scale subresource does)
    c.patch("apps/v1", "Deployment", "web", {"spec": {"replicas": 2}}, "default")
    wait_for(lambda: dep_done(world, "web", 2), what="scaled down")
    # deleting the Deployment garbage-collects ReplicaSets and pods
    c.delete("apps/v1", "Deployment", "web", "default")
    wait_for(lambda: not c.list("v1", "Pod", "default", label_selector="app=web"),
             what="pods collected")


def test_daemonset_and_statefulset(world: World) -> None:
    c = world.client
    c.create({"apiVersion": "apps/v1", "kind": "DaemonSet",
              "metadata": {"name": "agent", "namespace": "default"},
              "spec": {"selector": {"matchLabels": {"app": "agent"}},
                       "template": {"metadata": {"labels": {"app": "agent"}},
                                    "spec": {"nodeSelector": {"zone": "a"},
                                             "containers": [{"name": "a",
                                                             "image": "agent:1"}]}}}})
    c.create({"apiVersion": "apps/v1", "kind": "StatefulSet",
              "metadata": {"name": "db", "namespace": "default"},
              "spec": {"replicas": 3, "serviceName": "db",
                       "selector": {"matchLabels": {"app": "db"}},
                       "template": {"metadata": {"labels": {"app": "db"}},
                                    "spec": {"containers": [{"name": "db",
                                                             "image": "db:1"}]}}}})
    wait_for(lambda: (get(world, "DaemonSet", "agent", api="apps/v1").get("status") or {})
             .get("numberReady") == 2, what="ds ready")
    ds_pods = c.list("v1", "Pod", "default", label_selector="app=agent")
    assert sorted(p["spec"]["nodeName"] for p in ds_pods) == ["node-0", "node-1"]
    wait_for(lambda: (get(world, "StatefulSet", "db", api="apps/v1").get("status") or {})
             .get("readyReplicas") == 3, what="sts ready")
    names = sorted(p["metadata"]["name"] for p in
                   c.list("v1", "Pod", "default", label_selector="app=db"))
    assert names == ["db-0", "db-1", "db-2"]
    # a node gains the label: the DaemonSet follows
    c.patch("v1", "Node", "node-2", {"metadata": {"labels": {"zone": "a"}}})
    wait_for(lambda: (get(world, "DaemonSet", "agent", api="apps/v1").get("status") or {})
             .get("numberReady") == 3, what="ds on new node")


def job(name: str, exit_code: int = 0, seconds: float = 5, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {**spec, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "work", "image": "test/exit:1", "env": [
                    {"name": "EXIT", "value": str(exit_code)},
                    {"name": "SECONDS", "value": str(seconds)}]}]}}}}


def job_cond(w: World, name: str, type_: str) -> dict[str, Any] | None:
    c_ = cond(get(w, "Job", name, api="batch/v1"), type_)
    return c_ if c_ is not None and c_.get("status") == "True" else None


def test_job_success_completions_parallelism(world: World) -> None:
    c = world.client
    c.create(job("ok", completions=3, parallelism=2))
    wait_for(lambda: job_cond(world, "ok", "Complete"), what="Complete")
    j = c.get("batch/v1", "Job", "ok", "default")
    assert j["status"]["succeeded"] == 3 and "failed" not in j["status"]
    assert j["status"]["completionTime"] and j["status"]["startTime"]
    assert job_cond(world, "ok", "SuccessCriteriaMet")["reason"] == "CompletionsReached"
    pods = c.list("v1", "Pod", "default", label_selector="batch.kubernetes.io/job-name=ok")
    assert len(pods) == 3
    assert all(p["metadata"]["labels"]["controller-uid"] == j["metadata"]["uid"] for p in pods)


def test_job_backoff_limit(world: World) -> None:
    c = world.client
    c.create(job("bad", exit_code=2, seconds=1, backoffLimit=2))
    failed = wait_for(lambda: job_cond(world, "bad", "Failed"), timeout=15, what="Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert failed["message"] == "Job has reached the specified backoff limit"
    assert job_cond(world, "bad", "FailureTarget")["reason"] == "BackoffLimitExceeded"
    j = c.get("batch/v1", "Job", "bad", "default")
    assert j["status"]["failed"] == 3 and "completionTime" not in j["status"]


def test_job_deadline_ttl_and_suspend(world: World) -> None:
    c = world.client
    c.create(job("slow", seconds=600, activeDeadlineSeconds=10))
    c.create(job("short", seconds=1, ttlSecondsAfterFinished=20))
    c.create(job("held", seconds=1, suspend=True))
    failed = wait_for(lambda: job_cond(world, "slow", "Failed"), what="deadline")
    assert failed["reason"] == "DeadlineExceeded"
    assert not [p for p in c.list("v1", "Pod", "default",
                                  label_selector="job-name=slow")
                if not p["metadata"].get("deletionTimestamp") and
                p["status"].get("phase") == "Running"]
    wait_for(lambda: job_cond(world, "short", "Complete"), what="short complete")
    wait_for(lambda: get(world, "Job", "short", api="batch/v1") is None, what="ttl delete")
    susp = wait_for(lambda: job_cond(world, "held", "Suspended"), what="suspended")
    assert susp["reason"] == "JobSuspended"
    assert not c.list("v1", "Pod", "default", label_selector="job-name=held")
    c.patch("batch/v1", "Job", "held", {"spec": {"suspend": False}}, "default")
    wait_for(lambda: job_cond(world, "held", "Complete"), what="resumed job completes")
    resumed = cond(get(world, "Job", "held", api="batch/v1"), "Suspended")
    assert resumed["status"] == "False" and resumed["reason"] == "JobResumed"


# ------------------------------------------------------------------------------ PDB, endpoints
def pdb(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


def test_pdb_math(world: World) -> None:
    c = world.client
    c.create(deployment("web", 4))
    c.create(pdb("min-int", minAvailable=3))
    wait_for(lambda: dep_done(world, "web", 4), what="web")
    cases = {"min-int": (4, 3, 1)}
    for name, spec, want in (("min-pct", {"minAvailable": "50%"}, (4, 2, 2)),
                             ("max-int", {"maxUnavailable": 1}, (4, 3, 1)),
                             ("max-pct", {"maxUnavailable": "30%"}, (4, 2, 2))):
        c.create(pdb(name, **spec))
        cases[name] = want
    for name, (expected, desired, allowed) in cases.items():
        st = wait_for(lambda n=name: (get(world, "PodDisruptionBudget", n, api="policy/v1")
                                      or {}).get("status"), what=f"status {name}")
        assert (st["expectedPods"], st["desiredHealthy"], st["disruptionsAllowed"],
                st["currentHealthy"]) == (expected, desired, allowed, 4), name
        assert st["observedGeneration"] == 1


def test_eviction_blocked_by_pdb_then_allowed(world: World) -> None:
    c = world.client
    c.create(deployment("web", 2))
    c.create(pdb("web", minAvailable=2))
    wait_for(lambda: dep_done(world, "web", 2), what="web")
    wait_for(lambda: (get(world, "PodDisruptionBudget", "web", api="policy/v1")
                      .get("status") or {}).get("currentHealthy") == 2, what="pdb status")
    victim = c.list("v1", "Pod", "default", label_selector="app=web")[0]["metadata"]["name"]
    with pytest.raises(ApiError) as err:
        c.evict(victim, "default")
    assert err.value.code == 429
    assert cond(get(world, "PodDisruptionBudget", "web", api="policy/v1"),
                "DisruptionAllowed")["reason"] == "InsufficientPods"
    c.patch("apps/v1", "Deployment", "web", {"spec": {"replicas": 3}}, "default")
    wait_for(lambda: (get(world, "PodDisruptionBudget", "web", api="policy/v1")
                      .get("status") or {}).get("disruptionsAllowed") == 1, what="allowed")
    assert c.evict(victim, "default")["status"] == "Success"
    wait_for(lambda: get(world, "Pod", victim) is None, what="evicted pod gone")


def _unready(world: World, name: str) -> None:
    def fn(cur: dict[str, Any]) -> dict[str, Any]:
        for cd in cur["status"].get("conditions") or []:
            if cd.get("type") == "Ready":
                cd["status"] = "False"
        return cur
    world.client.modify("v1", "Pod", name, fn, "default", subresource="status")


def _healthy(world: World, name: str, n: int) -> dict[str, Any]:
    return wait_for(lambda: (st := (get(world, "PodDisruptionBudget", name, api="policy/v1")
                                    .get("status") or {})).get("currentHealthy") == n and st,
                    what=f"{name}: {n} healthy")


def test_unready_pod_evicted_without_taking_from_the_budget(world: World) -> None:
    """kubernetes pkg/registry/core/pod/storage/eviction.go (v1.33): an unready pod does not
    count towards currentHealthy; IfHealthyBudget (the default) evicts it while the
    application is healthy, AlwaysAllow always, and neither takes from disruptionsAllowed."""
    c = world.client
    c.create(deployment("web", 3))
    c.create(pdb("web", minAvailable=2))
    wait_for(lambda: dep_done(world, "web", 3), what="web")
    _healthy(world, "web", 3)
    victim = c.list("v1", "Pod", "default", label_selector="app=web")[0]["metadata"]["name"]
    _unready(world, victim)
    assert c.evict(victim, "default")["status"] == "Success"
    st = get(world, "PodDisruptionBudget", "web", api="policy/v1")["status"]
    assert victim not in (st.get("disruptedPods") or {}), st


def test_always_allow_evicts_an_unready_pod_past_an_exhausted_budget(world: World) -> None:
    c = world.client
    c.create(deployment("web", 2))
    c.create(pdb("web", minAvailable=2, unhealthyPodEvictionPolicy="AlwaysAllow"))
    wait_for(lambda: dep_done(world, "web", 2), what="web")
    _healthy(world, "web", 2)
    ready, victim = [p["metadata"]["name"] for p in
                     c.list("v1", "Pod", "default", label_selector="app=web")]
    with pytest.raises(ApiError) as err:       # a ready pod is guarded whatever the policy
        c.evict(ready, "default")
    assert err.value.code == 429
    _unready(world, victim)
    _healthy(world, "web", 1)                 # below desiredHealthy: IfHealthyBudget would 429
    assert c.evict(victim, "default")["status"] == "Success"


def test_a_budget_with_an_empty_selector_guards_nothing(world: World) -> None:
    c = world.client
    c.create(deployment("web", 1))
    c.create({**pdb("all", minAvailable=5), "spec": {"selector": {}, "minAvailable": 5}})
    wait_for(lambda: dep_done(world, "web", 1), what="web")
    victim = c.list("v1", "Pod", "default", label_selector="app=web")[0]["metadata"]["name"]
    assert c.evict(victim, "default")["status"] == "Success"


def test_endpoints_follow_ready_pods(world: World) -> None:
    c = world.client
    world.extras["api_port"] = 6443
    c.create(deployment("web", 2))
    c.create({"apiVersion": "v1", "kind": "Service",
              "metadata": {"name": "web", "namespace": "default"},
              "spec": {"selector": {"app": "web"},
                       "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
    ep = wait_for(lambda: len(((get(world, "Endpoints", "web") or {}).get("subsets") or
                               [{}])[0].get("addresses") or []) == 2 and
                  get(world, "Endpoints", "web"), what="endpoints")
    assert ep["subsets"][0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    slices = c.list("discovery.k8s.io/v1", "EndpointSlice", "default",
                    label_selector="kubernetes.io/service-name=web")
    assert len(slices) == 1 and all(e["conditions"]["ready"] for e in slices[0]["endpoints"])
    k8s = wait_for(lambda: c.list("discovery.k8s.io/v1", "EndpointSlice", "default",
                                  label_selector="kubernetes.io/service-name=kubernetes"),
                   what="kubernetes slice")
    assert k8s[0]["endpoints"][0]["addresses"] == ["127.0.0.1"]
    assert k8s[0]["ports"][0]["port"] == 6443


def test_namespaces_default_service_account(world: World) -> None:
    c = world.client
    c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    wait_for(lambda: get(world, "ServiceAccount", "default", "team"), what="default SA")
    assert c.get("v1", "Namespace", "team")["status"]["phase"] == "Active"
    assert get(world, "Namespace", "kube-node-lease", None) is not None


# ------------------------------------------------------------------------------ full scenario
def test_kubelet_adopts_scenario_nodes() -> None:
    pytest.importorskip("harvester_sim.scenarios.loader")
    from harvester_sim.scenarios import loader

    w = World(loader.load("three-node"), speed=SPEED)
    w.start()
    try:
        nodes = w.client.list("v1", "Node")
        assert len(nodes) == 3
        kubelet = w.controllers["kubelet"]
        wait_for(lambda: set(kubelet.nodes) == {n["metadata"]["name"] for n in nodes},
                 what="all nodes adopted")
        for n in nodes:
            wait_for(lambda n=n: get(w, "Lease", n["metadata"]["name"], "kube-node-lease",
                                     "coordination.k8s.io/v1"), what="lease")
            assert kubelet.node_fs(n["metadata"]["name"])["capacityBytes"] > 0
        # the loader's images are each node's store; its Node reports the 50 largest
        rel = w.extras["releases"].get(w.scenario["harvester"]["installed"])
        want = sorted((int(i.size) for i in rel.images()), reverse=True)[:50]
        for n in nodes:
            name = n["metadata"]["name"]
            assert w.runtime.run_sync(lambda name=name: all(
                kubelet.has_image(name, i.name) for i in rel.images()))
            wait_for(lambda name=name: [i["sizeBytes"] for i in
                                        w.client.get("v1", "Node", name)["status"]["images"]]
                     == want, what="50 largest reported")
    finally:
        w.stop()
