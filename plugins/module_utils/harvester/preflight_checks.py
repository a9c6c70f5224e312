"""Pre-flight checks of an upgrade as pure functions over Kubernetes objects (dicts).

One function per check of reference §E (the toolkit's validating webhook, §E.1, and its
Initialize pre-flight, §E.2, plus the version rules of §E.3). Each returns a
:class:`CheckResult` naming the check, whether it passed, a message a person can act on and
the objects involved. :func:`run_all` runs them all over a :class:`Facts` bundle gathered by
the ``preflight`` module, honouring the skip annotations in both spellings (README and
legacy) and the ``skip`` list.

Unit-tested with dict fixtures in ``tests/unit/test_preflight_checks.py``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    versions,
)

GiB = 1024**3


@dataclass
class CheckResult:
    """Outcome of one check. ``status`` is ``passed``, ``failed`` or ``skipped``."""

    name: str
    status: str
    message: str = ""
    objects: list[str] = field(default_factory=list)
    family: str = "webhook"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _passed(name: str, message: str = "", family: str = "webhook") -> CheckResult:
    return CheckResult(name, "passed", message, [], family)


def _failed(name: str, message: str, objects: Iterable[str], family: str = "webhook"
            ) -> CheckResult:
    return CheckResult(name, "failed", message, sorted(set(objects)), family)


def _skipped(name: str, message: str, family: str = "webhook") -> CheckResult:
    return CheckResult(name, "skipped", message, [], family)


def annotation(annotations: dict[str, str] | None, keys: tuple[str, ...]) -> str | None:
    """Value of the first present annotation among the accepted spellings."""
    for key in keys:
        if annotations and key in annotations:
            return str(annotations[key])
    return None


def annotation_true(annotations: dict[str, str] | None, keys: tuple[str, ...]) -> bool:
    value = annotation(annotations, keys)
    return value is not None and value.strip().lower() in ("true", "1", "t", "yes")


def _name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _cond(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def is_witness(node: dict[str, Any]) -> bool:
    return c.LABEL_WITNESS in _labels(node)


def node_ready(node: dict[str, Any]) -> bool:
    cond = _cond(node, "Ready")
    return bool(cond) and cond.get("status") == "True"


# --------------------------------------------------------------------------- §E.1 webhook

def no_concurrent_upgrade(plans: list[dict[str, Any]], own: str | None) -> CheckResult:
    name = "no_concurrent_upgrade"
    others = [p for p in plans if (p.get("metadata") or {}).get("name") != own
              and (_cond(p, "Progressing") or {}).get("status") == "True"]
    if others:
        other = others[0]["metadata"]["name"]
        return _failed(name, f'another upgrade "{other}" is in progress',
                       [f"upgradeplan/{p['metadata']['name']}" for p in others])
    return _passed(name)


def no_cleanup_in_progress(plans: list[dict[str, Any]], own: str | None) -> CheckResult:
    name = "no_cleanup_in_progress"
    busy = [p["metadata"]["name"] for p in plans if p["metadata"].get("name") != own
            and (p.get("status") or {}).get("currentPhase") == "CleaningUp"]
    if busy:
        return _failed(name, f'upgrade "{busy[0]}" is still cleaning up',
                       [f"upgradeplan/{n}" for n in busy])
    return _passed(name)


def version_exists(version_name: str | None, version_obj: dict[str, Any] | None,
                   image: str | None) -> CheckResult:
    name = "version_exists"
    if image:
        return _skipped(name, "spec.image is set; no Version needed")
    if not version_name:
        return _failed(name, "no target version given and no Version newer than the running "
                       "release exists", [])
    if version_obj is None:
        return _failed(name, f'Version "{version_name}" not found in {c.UPGRADE_NS}',
                       [f"version/{version_name}"])
    if not (version_obj.get("spec") or {}).get("isoURL"):
        return _failed(name, f'Version "{version_name}" has no spec.isoURL',
                       [f"version/{version_name}"])
    return _passed(name, f"Version {version_name} found")


def iso_image(image: str | None, image_obj: dict[str, Any] | None) -> CheckResult:
    name = "iso_image"
    if not image:
        return _skipped(name, "no pre-uploaded image (spec.image) used")
    if image_obj is None:
        return _failed(name, f'VirtualMachineImage "{image}" not found', [image])
    return _passed(name, f"VirtualMachineImage {image} found")


def version_eligible(current: str | None, target: str | None, min_upgradable: str,
                     force: bool, allow_downgrade: bool = False,
                     allow_version_skip: bool = False) -> CheckResult:
    """Target must be newer than the running release and allowed by the §E.3 rules. A
    downgrade and a target whose minUpgradableVersion is above the running release each need
    their own switch; ``force`` lifts only the other rules."""
    name = "version_eligible"
    if not target:
        return _skipped(name, "target version unknown until the ISO is read", "version")
    if not current:
        return _failed(name, f"Setting {c.SERVER_VERSION_SETTING} has no value", [
            f"setting/{c.SERVER_VERSION_SETTING}"], "version")
    refused = versions.refusal(current, target, min_upgradable, force=force,
                               allow_downgrade=allow_downgrade,
                               allow_version_skip=allow_version_skip, refuse_same=True)
    if refused is None:
        strict = versions.refusal(current, target, min_upgradable, refuse_same=True)
        if strict is None:
            return _passed(name, versions.eligibility(current, target, min_upgradable)[1],
                           "version")
        return _skipped(name, f"allowed by {versions.SWITCHES[strict[1]]}: {strict[0]}",
                        "version")
    why, rule = refused
    return _failed(name, f"{why} ({versions.SWITCHES[rule]}=true allows it)",
                   [f"version/{target}"], "version")


ISO_CHECKSUM_HEX = 128   # SHA-512, what Harvester's image download verifies


def iso_unverified(version_name: str | None, version_obj: dict[str, Any] | None
                   ) -> str | None:
    """Why the Version's ISO would be downloaded unverified, else ``None``: no
    ``spec.isoChecksum`` (Harvester then imports whatever the URL answers, over ``http://``
    whatever any host on the path answers) or one that is not a SHA-512 digest. An
    ``http://`` URL with a SHA-512 is verified: the digest comes from the Version, read over
    the authenticated API, and the download is checked against it."""
    if version_obj is None:
        return None
    spec = version_obj.get("spec") or {}
    url, checksum = str(spec.get("isoURL") or ""), str(spec.get("isoChecksum") or "").strip()
    insecure = " over plain http://" if url.lower().startswith("http://") else ""
    if not checksum:
        return (f"Version {version_name} has no spec.isoChecksum: its ISO ({url}) would be "
                f"downloaded unverified{insecure}")
    hex_digits = set("0123456789abcdefABCDEF")
    if len(checksum) != ISO_CHECKSUM_HEX or not set(checksum) <= hex_digits:
        return (f"Version {version_name} spec.isoChecksum is not a SHA-512 digest "
                f"({len(checksum)} characters, 128 hex digits expected): its ISO ({url}) "
                f"cannot be verified{insecure}")
    return None


def iso_verified(version_name: str | None, version_obj: dict[str, Any] | None,
                 image: str | None, allow_unverified: bool) -> CheckResult:
    name = "iso_verified"
    if image:
        return _skipped(name, "pre-uploaded image (spec.image): nothing is downloaded", "input")
    why = iso_unverified(version_name, version_obj)
    if why is None:
        return _passed(name, "the ISO download is checked against the Version's SHA-512"
                       if version_obj is not None else "no Version to download", "input")
    if allow_unverified:
        return _skipped(name, f"allowed by upgrade_allow_unverified_iso: {why}", "input")
    return _failed(name, f"{why}; give the Version an isoChecksum, or set "
                   "upgrade_allow_unverified_iso=true to download it anyway",
                   [f"version/{version_name}"], "input")


def nodes_ready(nodes: list[dict[str, Any]]) -> CheckResult:
    name = "nodes_ready"
    bad = [f"node/{n['metadata']['name']} ({'not Ready' if not node_ready(n) else 'cordoned'})"
           for n in nodes if not node_ready(n) or (n.get("spec") or {}).get("unschedulable")]
    if bad:
        return _failed(name, "nodes must be Ready and schedulable: " + ", ".join(sorted(bad)),
                       [b.split(" ")[0] for b in bad])
    if not nodes:
        return _failed(name, "no nodes found", [])
    return _passed(name, f"{len(nodes)} nodes Ready and schedulable")


def cluster_ready(cluster: dict[str, Any] | None) -> CheckResult:
    name = "cluster_ready"
    ref = f"clusters.provisioning.cattle.io/{c.FLEET_NS}/{c.RANCHER_CLUSTER_NAME}"
    if cluster is None:
        return _failed(name, f"{ref} not found", [ref])
    if not (cluster.get("status") or {}).get("ready"):
        return _failed(name, f"{ref} is not ready", [ref])
    return _passed(name)


def machines_running(machines: list[dict[str, Any]]) -> CheckResult:
    name = "machines_running"
    bad = [f"machine/{m['metadata']['name']}" for m in machines
           if (m.get("status") or {}).get("phase") != "Running"]
    if bad:
        return _failed(name, "machines not Running: " + ", ".join(sorted(bad)), bad)
    return _passed(name)


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
        machine = _annotations(n).get(c.ANN_MACHINE)
        if _labels(n).get(c.LABEL_MANAGED) != "true":
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
        return _failed(name, "; ".join(problems), objects)
    return _passed(name)


def _volume_ref(v: dict[str, Any]) -> str:
    ks = (v.get("status") or {}).get("kubernetesStatus") or {}
    if ks.get("namespace") and ks.get("pvcName"):
        return f"{ks['namespace']}/{ks['pvcName']}"
    return f"volume/{v['metadata']['name']}"


def volumes_healthy(volumes: list[dict[str, Any]], node_count: int) -> CheckResult:
    name = "volumes_healthy"
    if node_count < 3:
        return _skipped(name, "degraded volumes are only refused on clusters of 3+ nodes")
    bad = [_volume_ref(v) for v in volumes
           if (v.get("status") or {}).get("robustness") == "degraded"]
    if bad:
        return _failed(name, "degraded Longhorn volumes: " + ", ".join(sorted(bad)), bad)
    return _passed(name, f"{len(volumes)} volumes checked")


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
        return _failed(name, msg, bad)
    if detached:
        return _passed(name, "detached single-replica volumes allowed by annotation: "
                       + ", ".join(sorted(detached)))
    return _passed(name)


def vm_backups(backups: list[dict[str, Any]]) -> CheckResult:
    name = "vm_backups"
    bad = [_name(b) for b in backups if not (b.get("status") or {}).get("readyToUse")
           and not (b.get("status") or {}).get("error")]
    if bad:
        return _failed(name, "VM backups in progress: " + ", ".join(sorted(bad)), bad)
    return _passed(name)


def backup_schedules(schedules: list[dict[str, Any]]) -> CheckResult:
    name = "backup_schedules"
    bad = [_name(s) for s in schedules if not (s.get("status") or {}).get("suspended")]
    if bad:
        return _failed(name, "VM backup schedules must be suspended during the upgrade: "
                       + ", ".join(sorted(bad)), bad)
    return _passed(name)


def managed_charts(charts: list[dict[str, Any]]) -> CheckResult:
    name = "managed_charts"
    bad = [_name(ch) for ch in charts if (_cond(ch, "Ready") or {}).get("status") != "True"]
    if bad:
        return _failed(name, "ManagedCharts not Ready: " + ", ".join(sorted(bad)), bad)
    return _passed(name)


def fleet_bundles(bundles: list[dict[str, Any]] | None) -> CheckResult:
    name = "fleet_bundles"
    if bundles is None:
        return _skipped(name, "Fleet bundles are not served by this cluster")
    bad = [_name(b) for b in bundles if _cond(b, "Ready") is not None
           and (_cond(b, "Ready") or {}).get("status") != "True"]
    if bad:
        return _failed(name, "Fleet bundles not Ready: " + ", ".join(sorted(bad)), bad)
    return _passed(name)


ADDON_TRANSITIONS = ("AddonEnabling", "AddonDisabling", "AddonUpdating", "AddonDeploying")


def addons(addon_objs: list[dict[str, Any]]) -> CheckResult:
    name = "addons"
    bad = [_name(a) for a in addon_objs
           if (a.get("status") or {}).get("status") in ADDON_TRANSITIONS]
    if bad:
        return _failed(name, "addons being enabled, disabled or updated: "
                       + ", ".join(sorted(bad)), bad)
    return _passed(name)


def stuck_migrations(migrations: list[dict[str, Any]]) -> CheckResult:
    name = "no_pending_migrations"
    bad = [_name(m) for m in migrations
           if (m.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    if bad:
        return _failed(name, "VM migrations still running or pending: "
                       + ", ".join(sorted(bad)), bad)
    return _passed(name)


def pause_nodes_exist(pause: list[str], nodes: list[dict[str, Any]]) -> CheckResult:
    name = "pause_nodes_exist"
    known = {n["metadata"]["name"] for n in nodes}
    missing = [p for p in pause if p not in known]
    if missing:
        return _failed(name, "pauseNodes lists unknown nodes: " + ", ".join(sorted(missing)),
                       [f"node/{m}" for m in missing])
    return _passed(name)


def _node_matches_term(node: dict[str, Any], term: dict[str, Any]) -> bool:
    labels = _labels(node)
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
    here = (vmi.get("status") or {}).get("nodeName") or _labels(vmi).get("kubevirt.io/nodeName")
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
    found = {f"{_name(v)} ({why})": _name(v) for v in running
             if (why := non_migratable_reason(v, nodes)) is not None}
    if not found:
        return _passed(name, f"{len(running)} running VMs can live-migrate")
    listing = ", ".join(sorted(found))
    if restore_vm:
        return CheckResult(name, "passed", "these VMs will be shut down while their node is "
                           f"upgraded and started again afterwards (restoreVM): {listing}",
                           sorted(found.values()))
    if len(nodes) - sum(is_witness(n) for n in nodes) <= 1:
        return CheckResult(name, "passed", "single node: every VM will be shut down during "
                           f"the upgrade: {listing}", sorted(found.values()))
    return _failed(name, "VMs that cannot live-migrate are running; stop them or set "
                   f"restoreVM: {listing}", found.values())


# --------------------------------------------------------------------------- coexistence

def no_legacy_upgrade(upgrades: list[dict[str, Any]] | None) -> CheckResult:
    """No Harvester built-in (V1) ``Upgrade`` in progress: one whose label
    ``harvesterhci.io/upgradeState`` is not ``Succeeded``/``Failed`` (also none yet), the
    rule Harvester's own upgrade webhook applies before it admits another Upgrade
    (harvester v1.6.0 pkg/webhook/resources/upgrade/validator.go ``Create``)."""
    name = "no_legacy_upgrade"
    if upgrades is None:
        return _skipped(name, "Harvester Upgrades (harvesterhci.io) are not served", "coexistence")
    busy = [u for u in upgrades
            if _labels(u).get(c.LABEL_V1_UPGRADE_STATE) not in c.V1_UPGRADE_TERMINAL]
    if busy:
        states = ", ".join(f"{_name(u)} ({_labels(u).get(c.LABEL_V1_UPGRADE_STATE) or 'new'})"
                           for u in busy)
        return _failed(name, "Harvester's built-in upgrade is in progress: " + states
                       + "; let it finish (or delete it) before upgrading with this collection",
                       [f"upgrade/{_name(u)}" for u in busy], "coexistence")
    return _passed(name, f"{len(upgrades)} Harvester Upgrades, none in progress", "coexistence")


def no_upgrade_manager(addon_objs: list[dict[str, Any]],
                       deployments: list[dict[str, Any]]) -> CheckResult:
    """The Upgrade Manager (upgrade-toolkit) is not installed: it reconciles the same
    UpgradePlan CRD. Installed as the experimental Addon ``harvester-upgrade-manager``
    (enabled) or its Helm chart (Deployment labelled
    ``app.kubernetes.io/name=harvester-upgrade-manager``)."""
    name = "no_upgrade_manager"
    found = [f"addon/{_name(a)}" for a in addon_objs
             if (a.get("metadata") or {}).get("name") == c.UPGRADE_MANAGER_ADDON
             and (a.get("spec") or {}).get("enabled") is True]
    found += [f"deployment/{_name(d)}" for d in deployments
              if _labels(d).get(c.LABEL_APP_NAME) == c.UPGRADE_MANAGER_ADDON
              and (d.get("spec") or {}).get("replicas", 1) != 0]
    if found:
        return _failed(name, "Harvester's Upgrade Manager is installed (" + ", ".join(found)
                       + "); it reconciles the same UpgradePlans: disable the add-on (or "
                       "uninstall the chart) before upgrading with this collection", found,
                       "coexistence")
    return _passed(name, "Upgrade Manager not installed", "coexistence")


def single_node_drain_hooks(cluster: dict[str, Any] | None,
                            nodes: list[dict[str, Any]]) -> CheckResult:
    """A single-node cluster's Rancher cluster declares no drain hooks. Rancher waits for
    declared hooks even on a single machine: it cordons the node when the single-node
    upgrade sets ``kubernetesVersion`` and holds the RKE2 plan until every
    ``preDrainHooks`` annotation echoes ``rke.cattle.io/pre-drain`` (rancher/rancher v2.11.2,
    v2.12.0 ``pkg/capr/planner/drain.go``, ``pkg/controllers/capr/machinedrain``), and the
    node stays cordoned until the post-drain hooks answer. Harvester declares hooks only for
    a multi-node roll and nothing answers them on the single-node path, so hooks there (a
    strategy left by an earlier upgrade or set by another tool) would stall the upgrade."""
    name = "single_node_drain_hooks"
    if len([n for n in nodes if not is_witness(n)]) != 1:
        return _passed(name, "not a single-node cluster: the node loop answers Rancher's "
                       "drain hooks", "coexistence")
    if cluster is None:
        return _skipped(name, "no Rancher cluster to read (see cluster_ready)", "coexistence")
    strategy = ((cluster.get("spec") or {}).get("rkeConfig") or {}).get("upgradeStrategy") \
        or {}
    declared = []
    for opts_key in ("controlPlaneDrainOptions", "workerDrainOptions"):
        opts = strategy.get(opts_key) or {}
        for hooks_key in ("preDrainHooks", "postDrainHooks"):
            for h in opts.get(hooks_key) or []:
                declared.append(f"{opts_key}.{hooks_key} "
                                f"{(h or {}).get('annotation') or '(no annotation)'}")
    if not declared:
        return _passed(name, "single-node cluster, no drain hooks declared", "coexistence")
    ref = f"clusters.provisioning.cattle.io/{c.FLEET_NS}/{c.RANCHER_CLUSTER_NAME}"
    return _failed(name, f"single-node cluster but {ref} declares drain hooks in "
                   "spec.rkeConfig.upgradeStrategy (" + "; ".join(declared) + "): Rancher "
                   "would cordon the node during the RKE2 upgrade and wait for them, and the "
                   "single-node upgrade answers none; remove them (for example kubectl -n "
                   f"{c.FLEET_NS} patch clusters.provisioning.cattle.io "
                   f"{c.RANCHER_CLUSTER_NAME} --type merge -p "
                   "'{\"spec\":{\"rkeConfig\":{\"upgradeStrategy\":null}}}') and retry",
                   [ref], "coexistence")


# --------------------------------------------------------------------------- §E.2 controller

@dataclass
class NodeDisk:
    """Kubelet stats of one node: ``fs.usedBytes``/``capacityBytes`` and the GC threshold."""

    used_bytes: int
    capacity_bytes: int
    gc_high_threshold: int = c.DEFAULT_GC_HIGH_THRESHOLD


def disk_space(disks: dict[str, NodeDisk | str], plan_annotations: dict[str, str],
               extra_bytes: int = c.NEW_IMAGES_BYTES) -> CheckResult:
    """Fails if ``(used + 13 GiB) / capacity`` would pass the image GC threshold.

    ``disks`` maps node name to its stats, or to an error string if they could not be read.
    """
    name = "disk_space"
    family = "controller"
    if annotation_true(plan_annotations, c.ANN_SKIP_GC_THRESHOLD):
        return _skipped(name, f"skipped by annotation {c.ANN_SKIP_GC_THRESHOLD[0]}", family)
    messages, objects = [], []
    for node, d in sorted(disks.items()):
        if isinstance(d, str):
            messages.append(f'node "{node}": cannot read kubelet stats: {d}')
            objects.append(f"node/{node}")
            continue
        if d.capacity_bytes <= 0:   # no capacity reported: nothing to compare, not room
            messages.append(f'node "{node}": kubelet stats report no filesystem capacity')
            objects.append(f"node/{node}")
            continue
        pct = (d.used_bytes + extra_bytes) * 100 / d.capacity_bytes
        if pct > d.gc_high_threshold:
            messages.append(
                f'node "{node}" will reach {pct:.2f}% storage space after loading new images, '
                f"higher than kubelet image garbage collection threshold "
                f"{d.gc_high_threshold}%")
            objects.append(f"node/{node}")
    if messages:
        return _failed(name, "; ".join(messages), objects, family)
    return _passed(name, f"{len(disks)} nodes have room for the new images", family)


def min_cert_days(plan_annotations: dict[str, str]) -> tuple[int, str | None]:
    """Days of certificate validity required; ``(days, error)`` for a bad annotation."""
    raw = annotation(plan_annotations, c.ANN_MIN_CERT_DAYS)
    if raw is None:
        return c.DEFAULT_MIN_CERT_DAYS, None
    try:
        days = int(raw)
    except ValueError:
        return c.DEFAULT_MIN_CERT_DAYS, (f"annotation {c.ANN_MIN_CERT_DAYS[0]}={raw!r} "
                                         "is not an integer")
    if days <= 0:
        return c.DEFAULT_MIN_CERT_DAYS, f"annotation {c.ANN_MIN_CERT_DAYS[0]}={raw!r} must be > 0"
    return days, None


def certificates(not_after: dict[str, _dt.datetime | str], now: _dt.datetime,
                 plan_annotations: dict[str, str]) -> CheckResult:
    """The API server certificates must stay valid for N more days (annotation, default 7).

    ``not_after`` maps an endpoint (``host:port``) to its certificate's expiry, or to an
    error string when it could not be read.
    """
    name = "certificates"
    family = "controller"
    days, err = min_cert_days(plan_annotations)
    if err:
        return _failed(name, err, ["upgradeplan"], family)
    if not not_after:
        return _skipped(name, "no API server endpoint to check", family)
    limit = now + _dt.timedelta(days=days)
    expiring, unreadable = [], []
    for endpoint, expiry in sorted(not_after.items()):
        if isinstance(expiry, str):
            unreadable.append(f"{endpoint}: {expiry}")
        elif expiry < limit:
            expiring.append(f"{endpoint} expires {expiry.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    if expiring:
        return _failed(name, f"API server certificates expire within {days} days ("
                       + ", ".join(expiring) + "); rotate the RKE2 certificates before "
                       "upgrading", [e.split(" ")[0] for e in expiring], family)
    if unreadable:   # one endpoint unread is one certificate unchecked
        return _failed(name, "cannot read the API server certificate: " + "; ".join(unreadable),
                       [u.split(":")[0] for u in unreadable], family)
    return _passed(name, f"certificates of {', '.join(sorted(not_after))} valid for at least "
                   f"{days} more days", family)


def migration_target(migration: dict[str, Any] | None, target_kubevirt: str) -> CheckResult:
    """Which mechanism sends target-aware migrations to their node (informational: both work;
    the node loop detects again when it runs, after the cluster upgrade rolled KubeVirt)."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        migration_target as mt,
    )

    name = "migration_target"
    if migration is None:
        return _skipped(name, "not detected", "info")
    msg = "now: " + mt.describe(migration)
    version = mt.parse_kubevirt_version(target_kubevirt)
    if version is not None:
        after = (mt.ADDED_NODE_SELECTOR if version >= mt.ADDED_NODE_SELECTOR_SINCE
                 else mt.HARVESTER_ACTION)
        msg += (f"; after the cluster upgrade (KubeVirt {target_kubevirt}) the node loop will "
                f"use {after}")
    return _passed(name, msg, "info")


