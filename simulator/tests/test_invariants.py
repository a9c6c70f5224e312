"""The invariant monitor: each invariant is detected from synthetic objects and events.

The monitor is subscribed to a bare store (no controllers); the test plays the part of the
kubelet / KubeVirt / Longhorn / a careless client through the in-process API client.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from harvester_sim import crds, invariants
from harvester_sim.api.resources import Registry
from harvester_sim.api.store import Store
from harvester_sim.client import Client
from harvester_sim.clock import Clock
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
        crds.install(self.c, ("kubevirt.io", "longhorn.io"))
        self.mon: invariants.Monitor | None = None

    def start(self) -> invariants.Monitor:
        self.mon = invariants.setup(self.world)
        return self.mon

    @property
    def kinds(self) -> list[str]:
        assert self.mon is not None
        return [v["kind"] for v in self.mon.violations]

    # objects -------------------------------------------------------------------------
    def node(self, name: str, ready: bool = True, etcd: bool = False,
             labels: dict[str, str] | None = None,
             taints: list[dict[str, Any]] | None = None) -> None:
        lab = dict(labels or {})
        if etcd:
            lab["node-role.kubernetes.io/etcd"] = "true"
        self.c.create({"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": name, "labels": lab},
                       "spec": {"taints": list(taints or [])},
                       "status": {"conditions": [{"type": "Ready",
                                                  "status": "True" if ready else "False"}]}})

    def taint(self, name: str, on: bool = True) -> None:
        taints = [{"key": "kubevirt.io/drain", "value": "draining", "effect": "NoSchedule"}]
        self.c.patch("v1", "Node", name, {"spec": {"taints": taints if on else []}})

    def set_ready(self, name: str, ready: bool) -> None:
        self.c.patch("v1", "Node", name, {"status": {"conditions": [
            {"type": "Ready", "status": "True" if ready else "False"}]}}, subresource="status")

    def cordon(self, name: str, on: bool = True) -> None:
        self.c.patch("v1", "Node", name, {"spec": {"unschedulable": True if on else None}})

    def vm(self, name: str, run: str = "Always") -> None:
        self.c.create({"apiVersion": KV, "kind": "VirtualMachine",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"runStrategy": run,
                                "template": {"spec": {"domain": {"devices": {}}}}}})

    def vm_status(self, name: str, status: str) -> None:
        self.c.patch(KV, "VirtualMachine", name, {"status": {"printableStatus": status}},
                     "default", subresource="status")

    def vmi(self, name: str, node: str, phase: str = "Running") -> dict[str, Any]:
        return self.c.create({"apiVersion": KV, "kind": "VirtualMachineInstance",
                              "metadata": {"name": name, "namespace": "default"},
                              "spec": {"domain": {"devices": {}}},
                              "status": {"phase": phase, "nodeName": node}})

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
                       "spec": {"volumeName": vol, "nodeID": "n1", "failedAt": "",
                                "healthyAt": "2024-12-01T00:00:00Z"},
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


def test_two_launchers_during_a_migration_are_fine() -> None:
    env = Env(dual_running_grace_s=60)  # the source pod goes within the grace after it
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
    stop = mon.explicit_stops["default/vm1"]
    assert stop["by"] == "ansible-harvester-upgrade/vm_evacuate"
    assert "Always -> Halted" in stop["how"]
    # halted and never restarted: a violation naming who stopped it
    end = mon.check_end()
    assert [(v["kind"], v["vm"]) for v in end] == [("vm_not_running_at_end", "vm1")]
    assert "never restarted" in end[0]["message"]
    assert end[0]["stopped_by"] == "ansible-harvester-upgrade/vm_evacuate"
    # restored but never came back: still a violation
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


# ------------------------------------------------------------------------- availability
def test_too_many_nodes_cordoned() -> None:
    env = Env(max_cordoned=1)
    for n in ("n1", "n2", "n3"):
        env.node(n)
    mon = env.start()
    env.cordon("n1")
    assert env.kinds == []
    env.cordon("n2")
    env.cordon("n3")
    assert env.kinds == ["too_many_unavailable"]  # one per episode
    assert mon.violations[0]["nodes"] == ["n1", "n2"]
    env.cordon("n2", False)
    env.cordon("n3", False)
    env.cordon("n1", False)
    env.cordon("n2")
    env.cordon("n3")
    assert env.kinds == ["too_many_unavailable"] * 2
    assert mon.max_cordoned_seen == 3


def test_a_notready_node_counts_as_unavailable() -> None:
    env = Env(max_cordoned=1)
    for n in ("n1", "n2", "n3"):
        env.node(n)
    env.start()
    env.set_ready("n2", False)          # e.g. a node lost while another one is upgraded
    assert env.kinds == []
    env.cordon("n1")
    assert env.kinds == ["too_many_unavailable"]
    v = env.mon.violations[0]  # type: ignore[union-attr]
    assert v["reasons"] == {"n1": ["cordoned"], "n2": ["NotReady"]}


def test_a_node_failing_by_itself_is_not_the_upgrades_doing_until_it_takes_more() -> None:
    """n1 is being upgraded (cordoned, drain-tainted) when n2 goes NotReady by itself: not a
    violation; the upgrade rebooting n1 meanwhile is (as is cordoning another node)."""
    env = Env(max_unavailable=1)
    for n in ("n1", "n2", "n3"):
        env.node(n)
    env.start()
    env.cordon("n1")
    env.taint("n1")
    env.set_ready("n2", False)          # its kubelet stopped posting status
    assert env.kinds == []
    env.set_ready("n1", False)          # the upgrade reboots n1 all the same
    assert env.kinds == ["too_many_unavailable"]
    v = env.mon.violations[0]  # type: ignore[union-attr]
    assert v["reasons"] == {"n1": ["cordoned", "NotReady", "kubevirt.io/drain"],
                            "n2": ["NotReady"]}
    env.set_ready("n1", True)
    env.set_ready("n2", True)
    env.set_ready("n3", False)          # another outside failure: nothing new is blamed
    assert env.kinds == ["too_many_unavailable"]
    env.cordon("n2")                    # ... until the upgrade cordons one more node
    assert env.kinds == ["too_many_unavailable"] * 2


def test_the_drain_taint_counts_as_unavailable() -> None:
    env = Env(max_unavailable=1)
    for n in ("n1", "n2"):
        env.node(n)
    env.start()
    env.taint("n1")                     # KubeVirt evacuates it, cordoned or not
    assert env.kinds == []
    env.cordon("n2")
    assert env.kinds == ["too_many_unavailable"]
    v = env.mon.violations[0]  # type: ignore[union-attr]
    assert v["reasons"] == {"n1": ["kubevirt.io/drain"], "n2": ["cordoned"]}


def test_etcd_quorum_lost() -> None:
    env = Env(max_unavailable=5)        # availability itself is not what is tested here
    for n in ("cp1", "cp2", "cp3"):
        env.node(n, etcd=True)
    env.node("w1")
    env.start()
    env.set_ready("w1", False)
    env.set_ready("cp1", False)         # one of three members down: quorum holds
    assert env.kinds == []
    env.set_ready("cp2", False)
    assert env.kinds == ["etcd_quorum_lost"]
    v = env.mon.violations[0]  # type: ignore[union-attr]
    assert (v["nodes"], v["tolerance"]) == (["cp1", "cp2"], 1)
    env.set_ready("cp3", False)         # still the same episode
    assert env.kinds == ["etcd_quorum_lost"]


def test_one_etcd_member_cannot_keep_quorum_through_a_reboot() -> None:
    env = Env()
    env.node("cp1", etcd=True)
    env.start()
    env.set_ready("cp1", False)         # a single-node cluster's upgrade reboots it
    assert env.kinds == []


# ------------------------------------------------------------------ crashing checks
def test_a_crashing_handler_is_a_violation_and_never_breaks_a_write(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.node("n1")
    mon = env.start()

    def boom(*a: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(mon, "_on_node", boom)
    env.cordon("n1")  # the write succeeds, the crash is a violation
    assert env.c.get("v1", "Node", "n1")["spec"]["unschedulable"] is True
    assert env.kinds == ["monitor_error"]
    v = mon.violations[0]
    assert v["where"] == "_on_node on MODIFIED nodes n1" and v["error"] == "RuntimeError: bug"
    env.cordon("n1", False)             # the same crash again: counted, not repeated
    assert env.kinds == ["monitor_error"] and mon.violations[0]["count"] == 2


def test_a_crashing_end_check_is_a_violation(env: Env,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    mon = env.start()

    def boom() -> list[dict[str, Any]]:
        raise KeyError("status")

    monkeypatch.setattr(mon, "_end_state", boom)
    end = mon.check_end()
    assert [v["kind"] for v in end] == ["monitor_error"]
    assert end[0]["where"] == "end check: upgrade finished"
    assert "KeyError" in end[0]["message"]
    assert len(mon.check_end()) == 1    # re-running the end check does not pile up
    assert mon.violations == []


def test_setup_registers_in_world_extras(env: Env) -> None:
    mon = env.start()
    assert env.world.extras["invariants"] is mon
    assert mon.summary()["max_cordoned_seen"] == 0


# ------------------------------------------------------ restarted instead of migrated
def _migratable_vmi(env: Env, name: str, node: str, migratable: bool = True,
                    spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return env.c.create({
        "apiVersion": KV, "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"domain": {"devices": {}, "memory": {"guest": "1Gi"}}, **(spec or {})},
        "status": {"phase": "Running", "nodeName": node, "conditions": [
            {"type": "LiveMigratable", "status": "True" if migratable else "False"}]}})


def _halt(env: Env, name: str) -> None:
    """What a careless evacuation does: stop the VM; KubeVirt then ends its VMI."""
    env.c.patch(KV, "VirtualMachine", name, {"spec": {"runStrategy": "Halted"}}, "default")
    env.vmi_patch(name, {"phase": "Succeeded"})


def test_a_migratable_vm_shut_down_instead_of_migrated(env: Env) -> None:
    env.node("n1")
    env.node("n2")
    env.vm("vm1")
    _migratable_vmi(env, "vm1", "n1")
    mon = env.start()
    env.world.extras["request_actor"] = lambda: "ansible-harvester-upgrade/vm_evacuate"
    env.cordon("n1")
    _halt(env, "vm1")
    assert env.kinds == ["vm_restarted_not_migrated"]
    v = mon.violations[0]
    assert (v["vm"], v["node"], v["targets"], v["by"]) == (
        "vm1", "n1", ["n2"], "ansible-harvester-upgrade/vm_evacuate")
    env.c.patch(KV, "VirtualMachine", "vm1", {"spec": {"runStrategy": "Always"}}, "default")
    env.vm_status("vm1", "Running")
    assert mon.check_end() == []        # it came back: only the missed migration counts


def test_a_vmi_deleted_under_a_migratable_vm_is_a_restart(env: Env) -> None:
    env.node("n1")
    env.node("n2")
    env.vm("vm1")
    _migratable_vmi(env, "vm1", "n1")
    env.start()
    env.c.delete(KV, "VirtualMachineInstance", "vm1", "default")
    assert env.kinds == ["vm_restarted_not_migrated"]


@pytest.mark.parametrize("case", ["not-migratable", "pinned", "others-cordoned",
                                  "others-tainted", "single-node"])
def test_a_vm_that_cannot_migrate_may_be_shut_down(env: Env, case: str) -> None:
    env.node("n1", labels={"zone": "a"})
    if case != "single-node":
        env.node("n2", labels={"zone": "b"}, taints=[
            {"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
            if case == "others-tainted" else None)
    env.vm("vm1")
    spec = {"nodeSelector": {"zone": "a"}} if case == "pinned" else None
    _migratable_vmi(env, "vm1", "n1", migratable=case != "not-migratable", spec=spec)
    env.start()
    if case == "others-cordoned":
        env.c.patch("v1", "Node", "n2", {"spec": {"unschedulable": True}})
    _halt(env, "vm1")
    assert "vm_restarted_not_migrated" not in env.kinds


def test_a_tolerated_taint_leaves_a_migration_target(env: Env) -> None:
    env.node("n1")
    env.node("n2", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    env.vm("vm1")
    _migratable_vmi(env, "vm1", "n1", spec={"tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]})
    env.start()
    _halt(env, "vm1")
    assert env.kinds == ["vm_restarted_not_migrated"]


def test_a_killed_vm_is_not_counted_again_as_a_restart(env: Env) -> None:
    env.node("n1")
    env.node("n2")
    env.vm("vm1")
    vmi = _migratable_vmi(env, "vm1", "n1")
    env.launcher(vmi, "virt-launcher-vm1", "n1")
    env.start()
    env.c.delete("v1", "Pod", "virt-launcher-vm1", "default", grace_period=0)
    env.vmi_patch("vm1", {"phase": "Failed"})
    assert env.kinds == ["vm_killed"]


def test_a_vm_halted_by_the_upgrade_and_never_restarted(env: Env) -> None:
    env.node("n1")
    env.vm("vm1")
    _migratable_vmi(env, "vm1", "n1", migratable=False)
    mon = env.start()
    _halt(env, "vm1")
    env.vm_status("vm1", "Stopped")
    assert env.kinds == []              # shutting down a non-migratable VM is allowed ...
    end = mon.check_end()               # ... leaving it down is not
    assert [(v["kind"], v["vm"], v["status"]) for v in end] == [
        ("vm_not_running_at_end", "vm1", "Stopped")]


# --------------------------------------------------------------------- hung migration
class _FakeClock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def test_a_hung_migration_does_not_hold_the_dual_running_timer_for_ever() -> None:
    env = Env(dual_running_grace_s=60)
    env.node("n1")
    env.node("n2")
    vmi = _migratable_vmi(env, "vm1", "n1")      # 1 GiB: KubeVirt cancels after 150 s
    env.launcher(vmi, "virt-launcher-vm1-a", "n1")
    mon = env.start()
    clock = _FakeClock(1000.0)
    env.world.clock = clock
    env.c.create({"apiVersion": KV, "kind": "VirtualMachineInstanceMigration",
                  "metadata": {"name": "mig1", "namespace": "default"},
                  "spec": {"vmiName": "vm1"}, "status": {"phase": "Running"}})
    env.launcher(vmi, "virt-launcher-vm1-b", "n2")
    clock.t = 1000.0 + 209
    env.vmi_patch("vm1", {"migrationState": {"startTimestamp": "2026-01-01T00:00:00Z"}})
    assert env.kinds == []              # within KubeVirt's timeout plus the grace
    clock.t = 1000.0 + 211
    assert env.kinds == ["vmi_on_two_nodes"]
    v = mon.violations[0]
    assert v["migrating"] is True and v["nodes"] == ["n1", "n2"]
    assert "KubeVirt cancels it after 150 s" in v["message"]


def test_the_migration_limit_grows_with_guest_memory() -> None:
    env = Env()
    env.node("n1")
    env.c.create({"apiVersion": KV, "kind": "VirtualMachineInstance",
                  "metadata": {"name": "big", "namespace": "default"},
                  "spec": {"domain": {"devices": {}, "memory": {"guest": "16Gi"}}},
                  "status": {"phase": "Running", "nodeName": "n1"}})
    mon = env.start()
    assert mon.migration_limit_s(("default", "big")) == 150 * 16


# ------------------------------------------------------------------------- end state
def _crd(group: str, kind: str, plural: str, version: str,
         namespaced: bool = True) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced" if namespaced else "Cluster",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


PLAN = "management.harvesterhci.io/v1beta1"
HOOK = "harvesterhci.io/pre-hook"


class EndEnv(Env):
    """A cluster the upgrade left exactly as it found it; each test spoils one thing."""

    def __init__(self) -> None:
        super().__init__()
        for ns in ("harvester-system", "kube-system", "fleet-local"):
            self.c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        self.c.create(_crd("management.harvesterhci.io", "UpgradePlan", "upgradeplans",
                           "v1beta1", namespaced=False))
        self.c.create(_crd("harvesterhci.io", "Addon", "addons", "v1beta1"))
        self.c.create(_crd("provisioning.cattle.io", "Cluster", "clusters", "v1"))
        for n in ("n1", "n2"):
            self.node(n)
        self.c.create({"apiVersion": LH, "kind": "Setting",
                       "metadata": {"name": "replica-replenishment-wait-interval",
                                    "namespace": "longhorn-system"}, "value": "600"})
        self.c.create({"apiVersion": "harvesterhci.io/v1beta1", "kind": "Addon",
                       "metadata": {"name": "descheduler", "namespace": "kube-system"},
                       "spec": {"enabled": True, "repo": "r", "chart": "c", "version": "1"}})
        self.c.create({"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
                       "metadata": {"name": "local", "namespace": "fleet-local"},
                       "spec": {"rkeConfig": {"upgradeStrategy": {
                           "controlPlaneDrainOptions": {
                               "preDrainHooks": [{"annotation": HOOK}]}}}}})
        self.c.create({"apiVersion": "v1", "kind": "Secret", "type": "rke.cattle.io/machine-plan",
                       "metadata": {"name": "m1-machine-plan", "namespace": "fleet-local",
                                    "annotations": {"other": "kept"}}})
        self.c.create({"apiVersion": LH, "kind": "Volume",
                       "metadata": {"name": "vol1", "namespace": "longhorn-system"},
                       "spec": {"numberOfReplicas": 2},
                       "status": {"robustness": "healthy", "state": "attached"}})
        for r, node in (("r1", "n1"), ("r2", "n2")):
            self.c.create({"apiVersion": LH, "kind": "Replica",
                           "metadata": {"name": r, "namespace": "longhorn-system"},
                           "spec": {"volumeName": "vol1", "nodeID": node, "failedAt": "",
                                    "healthyAt": "2024-12-01T00:00:00Z"},
                           "status": {"currentState": "running"}})
        self.plan = self.c.create({"apiVersion": PLAN, "kind": "UpgradePlan",
                                   "metadata": {"name": "hvst-upgrade-x"},
                                   "spec": {"version": "v1.6.0"}})

    def finish(self, phase: str = "Succeeded") -> None:
        self.c.patch(PLAN, "UpgradePlan", "hvst-upgrade-x",
                     {"status": {"currentPhase": phase}}, subresource="status")

    def end_kinds(self) -> list[str]:
        assert self.mon is not None
        return [v["kind"] for v in self.mon.check_end()]


@pytest.fixture
def end_env() -> Iterator[EndEnv]:
    env = EndEnv()
    env.start()
    yield env


def test_a_clean_end_state_passes(end_env: EndEnv) -> None:
    end_env.finish()
    assert end_env.end_kinds() == []


def test_replicas_not_back_to_full_count(end_env: EndEnv) -> None:
    end_env.c.patch(LH, "Replica", "r2", {"spec": {"failedAt": "2026-01-01T00:00:00Z"}},
                    "longhorn-system")
    end_env.c.patch(LH, "Volume", "vol1", {"status": {"robustness": "degraded"}},
                    "longhorn-system", subresource="status")
    end_env.finish("Failed")
    assert end_env.end_kinds() == []    # a failed upgrade keeps its state for the resume
    end_env.finish()
    end = end_env.mon.check_end()  # type: ignore[union-attr]
    assert [(v["kind"], v["volume"], v["replicas"], v["wanted"]) for v in end] == [
        ("volume_not_fully_replicated", "vol1", 1, 2)]
    assert "robustness degraded" in end[0]["message"]


def test_a_volume_longhorn_is_still_rebuilding_at_the_end_is_not_counted(
        end_env: EndEnv) -> None:
    # r2 reused for a rebuild (failedAt and healthyAt cleared, to run), waiting for a slot
    end_env.c.patch(LH, "Replica", "r2", {"spec": {"failedAt": "", "healthyAt": "",
                                                   "desireState": "running"}},
                    "longhorn-system")
    end_env.c.patch(LH, "Replica", "r2", {"status": {"currentState": "stopped"}},
                    "longhorn-system", subresource="status")
    end_env.c.patch(LH, "Volume", "vol1", {"status": {"robustness": "degraded"}},
                    "longhorn-system", subresource="status")
    end_env.finish()
    assert end_env.end_kinds() == []
    # not reused: Longhorn is not restoring it, the degraded volume counts
    end_env.c.patch(LH, "Replica", "r2", {"spec": {"desireState": "stopped"}},
                    "longhorn-system")
    assert end_env.end_kinds() == ["volume_not_fully_replicated"]


def test_a_volume_short_at_the_start_must_only_not_be_worse() -> None:
    env = EndEnv()
    env.c.delete(LH, "Replica", "r2", "longhorn-system")
    env.c.patch(LH, "Volume", "vol1", {"status": {"robustness": "degraded"}},
                "longhorn-system", subresource="status")
    env.start()
    env.finish()
    assert env.end_kinds() == []
    env.c.patch(LH, "Replica", "r1", {"spec": {"failedAt": "2026-01-01T00:00:00Z"}},
                "longhorn-system")
    assert env.end_kinds() == ["volume_not_fully_replicated"]


def test_settings_not_restored(end_env: EndEnv) -> None:
    end_env.c.patch(LH, "Setting", "replica-replenishment-wait-interval", {"value": "1800"},
                    "longhorn-system")
    end_env.c.patch("harvesterhci.io/v1beta1", "Addon", "descheduler",
                    {"spec": {"enabled": False}}, "kube-system")
    end_env.finish()
    end = end_env.mon.check_end()  # type: ignore[union-attr]
    assert [(v["kind"], v["setting"], v["value"], v["before"]) for v in end] == [
        ("setting_not_restored", "longhorn.io/replica-replenishment-wait-interval", "1800",
         "600"),
        ("setting_not_restored", "addon/kube-system/descheduler", False, True)]


def test_taint_cordon_and_hook_annotations_left(end_env: EndEnv) -> None:
    end_env.taint("n1")
    end_env.cordon("n2")
    end_env.c.patch("v1", "Secret", "m1-machine-plan", {"metadata": {"annotations": {
        "rke.cattle.io/pre-drain": "{}", HOOK: "{}"}}}, "fleet-local")
    end_env.finish()
    end = end_env.mon.check_end()  # type: ignore[union-attr]
    assert sorted(v["kind"] for v in end) == [
        "hook_annotation_left", "node_left_cordoned", "upgrade_taint_left"]
    hook = next(v for v in end if v["kind"] == "hook_annotation_left")
    assert hook["annotations"] == [HOOK, "rke.cattle.io/pre-drain"]
    assert hook["secret"] == "fleet-local/m1-machine-plan"


def test_a_setting_created_after_the_start_is_baselined_when_created(end_env: EndEnv) -> None:
    end_env.c.create({"apiVersion": LH, "kind": "Setting",
                      "metadata": {"name": "auto-cleanup-system-generated-snapshot",
                                   "namespace": "longhorn-system"}, "value": "true"})
    end_env.c.patch(LH, "Setting", "auto-cleanup-system-generated-snapshot",
                    {"value": "false"}, "longhorn-system")
    end_env.finish()
    end = end_env.mon.check_end()  # type: ignore[union-attr]
    assert [(v["kind"], v["before"]) for v in end] == [("setting_not_restored", "true")]


def test_a_source_launcher_left_running_after_its_migration() -> None:
    env = Env(dual_running_grace_s=60)
    env.node("n1")
    env.node("n2")
    vmi = _migratable_vmi(env, "vm1", "n1")
    env.launcher(vmi, "virt-launcher-vm1-a", "n1")
    mon = env.start()
    clock = _FakeClock(0.0)
    env.world.clock = clock
    env.c.create({"apiVersion": KV, "kind": "VirtualMachineInstanceMigration",
                  "metadata": {"name": "mig1", "namespace": "default"},
                  "spec": {"vmiName": "vm1"}, "status": {"phase": "Running"}})
    env.launcher(vmi, "virt-launcher-vm1-b", "n2")
    clock.t = 100.0
    env.c.patch(KV, "VirtualMachineInstanceMigration", "mig1",
                {"status": {"phase": "Succeeded"}}, "default", subresource="status")
    clock.t = 159.0                     # the grace counts from the migration's end
    assert env.kinds == []
    clock.t = 161.0
    assert env.kinds == ["vmi_on_two_nodes"]
    assert mon.violations[0]["migrating"] is False


def test_deleting_a_migratable_vm_is_no_missed_migration(env: Env) -> None:
    env.node("n1")
    env.node("n2")
    env.vm("vm1")
    _migratable_vmi(env, "vm1", "n1")
    mon = env.start()
    env.c.delete(KV, "VirtualMachine", "vm1", "default")
    env.c.delete(KV, "VirtualMachineInstance", "vm1", "default")
    assert env.kinds == [] and mon.check_end() == []
