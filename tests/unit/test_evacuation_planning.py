"""Placement planning for VM evacuation: non-migratable detection, target-aware vs naive
migration counts over a whole rolling upgrade."""

from __future__ import annotations

import random
from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path

ev = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.evacuation")

GI = 1024 ** 3


def node(name: str, *, cpu: str = "16", mem: str = "64Gi", labels: dict[str, str] | None = None,
         taints: list[dict[str, Any]] | None = None, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": cpu, "memory": mem},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def vmi(name: str, on: str, *, mem: str = "4Gi", cpu: str = "1", ns: str = "default",
        **spec: Any) -> dict[str, Any]:
    conditions = spec.pop("conditions", [])
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"domain": {"resources": {"requests": {"memory": mem, "cpu": cpu}},
                            "devices": spec.pop("devices", {})}, **spec},
        "status": {"nodeName": on, "phase": "Running", "conditions": conditions},
    }


def views(nodes: list[dict[str, Any]], upgraded: set[str] | None = None
          ) -> list[Any]:
    return [ev.node_view(n, [], upgraded=n["metadata"]["name"] in (upgraded or set()), order=i)
            for i, n in enumerate(nodes)]


def test_quantities() -> None:
    assert ev.cpu_millis("500m") == 500
    assert ev.cpu_millis("2") == 2000
    assert ev.mem_bytes("4Gi") == 4 * GI
    assert ev.mem_bytes("1G") == 10 ** 9
    assert ev.mem_bytes(1024) == 1024
    with pytest.raises(ValueError):
        ev.parse_quantity("4 bananas")


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, None),
    ({"devices": {"hostDevices": [{"name": "nic", "deviceName": "intel.com/X710"}]}},
     "HostDeviceNotLiveMigratable"),
    ({"devices": {"gpus": [{"name": "gpu1", "deviceName": "nvidia.com/A2"}]}},
     "GPUNotLiveMigratable"),
    ({"nodeSelector": {"kubernetes.io/hostname": "n1"}}, "NodeSelectorPinned"),
    ({"nodeSelector": {"zone": "a"}}, None),            # n2 is also in zone a
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}},
     "NodeAffinityPinned"),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n1"]}]}]}}}},
     None),
    ({"conditions": [{"type": "LiveMigratable", "status": "False",
                      "reason": "DisksNotLiveMigratable",
                      "message": "cannot migrate VMI: PVC disk0 is not shared"}]},
     "DisksNotLiveMigratable"),
    ({"conditions": [{"type": "Paused", "status": "True"}]}, "Paused"),
])
def test_non_migratable_detection(spec: dict[str, Any], expected: str | None) -> None:
    nodes = views([node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "a"}),
                   node("n3", labels={"zone": "b"})])
    reason = ev.non_migratable_reason(ev.vm_view(vmi("v", "n1", **spec)), nodes)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(expected), reason


