"""The phase actions the phase modules pass to ``pipeline.run_phase`` (the ``phase_*`` modules),
run as the modules run them (phase_child.py) against a simulated three-node cluster: what they
create, what they wait for, what the plan records, and what they say in check mode."""

from __future__ import annotations

from typing import Any

import pytest
from phase_child import NewPlan, Run

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import phase_common
from testkit import get_plan

VM_IMAGE = ("harvesterhci.io/v1beta1", "VirtualMachineImage")
NS = "harvester-system"


def imported(image: dict[str, Any]) -> bool:
    return any(c.get("type") == "Imported" and c.get("status") == "True"
               for c in (image.get("status") or {}).get("conditions") or [])


def status_writes(sim: Any) -> int:
    """UpgradePlan status writes so far (the API server's request statistics)."""
    return sum(n for k, n in sim.stats()["by_verb_resource"].items()
               if k.split(" ", 1)[0] in ("update", "patch") and "upgradeplans" in k
               and k.endswith("/status"))


def test_iso_download_imports_the_versions_iso_and_a_rerun_verifies_it(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized")
    before = status_writes(sim)
    res = run("ISODownload", "iso_download", verify="verify_iso", plan=name)
    assert res["exit"] == "exit_json" and res["status"] == "completed", res
    # entering writes isoImageID and the wait's message with the phase; then the completion
    assert status_writes(sim) - before == 2, sim.stats()["by_verb_resource"]
    assert res["iso_image_id"] == f"{name}-iso", res
    assert f"create VirtualMachineImage {name}-iso in {NS}" in res["actions"], res
    image = sim.world.client.get(*VM_IMAGE, f"{name}-iso", NS)
    version = sim.world.client.get("harvesterhci.io/v1beta1", "Version", "v1.6.0", NS)
    assert image["spec"]["url"] == version["spec"]["isoURL"]
    assert image["spec"]["checksum"] == version["spec"]["isoChecksum"]
    assert imported(image), image.get("status")
    status = get_plan(sim, name)["status"]
    assert status["currentPhase"] == "ISODownloaded" and status["isoImageID"] == f"{name}-iso"

    again = run("ISODownload", "iso_download", verify="verify_iso", plan=name)
    assert again["status"] == "verified" and again["actions"] == [], again
    assert again["msg"].endswith(f"VirtualMachineImage {NS}/{name}-iso Imported"), again


def test_iso_download_in_check_mode_says_what_it_would_create_and_await(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized")
    res = run("ISODownload", "iso_download", plan=name, check_mode=True)
    assert res["exit"] == "exit_json" and res["status"] == "completed", res
    assert res["actions"] == ["would enter phase ISODownloading",
                              f"would create VirtualMachineImage {name}-iso in {NS}"], res
    assert res["msg"] == f"would wait for VirtualMachineImage {NS}/{name}-iso to be Imported"
    assert sim.world.client.try_get(*VM_IMAGE, f"{name}-iso", NS) is None
    assert get_plan(sim, name)["status"]["currentPhase"] == "Initialized"


def test_iso_download_of_a_version_without_an_iso_url_fails_the_plan(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized", version="v9.9.9")
    res = run("ISODownload", "iso_download", plan=name)
    assert res["exit"] == "fail_json", res
    assert res["msg"] == "ISO image download failed: the Version has no isoURL", res
    assert get_plan(sim, name)["status"]["currentPhase"] == "Failed"
    assert sim.world.client.try_get(*VM_IMAGE, f"{name}-iso", NS) is None


def test_iso_download_refuses_a_version_without_a_checksum(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    c = sim.world.client
    shipped = c.get("harvesterhci.io/v1beta1", "Version", "v1.6.0", NS)
    c.create({"apiVersion": "harvesterhci.io/v1beta1", "kind": "Version",
              "metadata": {"name": "v1.6.0-nosum", "namespace": NS},
              "spec": {"isoURL": shipped["spec"]["isoURL"]}})
    name = new_plan("Initialized", version="v1.6.0-nosum")
    res = run("ISODownload", "iso_download", plan=name)
    assert res["exit"] == "fail_json", res
    assert res["msg"].startswith("ISO image download refused: Version v1.6.0-nosum has no "
                                 "spec.isoChecksum"), res
    assert c.try_get(*VM_IMAGE, f"{name}-iso", NS) is None


def test_verify_iso_warns_when_the_image_is_gone(run: Run, new_plan: NewPlan) -> None:
    name = new_plan("ISODownloaded")
    res = run("ISODownload", "must_not_run", verify="verify_iso", plan=name)
    assert res["status"] == "verified", res
    assert res["msg"].endswith(f"warning: VirtualMachineImage {NS}/{name}-iso is gone"), res


def test_repo_create_in_check_mode_says_it_would_create_the_repo(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("ISODownloaded")
    res = run("RepoCreate", "repo_create", plan=name, check_mode=True)
    assert res["status"] == "completed", res
    assert res["actions"] == ["would enter phase RepoCreating",
                              f"would create Deployment {name}-repo in {NS}",
                              f"would create Service {name}-repo in {NS}"], res
    assert res["msg"] == f"would wait for Deployment and Service {name}-repo to serve the ISO"
    assert sim.world.client.try_get("apps/v1", "Deployment", f"{name}-repo", NS) is None


def test_verify_metadata_reports_the_recorded_release(run: Run, new_plan: NewPlan) -> None:
    name = new_plan("MetadataPopulated")
    res = run("MetadataPopulate", "must_not_run", verify="verify_metadata", plan=name)
    assert res["status"] == "verified", res
    assert res["msg"].endswith("warning: releaseMetadata missing"), res


@pytest.mark.parametrize("ref, expected", [("images/harvester-iso", ("images", "harvester-iso")),
                                           ("harvester-iso", (NS, "harvester-iso"))])
def test_an_image_reference_is_namespace_slash_name_or_a_bare_name(
        ref: str, expected: tuple[str, str]) -> None:
    assert phase_common.split_image_ref(ref) == expected


CHAIN = [{"phase": "repo_create"}, {"phase": "metadata_populate"},
         {"phase": "image_preload", "job_deadline_seconds": 777}, {"phase": "cluster_upgrade"}]


def test_a_phase_call_starts_the_phases_after_it_and_their_own_calls_resume_them(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized")
    res = run("ISODownload", "module", plan=name, then=CHAIN)
    assert res["exit"] == "exit_json" and res["status"] == "completed", res
    # RepoCreate entered, its Deployment and Service created, its wait left to its own call
    assert [s["phase"] for s in res["started"]] == ["RepoCreate"], res
    assert res["started"][0]["status"] == "started", res
    assert f"create Deployment {name}-repo in {NS}" in res["started"][0]["actions"], res
    assert get_plan(sim, name)["status"]["currentPhase"] == "RepoCreating"
    assert sim.world.client.try_get("apps/v1", "Deployment", f"{name}-repo", NS) is not None

    res = run("RepoCreate", "module", plan=name, then=CHAIN[1:])
    assert res["status"] == "completed", res
    # MetadataPopulate has nothing to wait for: completed; ImagePreload's Plan created
    assert [(s["phase"], s["status"]) for s in res["started"]] == [
        ("MetadataPopulate", "completed"), ("ImagePreload", "started")], res
    status = get_plan(sim, name)["status"]
    assert status["currentPhase"] == "ImagePreloading", status
    assert status["releaseMetadata"]["harvester"] == "v1.6.0", status
    suc = sim.world.client.get("upgrade.cattle.io/v1", "Plan", f"{name}-image-preload",
                               "cattle-system")
    assert suc["spec"].get("jobActiveDeadlineSecs") == 777, suc["spec"]

    # the metadata task of the same run finds its phase done; ImagePreload's resumes. Its
    # verification only reads: it does not take the lock (no Lease watch for the call)
    watches = sim.stats()["by_verb_resource"].get("watch leases", 0)
    res = run("MetadataPopulate", "module", plan=name, then=CHAIN[2:])
    assert res["status"] == "verified" and "started" not in res, res
    assert sim.stats()["by_verb_resource"].get("watch leases", 0) == watches, sim.stats()


def test_then_is_checked_before_anything_changes_and_ignored_in_check_mode(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    name = new_plan("Initialized")
    for then, why in (([{"phase": "image_preload"}], "image_preload does not follow "
                       "iso_download"),
                      ([{"phase": "no_such_phase"}], "unknown phase 'no_such_phase'"),
                      ([{"phase": "repo_create"}, {"phase": "node_upgrade"}],
                       "node_upgrade does not follow repo_create"),
                      ([{"phase": "preflight"}], "preflight cannot be started")):
        res = run("ISODownload", "module", plan=name, then=then)
        assert res["exit"] == "fail_json" and why in res["msg"], res
        assert get_plan(sim, name)["status"]["currentPhase"] == "Initialized"
    res = run("ISODownload", "module", plan=name, then=CHAIN, check_mode=True)
    assert res["status"] == "completed" and "started" not in res, res
    assert get_plan(sim, name)["status"]["currentPhase"] == "Initialized"
    assert sim.world.client.try_get(*VM_IMAGE, f"{name}-iso", NS) is None


# the other tests' plans stay in progress on the module's cluster
OTHERS = ["no_concurrent_upgrade"]


def test_initialize_completed_by_preflight_starts_iso_download(
        run: Run, new_plan: NewPlan, sim: Any) -> None:
    """The preflight call that completes Initialize enters ISODownload and creates its image
    (then); the ISODownload call resumes it. A bad then changes nothing; check mode and a
    plan past Initialize start nothing."""
    name = new_plan("Initializing", restoreVM=True)   # the scenario's pinned VMs pass
    res = run("Initialize", "in_process", module="preflight", plan=name, skip_checks=OTHERS,
              then=[{"phase": "repo_create"}])
    assert res["exit"] == "fail_json" and "repo_create does not follow preflight" in res["msg"]
    assert get_plan(sim, name)["status"]["currentPhase"] == "Initializing"
    res = run("Initialize", "in_process", module="preflight", plan=name, skip_checks=OTHERS,
              check_mode=True, then=[{"phase": "iso_download"}])
    assert "started" not in res, res
    assert sim.world.client.try_get(*VM_IMAGE, f"{name}-iso", NS) is None

    res = run("Initialize", "in_process", module="preflight", plan=name, skip_checks=OTHERS,
              then=[{"phase": "iso_download"}, {"phase": "repo_create"}])
    assert res["exit"] == "exit_json" and res["status"] == "completed", (res["msg"], res)
    assert [(s["phase"], s["status"]) for s in res["started"]] == [("ISODownload", "started")]
    status = get_plan(sim, name)["status"]
    assert status["currentPhase"] == "ISODownloading", status
    assert status["isoImageID"] == f"{name}-iso", status
    assert sim.world.client.try_get(*VM_IMAGE, f"{name}-iso", NS) is not None

    # the same run's ISODownload task resumes the phase it finds active
    res = run("ISODownload", "module", plan=name)
    assert res["exit"] == "exit_json" and res["status"] == "completed", res
    # a later pre-flight (Initialize done) re-checks and starts nothing
    res = run("Initialize", "in_process", module="preflight", plan=name, skip_checks=OTHERS,
              then=[{"phase": "iso_download"}])
    assert res["status"] == "verified" and "started" not in res, res
