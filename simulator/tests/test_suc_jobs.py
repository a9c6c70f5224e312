"""system-upgrade-controller Jobs as SUC v0.16.3 builds them (``upgradejob.New``), and the
programs of their containers: ``rancher/kubectl`` drain/cordon and ``rancher/rke2-upgrade``.

The Plan shapes are those harvester/upgrade-toolkit 5ac1bbe creates
(/work/shared/reference/upgrade-toolkit-golden/created/Plan-*.yaml).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harvester_sim.controllers import suc
from harvester_sim.programs import kubectl
from harvester_sim.testing import wait_for
from harvester_sim.world import World

SPEED = 400.0
NS = "cattle-system"
RKE2_TARGET = "v1.33.3-rke2r1"


def k8s_plan(name: str = "up-node-upgrade-k8s", node_value: str = "k8s",
             prepare: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """The toolkit's k8s node-upgrade Plan (cordon + drain force, rke2-upgrade)."""
    body: dict[str, Any] = {
        "concurrency": 1, "cordon": True, "drain": {"force": True},
        "jobActiveDeadlineSecs": 0,
        "nodeSelector": {"matchExpressions": [
            {"key": "harvesterhci.io/managed", "operator": "In", "values": ["true"]},
            {"key": "management.harvesterhci.io/up", "operator": "In",
             "values": [node_value]}]},
        "serviceAccountName": "system-upgrade-controller",
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "upgrade": {"image": "rancher/rke2-upgrade"},
        "version": RKE2_TARGET,
    }
    if prepare is not None:
        body["prepare"] = prepare
    body.update(spec)
    return {"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"management.harvesterhci.io/upgrade-plan": "up",
                                    "management.harvesterhci.io/upgrade-component":
                                        "node-upgrade",
                                    "management.harvesterhci.io/node-upgrade-type": "k8s",
                                    "example.cattle.io/internal": "x"},
                         "annotations": {"team": "a", "field.cattle.io/x": "y"}},
            "spec": body}


NODE = {"metadata": {"name": "node-1.example.com",
                     "labels": {"kubernetes.io/hostname": "node-1"}}}
PREPARE = {"image": "starbops/harvester-upgrade-toolkit", "command": ["upgrade_node.sh"],
           "args": ["pre-drain"], "envs": [{"name": "HARVESTER_UPGRADEPLAN_NAME",
                                            "value": "up"}]}


