"""Running every pre-flight check of an upgrade over the facts gathered once.

One function per check of reference §E (the toolkit's validating webhook, §E.1, and its
Initialize pre-flight, §E.2, plus the version rules of §E.3), grouped by where the rule comes
from: :mod:`preflight_webhook`, :mod:`preflight_version`, :mod:`preflight_coexistence`,
:mod:`preflight_controller`; each returns a :class:`preflight_result.CheckResult`.
:func:`run_all` runs them all over a :class:`Facts` bundle gathered by the ``preflight``
module (:func:`phase_initialize.gather_facts`), honouring the skip annotations in both
spellings (README and legacy) and the ``skip`` list.

Unit-tested with dict fixtures in ``tests/unit/test_preflight_checks.py``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
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
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.preflight_result import (
    CheckResult,
    annotation_true,
    failed,
    skipped,
)


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
    disks: dict[str, controller.NodeDisk | str] = field(default_factory=dict)
    cert_expiry: dict[str, _dt.datetime | str] = field(default_factory=dict)
    migration: dict[str, Any] | None = None       # migration_target.detect(), now
    target_kubevirt: str = ""                     # releaseMetadata.kubevirt of the target
    now: _dt.datetime = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc))
    # fact name -> the kind it is read from, for each kind the cluster does not serve: the
    # checks that read it fail (an empty list would pass them on data that was never read)
    unserved: dict[str, str] = field(default_factory=dict)


CHECKS: dict[str, Callable[[Facts], CheckResult]] = {
    "no_legacy_upgrade": lambda f: coexistence.no_legacy_upgrade(f.legacy_upgrades),
    "no_upgrade_manager": lambda f: coexistence.no_upgrade_manager(f.addons, f.deployments),
    "single_node_drain_hooks":
        lambda f: coexistence.single_node_drain_hooks(f.cluster, f.nodes),
    "no_concurrent_upgrade": lambda f: webhook.no_concurrent_upgrade(f.plans, f.plan_name),
    "no_cleanup_in_progress": lambda f: webhook.no_cleanup_in_progress(f.plans, f.plan_name),
    "version_exists": lambda f: webhook.version_exists(f.version_name, f.version_obj, f.image),
    "iso_image": lambda f: webhook.iso_image(f.image, f.image_obj),
    "version_eligible": lambda f: version.version_eligible(
        f.current_version, f.version_name if not f.image else None,
        str(((f.version_obj or {}).get("spec") or {}).get("minUpgradableVersion") or ""),
        f.force, f.allow_downgrade, f.allow_version_skip),
    "iso_verified": lambda f: version.iso_verified(f.version_name, f.version_obj, f.image,
                                                   f.allow_unverified_iso),
    "nodes_ready": lambda f: webhook.nodes_ready(f.nodes),
    "cluster_ready": lambda f: webhook.cluster_ready(f.cluster),
    "machines_running": lambda f: webhook.machines_running(f.machines),
    "node_machine_consistency": lambda f: webhook.node_machine_consistency(f.nodes, f.machines),
    "volumes_healthy": lambda f: webhook.volumes_healthy(f.volumes, len(f.nodes)),
    "single_replica_volumes": lambda f: webhook.single_replica_volumes(f.volumes,
                                                                       f.plan_annotations),
    "vm_backups": lambda f: webhook.vm_backups(f.backups),
    "backup_schedules": lambda f: webhook.backup_schedules(f.schedules),
    "non_migratable_vms": lambda f: webhook.non_migratable_vms(f.vmis, f.nodes, f.restore_vm),
    "no_pending_migrations": lambda f: webhook.stuck_migrations(f.migrations),
    "managed_charts": lambda f: webhook.managed_charts(f.charts),
    "fleet_bundles": lambda f: webhook.fleet_bundles(f.bundles),
    "addons": lambda f: webhook.addons(f.addons),
    "pause_nodes_exist": lambda f: webhook.pause_nodes_exist(f.pause_nodes, f.nodes),
    "disk_space": lambda f: controller.disk_space(f.disks, f.plan_annotations),
    "certificates": lambda f: controller.certificates(f.cert_expiry, f.now, f.plan_annotations),
    "migration_target": lambda f: controller.migration_target(f.migration, f.target_kubevirt),
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
    return failed(name, "cannot check: " + ", ".join(kinds) + (" is" if len(kinds) == 1
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
            results.append(skipped(name, "skipped on request (preflight_skip_checks)"))
        elif skip_webhook and name in WEBHOOK_CHECKS:
            results.append(skipped(name, f"skipped by annotation {c.ANN_SKIP_WEBHOOK[0]}"))
        elif missing := sorted({facts.unserved[f] for f in CHECK_INPUTS.get(name, ())
                                if f in facts.unserved}):
            results.append(unserved_result(name, missing))
        else:
            results.append(check(facts))
    return results


def summary(results: list[CheckResult]) -> str:
    """One message for a failed run: every failed check with its message."""
    bad = [r for r in results if r.failed]
    if not bad:
        return f"all {len(results)} pre-flight checks passed"
    return "pre-flight checks failed: " + "; ".join(f"{r.name}: {r.message}" for r in bad)
