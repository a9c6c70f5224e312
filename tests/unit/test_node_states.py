"""Per-node states only move forward (reference §C.3)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_states


def test_rank_table() -> None:
    assert node_states.rank("ImagePreloading") == 0
    assert node_states.rank("ImagePreloaded") == node_states.rank("ImagePreloadFailed") == 1
    assert node_states.rank("UpgradePaused") == 2
    assert node_states.rank("PreDraining") == node_states.rank("SingleNodeUpgrading") == 3
    assert node_states.rank("WaitingReboot") == 6
    assert node_states.rank("PostDrained") == node_states.rank("SingleNodeUpgraded") == 7
    assert node_states.rank("ImageCleaned") == node_states.rank("ImageCleanFailed") == 9
    assert node_states.rank(None) == -1
    assert len(node_states.STATES) == 17


@pytest.mark.parametrize("current,proposed,ahead", [
    ("ImagePreloaded", "ImagePreloading", True),
    ("ImagePreloading", "ImagePreloaded", False),
    ("PreDrained", "PreDrainFailed", False),
    ("PostDrained", "WaitingReboot", True),
    ("ImageCleaned", "ImageCleaning", True),
    (None, "ImagePreloading", False),
])
def test_is_ahead(current: str | None, proposed: str, ahead: bool) -> None:
    assert node_states.is_ahead(current, proposed) is ahead


def test_set_state_never_moves_back() -> None:
    statuses: dict[str, Any] = {}
    assert node_states.set_state(statuses, "n1", "ImagePreloading")
    assert node_states.set_state(statuses, "n1", "ImagePreloaded")
    assert not node_states.set_state(statuses, "n1", "ImagePreloading")
    assert statuses == {"n1": {"state": "ImagePreloaded"}}
    assert not node_states.set_state(statuses, "n1", "ImagePreloaded")


def test_set_state_records_reason_and_message() -> None:
    statuses: dict[str, Any] = {"n1": {"state": "PreDraining"}}
    assert node_states.set_state(statuses, "n1", "PreDrainFailed", "BackoffLimitExceeded",
                                 "Job has reached the specified backoff limit")
    assert statuses["n1"] == {"state": "PreDrainFailed", "reason": "BackoffLimitExceeded",
                              "message": "Job has reached the specified backoff limit"}


def test_unknown_state_is_rejected() -> None:
    with pytest.raises(KeyError):
        node_states.set_state({}, "n1", "Bogus")


def test_ordinal_counts_a_state_it_does_not_know_as_none() -> None:
    assert node_states.ordinal("PreDrained") == node_states.rank("PreDrained")
    assert node_states.ordinal(None) == node_states.ordinal("") == -1
    assert node_states.ordinal("KubernetesUpgraded") == -1   # upgrade-toolkit's own
