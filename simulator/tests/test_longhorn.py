"""Simulated Longhorn through the in-process API: replicas, robustness, rebuilds, the
instance-manager PDB and the ``volume_degraded`` fault."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import harvester_sim
from harvester_sim import crds
from harvester_sim.api.errors import ApiError
from harvester_sim.controllers import longhorn
from harvester_sim.testing import wait_for
from harvester_sim.world import World

CRD_DIR = Path(harvester_sim.__file__).parent / "crds"
API = "longhorn.io/v1beta2"
NS = "longhorn-system"


@pytest.fixture
def world_factory() -> Iterator[Callable[..., World]]:
    worlds: list[World] = []

    def make(faults: list[dict[str, Any]] | None = None, nodes: int = 3,
             pod_start_s: float = 1, failed_replica_on: str | None = None) -> World:
        w = World({"timings": {"replica_rebuild_s": 20, "pod_start_s": pod_start_s},
                   "faults": faults or []}, speed=100.0, seed=1)
        for ns in ("default", NS):
            w.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        crds.install(w.client, ("longhorn.io",))
        for i in range(nodes):
            w.client.create({"apiVersion": "v1", "kind": "Node",
                             "metadata": {"name": f"node-{i}"},
                             "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        w.client.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "metadata": {"name": "disk", "namespace": "default"},
                         "spec": {"accessModes": ["ReadWriteMany"], "volumeName": "pvc-1",
                                  "resources": {"requests": {"storage": "10Gi"}}}})
        w.client.create({"apiVersion": API, "kind": "Volume",
                         "metadata": {"name": "pvc-1", "namespace": NS},
                         "spec": {"numberOfReplicas": 3, "size": str(10 * 1024 ** 3),
                                  "accessMode": "rwx", "migratable": True}})
        if failed_replica_on is not None:   # a scenario's degraded volume: one failed
            for i in range(3):
                node = f"node-{i}"
                failed = node == failed_replica_on
                w.client.create({"apiVersion": API, "kind": "Replica",
                                 "metadata": {"name": f"pvc-1-r-{i}", "namespace": NS,
                                              "labels": {"longhornvolume": "pvc-1"}},
                                 "spec": {"volumeName": "pvc-1", "nodeID": node,
                                          "active": True, "dataEngine": "v1",
                                          "healthyAt": "2024-12-01T00:00:00Z",
                                          "failedAt": "2025-01-01T00:00:00Z" if failed
                                          else ""}})
                w.client.patch(API, "Replica", f"pvc-1-r-{i}", {"status": {
                    "currentState": "error" if failed else "running"}}, NS,
                    subresource="status")
        w.controllers["longhorn"] = longhorn.setup(w)
        w.runtime.start()
        worlds.append(w)
        return w

    yield make
    for w in worlds:
        w.stop()
        assert not w.runtime.errors, w.runtime.errors[0]


def volume(w: World) -> dict[str, Any]:
    return w.client.get(API, "Volume", "pvc-1", NS)


def robustness(w: World) -> str:
    return str((volume(w).get("status") or {}).get("robustness"))


def attach(w: World, node: str = "node-0") -> None:
    w.client.create({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "virt-launcher-vm1-abcde", "namespace": "default"},
                     "spec": {"nodeName": node, "containers": [{"name": "compute",
                                                                "image": "x"}],
                              "volumes": [{"name": "disk", "persistentVolumeClaim":
                                           {"claimName": "disk"}}]},
                     "status": {"phase": "Running"}})


def im_up(w: World, node: str) -> bool:
    p = w.client.try_get("v1", "Pod", longhorn.im_name(node), NS)
    return bool(p and (p.get("status") or {}).get("phase") == "Running")


def reboot_node_1_under_an_attached_volume(w: World) -> None:
    """Every instance manager up, the volume attached to node-0 and healthy; then the
    kubelet's reboot of node-1 (NotReady, its pods Failed) until the volume is degraded."""
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))
    attach(w)
    wait_for(lambda: robustness(w) == "healthy")
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}, subresource="status")
    w.client.patch("v1", "Pod", longhorn.im_name("node-1"), {"status": {"phase": "Failed"}},
                   NS, subresource="status")
    wait_for(lambda: robustness(w) == "degraded", what="degraded")


