"""Validate what an operator asked for before anything is written to the cluster.

``upgrade_plan`` (``action=ensure``) calls :func:`harvester_cluster` first (no CRD install on
a cluster that is not Harvester) and :func:`new_plan_request` before it creates a plan, so a
bad request (unknown version, version not newer, below ``minUpgradableVersion``, both
version and image, invalid or unknown pauseNodes) fails with a message naming the field and
changes nothing. Pure helpers (:func:`request_errors`) are unit-tested.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    versions,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
    NotServed,
)

# RFC 1123 subdomain: what Kubernetes accepts as a Node name
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class InputError(Exception):
    """The request is invalid; the message names the field."""


def harvester_cluster(kube: Kube) -> str:
    """The running Harvester version (Setting ``server-version``); :class:`InputError` when
    the cluster is not a Harvester cluster (its CRDs are not served or the Setting is
    missing)."""
    setting_kind = f"{c.SETTING[1]}.{c.SETTING[0]}"
    try:
        setting = kube.get(*c.SETTING, c.SERVER_VERSION_SETTING)
    except NotServed as exc:
        raise InputError(
            f"not a Harvester cluster: {kube_host(kube)} does not serve {setting_kind} "
            f"(harvesterhci.io CRDs not installed), so Setting {c.SERVER_VERSION_SETTING} "
            "cannot be read; nothing was changed") from exc
    value = str(((setting or {}).get("value") or (setting or {}).get("default") or ""))
    if not value:
        raise InputError(
            f"not a Harvester cluster (or not installed yet): Setting "
            f"{c.SERVER_VERSION_SETTING} ({setting_kind}) is missing or empty on "
            f"{kube_host(kube)}; nothing was changed")
    return value


def kube_host(kube: Kube) -> str:
    try:
        return kube.host
    except AttributeError:
        return "the API server"


def pause_node_errors(pause: list[str], node_names: list[str] | None) -> list[str]:
    """Invalid or unknown names in pauseNodes (``node_names`` None: existence not checked)."""
    errors: list[str] = []
    bad = [p for p in pause if len(p) > 253 or not DNS1123_SUBDOMAIN.match(p)]
    if bad:
        errors.append("pause_nodes (upgrade_pause_nodes, spec.nodeUpgradeOption.pauseNodes): "
                      + ", ".join(repr(b) for b in bad)
                      + " not a valid node name (RFC 1123: lower-case letters, digits, '-', '.')")
    if node_names is not None:
        unknown = [p for p in pause if p not in bad and p not in node_names]
        if unknown:
            errors.append("pause_nodes (upgrade_pause_nodes): no such node "
                          + ", ".join(unknown) + "; the cluster's nodes are "
                          + ", ".join(sorted(node_names)))
    return errors


def request_errors(version: str | None, image: str | None, current: str,
                   version_obj: dict[str, Any] | None, available: list[str],
                   force: bool, allow_downgrade: bool = False,
                   allow_version_skip: bool = False,
                   allow_unverified_iso: bool = False) -> list[str]:
    """What is wrong with the requested target (pure; see module docstring). ``force`` lifts
    the eligibility rules except a downgrade (``allow_downgrade``) and a target whose
    minUpgradableVersion is above the running release (``allow_version_skip``); an ISO that
    would be downloaded unverified needs ``allow_unverified_iso``."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        preflight_version,
    )
    if version and image:
        return [f"set either version (upgrade_version={version}) or image "
                f"(upgrade_image={image}), not both: the release comes from the Version's ISO "
                "or from the pre-uploaded image"]
    if not version:
        return []
    if version_obj is None:
        return [f"version (upgrade_version): Version {version} not found in {c.UPGRADE_NS}; "
                "available: " + (", ".join(sorted(available)) or "none")]
    errors = []
    unverified = preflight_version.iso_unverified(version, version_obj)
    if unverified and not allow_unverified_iso:
        errors.append(f"version (upgrade_version={version}): {unverified}; give the Version "
                      "an isoChecksum, or set upgrade_allow_unverified_iso=true to download "
                      "it anyway")
    minimum = str(((version_obj.get("spec") or {}).get("minUpgradableVersion")) or "")
    refused = versions.refusal(current, version, minimum, force=force,
                               allow_downgrade=allow_downgrade,
                               allow_version_skip=allow_version_skip, refuse_same=True)
    if refused is None:
        return errors
    why, rule = refused
    newer = [n for n in available if versions.parse(n) and versions.parse(current)
             and versions.compare(n, current) > 0] if versions.parse(current) else []
    return [*errors, f"version (upgrade_version={version}): {why} (server-version {current}"
            + (f"; newer: {', '.join(sorted(newer))}" if newer else "")
            + f"; {versions.SWITCHES[rule]}=true allows it)"]