# --------------------------------------------------------------------- job shape
def test_job_follows_upgradejob_new() -> None:
    plan = k8s_plan(prepare=PREPARE)
    plan["status"] = {"applying": ["node-1"]}
    hsh = suc.latest_hash(RKE2_TARGET, "system-upgrade-controller")
    job = suc.new_job(plan, NODE, RKE2_TARGET, hsh)
    md = job["metadata"]
    assert md["name"] == suc.safe_concat_name("apply", "up-node-upgrade-k8s", "on", "node-1",
                                              "with", hsh)
    assert md["labels"] == {
        "upgrade.cattle.io/controller": "system-upgrade-controller",
        "upgrade.cattle.io/exclusive": "false",
        "upgrade.cattle.io/node": "node-1.example.com",
        "upgrade.cattle.io/plan": "up-node-upgrade-k8s",
        "upgrade.cattle.io/version": RKE2_TARGET,
        "plan.upgrade.cattle.io/up-node-upgrade-k8s": hsh,
        "management.harvesterhci.io/upgrade-plan": "up",
        "management.harvesterhci.io/upgrade-component": "node-upgrade",
        "management.harvesterhci.io/node-upgrade-type": "k8s",
    }  # the Plan's `cattle.io/` label is not copied
    assert md["annotations"] == {"upgrade.cattle.io/ttl-seconds-after-finished": "900",
                                 "team": "a"}
    spec = job["spec"]
    assert spec["backoffLimit"] == 2 and spec["ttlSecondsAfterFinished"] == 900
    assert spec["completions"] == 1 and spec["parallelism"] == 1
    assert "activeDeadlineSeconds" not in spec          # jobActiveDeadlineSecs: 0 => none
    pod = spec["template"]["spec"]
    assert "nodeName" not in pod
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["node-1"]
    assert [c["name"] for c in pod["initContainers"]] == ["prepare", "drain"]
    prep, drain = pod["initContainers"]
    assert prep["image"] == f"starbops/harvester-upgrade-toolkit:{RKE2_TARGET}"
    assert prep["args"] == ["pre-drain"] and "securityContext" not in prep
    assert [e["name"] for e in prep["env"]] == [
        "SYSTEM_UPGRADE_NODE_NAME", "SYSTEM_UPGRADE_POD_NAME", "SYSTEM_UPGRADE_POD_UID",
        "HARVESTER_UPGRADEPLAN_NAME", "SYSTEM_UPGRADE_PLAN_NAME",
        "SYSTEM_UPGRADE_PLAN_LATEST_HASH", "SYSTEM_UPGRADE_PLAN_LATEST_VERSION"]
    assert drain["image"] == "rancher/kubectl:v1.30.3"
    assert drain["args"] == ["drain", "node-1.example.com", "--pod-selector",
                             "!upgrade.cattle.io/controller", "--ignore-daemonsets",
                             "--delete-emptydir-data", "--force"]
    (up,) = pod["containers"]
    assert up["name"] == "upgrade" and up["image"] == f"rancher/rke2-upgrade:{RKE2_TARGET}"
    assert up["securityContext"] == {"privileged": True,
                                     "capabilities": {"add": ["CAP_SYS_BOOT"]}}
    assert pod["tolerations"][0] == {"key": "node.kubernetes.io/unschedulable",
                                     "operator": "Exists", "effect": "NoSchedule"}
    assert pod["tolerations"][1:] == plan["spec"]["tolerations"]


def test_job_variants_cordon_only_deadline_and_paused() -> None:
    plan = k8s_plan()
    del plan["spec"]["drain"]
    del plan["spec"]["jobActiveDeadlineSecs"]
    job = suc.new_job(plan, NODE, RKE2_TARGET, "h")
    pod = job["spec"]["template"]["spec"]
    assert [(c["name"], c["args"]) for c in pod["initContainers"]] == \
        [("cordon", ["cordon", "node-1.example.com"])]
    assert job["spec"]["activeDeadlineSeconds"] == 600   # unset => the controller default
    assert job["spec"]["parallelism"] == 0               # node not yet in status.applying
    plan["spec"]["cordon"] = False
    plan["spec"]["jobActiveDeadlineSecs"] = 120
    job = suc.new_job(plan, NODE, RKE2_TARGET, "h")
    assert "initContainers" not in job["spec"]["template"]["spec"]
    assert job["spec"]["activeDeadlineSeconds"] == 120


def test_drain_args_options() -> None:
    args = suc.drain_args("n1", {"ignoreDaemonSets": False, "deleteEmptydirData": False,
                                 "timeout": 90_000_000_000, "gracePeriod": 30,
                                 "disableEviction": True, "skipWaitForDeleteTimeout": 60,
                                 "podSelector": {"matchLabels": {"app": "x"}}})
    assert args == ["drain", "n1", "--pod-selector", "app=x,!upgrade.cattle.io/controller",
                    "--timeout", "1m30s", "--grace-period", "30", "--disable-eviction=true",
                    "--skip-wait-for-delete-timeout", "60"]
    assert suc.drain_args("n1", {"timeout": "5m"})[-2:] == ["--timeout", "5m"]
    assert kubectl.parse_duration("1m30s") == 90.0
    with pytest.raises(ValueError):
        kubectl.parse_duration("soon")


# --------------------------------------------------------------------- end to end
@pytest.fixture
def world() -> Iterator[World]:
    from harvester_sim.scenarios import loader

    w = World(loader.load("three-node"), speed=SPEED)
    w.start()
    yield w
    w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


def events(w: World, kind: str) -> list[dict[str, Any]]:
    return [e for e in w.timeline.snapshot() if e["event"] == kind]


