"""The run report: critical path from spans, counters, API stats, JSON and text output."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harvester_sim import invariants, report
from harvester_sim.scenarios import loader
from harvester_sim.world import World


def span(what: str, start: float, end: float, **kw: Any) -> dict[str, Any]:
    return {"t": end, "wall": end / 100, "event": "span", "what": what, "start": start,
            "end": end, **kw}


UPGRADE = [
    span("iso_download", 0, 30, ok=False),          # a failed try: not on the critical path
    span("iso_download", 30, 90),
    span("image_preload", 100, 160, node="n1"),
    span("image_preload", 100, 140, node="n2"),
    span("image_preload", 140, 170, node="n2"),     # n2: 70 s in total -> the slowest
    span("cluster_upgrade", 200, 500),
    span("migration", 510, 520, node="n1", vm="default/a"),
    span("migration", 520, 535, node="n1", vm="default/b"),
    span("migration", 535, 540, node="n1", vm="default/c", ok=False),
    span("rke2_restart", 540, 560, node="n1"),
    span("os_install", 560, 680, node="n1"),
    span("reboot", 680, 860, node="n1"),
    span("migration", 900, 910, source_node="n2", vm="default/a"),
    span("os_install", 910, 1030, node="n2"),
    span("reboot", 1030, 1210, node="n2"),
    span("image_cleanup", 1300, 1310, node="n1"),
    span("image_cleanup", 1310, 1315, node="n2"),
    span("drain", 500, 600, node="n1"),             # not a critical-path span
    {"t": 5, "event": "node_reboot", "node": "n1"},
]


def test_critical_path_from_spans() -> None:
    cp = report.critical_path(UPGRADE)
    assert cp["iso_download_s"] == 60
    assert cp["image_preload_s"] == 70
    assert cp["cluster_upgrade_s"] == 300
    assert cp["per_node"]["n1"] == {"migration": 25, "os_install": 120, "reboot": 180,
                                    "rke2_restart": 20}
    assert cp["per_node"]["n2"] == {"migration": 10, "os_install": 120, "reboot": 180}
    assert cp["nodes_s"] == 25 + 120 + 180 + 20 + 10 + 120 + 180
    assert cp["image_cleanup_s"] == 15
    assert cp["total_s"] == 60 + 70 + 300 + 655 + 15


def test_image_cleanup_is_derived_from_the_suc_jobs() -> None:
    tl = [{"t": 100, "event": "suc_job_created", "plan": "p-image-cleanup", "node": "n1"},
          {"t": 118, "event": "suc_node_applied", "plan": "p-image-cleanup", "node": "n1"},
          {"t": 120, "event": "suc_job_created", "plan": "p-image-cleanup", "node": "n2"},
          {"t": 150, "event": "suc_node_applied", "plan": "p-image-cleanup", "node": "n2"},
          {"t": 10, "event": "suc_job_created", "plan": "p-image-preload", "node": "n1"},
          {"t": 90, "event": "suc_node_applied", "plan": "p-image-preload", "node": "n1"}]
    assert report.critical_path(tl)["image_cleanup_s"] == 18 + 30
    # a real span wins: nothing is derived then
    assert report.critical_path([*tl, span("image_cleanup", 0, 5, node="n1")])[
        "image_cleanup_s"] == 5


def test_critical_path_of_nothing_is_zero() -> None:
    assert report.critical_path([])["total_s"] == 0
    assert report.critical_path([{"event": "span", "what": "reboot"}])["total_s"] == 0


@pytest.mark.parametrize("stats", [
    {("get", "nodes", "ansible"): 3, ("list", "pods", "ansible"): 2,
     ("watch", "pods", "kubectl"): 1},
    {"get nodes ansible": 3, "list pods ansible": 2, "watch pods kubectl": 1},
    [{"verb": "get", "resource": "nodes", "user_agent": "ansible", "count": 3},
     {"verb": "list", "resource": "pods", "user_agent": "ansible", "count": 2},
     {"verb": "watch", "resource": "pods", "userAgent": "kubectl"}],
])
def test_api_request_shapes(stats: Any) -> None:
    for s in (stats, lambda: stats):
        out = report.api_requests(s)
        assert out["total"] == 6
        assert out["by_verb"] == {"get": 3, "list": 2, "watch": 1}
        assert out["by_resource"] == {"nodes": 3, "pods": 3}
        assert out["by_user_agent"] == {"ansible": 5, "kubectl": 1}
        assert out["by_user_agent_verb"]["ansible"] == {"get": 3, "list": 2}


def test_api_request_summary_passes_through() -> None:
    server_stats = {"total": 9, "by_verb": {"get": 9}, "by_resource": {"nodes": 9},
                    "by_user_agent": {"ansible": 9}, "by_code": {"200": 9}}
    out = report.api_requests(lambda: server_stats)
    assert out["total"] == 9 and out["by_code"] == {"200": 9}
    assert report.api_requests({"by_verb": {"get": 2, "list": 1}})["total"] == 3
    assert report.api_requests(None)["total"] == 0


def _world(timeline: list[dict[str, Any]], **extras: Any) -> Any:
    return SimpleNamespace(timeline=SimpleNamespace(snapshot=lambda: list(timeline)),
                           controllers={}, extras=dict(extras))


def test_migrations_prefer_the_kubevirt_controller() -> None:
    w = _world(UPGRADE)
    w.controllers["kubevirt"] = SimpleNamespace(migrations_per_vm={"default/a": 2,
                                                                   ("default", "b"): 1})
    out = report.vm_migrations(w, UPGRADE, None)
    assert out == {"total": 3, "per_vm": {"default/a": 2, "default/b": 1}, "source": "kubevirt"}


def test_migrations_fall_back_to_the_monitor_then_the_timeline() -> None:
    w = _world(UPGRADE)
    mon = SimpleNamespace(migrations_per_vm={"default/x": 1}, node_reboots={})
    assert report.vm_migrations(w, UPGRADE, mon)["source"] == "invariants"
    out = report.vm_migrations(w, UPGRADE, None)
    assert out["source"] == "timeline"
    assert out["per_vm"] == {"default/a": 2, "default/b": 1} and out["total"] == 3


def test_node_reboots_sources() -> None:
    assert report.node_reboots(UPGRADE, None) == {"total": 1, "per_node": {"n1": 1},
                                                  "source": "timeline"}
    spans_only = [e for e in UPGRADE if e["event"] == "span"]
    assert report.node_reboots(spans_only, None)["per_node"] == {"n1": 1, "n2": 1}
    mon = SimpleNamespace(node_reboots={"n3": 2})
    assert report.node_reboots([], mon) == {"total": 2, "per_node": {"n3": 2},
                                            "source": "invariants"}
    assert report.node_reboots([], None)["source"] == "none"


@pytest.fixture
def world() -> Any:
    w = World(loader.load("empty"), speed=1000)
    loader.populate(w)
    invariants.setup(w)
    yield w
    w.stop()


def test_build_has_every_key(world: Any) -> None:
    for e in UPGRADE:
        if e["event"] == "span":
            world.timeline.record("span", **{k: v for k, v in e.items()
                                             if k not in ("t", "wall", "event")})
    world.extras["api_stats"] = lambda: {("get", "nodes", "ansible"): 4}
    world.timeline.record("vm_killed", vm="default/x", node="node-1", reason="test")
    rep = report.build(world)
    for key in ("invariant_violations", "vm_migrations", "node_reboots", "api_requests",
                "timeline", "critical_path_s", "simulated_duration_s", "wall_duration_s",
                "faults_fired", "scenario"):
        assert key in rep, key
    assert rep["scenario"] == "empty"
    assert rep["critical_path_s"] == 1100
    assert rep["api_requests"]["by_verb"] == {"get": 4}
    assert [v["kind"] for v in rep["invariant_violations"]] == ["vm_killed"]
    assert rep["node_reboots"]["per_node"] == {"n1": 1, "n2": 1}
    assert json.loads(json.dumps(rep)) == rep


def test_main_prints_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rep = {"scenario": "three-node", "speed": 60, "nodes": 3, "vms": 12,
           "simulated_duration_s": 2400.0, "wall_duration_s": 40.0,
           "critical_path_s": 2000.0, "critical_path": report.critical_path(UPGRADE),
           "invariant_violations": [{"kind": "vm_killed", "t": 700.0,
                                     "message": "VM default/a killed on node n1 (reboot)"}],
           "vm_migrations": {"total": 3, "per_vm": {"default/a": 2, "default/b": 1}},
           "node_reboots": {"total": 2, "per_node": {"n1": 1, "n2": 1}},
           "api_requests": report.api_requests({("get", "nodes", "ansible"): 4}),
           "faults_fired": [{"kind": "migration_fail", "t": 515.0, "node": "n1"}],
           "timeline": UPGRADE}
    f = tmp_path / "report.json"
    f.write_text(json.dumps(rep))
    assert report.main(["report", str(f)]) == 1  # violations -> exit 1
    out = capsys.readouterr().out
    assert "Scenario three-node" in out
    assert "simulated / critical path = 1.20" in out
    assert "Invariant violations: 1" in out and "vm_killed: VM default/a killed" in out
    assert "VM migrations: 3" in out and "default/a x2" in out
    assert "Node reboots: 2" in out
    assert "ansible: 4" in out
    assert "migration_fail" in out
    rep["invariant_violations"] = []
    f.write_text(json.dumps(rep))
    assert report.main([str(f), "--timeline", "0"]) == 0
    assert "(none)" in capsys.readouterr().out


def test_main_rejects_an_unreadable_file(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main([str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "t.png"
    report.plot({"scenario": "x", "timeline": UPGRADE}, png)
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_spans_derived_from_events() -> None:
    tl = [{"t": 100.0, "event": "vm_migration_succeeded", "vm": "default/a", "source": "n1",
           "target": "n2", "duration_s": 12.0},
          {"t": 200.0, "event": "node_reboot", "node": "n1"},
          {"t": 380.0, "event": "node_ready", "node": "n1"},
          {"t": 390.0, "event": "node_ready", "node": "n2"}]
    cp = report.critical_path(tl)
    assert cp["per_node"] == {"n1": {"migration": 12.0, "reboot": 180.0}}
    # a real span of a kind wins over derivation
    assert report.critical_path([*tl, span("reboot", 0, 10, node="n1")])["per_node"]["n1"][
        "reboot"] == 10


def test_a_jobs_span_counts_its_pods_start_not_the_programs_earlier_steps() -> None:
    """A Job's program span (``job_pod``, ``pod_started``) is lengthened by the pod's start
    (``job_pod_created`` -> container start), and by nothing else: the program may have
    waited on other counted work before the span began."""
    tl = [{"t": 100.0, "event": "job_pod_created", "job": "j", "pod": "j-abc"},
          span("os_install", 150, 270, node="n1", job_pod="j-abc", pod_started=103.0),
          span("reboot", 270, 450, node="n1"),
          span("os_install", 500, 620, node="n2")]           # not a Job's: as recorded
    cp = report.critical_path(tl)
    assert cp["per_node"]["n1"]["os_install"] == 123.0          # 120 + the pod's 3 s
    assert cp["per_node"]["n2"]["os_install"] == 120.0
    assert cp["total_s"] == 123 + 180 + 120
