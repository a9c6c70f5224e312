"""Pre-flight checks that no other upgrader works on the cluster: Harvester's built-in (V1)
upgrade and the Upgrade Manager (upgrade-toolkit), which reconciles the same UpgradePlan CRD.

Family ``coexistence``: not the webhook's, so the skip-webhook annotation does not skip them.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.preflight_result import (
    CheckResult,
    failed,
    is_witness,
    labels_of,
    name_of,
    passed,
    skipped,
)


def no_legacy_upgrade(upgrades: list[dict[str, Any]] | None) -> CheckResult:
    """No Harvester built-in (V1) ``Upgrade`` in progress: one whose label
    ``harvesterhci.io/upgradeState`` is not ``Succeeded``/``Failed`` (also none yet), the
    rule Harvester's own upgrade webhook applies before it admits another Upgrade
    (harvester v1.6.0 pkg/webhook/resources/upgrade/validator.go ``Create``)."""
    name = "no_legacy_upgrade"
    if upgrades is None:
        return skipped(name, "Harvester Upgrades (harvesterhci.io) are not served", "coexistence")
    busy = [u for u in upgrades
            if labels_of(u).get(c.LABEL_V1_UPGRADE_STATE) not in c.V1_UPGRADE_TERMINAL]
    if busy:
        states = ", ".join(f"{name_of(u)} ({labels_of(u).get(c.LABEL_V1_UPGRADE_STATE) or 'new'})"
                           for u in busy)
        return failed(name, "Harvester's built-in upgrade is in progress: " + states
                      + "; let it finish (or delete it) before upgrading with this collection",
                      [f"upgrade/{name_of(u)}" for u in busy], "coexistence")
    return passed(name, f"{len(upgrades)} Harvester Upgrades, none in progress", "coexistence")


def no_upgrade_manager(addon_objs: list[dict[str, Any]],
                       deployments: list[dict[str, Any]]) -> CheckResult:
    """The Upgrade Manager (upgrade-toolkit) is not installed: it reconciles the same
    UpgradePlan CRD. Installed as the experimental Addon ``harvester-upgrade-manager``
    (enabled) or its Helm chart (Deployment labelled
    ``app.kubernetes.io/name=harvester-upgrade-manager``)."""
    name = "no_upgrade_manager"
    found = [f"addon/{name_of(a)}" for a in addon_objs
             if (a.get("metadata") or {}).get("name") == c.UPGRADE_MANAGER_ADDON
             and (a.get("spec") or {}).get("enabled") is True]
    found += [f"deployment/{name_of(d)}" for d in deployments
              if labels_of(d).get(c.LABEL_APP_NAME) == c.UPGRADE_MANAGER_ADDON
              and (d.get("spec") or {}).get("replicas", 1) != 0]
    if found:
        return failed(name, "Harvester's Upgrade Manager is installed (" + ", ".join(found)
                      + "); it reconciles the same UpgradePlans: disable the add-on (or "
                      "uninstall the chart) before upgrading with this collection", found,
                      "coexistence")
    return passed(name, "Upgrade Manager not installed", "coexistence")


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
        return passed(name, "not a single-node cluster: the node loop answers Rancher's "
                      "drain hooks", "coexistence")
    if cluster is None:
        return skipped(name, "no Rancher cluster to read (see cluster_ready)", "coexistence")
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
        return passed(name, "single-node cluster, no drain hooks declared", "coexistence")
    ref = f"clusters.provisioning.cattle.io/{c.FLEET_NS}/{c.RANCHER_CLUSTER_NAME}"
    return failed(name, f"single-node cluster but {ref} declares drain hooks in "
                  "spec.rkeConfig.upgradeStrategy (" + "; ".join(declared) + "): Rancher "
                  "would cordon the node during the RKE2 upgrade and wait for them, and the "
                  "single-node upgrade answers none; remove them (for example kubectl -n "
                  f"{c.FLEET_NS} patch clusters.provisioning.cattle.io "
                  f"{c.RANCHER_CLUSTER_NAME} --type merge -p "
                  "'{\"spec\":{\"rkeConfig\":{\"upgradeStrategy\":null}}}') and retry",
                  [ref], "coexistence")
