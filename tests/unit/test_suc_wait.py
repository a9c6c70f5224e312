"""Waiting on a system-upgrade-controller Plan: its ``Complete`` condition decides, and a
``False``/``JobFailed`` one fails the phase (what a real controller sets when a Job fails)."""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import phase_common
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import Verdict


class FakeWriter:
    def __init__(self) -> None:
        self.states: dict[str, Any] = {}

    def set_node_states(self, states: dict[str, Any]) -> None:
        self.states.update(states)


class FakeCtx:
    """Feeds one snapshot of the Plan and its Jobs to the predicate, as a watch would."""

    name = "hvst-upgrade-x"
    check_mode = False

    def __init__(self, complete: dict[str, str], jobs: dict[str, Any]) -> None:
        self.writer = FakeWriter()
        plan = {"metadata": {"name": f"{self.name}-image-preload"},
                "status": {"conditions": [{"type": "Complete", **complete}]}}
        self.snapshot = {"plan": {"cattle-system/p": plan}, "jobs": jobs}

    def wait(self, sources: Any, predicate: Any, what: str) -> Verdict:
        return predicate(self.snapshot)  # type: ignore[no-any-return]


def _job(node: str, cond: str, reason: str = "") -> dict[str, Any]:
    return {"metadata": {"name": f"apply-on-{node}", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"upgrade.cattle.io/node": node}},
            "status": {"conditions": [{"type": cond, "status": "True", "reason": reason,
                                       "message": "Job was active longer than specified "
                                                  "deadline"}]}}


STATES = ("ImagePreloading", "ImagePreloaded", "ImagePreloadFailed")


def test_job_failed_fails_the_wait() -> None:
    ctx = FakeCtx({"status": "False", "reason": "JobFailed",
                   "message": "Job cattle-system/apply-on-node-1 failed on Node node-1: "
                              "DeadlineExceeded: Job was active longer than specified deadline"},
                  {"cattle-system/a": _job("node-1", "Failed", "DeadlineExceeded")})
    step = phase_common.suc_wait(ctx, "image-preload", STATES, 1,  # type: ignore[arg-type]
                                 "image-preload plan job(s) failed", "preloaded")
    assert step.state == "failed"
    assert step.message.startswith("image-preload plan job(s) failed: Job cattle-system/")
    assert ctx.writer.states["node-1"][0] == "ImagePreloadFailed"


def test_complete_plan_is_done() -> None:
    ctx = FakeCtx({"status": "True", "reason": "Complete"},
                  {"cattle-system/a": _job("node-1", "Complete")})
    step = phase_common.suc_wait(ctx, "image-preload", STATES, 1,  # type: ignore[arg-type]
                                 "image-preload plan job(s) failed", "preloaded")
    assert step.state == "done"
    assert ctx.writer.states == {"node-1": "ImagePreloaded"}
