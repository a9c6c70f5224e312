"""The phase table and where a plan stands in it."""

from __future__ import annotations

import pytest

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import phases


def test_order_matches_upgrade_v2() -> None:
    assert [p.name for p in phases.PHASES] == [
        "Initialize", "ISODownload", "RepoCreate", "MetadataPopulate", "ImagePreload",
        "ClusterUpgrade", "NodeUpgrade", "ImageCleanup"]
    assert [p.tag for p in phases.PHASES] == [
        "preflight", "iso_download", "repo_create", "metadata_populate", "image_preload",
        "cluster_upgrade", "node_upgrade", "image_cleanup"]
    assert phases.get("ImageCleanup").active == "CleaningUp"
    assert phases.get("CleanedUp").name == "ImageCleanup"


def test_phases_that_never_fail() -> None:
    assert [p.name for p in phases.PHASES if not p.can_fail] == ["RepoCreate",
                                                                 "MetadataPopulate"]


@pytest.mark.parametrize("current,phase,expected", [
    (None, "Initialize", "next"),
    ("", "ISODownload", "not_reached"),
    ("Initializing", "Initialize", "active"),
    ("Initialized", "Initialize", "done"),
    ("Initialized", "ISODownload", "next"),
    ("Initialized", "RepoCreate", "not_reached"),
    ("ISODownloading", "ISODownload", "active"),
    ("ISODownloading", "RepoCreate", "not_reached"),
    ("ClusterUpgraded", "NodeUpgrade", "next"),
    ("ClusterUpgraded", "ImageCleanup", "not_reached"),
    ("ClusterUpgraded", "ISODownload", "done"),
    ("CleanedUp", "ImageCleanup", "done"),
    ("Succeeded", "ISODownload", "succeeded"),
    ("Failed", "ISODownload", "failed"),
])
def test_relation(current: str | None, phase: str, expected: str) -> None:
    assert phases.relation(current, phases.get(phase)) == expected


def test_next_to_run_walks_the_table() -> None:
    assert phases.next_to_run(None).name == "Initialize"
    assert phases.next_to_run("ISODownloading").name == "ISODownload"
    assert phases.next_to_run("MetadataPopulated").name == "ImagePreload"
    assert phases.next_to_run("CleanedUp") is None


def test_finalize_relation() -> None:
    assert phases.finalize_relation("CleanedUp") == "next"
    assert phases.finalize_relation("NodeUpgraded") == "not_reached"
    assert phases.finalize_relation("Failed") == "failed"
    assert phases.finalize_relation("Succeeded") == "succeeded"


def test_unknown_phase_is_an_error() -> None:
    with pytest.raises(ValueError):
        phases.position("Bogus")