# --------------------------------------------------------------------------- running them all

@dataclass
class Facts:
    """Everything the checks read, gathered once by the ``preflight`` module."""

    plan_name: str | None = None
    plan_annotations: dict[str, str] = field(default_factory=dict)
    plans: list[dict[str, Any]] = field(default_factory=list)
    version_name: str | None = None
    version_obj: dict[str, Any] | None = None
    image: str | None = None
    image_obj: dict[str, Any] | None = None
    current_version: str | None = None
    force: bool = False
    allow_downgrade: bool = False
    allow_version_skip: bool = False
    allow_unverified_iso: bool = False
    restore_vm: bool = False
    pause_nodes: list[str] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    machines: list[dict[str, Any]] = field(default_factory=list)
    cluster: dict[str, Any] | None = None
    volumes: list[dict[str, Any]] = field(default_factory=list)
    backups: list[dict[str, Any]] = field(default_factory=list)
    schedules: list[dict[str, Any]] = field(default_factory=list)
    charts: list[dict[str, Any]] = field(default_factory=list)
    bundles: list[dict[str, Any]] | None = None
    addons: list[dict[str, Any]] = field(default_factory=list)
    legacy_upgrades: list[dict[str, Any]] | None = None
    deployments: list[dict[str, Any]] = field(default_factory=list)
    vmis: list[dict[str, Any]] = field(default_factory=list)
    migrations: list[dict[str, Any]] = field(default_factory=list)
    disks: dict[str, NodeDisk | str] = field(default_factory=dict)
    cert_expiry: dict[str, _dt.datetime | str] = field(default_factory=dict)
    migration: dict[str, Any] | None = None       # migration_target.detect(), now
    target_kubevirt: str = ""                     # releaseMetadata.kubevirt of the target
    now: _dt.datetime = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc))
    # fact name -> the kind it is read from, for each kind the cluster does not serve: the
    # checks that read it fail (an empty list would pass them on data that was never read)
    unserved: dict[str, str] = field(default_factory=dict)


