"""Simulated KubeVirt, through the in-process API client only.

The fixture builds a bare world (CRDs, a namespace, Ready nodes) and sets up the KubeVirt
controller alone: without the kubelet/scheduler modules the controller places and runs its
launcher pods itself, and the tests play the kubelet where it matters (a node reboot).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harvester_sim import crds
from harvester_sim.api.errors import ApiError
from harvester_sim.controllers import kubevirt
from harvester_sim.controllers import podutil as pu
from harvester_sim.testing import wait_for
from harvester_sim.world import World

API = "kubevirt.io/v1"
FAST = {"vm_start_s": 5, "vm_stop_s": 5, "pod_start_s": 1, "migration_overhead_s": 5,
        "migration_bandwidth_mib_s": 1024}


def install_crds(world: World, release: str = "") -> None:
    crds.install(world.client, version=release)


def make_node(world: World, name: str, labels: dict[str, str] | None = None,
              ready: bool = True) -> None:
    world.client.create({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              "harvesterhci.io/managed": "true",
                                              **(labels or {})}},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                   "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "200"}},
    })


@pytest.fixture
def world_factory() -> Iterator[Callable[..., World]]:
    worlds: list[World] = []

    def make(nodes: int = 3, faults: list[dict[str, Any]] | None = None,
             speed: float = 100.0, kubevirt_cfg: dict[str, Any] | None = None,
             node_labels: list[dict[str, str]] | None = None, release: str = "") -> World:
        scenario: dict[str, Any] = {"timings": FAST, "faults": faults or []}
        if kubevirt_cfg:
            scenario["kubevirt"] = kubevirt_cfg
        w = World(scenario, speed=speed, seed=1)
        w.client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "default"}})
        install_crds(w, release)
        for i in range(nodes):
            make_node(w, f"node-{i}", (node_labels or [{}] * nodes)[i])
        w.controllers["kubevirt"] = kubevirt.setup(w)
        w.runtime.start()
        worlds.append(w)
        return w

    yield make
    for w in worlds:
        w.stop()
        assert not w.runtime.errors, w.runtime.errors[0]


def vm_body(name: str, run_strategy: str | None = "Always", eviction: str | None = "LiveMigrate",
            memory: str = "1Gi", extra_spec: dict[str, Any] | None = None,
            claims: list[str] | None = None, **template_spec: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "domain": {"cpu": {"cores": 1}, "memory": {"guest": memory},
                   "resources": {"requests": {"memory": memory}},
                   "devices": {"interfaces": [{"name": "default", "masquerade": {}}],
                               "disks": [{"name": "rootdisk", "disk": {"bus": "virtio"}}]}},
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}}
                    for c in claims or []],
    }
    if eviction:
        spec["evictionStrategy"] = eviction
    spec.update(template_spec)
    body: dict[str, Any] = {
        "apiVersion": API, "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"metadata": {"labels": {"harvesterhci.io/vmName": name}},
                              "spec": spec}},
    }
    if run_strategy:
        body["spec"]["runStrategy"] = run_strategy
    body["spec"].update(extra_spec or {})
    return body


def pvc(world: World, name: str, mode: str = "ReadWriteMany") -> None:
    world.client.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "metadata": {"name": name, "namespace": "default"},
                         "spec": {"accessModes": [mode], "volumeMode": "Block",
                                  "storageClassName": "longhorn",
                                  "resources": {"requests": {"storage": "10Gi"}}}})


def vmi(world: World, name: str) -> dict[str, Any] | None:
    return world.client.try_get(API, "VirtualMachineInstance", name, "default")


def running(world: World, name: str) -> dict[str, Any] | None:
    v = vmi(world, name)
    if v and (v.get("status") or {}).get("phase") == "Running":
        return v
    return None


def launcher_pods(world: World, name: str) -> list[dict[str, Any]]:
    return world.client.list("v1", "Pod", "default",
                             label_selector={"vm.kubevirt.io/name": name})


def cond(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    c = pu.get_condition(obj, type_)
    assert c is not None, f"no {type_} condition"
    return c


def events(world: World, kind: str) -> list[dict[str, Any]]:
    return [e for e in world.timeline.snapshot() if e["event"] == kind]


def wait_running(world: World, name: str) -> dict[str, Any]:
    return wait_for(lambda: running(world, name), what=f"VMI {name} Running")  # type: ignore


# --------------------------------------------------------------------------- lifecycle
def test_vm_start_and_stop(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    c = w.client
    c.create(vm_body("vm1"))
    v = wait_running(w, "vm1")
    st = v["status"]
    assert st["nodeName"].startswith("node-")
    assert v["metadata"]["labels"]["kubevirt.io/nodeName"] == st["nodeName"]
    assert [p["phase"] for p in st["phaseTransitionTimestamps"]] == \
        ["Pending", "Scheduling", "Scheduled", "Running"]
    assert cond(v, "Ready")["status"] == "True"
    pods = launcher_pods(w, "vm1")
    assert len(pods) == 1
    pod = pods[0]
    assert pod["metadata"]["name"].startswith("virt-launcher-vm1-")
    assert pod["metadata"]["labels"]["kubevirt.io"] == "virt-launcher"
    assert pod["metadata"]["labels"]["kubevirt.io/created-by"] == v["metadata"]["uid"]
    assert pod["spec"]["nodeName"] == st["nodeName"]
    assert pod["spec"]["containers"][0]["resources"]["requests"]["memory"] == "1280Mi"
    vm = wait_for(lambda: (lambda o: o if (o.get("status") or {}).get("printableStatus")
                           == "Running" else None)(c.get(API, "VirtualMachine", "vm1",
                                                         "default")), what="VM Running")
    assert vm["status"]["ready"] is True
    assert events(w, "vm_started")[0]["vm"] == "default/vm1"

    c.patch(API, "VirtualMachine", "vm1", {"spec": {"runStrategy": "Halted"}}, "default")
    wait_for(lambda: c.get(API, "VirtualMachine", "vm1", "default")["status"]
             ["printableStatus"] == "Stopping", what="Stopping")
    wait_for(lambda: vmi(w, "vm1") is None, what="VMI deleted")
    wait_for(lambda: not launcher_pods(w, "vm1"), what="launcher pod gone")
    wait_for(lambda: c.get(API, "VirtualMachine", "vm1", "default")["status"]
             ["printableStatus"] == "Stopped", what="Stopped")
    assert events(w, "vm_stopped")[0]["node"] == st["nodeName"]
    assert not events(w, "vm_killed")


def test_legacy_running_field_and_manual(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    w.client.create(vm_body("legacy", run_strategy=None, extra_spec={"running": True}))
    w.client.create(vm_body("manual", run_strategy="Manual"))
    wait_running(w, "legacy")
    time.sleep(0.2)
    assert vmi(w, "manual") is None
    w.client.patch(API, "VirtualMachine", "manual",
                   {"status": {"stateChangeRequests": [{"action": "Start"}]}}, "default",
                   subresource="status")
    wait_running(w, "manual")


# --------------------------------------------------------------------------- migratability
def test_live_migratable_reasons(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    pvc(w, "rwx-disk")
    pvc(w, "rwo-disk", "ReadWriteOnce")
    c = w.client
    c.create(vm_body("ok", claims=["rwx-disk"]))
    c.create(vm_body("rwo", claims=["rwo-disk"]))
    c.create(vm_body("missing", claims=["nope"]))
    gpu = vm_body("gpu")
    gpu["spec"]["template"]["spec"]["domain"]["devices"]["hostDevices"] = [
        {"name": "gpu0", "deviceName": "nvidia.com/GA104GL_RTX_A4000"}]
    c.create(gpu)
    bridge = vm_body("bridge")
    bridge["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"] = [
        {"name": "default", "bridge": {}}]
    c.create(bridge)
    cdrom = vm_body("cdrom", volumes=[{"name": "cd", "containerDisk": {"image": "x/iso"}}])
    cdrom["spec"]["template"]["spec"]["domain"]["devices"]["disks"].append(
        {"name": "cd", "cdrom": {"bus": "sata"}})
    c.create(cdrom)
    expect = {
        "ok": ("True", None, None),
        "rwo": ("False", "DisksNotLiveMigratable", "PVC rwo-disk is not shared"),
        "missing": ("False", "DisksNotLiveMigratable", "Unable to determine if PVC nope"),
        "gpu": ("False", "HostDeviceNotLiveMigratable", "VMI uses a PCI host devices"),
        "bridge": ("False", "InterfaceNotLiveMigratable", "does not use masquerade"),
        "cdrom": ("True", None, None),
    }
    for name, (status, reason, msg) in expect.items():
        v = wait_running(w, name)
        lm = cond(v, "LiveMigratable")
        assert lm["status"] == status, name
        assert lm.get("reason") == reason, name
        if msg:
            assert msg in lm["message"], name
    assert running(w, "ok")["status"]["migrationMethod"] == "LiveMigration"  # type: ignore
    # the VM mirrors the VMI's LiveMigratable condition
    wait_for(lambda: any(x.get("type") == "LiveMigratable" for x in
                         c.get(API, "VirtualMachine", "gpu", "default")["status"]["conditions"]))


def test_migration_of_non_migratable_vmi_is_refused(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    gpu = vm_body("gpu")
    gpu["spec"]["template"]["spec"]["domain"]["devices"]["hostDevices"] = [
        {"name": "gpu0", "deviceName": "nvidia.com/GA104GL_RTX_A4000"}]
    w.client.create(gpu)
    wait_running(w, "gpu")
    with pytest.raises(ApiError) as ei:
        w.client.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
                         "metadata": {"name": "m1", "namespace": "default"},
                         "spec": {"vmiName": "gpu"}})
    assert ei.value.code == 400
    assert "Cannot migrate VMI, Reason: HostDeviceNotLiveMigratable" in ei.value.message
    with pytest.raises(ApiError) as ei:
        w.client.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
                         "metadata": {"name": "m2", "namespace": "default"},
                         "spec": {"vmiName": "ghost"}})
    assert 'the VMI "default/ghost" does not exist' in ei.value.message


# --------------------------------------------------------------------------- eviction
def test_eviction_is_refused_and_starts_an_evacuation(world_factory: Callable[..., World]
                                                      ) -> None:
    w = world_factory()
    c = w.client
    c.create(vm_body("vm1", memory="8Gi"))
    source = wait_running(w, "vm1")["status"]["nodeName"]
    pod = launcher_pods(w, "vm1")[0]["metadata"]["name"]
    with pytest.raises(ApiError) as ei:
        c.evict(pod, "default")
    assert ei.value.code == 429
    assert ei.value.message == (
        'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the '
        'request: Eviction triggered evacuation of VMI "default/vm1"')
    assert vmi(w, "vm1")["status"]["evacuationNodeName"] == source  # type: ignore
    # while it is being evacuated, KubeVirt's PDB holds the pod
    with pytest.raises(ApiError) as ei:
        c.evict(pod, "default")
    assert ei.value.code == 429
    assert "disruption budget" in ei.value.message

    def moved() -> dict[str, Any] | None:
        v = running(w, "vm1")
        return v if v and v["status"]["nodeName"] != source else None
    v = wait_for(moved, what="VMI moved")
    assert "evacuationNodeName" not in v["status"]
    ms = v["status"]["migrationState"]
    assert ms["completed"] is True and ms["sourceNode"] == source
    assert v["metadata"]["labels"]["kubevirt.io/nodeName"] == v["status"]["nodeName"]
    migs = c.list(API, "VirtualMachineInstanceMigration", "default")
    assert len(migs) == 1
    m = migs[0]
    assert m["metadata"]["name"].startswith("kubevirt-evacuation-")
    assert m["metadata"]["labels"]["kubevirt.io/vmi-name"] == "vm1"
    assert m["metadata"]["annotations"]["kubevirt.io/evacuationMigration"] == source
    assert [p["phase"] for p in m["status"]["phaseTransitionTimestamps"]] == [
        "Pending", "Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running",
        "Succeeded"]
    wait_for(lambda: [p["spec"]["nodeName"] for p in launcher_pods(w, "vm1")] ==
             [v["status"]["nodeName"]], what="old launcher pod removed")
    kv = w.controllers["kubevirt"]
    assert kv.migrations_per_vm == {"default/vm1": 1}
    assert w.timeline.counters["vm_migrations"] == 1
    started = events(w, "vm_migration_started")[0]
    assert (started["vm"], started["source"], started["target"]) == \
        ("default/vm1", source, v["status"]["nodeName"])
    assert events(w, "vm_migration_succeeded")[0]["target"] == v["status"]["nodeName"]
    assert not events(w, "vm_killed")


def test_eviction_of_non_migratable_and_of_strategy_none(world_factory: Callable[..., World]
                                                         ) -> None:
    w = world_factory()
    c = w.client
    gpu = vm_body("gpu")
    gpu["spec"]["template"]["spec"]["domain"]["devices"]["hostDevices"] = [
        {"name": "gpu0", "deviceName": "nvidia.com/GA104GL_RTX_A4000"}]
    c.create(gpu)
    c.create(vm_body("plain", eviction=None))
    wait_running(w, "gpu")
    wait_running(w, "plain")
    with pytest.raises(ApiError) as ei:
        c.evict(launcher_pods(w, "gpu")[0]["metadata"]["name"], "default")
    assert ei.value.code == 429
    assert ei.value.message.endswith(
        "VMI gpu is configured with an eviction strategy but is not live-migratable")
    old_uid = vmi(w, "plain")["metadata"]["uid"]  # type: ignore
    c.evict(launcher_pods(w, "plain")[0]["metadata"]["name"], "default")
    # evictionStrategy None: the guest is shut down; runStrategy Always starts it again
    wait_for(lambda: (running(w, "plain") or {}).get("metadata", {}).get("uid") not in
             (None, old_uid), what="VM restarted")
    assert events(w, "vm_stopped")[0]["vm"] == "default/plain"
    assert not events(w, "vm_killed")


# --------------------------------------------------------------------------- drain taint
def test_drain_taint_evacuates_with_parallel_limits(world_factory: Callable[..., World]
                                                    ) -> None:
    w = world_factory()
    c = w.client
    for n in ("node-1", "node-2"):
        c.patch("v1", "Node", n, {"spec": {"unschedulable": True}})
    time.sleep(0.05)
    names = [f"vm{i}" for i in range(6)]
    for n in names:
        c.create(vm_body(n, memory="4Gi"))
    # a pinned VM would hold one of node-0's two outbound slots with an unschedulable target
    # (as in KubeVirt): the upgrade shuts such VMs down instead; here it does not migrate
    pinned = vm_body("pinned", eviction=None,
                     nodeSelector={"kubernetes.io/hostname": "node-0"})
    c.create(pinned)
    for n in names + ["pinned"]:
        assert wait_running(w, n)["status"]["nodeName"] == "node-0"
    for n in ("node-1", "node-2"):
        c.patch("v1", "Node", n, {"spec": {"unschedulable": False}})
    c.patch("v1", "Node", "node-0", {"spec": {"unschedulable": True, "taints": [
        {"key": "kubevirt.io/drain", "value": "draining", "effect": "NoSchedule"}]}})

    def all_moved() -> bool:
        return all((running(w, n) or {}).get("status", {}).get("nodeName") not in
                   (None, "node-0") for n in names)
    wait_for(all_moved, timeout=20, what="all VMs off node-0")
    # never more than 2 outbound migrations from one node at a time
    level = peak = 0
    for e in w.timeline.snapshot():
        if e["event"] == "vm_migration_started":
            level += 1
            peak = max(peak, level)
        elif e["event"] in ("vm_migration_succeeded", "vm_migration_failed"):
            level -= 1
    assert peak == 2
    assert sum(w.controllers["kubevirt"].migrations_per_vm.values()) == 6
    migs = c.list(API, "VirtualMachineInstanceMigration", "default")
    assert all(m["metadata"]["name"].startswith("kubevirt-evacuation-") for m in migs)
    assert running(w, "pinned")["status"]["nodeName"] == "node-0"  # type: ignore


def test_pinned_vm_migration_fails_after_unschedulable_timeout(
        world_factory: Callable[..., World]) -> None:
    w = world_factory(kubevirt_cfg={"unschedulablePendingTimeoutSeconds": 30})
    c = w.client
    c.create(vm_body("pinned", nodeSelector={"kubernetes.io/hostname": "node-0"}))
    wait_running(w, "pinned")
    c.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
              "metadata": {"name": "m1", "namespace": "default"},
              "spec": {"vmiName": "pinned"}})
    wait_for(lambda: (c.get(API, "VirtualMachineInstanceMigration", "m1", "default")
                      .get("status") or {}).get("phase") == "Scheduling")
    m = wait_for(lambda: (lambda o: o if (o.get("status") or {}).get("phase") == "Failed"
                          else None)(c.get(API, "VirtualMachineInstanceMigration", "m1",
                                           "default")), what="migration Failed")
    assert "unschedulable" in m["status"]["migrationState"]["failureReason"]
    assert running(w, "pinned")["status"]["nodeName"] == "node-0"  # type: ignore
    wait_for(lambda: len(launcher_pods(w, "pinned")) == 1, what="target pod removed")


def run_kubevirt(world: World, tag: str) -> None:
    """What Harvester's chart installs: Deployment harvester-system/virt-operator at ``tag``
    and the KubeVirt CR; the simulated virt-operator reports the version."""
    c = world.client
    if c.try_get("v1", "Namespace", "harvester-system") is None:
        c.create({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": "harvester-system"}})
    image = f"registry.suse.com/suse/sles/15.7/virt-operator:{tag}"
    dep = c.try_get("apps/v1", "Deployment", "virt-operator", "harvester-system")
    if dep is None:
        labels = {"app.kubernetes.io/name": "virt-operator"}
        c.create({"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "virt-operator", "namespace": "harvester-system"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels},
                                        "spec": {"containers": [{"name": "virt-operator",
                                                                 "image": image}]}}}})
    else:
        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            cur["spec"]["template"]["spec"]["containers"][0]["image"] = image
            return cur
        c.modify("apps/v1", "Deployment", "virt-operator", fn, "harvester-system")
    if c.try_get(API, "KubeVirt", "kubevirt", "harvester-system") is None:
        c.create({"apiVersion": API, "kind": "KubeVirt",
                  "metadata": {"name": "kubevirt", "namespace": "harvester-system"},
                  "spec": {"configuration": {}}})


def observed(world: World) -> str:
    kv = world.client.get(API, "KubeVirt", "kubevirt", "harvester-system")
    return str((kv.get("status") or {}).get("observedKubeVirtVersion") or "")


def directed_migration(w: World) -> tuple[str, dict[str, Any]]:
    """Migrate vm1 with addedNodeSelector naming one node's zone; (that node, target pod)."""
    c = w.client
    c.create(vm_body("vm1"))
    src = wait_running(w, "vm1")["status"]["nodeName"]
    want = "node-3" if src != "node-3" else "node-0"
    zone = "c" if want == "node-3" else "a"
    c.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
              "metadata": {"name": "directed", "namespace": "default"},
              "spec": {"vmiName": "vm1", "addedNodeSelector": {"zone": zone}}})
    m = wait_for(lambda: (lambda o: o if (o.get("status") or {}).get("phase") == "Succeeded"
                          else None)(c.get(API, "VirtualMachineInstanceMigration", "directed",
                                           "default")), what="migration Succeeded")
    target = m["status"]["migrationState"]["targetPod"]
    return want, c.get("v1", "Pod", target, "default")


