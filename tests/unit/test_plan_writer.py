"""PlanWriter: conflict-safe status writes, Events after the write, aggregated repeats; the
node loop's forward-only node states; the one active-plan rule of every plan lookup."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    errors,
    phases,
    plan_status,
    plan_writer,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)


class FakeKube:
    """Just enough of client.Kube: one plan, Events, and a conflict to inject."""

    check_mode = False

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.events: list[dict[str, Any]] = []
        self.conflicts = 0
        self.puts = 0
        self.event_gets = 0

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None
            ) -> dict[str, Any] | None:
        if kind == "Event":
            self.event_gets += 1
            return next((copy.deepcopy(e) for e in self.events
                         if (e["metadata"]["namespace"], e["metadata"]["name"])
                         == (namespace, name)), None)
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
        raise AssertionError("Events are found again by name, never listed")

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        md = obj["metadata"]
        if any((e["metadata"]["namespace"], e["metadata"]["name"])
               == (md["namespace"], md["name"]) for e in self.events):
            raise ApiError(409, "AlreadyExists", f"events {md['name']} already exists")
        self.events.append(copy.deepcopy(obj))
        return obj

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None, subresource: str | None = None) -> dict[str, Any]:
        if kind == "UpgradePlan":   # the node loop's conditional merge patch of the status
            if self.conflicts:
                self.conflicts -= 1
                raise ApiError(409, "Conflict", "the object has been modified")
            rv = self.plan["metadata"]["resourceVersion"]
            assert subresource == "status" and patch["metadata"]["resourceVersion"] == rv
            self.plan.setdefault("status", {}).update(patch["status"])
            self.plan["metadata"]["resourceVersion"] = str(int(rv) + 1)
            return copy.deepcopy(self.plan)
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
    assert kube.event_gets == 0     # this call created it: its count is known


def test_a_repeat_in_another_module_call_is_aggregated_by_name() -> None:
    """A later module call (a new writer and recorder) folds an identical Event into the
    existing one: its create is refused (same name), it reads that Event and bumps the count;
    a different message is a new Event."""
    kube = FakeKube(new_plan())
    spec = plan_status.EventSpec("Warning", "NodeUpgradeRetry", "node-1: waiting for drain")
    PlanWriter(kube, new_plan()).recorder.emit(spec)   # type: ignore[arg-type]
    later = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    later.recorder.emit(spec)
    later.recorder.emit(spec)
    assert [e["count"] for e in kube.events] == [3]
    assert kube.event_gets == 1
    later.event("NodeUpgradeRetry", "node-2: waiting for drain", warning=True)
    assert len(kube.events) == 2


def test_node_loop_events_are_aggregated_with_their_own_source() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    writer.event("VMShutdown", "default/pinned", namespace="harvester-system",
                 component="vm-live-migrate-detector")
    writer.event("VMShutdown", "default/pinned", namespace="harvester-system",
                 component="vm-live-migrate-detector")
    writer.event("VMShutdown", "default/pinned", namespace="harvester-system")
    assert [(e["source"]["component"], e["count"]) for e in kube.events] == [
        ("vm-live-migrate-detector", 2), (writer.component, 1)]
    assert [e["reason"] for e in writer.events] == ["VMShutdown"] * 3


def test_no_write_when_nothing_changes() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    puts = kube.puts
    assert not writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    assert kube.puts == puts


def test_a_held_change_is_written_with_the_next_write_in_one_request() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    puts = kube.puts
    assert not writer.set_fields({"releaseMetadata": {"harvester": "v1.6.0"}}, hold=True)
    assert writer.set_node_states({"n1": "ImagePreloaded"}, hold=True) is False
    assert kube.puts == puts and writer.holding   # nothing sent yet
    kube.conflicts = 1   # the held changes are applied again on the plan as it is now
    writer.update(lambda s: plan_status.complete_phase(s, phases.get("Initialize"), "T1", 1))
    assert kube.puts == puts + 1 and not writer.holding
    st = kube.plan["status"]
    assert st["currentPhase"] == "Initialized" and st["isoImageID"] == "set-by-someone-else"
    assert st["releaseMetadata"] == {"harvester": "v1.6.0"}
    assert st["nodeUpgradeStatuses"] == {"n1": {"state": "ImagePreloaded"}}
    assert not writer.flush() and kube.puts == puts + 1   # nothing left to write


def test_a_held_change_is_flushed_before_a_node_state_patch() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    writer.set_fields({"provisionGeneration": 2}, hold=True)
    writer.set_node_state("n1", "PreDraining")
    assert kube.plan["status"]["provisionGeneration"] == 2
    assert node_state(kube, "n1") == "PreDraining" and not writer.holding


def test_check_mode_writes_nothing() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan(), check_mode=True)  # type: ignore[arg-type]
    assert writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    assert kube.puts == 0 and "status" not in kube.plan
    writer.update(lambda s: plan_status.start_phase(s, phases.get("ISODownload"), "T1", 1))
    assert kube.events == [] and writer.recorder.emitted[0]["reason"] == "PhaseTransition"


def node_state(kube: FakeKube, node: str) -> str | None:
    return ((kube.plan.get("status") or {}).get("nodeUpgradeStatuses") or {}).get(
        node, {}).get("state")


def test_node_states_only_move_forward_and_each_change_is_an_event() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    assert writer.set_node_state("n1", "PreDraining")
    assert writer.set_node_state("n1", "PreDrained")
    assert not writer.set_node_state("n1", "PreDraining")      # never backwards
    assert node_state(kube, "n1") == "PreDrained" == writer.node_state("n1")
    assert writer.set_node_state("n1", "PreDrainFailed", "Why", "it broke")   # same rank
    assert kube.plan["status"]["nodeUpgradeStatuses"]["n1"] == {
        "state": "PreDrainFailed", "reason": "Why", "message": "it broke"}
    assert not writer.set_node_state("n1", "PreDrainFailed", "Why", "it broke")   # no change
    assert [e["reason"] for e in writer.events] == [
        "NodePreDraining", "NodePreDrained", "NodePreDrainFailed"]
    warning = [e["type"] for e in kube.events if e["reason"] == "NodePreDrainFailed"]
    assert warning == ["Warning"]
    assert {e["source"]["component"] for e in kube.events} == {"harvester-upgrade"}


def test_a_node_state_another_controller_wrote_can_be_replaced() -> None:
    plan = new_plan()
    plan["status"] = {"nodeUpgradeStatuses": {"n1": {"state": "KubernetesUpgraded"}}}
    kube = FakeKube(plan)
    writer = PlanWriter(kube, copy.deepcopy(plan))  # type: ignore[arg-type]
    assert writer.set_node_state("n1", "PreDraining", event=False)
    assert node_state(kube, "n1") == "PreDraining" and kube.events == []


def test_node_state_write_retries_conflicts_then_gives_up_with_a_plan_error() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    kube.conflicts = 2
    assert writer.set_node_state("n1", "PreDraining")
    kube.conflicts = 100
    with pytest.raises(errors.NodeLoopError, match="too many conflicts"):
        writer.set_node_state("n1", "PreDrained")


def test_node_state_in_check_mode_writes_nothing() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan(), check_mode=True)  # type: ignore[arg-type]
    assert writer.set_node_state("n1", "PreDraining")
    assert node_state(kube, "n1") is None and kube.events == []


def test_fail_plan_fails_the_plan_as_it_is_now_and_lists_its_events() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    writer.update(lambda s: plan_status.initialize(s, "T0", 1))
    kube.plan["status"]["isoImageID"] = "written-meanwhile"
    kube.plan["metadata"]["resourceVersion"] = "99"
    writer.fail_plan("node n1 upgrade failed: boom")
    assert kube.plan["status"]["currentPhase"] == "Failed"
    assert kube.plan["status"]["isoImageID"] == "written-meanwhile"
    assert "UpgradeFailed" in [e["reason"] for e in writer.events]


class Plans:
    """Plans to look up (``list``/``get``/``resource`` of client.Kube)."""

    check_mode = False

    def __init__(self, plans: list[dict[str, Any]], served: bool = True) -> None:
        self.plans, self.served = plans, served

    def resource(self, api: str, kind: str) -> object:
        if not self.served:
            raise errors.NotServed(404, "NotServed", f"{kind}.{api} is not served")
        return object()

    def list(self, api: str, kind: str, *a: Any, **kw: Any) -> list[dict[str, Any]]:
        if not self.served:
            raise errors.NotServed(404, "NotServed", f"{kind}.{api} is not served")
        return self.plans

    def get(self, api: str, kind: str, name: str, ns: str | None = None) -> Any:
        return next((p for p in self.plans if p["metadata"]["name"] == name), None)


def a_plan(name: str, created: str, phase: str | None, progressing: str | None
           ) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase:
        status["currentPhase"] = phase
    if progressing:
        status["conditions"] = [{"type": "Progressing", "status": progressing}]
    return {"metadata": {"name": name, "creationTimestamp": created}, "status": status}


def test_the_active_plan_is_the_newest_progressing_one_for_every_lookup() -> None:
    kube = Plans([a_plan("old", "2026-01-01T00:00:00Z", "Succeeded", "False"),
                  a_plan("running", "2026-01-02T00:00:00Z", "NodeUpgrading", "True"),
                  a_plan("fresh", "2026-01-03T00:00:00Z", None, None)])
    # a plan nobody initialized is not being upgraded: not the active one
    assert plan_writer.find_active(kube)["metadata"]["name"] == "running"
    assert plan_writer.resolve(kube, None)["metadata"]["name"] == "running"
    assert plan_writer.find_plan(kube, None)["metadata"]["name"] == "running"
    assert plan_writer.find_plan(kube, "fresh")["metadata"]["name"] == "fresh"


def test_find_plan_says_why_there_is_nothing_to_work_on() -> None:
    with pytest.raises(plan_writer.NoActivePlan, match="no active UpgradePlan"):
        plan_writer.find_plan(Plans([a_plan("done", "T", "Succeeded", "False")]), None)
    with pytest.raises(plan_writer.NoActivePlan, match="CRD is not installed"):
        plan_writer.find_plan(Plans([], served=False), None)
    with pytest.raises(errors.NodeLoopError, match="UpgradePlan x not found: the UpgradePlan"):
        plan_writer.find_plan(Plans([], served=False), "x")
    with pytest.raises(errors.NodeLoopError, match="UpgradePlan x not found$"):
        plan_writer.find_plan(Plans([]), "x")
    failed = a_plan("broken", "T", "Failed", "False")
    failed["status"]["phaseTransitionTimestamps"] = [{"phase": "NodeUpgrading"},
                                                     {"phase": "Failed"}]
    with pytest.raises(errors.NodeLoopError, match="broken failed in NodeUpgrading") as exc:
        plan_writer.find_plan(Plans([failed]), None)
    assert not isinstance(exc.value, plan_writer.NoActivePlan)


def test_held_events_wait_for_send_and_keep_their_order() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    writer.hold_events()
    assert writer.set_node_state("n1", "PostDrained")   # the write itself is not held
    writer.event("DrainHookAnswered", "Node n1: answered")
    assert kube.plan["status"]["nodeUpgradeStatuses"]["n1"]["state"] == "PostDrained"
    assert kube.events == []
    assert [e["reason"] for e in writer.events] == ["NodePostDrained", "DrainHookAnswered"]
    writer.send_events()
    assert [e["reason"] for e in kube.events] == ["NodePostDrained", "DrainHookAnswered"]
    writer.event("After", "sent at once again")
    assert kube.events[-1]["reason"] == "After"
    writer.send_events()   # nothing held: nothing sent twice
    assert len(kube.events) == 3


def test_a_warning_sends_what_was_held_and_itself_at_once() -> None:
    kube = FakeKube(new_plan())
    writer = PlanWriter(kube, new_plan())  # type: ignore[arg-type]
    writer.hold_events()
    writer.event("DrainHookAnswered", "Node n1: answered")
    writer.event("Broken", "it broke", warning=True)
    assert [(e["reason"], e["type"]) for e in kube.events] == [
        ("DrainHookAnswered", "Normal"), ("Broken", "Warning")]
    writer.event("Later", "still held")
    assert len(kube.events) == 2
    writer.send_events()
    assert kube.events[-1]["reason"] == "Later"
