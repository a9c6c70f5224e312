"""The harvester_progress callback's state machine, fed with module results as the roles
register them (keys documented in the plugin's DOCUMENTATION)."""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.callback.harvester_progress import (
    PHASE_NAMES,
    Progress,
    fmt_duration,
    phase_name,
)


def test_fmt_duration() -> None:
    assert fmt_duration(0) == "0s"
    assert fmt_duration(75) == "1m15s"
    assert fmt_duration(3725) == "1h02m05s"
    assert fmt_duration(-3) == "0s"


def test_phase_name_accepts_names_current_phase_values_and_tags() -> None:
    assert phase_name("ISODownload") == "ISODownload"
    assert phase_name("ISODownloading") == "ISODownload"
    assert phase_name("NodeUpgraded") == "NodeUpgrade"
    assert phase_name("image_preload") == "ImagePreload"
    assert phase_name("Succeeded") is None
    assert phase_name(None) is None


def test_phase_modules_move_the_phase_and_record_durations() -> None:
    p = Progress(start=0.0)
    assert p.update("iso_download", {}, {"plan": "hvst-upgrade-x", "phase": "ISODownload",
                                         "current_phase": "ISODownloaded",
                                         "progress": "ISO 100%"}, 10.0)
    line = p.line(10.0)
    assert line.startswith("harvester | plan hvst-upgrade-x | ISODownload 2/")
    assert "ISO 100%" in line and "elapsed 10s" in line
    p.update("repo_create", {}, {"phase": "RepoCreate", "current_phase": "RepoCreated"}, 25.0)
    assert p.phase == "RepoCreate"
    assert p.phase_finished["ISODownload"] == 10.0
    summary = "\n".join(p.summary(30.0))
    assert "ISODownload" in summary and "RepoCreate" in summary


def test_node_loop_counts_nodes_vms_and_gives_an_eta() -> None:
    p = Progress(start=0.0)
    p.update("node_gate", {}, {"phase": "NodeUpgrading", "single_node": False}, 0.0)
    p.update("node_info", {}, {"order": ["n1", "n2", "n3"], "node_plan": {"nodes": [
        {"node": "n1", "estimated_seconds": 100, "upgraded": False},
        {"node": "n2", "estimated_seconds": 100, "upgraded": False},
        {"node": "n3", "estimated_seconds": 100, "upgraded": False}]}}, 0.0)
    assert p.phase == "NodeUpgrade"
    assert p.eta(0.0) == 300.0  # node_info's estimate before any node finished
    p.update("drain_hook_ack", {"node": "n1", "hook": "pre-drain"}, {"passed": False}, 0.0)
    evacuated = {"migrated": [{"namespace": "default", "name": "vm1"}],
                 "shutdown": ["default/vm2"]}
    p.update("vm_evacuate", {"node": "n1"}, evacuated, 20.0)
    line = p.line(20.0)
    assert "node 1/3 n1" in line
    assert "VMs migrated 1, shut down 1, restored 0 (pending restore 1)" in line
    p.update("vm_restore", {"node": "n1"}, {"restored": ["default/vm2"], "failed": []}, 60.0)
    assert p.nodes_done == {"n1": 60.0}
    p.update("drain_hook_ack", {"node": "n2"}, {}, 60.0)
    # one node took 60 s: two left -> ~120 s
    assert p.eta(60.0) == 120.0
    line = p.line(90.0)
    assert "node 2/3 n2" in line and "nodes done 1/3" in line and "ETA ~1m30s" in line
    assert "pending restore" not in line
    # vm1 moves again (off n2, where it went first): one VM, two live migrations
    p.update("vm_evacuate", {"node": "n2"}, {"migrated": [{"namespace": "default",
                                                           "name": "vm1"}]}, 100.0)
    summary = "\n".join(p.summary(120.0))
    assert "VMs migrated 1 (2 live migrations), shut down 1, restored 1" in summary, summary


def test_a_failed_node_cycle_is_not_a_node_done() -> None:
    p = Progress(start=0.0)
    p.update("node_gate", {}, {"phase": "NodeUpgrading", "order": ["n1", "n2"]}, 0.0)
    p.update("node_cycle", {"node": "n1"}, {"restored": [], "failed": []}, 10.0)
    p.update("node_cycle", {"node": "n2"}, {"failed": True, "msg": "Job failed"}, 20.0)
    assert list(p.nodes_done) == ["n1"]
    assert "nodes upgraded 1/2" in "\n".join(p.summary(30.0))


def test_status_line_only_changes_on_news() -> None:
    p = Progress(start=0.0)
    assert p.update("upgrade_plan", {}, {"plan": "p1", "current_phase": "Initialized"}, 1.0)
    assert not p.update("upgrade_plan", {}, {"plan": "p1", "current_phase": "Initialized"}, 2.0)


def test_phase_table_has_the_upgrade_v2_order() -> None:
    assert PHASE_NAMES[0] == "Initialize" and "NodeUpgrade" in PHASE_NAMES
    assert PHASE_NAMES.index("ClusterUpgrade") < PHASE_NAMES.index("NodeUpgrade")
