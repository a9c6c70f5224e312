"""The simulated upgrade machinery through the API: SUC, the upgrade repo, Rancher's planner
with drain hooks, node reboots, and a whole multi-node upgrade driven by a minimal upgrader.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harvester_sim import report
from harvester_sim.testing import wait_for
from harvester_sim.world import World

SPEED = 400.0
PLAN_API = "management.harvesterhci.io/v1beta1"
TOOLKIT = "rancher/harvester-upgrade-toolkit:v1.6.0"


def make_world(name: str = "three-node", speed: float = SPEED, **over: Any) -> World:
    from harvester_sim.scenarios import loader

    if over:
        import tempfile

        import yaml

        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump({"extends": name, "name": name, **over}, f)
        scn = loader.load(f.name)
    else:
        scn = loader.load(name)
    w = World(scn, speed=speed)
    w.start()
    return w


@pytest.fixture
def world() -> Iterator[World]:
    w = make_world()
    yield w
    w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


def ensure_upgradeplan_crd(w: World) -> None:
    """The collection installs the UpgradePlan CRD; tests stand in for it."""
    c = w.client
    if c.registry.by_kind(PLAN_API, "UpgradePlan") is not None:
        return
    c.create({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
              "metadata": {"name": "upgradeplans.management.harvesterhci.io"},
              "spec": {"group": "management.harvesterhci.io", "scope": "Cluster",
                       "names": {"kind": "UpgradePlan", "plural": "upgradeplans",
                                 "singular": "upgradeplan"},
                       "versions": [{"name": "v1beta1", "served": True, "storage": True,
                                     "subresources": {"status": {}},
                                     "schema": {"openAPIV3Schema": {
                                         "type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}}]}})


def make_plan(w: World, name: str = "p", version: str = "v1.6.0") -> dict[str, Any]:
    from harvester_sim.releases import catalog

    ensure_upgradeplan_crd(w)
    rel = catalog.get_release(version)
    return w.client.create({"apiVersion": PLAN_API, "kind": "UpgradePlan",
                            "metadata": {"name": name}, "spec": {"version": version},
                            "status": {"releaseMetadata": rel.release_metadata()}})


def start_repo(w: World, plan: str = "p", version: str = "v1.6.0") -> None:
    """The plan's upgrade repo: Service ``<plan>-repo`` and a Ready nginx pod serving the
    ISO (what the toolkit scripts' ``wait_repo``/``detect_repo`` fetch)."""
    ns = "harvester-system"
    w.extras.setdefault("image_blobs", {})[(ns, f"{plan}-iso")] = _iso_bytes(version)
    sel = {"app": f"{plan}-repo"}
    w.client.create({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": f"{plan}-repo", "namespace": ns},
                     "spec": {"selector": sel, "ports": [{"port": 80, "targetPort": 80}]}})
    w.client.create({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"{plan}-repo-0", "namespace": ns, "labels": sel},
                     "spec": {"nodeName": "node-1",
                              "containers": [{"name": "nginx-iso-server",
                                              "image": "rancher/mirrored-library-nginx:1.24.0",
                                              "ports": [{"containerPort": 80}]}],
                              "volumes": [{"name": "iso", "persistentVolumeClaim": {
                                  "claimName": f"{plan}-iso"}}]}})
    wait_for(lambda: w.proxies.pod_handler(ns, f"{plan}-repo-0", 80), what="repo serving")


def events(w: World, kind: str) -> list[dict[str, Any]]:
    return [e for e in w.timeline.snapshot() if e["event"] == kind]


# ------------------------------------------------------------------------------- SUC
CLEANUP_SCRIPT = (
    'HOST_DIR="${HOST_DIR:-/host}"\n'
    'CRICTL="$HOST_DIR/$(readlink $HOST_DIR/var/lib/rancher/rke2/bin)/crictl"\n'
    'for image in $IMAGES; do "$CRICTL" rmi "$image" || echo "cannot remove $image"; done\n')


def cleanup_plan(name: str, concurrency: int) -> dict[str, Any]:
    return {"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
            "metadata": {"name": name, "namespace": "cattle-system",
                         "labels": {"management.harvesterhci.io/upgrade-plan": "p"}},
            "spec": {"concurrency": concurrency, "version": "v1.6.0",
                     "nodeSelector": {"matchLabels": {"harvesterhci.io/managed": "true"}},
                     "serviceAccountName": "system-upgrade-controller",
                     "tolerations": [{"operator": "Exists"}],
                     "upgrade": {"image": "rancher/harvester-upgrade-toolkit",
                                 "command": ["sh", "-c", CLEANUP_SCRIPT],
                                 "envs": [{"name": "IMAGES", "value": ""}]}}}


def plan_condition(w: World, name: str) -> dict[str, Any]:
    p = w.client.get("upgrade.cattle.io/v1", "Plan", name, "cattle-system")
    return next((cd for cd in (p.get("status") or {}).get("conditions", [])
                 if cd["type"] == "Complete"), {})


