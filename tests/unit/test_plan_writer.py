"""PlanWriter: conflict-safe status writes, Events after the write, aggregated repeats."""

from __future__ import annotations

import copy
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    phases,
    plan_status,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)


class FakeKube:
    """Just enough of client.Kube: one plan, Events, and a conflict to inject."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.events: list[dict[str, Any]] = []
        self.conflicts = 0
        self.puts = 0

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None
            ) -> dict[str, Any] | None:
        return copy.deepcopy(self.plan)

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            # someone else wrote meanwhile: bump the stored resourceVersion
            self.plan["metadata"]["resourceVersion"] = str(
                int(self.plan["metadata"]["resourceVersion"]) + 1)
            self.plan.setdefault("status", {})["isoImageID"] = "set-by-someone-else"
            raise ApiError(409, "Conflict", "the object has been modified")
        assert obj["metadata"]["resourceVersion"] == self.plan["metadata"]["resourceVersion"]
        self.puts += 1
        self.plan = copy.deepcopy(obj)
        self.plan["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"])
                                                       + 1)
        return copy.deepcopy(self.plan)

    def list(self, *a: Any, **kw: Any) -> list[dict[str, Any]]:
        return [e for e in self.events if e["metadata"]["namespace"] == kw.get("namespace")]

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.events.append(copy.deepcopy(obj))
        return obj

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None) -> dict[str, Any]:
        ev = next(e for e in self.events if e["metadata"]["name"] == name)
        ev.update(patch)
        return ev


def new_plan() -> dict[str, Any]:
    return {"apiVersion": "management.harvesterhci.io/v1beta1", "kind": "UpgradePlan",
            "metadata": {"name": "hvst-upgrade-abcde", "uid": "u1", "resourceVersion": "10",
                         "generation": 1}, "spec": {"version": "v1.6.0"}}


def test_update_retries_on_conflict_and_keeps_other_writes() -> None:
    kube = FakeKube(new_plan())
    kube.conflicts = 2
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    assert writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    assert kube.puts == 1
    assert kube.plan["status"]["currentPhase"] == "Initializing"
    assert kube.plan["status"]["isoImageID"] == "set-by-someone-else"


def test_events_follow_the_write_and_repeat_is_aggregated() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    writer.update(lambda s: plan_status.start_phase(s, phases.get("ISODownload"), "T1", 1))
    assert [(e["reason"], e["message"]) for e in kube.events] == [
        ("PhaseTransition", "Entering phase ISODownload")]
    ev = kube.events[0]
    assert ev["source"] == {"component": "upgradeplan-controller"}
    assert ev["metadata"]["namespace"] == "default"
    assert ev["involvedObject"]["kind"] == "UpgradePlan"
    assert ev["involvedObject"]["name"] == "hvst-upgrade-abcde"
    writer.recorder.emit(plan_status.EventSpec("Normal", "PhaseTransition",
                                               "Entering phase ISODownload"))
    assert len(kube.events) == 1 and kube.events[0]["count"] == 2


def test_no_write_when_nothing_changes() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    puts = kube.puts
    assert not writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    assert kube.puts == puts


def test_check_mode_writes_nothing() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan(), check_mode=True)  # type: ignore[arg-type]
    assert writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    assert kube.puts == 0 and "status" not in kube.plan
    writer.update(lambda s: plan_status.start_phase(s, phases.get("ISODownload"), "T1", 1))
    assert kube.events == [] and writer.recorder.emitted[0]["reason"] == "PhaseTransition"