@pytest.mark.parametrize("tag", ["1.6.3-150700.3.13.1", "v1.6.0"])
def test_added_node_selector_is_honoured_from_kubevirt_1_6(
        world_factory: Callable[..., World], tag: str) -> None:
    # the CRDs of Harvester v1.7.0 (KubeVirt 1.6.3) declare the field; older ones prune it
    w = world_factory(nodes=4, node_labels=[{"zone": "a"}, {"zone": "b"}, {"zone": "b"},
                                            {"zone": "c"}], release="v1.7.0")
    run_kubevirt(w, tag)
    wait_for(lambda: observed(w) == tag, what="KubeVirt CR observed version")
    want, pod = directed_migration(w)
    assert pod["spec"]["nodeName"] == want
    assert "zone" in (pod["spec"].get("nodeSelector") or {})


@pytest.mark.parametrize("tag", ["1.4.0-150600.5.15.1", "1.5.2-150700.3.5.2"])
def test_added_node_selector_is_ignored_before_kubevirt_1_6(
        world_factory: Callable[..., World], tag: str) -> None:
    """virt-controller before v1.6.0 has no such field: the target pod is built from the VMI
    alone (kubevirt pkg/virt-controller/watch/migration/migration.go at v1.5.2). The v1.7.0
    CRDs keep the field, so this is the controller's own version gate, not pruning."""
    w = world_factory(nodes=4, node_labels=[{"zone": "a"}, {"zone": "b"}, {"zone": "b"},
                                            {"zone": "c"}], release="v1.7.0")
    run_kubevirt(w, tag)
    wait_for(lambda: observed(w) == tag, what="KubeVirt CR observed version")
    _, pod = directed_migration(w)
    assert "zone" not in (pod["spec"].get("nodeSelector") or {})


