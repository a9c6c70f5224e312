"""``pipeline.run_phase``, the frame of every phase module, against a simulated cluster: how
the plan's ``currentPhase`` decides what runs, what the plan records, what the module returns.

Each run is a process of its own (``phase_child.py``; fixtures ``run`` and ``new_plan`` in
conftest.py), with a scripted ``act``: the frame's behaviour is under test here, the phase
actions' in test_phase_actions.py.
"""

from __future__ import annotations

import time
from typing import Any

from phase_child import NewPlan, Run

from testkit import PLAN_API, condition, event_reasons, get_plan


def test_without_a_plan_it_says_so_and_does_nothing(run: Run) -> None:
    res = run("ISODownload", "must_not_run", plan="no-such-plan")
    assert res["exit"] == "exit_json" and res["status"] == "no_plan", res
    assert 'UpgradePlan "no-such-plan"' in res["msg"] and not res["proceed"], res
    checked = run("ISODownload", "must_not_run", plan="no-such-plan", check_mode=True)
    assert checked["status"] == "no_plan" and "would" in checked["msg"], checked


def test_the_next_phase_is_entered_acted_on_and_completed(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized")
    res = run("ISODownload", "done", plan=name)
    assert res["exit"] == "exit_json", res
    assert res["status"] == "completed" and res["proceed"] and res["changed"], res
    assert res["actions"] == ["enter phase ISODownloading", "did the work"], res
    assert res["answer"] == 42 and res["msg"] == "work done", res   # the step's facts
    assert res["current_phase"] == "ISODownloaded", res
    after = get_plan(sim, name)
    assert after["status"]["currentPhase"] == "ISODownloaded"
    assert [t["phase"] for t in after["status"]["phaseTransitionTimestamps"]][-2:] == \
        ["ISODownloading", "ISODownloaded"]
    reasons = event_reasons(sim, name)
    assert "PhaseTransition" in reasons and "PhaseCompleted" in reasons, reasons


def test_a_phase_done_earlier_is_verified_not_redone(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("RepoCreated")
    before = get_plan(sim, name)["metadata"]["resourceVersion"]
    res = run("ISODownload", "must_not_run", verify="checked", plan=name)
    assert res["exit"] == "exit_json" and res["status"] == "verified", res
    assert res["proceed"] and res["msg"] == "ISODownload already completed; checked again", res
    assert get_plan(sim, name)["metadata"]["resourceVersion"] == before


def test_a_phase_not_reached_is_refused_unless_forced(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized")
    res = run("RepoCreate", "must_not_run", plan=name)
    assert res["exit"] == "exit_json" and res["status"] == "not_reached", res
    assert not res["proceed"], res
    assert "next: ISODownload, tag iso_download" in res["msg"] and "force=true" in res["msg"]
    assert get_plan(sim, name)["status"]["currentPhase"] == "Initialized"

    forced = run("RepoCreate", "done", plan=name, force=True)
    assert forced["status"] == "completed", forced
    assert get_plan(sim, name)["status"]["currentPhase"] == "RepoCreated"


def test_a_failed_step_fails_the_plan_with_its_message(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized")
    res = run("ISODownload", "failed", plan=name)
    assert res["exit"] == "fail_json" and res["msg"] == "the work cannot be done", res
    after = get_plan(sim, name)
    assert after["status"]["currentPhase"] == "Failed"
    progressing = condition(after, "Progressing")
    assert progressing["status"] == "False" and progressing["reason"] == "Failed"
    assert progressing["message"] == "the work cannot be done"
    assert "UpgradeFailed" in event_reasons(sim, name)

    again = run("ISODownload", "must_not_run", plan=name)   # a Failed plan is terminal
    assert again["exit"] == "fail_json" and again["status"] == "terminal", again
    assert "start a new plan to retry" in again["msg"], again


def test_a_wait_that_reaches_the_deadline_fails_the_plan_naming_what(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized")
    res = run("ISODownload", "wait", plan=name, timeout=5)
    assert res["exit"] == "fail_json", res
    assert res["awaited"] == "ConfigMap default/never-there", res
    assert res["last_seen"] == "still waiting for the marker", res
    assert res["msg"].startswith("ISODownload: timed out after"), res
    assert get_plan(sim, name)["status"]["currentPhase"] == "Failed"


def test_a_wait_slice_returns_pending_and_keeps_the_phase(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    """An action plugin passes an absolute ``deadline`` and a ``progress_interval``: the module
    returns at the end of each slice so that progress can be printed, and is called again."""
    name = new_plan("Initialized")
    res = run("ISODownload", "wait", plan=name, deadline=time.time() + 600,
              progress_interval=3)
    assert res["exit"] == "exit_json" and res["status"] == "pending", res
    assert not res["proceed"] and res["progress"] == "still waiting for the marker", res
    after = get_plan(sim, name)
    assert after["status"]["currentPhase"] == "ISODownloading"
    assert condition(after, "Progressing")["message"] == \
        "waiting for ConfigMap default/never-there: still waiting for the marker"


def test_an_api_error_degrades_the_plan_and_keeps_its_phase(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("ISODownloading")
    res = run("ISODownload", "api_error", plan=name)
    assert res["exit"] == "fail_json", res
    assert "the API server is having a bad day" in res["msg"], res
    assert res["msg"].endswith("(the plan keeps its phase; re-run to resume)"), res
    after = get_plan(sim, name)
    assert after["status"]["currentPhase"] == "ISODownloading"
    degraded = condition(after, "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "ReconcileError", degraded
    assert "ReconcileError" in event_reasons(sim, name)


def test_ensure_creates_once_and_check_mode_only_says_what_it_would_do(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized")
    before = get_plan(sim, name)["metadata"]["resourceVersion"]
    checked = run("ISODownload", "ensure", plan=name, check_mode=True)
    assert checked["exit"] == "exit_json" and checked["status"] == "completed", checked
    assert checked["actions"] == ["would enter phase ISODownloading",
                                  f"would create ConfigMap {name}-marker in default"], checked
    assert sim.world.client.try_get("v1", "ConfigMap", f"{name}-marker", "default") is None
    assert get_plan(sim, name)["metadata"]["resourceVersion"] == before

    done = run("ISODownload", "ensure", plan=name)
    assert done["actions"] == ["enter phase ISODownloading",
                               f"create ConfigMap {name}-marker in default"], done
    assert sim.world.client.get("v1", "ConfigMap", f"{name}-marker", "default")["data"] == \
        {"plan": name}


def test_a_succeeded_plan_is_left_alone(run: Run, new_plan: NewPlan) -> None:
    name = new_plan("Succeeded")
    res = run("ISODownload", "must_not_run", plan=name)
    assert res["exit"] == "exit_json" and res["status"] == "terminal", res
    assert res["msg"] == f"UpgradePlan {name} is Succeeded", res


def test_the_active_plan_is_found_without_a_name(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    """Without ``plan``: the plan with Progressing=True."""
    c = sim.world.client
    for other in c.list(PLAN_API, "UpgradePlan"):   # the other tests' plans: no longer active
        progressing = condition(other, "Progressing")
        if progressing.get("status") == "True":
            progressing["status"] = "False"
            c.update_status(other)
    name = new_plan("Initialized")
    res = run("ISODownload", "done")
    assert res["exit"] == "exit_json" and res["plan"] == name, res
    assert get_plan(sim, name)["status"]["currentPhase"] == "ISODownloaded"
