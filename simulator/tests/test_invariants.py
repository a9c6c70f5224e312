"""The invariant monitor: each invariant is detected from synthetic objects and events.

The monitor is subscribed to a bare store (no controllers); the test plays the part of the
kubelet / KubeVirt / Longhorn / a careless client through the in-process API client.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from harvester_sim import invariants
from harvester_sim.api.resources import Registry
from harvester_sim.api.store import Store
from harvester_sim.client import Client
from harvester_sim.clock import Clock
from harvester_sim.scenarios import loader
from harvester_sim.timeline import Timeline

KV = "kubevirt.io/v1"
LH = "longhorn.io/v1beta2"


class Env:
    def __init__(self, **inv: Any) -> None:
        clock = Clock(1.0)
        registry = Registry()
        self.store = Store(registry, clock)
        self.c = Client(self.store, "test")
        self.world = SimpleNamespace(store=self.store, clock=clock, timeline=Timeline(clock),
                                     extras={}, scenario={"invariants": inv}, client=self.c)
        for ns in ("default", "longhorn-system"):
            self.c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for f in ("kubevirt.io.yaml", "longhorn.io.yaml"):
            for doc in yaml.safe_load_all((loader.CRD_DIR / f).read_text()):
                if doc:
                    self.c.create(doc)
        self.mon: invariants.Monitor | None = None

    def start(self) -> invariants.Monitor:
        self.mon = invariants.setup(self.world)
        return self.mon

    @property
    def kinds(self) -> list[str]:
        assert self.mon is not None
        return [v["kind"] for v in self.mon.violations]

    # objects -------------------------------------------------------------------------
    def node(self, name: str, ready: bool = True) -> None:
        self.c.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                       "status": {"conditions": [{"type": "Ready",
                                                  "status": "True" if ready else "False"}]}})

    def set_ready(self, name: str, ready: bool) -> None:
        self.c.patch("v1", "Node", name, {"status": {"conditions": [
            {"type": "Ready", "status": "True" if ready else "False"}]}}, subresource="status")

    def cordon(self, name: str, on: bool = True) -> None:
        self.c.patch("v1", "Node", name, {"spec": {"unschedulable": True if on else None}})

    def vm(self, name: str, run: str = "Always") -> None:
        self.c.create({"apiVersion": KV, "kind": "VirtualMachine",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"runStrategy": run, "template": {"spec": {}}}})

    def vm_status(self, name: str, status: str) -> None:
        self.c.patch(KV, "VirtualMachine", name, {"status": {"printableStatus": status}},
                     "default", subresource="status")

    def vmi(self, name: str, node: str, phase: str = "Running") -> dict[str, Any]:
        return self.c.create({"apiVersion": KV, "kind": "VirtualMachineInstance",
                              "metadata": {"name": name, "namespace": "default"},
                              "spec": {}, "status": {"phase": phase, "nodeName": node}})

    def vmi_patch(self, name: str, status: dict[str, Any]) -> None:
        self.c.patch(KV, "VirtualMachineInstance", name, {"status": status}, "default",
                     subresource="status")

    def launcher(self, vmi: dict[str, Any], pod: str, node: str,
                 phase: str = "Running") -> None:
        self.c.create({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": pod, "namespace": "default",
                                    "labels": {"kubevirt.io": "virt-launcher",
                                               "vm.kubevirt.io/name": vmi["metadata"]["name"]},
                                    "ownerReferences": [{
                                        "apiVersion": KV, "kind": "VirtualMachineInstance",
                                        "name": vmi["metadata"]["name"],
                                        "uid": vmi["metadata"]["uid"], "controller": True}]},
                       "spec": {"nodeName": node, "containers": [{"name": "compute",
                                                                  "image": "virt-launcher"}]},
                       "status": {"phase": phase}})

    def pod(self, name: str, node: str, labels: dict[str, str]) -> None:
        self.c.create({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default", "labels": labels},
                       "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
                       "status": {"phase": "Running", "conditions": [
                           {"type": "Ready", "status": "True"}]}})

    def pdb(self, name: str, app: str, allowed: int) -> None:
        self.c.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}},
                       "status": {"disruptionsAllowed": allowed, "currentHealthy": 2,
                                  "desiredHealthy": 2, "expectedPods": 2,
                                  "observedGeneration": 1}})

    def volume(self, name: str, robustness: str) -> None:
        self.c.create({"apiVersion": LH, "kind": "Volume",
                       "metadata": {"name": name, "namespace": "longhorn-system"},
                       "spec": {"numberOfReplicas": 2},
                       "status": {"robustness": robustness, "state": "attached"}})

    def replica(self, name: str, vol: str, running: bool) -> None:
        self.c.create({"apiVersion": LH, "kind": "Replica",
                       "metadata": {"name": name, "namespace": "longhorn-system"},
                       "spec": {"volumeName": vol, "nodeID": "n1", "failedAt": ""},
                       "status": {"currentState": "running" if running else "error"}})


@pytest.fixture
def env() -> Iterator[Env]:
    yield Env(dual_running_grace_s=0)


# ------------------------------------------------------------------- VMI on two nodes
def test_vmi_running_on_two_nodes(env: Env) -> None:
    env.node("n1")
    env.node("n2")
    env.start()
    vmi = env.vmi("vm1", "n1")
    env.launcher(vmi, "virt-launcher-vm1-a", "n1")
    assert env.kinds == []
    env.launcher(vmi, "virt-launcher-vm1-b", "n2")
    assert env.kinds == ["vmi_on_two_nodes"]
    v = env.mon.violations[0]  # type: ignore[union-attr]
    assert v["nodes"] == ["n1", "n2"] and v["vm"] == "vm1"


def test_two_launchers_during_a_migration_are_fine(env: Env) -> None:
    env.node("n1")
    env.node("n2")
    env.start()
    vmi = env.vmi("vm1", "n1")
    env.launcher(vmi, "virt-launcher-vm1-a", "n1")
    env.c.create({"apiVersion": KV, "kind": "VirtualMachineInstanceMigration",
                  "metadata": {"name": "mig1", "namespace": "default"},
                  "spec": {"vmiName": "vm1"}, "status": {"phase": "Running"}})
    env.launcher(vmi, "virt-launcher-vm1-b", "n2")
    assert env.kinds == []
    env.c.patch(KV, "VirtualMachineInstanceMigration", "mig1",
                {"status": {"phase": "Succeeded"}}, "default", subresource="status")
    env.vmi_patch("vm1", {"nodeName": "n2"})
    env.c.delete("v1", "Pod", "virt-launcher-vm1-a", "default")  # graceful
    assert env.kinds == []
    assert env.mon.migrations_per_vm == {"default/vm1": 1}  # type: ignore[union-attr]


def test_dual_running_grace_period() -> None:
    env = Env(dual_running_grace_s=3600)
    env.node("n1")
    env.node("n2")
    mon = env.start()
    vmi = env.vmi("vm1", "n1")
    env.launcher(vmi, "a", "n1")
    env.launcher(vmi, "b", "n2")
    assert env.kinds == []  # still within the grace period
    mon.dual_grace_s = 0
    assert env.kinds == ["vmi_on_two_nodes"]


# --------------------------------------------------------------------------- VM killed
def test_forced_delete_of_a_running_launcher_kills_the_vm(env: Env) -> None:
    env.node("n1")
    env.start()
    vmi = env.vmi("vm1", "n1")
    env.launcher(vmi, "virt-launcher-vm1", "n1")
    env.c.delete("v1", "Pod", "virt-launcher-vm1", "default", grace_period=0)
    assert env.kinds == ["vm_killed"]
    v = env.mon.violations[0]  # type: ignore[union-attr]
    assert (v["vm"], v["node"], v["reason"]) == ("vm1", "n1", "forced_delete")


def test_graceful_delete_is_not_a_kill(env: Env) -> None:
    env.node("n1")
    env.start()
    vmi = env.vmi("vm1", "n1")
    env.launcher(vmi, "virt-launcher-vm1", "n1")
    env.c.delete("v1", "Pod", "virt-launcher-vm1", "default")
    env.store.finish_graceful_delete(env.c.rt("v1", "Pod"), "default", "virt-launcher-vm1")
    assert env.kinds == []


def test_node_reboot_kills_its_vms(env: Env) -> None:
    env.node("n1")
    env.start()
    vmi = env.vmi("vm1", "n1")
    env.launcher(vmi, "virt-launcher-vm1", "n1")
    env.set_ready("n1", False)
    env.c.patch("v1", "Pod", "virt-launcher-vm1", {"status": {"phase": "Failed"}}, "default",
                subresource="status")
    env.vmi_patch("vm1", {"phase": "Failed"})
    assert env.kinds == ["vm_killed"]  # one kill, not one per signal
    v = env.mon.violations[0]  # type: ignore[union-attr]
    assert v["reason"] == "node_not_ready"
    assert env.mon.node_reboots == {"n1": 1}  # type: ignore[union-attr]


def test_vm_killed_timeline_events_are_violations(env: Env) -> None:
    env.start()
    env.world.timeline.record("vm_killed", vm="default/vm9", node="n3", reason="reboot")
    v = env.mon.violations  # type: ignore[union-attr]
    assert [(x["kind"], x["vm"], x["namespace"], x["node"]) for x in v] == [
        ("vm_killed", "vm9", "default", "n3")]


# ------------------------------------------------------------- VM not running at the end
def test_vm_not_running_at_end_without_explicit_stop(env: Env) -> None:
    env.vm("vm1")
    env.vm("vm2")
    env.vm("off", run="Halted")
    mon = env.start()
    env.vm_status("vm1", "Running")
    env.vm_status("vm2", "Stopped")
    end = mon.check_end()
    assert [(v["kind"], v["vm"]) for v in end] == [("vm_not_running_at_end", "vm2")]
    assert "without an explicit stop" in end[0]["message"]


def test_explicit_stop_is_recorded_with_who(env: Env) -> None:
    env.vm("vm1")
    mon = env.start()
    env.world.extras["request_actor"] = lambda: "ansible-harvester-upgrade/vm_evacuate"
    env.c.patch(KV, "VirtualMachine", "vm1", {"spec": {"runStrategy": "Halted"}}, "default")
    env.vm_status("vm1", "Stopped")
    assert mon.check_end() == []
    stop = mon.explicit_stops["default/vm1"]
    assert stop["by"] == "ansible-harvester-upgrade/vm_evacuate"
    assert "Always -> Halted" in stop["how"]
    # restored but never came back: that is a violation again
    env.c.patch(KV, "VirtualMachine", "vm1", {"spec": {"runStrategy": "Always"}}, "default")
    end = mon.check_end()
    assert [v["vm"] for v in end] == ["vm1"] and "never came back" in end[0]["message"]
    env.vm_status("vm1", "Running")
    assert mon.check_end() == []


def test_deleting_a_vm_is_an_explicit_stop(env: Env) -> None:
    env.vm("vm1")
    mon = env.start()
    env.c.delete(KV, "VirtualMachine", "vm1", "default")
    assert mon.check_end() == []
    assert mon.explicit_stops["default/vm1"]["how"] == "deleted"


# --------------------------------------------------------------------- Longhorn volumes
def test_faulted_volume(env: Env) -> None:
    env.volume("pre-faulted", "faulted")  # already bad at start: baseline, not a violation
    env.volume("vol1", "healthy")
    env.start()
    env.c.patch(LH, "Volume", "vol1", {"status": {"robustness": "degraded"}},
                "longhorn-system", subresource="status")
    assert env.kinds == []
    env.c.patch(LH, "Volume", "vol1", {"status": {"robustness": "faulted"}},
                "longhorn-system", subresource="status")
    env.c.patch(LH, "Volume", "pre-faulted", {"status": {"state": "detached"}},
                "longhorn-system", subresource="status")
    assert env.kinds == ["volume_without_healthy_replica"]
    assert env.mon.violations[0]["volume"] == "vol1"  # type: ignore[union-attr]


def test_last_healthy_replica_lost(env: Env) -> None:
    env.volume("vol1", "healthy")
    env.replica("r1", "vol1", True)
    env.replica("r2", "vol1", True)
    env.start()
    env.c.patch(LH, "Replica", "r1", {"status": {"currentState": "error"}}, "longhorn-system",
                subresource="status")
    assert env.kinds == []
    env.c.delete(LH, "Replica", "r2", "longhorn-system")
    assert env.kinds == ["volume_without_healthy_replica"]
    env.replica("r3", "vol1", True)
    env.c.delete(LH, "Replica", "r3", "longhorn-system")
    assert env.kinds == ["volume_without_healthy_replica"] * 2


# ---------------------------------------------------------------------------------- PDB
def test_pod_deleted_against_its_pdb(env: Env) -> None:
    env.node("n1")
    env.node("n2")
    env.pdb("web", "web", allowed=0)
    env.pod("web-a", "n1", {"app": "web"})
    env.pod("web-b", "n2", {"app": "web"})
    env.pod("other", "n1", {"app": "other"})
    env.start()
    env.cordon("n1")
    env.c.delete("v1", "Pod", "other", "default")  # not covered by a PDB
    env.c.delete("v1", "Pod", "web-a", "default")  # a drain that ignores the PDB
    assert env.kinds == ["pdb_violated"]
    v = env.mon.violations[0]  # type: ignore[union-attr]
    assert (v["pod"], v["pdb"], v["node"]) == ("web-a", "web", "n1")


def test_eviction_granted_by_the_pdb_is_fine(env: Env) -> None:
    env.node("n1")
    env.pdb("web", "web", allowed=1)
    env.pod("web-a", "n1", {"app": "web"})
    env.start()
    env.cordon("n1")
    env.c.evict("web-a", "default")  # PDB goes to 0 allowed, pod listed in disruptedPods
    assert env.kinds == []


def test_pods_killed_by_a_reboot_count_against_the_pdb(env: Env) -> None:
    env.node("n1")
    env.pdb("web", "web", allowed=0)
    env.pod("web-a", "n1", {"app": "web"})
    env.start()
    env.set_ready("n1", False)
    env.c.patch("v1", "Pod", "web-a", {"status": {"phase": "Failed"}}, "default",
                subresource="status")
    assert env.kinds == ["pdb_violated"]


def test_deletes_on_healthy_uncordoned_nodes_are_not_pdb_violations(env: Env) -> None:
    env.node("n1")
    env.pdb("web", "web", allowed=0)
    env.pod("web-a", "n1", {"app": "web"})
    env.start()
    env.c.delete("v1", "Pod", "web-a", "default")  # e.g. a rolling update
    assert env.kinds == []


# ----------------------------------------------------------------------------- cordons
def test_too_many_nodes_cordoned() -> None:
    env = Env(max_cordoned=1)
    for n in ("n1", "n2", "n3"):
        env.node(n)
    mon = env.start()
    env.cordon("n1")
    assert env.kinds == []
    env.cordon("n2")
    env.cordon("n3")
    assert env.kinds == ["too_many_cordoned"]  # one per episode
    assert mon.violations[0]["nodes"] == ["n1", "n2"]
    env.cordon("n2", False)
    env.cordon("n3", False)
    env.cordon("n1", False)
    env.cordon("n2")
    env.cordon("n3")
    assert env.kinds == ["too_many_cordoned"] * 2
    assert mon.max_cordoned_seen == 3


def test_monitor_never_breaks_a_write(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.node("n1")
    mon = env.start()

    def boom(*a: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(mon, "_on_node", boom)
    env.cordon("n1")  # the write succeeds, the error is logged
    assert env.c.get("v1", "Node", "n1")["spec"]["unschedulable"] is True


def test_setup_registers_in_world_extras(env: Env) -> None:
    mon = env.start()
    assert env.world.extras["invariants"] is mon
    assert mon.summary()["max_cordoned_seen"] == 0