def test_kubevirt_version_follows_the_operator_upgrade(
        world_factory: Callable[..., World]) -> None:
    w = world_factory(nodes=2)
    kv = w.controllers["kubevirt"]
    run_kubevirt(w, "1.5.2-150700.3.5.2")
    wait_for(lambda: observed(w) == "1.5.2-150700.3.5.2", what="installed version")
    assert kv.kubevirt_version() == (1, 5, 2) and not kv.honours_added_node_selector()
    cr = w.client.get(API, "KubeVirt", "kubevirt", "harvester-system")
    assert cr["status"]["phase"] == "Deployed"
    run_kubevirt(w, "1.6.3-150700.3.13.1")     # the chart rolls virt-operator
    st = wait_for(lambda: (lambda s: s if s.get("phase") == "Deploying" else None)(
        w.client.get(API, "KubeVirt", "kubevirt", "harvester-system").get("status") or {}),
        what="Deploying")
    assert st["targetKubeVirtVersion"] == "1.6.3-150700.3.13.1"
    assert st["observedKubeVirtVersion"] == "1.5.2-150700.3.5.2"
    assert not kv.honours_added_node_selector()    # still the old virt-controller
    wait_for(lambda: observed(w) == "1.6.3-150700.3.13.1", what="upgraded version")
    st = w.client.get(API, "KubeVirt", "kubevirt", "harvester-system")["status"]
    assert st["phase"] == "Deployed"
    assert kv.honours_added_node_selector()


