"""The invariant monitor on a deleted Longhorn volume: its replicas going with it is no data
loss (upgrade-toolkit's cleanup deletes its repo PVC, whose volume may have a failed replica
left after the node reboots). The monitor is what is tested, so the CRDs are permissive."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from harvester_sim import invariants
from harvester_sim.api.resources import Registry
from harvester_sim.api.store import Store
from harvester_sim.client import Client
from harvester_sim.clock import Clock
from harvester_sim.timeline import Timeline

LH = "longhorn.io/v1beta2"


def _crd(kind: str, plural: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.longhorn.io"},
            "spec": {"group": "longhorn.io", "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                     "versions": [{"name": "v1beta2", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _world() -> tuple[Any, Client]:
    clock = Clock(1.0)
    store = Store(Registry(), clock)
    c = Client(store, "test")
    world = SimpleNamespace(store=store, clock=clock, timeline=Timeline(clock), extras={},
                            scenario={"invariants": {}}, client=c)
    c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "longhorn-system"}})
    c.create(_crd("Volume", "volumes"))
    c.create(_crd("Replica", "replicas"))
    return world, c


def _replica(c: Client, name: str, running: bool) -> None:
    c.create({"apiVersion": LH, "kind": "Replica",
              "metadata": {"name": name, "namespace": "longhorn-system"},
              "spec": {"volumeName": "vol1", "nodeID": "n1", "failedAt": "",
                       "healthyAt": "2024-12-01T00:00:00Z"},
              "status": {"currentState": "running" if running else "error"}})


def test_replicas_of_a_deleted_volume_are_no_loss() -> None:
    world, c = _world()
    c.create({"apiVersion": LH, "kind": "Volume",
              "metadata": {"name": "vol1", "namespace": "longhorn-system"},
              "spec": {"numberOfReplicas": 2},
              "status": {"robustness": "degraded", "state": "attached"}})
    _replica(c, "r1", True)
    _replica(c, "r2", False)
    mon = invariants.setup(world)
    c.delete(LH, "Volume", "vol1", "longhorn-system")
    c.delete(LH, "Replica", "r1", "longhorn-system")  # the last healthy one, after the volume
    c.delete(LH, "Replica", "r2", "longhorn-system")
    assert list(mon.violations) == []


def test_last_healthy_replica_of_a_live_volume_still_counts() -> None:
    world, c = _world()
    c.create({"apiVersion": LH, "kind": "Volume",
              "metadata": {"name": "vol1", "namespace": "longhorn-system"},
              "spec": {"numberOfReplicas": 2},
              "status": {"robustness": "degraded", "state": "attached"}})
    _replica(c, "r1", True)
    _replica(c, "r2", False)
    mon = invariants.setup(world)
    c.delete(LH, "Replica", "r1", "longhorn-system")
    assert [v["kind"] for v in mon.violations] == ["volume_without_healthy_replica"]
