"""What the Longhorn safety check (:mod:`node_safety`) reads of a Replica and a Volume, and the
informer indexes kept on them (:mod:`cycle_kube`), so that the check of one node looks at that
node's replicas and a few sets instead of every Replica and Volume of the cluster; and the
indexes that answer the pre-drain Job's two questions (:mod:`node_job`: are the running
engines' volumes all attached, is one of them not healthy) from sets of names.

A volume is at risk when ``node`` goes down if it is attached and has no healthy replica off
``node``. With the three indexes that is: an attached volume with no healthy replica at all,
or an attached volume whose healthy replicas are all among ``node``'s own — the same answer
as the pass over every Replica (:func:`node_safety.volumes_at_risk`), which still gives the
reasons when some volume is at risk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# index names (informer.Informer ``indexers``)
REPLICA_NODE = "spec.nodeID"            # every replica, by the node it lives on
HEALTHY_REPLICA_VOLUME = "healthy"      # the healthy replicas, by their volume
ATTACHED_VOLUME = "attached"            # the attached volumes, by name
NOT_ATTACHED_VOLUME = "state!=attached"     # the volumes not (yet, or no longer) attached
NOT_HEALTHY_VOLUME = "robustness!=healthy"  # the volumes not healthy
RUNNING_ENGINE_VOLUME = "running"       # the running engines, by their volume (label)


def replica_healthy(replica: dict[str, Any]) -> bool:
    """A replica that serves the volume: running, and not failed since it last became RW.

    Longhorn's own test (longhorn-manager ``datastore.IsAvailableHealthyReplica``, which its
    instance-manager PodDisruptionBudget uses too): ``failedAt`` empty and ``healthyAt`` set.
    A replica Longhorn reuses or creates for a rebuild has both cleared and runs (``WO`` in
    the engine) long before it holds the volume's data; ``healthyAt`` is set when it is
    rebuilt."""
    spec = replica.get("spec") or {}
    return (replica.get("status") or {}).get("currentState") == "running" \
        and not spec.get("failedAt") and bool(spec.get("healthyAt"))


def volume_attached(vol: dict[str, Any]) -> bool:
    """A volume with a data path to lose: attached, or being attached."""
    return (vol.get("status") or {}).get("state") in ("attached", "attaching")


def _replica_node(replica: dict[str, Any]) -> str:
    return str((replica.get("spec") or {}).get("nodeID") or "")


def _healthy_replica_volume(replica: dict[str, Any]) -> str | None:
    if not replica_healthy(replica):
        return None
    return str((replica.get("spec") or {}).get("volumeName") or "")


def _attached_volume(vol: dict[str, Any]) -> str | None:
    return str((vol.get("metadata") or {}).get("name") or "") if volume_attached(vol) else None


def _not_attached_volume(vol: dict[str, Any]) -> str | None:
    if (vol.get("status") or {}).get("state") == "attached":
        return None
    return str((vol.get("metadata") or {}).get("name") or "")


def _not_healthy_volume(vol: dict[str, Any]) -> str | None:
    if (vol.get("status") or {}).get("robustness") == "healthy":
        return None
    return str((vol.get("metadata") or {}).get("name") or "")


def _running_engine_volume(engine: dict[str, Any]) -> str | None:
    """As the pre-drain script reads an engine: running, and its ``longhornvolume`` label."""
    if (engine.get("status") or {}).get("currentState") != "running":
        return None
    return str(((engine.get("metadata") or {}).get("labels") or {}).get("longhornvolume")
               or "")


Indexers = dict[str, Callable[[dict[str, Any]], "str | None"]]
REPLICA_INDEXERS: Indexers = {REPLICA_NODE: _replica_node,
                              HEALTHY_REPLICA_VOLUME: _healthy_replica_volume}
VOLUME_INDEXERS: Indexers = {ATTACHED_VOLUME: _attached_volume,
                             NOT_ATTACHED_VOLUME: _not_attached_volume,
                             NOT_HEALTHY_VOLUME: _not_healthy_volume}
ENGINE_INDEXERS: Indexers = {RUNNING_ENGINE_VOLUME: _running_engine_volume}