# --------------------------------------------------------------------------- faults
def test_migration_fail_fault(world_factory: Callable[..., World]) -> None:
    w = world_factory(faults=[{"kind": "migration_fail", "target": {"vm": "default/vm1"},
                               "times": 1}])
    c = w.client
    c.create(vm_body("vm1"))
    src = wait_running(w, "vm1")["status"]["nodeName"]
    c.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
              "metadata": {"name": "m1", "namespace": "default"}, "spec": {"vmiName": "vm1"}})
    m = wait_for(lambda: (lambda o: o if (o.get("status") or {}).get("phase") == "Failed"
                          else None)(c.get(API, "VirtualMachineInstanceMigration", "m1",
                                           "default")), what="migration Failed")
    assert m["status"]["migrationState"]["failed"] is True
    v = running(w, "vm1")
    assert v is not None and v["status"]["nodeName"] == src
    assert v["status"]["migrationState"]["failed"] is True
    failed = events(w, "vm_migration_failed")[0]
    assert failed["vm"] == "default/vm1" and failed["source"] == src
    wait_for(lambda: len(launcher_pods(w, "vm1")) == 1, what="target pod removed")
    # the fault fired once: the next migration succeeds
    c.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
              "metadata": {"name": "m2", "namespace": "default"}, "spec": {"vmiName": "vm1"}})
    wait_for(lambda: (running(w, "vm1") or {}).get("status", {}).get("nodeName") != src,
             what="second migration")
    assert w.controllers["kubevirt"].migrations_per_vm == {"default/vm1": 1}