CHECKS: dict[str, Callable[[Facts], CheckResult]] = {
    "no_legacy_upgrade": lambda f: no_legacy_upgrade(f.legacy_upgrades),
    "no_upgrade_manager": lambda f: no_upgrade_manager(f.addons, f.deployments),
    "single_node_drain_hooks": lambda f: single_node_drain_hooks(f.cluster, f.nodes),
    "no_concurrent_upgrade": lambda f: no_concurrent_upgrade(f.plans, f.plan_name),
    "no_cleanup_in_progress": lambda f: no_cleanup_in_progress(f.plans, f.plan_name),
    "version_exists": lambda f: version_exists(f.version_name, f.version_obj, f.image),
    "iso_image": lambda f: iso_image(f.image, f.image_obj),
    "version_eligible": lambda f: version_eligible(
        f.current_version, f.version_name if not f.image else None,
        str(((f.version_obj or {}).get("spec") or {}).get("minUpgradableVersion") or ""),
        f.force, f.allow_downgrade, f.allow_version_skip),
    "iso_verified": lambda f: iso_verified(f.version_name, f.version_obj, f.image,
                                           f.allow_unverified_iso),
    "nodes_ready": lambda f: nodes_ready(f.nodes),
    "cluster_ready": lambda f: cluster_ready(f.cluster),
    "machines_running": lambda f: machines_running(f.machines),
    "node_machine_consistency": lambda f: node_machine_consistency(f.nodes, f.machines),
    "volumes_healthy": lambda f: volumes_healthy(f.volumes, len(f.nodes)),
    "single_replica_volumes": lambda f: single_replica_volumes(f.volumes, f.plan_annotations),
    "vm_backups": lambda f: vm_backups(f.backups),
    "backup_schedules": lambda f: backup_schedules(f.schedules),
    "non_migratable_vms": lambda f: non_migratable_vms(f.vmis, f.nodes, f.restore_vm),
    "no_pending_migrations": lambda f: stuck_migrations(f.migrations),
    "managed_charts": lambda f: managed_charts(f.charts),
    "fleet_bundles": lambda f: fleet_bundles(f.bundles),
    "addons": lambda f: addons(f.addons),
    "pause_nodes_exist": lambda f: pause_nodes_exist(f.pause_nodes, f.nodes),
    "disk_space": lambda f: disk_space(f.disks, f.plan_annotations),
    "certificates": lambda f: certificates(f.cert_expiry, f.now, f.plan_annotations),
    "migration_target": lambda f: migration_target(f.migration, f.target_kubevirt),
}
# the facts (Facts fields) each check reads from a kind the cluster may fail to serve
CHECK_INPUTS: dict[str, tuple[str, ...]] = {
    "no_legacy_upgrade": ("legacy_upgrades",),
    "no_upgrade_manager": ("addons",),
    "machines_running": ("machines",),
    "node_machine_consistency": ("machines",),
    "volumes_healthy": ("volumes",),
    "single_replica_volumes": ("volumes",),
    "vm_backups": ("backups",),
    "backup_schedules": ("schedules",),
    "non_migratable_vms": ("vmis",),
    "no_pending_migrations": ("migrations",),
    "managed_charts": ("charts",),
    "fleet_bundles": ("bundles",),
    "addons": ("addons",),
}


