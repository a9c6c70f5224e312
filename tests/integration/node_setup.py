"""A simulated cluster brought to where the node loop starts, and read as its tests read it.

``at_cluster_upgraded`` leaves the cluster as ClusterUpgrade does (the UpgradePlan CRD and a
plan in ``ClusterUpgraded`` with ``releaseMetadata``, the harvester chart and KubeVirt rolled,
the upgrade repo serving the ISO, the rancher-system-agent drop-in on every node) without
running the cluster phases; the readers give the VMs, the drain order and the fewest
migrations a rolling upgrade needs. Used by test_node_upgrade.py, test_node_cycle.py,
test_real_cluster.py and test_module_examples.py.
"""

from __future__ import annotations

import re
import time
from typing import Any

from harvester_sim.testing import wait_for
from testkit import PLAN_API, install_plan_crd

PLAN = "hvst-upgrade-test"
WITNESS = "node-role.harvesterhci.io/witness"


def _release(sim: Any, version: str) -> dict[str, str]:
    from harvester_sim.releases import catalog
    try:
        rel = sim.world.extras["releases"].get(version)   # the scenario's catalog
    except Exception:  # noqa: BLE001 - fall back to the built-in table
        rel = catalog.get_release(version)
    return dict(rel.release_metadata())


def roll_harvester_chart(sim: Any, rel: dict[str, str], timeout: float = 120.0) -> None:
    """What upgrade_manifests.sh leaves before the nodes: the harvester ManagedChart at the
    release's chart (Harvester's API and virt-operator roll) and KubeVirt at its version
    (``wait_kubevirt``: observedKubeVirtVersion = the release's ``kubevirt``, Deployed)."""
    c = sim.world.client

    def fn(cur: dict[str, Any]) -> dict[str, Any]:
        cur["spec"]["version"] = rel["harvesterChart"]
        return cur
    c.modify("management.cattle.io/v3", "ManagedChart", "harvester", fn, namespace="fleet-local")

    def at_release() -> bool:
        kv = c.try_get("kubevirt.io/v1", "KubeVirt", "kubevirt", namespace="harvester-system")
        st = (kv or {}).get("status") or {}
        return bool(st.get("observedKubeVirtVersion") == rel["kubevirt"]
                    and st.get("phase") == "Deployed")

    wait_for(at_release, timeout, f"KubeVirt at {rel['kubevirt']}, Deployed", poll=0.05)


def at_cluster_upgraded(sim: Any, *, version: str = "v1.6.0", restore_vm: bool = True,
                        pause: list[str] | None = None, single: bool = False,
                        plan: str = PLAN) -> dict[str, str]:
    """Leave the cluster as ClusterUpgrade does, with an UpgradePlan ``plan`` in
    ClusterUpgraded: the Rancher cluster untouched, the rancher-system-agent drop-in on every
    node."""
    c = sim.world.client
    install_plan_crd(sim)
    rel = _release(sim, version)
    roll_harvester_chart(sim, rel)
    # upgrade_manifests.sh's patch_longhorn_settings, with the harvester chart's upgrade
    from harvester_sim.programs.toolkit import patch_longhorn_settings
    patch_longhorn_settings(c, lambda _m: None)
    nodes = [n["metadata"]["name"] for n in c.list("v1", "Node")]
    spec: dict[str, Any] = {"version": version, "restoreVM": restore_vm}
    if pause:
        spec["nodeUpgradeOption"] = {"pauseNodes": pause}
    ts = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {
        "currentPhase": "ClusterUpgraded", "previousVersion": "v1.5.1",
        "releaseMetadata": rel,
        "phaseTransitionTimestamps": [{"phase": "ClusterUpgraded",
                                       "phaseTransitionTimestamp": ts}],
        "conditions": [{"type": "Progressing", "status": "True", "reason": "ClusterUpgraded",
                        "message": "", "lastTransitionTime": ts},
                       {"type": "Available", "status": "True", "reason": "Executable",
                        "message": "", "lastTransitionTime": ts}],
        "nodeUpgradeStatuses": {n: {"state": "ImagePreloaded"} for n in nodes},
    }
    if single:
        status["singleNode"] = nodes[0]
    c.create({"apiVersion": PLAN_API, "kind": "UpgradePlan", "metadata": {"name": plan},
              "spec": spec, "status": status})
    _repo(sim, version, plan)
    # what upgrade_manifests.sh's skip-restart Plan leaves on every node: the drop-in that
    # keeps RKE2 from restarting until the node's pre-drain (or single-node) Job removes it
    kubelet = sim.world.controllers["kubelet"]
    dropin = "/run/systemd/system/rancher-system-agent.service.d"
    for n in nodes:
        files = kubelet.host_files(n)
        files[f"{dropin}/override.conf"] = \
            f"[Service]\nEnvironmentFile=-{dropin}/10-harvester-upgrade.env\n"
        files[f"{dropin}/10-harvester-upgrade.env"] = "INSTALL_RKE2_SKIP_ENABLE=true\n"
        kubelet.restart_agent(n)
    return rel