def test_vmi_node_label_and_status_change_in_one_write(
        world_factory: Callable[..., World]) -> None:
    """virt-controller hands a VMI over to Scheduled, and virt-handler acknowledges a
    migration, with one update that sets ``kubevirt.io/nodeName`` and ``status.nodeName``
    together (v1.5.2 vmi.go, vm.go): no watcher ever sees the two disagree."""
    w = world_factory()
    c = w.client
    seen: list[tuple[str | None, str | None]] = []

    def record(ev: Any) -> None:
        o = ev.obj
        if o.get("kind") == "VirtualMachineInstance" and ev.type == "MODIFIED":
            seen.append(((o["metadata"].get("labels") or {}).get("kubevirt.io/nodeName"),
                         (o.get("status") or {}).get("nodeName")))
    w.store.subscribe(record)
    c.create(vm_body("vm1"))
    src = wait_running(w, "vm1")["status"]["nodeName"]
    c.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
              "metadata": {"name": "m1", "namespace": "default"}, "spec": {"vmiName": "vm1"}})
    wait_for(lambda: (running(w, "vm1") or {}).get("status", {}).get("nodeName") != src,
             what="migration")
    both = [(label, node) for label, node in seen if label or node]
    assert both and all(label == node for label, node in both), both
    assert {node for _, node in both} >= {src}
    assert len({node for _, node in both}) == 2


