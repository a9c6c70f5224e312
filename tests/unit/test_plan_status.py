"""The UpgradePlan status state machine: phases, timestamps, conditions and Events."""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    phases,
    plan_status,
)

T0, T1, T2 = "2026-03-13T03:57:09Z", "2026-03-13T04:01:53Z", "2026-03-13T05:32:57Z"


def conds(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def test_initialize_sets_conditions_in_toolkit_order() -> None:
    status: dict[str, Any] = {}
    assert plan_status.initialize(status, T0, 1) == []
    assert status["currentPhase"] == "Initializing"
    assert [c["type"] for c in status["conditions"]] == ["Progressing", "Degraded",
                                                         "Available"]
    assert conds(status) == {"Progressing": ("True", "Initializing", ""),
                             "Degraded": ("False", "ReconcileSuccess", ""),
                             "Available": ("True", "Executable", "")}
    assert status["phaseTransitionTimestamps"] == [
        {"phase": "Initializing", "phaseTransitionTimestamp": T0}]
    assert plan_status.is_active({"status": status})


def test_full_run_reproduces_seed_sequence_and_events() -> None:
    status: dict[str, Any] = {}
    events: list[plan_status.EventSpec] = []
    plan_status.initialize(status, T0, 3)
    for phase in phases.PHASES:
        events += plan_status.start_phase(status, phase, T1, 3)
        events += plan_status.complete_phase(status, phase, T1, 3)
    events += plan_status.succeed(status, T2, 3)
    assert [t["phase"] for t in status["phaseTransitionTimestamps"]] == [
        "Initializing", "Initialized", "ISODownloading", "ISODownloaded", "RepoCreating",
        "RepoCreated", "MetadataPopulating", "MetadataPopulated", "ImagePreloading",
        "ImagePreloaded", "ClusterUpgrading", "ClusterUpgraded", "NodeUpgrading",
        "NodeUpgraded", "CleaningUp", "CleanedUp", "Succeeded"]
    assert [(e.reason, e.message) for e in events[:2]] == [
        ("PhaseTransition", "Entering phase ISODownload"),
        ("PhaseCompleted", "Completed phase ISODownload")]
    assert events[-1].reason == "UpgradeSucceeded"
    assert events[-1].message == "Upgrade completed successfully"
    assert not any("Initialize" in e.message for e in events)
    assert len(events) == 2 * 7 + 1
    assert conds(status) == {
        "Progressing": ("False", "Succeeded", "UpgradePlan has completed"),
        "Degraded": ("False", "ReconcileSuccess", ""),
        "Available": ("False", "Executed", "Entered one of the terminal phases")}
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])
    assert not plan_status.is_active({"status": status})


def test_progressing_reason_follows_phase() -> None:
    status: dict[str, Any] = {}
    plan_status.initialize(status, T0, 1)
    plan_status.start_phase(status, phases.get("RepoCreate"), T1, 1,
                            "upgrade-repo deployment not ready")
    assert conds(status)["Progressing"] == ("True", "RepoCreating",
                                            "upgrade-repo deployment not ready")


def test_last_transition_time_moves_only_on_status_change() -> None:
    status: dict[str, Any] = {}
    plan_status.initialize(status, T0, 1)
    plan_status.start_phase(status, phases.get("ISODownload"), T1, 1)
    prog = plan_status.find_condition(status, "Progressing")
    assert prog is not None and prog["lastTransitionTime"] == T0
    plan_status.fail(status, "ISO image download failed", T2, 1)
    assert prog["lastTransitionTime"] == T2


def test_restarting_a_running_phase_emits_nothing() -> None:
    status: dict[str, Any] = {}
    plan_status.initialize(status, T0, 1)
    phase = phases.get("ISODownload")
    assert len(plan_status.start_phase(status, phase, T1, 1)) == 1
    assert plan_status.start_phase(status, phase, T2, 1) == []
    assert len(status["phaseTransitionTimestamps"]) == 2


def test_fail_is_terminal_and_reports_cause() -> None:
    status: dict[str, Any] = {}
    plan_status.initialize(status, T0, 1)
    events = plan_status.fail(status, "cluster-upgrade job failed", T1, 1)
    assert status["currentPhase"] == "Failed"
    assert conds(status)["Progressing"] == ("False", "Failed", "cluster-upgrade job failed")
    assert conds(status)["Available"] == ("False", "Executed",
                                          "Entered one of the terminal phases")
    assert [(e.type, e.reason, e.message) for e in events] == [
        ("Warning", "UpgradeFailed", "Upgrade failed: cluster-upgrade job failed")]
    assert plan_status.fail(status, "again", T2, 1) == []
    assert plan_status.failure_message({"status": status}) == "cluster-upgrade job failed"


def test_degrade_is_not_terminal() -> None:
    status: dict[str, Any] = {}
    plan_status.initialize(status, T0, 1)
    events = plan_status.degrade(status, "connection refused", T1, 1)
    assert conds(status)["Degraded"] == ("True", "ReconcileError", "connection refused")
    assert events[0].message == "Pipeline error: connection refused"
    plan_status.start_phase(status, phases.get("ISODownload"), T2, 1)
    assert conds(status)["Degraded"] == ("False", "ReconcileSuccess", "")


def test_node_states_forward_only_through_status() -> None:
    status: dict[str, Any] = {}
    assert plan_status.set_node_states(status, {"a": "ImagePreloading", "b": "ImagePreloaded"})
    assert plan_status.set_node_states(status, {"a": "ImagePreloaded", "b": "ImagePreloading"})
    assert status["nodeUpgradeStatuses"] == {"a": {"state": "ImagePreloaded"},
                                             "b": {"state": "ImagePreloaded"}}
    assert not plan_status.set_node_states(status, {"a": "ImagePreloading"})
    assert plan_status.set_node_states(status, {"a": ("ImageCleanFailed", "JobFailed", "x")})
    assert status["nodeUpgradeStatuses"]["a"] == {"state": "ImageCleanFailed",
                                                  "reason": "JobFailed", "message": "x"}