def test_suc_plan_creates_one_job_per_node_with_concurrency(world: World) -> None:
    c = world.client
    c.create(cleanup_plan("p-image-cleanup", 1))
    wait_for(lambda: plan_condition(world, "p-image-cleanup").get("status") == "True",
             what="plan Complete")
    nodes = {n["metadata"]["name"] for n in c.list("v1", "Node")}
    jobs = c.list("batch/v1", "Job", "cattle-system")
    assert {j["metadata"]["labels"]["upgrade.cattle.io/node"] for j in jobs} == nodes
    for job in jobs:
        md = job["metadata"]
        node = md["labels"]["upgrade.cattle.io/node"]
        assert md["name"].startswith(f"apply-p-image-cleanup-on-{node}-with-")
        assert len(md["name"]) <= 63
        assert md["labels"]["upgrade.cattle.io/plan"] == "p-image-cleanup"
        assert md["labels"]["management.harvesterhci.io/upgrade-plan"] == "p"
        pod = job["spec"]["template"]["spec"]
        assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [node]
        ctr = pod["containers"][0]
        assert ctr["image"] == "rancher/harvester-upgrade-toolkit:v1.6.0"
        assert ctr["command"] == ["sh", "-c", CLEANUP_SCRIPT]
        env = {e["name"] for e in ctr["env"]}
        assert {"IMAGES", "SYSTEM_UPGRADE_NODE_NAME", "SYSTEM_UPGRADE_PLAN_NAME"} <= env
        hsh = md["labels"]["plan.upgrade.cattle.io/p-image-cleanup"]
        assert c.get("v1", "Node", node)["metadata"]["labels"][
            "plan.upgrade.cattle.io/p-image-cleanup"] == hsh
    # concurrency 1: each job is created only after the previous node was done
    seq = [(e["event"], e["node"]) for e in world.timeline.snapshot()
           if e["event"] in ("suc_job_created", "suc_node_applied")]
    assert [k for k, _ in seq] == ["suc_job_created", "suc_node_applied"] * len(nodes), seq
    st = c.get("upgrade.cattle.io/v1", "Plan", "p-image-cleanup", "cattle-system")["status"]
    assert st["applying"] == [] and st["latestVersion"] == "v1.6.0"


def test_suc_concurrency_three_runs_all_at_once(world: World) -> None:
    world.client.create(cleanup_plan("p-all", 3))
    wait_for(lambda: plan_condition(world, "p-all").get("status") == "True", what="Complete")
    seq = [e["event"] for e in world.timeline.snapshot()
           if e["event"] in ("suc_job_created", "suc_node_applied")]
    assert seq[:3] == ["suc_job_created"] * 3


def test_suc_failed_job_marks_plan_jobfailed() -> None:
    w = make_world(faults=[{"kind": "job_fail", "target": {"node": "node-2",
                                                          "namespace": "cattle-system"}}])
    try:
        w.client.create(cleanup_plan("pf", 3))
        cond = wait_for(lambda: (plan_condition(w, "pf").get("reason") == "JobFailed"
                                 and plan_condition(w, "pf")), what="Complete=False/JobFailed")
        assert cond["status"] == "False" and "node-2" in cond["message"]
        assert "plan.upgrade.cattle.io/pf" not in \
            w.client.get("v1", "Node", "node-2")["metadata"]["labels"]
    finally:
        w.stop()


# ------------------------------------------------------------------------------ repo
def _iso_bytes(version: str = "v1.6.0") -> bytes:
    from harvester_sim.releases import catalog, iso

    return iso.build_iso(catalog.get_release(version))


def test_repo_served_by_nginx_pod(world: World) -> None:
    c = world.client
    ns = "harvester-system"
    world.extras.setdefault("image_blobs", {})[(ns, "p-iso")] = _iso_bytes()
    c.create({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "p-repo-abc", "namespace": ns,
                           "labels": {"app": "p-repo"}},
              "spec": {"nodeName": "node-1",
                       "containers": [{"name": "nginx-iso-server",
                                       "image": "rancher/mirrored-library-nginx:1.24.0-alpine",
                                       "ports": [{"containerPort": 80}]}],
                       "volumes": [{"name": "iso",
                                    "persistentVolumeClaim": {"claimName": "p-iso"}}]}})
    handler = wait_for(lambda: world.proxies.pod_handler(ns, "p-repo-abc", 80),
                       what="nginx handler")
    code, _, body = handler("GET", "/harvester-iso/harvester-release.yaml", "", {}, b"")
    assert code == 200
    import yaml

    meta = yaml.safe_load(body)
    assert meta["harvester"] == "v1.6.0" and meta["kubernetes"].endswith("rke2r1")
    code, _, _ = handler("GET", "/harvester-iso/no-such-file", "", {}, b"")
    assert code == 404
    code, _, body = handler(
        "GET", "/harvester-iso/bundle/harvester/images-lists-archive/v1.6.0/image_list_all.txt",
        "", {}, b"")
    assert code == 200 and len(body.splitlines()) > 100
    wait_for(lambda: (c.get("v1", "Pod", "p-repo-abc", ns).get("status") or {})
             .get("phase") == "Running", what="pod running")
    c.delete("v1", "Pod", "p-repo-abc", ns)
    wait_for(lambda: world.proxies.pod_handler(ns, "p-repo-abc", 80) is None,
             what="handler unregistered")


