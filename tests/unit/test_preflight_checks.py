"""Every pre-flight check: pass, fail and (where it exists) its skip annotation."""

from __future__ import annotations

import datetime as _dt
from typing import Any

import pytest

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    preflight_checks as pc,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    preflight_coexistence as coexistence,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    preflight_controller as controller,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    preflight_version as version,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    preflight_webhook as webhook,
)

GiB = 1024**3
NOW = _dt.datetime(2026, 3, 13, tzinfo=_dt.timezone.utc)


def node(name: str, *, ready: bool = True, cordoned: bool = False, machine: str | None = None,
         managed: bool = True, witness: bool = False, labels: dict[str, str] | None = None
         ) -> dict[str, Any]:
    lab = {"harvesterhci.io/managed": "true"} if managed else {}
    if witness:
        lab["node-role.harvesterhci.io/witness"] = "true"
    lab.update(labels or {})
    return {"metadata": {"name": name, "labels": lab,
                         "annotations": {"cluster.x-k8s.io/machine": machine or f"m-{name}"}},
            "spec": {"unschedulable": cordoned},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def machine(name: str, node_name: str | None, phase: str = "Running") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if node_name:
        status["nodeRef"] = {"name": node_name}
    return {"metadata": {"name": name, "namespace": "fleet-local"}, "status": status}


def plan(name: str, progressing: bool, phase: str = "ISODownloading") -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"currentPhase": phase, "conditions": [
                {"type": "Progressing", "status": "True" if progressing else "False"}]}}


def volume(name: str, *, replicas: int = 3, state: str = "attached",
           robustness: str = "healthy", pvc: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"state": state, "robustness": robustness}
    if pvc:
        status["kubernetesStatus"] = {"namespace": "default", "pvcName": pvc}
    return {"metadata": {"name": name, "namespace": "longhorn-system"},
            "spec": {"numberOfReplicas": replicas}, "status": status}


def vmi(name: str, on: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec,
            "status": {"phase": "Running", "nodeName": on}}


NODES = [node("n1"), node("n2"), node("n3")]


def test_no_concurrent_upgrade() -> None:
    assert not webhook.no_concurrent_upgrade([plan("a", False), plan("me", True)], "me").failed
    res = webhook.no_concurrent_upgrade([plan("other", True)], "me")
    assert res.failed and res.message == 'another upgrade "other" is in progress'
    assert res.objects == ["upgradeplan/other"]


def test_no_cleanup_in_progress() -> None:
    assert not webhook.no_cleanup_in_progress([plan("a", True)], "me").failed
    assert webhook.no_cleanup_in_progress([plan("a", True, "CleaningUp")], "me").failed


def test_version_exists() -> None:
    v = {"metadata": {"name": "v1.6.0"}, "spec": {"isoURL": "http://x/h.iso"}}
    assert webhook.version_exists("v1.6.0", v, None).status == "passed"
    res = webhook.version_exists("v1.6.0", None, None)
    assert res.failed and "not found" in res.message and res.objects == ["version/v1.6.0"]
    assert webhook.version_exists(None, None, None).failed
    assert webhook.version_exists("v1.6.0", {"spec": {}}, None).failed
    assert webhook.version_exists(None, None, "harvester-iso").status == "skipped"


def test_iso_image() -> None:
    assert webhook.iso_image(None, None).status == "skipped"
    assert webhook.iso_image("img", {"metadata": {"name": "img"}}).status == "passed"
    assert webhook.iso_image("img", None).failed