def test_replicas_attach_and_robustness(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    reps = wait_for(lambda: (lambda r: r if len(r) == 3 else None)(
        w.client.list(API, "Replica", NS)), what="replicas")
    assert sorted(r["spec"]["nodeID"] for r in reps) == ["node-0", "node-1", "node-2"]
    assert w.client.get(API, "Engine", "pvc-1-e-0", NS)["spec"]["volumeName"] == "pvc-1"
    assert w.client.get(API, "Setting", "replica-replenishment-wait-interval", NS)[
        "value"] == "600"
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n), what=f"instance manager on {n}")
    assert robustness(w) == "unknown"  # detached
    attach(w)
    wait_for(lambda: volume(w)["status"].get("state") == "attached", what="attached")
    st = volume(w)["status"]
    assert st["currentNodeID"] == "node-0"
    assert st["robustness"] == "healthy"
    assert st["kubernetesStatus"]["pvcName"] == "disk"
    assert st["kubernetesStatus"]["workloadsStatus"][0]["workloadName"] == "vm1"
    w.client.delete("v1", "Pod", "virt-launcher-vm1-abcde", "default", grace_period=0)
    wait_for(lambda: volume(w)["status"].get("state") == "detached", what="detached")


def test_new_volume_waits_for_instance_managers_instead_of_faulting(
        world_factory: Callable[..., World]) -> None:
    """A volume created while the instance managers are still starting (the simulator's own
    start, under load) gets replicas that are stopped, not failed; they start with the
    instance managers and the volume is never ``faulted``."""
    w = world_factory(pod_start_s=200)
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: w.client.try_get("v1", "Pod", longhorn.im_name(n), NS),
                 what=f"instance manager pod on {n}")
    assert not any(im_up(w, n) for n in ("node-0", "node-1", "node-2"))
    w.client.create({"apiVersion": API, "kind": "Volume",
                     "metadata": {"name": "pvc-2", "namespace": NS},
                     "spec": {"numberOfReplicas": 3, "size": str(1024 ** 3)}})

    def reps() -> list[dict[str, Any]]:
        return [r for r in w.client.list(API, "Replica", NS)
                if r["spec"]["volumeName"] == "pvc-2"]
    wait_for(lambda: len(reps()) == 3 and all(r.get("status") for r in reps()),
             what="replicas of pvc-2")
    assert {r["status"]["currentState"] for r in reps()} == {"stopped"}
    assert not any(r["spec"].get("failedAt") for r in reps())
    assert w.client.get(API, "Volume", "pvc-2", NS)["status"]["robustness"] == "unknown"
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n), timeout=15, what=f"instance manager on {n}")
    wait_for(lambda: {r["status"]["currentState"] for r in reps()} == {"running"},
             what="replicas started")
    assert not [e for e in w.timeline.snapshot()
                if e["event"] in ("replica_failed", "volume_degraded")]


def test_node_reboot_degrades_then_rebuilds(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    reboot_node_1_under_an_attached_volume(w)
    failed = [r for r in w.client.list(API, "Replica", NS) if r["spec"].get("failedAt")]
    assert [r["spec"]["nodeID"] for r in failed] == ["node-1"]
    assert failed[0]["status"]["currentState"] == "error"
    time.sleep(0.1)
    assert robustness(w) == "degraded"  # not while the node is down
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}, subresource="status")
    wait_for(lambda: im_up(w, "node-1"), what="instance manager back")
    wait_for(lambda: robustness(w) == "healthy", what="rebuilt")
    ev = [e["event"] for e in w.timeline.snapshot()]
    assert "replica_failed" in ev and "replica_rebuilt" in ev
    reb = next(e for e in w.timeline.snapshot() if e["event"] == "replica_rebuilt")
    fail = next(e for e in w.timeline.snapshot() if e["event"] == "replica_failed")
    assert reb["t"] - fail["t"] >= 20