def test_repo_reachable_through_service_proxy_http() -> None:
    testing = pytest.importorskip("harvester_sim.testing")
    running = getattr(testing, "running", None)
    if running is None:
        pytest.skip("harvester_sim.testing.running not available yet")
    import requests  # type: ignore[import-untyped]

    with running("three-node", speed=SPEED) as sim:
        w = sim.world
        ns = "harvester-system"
        w.extras.setdefault("image_blobs", {})[(ns, "p-iso")] = _iso_bytes()
        c = w.client
        c.create({"apiVersion": "v1", "kind": "Service",
                  "metadata": {"name": "p-repo", "namespace": ns},
                  "spec": {"selector": {"app": "p-repo"},
                           "ports": [{"port": 80, "targetPort": 80, "name": "http"}]}})
        url = (f"{sim.url}/api/v1/namespaces/{ns}/services/p-repo:80/proxy/"
               "harvester-iso/harvester-release.yaml")
        hdr = {"Authorization": f"Bearer {sim.token}"}
        r = requests.get(url, headers=hdr, verify=False, timeout=10)
        assert r.status_code == 503
        c.create({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "p-repo-abc", "namespace": ns,
                               "labels": {"app": "p-repo"}},
                  "spec": {"nodeName": "node-1",
                           "containers": [{"name": "nginx-iso-server",
                                           "image": "rancher/mirrored-library-nginx:1.24.0",
                                           "ports": [{"containerPort": 80}]}],
                           "volumes": [{"name": "iso",
                                        "persistentVolumeClaim": {"claimName": "p-iso"}}]}})

        def ok() -> bool:
            rr = requests.get(url, headers=hdr, verify=False, timeout=10)
            return rr.status_code == 200 and b"harvester: v1.6.0" in rr.content

        wait_for(ok, what="repo through the service proxy")


# --------------------------------------------------------------------------- planner
HOOKS = {"enabled": True, "force": True, "ignoreDaemonSets": True, "deleteEmptyDirData": True,
         "preDrainHooks": [{"annotation": "management.harvesterhci.io/pre-hook"}],
         "postDrainHooks": [{"annotation": "management.harvesterhci.io/post-hook"}]}


def start_roll(w: World, version: str = "v1.33.3+rke2r1") -> None:
    w.client.patch("provisioning.cattle.io/v1", "Cluster", "local",
                   {"spec": {"kubernetesVersion": version,
                             "rkeConfig": {"upgradeStrategy": {
                                 "controlPlaneConcurrency": "1", "workerConcurrency": "1",
                                 "controlPlaneDrainOptions": HOOKS,
                                 "workerDrainOptions": HOOKS}}}}, "fleet-local")


def machine_order(w: World) -> list[str]:
    ms = w.client.list("cluster.x-k8s.io/v1beta1", "Machine", "fleet-local")
    init = [m for m in ms if m["metadata"]["labels"].get("rke.cattle.io/init-node") == "true"]
    rest = sorted((m for m in ms if m not in init), key=lambda m: m["metadata"]["name"])
    return [m["status"]["nodeRef"]["name"] for m in init + rest]


def secret_ann(w: World, node: str) -> dict[str, str]:
    n = w.client.get("v1", "Node", node)
    m = n["metadata"]["annotations"]["cluster.x-k8s.io/machine"]
    s = w.client.get("v1", "Secret", f"{m}-machine-plan", "fleet-local")
    return dict(s["metadata"].get("annotations") or {})


def ack(w: World, node: str, which: str) -> None:
    ann = secret_ann(w, node)
    n = w.client.get("v1", "Node", node)
    m = n["metadata"]["annotations"]["cluster.x-k8s.io/machine"]
    w.client.patch("v1", "Secret", f"{m}-machine-plan",
                   {"metadata": {"annotations": {
                       f"management.harvesterhci.io/{which}-hook":
                           ann[f"rke.cattle.io/{which}-drain"]}}}, "fleet-local")


# Only live-migratable VMs: Rancher's drain then succeeds without an upgrader that shuts the
# others down (a non-migratable VM blocks the drain forever, as on a real cluster).
MIGRATABLE_ONLY = [{"name": "web", "count": 3, "cpu": 1, "memory": "2Gi",
                    "volumes": [{"size": "10Gi", "replicas": 3}]}]


def test_planner_sets_hooks_in_order_and_waits() -> None:
    w = make_world(vms=MIGRATABLE_ONLY)
    try:
        _hooks_in_order(w)
    finally:
        w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


def _hooks_in_order(w: World) -> None:
    order = machine_order(w)
    start_roll(w)
    first = order[0]
    wait_for(lambda: "rke.cattle.io/pre-drain" in secret_ann(w, first), what="pre-drain")
    assert w.client.get("v1", "Node", first)["spec"].get("unschedulable") is True
    # nobody answers: Rancher waits, and touches no other node
    time.sleep(60 / SPEED)
    for other in order[1:]:
        assert "rke.cattle.io/pre-drain" not in secret_ann(w, other)
        assert not w.client.get("v1", "Node", other)["spec"].get("unschedulable")
    cluster = w.client.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")
    upd = next(c for c in cluster["status"]["conditions"] if c["type"] == "Updated")
    assert upd["status"] == "Unknown" and "pre-drain hooks" in upd["message"]
    for node in order:
        wait_for(lambda n=node: "rke.cattle.io/pre-drain" in secret_ann(w, n),
                 what=f"pre-drain on {node}")
        ack(w, node, "pre")
        wait_for(lambda n=node: "rke.cattle.io/post-drain" in secret_ann(w, n),
                 what=f"post-drain on {node}")
        assert "rke.cattle.io/drain-done" in secret_ann(w, node)
        assert w.client.get("v1", "Node", node)["status"]["nodeInfo"]["kubeletVersion"] == \
            "v1.33.3+rke2r1"
        ack(w, node, "post")
        wait_for(lambda n=node: not any(k.startswith(("rke.cattle.io/", "management."))
                                        for k in secret_ann(w, n)), what="annotations gone")
        assert not w.client.get("v1", "Node", node)["spec"].get("unschedulable")
    wait_for(lambda: events(w, "planner_done"), what="planner done")
    assert [e["node"] for e in events(w, "pre_drain_set")] == order
    assert [e["node"] for e in events(w, "node_uncordoned")] == order
    acked = events(w, "hook_acked")
    assert [(e["node"], e["hook"]) for e in acked] == [
        (n, h) for n in order for h in ("pre-drain", "post-drain")]