def _repo(sim: Any, version: str, plan: str) -> None:
    """The upgrade repo RepoCreate leaves (Deployment + Service ``<plan>-repo`` serving the
    ISO): the toolkit's node scripts read the release from it (lib.sh ``wait_repo``,
    ``detect_repo``)."""
    from harvester_sim.releases import catalog, iso
    try:
        rel = sim.world.extras["releases"].get(version)
    except Exception:  # noqa: BLE001 - fall back to the built-in table
        rel = catalog.get_release(version)
    c, ns, name = sim.world.client, "harvester-system", f"{plan}-repo"
    sim.world.extras.setdefault("image_blobs", {})[(ns, f"{plan}-iso")] = iso.build_iso(rel)
    # the ISO image's claim, as ISODownload leaves it; Longhorn's provisioner binds it (a pod
    # whose claim is missing or unbound is not scheduled)
    c.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
              "metadata": {"name": f"{plan}-iso", "namespace": ns},
              "spec": {"accessModes": ["ReadWriteMany"], "volumeMode": "Filesystem",
                       "storageClassName": "harvester-longhorn",
                       "resources": {"requests": {"storage": "10Gi"}}}})
    sel = {"app": name}
    c.create({"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": name, "namespace": ns},
              "spec": {"replicas": 1, "selector": {"matchLabels": sel},
                       "template": {"metadata": {"labels": sel}, "spec": {
                           "containers": [{"name": "nginx-iso-server",
                                           "image": "rancher/mirrored-library-nginx:1.24.0",
                                           "ports": [{"containerPort": 80}]}],
                           "volumes": [{"name": "iso", "persistentVolumeClaim": {
                               "claimName": f"{plan}-iso"}}]}}}})
    c.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
              "spec": {"selector": sel, "ports": [{"port": 80, "targetPort": 80}]}})


def get_plan(sim: Any, plan: str = PLAN) -> dict[str, Any]:
    return sim.world.client.get(PLAN_API, "UpgradePlan", plan)  # type: ignore[no-any-return]


def vmis(sim: Any) -> dict[str, dict[str, Any]]:
    return {f"{v['metadata']['namespace']}/{v['metadata']['name']}": v
            for v in sim.world.client.list("kubevirt.io/v1", "VirtualMachineInstance")}


def running_vms(sim: Any) -> set[str]:
    return {k for k, v in vmis(sim).items() if v.get("status", {}).get("phase") == "Running"}


def order_of(sim: Any) -> list[str]:
    """The drain order as the collection computes it (node_order, used by the play)."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_order
    c = sim.world.client
    facts = node_order.node_facts(c.list("v1", "Node"),
                                  c.list("cluster.x-k8s.io/v1beta1", "Machine",
                                         namespace="fleet-local"), [])
    return [f["name"] for f in facts]


def wait_settled(sim: Any, timeout: float = 20.0) -> None:
    """Every VM the scenario starts is Running before the test reads the starting point."""
    deadline = time.monotonic() + timeout
    want = {f"{v['metadata']['namespace']}/{v['metadata']['name']}"
            for v in sim.world.client.list("kubevirt.io/v1", "VirtualMachine")
            if (v.get("spec") or {}).get("runStrategy") in ("Always", "RerunOnFailure")
            or (v.get("spec") or {}).get("running") is True}
    while time.monotonic() < deadline and not want <= running_vms(sim):
        time.sleep(0.05)


def _expr_ok(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", "In"), expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def could_run_on(vmi: dict[str, Any], node: dict[str, Any]) -> bool:
    """Scheduling constraints of a VM vs a node (no capacity): witness nodes never run VMs."""
    labels = node["metadata"].get("labels") or {}
    if WITNESS in labels:
        return False
    spec = vmi.get("spec") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
             .get("nodeSelectorTerms") or [])
    return not terms or any(all(_expr_ok(e, labels) for e in t.get("matchExpressions") or [])
                            for t in terms)


def min_migrations(start: dict[str, dict[str, Any]], nodes: dict[str, dict[str, Any]],
                   order: list[str], migratable: set[str]) -> int:
    """The fewest migrations a rolling upgrade in ``order`` needs: a VM moves once when a node
    drained before its own can run it (that node is upgraded by then), else twice (nothing
    it may run on is upgraded yet: it goes to a pending node and moves again from there).
    On three-node this is "every migratable VM once, plus once more for those on node 1"."""
    pos = {n: i for i, n in enumerate(order)}
    total = 0
    for key in migratable:
        vmi = start[key]
        here = vmi["status"]["nodeName"]
        earlier = [nodes[n] for n in order[:pos[here]]]
        total += 1 if any(could_run_on(vmi, n) for n in earlier) else 2
    return total


def nodes_in_play_order(output: str) -> list[str]:
    """The nodes in the order the serial play took them: the per-node task of either
    ``node_upgrade_mode`` (node: the node_cycle call; steps: the pre-drain wait)."""
    tasks = ("Upgrade in one module call the node", "Wait for Rancher to ask to drain")
    return re.findall(rf"TASK \[[^\]]*(?:{'|'.join(map(re.escape, tasks))}) ([\w.-]+)\]",
                      output)