@pytest.mark.parametrize("tag,kept", [("1.5.2-150700.3.5.2", True),
                                      ("1.6.3-150700.3.13.1", False)])
def test_migration_target_label_after_the_migration(
        world_factory: Callable[..., World], tag: str, kept: bool) -> None:
    """virt-controller labels the VMI ``kubevirt.io/migrationTargetNodeName`` for the
    migration; only from v1.6.0 does the target's virt-handler drop it once the migration is
    finalized (pkg/virt-handler/migration-target.go): before, it stays on the VMI."""
    w = world_factory(release="v1.7.0")
    run_kubevirt(w, tag)
    wait_for(lambda: observed(w) == tag, what="KubeVirt CR observed version")
    c = w.client
    c.create(vm_body("vm1"))
    src = wait_running(w, "vm1")["status"]["nodeName"]
    c.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
              "metadata": {"name": "m1", "namespace": "default"}, "spec": {"vmiName": "vm1"}})
    v = wait_for(lambda: (lambda o: o if o and o["status"]["nodeName"] != src else None)(
        running(w, "vm1")), what="migration")
    labels = v["metadata"].get("labels") or {}
    assert labels.get("kubevirt.io/nodeName") == v["status"]["nodeName"]
    if kept:
        assert labels.get("kubevirt.io/migrationTargetNodeName") == v["status"]["nodeName"]
    else:
        assert "kubevirt.io/migrationTargetNodeName" not in labels


def test_migration_hang_fault(world_factory: Callable[..., World]) -> None:
    w = world_factory(faults=[{"kind": "migration_hang", "target": {"vm": "default/vm1"}}])
    c = w.client
    c.create(vm_body("vm1"))
    src = wait_running(w, "vm1")["status"]["nodeName"]
    c.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
              "metadata": {"name": "m1", "namespace": "default"}, "spec": {"vmiName": "vm1"}})
    wait_for(lambda: (c.get(API, "VirtualMachineInstanceMigration", "m1", "default")
                      .get("status") or {}).get("phase") == "Running")
    time.sleep(0.5)  # 50 simulated seconds: far longer than the migration would take
    assert c.get(API, "VirtualMachineInstanceMigration", "m1", "default")["status"][
        "phase"] == "Running"
    assert c.get(API, "VirtualMachine", "vm1", "default")["status"]["printableStatus"] == \
        "Migrating"
    c.delete(API, "VirtualMachineInstanceMigration", "m1", "default")  # abort
    wait_for(lambda: len(launcher_pods(w, "vm1")) == 1, what="target pod removed")
    assert running(w, "vm1")["status"]["nodeName"] == src  # type: ignore
    wait_for(lambda: c.get(API, "VirtualMachine", "vm1", "default")["status"]
             ["printableStatus"] == "Running")


