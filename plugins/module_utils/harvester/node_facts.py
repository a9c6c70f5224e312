"""What the node steps read about the cluster and the plan, shared by every node-step module.

The node steps (:mod:`node_gate`, :mod:`node_hooks`, :mod:`node_evacuation`,
:mod:`node_migrations`, :mod:`node_safety`, :mod:`node_job`, :mod:`node_restore`,
:mod:`node_head_start`, :mod:`node_phase`) each take a :class:`client.Kube`, a
:class:`plan_writer.PlanWriter` and plain parameters, and return a result dict for the module
(``changed`` plus facts). Failures raise :class:`errors.NodeLoopError` after recording the
node failure in the plan where the protocol says so (``PreDrainFailed``, ``PostDrainFailed``,
``SingleNodeUpgradeFailed``).

Here: the API names and annotations they share, the per-node facts (Rancher's drain order,
machine-plan secret, upgraded or not) and inventory, the drain-hook annotation names, the
plan's release, and the small readers that tell "not served" from an error.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import lock_run
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_order as no
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
    NotServed,
)

VM_API, VMI_API = "kubevirt.io/v1", "kubevirt.io/v1"
VMI_NAME_LABEL = "kubevirt.io/vmi-name"    # KubeVirt labels each migration with its VMI
VMIM_KIND = "VirtualMachineInstanceMigration"
# KubeVirt labels a VMI with the node it runs on, set with ``status.nodeName`` in the same
# update of the VMI (its CRD has no status subresource): virt-controller when it hands a
# scheduled VMI to virt-handler (pkg/virt-controller/watch/vmi.go, ``updateStatus``) and the
# target's virt-handler when it acknowledges a migration (pkg/virt-handler, the migration
# target's ``ackMigrationCompletion`` + one ``Update``). So the VMIs whose status.nodeName is
# a node are among those with its label: a step that concerns one node reads only those
# (docs/performance.md "Node-scoped reads").
VMI_NODE_LABEL = "kubevirt.io/nodeName"
CAPI_API = "cluster.x-k8s.io/v1beta1"
LONGHORN_API = "longhorn.io/v1beta2"
RUN_STRATEGY_ANNOTATION = "harvester-upgrade.harvesterhci.io/run-strategy-before-upgrade"
# which upgrade run created a migration: a migration the head start created that failed before
# the node's own cycle saw it is one of that VM's attempts (migration retries) in the same run,
# never in a later run
RUN_ANNOTATION = "harvester-upgrade.harvesterhci.io/run"
# the node a migration started through Harvester's migrate action was sent to (that migration
# has no addedNodeSelector to read it from)
TARGET_ANNOTATION = "harvester-upgrade.harvesterhci.io/target-node"
STOPPED_BY_ANNOTATION = "harvester-upgrade.harvesterhci.io/stopped-for-node"
# set when a VM is asked to start again but nobody waits for it in the node's cycle (the last
# node: its VMs boot while ImageCleanup runs); Finalize (or an abort) awaits it and removes it
RESTORING_ANNOTATION = "harvester-upgrade.harvesterhci.io/restoring-for-node"
PENDING_OS_ANNOTATION = "management.harvesterhci.io/pendingOSImage"
TOOLKIT_IMAGE_ANNOTATION = "management.harvesterhci.io/upgrade-toolkit-image"
DEFAULT_TOOLKIT_REPO = "rancher/harvester-upgrade-toolkit"


def run_id() -> str:
    """This upgrade run: the lock holder and its ansible-playbook (RUN_ANNOTATION)."""
    return f"{lock_run.identity()}#{lock_run.playbook_pid()}"


def cluster_facts(kube: Kube, plan: dict[str, Any] | None, *, light: bool = False,
                  seen: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every managed node's facts (:func:`node_order.node_facts`). ``light``: without the
    VMIs (every one in the cluster) and the ``server-version`` Setting, i.e. ``vm_count`` 0
    and ``harvester_version`` from the plan, which only the inventory and ``node_info`` show;
    the node steps decide on neither (on the VMIs of one node, read by its label). ``seen``
    receives the machine-plan Secrets read (``secrets``)."""
    nodes = kube.list("v1", "Node")
    machines = try_items(kube, CAPI_API, "Machine", c.FLEET_NS)
    secrets = kube.list("v1", "Secret", c.FLEET_NS)
    secrets = [s for s in secrets if s.get("type") == "rke.cattle.io/machine-plan"
               or (s.get("metadata") or {}).get("name", "").endswith("-machine-plan")]
    if seen is not None:
        seen["secrets"] = secrets
    if light:
        return no.node_facts(nodes, machines, secrets, plan=plan)
    vmis = try_items(kube, VMI_API, "VirtualMachineInstance")
    setting = _try_get(kube, "harvesterhci.io/v1beta1", "Setting", "server-version")
    version = (setting or {}).get("value") if setting else None
    return no.node_facts(nodes, machines, secrets, plan=plan, vmis=vmis, server_version=version)


def on_node(node: str) -> str:
    """The label selector of the VMIs KubeVirt runs on ``node`` (:data:`VMI_NODE_LABEL`)."""
    return f"{VMI_NODE_LABEL}={node}"