def test_a_cordoned_node_gets_its_instance_manager_back_only_when_uncordoned(
        world_factory: Callable[..., World]) -> None:
    """longhorn-manager (``instance_manager_controller.go`` ``handlePod``) creates no
    instance manager pod while the Kubernetes node is unschedulable, whether the old one was
    evicted or died in a reboot: a node upgraded while cordoned has its failed replicas
    rebuilt after its uncordon, not while it is still cordoned between its restarts."""
    w = world_factory()
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))
    attach(w)
    wait_for(lambda: robustness(w) == "healthy")
    w.client.patch("v1", "Node", "node-1", {"spec": {"unschedulable": True}})
    # the reboot of the cordoned node: NotReady, its pods Failed, then Ready again
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}, subresource="status")
    w.client.patch("v1", "Pod", longhorn.im_name("node-1"), {"status": {"phase": "Failed"}},
                   NS, subresource="status")
    wait_for(lambda: robustness(w) == "degraded", what="degraded")
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}, subresource="status")
    wait_for(lambda: w.client.try_get("v1", "Pod", longhorn.im_name("node-1"), NS) is None,
             what="the dead instance manager pod deleted")
    time.sleep(0.3)                  # 30 simulated seconds, more than a rebuild's 20
    assert w.client.try_get("v1", "Pod", longhorn.im_name("node-1"), NS) is None
    assert robustness(w) == "degraded"
    assert not [e for e in w.timeline.snapshot() if e["event"] == "replica_rebuild_started"]
    w.client.patch("v1", "Node", "node-1", {"spec": {"unschedulable": None}})
    wait_for(lambda: im_up(w, "node-1"), what="instance manager back after the uncordon")
    wait_for(lambda: robustness(w) == "healthy", what="rebuilt")
    assert [e["node"] for e in w.timeline.snapshot() if e["event"] == "replica_failed"] == [
        "node-1"]


def test_detached_volume_keeps_its_replicas_through_a_reboot(
        world_factory: Callable[..., World]) -> None:
    """A detached volume's replicas run no process: a reboot of their node does not fail
    them (the data stays on the disk); attaching while the node is down does."""
    w = world_factory()
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))

    def reboot_down(node: str) -> None:
        w.client.patch("v1", "Node", node, {"status": {"conditions": [
            {"type": "Ready", "status": "False"}]}}, subresource="status")
        w.client.patch("v1", "Pod", longhorn.im_name(node), {"status": {"phase": "Failed"}},
                       NS, subresource="status")

    reboot_down("node-1")
    wait_for(lambda: not im_up(w, "node-1"), what="instance manager down")
    time.sleep(0.1)
    assert not [r for r in w.client.list(API, "Replica", NS) if r["spec"].get("failedAt")]
    assert robustness(w) == "unknown"
    attach(w)
    wait_for(lambda: robustness(w) == "degraded", what="degraded once attached")
    failed = [r["spec"]["nodeID"] for r in w.client.list(API, "Replica", NS)
              if r["spec"].get("failedAt")]
    assert failed == ["node-1"]
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}, subresource="status")
    wait_for(lambda: robustness(w) == "healthy", what="rebuilt")


def test_attaching_waits_for_a_starting_instance_manager(
        world_factory: Callable[..., World]) -> None:
    """A volume attaching while a Ready node's instance manager is starting (recreated after
    the node's reboot, not running yet) keeps that node's replica: longhorn-manager
    (``openVolumeDependentResources``, ``canInstanceManagerLaunchReplica``) fails a replica
    only when its node is down or deleted or its instance manager stopped; a starting one
    launches it. (A single node's reboot: the repo Deployment's new pod may mount its volume
    before the instance manager runs again.)"""
    w = world_factory()
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))
    w.timings.pod_start_s = 1e6       # the recreated instance manager stays starting
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}, subresource="status")
    old = w.client.patch("v1", "Pod", longhorn.im_name("node-1"),
                         {"status": {"phase": "Failed"}}, NS, subresource="status")
    wait_for(lambda: not im_up(w, "node-1"), what="instance manager down")
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}, subresource="status")

    def starting() -> bool:
        p = w.client.try_get("v1", "Pod", longhorn.im_name("node-1"), NS)
        return bool(p) and p["metadata"]["uid"] != old["metadata"]["uid"]
    wait_for(starting, what="instance manager recreated")
    assert not im_up(w, "node-1")
    attach(w, "node-1")
    wait_for(lambda: (volume(w).get("status") or {}).get("state") == "attached",
             what="attached")
    assert not [r for r in w.client.list(API, "Replica", NS) if r["spec"].get("failedAt")]
    assert robustness(w) == "healthy"
    w.client.patch("v1", "Pod", longhorn.im_name("node-1"), {"status": {"phase": "Running"}},
                   NS, subresource="status")
    wait_for(lambda: im_up(w, "node-1"), what="instance manager running")
    assert robustness(w) == "healthy"
    assert not [e for e in w.timeline.snapshot() if e["event"] == "replica_failed"]