def test_planner_stuck_fault_stops_progress() -> None:
    w = make_world(vms=MIGRATABLE_ONLY,
                   faults=[{"kind": "planner_stuck", "target": {"node": "node-2"}}])
    try:
        order = machine_order(w)
        start_roll(w)
        for node in order:
            if node == "node-2":
                break
            wait_for(lambda n=node: "rke.cattle.io/pre-drain" in secret_ann(w, n))
            ack(w, node, "pre")
            wait_for(lambda n=node: "rke.cattle.io/post-drain" in secret_ann(w, n))
            ack(w, node, "post")
        wait_for(lambda: events(w, "planner_stuck"), what="planner stuck")
        time.sleep(60 / SPEED)
        assert "rke.cattle.io/pre-drain" not in secret_ann(w, "node-2")
    finally:
        w.stop()


# ---------------------------------------------------------------------------- reboot
def node_env(plan: str, node: str) -> list[dict[str, Any]]:
    """What the toolkit's node Jobs pass (reference §C.5)."""
    return [{"name": "HARVESTER_UPGRADEPLAN_NAME", "value": plan},
            {"name": "HARVESTER_UPGRADE_NODE_NAME", "value": node},
            {"name": "HARVESTER_UPGRADE_POD_NAME",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]


def test_post_drain_job_reboots_node_into_new_os(world: World) -> None:
    w = world
    c = w.client
    plan = make_plan(w)
    start_repo(w)
    meta = plan["status"]["releaseMetadata"]
    node = "node-2"
    c.create({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "p-post-drain", "namespace": "harvester-system"},
              "spec": {"nodeName": node, "restartPolicy": "Never",
                       "containers": [{"name": "apply", "image": TOOLKIT,
                                       "command": ["upgrade_node.sh"], "args": ["post-drain"],
                                       "env": node_env("p", node)}]}})
    time.sleep(30 / SPEED)
    # still waiting for RKE2 (the kubelet version)
    assert c.get("v1", "Node", node)["status"]["nodeInfo"]["osImage"] != meta["os"]
    c.patch("provisioning.cattle.io/v1", "Cluster", "local",
            {"spec": {"kubernetesVersion": meta["kubernetes"]}}, "fleet-local")
    # no hooks configured: the planner rolls every node; the post-drain job reboots node-2
    wait_for(lambda: c.get("v1", "Node", node)["status"]["nodeInfo"]["osImage"] == meta["os"],
             timeout=30, what="new osImage")
    reboots = [e for e in events(w, "node_reboot") if e["node"] == node]
    assert reboots and reboots[0]["new_os_image"] == meta["os"]
    assert events(w, "reboot_triggered")[0]["t"] >= events(w, "os_installed")[0]["t"]
    pod = c.get("v1", "Pod", "p-post-drain", "harvester-system")
    assert pod["status"]["phase"] == "Succeeded"
    taints = c.get("v1", "Node", node)["spec"].get("taints") or []
    assert not any(t["key"] == "kubevirt.io/drain" for t in taints)


def _run_prepare(w: World, name: str = "prep") -> None:
    w.client.create({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": "cattle-system"},
                     "spec": {"nodeName": "node-1", "restartPolicy": "Never",
                              "containers": [{"name": "upgrade", "image": TOOLKIT,
                                              "command": ["upgrade_node.sh"],
                                              "args": ["prepare"],
                                              "env": [{"name": "HARVESTER_UPGRADEPLAN_NAME",
                                                       "value": "p"}]}]}})
    wait_for(lambda: (w.client.get("v1", "Pod", name, "cattle-system").get("status") or {})
             .get("phase") == "Succeeded", timeout=30, what="prepare done")


def test_prepare_preloads_release_images(world: World) -> None:
    from harvester_sim.releases import catalog

    w = world
    kubelet = w.controllers["kubelet"]
    make_plan(w)
    start_repo(w)
    before = len(w.runtime.run_sync(lambda: kubelet.images("node-1")))
    _run_prepare(w)
    want = catalog.get_release("v1.6.0").image_names()
    assert w.runtime.run_sync(lambda: all(kubelet.has_image("node-1", n) for n in want))
    assert len(w.runtime.run_sync(lambda: kubelet.images("node-1"))) > before
    # the Node reports the 50 largest of them, as a kubelet does
    report = w.client.get("v1", "Node", "node-1")["status"]["images"]
    assert len(report) == 50 < len(want)
    spans = [e for e in w.timeline.snapshot() if e["event"] == "span"
             and e.get("what") == "image_pull"]
    assert spans and spans[0]["end"] > spans[0]["start"]