def test_hung_migration_is_aborted_by_kubevirt_after_its_progress_timeout(
        world_factory: Callable[..., World]) -> None:
    """virt-launcher aborts a migration that makes no progress for progressTimeout (150 s):
    the migration fails with KubeVirt's message and the VM stays on its source node."""
    w = world_factory(faults=[{"kind": "migration_hang", "target": {"vm": "default/vm1"}}],
                      speed=1000.0)
    c = w.client
    c.create(vm_body("vm1"))
    src = wait_running(w, "vm1")["status"]["nodeName"]
    c.create({"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
              "metadata": {"name": "m1", "namespace": "default"}, "spec": {"vmiName": "vm1"}})
    mig = wait_for(lambda: (lambda m: m if (m.get("status") or {}).get("phase") == "Failed"
                            else None)(c.get(API, "VirtualMachineInstanceMigration", "m1",
                                             "default")), timeout=10, what="migration aborted")
    started = next(e["t"] for e in w.timeline.snapshot()
                   if e["event"] == "vm_migration_started")
    failed = next(e for e in w.timeline.snapshot() if e["event"] == "vm_migration_failed")
    assert failed["t"] - started >= 150
    assert "Live migration stuck for 151 seconds and has been aborted" in str(mig["status"])
    wait_for(lambda: len(launcher_pods(w, "vm1")) == 1, what="target pod removed")
    assert running(w, "vm1")["status"]["nodeName"] == src  # type: ignore


# --------------------------------------------------------------------------- node reboot
def test_node_reboot_kills_its_vms_and_they_restart_elsewhere(
        world_factory: Callable[..., World]) -> None:
    w = world_factory()
    c = w.client
    c.create(vm_body("vm1"))
    v = wait_running(w, "vm1")
    node = v["status"]["nodeName"]
    # what the kubelet does on a reboot: the node goes NotReady and its pods are gone
    c.patch("v1", "Node", node, {"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}},
        subresource="status")
    for p in launcher_pods(w, "vm1"):
        c.delete("v1", "Pod", p["metadata"]["name"], "default", grace_period=0)
    killed = wait_for(lambda: events(w, "vm_killed"), what="vm_killed")[0]
    assert killed["vm"] == "default/vm1" and killed["node"] == node
    assert killed["reason"] == "NodeNotReady"
    v2 = wait_for(lambda: (lambda x: x if x and x["metadata"]["uid"] != v["metadata"]["uid"]
                           else None)(running(w, "vm1")), what="VM restarted")
    assert v2["status"]["nodeName"] != node


# --------------------------------------------------------------------------- Harvester's migrate
def harvester_api(w: World, version: tuple[int, int, int]) -> Callable[..., Any]:
    from harvester_sim.controllers import harvester_vm

    # the Harvester version the controllers run is the harvester Deployment's image tag
    tag = "v" + ".".join(map(str, version))
    labels = {"app.kubernetes.io/name": "harvester"}
    w.client.create({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "harvester", "namespace": "harvester-system"},
                     "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                              "template": {"metadata": {"labels": labels},
                                           "spec": {"containers": [{
                                               "name": "harvester",
                                               "image": f"rancher/harvester:{tag}"}]}}}})
    if "harvester_vm" not in w.controllers:
        w.controllers["harvester_vm"] = harvester_vm.setup(w)
    handler = harvester_vm.api_handler(w, w.client_for("harvester"), version)

    def call(vm: str, body: bytes, action: str = "migrate",
             method: str = "POST") -> tuple[int, dict[str, str], bytes]:
        return handler(method, f"/v1/harvester/kubevirt.io.virtualmachines/default/{vm}",
                       f"action={action}", {}, body)
    return call


@pytest.mark.parametrize("harvester,tag", [((1, 5, 1), "1.4.0-150600.5.15.1"),
                                           ((1, 6, 0), "1.5.2-150700.3.5.2")])
