"""The harness scripts around the simulator: the scenario overrides shared by chaos, toolkit-peer
and the bench (scripts/scenario_overrides.py), chaos's per-scenario profiles
(scripts/chaos.py), the toolkit beside the bench (benchmarks/toolkit_side.py) and the
harness's stop on SIGTERM (scripts/upgrade_on_simulator.py, used by toolkit_peer.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testkit import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import chaos  # noqa: E402
import scenario_overrides  # noqa: E402
import toolkit_peer  # noqa: E402
import toolkit_side  # noqa: E402

RWO_OFF = "tests/integration/scenarios/five-node-mixed-rwo-off.yaml"
SKIP_DETACHED = "management.harvesterhci.io/skip-single-replica-detached-vol"


# ------------------------------------------------------------------------ scenario overrides
@pytest.mark.parametrize("scenario", ["five-node-mixed", RWO_OFF, str(ROOT / RWO_OFF)])
def test_five_node_mixed_and_its_rwo_off_file_get_the_overrides(scenario: str) -> None:
    ev = scenario_overrides.overrides_for(scenario)
    assert ev["upgrade_skip_checks"] == ["volumes_healthy"]
    assert ev["upgrade_annotations"] == {SKIP_DETACHED: "true"}
    assert "scenario_overrides.py" in scenario_overrides.describe(scenario)


@pytest.mark.parametrize("scenario", ["three-node", "twenty-node", "hundred-node",
                                      "three-node-migration-fail", "no-such-scenario"])
def test_other_scenarios_get_none(scenario: str) -> None:
    assert scenario_overrides.overrides_for(scenario) == {}
    assert scenario_overrides.describe(scenario).endswith(": none")


def test_a_file_extending_five_node_mixed_inherits_them_and_a_copy_is_returned(
        tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text("extends: five-node-mixed\nseed: 9\n")
    assert scenario_overrides.lineage(str(f)) == ["mine", "five-node-mixed"]
    ev = scenario_overrides.overrides_for(str(f))
    ev["upgrade_skip_checks"].append("x")
    assert scenario_overrides.overrides_for("five-node-mixed")["upgrade_skip_checks"] == \
        ["volumes_healthy"]


def _refused_on_purpose(scenario: str) -> list[str]:
    """What in the scenario the pre-flight refuses by design: a degraded volume, a detached
    single-replica volume."""
    loader = pytest.importorskip("harvester_sim.scenarios.loader")
    scn = loader.load(scenario)
    vols = [v for vm in scn["vms"] for v in vm["volumes"]] + list(scn.get("volumes") or [])
    out = []
    if any(v.get("robustness") == "degraded" for v in vols):
        out.append("degraded")
    if any(v.get("state") == "detached" and v.get("replicas") == 1 for v in vols):
        out.append("detached-single-replica")
    return out


@pytest.mark.parametrize("scenario", ["three-node", "twenty-node", "hundred-node",
                                      "five-node-mixed", RWO_OFF])
def test_overrides_match_what_the_scenario_carries(scenario: str) -> None:
    """An override exactly where the scenario carries what it lifts (hundred-node: nothing)."""
    carried = _refused_on_purpose(str(ROOT / scenario) if scenario.endswith(".yaml")
                                  else scenario)
    ev = scenario_overrides.overrides_for(scenario)
    assert ("degraded" in carried) == ("volumes_healthy" in ev.get("upgrade_skip_checks", []))
    assert ("detached-single-replica" in carried) == \
        (SKIP_DETACHED in ev.get("upgrade_annotations", {}))


# ---------------------------------------------------------------------------- chaos profiles
def test_small_scenarios_keep_the_time_window_and_hundred_node_runs_at_bench_speed() -> None:
    three, hundred, fault = chaos.plan_runs(
        ["three-node", "hundred-node", "three-node-migration-fail"], None, "auto", 1.0, None,
        None)
    assert three == {"scenario": "three-node", "speed": 100.0, "mode": "time",
                     "kill_window": (1.0, 15.0), "run_timeout": 600.0}
    assert hundred["speed"] == 300.0 and hundred["mode"] == "milestone"
    assert hundred["run_timeout"] >= 3000 and hundred["kill_window"][1] > 200
    assert fault["speed"] == 100.0 and fault["kill_window"] == (1.0, 15.0)   # extends three-node


def test_options_override_the_profile() -> None:
    (pl,) = chaos.plan_runs(["hundred-node"], 600.0, "time", 2.0, None, None)
    assert pl["mode"] == "time" and pl["speed"] == 600.0
    assert pl["kill_window"] == (2.0, round(0.75 * 515 * 300 / 600, 1))
    (pl,) = chaos.plan_runs(["three-node"], 200.0, "auto", 1.0, 8.0, 120.0)
    assert pl["kill_window"] == (1.0, 8.0) and pl["run_timeout"] == 120.0


def test_cli_prints_each_scenarios_plan_and_overrides_and_starts_nothing(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc = chaos.main(["--runs", "0", "--scenario", "hundred-node,five-node-mixed",
                     "--out", str(tmp_path / "c")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "hundred-node: speed 300, mode milestone, run timeout 5150 s; scenario overrides " \
        "for hundred-node: none" in out
    assert "five-node-mixed: speed 100, mode time, kills after 1-15 s" in out
    assert "volumes_healthy" in out
    assert not (tmp_path / "c").exists()


def test_reached_counts_every_node_milestone_once_the_image_cleanup_began() -> None:
    plan = {"status": {"currentPhase": "CleaningUp", "nodeUpgradeStatuses": {
        "n1": {"state": "ImageCleaning"}, "n2": {"state": "PostDraining"}}}}
    marks = chaos.reached(plan)
    assert {f"n1:{s}" for s in chaos.NODE_MILESTONES} <= marks
    assert "n2:PreDrained" in marks and "n2:WaitingReboot" not in marks


def test_a_timed_out_run_fails_with_its_reason() -> None:
    res = {"timed_out": True, "run_s": 601.2, "phase": "NodeUpgrading",
           "reboots": {"a": 1}, "violations": [], "leftovers": []}
    assert chaos.problems(res) == ["timed out after 601 s", "plan phase NodeUpgrading"]
    ok = {"phase": "Succeeded", "reboots": {"a": 1, "b": 1}, "violations": [], "leftovers": []}
    assert chaos.problems(ok) == []
    assert chaos.problems({**ok, "reboots": {"a": 2, "b": 1}}) == \
        ["reboots per node {'a': 2, 'b': 1}"]


# ------------------------------------------------------------------------- toolkit beside us
def test_bench_skips_the_toolkit_without_its_binary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEERS_CACHE", str(tmp_path))
    res = toolkit_side.compare({"scenario": "three-node", "speed": 60.0, "out": "x",
                                "wall_s": 30.0}, tmp_path / "side")
    assert res == {"skipped": f"toolkit binary not found: skipped "
                              f"({tmp_path / 'bin' / 'upgrade-toolkit'})"}
    assert toolkit_side.lines(res) == [f"toolkit side by side: {res['skipped']}"]
    assert not (tmp_path / "side").exists()


def test_bench_skips_a_binary_of_another_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEERS_CACHE", str(tmp_path))
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "upgrade-toolkit").write_text("")
    (tmp_path / "bin" / ".upgrade-toolkit.version").write_text("0123456789ab rest\n")
    why = toolkit_side.skip_reason()
    assert why is not None and "is 0123456789ab, not 5ac1bbe35a6b: skipped" in why


def _report(by_agent: dict[str, int], migrations: int, stopped: list[str]) -> dict[str, Any]:
    return {"api_requests": {"by_user_agent": by_agent, "total": sum(by_agent.values())},
            "vm_migrations": {"total": migrations},
            "invariants": {"vms_expected_running": 12,
                           "explicit_stops": {vm: {"how": "stopped"} for vm in stopped}},
            "invariant_violations": [], "node_reboots": {"total": 3}}


def test_collection_figures_count_only_the_collections_own_requests(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(json.dumps(_report(
        {"harvester-upgrade": 500, "OpenAPI-Generator": 8, "Python-urllib": 1,
         "system-upgrade-controller": 200}, 14, ["default/pinned", "default/gpu"])))
    (tmp_path / "upgradeplan.json").write_text(json.dumps({
        "metadata": {"creationTimestamp": "2026-11-27T07:00:00Z"},
        "status": {"currentPhase": "Succeeded", "phaseTransitionTimestamps": [
            {"phase": "Initializing", "phaseTransitionTimestamp": "2026-11-27T07:00:01Z"},
            {"phase": "Succeeded", "phaseTransitionTimestamp": "2026-11-27T07:00:34Z"}]}}))
    fig = toolkit_peer.collection_figures(tmp_path)
    assert (fig["phase"], fig["wall"], fig["migrations"], fig["vms_shut_down"]) == \
        ("Succeeded", 34.0, 14, 2)
    assert fig["api_upgrader"] == 500 and fig["api_total"] == 709
    table = toolkit_peer.side_by_side(fig, fig)
    assert any(line.startswith("API requests by the upgrader") and line.split()[-1] == "500"
               for line in table)


# ------------------------------------------------------------------------------ SIGTERM
def test_sigterm_stops_the_playbook_and_the_simulator(tmp_path: Path) -> None:
    """``upgrade_on_simulator.py`` (the collection's side of ``make toolkit-peer``) stops its
    children on SIGTERM; toolkit_peer.py uses the same handler and stops this one."""
    psutil = pytest.importorskip("psutil")
    pytest.importorskip("harvester_sim")
    fake = tmp_path / "bin"
    fake.mkdir()
    started = tmp_path / "playbook.pid"
    (fake / "ansible-playbook").write_text(f"#!/bin/sh\necho $$ > {started}\nexec sleep 300\n")
    (fake / "ansible-playbook").chmod(0o755)
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "upgrade_on_simulator.py"),
                             "--scenario", "three-node", "--speed", "100", "--ansible-bin",
                             str(fake), "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")))
    try:
        deadline = time.monotonic() + 120
        while not started.exists() or not started.read_text().strip():
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the fake playbook never started"
            time.sleep(0.2)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2   # the simulator and the playbook (sleep)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=90)[0].decode()
        assert proc.returncode == 128 + signal.SIGTERM, out
        assert "SIGTERM: stopping the child processes" in out
        _gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, [p.cmdline() for p in alive]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_run_all_records_the_skipped_toolkit_under_its_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``run_all.py``'s block: without the binary the results JSON says why, and the bench
    prints it (the runs themselves are stubbed: this is about the block, not the figures)."""
    import harness
    import run_all

    def fake_run(scenario: str, speed: float, out: Path, ev: dict[str, Any] | None = None,
                 **_kw: Any) -> harness.Run:
        return harness.Run(scenario, speed, dict(ev or {}), rc=0, plan_phase="Succeeded",
                           wall_s=30.0, nodes=3, out=str(out))

    monkeypatch.setenv("PEERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(run_all, "run_upgrade", fake_run)
    monkeypatch.setattr(run_all, "sim_scale", lambda *_a: {"peak_rss_mb": 1.0})
    monkeypatch.setattr(run_all, "RESULTS", tmp_path / "results")
    args = ["--no-hundred", "--no-twenty", "--no-baseline", "--no-mechanisms", "--repeat", "1",
            "--modes", "node", "--migration-scenario", "three-node", "--out",
            str(tmp_path / "bench")]
    assert run_all.main(args) == 0
    latest = json.loads((tmp_path / "results" / "latest.json").read_text())
    assert latest["toolkit_side_by_side"]["skipped"].startswith(
        "toolkit binary not found: skipped")
    assert "toolkit side by side: toolkit binary not found: skipped" in capsys.readouterr().out
    assert run_all.main([*args, "--no-toolkit"]) == 0
    latest = json.loads((tmp_path / "results" / "latest.json").read_text())
    assert latest["toolkit_side_by_side"] == {"skipped": "--no-toolkit"}


def test_toolkit_is_held_to_what_harms_on_the_spot(tmp_path: Path) -> None:
    """The toolkit's outcome kinds (VMs it shut down and never restarts, replicas still
    rebuilding) are counted apart from what harms while it runs; a kind the classification
    does not know counts as harm."""
    pytest.importorskip("harvester_sim")
    rep = _report({"upgrade-toolkit": 200}, 14, ["default/pinned"])
    rep["invariant_violations"] = [{"kind": "vm_not_running_at_end"},
                                   {"kind": "volume_not_fully_replicated"},
                                   {"kind": "vm_killed"}, {"kind": "a_kind_added_later"}]
    fig = toolkit_peer.report_figures(rep, lambda a: a == "upgrade-toolkit")
    assert (fig["violations"], fig["violations_on_the_spot"]) == (4, 2)
    table = toolkit_peer.side_by_side(fig, None)
    assert any(line.split()[:5] == ["of", "which", "harm", "on", "the"] and
               line.split()[-3] == "2" for line in table), table