def test_version_eligible() -> None:
    assert version.version_eligible("v1.5.1", "v1.6.0", "v1.5.0", False).status == "passed"
    res = version.version_eligible("v1.4.0", "v1.6.0", "v1.5.0", False)
    assert res.failed and "minimum upgradable" in res.message
    # force does not lift a version skip or a downgrade: each has its own switch
    res = version.version_eligible("v1.4.0", "v1.6.0", "v1.5.0", True)
    assert res.failed and "upgrade_allow_version_skip=true" in res.message
    res = version.version_eligible("v1.4.0", "v1.6.0", "v1.5.0", False, allow_version_skip=True)
    assert res.status == "skipped" and "upgrade_allow_version_skip" in res.message
    res = version.version_eligible("v1.6.0", "v1.5.1", "", True)
    assert res.failed and "downgrade" in res.message and "upgrade_allow_downgrade" in res.message
    assert version.version_eligible("v1.6.0", "v1.5.1", "", False, allow_downgrade=True).status == \
        "skipped"
    assert version.version_eligible("v1.6.0", "v1.6.0", "", True).status == "skipped"
    same = version.version_eligible("v1.6.0", "v1.6.0", "", False)
    assert same.failed and "already runs" in same.message
    assert version.version_eligible(None, "v1.6.0", "", False).failed


def test_nodes_ready() -> None:
    assert not webhook.nodes_ready(NODES).failed
    res = webhook.nodes_ready([node("n1"), node("n2", ready=False), node("n3", cordoned=True)])
    assert res.failed and res.objects == ["node/n2", "node/n3"]
    assert "not Ready" in res.message and "cordoned" in res.message
    assert webhook.nodes_ready([]).failed


def test_cluster_ready() -> None:
    assert not webhook.cluster_ready({"status": {"ready": True}}).failed
    assert webhook.cluster_ready({"status": {"ready": False}}).failed
    assert webhook.cluster_ready(None).failed


def test_machines_running() -> None:
    assert not webhook.machines_running([machine("m-n1", "n1")]).failed
    res = webhook.machines_running([machine("m-n1", "n1", "Provisioning")])
    assert res.failed and res.objects == ["machine/m-n1"]


def test_node_machine_consistency() -> None:
    machines = [machine(f"m-{n}", n) for n in ("n1", "n2", "n3")]
    assert not webhook.node_machine_consistency(NODES, machines).failed
    res = webhook.node_machine_consistency(NODES, machines[:2])
    assert res.failed and "3 nodes but 2 machines" in res.message and "node/n3" in res.objects
    res = webhook.node_machine_consistency([node("n1", managed=False)], [machine("m-n1", "n1")])
    assert res.failed and "harvesterhci.io/managed" in res.message
    res = webhook.node_machine_consistency([node("n1")], [machine("m-n1", "other")])
    assert res.failed and "does not refer" in res.message
    res = webhook.node_machine_consistency([node("n1")], [machine("m-n1", None)])
    assert res.failed and "no nodeRef" in res.message


def test_volumes_healthy() -> None:
    vols = [volume("a"), volume("b", robustness="degraded", pvc="data")]
    res = webhook.volumes_healthy(vols, 3)
    assert res.failed and res.objects == ["default/data"]
    assert webhook.volumes_healthy(vols, 2).status == "skipped"
    assert not webhook.volumes_healthy([volume("a")], 3).failed


def test_single_replica_volumes_and_skip_annotation() -> None:
    attached = volume("a", replicas=1, state="attached")
    detached = volume("b", replicas=1, state="detached")
    assert not webhook.single_replica_volumes([volume("c")], {}).failed
    res = webhook.single_replica_volumes([detached], {})
    assert res.failed and "skip-single-replica-detached-vol" in res.message
    for key in ("management.harvesterhci.io/skip-single-replica-detached-vol",
                "harvesterhci.io/skipSingleReplicaDetachedVol"):
        assert not webhook.single_replica_volumes([detached], {key: "true"}).failed
        assert webhook.single_replica_volumes([attached, detached], {key: "true"}).objects == [
            "volume/a"]