def _pdb_nodes(w: World) -> set[str]:
    return {p["spec"]["selector"]["matchLabels"]["longhorn.io/node"]
            for p in w.client.list("policy/v1", "PodDisruptionBudget", NS)}


def _cordon(w: World, node: str, on: bool = True) -> None:
    w.client.patch("v1", "Node", node, {"spec": {"unschedulable": True if on else None}})


@pytest.mark.parametrize("policy", ["block-if-contains-last-replica",
                                    "allow-if-replica-is-stopped"])
def test_instance_manager_pdb_follows_longhorn(world_factory: Callable[..., World],
                                               policy: str) -> None:
    """longhorn-manager v1.9.1 ``syncInstanceManagerPDB`` / ``canDeleteInstanceManagerPDB``:
    every running instance manager of a schedulable node has a PDB; a cordoned node's goes
    only once no volume is attached there and each of its replicas that counts has a
    healthy replica on another schedulable, PDB-protected node."""
    w = world_factory()
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))
    wait_for(lambda: _pdb_nodes(w) == {"node-0", "node-1", "node-2"}, what="a PDB per node")
    w.client.patch(API, "Setting", "node-drain-policy", {"value": policy}, NS)
    attach(w, "node-0")
    wait_for(lambda: robustness(w) == "healthy")
    # the volume is attached to node-0: its PDB stays however safe the replicas are
    _cordon(w, "node-0")
    time.sleep(0.1)
    assert "node-0" in _pdb_nodes(w)
    with pytest.raises(ApiError) as ei:
        w.client.evict(longhorn.im_name("node-0"), NS)
    assert ei.value.code == 429
    # the VM moved away: the volume attaches on node-1, node-0's PDB goes
    w.client.delete("v1", "Pod", "virt-launcher-vm1-abcde", "default", grace_period=0)
    attach(w, "node-1")
    wait_for(lambda: "node-0" not in _pdb_nodes(w), what="node-0's PDB deleted")
    _cordon(w, "node-0", False)
    wait_for(lambda: "node-0" in _pdb_nodes(w), what="node-0's PDB back")
    # node-2 holds the last healthy replica: its PDB stays once it is cordoned
    lh = w.controllers["longhorn"]
    w.runtime.run_sync(lambda: lh.degrade("pvc-1", replicas=2, nodes=["node-0", "node-1"]))
    wait_for(lambda: robustness(w) == "degraded")
    _cordon(w, "node-2")
    time.sleep(0.1)
    assert "node-2" in _pdb_nodes(w)
    assert "has no pdb on another node" in str(
        w.runtime.run_sync(lambda: lh.can_delete_pdb("node-2", policy)))
    # detached, its replicas are stopped: only block-if-contains-last-replica still holds
    w.client.delete("v1", "Pod", "virt-launcher-vm1-abcde", "default", grace_period=0)
    wait_for(lambda: (volume(w).get("status") or {}).get("state") == "detached",
             what="detached")
    if policy == "allow-if-replica-is-stopped":
        wait_for(lambda: "node-2" not in _pdb_nodes(w), what="node-2's PDB deleted")
    else:
        time.sleep(0.1)
        assert "node-2" in _pdb_nodes(w)


def test_volume_degraded_fault_heals(world_factory: Callable[..., World]) -> None:
    w = world_factory(faults=[{"kind": "volume_degraded", "target": {"volume": "pvc-1"},
                               "times": 1, "heal_after_s": 30}])
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))
    attach(w)
    wait_for(lambda: robustness(w) == "degraded", what="fault degraded the volume")
    wait_for(lambda: robustness(w) == "healthy", what="healed")
    assert any(e["event"] == "volume_degraded" for e in w.timeline.snapshot())


