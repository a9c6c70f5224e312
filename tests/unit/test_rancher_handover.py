"""NodeUpgrade's hand-over to Rancher (seed 000 ``upgradeKubernetes``, reference §C.1), the
image-cleanup list and Plan, and the SUC Plan env field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
errors = pytest.importorskip(f"{_MU}.errors")
node_phase = pytest.importorskip(f"{_MU}.node_phase")
manifests = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.manifests")
phase_image_cleanup = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
    ".phase_image_cleanup")

K8S = "v1.33.3+rke2r1"


class Kube:
    def __init__(self, cluster: dict[str, Any] | None, check_mode: bool = False) -> None:
        self.cluster = cluster
        self.check_mode = check_mode
        self.patches: list[dict[str, Any]] = []

    def get(self, api: str, kind: str, name: str, namespace: str | None = None) -> Any:
        assert (api, kind, name, namespace) == ("provisioning.cattle.io/v1", "Cluster",
                                                "local", "fleet-local")
        return copy.deepcopy(self.cluster)

    def patch(self, api: str, kind: str, name: str, body: dict[str, Any],
              namespace: str | None = None) -> dict[str, Any]:
        assert not self.check_mode
        self.patches.append(body)
        assert self.cluster is not None
        spec = self.cluster.setdefault("spec", {})
        spec["kubernetesVersion"] = body["spec"]["kubernetesVersion"]
        spec.setdefault("rkeConfig", {}).update(body["spec"]["rkeConfig"])
        return self.cluster


class Writer:
    def __init__(self, status: dict[str, Any] | None = None) -> None:
        self.plan = {"metadata": {"name": "p"},
                     "status": {"releaseMetadata": {"kubernetes": K8S, "os": "Harvester v1.6.0"},
                                **(status or {})}}
        self.events: list[tuple[str, str]] = []

    def event(self, reason: str, message: str, **kw: Any) -> None:
        self.events.append((reason, message))

    def update_status(self, mutate: Any, *, reread: bool = True) -> bool:
        mutate(self.plan["status"])
        return True

    held: list[Any] = []

    def hold(self, mutate: Any) -> None:
        self.held = [*self.held, mutate]


def cluster(generation: int = 3, version: str = "v1.32.4+rke2r1") -> dict[str, Any]:
    return {"spec": {"kubernetesVersion": version,
                     "rkeConfig": {"provisionGeneration": generation}}}


def test_one_patch_with_version_generation_and_strategy() -> None:
    kube, writer = Kube(cluster()), Writer()
    out = node_phase.start_rancher_upgrade(kube, writer)
    assert out["changed"] and out["provisionGeneration"] == 4
    assert kube.patches == [{"spec": {"kubernetesVersion": K8S, "rkeConfig": {
        "provisionGeneration": 4, "upgradeStrategy": manifests.upgrade_strategy()}}}]
    assert writer.plan["status"]["provisionGeneration"] == 4
    assert [r for r, _ in writer.events] == ["KubernetesUpgradeStarted"]


def test_the_record_can_wait_for_the_writers_next_write() -> None:
    # the first node's head start: Rancher patched now, recorded after its first migrations
    kube, writer = Kube(cluster()), Writer()
    out = node_phase.start_rancher_upgrade(kube, writer, hold=True)
    assert out["provisionGeneration"] == 4 and len(kube.patches) == 1
    assert "provisionGeneration" not in writer.plan["status"] and len(writer.held) == 1
    writer.held[0](writer.plan["status"])
    assert writer.plan["status"]["provisionGeneration"] == 4


def test_recorded_generation_means_no_second_patch() -> None:
    kube, writer = Kube(cluster()), Writer()
    node_phase.start_rancher_upgrade(kube, writer)
    again = node_phase.start_rancher_upgrade(kube, writer)   # the resumed run
    assert not again["changed"] and len(kube.patches) == 1
    assert kube.cluster["spec"]["rkeConfig"]["provisionGeneration"] == 4


def test_run_stopped_after_patch_before_status_does_not_bump_again() -> None:
    c = cluster(generation=4, version=K8S.replace("+", "-"))
    c["spec"]["rkeConfig"]["upgradeStrategy"] = manifests.upgrade_strategy()
    kube, writer = Kube(c), Writer()
    out = node_phase.start_rancher_upgrade(kube, writer)
    assert kube.patches == [] and writer.plan["status"]["provisionGeneration"] == 4
    assert out["provisionGeneration"] == 4


def test_check_mode_writes_nothing() -> None:
    kube, writer = Kube(cluster(), check_mode=True), Writer()
    out = node_phase.start_rancher_upgrade(kube, writer)
    assert out["changed"] and kube.patches == []
    assert "provisionGeneration" not in writer.plan["status"]


def test_single_node_plan_is_not_patched() -> None:
    kube, writer = Kube(cluster()), Writer({"singleNode": "n1"})
    assert not node_phase.start_rancher_upgrade(kube, writer)["changed"]
    assert kube.patches == []


def test_missing_rancher_cluster_is_an_error() -> None:
    with pytest.raises(errors.NodeLoopError, match="fleet-local/local not found"):
        node_phase.start_rancher_upgrade(Kube(None), Writer())


PLAN = {"metadata": {"name": "p", "uid": "u", "annotations": {}},
        "spec": {"upgrade": "main-head"}, "status": {"releaseMetadata": {"harvester": "v1.6.0"}}}


def test_suc_plans_carry_envs_not_env() -> None:
    preload = manifests.suc_plan(PLAN, "image-preload", ["prepare"], 2)
    up = preload["spec"]["upgrade"]
    assert "env" not in up
    assert up["envs"] == [{"name": "HARVESTER_UPGRADEPLAN_NAME", "value": "p"}]
    assert up["command"] == ["upgrade_node.sh"] and up["args"] == ["prepare"]


def test_image_cleanup_plan_runs_crictl_script_not_upgrade_node() -> None:
    plan = manifests.image_cleanup_plan(PLAN, ["rancher/a:v1", "rancher/b:v2"])
    up = plan["spec"]["upgrade"]
    assert plan["metadata"]["name"] == "p-image-cleanup" and plan["spec"]["concurrency"] == 1
    assert up["command"][:2] == ["sh", "-c"] and "args" not in up
    script = up["command"][2]
    assert "readlink $HOST_DIR/var/lib/rancher/rke2/bin)/crictl" in script
    assert 'for image in $IMAGES; do' in script and "rmi \"$image\" ||" in script
    assert {"name": "IMAGES", "value": "rancher/a:v1 rancher/b:v2"} in up["envs"]


class PodKube:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods

    def list(self, api: str, kind: str, **kw: Any) -> list[dict[str, Any]]:
        assert (api, kind) == ("v1", "Pod")
        return self.pods


def pod(node: str, image: str, phase: str = "Running", init: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": image}]}
    if init:
        spec["initContainers"] = [{"name": "i", "image": init}]
    return {"spec": spec, "status": {"phase": phase}}


def test_images_in_use_on_managed_nodes_are_not_purged() -> None:
    kube = PodKube([pod("n1", "docker.io/rancher/inuse:v1"),
                    pod("n2", "rancher/other:v1", init="rancher/init:v1"),
                    pod("n1", "rancher/done:v1", phase="Succeeded"),
                    pod("unmanaged", "rancher/elsewhere:v1")])
    used = phase_image_cleanup.images_in_use(kube, ["n1", "n2"])
    assert used == {"rancher/inuse:v1", "rancher/other:v1", "rancher/init:v1"}
    previous = ["rancher/inuse:v1", "rancher/done:v1", "rancher/elsewhere:v1",
                "rancher/init:v1", "rancher/keep:v2"]
    purge = [i for i in phase_image_cleanup.images_to_purge(previous, ["rancher/keep:v2"])
             if phase_image_cleanup._norm_image(i) not in used]
    assert purge == ["rancher/done:v1", "rancher/elsewhere:v1"]