def test_prepare_skips_images_the_store_has_beyond_the_reported_50(world: World) -> None:
    """What the node has is its image store, not the 50 images its Node reports: an image
    the node has is not downloaded again however small it is."""
    from harvester_sim.releases import catalog

    w = world
    kubelet = w.controllers["kubelet"]
    make_plan(w)
    start_repo(w)
    wanted = catalog.get_release("v1.6.0").images()
    smallest = min(wanted, key=lambda i: i.size)
    big = [(f"example.com/big-{k}:v1", 2**31 + k) for k in range(60)]   # 2 GiB each
    # the prepare pod's own image too, so that its pull does not change the count
    w.runtime.run_sync(lambda: kubelet.add_images(
        "node-1", [*big, (smallest.name, int(smallest.size)), TOOLKIT]))
    wait_for(lambda: w.client.get("v1", "Node", "node-1")["status"]["images"][0]["names"]
             == [big[-1][0]], what="big images reported")
    report = {n for i in w.client.get("v1", "Node", "node-1")["status"]["images"]
              for n in i["names"]}
    assert smallest.name not in report
    have_before = w.runtime.run_sync(
        lambda: sum(1 for i in wanted if kubelet.has_image("node-1", i.name)))
    assert have_before > sum(1 for i in wanted if i.name in report)
    _run_prepare(w)
    done = [e for e in w.timeline.snapshot() if e["event"] == "preload_done"]
    assert done and done[0]["images"] == len(wanted) - have_before
    assert f"preloading {len(wanted) - have_before} of {len(wanted)} images" in \
        str(kubelet.pod_logs("cattle-system", "prep", "upgrade"))


# ----------------------------------------------------------------------- end to end
E2E_CONTROLLERS = ("kubelet", "scheduler", "jobs", "deployments", "replicasets", "endpoints",
                   "harvester_images", "suc", "charts", "rancher")


def _e2e_world() -> World:
    w = make_world(speed=600.0)
    missing = [c for c in E2E_CONTROLLERS if c not in w.controllers]
    if missing:
        w.stop()
        pytest.skip(f"controllers not in this tree yet: {', '.join(missing)}")
    return w


def test_minimal_upgrader_upgrades_three_node_cluster() -> None:
    mu = importlib.import_module("minimal_upgrader")
    w = _e2e_world()
    try:
        result = mu.MinimalUpgrader(w, "e2e", "v1.6.0", ack_hooks=True, timeout=180.0).run()
        assert result.planner_done, "\n".join(result.log[-15:])
        from harvester_sim.releases import catalog

        rel = catalog.get_release("v1.6.0")
        for n in w.client.list("v1", "Node"):
            info = n["status"]["nodeInfo"]
            assert info["kubeletVersion"] == rel.kubernetes, n["metadata"]["name"]
            assert info["osImage"] == rel.os, n["metadata"]["name"]
        sv = w.client.get("harvesterhci.io/v1beta1", "Setting", "server-version")
        assert sv["value"] == "v1.6.0"
        assert not w.runtime.errors, w.runtime.errors[0]
        # the report's limit is a lower bound: the run (simulated time from its first span)
        # took at least that long
        rep = report.build(w)
        began = min(float(e["start"]) for e in rep["timeline"] if e.get("event") == "span")
        cp = rep["critical_path"]
        assert cp["nodes_s"] > 0 and cp["cluster_upgrade_s"] > 0
        assert rep["critical_path_s"] <= w.clock.now() - began, cp
    finally:
        w.stop()


def test_minimal_upgrader_without_acks_stops_at_first_pre_drain() -> None:
    mu = importlib.import_module("minimal_upgrader")
    w = _e2e_world()
    try:
        result = mu.MinimalUpgrader(w, "e2e", "v1.6.0", ack_hooks=False, timeout=120.0).run()
        assert not result.planner_done
        first = machine_order(w)[0]
        pre = events(w, "pre_drain_set")
        assert [e["node"] for e in pre] == [first]
        assert not events(w, "drain_done")
        assert "rke.cattle.io/pre-drain" in secret_ann(w, first)
    finally:
        w.stop()


def test_minimal_upgrader_without_pre_drain_job_stalls_on_rke2() -> None:
    """The drop-in upgrade_manifests.sh leaves keeps RKE2 from restarting until the pre-drain
    job removes it: answer the pre-drain hook without that job and the first node never
    gets the new RKE2 (Rancher waits for its plan, the upgrade stalls)."""
    mu = importlib.import_module("minimal_upgrader")
    w = _e2e_world()
    try:
        result = mu.MinimalUpgrader(w, "e2e", "v1.6.0", ack_hooks=True, timeout=90.0,
                                    skip_pre_drain_job=True).run()
        assert not result.planner_done
        first = machine_order(w)[0]
        skipped = events(w, "rke2_restart_skipped")
        assert [e["node"] for e in skipped] == [first]
        assert not events(w, "rke2_applied")
        from harvester_sim.releases import catalog

        info = w.client.get("v1", "Node", first)["status"]["nodeInfo"]
        assert info["kubeletVersion"] != catalog.get_release("v1.6.0").kubernetes
        files = w.controllers["kubelet"].host_files(first)
        assert "/run/systemd/system/rancher-system-agent.service.d/override.conf" in files
    finally:
        w.stop()