SWITCH_ANNOTATIONS = (("allow_downgrade", c.ANN_ALLOW_DOWNGRADE[0]),
                      ("allow_version_skip", c.ANN_ALLOW_VERSION_SKIP[0]),
                      ("allow_unverified_iso", c.ANN_ALLOW_UNVERIFIED_ISO[0]))


def plan_annotations_switches(params: dict[str, Any]) -> dict[str, bool]:
    """Each switch as the new plan will record it: the option, or its annotation given among
    ``annotations`` (upgrade_annotations)."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        preflight_result,
    )
    given = params.get("annotations") or {}
    return {option: bool(params.get(option))
            or preflight_result.annotation_true(given, (ann,))
            for option, ann in SWITCH_ANNOTATIONS}


def plan_annotations(kube: Kube, params: dict[str, Any]) -> dict[str, str]:
    """The annotations of a new plan: the operator's (``annotations``), each switch that is
    on (every later phase reads it from the plan) and the cluster's identity
    (:mod:`cluster_id`)."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        cluster_id,
    )
    out = {str(k): str(v) for k, v in (params.get("annotations") or {}).items()}
    for option, ann in SWITCH_ANNOTATIONS:
        if params.get(option):
            out[ann] = "true"
    try:
        out[c.ANN_CLUSTER_UID] = cluster_id.cluster_uid(kube)
    except cluster_id.ClusterMismatch as exc:
        from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
            plan_writer,
        )
        raise plan_writer.PlanError(str(exc)) from None
    return out


def new_plan_request(kube: Kube, params: dict[str, Any], current: str) -> list[str]:
    """Raise :class:`InputError` listing every problem of a request for a new plan; else the
    names of the Versions it read (for the caller's choice of the newest one; empty when a
    plan from an uploaded image needs none)."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        phase_common,
    )
    foreign_plan_errors(kube, params.get("name"))
    version, image = params.get("version"), params.get("image")
    available = [v["metadata"]["name"] for v in phase_common.list_versions(kube)] \
        if version or not image else []
    if not version and not image:
        # the Version the plan will get (the newest newer one): its ISO is checked as well
        version = versions.newest_target(available, current or "")
    version_obj = phase_common.get_version(kube, version) if version and not image else None
    switches = plan_annotations_switches(params)
    errors = request_errors(version, image, current, version_obj, available,
                            bool(params.get("force")), switches["allow_downgrade"],
                            switches["allow_version_skip"], switches["allow_unverified_iso"])
    if image and not version:
        ns, name = phase_common.split_image_ref(image)
        if kube.get(*c.VM_IMAGE, name, ns) is None:
            errors.append(f"image (upgrade_image): VirtualMachineImage {ns}/{name} not found")
    pause = list(params.get("pause_nodes") or [])
    if pause:
        nodes = [n["metadata"]["name"] for n in kube.list(*c.NODE)]
        errors += pause_node_errors(pause, nodes)
    if errors:
        raise InputError("; ".join(errors) + "; nothing was changed")
    return available


def foreign_plan_errors(kube: Kube, name: str | None) -> None:
    """Raise :class:`InputError` when the plan ``ensure`` would adopt (the one called
    ``name``, else any plan not initialized yet) was recorded on another cluster: adopting
    it writes to it (finalizer, status) before anything else reads it."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        cluster_id,
        plan_writer,
    )
    for plan in plan_writer.list_plans(kube):
        meta = plan.get("metadata") or {}
        if (meta.get("name") != name) if name else \
                ((plan.get("status") or {}).get("currentPhase")):
            continue
        try:
            cluster_id.check(kube, plan)
        except cluster_id.ClusterMismatch as exc:
            raise InputError(str(exc)) from None
