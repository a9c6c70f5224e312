"""NodeUpgrade's PreRun and PostRun: the cluster settings held for the node roll.

What Harvester's own upgrade controller does around the node upgrades (harvester/harvester
``pkg/controller/master/upgrade/upgrade_controller.go``, the branch that starts the RKE2
roll on a multi-node cluster, and ``cleanup()`` / ``reenableAddons()`` after it):

* Longhorn setting ``replica-replenishment-wait-interval`` raised to 1800 s when it is lower,
  its value saved in a plan annotation first (v1.5.1, v1.6.0, v1.7.x alike), so Longhorn
  waits for a rebooting node's replicas instead of rebuilding them elsewhere
  (longhorn-manager ``scheduler/replica_scheduler.go`` ``RequireNewReplica``).
* Longhorn setting ``auto-cleanup-system-generated-snapshot`` set to ``false`` unless it is
  already (harvester/harvester#7679), for target releases before v1.6.1 (commit 875488960
  removed it once longhorn/longhorn#10495 was fixed).
* The ``kube-system/descheduler`` Addon (Harvester v1.7.0+) disabled while the nodes roll
  when it is enabled (``addUpgradeLabelToDeschedulerAddons`` + ``addon_controller.go``),
  re-enabled after (``reenableAddons``): it would evict the VMs the roll has just placed.

Only on multi-node clusters, as the controller (the single-node path runs one Job and no
Longhorn rebuild can go anywhere else). Unlike the controller, which changes the setting
and then writes the annotation, the original value is written to the plan FIRST, so a run
that dies between the two writes still restores it (finalize, abort, plan deletion), and a
resumed run never saves the raised value as the original. Check mode writes nothing.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    versions,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
    NotServed,
)


def _annotations(plan: dict[str, Any]) -> dict[str, str]:
    return (plan.get("metadata") or {}).get("annotations") or {}


def _get(kube: Kube, api_kind: tuple[str, str], name: str, ns: str) -> dict[str, Any] | None:
    try:
        return kube.get(*api_kind, name, ns)
    except NotServed:
        return None


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _target(plan: dict[str, Any]) -> str:
    st = plan.get("status") or {}
    return str((st.get("releaseMetadata") or {}).get("harvester")
               or (plan.get("spec") or {}).get("version") or "")


def disables_snapshot_cleanup(target: str) -> bool:
    """Whether the target release's upgrade controller turned Longhorn's system-snapshot
    cleanup off for the node roll (releases before v1.6.1); unknown targets: no."""
    if not target or versions.parse(target) is None or versions.is_dev(target):
        return False
    return versions.compare(target, c.SNAPSHOT_CLEANUP_KEPT_FROM) < 0


def hold(kube: Kube, plan: dict[str, Any], *, single_node: bool, check_mode: bool
         ) -> dict[str, Any]:
    """PreRun: save then change the settings; idempotent (a saved original is kept).

    Returns ``{"changed": bool, "actions": [str]}``; ``actions`` says what was (or, in check
    mode, would be) done, one line each."""
    name = plan["metadata"]["name"]
    saved = dict(_annotations(plan))
    actions: list[str] = []
    prefix = "would " if check_mode else ""
    if single_node:
        return {"changed": False, "actions": []}
    notes: dict[str, str] = {}
    changes: list[tuple[tuple[str, str], str, str | None, dict[str, Any], str]] = []

    lh = _get(kube, c.LH_SETTING, c.LH_REPLENISH_SETTING, c.LONGHORN_NS)
    if lh is not None:
        value = _int(lh.get("value"))
        if c.ANN_REPLENISH_SAVED in saved:
            if value != c.EXTENDED_REPLENISH_WAIT_S:   # resumed: the change did not land
                changes.append((c.LH_SETTING, c.LH_REPLENISH_SETTING, c.LONGHORN_NS,
                                {"value": str(c.EXTENDED_REPLENISH_WAIT_S)},
                                f"raise Longhorn {c.LH_REPLENISH_SETTING} to "
                                f"{c.EXTENDED_REPLENISH_WAIT_S} (saved "
                                f"{saved[c.ANN_REPLENISH_SAVED]})"))
        elif value is not None and value < c.EXTENDED_REPLENISH_WAIT_S:
            notes[c.ANN_REPLENISH_SAVED] = str(value)
            changes.append((c.LH_SETTING, c.LH_REPLENISH_SETTING, c.LONGHORN_NS,
                            {"value": str(c.EXTENDED_REPLENISH_WAIT_S)},
                            f"raise Longhorn {c.LH_REPLENISH_SETTING} from {value} to "
                            f"{c.EXTENDED_REPLENISH_WAIT_S}"))

    if disables_snapshot_cleanup(_target(plan)):
        snap = _get(kube, c.LH_SETTING, c.LH_SNAPSHOT_CLEANUP_SETTING, c.LONGHORN_NS)
        if snap is not None:
            value_s = str(snap.get("value") or "")
            if value_s != "false":
                if c.ANN_SNAPSHOT_CLEANUP_SAVED not in saved:
                    notes[c.ANN_SNAPSHOT_CLEANUP_SAVED] = value_s
                changes.append((c.LH_SETTING, c.LH_SNAPSHOT_CLEANUP_SETTING, c.LONGHORN_NS,
                                {"value": "false"},
                                f"turn Longhorn {c.LH_SNAPSHOT_CLEANUP_SETTING} off"))

    ns, addon_name = c.DESCHEDULER_ADDON
    addon = _get(kube, c.ADDON, addon_name, ns)
    if addon is not None and (addon.get("spec") or {}).get("enabled") is True:
        if saved.get(c.ANN_DESCHEDULER_WAS_ENABLED) != "true":
            notes[c.ANN_DESCHEDULER_WAS_ENABLED] = "true"
        changes.append((c.ADDON, addon_name, ns, {"spec": {"enabled": False}},
                        f"disable the {ns}/{addon_name} addon while the nodes roll"))

    if notes:
        actions.append(f"{prefix}save " + ", ".join(f"{k}={v}" for k, v in sorted(notes.items()))
                       + f" on UpgradePlan {name}")
    actions += [f"{prefix}{what}" for *_ignored, what in changes]
    if check_mode or not (notes or changes):
        return {"changed": bool(notes or changes), "actions": actions}
    out: dict[str, Any] = {"changed": True, "actions": actions}
    if notes:   # the originals first: whatever happens next, the restore knows them
        # the plan as patched (its new resourceVersion), for a caller that writes it next
        out["plan"] = kube.patch(c.PLAN_API_VERSION, c.PLAN_KIND, name,
                                 {"metadata": {"annotations": notes}})
    for api_kind, obj, obj_ns, body, _what in changes:
        kube.patch(*api_kind, obj, body, namespace=obj_ns)
    return out


def restore(kube: Kube, writer: Any, check_mode: bool) -> list[str]:
    """PostRun: put back what :func:`hold` saved on the plan, then drop the annotations.

    ``writer`` is a :class:`plan_writer.PlanWriter`. Idempotent; a missing Longhorn setting
    or Addon is skipped (nothing to restore into)."""
    done: list[str] = []
    prefix = "would " if check_mode else ""
    ann = writer.annotations
    for key, setting in ((c.ANN_REPLENISH_SAVED, c.LH_REPLENISH_SETTING),
                         (c.ANN_SNAPSHOT_CLEANUP_SAVED, c.LH_SNAPSHOT_CLEANUP_SETTING)):
        saved = ann.get(key)
        if saved is None:
            continue
        done.append(f"{prefix}restore Longhorn {setting}={saved}")
        if not check_mode:
            try:
                kube.patch(*c.LH_SETTING, setting, {"value": saved}, namespace=c.LONGHORN_NS)
            except (ApiError, NotServed):
                pass
            writer.patch_annotations({key: None})
    if str(ann.get(c.ANN_DESCHEDULER_WAS_ENABLED, "")).strip().lower() == "true":
        ns, addon_name = c.DESCHEDULER_ADDON
        done.append(f"{prefix}re-enable the {ns}/{addon_name} addon")
        if not check_mode:
            try:
                kube.patch(*c.ADDON, addon_name, {"spec": {"enabled": True}}, namespace=ns)
            except (ApiError, NotServed):
                pass
            writer.patch_annotations({c.ANN_DESCHEDULER_WAS_ENABLED: None})
    return done
