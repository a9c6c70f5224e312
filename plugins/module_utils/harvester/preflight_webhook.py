"""Pre-flight checks of the toolkit's validating webhook (reference §E.1): other plans, the
target, the nodes and machines, Rancher, Longhorn, backups, charts, add-ons and the VMs that
must be able to leave their node.

Family ``webhook``: the skip-webhook annotation skips all of them
(:func:`preflight_checks.run_all`).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.preflight_result import (
    CheckResult,
    annotation_true,
    annotations_of,
    condition_of,
    failed,
    is_witness,
    labels_of,
    name_of,
    node_ready,
    passed,
    passed_unless,
    skipped,
)


def no_concurrent_upgrade(plans: list[dict[str, Any]], own: str | None) -> CheckResult:
    name = "no_concurrent_upgrade"
    others = [p for p in plans if (p.get("metadata") or {}).get("name") != own
              and (condition_of(p, "Progressing") or {}).get("status") == "True"]
    if others:
        other = others[0]["metadata"]["name"]
        return failed(name, f'another upgrade "{other}" is in progress',
                      [f"upgradeplan/{p['metadata']['name']}" for p in others])
    return passed(name)


def no_cleanup_in_progress(plans: list[dict[str, Any]], own: str | None) -> CheckResult:
    name = "no_cleanup_in_progress"
    busy = [p["metadata"]["name"] for p in plans if p["metadata"].get("name") != own
            and (p.get("status") or {}).get("currentPhase") == "CleaningUp"]
    if busy:
        return failed(name, f'upgrade "{busy[0]}" is still cleaning up',
                      [f"upgradeplan/{n}" for n in busy])
    return passed(name)


def version_exists(version_name: str | None, version_obj: dict[str, Any] | None,
                   image: str | None) -> CheckResult:
    name = "version_exists"
    if image:
        return skipped(name, "spec.image is set; no Version needed")
    if not version_name:
        return failed(name, "no target version given and no Version newer than the running "
                      "release exists", [])
    if version_obj is None:
        return failed(name, f'Version "{version_name}" not found in {c.UPGRADE_NS}',
                      [f"version/{version_name}"])
    if not (version_obj.get("spec") or {}).get("isoURL"):
        return failed(name, f'Version "{version_name}" has no spec.isoURL',
                      [f"version/{version_name}"])
    return passed(name, f"Version {version_name} found")


def iso_image(image: str | None, image_obj: dict[str, Any] | None) -> CheckResult:
    name = "iso_image"
    if not image:
        return skipped(name, "no pre-uploaded image (spec.image) used")
    if image_obj is None:
        return failed(name, f'VirtualMachineImage "{image}" not found', [image])
    return passed(name, f"VirtualMachineImage {image} found")


def nodes_ready(nodes: list[dict[str, Any]]) -> CheckResult:
    name = "nodes_ready"
    bad = [f"node/{n['metadata']['name']} ({'not Ready' if not node_ready(n) else 'cordoned'})"
           for n in nodes if not node_ready(n) or (n.get("spec") or {}).get("unschedulable")]
    if bad:
        return failed(name, "nodes must be Ready and schedulable: " + ", ".join(sorted(bad)),
                      [b.split(" ")[0] for b in bad])
    if not nodes:
        return failed(name, "no nodes found", [])
    return passed(name, f"{len(nodes)} nodes Ready and schedulable")


def cluster_ready(cluster: dict[str, Any] | None) -> CheckResult:
    name = "cluster_ready"
    ref = f"clusters.provisioning.cattle.io/{c.FLEET_NS}/{c.RANCHER_CLUSTER_NAME}"
    if cluster is None:
        return failed(name, f"{ref} not found", [ref])
    if not (cluster.get("status") or {}).get("ready"):
        return failed(name, f"{ref} is not ready", [ref])
    return passed(name)


def machines_running(machines: list[dict[str, Any]]) -> CheckResult:
    name = "machines_running"
    bad = [f"machine/{m['metadata']['name']}" for m in machines
           if (m.get("status") or {}).get("phase") != "Running"]
    return passed_unless(name, bad, "machines not Running: ")


def node_machine_consistency(nodes: list[dict[str, Any]], machines: list[dict[str, Any]]
                             ) -> CheckResult:
    name = "node_machine_consistency"
    problems: list[str] = []
    objects: list[str] = []
    by_machine = {m["metadata"]["name"]: m for m in machines}
    if len(nodes) != len(machines):
        problems.append(f"{len(nodes)} nodes but {len(machines)} machines")
    for m in machines:
        if not ((m.get("status") or {}).get("nodeRef") or {}).get("name"):
            problems.append(f"machine {m['metadata']['name']} has no nodeRef")
            objects.append(f"machine/{m['metadata']['name']}")
    for n in nodes:
        node = n["metadata"]["name"]
        machine = annotations_of(n).get(c.ANN_MACHINE)
        if labels_of(n).get(c.LABEL_MANAGED) != "true":
            problems.append(f"node {node} lacks label {c.LABEL_MANAGED}=true")
            objects.append(f"node/{node}")
        if not machine:
            problems.append(f"node {node} lacks annotation {c.ANN_MACHINE}")
            objects.append(f"node/{node}")
        elif machine not in by_machine:
            problems.append(f"node {node} points to missing machine {machine}")
            objects.append(f"node/{node}")
        elif ((by_machine[machine].get("status") or {}).get("nodeRef") or {}).get(
                "name") != node:
            problems.append(f"machine {machine} does not refer to node {node}")
            objects += [f"node/{node}", f"machine/{machine}"]
    if problems:
        return failed(name, "; ".join(problems), objects)
    return passed(name)


def _volume_ref(v: dict[str, Any]) -> str:
    ks = (v.get("status") or {}).get("kubernetesStatus") or {}
    if ks.get("namespace") and ks.get("pvcName"):
        return f"{ks['namespace']}/{ks['pvcName']}"
    return f"volume/{v['metadata']['name']}"


def volumes_healthy(volumes: list[dict[str, Any]], node_count: int) -> CheckResult:
    name = "volumes_healthy"
    if node_count < 3:
        return skipped(name, "degraded volumes are only refused on clusters of 3+ nodes")
    bad = [_volume_ref(v) for v in volumes
           if (v.get("status") or {}).get("robustness") == "degraded"]
    return passed_unless(name, bad, "degraded Longhorn volumes: ",
                         f"{len(volumes)} volumes checked")


def single_replica_volumes(volumes: list[dict[str, Any]], plan_annotations: dict[str, str]
                           ) -> CheckResult:
    name = "single_replica_volumes"
    skip_detached = annotation_true(plan_annotations, c.ANN_SKIP_SINGLE_REPLICA_DETACHED)
    active, detached = [], []
    for v in volumes:
        if int((v.get("spec") or {}).get("numberOfReplicas") or 0) != 1:
            continue
        state = (v.get("status") or {}).get("state")
        if state in ("attached", "attaching", "creating"):
            active.append(_volume_ref(v))
        else:
            detached.append(_volume_ref(v))
    bad = active + ([] if skip_detached else detached)
    if bad:
        msg = "single-replica Longhorn volumes: " + ", ".join(sorted(bad))
        if detached and not skip_detached:
            msg += (f" (detached ones can be allowed with annotation "
                    f"{c.ANN_SKIP_SINGLE_REPLICA_DETACHED[0]}: \"true\")")
        return failed(name, msg, bad)
    if detached:
        return passed(name, "detached single-replica volumes allowed by annotation: "
                      + ", ".join(sorted(detached)))
    return passed(name)


def vm_backups(backups: list[dict[str, Any]]) -> CheckResult:
    name = "vm_backups"
    bad = [name_of(b) for b in backups if not (b.get("status") or {}).get("readyToUse")
           and not (b.get("status") or {}).get("error")]
    return passed_unless(name, bad, "VM backups in progress: ")


def backup_schedules(schedules: list[dict[str, Any]]) -> CheckResult:
    name = "backup_schedules"
    bad = [name_of(s) for s in schedules if not (s.get("status") or {}).get("suspended")]
    return passed_unless(name, bad,
                         "VM backup schedules must be suspended during the upgrade: ")


def managed_charts(charts: list[dict[str, Any]]) -> CheckResult:
    name = "managed_charts"
    bad = [name_of(ch) for ch in charts
           if (condition_of(ch, "Ready") or {}).get("status") != "True"]
    return passed_unless(name, bad, "ManagedCharts not Ready: ")


def fleet_bundles(bundles: list[dict[str, Any]] | None) -> CheckResult:
    name = "fleet_bundles"
    if bundles is None:
        return skipped(name, "Fleet bundles are not served by this cluster")
    bad = [name_of(b) for b in bundles if condition_of(b, "Ready") is not None
           and (condition_of(b, "Ready") or {}).get("status") != "True"]
    return passed_unless(name, bad, "Fleet bundles not Ready: ")


ADDON_TRANSITIONS = ("AddonEnabling", "AddonDisabling", "AddonUpdating", "AddonDeploying")


def addons(addon_objs: list[dict[str, Any]]) -> CheckResult:
    name = "addons"
    bad = [name_of(a) for a in addon_objs
           if (a.get("status") or {}).get("status") in ADDON_TRANSITIONS]
    return passed_unless(name, bad, "addons being enabled, disabled or updated: ")


def stuck_migrations(migrations: list[dict[str, Any]]) -> CheckResult:
    name = "no_pending_migrations"
    bad = [name_of(m) for m in migrations
           if (m.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    return passed_unless(name, bad, "VM migrations still running or pending: ")


def pause_nodes_exist(pause: list[str], nodes: list[dict[str, Any]]) -> CheckResult:
    name = "pause_nodes_exist"
    known = {n["metadata"]["name"] for n in nodes}
    missing = [p for p in pause if p not in known]
    if missing:
        return failed(name, "pauseNodes lists unknown nodes: " + ", ".join(sorted(missing)),
                      [f"node/{m}" for m in missing])
    return passed(name)


def _node_matches_term(node: dict[str, Any], term: dict[str, Any]) -> bool:
    labels = labels_of(node)
    for expr in term.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def non_migratable_reason(vmi: dict[str, Any], nodes: list[dict[str, Any]]) -> str | None:
    """Why a running VMI cannot live-migrate off its node (reference §D.1), else ``None``."""
    spec = vmi.get("spec") or {}
    here = (vmi.get("status") or {}).get("nodeName") or labels_of(vmi).get("kubevirt.io/nodeName")
    workers = [n for n in nodes if not is_witness(n)]
    if len(workers) <= 1:
        return "only one non-witness node"
    if spec.get("nodeSelector"):
        return "has a nodeSelector"
    if ((spec.get("domain") or {}).get("devices") or {}).get("hostDevices"):
        return "uses host devices"
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    for n in workers:
        if n["metadata"]["name"] == here or (n.get("spec") or {}).get("unschedulable"):
            continue
        if not terms or any(_node_matches_term(n, t) for t in terms):
            return None
    return "no other node satisfies its node affinity"


def non_migratable_vms(vmis: list[dict[str, Any]], nodes: list[dict[str, Any]],
                       restore_vm: bool) -> CheckResult:
    name = "non_migratable_vms"
    running = [v for v in vmis if (v.get("status") or {}).get("phase") == "Running"]
    found = {f"{name_of(v)} ({why})": name_of(v) for v in running
             if (why := non_migratable_reason(v, nodes)) is not None}
    if not found:
        return passed(name, f"{len(running)} running VMs can live-migrate")
    listing = ", ".join(sorted(found))
    if restore_vm:
        return CheckResult(name, "passed", "these VMs will be shut down while their node is "
                           f"upgraded and started again afterwards (restoreVM): {listing}",
                           sorted(found.values()))
    if len(nodes) - sum(is_witness(n) for n in nodes) <= 1:
        return CheckResult(name, "passed", "single node: every VM will be shut down during "
                           f"the upgrade: {listing}", sorted(found.values()))
    return failed(name, "VMs that cannot live-migrate are running; stop them or set "
                  f"restoreVM: {listing}", found.values())