def test_initially_failed_replica_is_reused_once_attached(
        world_factory: Callable[..., World]) -> None:
    """A replica that is failed when the simulation starts, on a node whose instance manager
    runs, is reused by Longhorn (CheckAndReuseFailedReplica) as soon as the volume is
    attached and degraded: rebuilt in place, not replaced elsewhere."""
    w = world_factory(nodes=4, failed_replica_on="node-1")
    for n in ("node-0", "node-1", "node-2", "node-3"):
        wait_for(lambda n=n: im_up(w, n))
    time.sleep(0.1)
    assert robustness(w) == "unknown"   # detached: nothing is rebuilt
    assert w.client.get(API, "Replica", "pvc-1-r-1", NS)["spec"]["failedAt"]
    attach(w, "node-0")
    wait_for(lambda: robustness(w) == "healthy", what="rebuilt")
    ev = [e for e in w.timeline.snapshot() if e["event"] == "replica_rebuilt"]
    assert [(e["replica"], e["node"]) for e in ev] == [("pvc-1-r-1", "node-1")]
    assert not [e for e in w.timeline.snapshot() if e["event"] == "replica_replenished"]
    r = w.client.get(API, "Replica", "pvc-1-r-1", NS)
    assert r["spec"]["failedAt"] == "" and r["status"]["currentState"] == "running"
    assert {x["spec"]["nodeID"] for x in w.client.list(API, "Replica", NS)} == {
        "node-0", "node-1", "node-2"}


def test_fault_held_replica_is_replaced_after_the_interval(
        world_factory: Callable[..., World]) -> None:
    """The volume_degraded fault keeps its replica unusable (as a disk that is not Ready):
    Longhorn does not rebuild it, and replaces it on the spare node once
    replica-replenishment-wait-interval has passed since the volume became degraded."""
    w = world_factory(nodes=4)
    for n in ("node-0", "node-1", "node-2", "node-3"):
        wait_for(lambda n=n: im_up(w, n))
    w.client.patch(API, "Setting", "replica-replenishment-wait-interval", {"value": "60"}, NS)
    attach(w, "node-0")
    wait_for(lambda: robustness(w) == "healthy")
    before = _replicas_by_node(w)
    spare = next(n for n in ("node-0", "node-1", "node-2", "node-3") if n not in before)
    lh = w.controllers["longhorn"]
    victims = w.runtime.run_sync(lambda: lh.degrade("pvc-1", 1))
    t0 = w.clock.now()
    wait_for(lambda: robustness(w) == "degraded", what="degraded")
    ev = wait_for(lambda: [e for e in w.timeline.snapshot()
                           if e["event"] == "replica_replenished"], what="replenished")
    assert ev[0]["node"] == spare and ev[0]["waited_s"] >= 60
    assert w.clock.now() - t0 >= 60
    wait_for(lambda: robustness(w) == "healthy", what="healthy on the spare node")
    assert not [e for e in w.timeline.snapshot()
                if e["event"] == "replica_rebuilt" and e["replica"] in victims]
    assert w.client.get(API, "Replica", victims[0], NS)["spec"]["failedAt"]


def scheduled(w: World) -> dict[str, Any]:
    return next(c for c in (volume(w).get("status") or {}).get("conditions") or []
                if c.get("type") == "Scheduled")


def test_no_node_for_a_new_replica_is_condition_scheduled_false(
        world_factory: Callable[..., World]) -> None:
    """Three nodes, three replicas, one held by the volume_degraded fault: once
    replica-replenishment-wait-interval has passed Longhorn wants a new replica and finds no
    node without one (precheckCreateReplica): condition ``Scheduled=False``, reason
    ``ReplicaSchedulingFailure``. The fault heals, the replica is reused: ``True`` again."""
    w = world_factory()
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))
    w.client.patch(API, "Setting", "replica-replenishment-wait-interval", {"value": "30"}, NS)
    attach(w)
    wait_for(lambda: robustness(w) == "healthy")
    assert scheduled(w)["status"] == "True"
    lh = w.controllers["longhorn"]
    w.runtime.run_sync(lambda: lh.degrade("pvc-1", 1, 90))
    wait_for(lambda: robustness(w) == "degraded", what="degraded")
    assert scheduled(w)["status"] == "True"   # within the interval: waits for the replica
    wait_for(lambda: scheduled(w)["status"] == "False", what="Scheduled=False")
    assert scheduled(w)["reason"] == "ReplicaSchedulingFailure"
    assert robustness(w) == "degraded"
    wait_for(lambda: robustness(w) == "healthy", what="healed")
    assert scheduled(w)["status"] == "True"
    assert not [e for e in w.timeline.snapshot() if e["event"] == "replica_replenished"]


