"""Pre-flight checks of the toolkit's Initialize controller (reference §E.2): room on every
node for the new images and the API server certificates' remaining validity; plus the
informational ``migration_target``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.preflight_result import (
    CheckResult,
    annotation,
    annotation_true,
    failed,
    passed,
    skipped,
)


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
        return skipped(name, f"skipped by annotation {c.ANN_SKIP_GC_THRESHOLD[0]}", family)
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
        return failed(name, "; ".join(messages), objects, family)
    return passed(name, f"{len(disks)} nodes have room for the new images", family)


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
        return failed(name, err, ["upgradeplan"], family)
    if not not_after:
        return skipped(name, "no API server endpoint to check", family)
    limit = now + _dt.timedelta(days=days)
    expiring, unreadable = [], []
    for endpoint, expiry in sorted(not_after.items()):
        if isinstance(expiry, str):
            unreadable.append(f"{endpoint}: {expiry}")
        elif expiry < limit:
            expiring.append(f"{endpoint} expires {expiry.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    if expiring:
        return failed(name, f"API server certificates expire within {days} days ("
                      + ", ".join(expiring) + "); rotate the RKE2 certificates before "
                      "upgrading", [e.split(" ")[0] for e in expiring], family)
    if unreadable:   # one endpoint unread is one certificate unchecked
        return failed(name, "cannot read the API server certificate: " + "; ".join(unreadable),
                      [u.split(":")[0] for u in unreadable], family)
    return passed(name, f"certificates of {', '.join(sorted(not_after))} valid for at least "
                  f"{days} more days", family)


def migration_target(migration: dict[str, Any] | None, target_kubevirt: str) -> CheckResult:
    """Which mechanism sends target-aware migrations to their node (informational: both work;
    the node loop detects again when it runs, after the cluster upgrade rolled KubeVirt)."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        migration_target as mt,
    )

    name = "migration_target"
    if migration is None:
        return skipped(name, "not detected", "info")
    msg = "now: " + mt.describe(migration)
    version = mt.parse_kubevirt_version(target_kubevirt)
    if version is not None:
        after = (mt.ADDED_NODE_SELECTOR if version >= mt.ADDED_NODE_SELECTOR_SINCE
                 else mt.HARVESTER_ACTION)
        msg += (f"; after the cluster upgrade (KubeVirt {target_kubevirt}) the node loop will "
                f"use {after}")
    return passed(name, msg, "info")
