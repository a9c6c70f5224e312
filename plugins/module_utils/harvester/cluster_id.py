"""Which cluster an UpgradePlan belongs to.

A kubeconfig context pointing at another cluster than the plan's (a second Harvester cluster
with the same plan name, a plan restored from another cluster's backup) must not be acted on.
The plan records its cluster when it is created: annotation
``harvester-upgrade.harvesterhci.io/cluster-uid`` = the uid of the cluster's ``kube-system``
Namespace (made when the cluster is installed, never reused, and the same through every
API server address, load balancer or Rancher proxy that reaches it). Every run that reads a
plan (:func:`check`, from ``plan_writer.resolve``/``find_active`` and
``plan_writer.find_plan``) compares it with the cluster it talks to, before any write. A plan
without the annotation (created by an older collection, or for the toolkit) is not checked.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)


class ClusterMismatch(Exception):
    """The plan was recorded on another cluster than the one this run talks to."""


def cluster_uid(kube: Any) -> str:
    """The uid of the cluster's ``kube-system`` Namespace (cached on ``kube``)."""
    cached = getattr(kube, "_cluster_uid", None)
    if cached:
        return str(cached)
    ns = kube.get("v1", "Namespace", c.CLUSTER_ID_NAMESPACE)
    uid = str(((ns or {}).get("metadata") or {}).get("uid") or "")
    if not uid:
        raise ClusterMismatch(f"cannot tell which cluster this is: Namespace "
                              f"{c.CLUSTER_ID_NAMESPACE} not found or has no uid; nothing "
                              "was changed")
    try:
        kube._cluster_uid = uid  # noqa: SLF001 - one read per client
    except AttributeError:
        pass
    return uid


def recorded(plan: dict[str, Any] | None) -> str:
    return str((((plan or {}).get("metadata") or {}).get("annotations") or {}).get(
        c.ANN_CLUSTER_UID) or "")


def check(kube: Any, plan: dict[str, Any] | None) -> None:
    """Raise :class:`ClusterMismatch` when ``plan`` records another cluster than ``kube``'s."""
    want = recorded(plan)
    if not want:
        return
    have = cluster_uid(kube)
    if have != want:
        name = ((plan or {}).get("metadata") or {}).get("name")
        try:
            host = kube.host
        except Exception:  # noqa: BLE001 - a test double: the message goes without it
            host = None
        raise ClusterMismatch(
            f"UpgradePlan {name} belongs to another cluster (annotation {c.ANN_CLUSTER_UID}="
            f"{want}) than the one this run talks to{f' at {host}' if host else ''} "
            f"(kube-system uid {have}): check the kubeconfig context (upgrade_kubeconfig, "
            "upgrade_context, K8S_AUTH_*); nothing was changed")