# ----------------------------------------------------------- upgrade_node.sh interface
def run_pod(w: World, name: str, argv: list[str], env: list[dict[str, Any]],
            node: str = "node-1", image: str = TOOLKIT, ns: str = "harvester-system"
            ) -> dict[str, Any]:
    w.client.create({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": ns},
                     "spec": {"nodeName": node, "restartPolicy": "Never",
                              "containers": [{"name": "apply", "image": image,
                                              "command": argv[:1], "args": argv[1:],
                                              "env": env}]}})
    return wait_for(lambda: (lambda p: p if (p.get("status") or {}).get("phase") in (
        "Succeeded", "Failed") else None)(w.client.get("v1", "Pod", name, ns)),
        timeout=30, what=f"pod {name} finished")


def exit_code(pod: dict[str, Any]) -> int:
    return int(pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"])


def pod_log(w: World, name: str, ns: str = "harvester-system") -> str:
    return str(w.controllers["kubelet"].pod_logs(ns, name, "apply"))


@pytest.mark.parametrize("sub", ["cleanup", "", "upgrade", "PREPARE"])
def test_upgrade_node_unknown_subcommand_prints_usage_and_fails(world: World, sub: str) -> None:
    make_plan(world)
    pod = run_pod(world, "bad", ["upgrade_node.sh"] + ([sub] if sub else []),
                  node_env("p", "node-1"))
    assert pod["status"]["phase"] == "Failed" and exit_code(pod) == 1
    assert ("Usage: /usr/local/bin/upgrade_node.sh "
            "{prepare|pre-drain|post-drain|single-node-upgrade}") in pod_log(world, "bad")


def test_upgrade_node_without_plan_name_dies_in_lib_sh(world: World) -> None:
    pod = run_pod(world, "noenv", ["upgrade_node.sh", "prepare"], [])
    assert exit_code(pod) == 1
    assert "lib.sh: line 2: HARVESTER_UPGRADEPLAN_NAME: unbound variable" in \
        pod_log(world, "noenv")


def test_upgrade_node_with_empty_plan_name_waits_for_repo_forever(world: World) -> None:
    make_plan(world)
    start_repo(world)
    world.client.create({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "empty", "namespace": "harvester-system"},
                         "spec": {"nodeName": "node-1", "restartPolicy": "Never",
                                  "containers": [{"name": "apply", "image": TOOLKIT,
                                                  "command": ["upgrade_node.sh"],
                                                  "args": ["post-drain"],
                                                  "env": [{"name": "HARVESTER_UPGRADEPLAN_NAME",
                                                           "value": ""}]}]}})
    wait_for(lambda: "Wait for upgrade repo ready..." in pod_log(world, "empty"),
             what="wait_repo loop")
    time.sleep(60 / SPEED)
    pod = world.client.get("v1", "Pod", "empty", "harvester-system")
    assert pod["status"]["phase"] == "Running"


def test_post_drain_without_node_name_fails_unbound(world: World) -> None:
    make_plan(world)
    start_repo(world)
    pod = run_pod(world, "nonode", ["upgrade_node.sh", "post-drain"],
                  [{"name": "HARVESTER_UPGRADEPLAN_NAME", "value": "p"}])
    assert exit_code(pod) == 1
    assert "HARVESTER_UPGRADE_NODE_NAME: unbound variable" in pod_log(world, "nonode")


def test_unknown_program_in_toolkit_image_is_not_accepted(world: World) -> None:
    pod = run_pod(world, "what", ["sh", "-c", "echo hello; sleep 5"], [])
    assert exit_code(pod) == 127
    assert "not modelled" in pod_log(world, "what")


def test_pre_drain_undoes_the_agent_dropin_and_edits_rke2_config(world: World) -> None:
    w = world
    make_plan(w)
    start_repo(w)
    kubelet = w.controllers["kubelet"]
    files = kubelet.host_files("node-1")
    dropin = "/run/systemd/system/rancher-system-agent.service.d"
    files[f"{dropin}/override.conf"] = \
        f"[Service]\nEnvironmentFile=-{dropin}/10-harvester-upgrade.env\n"
    files[f"{dropin}/10-harvester-upgrade.env"] = "INSTALL_RKE2_SKIP_ENABLE=true\n"
    kubelet.restart_agent("node-1")
    assert "/var/lib/rancher/rke2/server/manifests/rke2-canal-config.yaml" in files
    pod = run_pod(w, "pre", ["upgrade_node.sh", "pre-drain"], node_env("p", "node-1"))
    assert exit_code(pod) == 0, pod_log(w, "pre")
    assert not [p for p in files if p.startswith(dropin)]
    assert kubelet.nodes["node-1"].agent_env == {}
    assert "/var/lib/rancher/rke2/server/manifests/rke2-canal-config.yaml" not in files
    assert "rke2-snapshot-controller" in \
        files["/etc/rancher/rke2/config.yaml.d/40-disable-charts.yaml"]
    taints = w.client.get("v1", "Node", "node-1")["spec"].get("taints") or []
    assert any(t["key"] == "kubevirt.io/drain" for t in taints)
    cm = w.client.get("v1", "ConfigMap", "p-restore-vm", "harvester-system")
    assert "node-1" in cm["data"]


