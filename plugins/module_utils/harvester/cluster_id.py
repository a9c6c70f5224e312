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

The kube-system read is made once per run, not once per module: the module that read it and
holds the run's upgrade lock records the lock Lease's uid beside it
(:func:`lock_run.remember_cluster`). A Lease's uid is a random UUID made by the API server
that created it (never set by a client; a copy restored elsewhere gets a new one), so a later
module of the run that finds the Lease with that uid talks to that same cluster, and knows its
kube-system uid from the record. The Lease read is the one the lock needs anyway
(:func:`lease_read`); any other Lease (re-created, another cluster's, none) and the module
reads kube-system again.
"""

from __future__ import annotations

import time
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import lock_run
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_lease import (
    LEASE,
    NAME,
    NAMESPACE,
)


class ClusterMismatch(Exception):
    """The plan was recorded on another cluster than the one this run talks to."""


def cluster_uid(kube: Any) -> str:
    """The uid of the cluster's ``kube-system`` Namespace (cached on ``kube``)."""
    cached = getattr(kube, "_cluster_uid", None)
    if cached:
        return str(cached)
    uid = _proven_by_lease(kube)
    if not uid:
        ns = kube.get("v1", "Namespace", c.CLUSTER_ID_NAMESPACE)
        uid = str(((ns or {}).get("metadata") or {}).get("uid") or "")
        held = getattr(kube, "_lock_lease_uid", None)
        if uid and held:   # read after this module took the lock: record it now
            lock_run.remember_cluster(str(held), uid)
    if not uid:
        raise ClusterMismatch(f"cannot tell which cluster this is: Namespace "
                              f"{c.CLUSTER_ID_NAMESPACE} not found or has no uid; nothing "
                              "was changed")
    try:
        kube._cluster_uid = uid  # noqa: SLF001 - one read per client
    except AttributeError:
        pass
    return uid


def _proven_by_lease(kube: Any) -> str:
    """The kube-system uid this run recorded, if the lock Lease it recorded it with is the one
    this client finds (see the module doc); "" otherwise. The Lease read is kept for the
    lock (:func:`lease_read`)."""
    record = lock_run.remembered_cluster()
    if record is None:
        return ""
    lease_uid, uid = record
    sent = time.monotonic()
    lease = kube.get(*LEASE, NAME, NAMESPACE)
    try:
        kube._lease_read = (lease, sent)  # noqa: SLF001 - taken by lease_read, once
    except AttributeError:
        pass
    if str(((lease or {}).get("metadata") or {}).get("uid") or "") != lease_uid:
        return ""
    return uid


# a Lease read older than this is not decided on by the lock (it reads the Lease again)
LEASE_READ_FRESH = 1.0


def lease_read(kube: Any) -> tuple[dict[str, Any] | None, float] | None:
    """The lock Lease as :func:`cluster_uid` read it in this module (the lease or None, and
    the monotonic time before the request), once, if that was less than
    :data:`LEASE_READ_FRESH` seconds ago; None otherwise."""
    read = getattr(kube, "_lease_read", None)
    if read is None:
        return None
    kube._lease_read = None  # noqa: SLF001
    if time.monotonic() - float(read[1]) >= LEASE_READ_FRESH:
        return None
    return read  # type: ignore[no-any-return]


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