def test_healed_fault_replicas_are_reused_one_at_a_time(
        world_factory: Callable[..., World]) -> None:
    """replenishReplicas rebuilds one replica at a time: when a fault on two replicas heals,
    the second is reused only after the first has rebuilt (replica_rebuild_s = 20)."""
    w = world_factory()
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))
    attach(w)
    wait_for(lambda: robustness(w) == "healthy")
    lh = w.controllers["longhorn"]
    victims = w.runtime.run_sync(lambda: lh.degrade("pvc-1", 2, 30))
    assert len(victims) == 2
    wait_for(lambda: robustness(w) == "healthy", what="healed")
    ev = [e for e in w.timeline.snapshot() if e["event"] == "replica_rebuilt"]
    assert sorted(e["replica"] for e in ev) == sorted(victims)
    assert ev[1]["t"] - ev[0]["t"] >= 20


def _node_down(w: World, node: str) -> None:
    w.client.patch("v1", "Node", node, {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}, subresource="status")
    w.client.patch("v1", "Pod", longhorn.im_name(node), {"status": {"phase": "Failed"}},
                   NS, subresource="status")


def _replicas_by_node(w: World) -> dict[str, bool]:
    """node -> healthy, for pvc-1's replicas."""
    return {r["spec"]["nodeID"]: (r.get("status") or {}).get("currentState") == "running"
            and not r["spec"].get("failedAt") for r in w.client.list(API, "Replica", NS)}


@pytest.mark.parametrize("interval", ["30", "1800"])
def test_replica_replenishment_waits_the_interval_for_a_down_node(
        world_factory: Callable[..., World], interval: str) -> None:
    """Longhorn's replica-replenishment-wait-interval (longhorn-manager RequireNewReplica):
    a degraded volume waits that long for its failed replica's node before it rebuilds a new
    replica on another node; the upgrade raises it to 1800 s so a rebooting node's replicas
    are reused instead of copied elsewhere."""
    w = world_factory(nodes=4)
    for n in ("node-0", "node-1", "node-2", "node-3"):
        wait_for(lambda n=n: im_up(w, n))
    w.client.patch(API, "Setting", "replica-replenishment-wait-interval", {"value": interval},
                   NS)
    attach(w, "node-0")
    wait_for(lambda: robustness(w) == "healthy")
    before = _replicas_by_node(w)
    assert len(before) == 3
    down = next(n for n in sorted(before) if n != "node-0")
    spare = next(n for n in ("node-0", "node-1", "node-2", "node-3") if n not in before)
    t0 = w.clock.now()
    _node_down(w, down)
    wait_for(lambda: robustness(w) == "degraded", what="degraded")
    if interval == "30":
        ev = wait_for(lambda: [e for e in w.timeline.snapshot()
                               if e["event"] == "replica_replenished"], what="replenished")
        assert ev[0]["node"] == spare and ev[0]["waited_s"] >= 30
        wait_for(lambda: robustness(w) == "healthy", what="healthy without the down node")
        assert _replicas_by_node(w)[spare] is True
    else:
        # far past 30 s of simulated time and still waiting for the down node's replica
        wait_for(lambda: w.clock.now() - t0 > 120, what="120 simulated seconds")
        assert not [e for e in w.timeline.snapshot() if e["event"] == "replica_replenished"]
        assert spare not in _replicas_by_node(w)
        assert robustness(w) == "degraded"
    w.client.patch("v1", "Node", down, {"status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}, subresource="status")
    wait_for(lambda: im_up(w, down), what="instance manager back")
    wait_for(lambda: robustness(w) == "healthy", what="healthy")
    if interval == "30":
        # the volume has its replicas: the down node's failed one is not rebuilt
        wait_for(lambda: w.clock.now() - t0 > 400, what="time for a rebuild")
        assert _replicas_by_node(w)[down] is False
    else:
        assert _replicas_by_node(w) == {n: True for n in before}


def _add_attached_volume(w: World, i: int, node: str = "node-0") -> str:
    """Volume ``pvc-<i>`` (three replicas), its claim and a running pod on ``node`` that
    mounts it."""
    name = f"pvc-{i}"
    w.client.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": f"disk-{i}", "namespace": "default"},
                     "spec": {"accessModes": ["ReadWriteMany"], "volumeName": name,
                              "resources": {"requests": {"storage": "1Gi"}}}})
    w.client.create({"apiVersion": API, "kind": "Volume",
                     "metadata": {"name": name, "namespace": NS},
                     "spec": {"numberOfReplicas": 3, "size": str(1024 ** 3)}})
    w.client.create({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"virt-launcher-vm{i}-abcde", "namespace": "default"},
                     "spec": {"nodeName": node, "containers": [{"name": "compute",
                                                                "image": "x"}],
                              "volumes": [{"name": "disk", "persistentVolumeClaim":
                                           {"claimName": f"disk-{i}"}}]},
                     "status": {"phase": "Running"}})
    return name