def test_witness_and_tainted_nodes_are_no_candidates() -> None:
    nodes = views([
        node("n1"),
        node("w", labels={"node-role.harvesterhci.io/witness": "true"}),
        node("n3", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
    ])
    reason = ev.non_migratable_reason(ev.vm_view(vmi("v", "n1")), nodes)
    assert reason is not None and reason.startswith("NoCandidateNode")
    tol = [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]
    assert ev.non_migratable_reason(ev.vm_view(vmi("v", "n1", tolerations=tol)), nodes) is None


def test_single_node_everything_shuts_down() -> None:
    nodes = views([node("n1")])
    plan = ev.plan_evacuation("n1", [ev.vm_view(vmi("a", "n1")), ev.vm_view(vmi("b", "n1"))],
                              nodes)
    assert [s.vm.name for s in plan.shutdown] == ["a", "b"]
    assert all(s.reason.startswith("SingleNode") for s in plan.shutdown)
    assert not plan.migrate


def test_target_aware_prefers_upgraded_nodes_with_room() -> None:
    nodes = views([node("n1"), node("n2", mem="6Gi"), node("n3")], upgraded={"n2"})
    vms = [ev.vm_view(vmi("big", "n1", mem="4Gi")), ev.vm_view(vmi("small", "n1", mem="1Gi")),
           ev.vm_view(vmi("other", "n1", mem="2Gi"))]
    plan = ev.plan_evacuation("n1", vms, nodes)
    where = {m.vm.name: m.target for m in plan.migrate}
    # 6Gi on upgraded n2: big (4Gi) first, then other (2Gi); small no longer fits -> n3
    assert where == {"big": "n2", "other": "n2", "small": "n3"}
    naive = ev.plan_evacuation("n1", vms, nodes, target_aware=False)
    assert all(m.target is None for m in naive.migrate)


def test_first_node_prefers_the_node_drained_last() -> None:
    nodes = views([node("n1"), node("n2"), node("n3")])
    plan = ev.plan_evacuation("n1", [ev.vm_view(vmi("a", "n1"))], nodes)
    assert plan.migrate[0].target == "n3"


def simulate_roll(n_nodes: int, vms_per_node: int, *, target_aware: bool,
                  mem: str = "2Gi", node_mem: str = "64Gi") -> tuple[int, int]:
    """Roll the cluster node by node. Naive placement = a scheduler that knows nothing about
    the upgrade: any other node with room (a seeded random pick, like a tie-broken score).

    Returns (migrations, lower bound)."""
    names = [f"n{i}" for i in range(1, n_nodes + 1)]
    where: dict[str, str] = {f"vm-{n}-{j}": n for n in names for j in range(vms_per_node)}
    upgraded: set[str] = set()
    rng = random.Random(7)
    moves = 0
    for current in names:
        nodes = [node(n, mem=node_mem) for n in names]
        vmis = [vmi(v, on, mem=mem) for v, on in where.items()]
        pods = [{"spec": {"nodeName": on, "containers": [{"resources": {"requests": {
            "memory": mem, "cpu": "1"}}}]}, "status": {"phase": "Running"}}
            for on in where.values()]
        nv = [ev.node_view(n, pods, upgraded=n["metadata"]["name"] in upgraded, order=i)
              for i, n in enumerate(nodes)]
        plan = ev.plan_evacuation(current, [ev.vm_view(v) for v in vmis], nv,
                                  target_aware=target_aware)
        assert not plan.shutdown
        free = {n.name: n.free_mem for n in nv}
        for m in plan.migrate:
            target = m.target
            if target is None:   # the scheduler: any other node with room
                target = rng.choice(sorted(n for n in free
                                           if n != current and free[n] >= m.vm.mem))
            free[target] -= m.vm.mem
            where[m.vm.name] = target
            moves += 1
        upgraded.add(current)
    counts = {n: vms_per_node for n in names}
    return moves, ev.lower_bound_migrations(names, counts)


@pytest.mark.parametrize("n_nodes", [3, 5])
def test_target_aware_roll_reaches_the_lower_bound_naive_does_not(n_nodes: int) -> None:
    aware, bound = simulate_roll(n_nodes, 4, target_aware=True)
    naive, _lower_bound = simulate_roll(n_nodes, 4, target_aware=False)
    assert aware == bound == 4 * n_nodes + 4
    assert naive > aware


def test_falls_back_to_pending_node_when_upgraded_nodes_are_full() -> None:
    nodes = views([node("n1", mem="8Gi"), node("n2", mem="8Gi"), node("n3", mem="8Gi")],
                  upgraded={"n1"})
    pods = [{"spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {
        "memory": "7Gi"}}}]}, "status": {"phase": "Running"}}]
    nv = [ev.node_view(node(n.name, mem="8Gi"), pods, upgraded=n.upgraded, order=n.order)
          for n in nodes]
    plan = ev.plan_evacuation("n2", [ev.vm_view(vmi("a", "n2", mem="4Gi"))], nv)
    assert plan.migrate[0].target == "n3"
    assert "no upgraded node has room" in plan.migrate[0].why


def test_estimates() -> None:
    v = ev.vm_view(vmi("a", "n1", mem="4Gi"))
    assert ev.estimate_migration_seconds(v, 1024, 5) == pytest.approx(9.0)
    assert ev.estimate_evacuation_seconds([v, v], 1024, 5, concurrency=2) == pytest.approx(13.0)
    assert ev.lower_bound_migrations(["n1"], {"n1": 3}) == 0
