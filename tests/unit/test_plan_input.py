"""Validation of a new plan's request and of the playbook variables (before any write)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.harvester.upgrade.plugins.filter.upgrade_vars import errors
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import plan_input

SHA512 = "ab" * 64
V160: dict[str, Any] = {"spec": {"minUpgradableVersion": "v1.5.0", "isoChecksum": SHA512,
                                 "isoURL": "https://releases.example/v1.6.0.iso"}}
V150: dict[str, Any] = {"spec": {"isoChecksum": SHA512, "isoURL": "https://x/v1.5.0.iso"}}


def test_request_ok() -> None:
    assert plan_input.request_errors("v1.6.0", None, "v1.5.1", V160, ["v1.6.0"], False) == []
    assert plan_input.request_errors(None, None, "v1.5.1", None, [], False) == []
    assert plan_input.request_errors(None, "harvester-system/iso", "v1.5.1", None, [],
                                     False) == []


@pytest.mark.parametrize("version,image,current,obj,force,expect", [
    ("v9.9.9", None, "v1.5.1", None, False, ["v9.9.9", "not found", "v1.6.0"]),
    ("v9.9.9", None, "v1.5.1", None, True, ["v9.9.9", "not found"]),
    ("v1.5.0", None, "v1.5.1", V150, False, ["v1.5.0", "downgrade", "v1.5.1",
                                              "upgrade_allow_downgrade=true"]),
    # upgrade_force does not lift a downgrade or a version skip
    ("v1.5.0", None, "v1.5.1", V150, True, ["downgrade", "upgrade_allow_downgrade=true"]),
    ("v1.6.0", None, "v1.4.2", V160, True, ["minimum upgradable",
                                            "upgrade_allow_version_skip=true"]),
    ("v1.6.0", None, "v1.6.0", V160, False, ["already runs v1.6.0"]),
    ("v1.6.0", None, "v1.4.2", V160, False, ["minimum upgradable", "v1.5.0"]),
    ("v1.6.0", None, "v1.5.1", {"spec": {"isoURL": "http://x/v1.6.0.iso"}}, False,
     ["no spec.isoChecksum", "unverified over plain http://",
      "upgrade_allow_unverified_iso=true"]),
    ("v1.6.0", None, "v1.5.1", {"spec": {"isoURL": "https://x", "isoChecksum": "abc"}}, True,
     ["not a SHA-512", "upgrade_allow_unverified_iso=true"]),
    ("v1.6.0", "iso", "v1.5.1", V160, False, ["version", "image", "not both"]),
])
def test_request_errors(version: str, image: str | None, current: str,
                        obj: dict[str, Any] | None, force: bool, expect: list[str]) -> None:
    errs = plan_input.request_errors(version, image, current, obj, ["v1.6.0", "v1.5.0"], force)
    assert len(errs) == 1
    for e in expect:
        assert e in errs[0]


def test_force_lifts_only_the_other_rules_and_each_switch_its_own() -> None:
    req = plan_input.request_errors
    avail = ["v1.5.0", "v1.6.0"]
    # same release again, a prerelease line: lifted by force
    assert req("v1.6.0", None, "v1.6.0", V160, avail, True) == []
    assert req("v1.6.0", None, "v1.5.1-rc1", V160, avail, True) == []
    # a downgrade: only by allow_downgrade; a version skip: only by allow_version_skip
    assert req("v1.5.0", None, "v1.5.1", V150, avail, False, allow_downgrade=True) == []
    assert req("v1.5.0", None, "v1.5.1", V150, avail, True, allow_version_skip=True)
    assert req("v1.6.0", None, "v1.4.2", V160, avail, False, allow_version_skip=True) == []
    assert req("v1.6.0", None, "v1.4.2", V160, avail, True, allow_downgrade=True)
    # an unverifiable ISO: only by allow_unverified_iso
    http = {"spec": {"isoURL": "http://x/v1.6.0.iso"}}
    assert req("v1.6.0", None, "v1.5.1", http, avail, True)
    assert req("v1.6.0", None, "v1.5.1", http, avail, False, allow_unverified_iso=True) == []
    # http:// with a SHA-512 is verified (the digest is checked after the download)
    assert req("v1.6.0", None, "v1.5.1", {"spec": {"isoURL": "http://x", "isoChecksum": SHA512}},
               avail, False) == []


def test_pause_nodes() -> None:
    assert plan_input.pause_node_errors(["node-1"], ["node-1", "node-2"]) == []
    errs = plan_input.pause_node_errors(["Not_A_Node!", "node-9"], ["node-1"])
    assert "'Not_A_Node!'" in errs[0] and "node-9" in errs[1] and "node-1" in errs[1]
    assert plan_input.pause_node_errors(["a.b-c"], None) == []


def test_var_errors() -> None:
    assert errors({"upgrade_pause_nodes": [], "upgrade_force": "yes", "upgrade_what_if": "",
                   "upgrade_preflight_timeout": "900", "upgrade_annotations": {},
                   "upgrade_image_preload_concurrency": -1,
                   "node_upgrade_migration_timeout": 0}) == []
    errs = errors({"upgrade_pause_nodes": "node-1,node-2", "upgrade_force": "maybe",
                   "preflight_timeout": -5, "upgrade_progress_interval": "often",
                   "upgrade_annotations": "x", "upgrade_image_preload_concurrency": "lots",
                   "upgrade_skip_checks": [1]})
    text = "\n".join(errs)
    for name in ("upgrade_pause_nodes", "upgrade_force", "preflight_timeout",
                 "upgrade_progress_interval", "upgrade_annotations",
                 "upgrade_image_preload_concurrency", "upgrade_skip_checks"):
        assert name in text
    assert len(errs) == 7
    assert errors({"upgrade_pause_nodes": ["Bad_Name"]})[0].startswith("upgrade_pause_nodes")


def test_secret_values_not_shown() -> None:
    assert "s3cr3t" not in " ".join(errors({"upgrade_api_key_timeout": "s3cr3t"}))


def test_lock_decide() -> None:
    from datetime import datetime, timedelta, timezone

    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        lock_lease,
        lock_run,
    )

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def lease(holder: str, ago: float, duration: int = 60) -> dict[str, Any]:
        t = (now - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return {"spec": {"holderIdentity": holder, "renewTime": t,
                         "leaseDurationSeconds": duration}}

    assert lock_lease.decide(None, "me", now) == "create"
    assert lock_lease.decide(lease("me", 0), "me", now) == "renew"
    assert lock_lease.decide(lease("bob@elsewhere:1", 10), "me", now) == "held"
    # expired by our clock: watched before it is taken (the holder's clock may differ)
    assert lock_lease.decide(lease("bob@elsewhere:1", 61), "me", now) == "observe"
    assert lock_lease.decide(lease("", 0), "me", now) == "take"
    msg = lock_lease.held_message(lease("bob@elsewhere:1", 10), now)
    assert "bob@elsewhere:1" in msg and "in 50s" in msg
    import socket
    # hostname and pid alone prove nothing (another container can have both)
    assert not lock_run.is_stale(f"u@{socket.gethostname()}:999999999")
    assert not lock_run.is_stale("u@another-host:999999999")


def test_switches_from_options_or_given_annotations() -> None:
    sw = plan_input.plan_annotations_switches(
        {"allow_downgrade": True, "annotations": {
            "harvester-upgrade.harvesterhci.io/allow-unverified-iso": "true"}})
    assert sw == {"allow_downgrade": True, "allow_version_skip": False,
                  "allow_unverified_iso": True}