def unserved_result(name: str, kinds: list[str]) -> CheckResult:
    """A check that could not read what it checks: failed, naming the kinds."""
    family = "coexistence" if name in ("no_legacy_upgrade", "no_upgrade_manager") else "webhook"
    return _failed(name, "cannot check: " + ", ".join(kinds) + (" is" if len(kinds) == 1
                   else " are") + " not served by this cluster (CRD missing); every Harvester "
                   "cluster serves it, so the check fails rather than pass on no data",
                   [f"kind/{k}" for k in kinds], family)


# the coexistence checks are not the webhook's: the skip-webhook annotation does not skip
# them (Harvester's webhook, too, refuses a second Upgrade before it reads that annotation)
WEBHOOK_CHECKS = frozenset(
    n for n in CHECKS if n not in ("disk_space", "certificates", "version_eligible",
                                   "iso_verified",
                                   "no_legacy_upgrade", "no_upgrade_manager",
                                   "single_node_drain_hooks",
                                   "migration_target"))


def run_all(facts: Facts, skip: Iterable[str] = ()) -> list[CheckResult]:
    """Run every check; ``skip`` names checks to skip. The skip-webhook annotation skips
    the §E.1 (webhook) family, as the toolkit's webhook does."""
    skip = set(skip)
    skip_webhook = annotation_true(facts.plan_annotations, c.ANN_SKIP_WEBHOOK)
    results = []
    for name, check in CHECKS.items():
        if name in skip:
            results.append(_skipped(name, "skipped on request (preflight_skip_checks)"))
        elif skip_webhook and name in WEBHOOK_CHECKS:
            results.append(_skipped(name, f"skipped by annotation {c.ANN_SKIP_WEBHOOK[0]}"))
        elif missing := sorted({facts.unserved[f] for f in CHECK_INPUTS.get(name, ())
                                if f in facts.unserved}):
            results.append(unserved_result(name, missing))
        else:
            results.append(check(facts))
    return results


def summary(results: list[CheckResult]) -> str:
    """One message for a failed run: every failed check with its message."""
    failed = [r for r in results if r.failed]
    if not failed:
        return f"all {len(results)} pre-flight checks passed"
    return "pre-flight checks failed: " + "; ".join(f"{r.name}: {r.message}" for r in failed)