def test_upgrade_manifests_leaves_kubernetes_version_and_writes_dropin() -> None:
    w = _e2e_world()
    try:
        c = w.client
        make_plan(w, "cu")
        start_repo(w, "cu")
        before = c.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")["spec"]
        run_pod(w, "cu-cluster-upgrade", ["upgrade_manifests.sh"],
                [{"name": "HARVESTER_UPGRADEPLAN_NAME", "value": "cu"}])
        pod = c.get("v1", "Pod", "cu-cluster-upgrade", "harvester-system")
        assert exit_code(pod) == 0, pod_log(w, "cu-cluster-upgrade")
        after = c.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")["spec"]
        assert after.get("kubernetesVersion") == before.get("kubernetesVersion")
        assert (after.get("rkeConfig") or {}).get("provisionGeneration") == \
            (before.get("rkeConfig") or {}).get("provisionGeneration")
        # the skip-restart Plan ran on every node and is gone
        assert c.try_get("upgrade.cattle.io/v1", "Plan",
                         "cu-skip-restart-rancher-system-agent", "cattle-system") is None
        kubelet = w.controllers["kubelet"]
        for n in c.list("v1", "Node"):
            name = n["metadata"]["name"]
            assert kubelet.nodes[name].agent_env.get("INSTALL_RKE2_SKIP_ENABLE") == "true"
        mgmt = c.get("management.cattle.io/v3", "Cluster", "local")
        assert mgmt["metadata"]["annotations"][
            "rancher.io/imported-cluster-version-management"] == "false"
        assert c.get("harvesterhci.io/v1beta1", "Setting", "server-version")["value"] == "v1.6.0"
    finally:
        w.stop()


# ---------------------------------------------------------------------- image cleanup
def test_cleanup_script_runs_crictl_rmi_per_image_even_in_use(world: World) -> None:
    """crictl rmi on containerd removes what it is told, also an image a running container
    uses; a missing image is an error, tolerated by the script's ``||``."""
    w = world
    kubelet = w.controllers["kubelet"]
    kubelet.add_images("node-1", [("docker.io/rancher/old:v1", 1000),
                                  ("docker.io/rancher/inuse:v1", 1000)])
    w.client.create({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "user", "namespace": "default"},
                     "spec": {"nodeName": "node-1", "containers": [
                         {"name": "c", "image": "rancher/inuse:v1"}]}})
    pod = run_pod(w, "clean", ["sh", "-c", CLEANUP_SCRIPT],
                  [{"name": "IMAGES", "value": "rancher/old:v1 rancher/inuse:v1 rancher/gone:v9"}])
    assert exit_code(pod) == 0
    assert not kubelet.has_image("node-1", "rancher/old:v1")
    assert not kubelet.has_image("node-1", "rancher/inuse:v1")
    assert "no such image rancher/gone:v9" in pod_log(w, "clean")


def test_cleanup_script_without_tolerance_fails_on_missing_image(world: World) -> None:
    strict = ('set -e\nCRICTL="$HOST_DIR/$(readlink $HOST_DIR/var/lib/rancher/rke2/bin)/crictl"'
              '\n"$CRICTL" rmi $IMAGES\n')
    pod = run_pod(world, "strict", ["sh", "-c", strict],
                  [{"name": "IMAGES", "value": "rancher/never-there:v1"}])
    assert exit_code(pod) == 1