def plan_complete(w: World, name: str) -> dict[str, Any]:
    p = w.client.get("upgrade.cattle.io/v1", "Plan", name, NS)
    return next((c for c in (p.get("status") or {}).get("conditions") or []
                 if c["type"] == "Complete"), {})


def kubelet_version(w: World, node: str) -> str:
    return str(w.client.get("v1", "Node", node)["status"]["nodeInfo"]["kubeletVersion"])


def test_drain_and_rke2_upgrade_on_the_selected_node(world: World) -> None:
    """One node selected: cordon + kubectl drain (live migrations through the eviction
    API), then rke2-upgrade restarts RKE2 at the new version; SUC labels the node, uncordons
    it and completes the Plan; Rancher's planner leaves the replaced binary alone."""
    c = world.client
    old = kubelet_version(world, "node-2")
    c.patch("v1", "Node", "node-1", {"metadata": {"labels": {"management.harvesterhci.io/up":
                                                              "k8s"}}})
    c.create(k8s_plan())
    wait_for(lambda: plan_complete(world, "up-node-upgrade-k8s").get("status") == "True",
             timeout=60, what="Plan Complete")
    hsh = c.get("upgrade.cattle.io/v1", "Plan", "up-node-upgrade-k8s", NS)["status"][
        "latestHash"]
    node = c.get("v1", "Node", "node-1")
    assert node["metadata"]["labels"]["plan.upgrade.cattle.io/up-node-upgrade-k8s"] == hsh
    assert not node["spec"].get("unschedulable")
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.33.3+rke2r1"
    assert kubelet_version(world, "node-2") == old       # not selected: untouched
    vmis = c.list("kubevirt.io/v1", "VirtualMachineInstance")
    assert not [v["metadata"]["name"] for v in vmis if v["status"].get("nodeName") == "node-1"]
    assert all(v["status"]["phase"] == "Running" for v in vmis)
    kinds = [e["event"] for e in world.timeline.snapshot()]
    assert kinds.index("kubectl_drain_done") < kinds.index("rke2_binary_replaced")
    assert "planner_started" not in kinds
    assert events(world, "kubectl_cordon")[0]["node"] == "node-1"
    mon = world.extras["invariants"]
    assert not list(mon.violations), list(mon.violations)


def test_drain_refuses_unmanaged_pod_without_force(world: World) -> None:
    c = world.client
    c.create({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "bare", "namespace": "default"},
              "spec": {"nodeName": "node-3", "containers": [{"name": "c", "image": "busybox"}]}})
    c.patch("v1", "Node", "node-3", {"metadata": {"labels": {"management.harvesterhci.io/up":
                                                              "k8s"}}})
    c.create(k8s_plan(drain={}))
    job = wait_for(lambda: next(iter(c.list("batch/v1", "Job", NS)), None), what="job")
    wait_for(lambda: events(world, "kubectl_drain_failed"), what="drain failure")
    assert "default/bare" in events(world, "kubectl_drain_failed")[0]["error"]
    assert c.get("v1", "Node", "node-3")["spec"].get("unschedulable") is True
    assert kubelet_version(world, "node-3") != "v1.33.3+rke2r1"
    assert c.try_get("v1", "Pod", "bare", "default") is not None
    assert job["metadata"]["labels"]["upgrade.cattle.io/node"] == "node-3"


def test_rke2_upgrade_is_a_no_op_when_the_binary_is_current(world: World) -> None:
    c = world.client
    current = kubelet_version(world, "node-2").replace("+", "-")
    c.patch("v1", "Node", "node-2", {"metadata": {"labels": {"management.harvesterhci.io/up":
                                                              "k8s"}}})
    c.create(k8s_plan(version=current, cordon=False, drain=None))
    wait_for(lambda: plan_complete(world, "up-node-upgrade-k8s").get("status") == "True",
             what="Plan Complete")
    assert not events(world, "rke2_binary_replaced")
    assert not events(world, "kubelet_restart")
