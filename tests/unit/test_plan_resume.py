"""plan_resume: which Failed plan a run continues, where each failed node restarts, which Jobs
are run anew, and what keeps a cluster from being "up to date" (docs/recovery.md). End to end:
tests/integration/test_recovery.py."""

from __future__ import annotations

from typing import Any

import pytest

pr = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_resume")

NOW = "2026-11-27T00:00:00Z"
REL = {"harvester": "v1.6.0", "os": "Harvester v1.6.0", "kubernetes": "v1.33.3+rke2r1"}


def plan(name: str, phase: str, *, created: str = "2026-11-26T10:00:00Z",
         before: str = "NodeUpgrading", reason: str = "Failed", message: str = "boom",
         nodes: dict[str, Any] | None = None, version: str = "v1.6.0") -> dict[str, Any]:
    stamps = [{"phase": p, "phaseTransitionTimestamp": NOW}
              for p in ("Initializing", "ClusterUpgraded", before)]
    if phase != before:
        stamps.append({"phase": phase, "phaseTransitionTimestamp": NOW})
    return {"metadata": {"name": name, "creationTimestamp": created},
            "spec": {"version": version},
            "status": {"currentPhase": phase, "phaseTransitionTimestamps": stamps,
                       "releaseMetadata": REL,
                       "nodeUpgradeStatuses": nodes or {},
                       "conditions": [{"type": "Progressing",
                                       "status": "False" if phase in ("Failed", "Succeeded")
                                       else "True", "reason": reason, "message": message}]}}


def node(name: str, os_image: str = REL["os"], kubelet: str = REL["kubernetes"]
         ) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"nodeInfo": {"osImage": os_image, "kubeletVersion": kubelet}}}


def rancher(updated: str = "True", message: str = "") -> dict[str, Any]:
    return {"spec": {"kubernetesVersion": REL["kubernetes"]},
            "status": {"conditions": [{"type": "Updated", "status": updated,
                                       "message": message}]}}


def test_the_newest_plan_failed_in_node_upgrade_is_resumable() -> None:
    failed = plan("p2", "Failed", created="2026-11-26T11:00:00Z")
    assert pr.resumable([plan("p1", "Succeeded"), failed]) is failed
    assert pr.failed_in(failed) == "NodeUpgrading"


@pytest.mark.parametrize("why, plans", [
    ("aborted", [plan("p", "Failed", reason="Aborted")]),
    ("failed before the cluster changed", [plan("p", "Failed", before="ISODownloading")]),
    ("a newer plan exists", [plan("p1", "Failed"),
                             plan("p2", "Succeeded", created="2026-11-26T12:00:00Z")]),
    ("succeeded", [plan("p", "Succeeded")]),
    ("nothing", []),
])
def test_what_is_not_resumed(why: str, plans: list[dict[str, Any]]) -> None:
    assert pr.resumable(plans) is None, why


def test_each_failed_node_restarts_before_the_step_that_failed() -> None:
    status = {"nodeUpgradeStatuses": {
        "a": {"state": "PostDrained"},
        "b": {"state": "PreDrainFailed", "reason": "HookTimeout"},
        "c": {"state": "PreDrainFailed", "reason": "MigrationFailed"},
        "d": {"state": "PostDrainFailed", "reason": "JobTimeout"},
        "e": {"state": "PostDrainFailed", "reason": "NodeNotReady"},
        "f": {"state": "PostDrainFailed", "reason": "RancherTimeout"},
        "g": {"state": "SingleNodeUpgradeFailed", "reason": "BackoffLimitExceeded"},
        "h": {"state": "ImagePreloaded"}}}
    assert pr.node_resets(status) == {"b": "ImagePreloaded", "c": "PreDraining",
                                      "d": "PreDrained", "e": "PreDrained",
                                      "f": "PostDrained", "g": "ImagePreloaded"}


def test_resume_takes_the_plan_back_to_node_upgrading() -> None:
    p = plan("p", "Failed", message="node n2 upgrade failed: Job x failed",
             nodes={"n1": {"state": "PostDrained"},
                    "n2": {"state": "PostDrainFailed", "reason": "JobFailed",
                           "message": "Job x failed"}})
    st = p["status"]
    events = pr.resume_status(st, pr.node_resets(st), NOW, 3)
    assert st["currentPhase"] == "NodeUpgrading"
    assert st["phaseTransitionTimestamps"][-1]["phase"] == "NodeUpgrading"
    assert st["nodeUpgradeStatuses"]["n1"] == {"state": "PostDrained"}
    assert st["nodeUpgradeStatuses"]["n2"]["state"] == "PreDrained"
    assert "Job x failed" in st["nodeUpgradeStatuses"]["n2"]["message"]
    prog = next(c for c in st["conditions"] if c["type"] == "Progressing")
    assert (prog["status"], prog["reason"]) == ("True", "NodeUpgrading")
    assert "node n2 upgrade failed" in prog["message"]
    avail = next(c for c in st["conditions"] if c["type"] == "Available")
    assert avail["status"] == "True"
    assert [e.reason for e in events] == ["UpgradeResumed"]
    assert pr.resume_status(st, {}, NOW, 3) == []   # not Failed any more: nothing to do


def test_only_unfinished_node_jobs_of_the_retried_nodes_are_rerun() -> None:
    def job(name: str, node_name: str, jtype: str, cond: str | None) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {
            "management.harvesterhci.io/node": node_name,
            "management.harvesterhci.io/job-type": jtype}},
            "status": {"conditions": [{"type": cond, "status": "True"}] if cond else []}}
    jobs = [job("pre-n2", "n2", "pre-drain", "Complete"),
            job("post-n2", "n2", "post-drain", "Failed"),
            job("hung-n3", "n3", "post-drain", None),
            job("post-n1", "n1", "post-drain", "Failed"),
            job("restore-n2", "n2", "restore-vm", "Failed")]
    names = [j["metadata"]["name"] for j in pr.stale_node_jobs(jobs, ["n2", "n3"])]
    assert names == ["post-n2", "hung-n3"]


def test_a_cluster_at_its_release_is_up_to_date() -> None:
    assert pr.not_at_release("v1.6.0", [plan("p", "Succeeded")],
                             [node("n1"), node("n2")], rancher()) == []
    # no plan ever ran (installed at this release): Rancher's version is the reference
    assert pr.not_at_release("v1.6.0", [], [node("n1")], rancher()) == []
    assert pr.not_at_release("v1.6.0", [], [node("n1")], None) == []


def test_a_cluster_part_way_is_not_up_to_date() -> None:
    out = pr.not_at_release(
        "v1.6.0", [plan("p", "Failed", message="node n2 upgrade failed: hung")],
        [node("n1"), node("n2", "Harvester v1.5.1", "v1.32.4+rke2r1")],
        rancher("Unknown", "waiting for n2"))
    assert any("UpgradePlan p to v1.6.0 is Failed (node n2 upgrade failed: hung)" in o
               for o in out), out
    assert any(o.startswith("node n2 runs OS 'Harvester v1.5.1'") for o in out), out
    assert any("not Updated (waiting for n2)" in o for o in out), out
    assert not any("node n1" in o for o in out), out


def test_an_aborted_plan_to_the_running_release_is_named() -> None:
    out = pr.not_at_release("v1.6.0", [plan("p", "Failed", reason="Aborted", message="ops")],
                            [node("n1")], rancher())
    assert out == ["UpgradePlan p to v1.6.0 is Failed (aborted: ops)"]
