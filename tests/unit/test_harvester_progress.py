"""The harvester_progress callback's state machine, fed with module results as the roles
register them (keys documented in the plugin's DOCUMENTATION), and the lines it prints about
finished tasks (plugin_utils/status_lines.py)."""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.callback.harvester_progress import (
    PHASE_NAMES,
    CallbackModule,
    Progress,
    fmt_duration,
    phase_name,
)
from ansible_collections.harvester.upgrade.plugins.plugin_utils import status_lines


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


# -- the lines about finished tasks (plugin_utils/status_lines.py), printed by the callback ---
class Shown:
    """A Display that records what it was asked to print."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str | None]] = []

    def display(self, msg: str, color: str | None = None, **_kw: Any) -> None:
        self.lines.append((msg, color))

    def warning(self, msg: str, **_kw: Any) -> None:
        self.lines.append((msg, "WARNING"))


def shown(lines: list[status_lines.Line]) -> list[tuple[str, str | None]]:
    out = Shown()
    status_lines.show(out, lines)
    return out.lines


def test_a_phase_ends_with_its_checks_and_one_closing_line() -> None:
    res = {"phase": "Initialize", "status": "completed", "msg": "all passed",
           "checks": [{"status": "PASS", "name": "nodes-ready", "message": "3/3"}, "junk"]}
    assert shown(status_lines.outcome("preflight", {}, res, False, 75.0)) == [
        ("    PASS | nodes-ready | 3/3", None),
        ("<== Initialize: completed in 1m15s: all passed", None)]
    failed = {"phase": "ISODownload", "status": "pending", "failed": True, "msg": "no ISO"}
    assert shown(status_lines.outcome("iso_download", {}, failed, False, 3725.0)) == [
        ("<== ISODownload: FAILED after 1h02m: no ISO", "red")]


def test_the_head_start_clusterupgrades_call_did_follows_its_closing_line() -> None:
    res = {"phase": "ClusterUpgrade", "status": "completed", "msg": "cluster upgraded",
           "started": [{"phase": "NodeUpgrade", "status": "started", "actions": [],
                        "head_start": {"next": "n1", "started": ["a"], "stopping": [],
                                       "why": ""}}]}
    assert shown(status_lines.outcome("cluster_upgrade", {}, res, False, 5.0)) == [
        ("<== ClusterUpgrade: completed in 5s: cluster upgraded", None),
        ("    NodeUpgrade head start: 1 migration(s) started off n1, 0 VM(s) asked to stop",
         None)]
    res["started"][0].pop("head_start")
    assert len(status_lines.outcome("cluster_upgrade", {}, res, False, 5.0)) == 1


def test_a_phase_not_run_is_a_warning_or_in_check_mode_a_note() -> None:
    no_plan = {"status": "no_plan", "msg": "no active UpgradePlan"}
    assert shown(status_lines.outcome("finalize", {}, no_plan, False, 0.0)) == [
        ("no active UpgradePlan", "WARNING")]
    assert shown(status_lines.outcome("finalize", {}, no_plan, True, 0.0)) == [
        ("--- finalize: no active UpgradePlan", None)]
    reached = {"phase": "RepoCreate", "status": "not_reached", "msg": "at ISODownloading"}
    assert shown(status_lines.outcome("repo_create", {}, reached, True, 0.0)) == [
        ("at ISODownloading", "WARNING")]
    verified = {"phase": "RepoCreate", "status": "verified", "msg": "already completed"}
    assert shown(status_lines.outcome("repo_create", {}, verified, False, 0.0)) == [
        ("--- RepoCreate: already completed", None)]


def _cycle(names: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    steps = [{"step": n} for n in names]
    return steps, [f"{n} done" for n in names] + ["total 1s"]


def test_node_cycle_lines_are_those_of_its_last_call() -> None:
    steps, lines = _cycle(["gate", "pause", "evacuate"])
    args = {"node": "n1", "pause_timeout": 0}
    res = {"node": "n1", "steps": steps, "summary": lines, "paused": False}
    assert shown(status_lines.outcome("node_cycle", args, res, False, 9.0)) == [
        ("node cycle of n1:\n  gate done\n  pause done\n  evacuate done\n  total 1s", None)]
    # paused, the action waited: it printed the first call's lines and the notice itself
    first = _cycle(["gate", "pause"])[1]
    res = {"node": "n1", "steps": steps, "summary": first + lines, "paused": False}
    assert shown(status_lines.outcome("node_cycle", {"node": "n1", "pause_timeout": 60}, res,
                                      False, 9.0))[0][0].startswith(
        "node cycle after the pause of n1:\n  gate done")
    assert shown(status_lines.outcome("node_cycle", {"node": "n1"},
                                      {"steps": [], "summary": first, "failed": True,
                                       "msg": "lock lost"}, False, 1.0)) == []


def test_a_paused_node_not_waited_for_is_said_after_its_steps() -> None:
    steps, lines = _cycle(["gate", "pause"])
    res = {"node": "n2", "steps": steps, "summary": lines, "paused": True, "plan": "p1"}
    out = shown(status_lines.outcome("node_cycle", {"node": "n2", "pause_timeout": 0}, res,
                                     False, 1.0))
    assert out[0][0].startswith("node cycle of n2:")
    assert out[1][0].startswith("Node n2 is paused (UpgradePaused)") and "upgradeplan p1" in \
        out[1][0] and "Waiting up to 0s" in out[1][0]
    assert len(shown(status_lines.outcome("node_cycle", {"node": "n2"}, res, True, 1.0))) == 1


def test_node_gate_and_upgrade_plan_lines() -> None:
    res = {"settings": ["save replica-replenishment-wait-interval"],
           "head_start": {"next": "n2", "started": ["a"], "stopping": [], "why": ""}}
    assert shown(status_lines.outcome("node_gate", {"step": "enter"}, res, False, 0.0)) == [
        ("    NodeUpgrade PreRun: save replica-replenishment-wait-interval", None),
        ("    Head start: 1 migration(s) started off n2, 0 VM(s) asked to stop", None)]
    assert status_lines.outcome("node_gate", {"step": "finish"}, res, False, 0.0) == []
    created = {"msg": "created UpgradePlan p1 to v1.6.0"}
    assert shown(status_lines.outcome("upgrade_plan", {"action": "ensure"}, created, False,
                                      0.0)) == [("    UpgradePlan: created UpgradePlan p1 to "
                                                 "v1.6.0", None)]
    assert status_lines.outcome("upgrade_plan", {"action": "read"}, created, False, 0.0) == []
    assert status_lines.outcome("vm_restore", {}, created, False, 0.0) == []


class FakeTask:
    def __init__(self, action: str, args: dict[str, Any]) -> None:
        self.action = action
        self.args = args
        self._uuid = "t1"
        self._role = None

    def get_name(self) -> str:
        return "a task"


class FakeResult:
    """What a callback gets: the result without ``failed`` (the event says it)."""

    def __init__(self, task: FakeTask, res: dict[str, Any], check_mode: bool = False) -> None:
        self._task = task
        self._host = "localhost"
        self._result = res
        self.task_fields = {"check_mode": check_mode}


def callback() -> tuple[CallbackModule, Shown]:
    cb = CallbackModule()
    out = Shown()
    cb._display = out  # type: ignore[assignment]
    return cb, out


def test_the_callback_prints_a_failed_phase_and_counts_no_failed_node() -> None:
    cb, out = callback()
    task = FakeTask("harvester.upgrade.cluster_upgrade", {})
    cb.v2_runner_on_start("localhost", task)
    cb.v2_runner_on_failed(FakeResult(task, {"phase": "ClusterUpgrade", "status": "pending",
                                             "msg": "timed out"}))
    assert ("<== ClusterUpgrade: FAILED after 0s: timed out", "red") in out.lines
    assert any(line.startswith("harvester | FAILED (phase ClusterUpgrade)")
               for line, _ in out.lines), out.lines
    node = FakeTask("harvester.upgrade.node_cycle", {"node": "n1"})
    cb.v2_runner_on_failed(FakeResult(node, {"steps": [], "summary": [], "msg": "Job failed",
                                             "invocation": {"module_args": {"node": "n1"}}}))
    assert "n1" not in cb.state.nodes_done
    assert not cb._broken


def test_the_callback_prints_nothing_for_other_modules_or_a_loop() -> None:
    cb, out = callback()
    cb.v2_runner_on_ok(FakeResult(FakeTask("ansible.builtin.debug", {}), {"msg": "hi"}))
    cb.v2_runner_on_ok(FakeResult(FakeTask("harvester.upgrade.finalize", {}),
                                  {"results": [{"status": "completed"}]}))
    assert out.lines == [] and not cb._broken
    cb.v2_runner_item_on_ok(FakeResult(FakeTask("harvester.upgrade.finalize", {}),
                                       {"status": "no_plan", "msg": "none"}, check_mode=True))
    assert out.lines == [("--- finalize: none", None)]


def test_a_result_hidden_by_no_log_prints_nothing() -> None:
    cb, out = callback()
    cb.v2_runner_on_ok(FakeResult(FakeTask("harvester.upgrade.finalize", {}), {
        "censored": "the output has been hidden due to the fact that 'no_log: true' was "
                    "specified for this result", "changed": True}))
    assert out.lines == [] and not cb._broken
