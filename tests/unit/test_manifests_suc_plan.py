"""The SUC Plans the collection writes carry the fields upgrade-toolkit's constructPlan writes."""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import manifests

PLAN = {"metadata": {"name": "hvst-upgrade-abcde", "uid": "u-1",
                     "annotations": {}},
        "spec": {"version": "v1.6.0"}, "status": {}}


def test_preload_plan_has_no_job_deadline_by_default() -> None:
    # left unset, SUC gives each Job a 600 s deadline (pkg/upgrade/job/job.go)
    spec = manifests.suc_plan(PLAN, "image-preload", ["prepare"], 3)["spec"]
    assert spec["jobActiveDeadlineSecs"] == 0


def test_cleanup_plan_has_no_job_deadline() -> None:
    spec = manifests.image_cleanup_plan(PLAN, ["docker.io/a:1"])["spec"]
    assert spec["jobActiveDeadlineSecs"] == 0


def test_job_deadline_given_or_left_to_the_controller() -> None:
    assert manifests.suc_plan(PLAN, "image-preload", [], 1,
                              deadline_seconds=900)["spec"]["jobActiveDeadlineSecs"] == 900
    assert "jobActiveDeadlineSecs" not in manifests.suc_plan(
        PLAN, "image-preload", [], 1, deadline_seconds=-1)["spec"]
