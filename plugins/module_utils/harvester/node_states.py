"""Per-node upgrade states (``status.nodeUpgradeStatuses``) and the forward-only rule
(reference §C.3).

States are grouped by rank; success and failure of the same step share a rank. A node's
state is only ever replaced by one of equal or higher rank: :func:`is_ahead` tells whether
the current state is already further on than a proposed one (then the update is dropped). A
state another controller wrote that is not in this table (upgrade-toolkit's own, e.g.
``KubernetesUpgraded``) ranks as no state (:func:`ordinal`); proposing one is an error.
Used by the plan writer (image preload/cleanup progress) and by the node loop.
"""

from __future__ import annotations

from typing import Any

RANKS: tuple[tuple[str, ...], ...] = (
    ("ImagePreloading",),
    ("ImagePreloaded", "ImagePreloadFailed"),
    ("UpgradePaused",),
    ("PreDraining", "SingleNodeUpgrading"),
    ("PreDrained", "PreDrainFailed"),
    ("PostDraining",),
    ("WaitingReboot",),
    ("PostDrained", "PostDrainFailed", "SingleNodeUpgraded", "SingleNodeUpgradeFailed"),
    ("ImageCleaning",),
    ("ImageCleaned", "ImageCleanFailed"),
)
RANK: dict[str, int] = {state: rank for rank, group in enumerate(RANKS) for state in group}
STATES: tuple[str, ...] = tuple(state for group in RANKS for state in group)
FAILED_STATES = frozenset({"ImagePreloadFailed", "PreDrainFailed", "PostDrainFailed",
                           "SingleNodeUpgradeFailed", "ImageCleanFailed"})
NODE_UPGRADE_FAILURES = frozenset({"PreDrainFailed", "PostDrainFailed",
                                   "SingleNodeUpgradeFailed"})


def rank(state: str | None) -> int:
    """Rank of a state; ``-1`` for no state. Unknown names raise ``KeyError``."""
    if not state:
        return -1
    return RANK[state]


def is_ahead(current: str | None, proposed: str) -> bool:
    """True when ``current`` (read from the cluster: a state this collection does not know
    counts as none) is strictly further on than ``proposed`` (drop the update)."""
    return ordinal(current) > rank(proposed)


def set_state(statuses: dict[str, Any], node: str, state: str, reason: str = "",
              message: str = "") -> bool:
    """Set ``statuses[node]`` to ``state`` unless that moves it backwards.

    ``statuses`` is the ``nodeUpgradeStatuses`` map, changed in place. Returns whether it
    changed. Empty reason/message are omitted, as the toolkit's JSON does.
    """
    current = statuses.get(node) or {}
    if is_ahead(current.get("state"), state):
        return False
    entry: dict[str, Any] = {"state": state}
    if reason:
        entry["reason"] = reason
    if message:
        entry["message"] = message
    if current == entry:
        return False
    statuses[node] = entry
    return True


def ordinal(state: str | None) -> int:
    """Rank of a state read from the cluster: ``-1`` for none and for a name this collection
    does not know (e.g. another controller's), which any state may then replace."""
    return RANK.get(state or "", -1)
