"""``kubectl drain`` in the ``rancher/kubectl`` image (programs/kubectl.py), run the way a real
system-upgrade-controller v0.16.0 runs it: the ``drain`` init container of its Job, image
``rancher/kubectl:v1.33.1`` (Rancher's chart 107.0.0), the arguments ``upgradejob.New`` builds
for a Plan with ``drain: {force: true, timeout: ...}``. The simulated SUC is left out
(``World(without=("suc",))``), as beside a real one, so only the program acts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harvester_sim.programs import kubectl
from harvester_sim.testing import wait_for
from harvester_sim.world import World

SPEED = 400.0
NS = "cattle-system"
IMAGE = "rancher/kubectl:v1.33.1"


@pytest.fixture
def world() -> Iterator[World]:
    from harvester_sim.scenarios import loader

    w = World(loader.load("three-node"), speed=SPEED, without=("suc",))
    w.start()
    yield w
    w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


def drain_pod(w: World, name: str, node: str, *flags: str, selector: str = "") -> None:
    """The drain container alone, as a pod on another node (SUC's Job runs it on ``node``
    itself, with a toleration for the cordon; where it runs does not change what it does).
    ``selector`` is a Plan's ``drain.podSelector``, which SUC joins to its own."""
    pods = ",".join(x for x in (selector, "!upgrade.cattle.io/controller") if x)
    args = ["drain", node, "--pod-selector", pods, *flags]
    w.client.create({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": NS},
                     "spec": {"nodeName": "node-1" if node != "node-1" else "node-2",
                              "restartPolicy": "Never", "serviceAccountName": "default",
                              "containers": [{"name": "drain", "image": IMAGE,
                                              "args": args}]}})


def phase(w: World, name: str) -> str:
    return str((w.client.get("v1", "Pod", name, NS).get("status") or {}).get("phase"))


def logs(w: World, name: str) -> str:
    return str(w.controllers["kubelet"].pod_logs(NS, name, "drain"))


def guarded_workload(w: World, node: str) -> str:
    """A one-replica Deployment pinned to ``node`` and a PDB that allows no disruption."""
    c = w.client
    c.create({"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "guarded", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "guarded"}},
                       "template": {"metadata": {"labels": {"app": "guarded"}},
                                    "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                                             "containers": [{"name": "c",
                                                             "image": "busybox"}]}}}})
    c.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "guarded", "namespace": "default"},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}}})
    pod = wait_for(lambda: next((p for p in c.list("v1", "Pod", "default",
                                                   label_selector="app=guarded")
                                 if (p.get("status") or {}).get("phase") == "Running"), None),
                   what="guarded pod running")
    wait_for(lambda: (c.get("policy/v1", "PodDisruptionBudget", "guarded", "default")
                      .get("status") or {}).get("currentHealthy") == 1, what="PDB observed")
    return str(pod["metadata"]["name"])


def test_duration_text_is_gos() -> None:
    assert kubectl.go_duration(900) == "15m0s"
    assert kubectl.go_duration(30) == "30s"
    assert kubectl.go_duration(3600) == "1h0m0s"
    assert kubectl.parse_duration("15m0s") == 900.0


def test_drain_retries_a_pdb_then_evicts(world: World) -> None:
    c = world.client
    victim = guarded_workload(world, "node-2")
    drain_pod(world, "drain-node-2", "node-2", "--ignore-daemonsets", "--delete-emptydir-data",
              "--force", "--timeout", "15m0s", selector="app=guarded")
    wait_for(lambda: "will retry after 5s" in logs(world, "drain-node-2"), what="429 retry")
    assert c.get("v1", "Node", "node-2")["spec"].get("unschedulable") is True
    assert c.try_get("v1", "Pod", victim, "default") is not None  # the PDB holds
    assert phase(world, "drain-node-2") == "Running"
    c.delete("policy/v1", "PodDisruptionBudget", "guarded", "default")
    wait_for(lambda: phase(world, "drain-node-2") == "Succeeded", what="drain done")
    out = logs(world, "drain-node-2")
    assert f"evicting pod default/{victim}" in out and "node/node-2 drained" in out
    assert c.try_get("v1", "Pod", victim, "default") is None
    # the pod selector kept every other pod where it was
    assert c.list("v1", "Pod", field_selector="spec.nodeName=node-2")
    assert c.get("v1", "Node", "node-2")["spec"].get("unschedulable") is True  # SUC uncordons


def test_drain_timeout_fails_with_kubectls_text(world: World) -> None:
    victim = guarded_workload(world, "node-2")
    drain_pod(world, "drain-timeout", "node-2", "--ignore-daemonsets", "--delete-emptydir-data",
              "--force", "--timeout", "30s", selector="app=guarded")
    wait_for(lambda: phase(world, "drain-timeout") == "Failed", what="drain failed")
    out = logs(world, "drain-timeout")
    assert (f'error when evicting pods/"{victim}" -n "default": global timeout reached: 30s'
            in out), out
    assert "There are pending nodes to be drained:\n node-2" in out
    st = world.client.get("v1", "Pod", "drain-timeout", NS)["status"]
    assert st["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    assert world.client.try_get("v1", "Pod", victim, "default") is not None


def test_drain_without_ignore_daemonsets_evicts_nothing(world: World) -> None:
    c = world.client

    def daemonset_pod_on_node_3() -> bool:
        return any(o.get("kind") == "DaemonSet"
                   for p in c.list("v1", "Pod", field_selector="spec.nodeName=node-3")
                   for o in p["metadata"].get("ownerReferences") or [])

    # what the drain refuses must be there first (the world has just started)
    wait_for(daemonset_pod_on_node_3, what="a DaemonSet's pod on node-3")
    before = {p["metadata"]["uid"] for p in c.list("v1", "Pod",
                                                   field_selector="spec.nodeName=node-3")}
    drain_pod(world, "drain-ds", "node-3", "--force", "--delete-emptydir-data")
    wait_for(lambda: phase(world, "drain-ds") == "Failed", what="drain refused")
    out = logs(world, "drain-ds")
    assert "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)" in out
    after = {p["metadata"]["uid"] for p in c.list("v1", "Pod",
                                                  field_selector="spec.nodeName=node-3")}
    assert before <= after  # cordoned, but nothing evicted
    assert c.get("v1", "Node", "node-3")["spec"].get("unschedulable") is True