@pytest.mark.parametrize("limit", ["2", "0"])
def test_rebuilds_on_a_node_wait_for_its_concurrent_rebuild_limit(
        world_factory: Callable[..., World], limit: str) -> None:
    """longhorn-manager v1.9.1 ``CanStartRebuildingReplica``: a reused replica's instance (and
    its rebuild) starts only while its node runs fewer rebuilds than
    ``concurrent-replica-rebuild-per-node-limit``; the others wait with ``failedAt`` and
    ``healthyAt`` already cleared, ``stopped``, unknown to the engine. ``replenishReplicas``
    rebuilds nothing at all with the limit 0."""
    w = world_factory()
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))
    wait_for(lambda: w.client.try_get(API, "Setting",
                                      "concurrent-replica-rebuild-per-node-limit", NS),
             what="the limit's Setting")
    w.client.patch(API, "Setting", "concurrent-replica-rebuild-per-node-limit",
                   {"value": limit}, NS)
    attach(w)
    vols = ["pvc-1"] + [_add_attached_volume(w, i) for i in range(2, 6)]

    def healthy() -> bool:
        return all((w.client.get(API, "Volume", v, NS).get("status") or {})
                   .get("robustness") == "healthy" for v in vols)
    wait_for(healthy, what="five healthy volumes")
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}, subresource="status")
    w.client.patch("v1", "Pod", longhorn.im_name("node-1"), {"status": {"phase": "Failed"}},
                   NS, subresource="status")

    def on_node_1() -> list[dict[str, Any]]:
        return [r for r in w.client.list(API, "Replica", NS)
                if r["spec"]["nodeID"] == "node-1"]
    wait_for(lambda: all(r["spec"].get("failedAt") for r in on_node_1()), what="failed")
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}, subresource="status")
    wait_for(lambda: im_up(w, "node-1"), what="instance manager back")
    if limit == "0":
        t0 = w.clock.now()
        wait_for(lambda: w.clock.now() - t0 > 100, what="five rebuild times")
        assert all(r["spec"].get("failedAt") for r in on_node_1())
        assert not [e for e in w.timeline.snapshot() if e["event"] == "replica_rebuild_started"]
        return

    def waiting() -> list[dict[str, Any]]:
        return [r for r in on_node_1() if r["status"].get("currentState") == "stopped"]
    wait_for(lambda: len(waiting()) == 3, what="three replicas waiting for a slot")
    rebuilding = [r for r in on_node_1() if r["status"].get("currentState") == "running"]
    assert len(rebuilding) == 2
    for r in waiting() + rebuilding:   # reused: failedAt and healthyAt cleared
        assert r["spec"]["failedAt"] == "" and r["spec"]["healthyAt"] == ""
        assert r["spec"]["desireState"] == "running"
        assert r["spec"]["rebuildRetryCount"] == 1   # reused once since it was last RW
    one = waiting()[0]
    modes = w.client.get(API, "Engine", f"{one['spec']['volumeName']}-e-0", NS)["status"][
        "replicaModeMap"]
    assert one["metadata"]["name"] not in modes
    assert {modes[r["metadata"]["name"]] for r in rebuilding
            if r["spec"]["volumeName"] == one["spec"]["volumeName"]} <= {"WO"}
    wait_for(healthy, timeout=20, what="every volume rebuilt")
    assert all(r["spec"]["healthyAt"] and not r["spec"]["failedAt"]
               and r["spec"]["rebuildRetryCount"] == 0 for r in on_node_1())
    # never more than two at once on the node, and the ones that waited say how long
    events = sorted((e["t"], e["event"] == "replica_rebuild_started", e)
                    for e in w.timeline.snapshot()
                    if e["event"] in ("replica_rebuild_started", "replica_rebuilt")
                    and e.get("node") == "node-1")
    busy = peak = 0
    for _t, started, _e in events:
        busy += 1 if started else -1
        peak = max(peak, busy)
    assert peak == 2
    waits = sorted(e["waited_s"] for _t, started, e in events if started)
    assert waits[:2] == [0.0, 0.0] and waits[2] >= 19