def node_vmis(kube: Kube, node: str, why: str | None = None) -> list[dict[str, Any]]:
    """The VMIs labelled as running on ``node`` (callers still decide on ``status.nodeName``);
    ``why``: a kind every Harvester cluster serves (:func:`harvester_items`), else
    :func:`try_items`."""
    if why:
        return harvester_items(kube, VMI_API, "VirtualMachineInstance", why,
                               label_selector=on_node(node))
    return try_items(kube, VMI_API, "VirtualMachineInstance", label_selector=on_node(node))


def try_items(kube: Kube, api: str, kind: str, ns: str | None = None,
              label_selector: str | None = None) -> list[dict[str, Any]]:
    try:
        return kube.list(api, kind, ns, label_selector)
    except Exception as exc:
        if isinstance(exc, NotServed) or "ResourceNotFound" in type(exc).__name__ or \
                getattr(exc, "status", None) == 404:
            return []
        raise


def harvester_items(kube: Kube, api: str, kind: str, why: str,
                    ns: str | None = None, label_selector: str | None = None
                    ) -> list[dict[str, Any]]:
    """``kube.list`` of a kind every Harvester cluster serves (KubeVirt's): not served on a
    Harvester cluster fails, naming it (an empty list would let a safety step pass on no
    data); on a cluster without Harvester's CRDs it is empty."""
    try:
        return kube.list(api, kind, ns, label_selector)
    except NotServed as exc:
        if not is_harvester(kube):
            return []
        raise NodeLoopError(f"cannot {why}: {kind} ({api}) is not served ({exc}) although "
                            "every Harvester cluster serves it; nothing was changed") from exc


def _try_get(kube: Kube, api: str, kind: str, name: str,
             ns: str | None = None) -> dict[str, Any] | None:
    try:
        return kube.get(api, kind, name, ns)
    except Exception as exc:
        if isinstance(exc, NotServed) or "ResourceNotFound" in type(exc).__name__:
            return None
        raise


def inventory(facts: list[dict[str, Any]]) -> dict[str, Any]:
    """The nodes as the playbook's ``add_host`` takes them, in Rancher's drain order, and
    whether the cluster has a single (non-witness) node."""
    return {"nodes": [{"name": f["name"], "groups": no.groups_for(f), "vars": no.host_vars(f)}
                      for f in facts],
            "order": [f["name"] for f in facts],
            "single_node": is_single_node(facts)}


def is_single_node(facts: list[dict[str, Any]]) -> bool:
    """Exactly one node that is not a witness."""
    return len([f for f in facts if "witness" not in f["roles"]]) == 1


def fact_for(facts: list[dict[str, Any]], node: str) -> dict[str, Any]:
    for f in facts:
        if f["name"] == node:
            return f
    raise NodeLoopError(f"node {node} is not a managed node of this cluster")


def hook_names(kube: Kube) -> tuple[str, str]:
    """The pre/post hook annotations Rancher waits for (from the cluster's upgradeStrategy)."""
    cluster = _try_get(kube, "provisioning.cattle.io/v1", "Cluster", "local", c.FLEET_NS) or {}
    strat = ((cluster.get("spec") or {}).get("rkeConfig") or {}).get("upgradeStrategy") or {}
    pre, post = no.DEFAULT_PRE_HOOK, no.DEFAULT_POST_HOOK
    for opt in ("controlPlaneDrainOptions", "workerDrainOptions"):
        d = strat.get(opt) or {}
        for h in d.get("preDrainHooks") or []:
            pre = h.get("annotation") or pre
        for h in d.get("postDrainHooks") or []:
            post = h.get("annotation") or post
    return pre, post


def release(plan: dict[str, Any]) -> dict[str, Any]:
    rel = (plan.get("status") or {}).get("releaseMetadata") or {}
    if not rel.get("os") or not rel.get("kubernetes"):
        raise NodeLoopError(f"UpgradePlan {plan['metadata']['name']} has no releaseMetadata "
                            "(os, kubernetes); run the earlier phases first")
    return rel


def others_left(facts: list[dict[str, Any]], node: str, play: list[str]) -> bool:
    """Is a node of the serial play other than ``node`` still to be upgraded (``facts``:
    :func:`cluster_facts`)?"""
    return any(f["name"] in play and f["name"] != node and not f["upgraded"] for f in facts)


def secret_ann(sec: dict[str, Any] | None) -> dict[str, str]:
    return dict(((sec or {}).get("metadata") or {}).get("annotations") or {})


def active_vmi(v: dict[str, Any]) -> bool:
    st = v.get("status") or {}
    return st.get("phase") not in ("Succeeded", "Failed") and not (
        v.get("metadata") or {}).get("deletionTimestamp")


def is_harvester(kube: Kube) -> bool:
    """Whether the cluster is a Harvester cluster, whose every release ships Longhorn (its
    storage) and KubeVirt: Harvester's Setting kind is served. Only a cluster that is not
    Harvester at all (no harvesterhci.io CRDs) may lack them; an error reading discovery
    counts as Harvester (the caller then fails rather than skip a check)."""
    try:
        kube.resource("harvesterhci.io/v1beta1", "Setting")
        return True
    except NotServed:
        return False
    except ApiError:
        return True


def safe_name(name: str, limit: int = 63) -> str:
    """A DNS label: ``name`` or, when too long, a prefix plus a short hash."""
    name = name.lower()
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:limit - 9].rstrip('-.')}-{digest}"
