"""Finalize (and abort): the toolkit's ``CleanupUpgradeResources``, removing what the phases
created and restoring what they changed.
"""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_settings,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
    NotServed,
    selector,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)

CLEANUP_TARGETS: tuple[tuple[tuple[str, str], str, str], ...] = (
    (c.VM_IMAGE, c.UPGRADE_NS, c.COMPONENT_ISO),
    (c.DEPLOYMENT, c.UPGRADE_NS, c.COMPONENT_REPO),
    (c.SERVICE, c.UPGRADE_NS, c.COMPONENT_REPO),
    (c.SUC_PLAN, c.SUC_NS, c.COMPONENT_IMAGE_PRELOAD),
    (c.SUC_PLAN, c.SUC_NS, c.COMPONENT_IMAGE_CLEANUP),
    (c.JOB, c.UPGRADE_NS, c.COMPONENT_CLUSTER_UPGRADE),
    (c.JOB, c.UPGRADE_NS, c.COMPONENT_NODE_UPGRADE),
)


def cleanup_resources(kube: Kube, writer: PlanWriter, check_mode: bool) -> list[str]:
    """The toolkit's ``CleanupUpgradeResources`` (reference §F.3); idempotent."""
    done: list[str] = []
    prefix = "would " if check_mode else ""
    # one list per kind and namespace, for all its components (in the order of the targets)
    targets: dict[tuple[str, str, str], list[str]] = {}
    for (api_version, kind), ns, component in CLEANUP_TARGETS:
        targets.setdefault((api_version, kind, ns), []).append(component)
    for (api_version, kind, ns), components in targets.items():
        sel = (f"{selector({c.LABEL_PLAN: writer.name})},{c.LABEL_COMPONENT}"
               f" in ({','.join(components)})")
        try:
            found = kube.list(api_version, kind, namespace=ns, label_selector=sel)
        except NotServed:
            continue
        items = [i for comp in components for i in found
                 if ((i.get("metadata") or {}).get("labels") or {}).get(c.LABEL_COMPONENT)
                 == comp]
        for item in items:
            name = item["metadata"]["name"]
            done.append(f"{prefix}delete {kind} {ns}/{name}")
            if not check_mode:
                kube.delete(api_version, kind, name, ns)
    for node in kube.list(*c.NODE):
        if c.ANN_PENDING_OS_IMAGE in ((node.get("metadata") or {}).get("annotations") or {}):
            done.append(f"{prefix}remove {c.ANN_PENDING_OS_IMAGE} from node "
                        f"{node['metadata']['name']}")
            if not check_mode:
                kube.patch(*c.NODE, node["metadata"]["name"],
                           {"metadata": {"annotations": {c.ANN_PENDING_OS_IMAGE: None}}})
    status = writer.status
    if status.get("provisionGeneration") is not None:
        cluster = kube.get(*c.RANCHER_CLUSTER, c.RANCHER_CLUSTER_NAME, c.FLEET_NS)
        if cluster and ((cluster.get("spec") or {}).get("rkeConfig") or {}).get(
                "upgradeStrategy"):
            done.append(f"{prefix}reset Rancher upgradeStrategy")
            if not check_mode:
                kube.patch(*c.RANCHER_CLUSTER, c.RANCHER_CLUSTER_NAME,
                           {"spec": {"rkeConfig": {"upgradeStrategy": None}}},
                           namespace=c.FLEET_NS)
    done += node_settings.restore(kube, writer, check_mode)
    return done