def test_vm_backups_and_schedules() -> None:
    done = {"metadata": {"name": "b1", "namespace": "default"}, "status": {"readyToUse": True}}
    errored = {"metadata": {"name": "b2", "namespace": "default"}, "status": {"error": {}}}
    errored["status"]["error"] = {"message": "x"}
    running = {"metadata": {"name": "b3", "namespace": "default"}, "status": {}}
    assert not webhook.vm_backups([done, errored]).failed
    assert webhook.vm_backups([running]).objects == ["default/b3"]
    sched = {"metadata": {"name": "s", "namespace": "default"}, "status": {"suspended": False}}
    assert webhook.backup_schedules([sched]).failed
    sched["status"]["suspended"] = True
    assert not webhook.backup_schedules([sched]).failed


def test_managed_charts_and_bundles() -> None:
    ok = {"metadata": {"name": "harvester", "namespace": "fleet-local"},
          "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    bad = {"metadata": {"name": "harvester-crd", "namespace": "fleet-local"},
           "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    assert not webhook.managed_charts([ok]).failed
    assert webhook.managed_charts([ok, bad]).objects == ["fleet-local/harvester-crd"]
    assert webhook.fleet_bundles(None).status == "skipped"
    assert webhook.fleet_bundles([bad]).failed and not webhook.fleet_bundles([ok]).failed


def test_addons() -> None:
    ok = {"metadata": {"name": "a", "namespace": "x"}, "status": {"status": "AddonDeployed"}}
    busy = {"metadata": {"name": "b", "namespace": "x"}, "status": {"status": "AddonEnabling"}}
    assert not webhook.addons([ok]).failed
    assert webhook.addons([ok, busy]).objects == ["x/b"]


def test_pending_migrations() -> None:
    done = {"metadata": {"name": "m1", "namespace": "d"}, "status": {"phase": "Succeeded"}}
    pending = {"metadata": {"name": "m2", "namespace": "d"}, "status": {"phase": "Scheduling"}}
    assert not webhook.stuck_migrations([done]).failed
    assert webhook.stuck_migrations([done, pending]).objects == ["d/m2"]


def test_pause_nodes_exist() -> None:
    assert not webhook.pause_nodes_exist(["n1"], NODES).failed
    assert webhook.pause_nodes_exist(["n9"], NODES).objects == ["node/n9"]


def test_non_migratable_rules() -> None:
    assert webhook.non_migratable_reason(vmi("a", "n1"), NODES) is None
    assert webhook.non_migratable_reason(vmi("a", "n1", nodeSelector={"x": "y"}), NODES) == \
        "has a nodeSelector"
    assert webhook.non_migratable_reason(
        vmi("a", "n1", domain={"devices": {"hostDevices": [{"name": "gpu"}]}}), NODES) == \
        "uses host devices"
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    assert webhook.non_migratable_reason(vmi("a", "n1", affinity=aff), NODES) is not None
    zoned = [node("n1"), node("n2", labels={"zone": "a"})]
    assert webhook.non_migratable_reason(vmi("a", "n1", affinity=aff), zoned) is None
    witness = [node("n1"), node("w", witness=True)]
    assert webhook.non_migratable_reason(vmi("a", "n1"), witness) == "only one non-witness node"


def test_non_migratable_vms_and_restore_vm() -> None:
    vmis = [vmi("pinned", "n2", nodeSelector={"kubernetes.io/hostname": "n2"}),
            vmi("web", "n1")]
    res = webhook.non_migratable_vms(vmis, NODES, restore_vm=False)
    assert res.failed and res.objects == ["default/pinned"]
    res = webhook.non_migratable_vms(vmis, NODES, restore_vm=True)
    assert res.status == "passed" and "will be shut down" in res.message
    assert webhook.non_migratable_vms([vmi("web", "n1")], NODES, False).status == "passed"


def test_disk_space_and_skip_annotation() -> None:
    disks: dict[str, controller.NodeDisk | str] = {
        "n1": controller.NodeDisk(80 * GiB, 500 * GiB),
        "n2": controller.NodeDisk(420 * GiB, 500 * GiB)}
    res = controller.disk_space(disks, {})
    assert res.failed and res.objects == ["node/n2"]
    assert res.message.startswith('node "n2" will reach 86.60% storage space after loading '
                                  "new images, higher than kubelet image garbage collection "
                                  "threshold 85%")
    assert not controller.disk_space({"n1": disks["n1"]}, {}).failed
    assert controller.disk_space({"n1": "connection refused"}, {}).failed
    # no capacity reported is no room known: fails, naming the node
    res = controller.disk_space({"n1": disks["n1"], "n3": controller.NodeDisk(0, 0)}, {})
    assert res.failed and res.objects == ["node/n3"] and "no filesystem capacity" in res.message
    for key in ("management.harvesterhci.io/skip-garbage-collection-threshold-check",
                "harvesterhci.io/skipGarbageCollectionThresholdCheck"):
        assert controller.disk_space(disks, {key: "true"}).status == "skipped"
    assert controller.disk_space(disks, {"harvesterhci.io/skipGarbageCollectionThresholdCheck":
                                 "false"}).failed


def test_certificates_and_min_days_annotation() -> None:
    soon = {"10.0.0.1:6443": NOW + _dt.timedelta(days=5)}
    later = {"10.0.0.1:6443": NOW + _dt.timedelta(days=30)}
    res = controller.certificates(soon, NOW, {})
    assert res.failed and "rotate the RKE2 certificates" in res.message
    assert not controller.certificates(later, NOW, {}).failed
    for key in ("management.harvesterhci.io/min-certs-expiration-in-day",
                "harvesterhci.io/minCertsExpirationInDay"):
        assert not controller.certificates(soon, NOW, {key: "3"}).failed
        assert controller.certificates(later, NOW, {key: "60"}).failed
        assert controller.certificates(later, NOW, {key: "0"}).failed
        assert controller.certificates(later, NOW, {key: "abc"}).failed
    assert controller.certificates({}, NOW, {}).status == "skipped"
    assert controller.certificates({"h:6443": "timeout"}, NOW, {}).failed
    # one endpoint unread is one certificate unchecked: fails, naming it
    res = controller.certificates({**later, "10.0.0.2:6443": "timed out"}, NOW, {})
    assert res.failed and "10.0.0.2" in res.message


def healthy_facts() -> pc.Facts:
    return pc.Facts(
        plan_name="p", plans=[plan("p", True, "Initializing")], version_name="v1.6.0",
        version_obj={"spec": {"isoURL": "http://x", "minUpgradableVersion": "v1.5.0",
                              "isoChecksum": "0" * 128}},
        current_version="v1.5.1", nodes=NODES,
        machines=[machine(f"m-{n}", n) for n in ("n1", "n2", "n3")],
        cluster={"status": {"ready": True}}, volumes=[volume("a")],
        disks={"n1": controller.NodeDisk(10 * GiB, 500 * GiB)},
        cert_expiry={"h:6443": NOW + _dt.timedelta(days=300)}, now=NOW)


def test_run_all_passes_on_a_healthy_cluster() -> None:
    results = pc.run_all(healthy_facts())
    assert [r.name for r in results if r.failed] == []
    assert {r.name for r in results} == set(pc.CHECKS)
    assert pc.summary(results).startswith("all ")


def test_run_all_reports_every_failure_by_name() -> None:
    facts = healthy_facts()
    facts.nodes = [node("n1", ready=False), node("n2"), node("n3")]
    facts.cluster = None
    results = pc.run_all(facts)
    failed = [r.name for r in results if r.failed]
    assert failed == ["nodes_ready", "cluster_ready"]
    assert "nodes_ready: nodes must be Ready" in pc.summary(results)


@pytest.mark.parametrize("key", ["management.harvesterhci.io/skip-webhook",
                                 "harvesterhci.io/skipWebhook"])
def test_skip_webhook_annotation_skips_webhook_family(key: str) -> None:
    facts = healthy_facts()
    facts.cluster = None
    facts.plan_annotations = {key: "true"}
    facts.disks = {"n1": controller.NodeDisk(490 * GiB, 500 * GiB)}
    by_name = {r.name: r for r in pc.run_all(facts)}
    assert by_name["cluster_ready"].status == "skipped"
    assert by_name["disk_space"].failed


def test_skip_list() -> None:
    facts = healthy_facts()
    facts.cluster = None
    by_name = {r.name: r for r in pc.run_all(facts, skip=["cluster_ready"])}
    assert by_name["cluster_ready"].status == "skipped"


def _upgrade(name: str, state: str | None) -> dict[str, Any]:
    labels = {"harvesterhci.io/upgradeState": state} if state else {}
    return {"metadata": {"name": name, "namespace": "harvester-system", "labels": labels},
            "spec": {"version": "v1.6.0"}}


def test_no_legacy_upgrade_uses_harvesters_in_progress_rule() -> None:
    assert coexistence.no_legacy_upgrade(None).status == "skipped"
    assert coexistence.no_legacy_upgrade([]).status == "passed"
    done = [_upgrade("hvst-upgrade-a", "Succeeded"), _upgrade("hvst-upgrade-b", "Failed")]
    assert coexistence.no_legacy_upgrade(done).status == "passed"
    for state in (None, "PreparingRepo", "UpgradingNodes"):
        res = coexistence.no_legacy_upgrade([*done, _upgrade("hvst-upgrade-c", state)])
        assert res.failed and res.objects == ["upgrade/harvester-system/hvst-upgrade-c"]
        assert res.family == "coexistence"


def test_no_upgrade_manager_addon_or_chart() -> None:
    addon = {"metadata": {"name": "harvester-upgrade-manager", "namespace": "harvester-system"},
             "spec": {"enabled": True}}
    assert coexistence.no_upgrade_manager([addon], []).failed
    addon["spec"]["enabled"] = False
    assert coexistence.no_upgrade_manager([addon], []).status == "passed"
    dep = {"metadata": {"name": "harvester-upgrade-manager-controller-manager",
                        "namespace": "harvester-system",
                        "labels": {"app.kubernetes.io/name": "harvester-upgrade-manager"}},
           "spec": {"replicas": 1}}
    res = coexistence.no_upgrade_manager([addon], [dep])
    assert res.failed and "deployment/harvester-system/" in res.message


def _rancher(strategy: dict[str, Any] | None) -> dict[str, Any]:
    rke = {"upgradeStrategy": strategy} if strategy is not None else {}
    return {"metadata": {"name": "local", "namespace": "fleet-local"},
            "spec": {"kubernetesVersion": "v1.32.4+rke2r1", "rkeConfig": rke},
            "status": {"ready": True}}


HOOKED = {"controlPlaneConcurrency": "1",
          "controlPlaneDrainOptions": {
              "enabled": True, "preDrainHooks": [{"annotation": "harvesterhci.io/pre-hook"}],
              "postDrainHooks": [{"annotation": "harvesterhci.io/post-hook"}]},
          "workerDrainOptions": {"enabled": True}}


def test_single_node_drain_hooks_fail_only_on_one_node() -> None:
    one = [node("n1")]
    res = coexistence.single_node_drain_hooks(_rancher(HOOKED), one)
    assert res.failed and res.family == "coexistence"
    assert res.objects == ["clusters.provisioning.cattle.io/fleet-local/local"]
    assert "controlPlaneDrainOptions.preDrainHooks harvesterhci.io/pre-hook" in res.message
    assert "controlPlaneDrainOptions.postDrainHooks harvesterhci.io/post-hook" in res.message
    assert '{"spec":{"rkeConfig":{"upgradeStrategy":null}}}' in res.message
    # a witness is no second node for the single-node path
    assert coexistence.single_node_drain_hooks(_rancher(HOOKED),
                                               [*one, node("w", witness=True)]).failed
    # a hook without an annotation is still a declared hook (Rancher then sets pre-drain)
    bare = {"workerDrainOptions": {"postDrainHooks": [{}]}}
    res = coexistence.single_node_drain_hooks(_rancher(bare), one)
    assert res.failed and "workerDrainOptions.postDrainHooks (no annotation)" in res.message
    for ok in (None, {}, {"controlPlaneDrainOptions": {"enabled": True},
                          "workerDrainOptions": {"enabled": False}}):
        assert coexistence.single_node_drain_hooks(_rancher(ok), one).status == "passed"
    assert coexistence.single_node_drain_hooks(_rancher(HOOKED), NODES).status == "passed"
    assert coexistence.single_node_drain_hooks(None, one).status == "skipped"


def test_single_node_drain_hooks_in_run_all_not_skipped_by_skip_webhook() -> None:
    facts = healthy_facts()
    facts.nodes = [node("n1")]
    facts.machines = [machine("m-n1", "n1")]
    facts.cluster = _rancher(HOOKED)
    facts.plan_annotations = {"management.harvesterhci.io/skip-webhook": "true"}
    res = {r.name: r for r in pc.run_all(facts)}
    assert res["single_node_drain_hooks"].failed
    assert "single_node_drain_hooks: single-node cluster but" in pc.summary(list(res.values()))


def test_skip_webhook_does_not_skip_coexistence() -> None:
    facts = pc.Facts(plan_annotations={"management.harvesterhci.io/skip-webhook": "true"},
                     legacy_upgrades=[_upgrade("u", "UpgradingNodes")])
    res = {r.name: r for r in pc.run_all(facts)}
    assert res["no_legacy_upgrade"].failed
    assert res["nodes_ready"].status == "skipped"


def test_a_check_whose_kind_is_not_served_fails_naming_the_kind() -> None:
    # Longhorn's volumes CRD removed: no volume read is not "0 volumes checked"
    facts = healthy_facts()
    facts.unserved = {"volumes": "Volume.longhorn.io/v1beta2",
                      "bundles": "Bundle.fleet.cattle.io/v1alpha1"}
    by_name = {r.name: r for r in pc.run_all(facts)}
    for name in ("volumes_healthy", "single_replica_volumes"):
        assert by_name[name].failed, by_name[name]
        assert "Volume.longhorn.io/v1beta2" in by_name[name].message
        assert by_name[name].objects == ["kind/Volume.longhorn.io/v1beta2"]
    assert by_name["fleet_bundles"].failed
    assert "Bundle.fleet.cattle.io" in by_name["fleet_bundles"].message
    assert not by_name["vm_backups"].failed
    # an explicit skip is still honoured
    assert {r.name: r for r in pc.run_all(facts, skip=["volumes_healthy"])}[
        "volumes_healthy"].status == "skipped"


def test_iso_verified() -> None:
    ok = {"spec": {"isoURL": "https://r/v1.6.0.iso", "isoChecksum": "a1" * 64}}
    assert version.iso_verified("v1.6.0", ok, None, False).status == "passed"
    none = {"spec": {"isoURL": "http://r/v1.6.0.iso"}}
    res = version.iso_verified("v1.6.0", none, None, False)
    assert res.failed and "no spec.isoChecksum" in res.message and "http://" in res.message
    assert "upgrade_allow_unverified_iso" in res.message and res.family == "input"
    assert version.iso_verified("v1.6.0", none, None, True).status == "skipped"
    assert version.iso_verified(None, None, "harvester-system/iso", False).status == "skipped"
    # not the webhook's: the skip-webhook annotation does not skip it
    facts = healthy_facts()
    facts.version_obj = none
    facts.plan_annotations = {"management.harvesterhci.io/skip-webhook": "true"}
    assert {r.name: r for r in pc.run_all(facts)}["iso_verified"].failed
