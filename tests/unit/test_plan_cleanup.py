"""The plan finalizer's writes are conditional (resourceVersion) and survive 409 Conflicts:
re-read, re-apply (the fault matrix's injected conflicts once landed on Finalize's write)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path
pc = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_cleanup")
client = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client")


class FakeKube:
    """One plan; every patch with a stale resourceVersion (or one of ``conflicts`` injected
    ones) answers 409 as the apiserver does."""

    def __init__(self, plan: dict[str, Any], conflicts: int = 0) -> None:
        self.plan, self.conflicts, self.patches, self.gets = plan, conflicts, 0, 0

    def get(self, api_version: str, kind: str, name: str) -> dict[str, Any]:
        self.gets += 1
        return copy.deepcopy(self.plan)

    def patch(self, api_version: str, kind: str, name: str, body: dict[str, Any]) -> None:
        self.patches += 1
        meta = body["metadata"]
        if self.conflicts or meta["resourceVersion"] != self.plan["metadata"]["resourceVersion"]:
            self.conflicts = max(0, self.conflicts - 1)
            self.plan["metadata"]["resourceVersion"] = str(
                int(self.plan["metadata"]["resourceVersion"]) + 1)   # someone else wrote
            raise client.ApiError(409, "Conflict", "the object has been modified")
        self.plan["metadata"]["finalizers"] = meta["finalizers"]
        self.plan["metadata"]["resourceVersion"] = str(
            int(self.plan["metadata"]["resourceVersion"]) + 1)


def plan(finalizers: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": "hvst-upgrade-x", "resourceVersion": "10",
                         "finalizers": list(finalizers)}}


def test_remove_finalizer_retries_conflicts() -> None:
    kube = FakeKube(plan(["other", pc.FINALIZER]), conflicts=3)
    assert pc.remove_finalizer(kube, "hvst-upgrade-x")
    assert kube.plan["metadata"]["finalizers"] == ["other"]
    assert kube.patches == 4


def test_add_finalizer_retries_a_stale_copy() -> None:
    kube = FakeKube(plan([]))
    stale = copy.deepcopy(kube.plan)
    kube.plan["metadata"]["resourceVersion"] = "11"      # changed since it was read
    assert pc.add_finalizer(kube, stale)
    assert kube.plan["metadata"]["finalizers"] == [pc.FINALIZER]


def test_conflicts_that_never_end_are_raised() -> None:
    kube = FakeKube(plan([pc.FINALIZER]), conflicts=100)
    with pytest.raises(client.ApiError) as exc:
        pc.remove_finalizer(kube, "hvst-upgrade-x")
    assert exc.value.status == 409
    assert kube.patches == pc.CONFLICT_RETRIES


def test_check_mode_and_nothing_to_do_write_nothing() -> None:
    kube = FakeKube(plan([pc.FINALIZER]))
    assert pc.remove_finalizer(kube, "hvst-upgrade-x", check_mode=True)
    assert not pc.add_finalizer(kube, kube.plan)          # already there
    assert kube.patches == 0