def test_touch_in_init_container_is_seen_through_the_shared_empty_dir(world: World) -> None:
    """The per-volume bypass of wait_longhorn_engines: a file an init container leaves in an
    emptyDir is visible to the main container mounting it, and only there."""
    from harvester_sim.programs import host_scripts
    from harvester_sim.programs.base import ProgramContext

    pod = {"metadata": {"name": "x", "uid": "u1"},
           "spec": {"volumes": [{"name": "tmp", "emptyDir": {}}]}}
    init = {"name": "i", "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}
    ctx = ProgramContext(world, world.client, pod, init, "node-1", {})
    prog = host_scripts.run_shell_script(ctx, ["sh", "-c", "touch /tmp/skip-vol-a"])
    assert prog is not None
    with pytest.raises(StopIteration):
        while True:
            next(prog)
    main = ProgramContext(world, world.client, pod, dict(init, name="m"), "node-1", {})
    assert host_scripts.pod_file_exists(main, "/tmp/skip-vol-a")
    assert not host_scripts.pod_file_exists(main, "/tmp/skip-vol-b")
    bare = ProgramContext(world, world.client, pod, {"name": "b"}, "node-1", {})
    assert not host_scripts.pod_file_exists(bare, "/tmp/skip-vol-a")
    # touching outside an emptyDir is not a modelled script
    assert host_scripts.run_shell_script(bare, ["sh", "-c", "touch /tmp/skip-vol-a"]) is None


def test_downward_api_items_are_files_whole_or_by_sub_path(world: World) -> None:
    """The kubelet writes a downwardAPI volume's items before the containers start: the
    bypass files of wait_longhorn_engines can come from one, mounted item by item with
    subPath (the rest of /tmp stays the container's own) or whole at a directory."""
    from harvester_sim.programs import host_scripts
    from harvester_sim.programs.base import ProgramContext

    items = [{"path": f"skip-{v}", "fieldRef": {"fieldPath": "metadata.name"}}
             for v in ("vol-a", "vol-b")]
    pod = {"metadata": {"name": "x", "uid": "u2"},
           "spec": {"volumes": [{"name": "skip", "downwardAPI": {"items": items}},
                                {"name": "tmp", "emptyDir": {}}]}}
    by_item = {"name": "m", "volumeMounts": [
        {"name": "skip", "mountPath": "/tmp/skip-vol-a", "subPath": "skip-vol-a"},
        {"name": "skip", "mountPath": "/tmp/skip-vol-b", "subPath": "skip-vol-b"}]}
    ctx = ProgramContext(world, world.client, pod, by_item, "node-1", {})
    assert host_scripts.pod_file_exists(ctx, "/tmp/skip-vol-a")
    assert host_scripts.pod_file_exists(ctx, "/tmp/skip-vol-b")
    assert not host_scripts.pod_file_exists(ctx, "/tmp/skip-vol-c")
    assert not host_scripts.pod_file_exists(ctx, "/tmp")
    whole = {"name": "w", "volumeMounts": [{"name": "skip", "mountPath": "/etc/skip"}]}
    ctx = ProgramContext(world, world.client, pod, whole, "node-1", {})
    assert host_scripts.pod_file_exists(ctx, "/etc/skip/skip-vol-b")
    assert not host_scripts.pod_file_exists(ctx, "/tmp/skip-vol-b")
    # an item the mount's subPath does not name is not at the mount path
    wrong = {"name": "o", "volumeMounts": [
        {"name": "skip", "mountPath": "/tmp/skip-vol-c", "subPath": "skip-vol-c"}]}
    ctx = ProgramContext(world, world.client, pod, wrong, "node-1", {})
    assert not host_scripts.pod_file_exists(ctx, "/tmp/skip-vol-c")
    # a container that does not mount the volume sees none of it
    bare = ProgramContext(world, world.client, pod, {"name": "b"}, "node-1", {})
    assert not host_scripts.pod_file_exists(bare, "/tmp/skip-vol-a")


def test_downward_api_paths_the_apiserver_refuses_show_no_file(world: World) -> None:
    """An absolute or ``..`` subPath or item path is refused by the apiserver's validation
    (``validateLocalDescendingPath``): the simulated container never sees a file through
    one, where a lenient normalisation would have found the item."""
    from harvester_sim.programs import host_scripts
    from harvester_sim.programs.base import ProgramContext

    items = [{"path": "skip-vol-a", "fieldRef": {"fieldPath": "metadata.name"}},
             {"path": "/abs", "fieldRef": {"fieldPath": "metadata.name"}},
             {"path": "../up", "fieldRef": {"fieldPath": "metadata.name"}}]
    pod = {"metadata": {"name": "x", "uid": "u3"},
           "spec": {"volumes": [{"name": "skip", "downwardAPI": {"items": items}}]}}
    for sub in ("/skip-vol-a", "x/../skip-vol-a"):
        c = {"name": "m", "volumeMounts": [
            {"name": "skip", "mountPath": "/tmp/skip-vol-a", "subPath": sub}]}
        ctx = ProgramContext(world, world.client, pod, c, "node-1", {})
        assert not host_scripts.pod_file_exists(ctx, "/tmp/skip-vol-a"), sub
    whole = {"name": "w", "volumeMounts": [{"name": "skip", "mountPath": "/etc/skip"}]}
    ctx = ProgramContext(world, world.client, pod, whole, "node-1", {})
    assert host_scripts.pod_file_exists(ctx, "/etc/skip/skip-vol-a")
    assert not host_scripts.pod_file_exists(ctx, "/etc/skip/abs")


# ------------------------------------------------------------------ pre-drain: Longhorn wait
def test_pre_drain_reads_each_volume_as_it_is_after_a_wait() -> None:
    """``wait_longhorn_engines`` reads each running engine's volume with its own ``kubectl
    get``: a volume that turned unhealthy while the script waited for an earlier one is
    waited for too, not judged on what the volumes were before the wait."""
    from harvester_sim.programs import toolkit
    from harvester_sim.programs.base import ProgramContext
    from harvester_sim.scenarios import loader

    lh, ns = "longhorn.io/v1beta2", "longhorn-system"
    # without Longhorn: the test sets the volumes' robustness itself
    w = World(loader.load("three-node"), speed=SPEED, without=("longhorn",))
    w.start()
    try:
        c = w.client
        vols = sorted(v["metadata"]["name"] for v in c.list(lh, "Volume", ns))[:2]
        for i, vol in enumerate(vols):
            c.create({"apiVersion": lh, "kind": "Engine",
                      "metadata": {"name": f"e{i}", "namespace": ns,
                                   "labels": {"longhornvolume": vol}},
                      "spec": {"volumeName": vol}})

            def running(cur: dict[str, Any]) -> dict[str, Any]:
                cur.setdefault("status", {})["currentState"] = "running"
                return cur
            c.modify(lh, "Engine", f"e{i}", running, ns, "status")

        def robustness(vol: str, value: str) -> None:
            def fn(cur: dict[str, Any]) -> dict[str, Any]:
                cur.setdefault("status", {})["robustness"] = value
                return cur
            c.modify(lh, "Volume", vol, fn, ns, "status")

        pod = {"metadata": {"name": "pre-drain", "uid": "u"}, "spec": {}}
        ctx = ProgramContext(w, c, pod, {"name": "apply"}, "node-1", {})
        prog = toolkit._wait_longhorn_engines(ctx, "node-1", "v9.9.9+rke2r1")
        robustness(vols[0], "degraded")
        assert next(prog) == 10.0            # the first volume is waited for
        robustness(vols[1], "degraded")      # meanwhile the second one degrades
        robustness(vols[0], "healthy")
        assert next(prog) == 10.0            # and is waited for in turn
        robustness(vols[1], "healthy")
        with pytest.raises(StopIteration):
            next(prog)
    finally:
        w.stop()