def test_detaching_fails_a_replica_being_rebuilt_and_frees_its_slot(
        world_factory: Callable[..., World]) -> None:
    """longhorn-manager v1.9.1 ``closeVolumeDependentResources``: a volume detached while a
    replica is rebuilt (no ``healthyAt``, no ``failedAt``) marks that replica failed; its
    node's rebuild slot frees, and attached again the volume reuses it."""
    w = world_factory()
    for n in ("node-0", "node-1", "node-2"):
        wait_for(lambda n=n: im_up(w, n))
    attach(w)
    wait_for(lambda: robustness(w) == "healthy")
    w.timings.replica_rebuild_s = 1e6          # the rebuild does not end by itself
    w.client.patch("v1", "Pod", longhorn.im_name("node-1"), {"status": {"phase": "Failed"}},
                   NS, subresource="status")
    wait_for(lambda: robustness(w) == "degraded", what="degraded")
    lh = w.controllers["longhorn"]
    wait_for(lambda: w.runtime.run_sync(lambda: len(lh.rebuilding_on.get("node-1", ()))) == 1,
             what="the rebuild on node-1")
    rep = next(r for r in w.client.list(API, "Replica", NS) if r["spec"]["nodeID"] == "node-1")
    assert rep["spec"]["healthyAt"] == "" and rep["spec"]["failedAt"] == ""
    w.client.delete("v1", "Pod", "virt-launcher-vm1-abcde", "default", grace_period=0)
    wait_for(lambda: volume(w)["status"].get("state") == "detached", what="detached")
    name = rep["metadata"]["name"]
    wait_for(lambda: w.client.get(API, "Replica", name, NS)["spec"].get("failedAt"),
             what="the rebuilding replica failed")
    assert w.runtime.run_sync(lambda: set(lh.rebuilding_on.get("node-1", ()))) == set()
    fails = [e for e in w.timeline.snapshot() if e["event"] == "replica_failed"]
    assert fails[-1]["reason"] == "volume detached while rebuilding"
    w.timings.replica_rebuild_s = 20
    attach(w)
    wait_for(lambda: robustness(w) == "healthy", what="rebuilt after the new attachment")
    assert w.client.get(API, "Replica", name, NS)["spec"]["healthyAt"]


def test_attaching_reuses_a_failed_replica_without_waiting_for_an_earlier_wait(
        world_factory: Callable[..., World]) -> None:
    """A replica that failed while its node was down schedules the replenishment wait
    (``replica-replenishment-wait-interval``); the node came back and the replica was being
    rebuilt when the volume detached, which failed it again. Attached once more, the volume
    controller reuses it at once, not when that earlier wait is due."""
    w = world_factory()
    reboot_node_1_under_an_attached_volume(w)
    w.timings.replica_rebuild_s = 1e6
    w.client.patch("v1", "Node", "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}, subresource="status")
    started = lambda: [e for e in w.timeline.snapshot()  # noqa: E731
                       if e["event"] == "replica_rebuild_started"]
    wait_for(lambda: len(started()) == 1, what="the rebuild on node-1")
    w.client.delete("v1", "Pod", "virt-launcher-vm1-abcde", "default", grace_period=0)
    wait_for(lambda: volume(w)["status"].get("state") == "detached", what="detached")
    w.timings.replica_rebuild_s = 20
    t0 = w.clock.now()
    attach(w)
    wait_for(lambda: robustness(w) == "healthy", what="rebuilt")
    assert w.clock.now() - t0 < 300, "reused only when the 600 s wait was due"