def test_harvester_migrate_action_pins_the_target(
        world_factory: Callable[..., World], harvester: tuple[int, int, int], tag: str) -> None:
    """v1.5.1 pins the VMI's nodeSelector, v1.6.0 the VM template's (copied to the VMI by
    KubeVirt's LiveUpdate); either way the target pod gets it and the migration lands there;
    Harvester's controller removes the pin when the migration has completed."""
    w = world_factory(nodes=4)
    run_kubevirt(w, tag)
    if harvester >= (1, 6, 0):
        w.client.modify(API, "KubeVirt", "kubevirt",
                        lambda cur: {**cur, "spec": {"configuration": {
                            "vmRolloutStrategy": "LiveUpdate"}}}, "harvester-system")
    wait_for(lambda: observed(w) == tag, what="KubeVirt version")
    call = harvester_api(w, harvester)
    c = w.client
    c.create(vm_body("vm1"))
    src = wait_running(w, "vm1")["status"]["nodeName"]
    want = next(f"node-{i}" for i in (3, 2, 1, 0) if f"node-{i}" != src)
    code, _, body = call("vm1", f'{{"nodeName": "{want}"}}'.encode())
    assert code == 204, body
    migs = c.list(API, "VirtualMachineInstanceMigration", "default")
    assert len(migs) == 1 and migs[0]["metadata"]["name"].startswith("vm1-")
    assert "addedNodeSelector" not in migs[0]["spec"]
    name = migs[0]["metadata"]["name"]
    m = wait_for(lambda: (lambda o: o if (o.get("status") or {}).get("phase") == "Succeeded"
                          else None)(c.get(API, "VirtualMachineInstanceMigration", name,
                                           "default")), what="migration Succeeded")
    pod = c.get("v1", "Pod", m["status"]["migrationState"]["targetPod"], "default")
    assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == want
    assert pod["spec"]["nodeName"] == want
    wait_for(lambda: (running(w, "vm1") or {}).get("status", {}).get("nodeName") == want,
             what="VMI on the target")
    # the pin and the annotations go once the migration has completed: with v1.6 in two
    # writes of two controllers (KubeVirt copies the template's dropped pin to the VMI,
    # Harvester's VMI controller removes its annotations), in either order
    wait_for(lambda: not ((running(w, "vm1") or {}).get("spec") or {}).get("nodeSelector", {})
             .get("kubernetes.io/hostname"), what="VMI selector reset")
    wait_for(lambda: not {"harvesterhci.io/migrationUID",
                          "harvesterhci.io/migrationTargetNodeName"} &
             set(((running(w, "vm1") or {}).get("metadata") or {}).get("annotations") or {}),
             what="VMI migration annotations removed")
    vm = c.get(API, "VirtualMachine", "vm1", "default")
    assert "kubernetes.io/hostname" not in (vm["spec"]["template"]["spec"].get("nodeSelector")
                                            or {})
    # Go's client does not send the emptied map (``omitempty``): no nodeSelector is left, as
    # Harvester's VM live-migrate detector (``NodeSelector != nil``) needs to find it
    wait_for(lambda: "nodeSelector" not in ((running(w, "vm1") or {}).get("spec") or {}),
             what="VMI without a nodeSelector")
    assert "nodeSelector" not in vm["spec"]["template"]["spec"]


def test_harvester_migrate_action_v1_7_uses_added_node_selector(
        world_factory: Callable[..., World]) -> None:
    w = world_factory(nodes=3, release="v1.7.0")
    run_kubevirt(w, "1.6.3-150700.3.13.1")
    wait_for(lambda: observed(w) == "1.6.3-150700.3.13.1", what="KubeVirt version")
    call = harvester_api(w, (1, 7, 0))
    w.client.create(vm_body("vm1"))
    src = wait_running(w, "vm1")["status"]["nodeName"]
    want = next(f"node-{i}" for i in (2, 1, 0) if f"node-{i}" != src)
    assert call("vm1", f'{{"nodeName": "{want}"}}'.encode())[0] == 204
    mig = w.client.list(API, "VirtualMachineInstanceMigration", "default")[0]
    assert mig["spec"]["addedNodeSelector"] == {"kubernetes.io/hostname": want}
    wait_for(lambda: (running(w, "vm1") or {}).get("status", {}).get("nodeName") == want,
             what="VMI on the target")


def test_harvester_migrate_action_refuses_bad_input(world_factory: Callable[..., World]) -> None:
    w = world_factory(nodes=3)
    run_kubevirt(w, "1.4.0-150600.5.15.1")
    call = harvester_api(w, (1, 5, 1))
    c = w.client
    c.create(vm_body("vm1"))
    src = wait_running(w, "vm1")["status"]["nodeName"]
    # body that does not decode: 422, the handler's text
    code, hdrs, body = call("vm1", b"{not json")
    assert code == 422 and body.startswith(b"Failed to decode request body")
    assert hdrs["Content-Type"].startswith("text/plain")
    # the node it runs on
    code, _, body = call("vm1", f'{{"nodeName": "{src}"}}'.encode())
    assert code == 500 and body == b"The target node is non-migratable"
    # a node that does not exist
    code, _, body = call("vm1", b'{"nodeName": "nope"}')
    assert (code, body) == (500, b"The target node is non-migratable")
    # a VM that does not exist
    code, _, body = call("ghost", b'{"nodeName": "node-1"}')
    assert code == 500 and b"not found" in body
    # an unknown action, a GET
    code, _, body = call("vm1", b"{}", action="teleport")
    assert code == 422 and b"InvalidAction" in body
    assert call("vm1", b"{}", method="GET")[0] == 405
    # nothing was changed by any of these
    assert c.list(API, "VirtualMachineInstanceMigration", "default") == []
    v = running(w, "vm1")
    assert not (v or {})["spec"].get("nodeSelector")
    assert "harvesterhci.io/migrationTargetNodeName" not in \
        ((v or {})["metadata"].get("annotations") or {})
    # a VM already migrating
    other = next(f"node-{i}" for i in (2, 1, 0) if f"node-{i}" != src)
    assert call("vm1", f'{{"nodeName": "{other}"}}'.encode())[0] == 204
    wait_for(lambda: ((running(w, "vm1") or {})["metadata"].get("annotations") or {})
             .get("harvesterhci.io/migrationUID"), what="migration annotation")
    code, _, body = call("vm1", f'{{"nodeName": "{other}"}}'.encode())
    assert code == 500 and b"already in a migrating state" in body
