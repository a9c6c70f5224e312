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
    assert cp["per_node"]["n1"] == {"os_install": 120, "reboot": 180, "rke2_restart": 20}
    assert cp["per_node"]["n2"] == {"os_install": 120, "reboot": 180}
    assert cp["nodes_s"] == 120 + 180 + 20 + 120 + 180
    # n1's two migrations (10 s, 15 s) may run side by side (2 lanes): the longer one counts
    assert cp["evacuations"]["n1"]["bound_s"] == 15
    assert cp["evacuations"]["n2"]["bound_s"] == 10
    assert cp["evacuations_s"] == 25
    assert cp["image_cleanup_s"] == 15
    assert cp["total_s"] == 60 + 70 + 300 + 25 + 620 + 15
    # the earlier figure: every migration in series
    assert cp["serial_sum"]["per_node"]["n1"] == {"migration": 25, "os_install": 120,
                                                  "reboot": 180, "rke2_restart": 20}
    assert cp["serial_sum_s"] == 60 + 70 + 300 + 655 + 15


def _node_chain(node: str, t: float) -> list[dict[str, Any]]:
    """Rancher's part of one node after its evacuation: RKE2 restart, OS install, reboot."""
    return [span("rke2_restart", t, t + 20, node=node), span("os_install", t + 20, t + 140,
                                                             node=node),
            span("reboot", t + 140, t + 320, node=node)]


def test_parallel_migrations_are_counted_once() -> None:
    """An upgrade whose four 10 s migrations ran two at a time (KubeVirt's default
    parallelOutboundMigrationsPerNode) took 20 s to evacuate: the limit must not be longer
    than the run itself. The earlier serial sum (40 s of migrations) was."""
    tl = [{"t": 0, "event": "node_cordoned", "node": "n1"},
          span("migration", 0, 10, node="n1", vm="default/a"),
          span("migration", 0, 10, node="n1", vm="default/b"),
          span("migration", 10, 20, node="n1", vm="default/c"),
          span("migration", 10, 20, node="n1", vm="default/d"),
          *_node_chain("n1", 20)]
    cp = report.critical_path(tl)
    makespan = 20 + 320
    assert cp["evacuations"]["n1"] == {"bound_s": 20, "migrations": 4, "migration_sum_s": 40,
                                       "longest_migration_s": 10, "vm_shutdowns": 0}
    assert cp["total_s"] == makespan
    assert cp["serial_sum_s"] == makespan + 20 > makespan


def test_a_migration_counts_from_kubevirts_admission() -> None:
    """KubeVirt admits a migration into one of its lanes, then schedules and starts the
    target pod, then transfers: the lane is held from admission (``scheduling_s`` of
    ``vm_migration_succeeded``), as a Job counts from its pod's creation. The serial sum (the
    earlier figure) keeps the transfer only."""
    def done(t: float, vm: str, transfer: float, scheduling: float) -> dict[str, Any]:
        return {"t": t, "event": "vm_migration_succeeded", "vm": vm, "source": "n1",
                "duration_s": transfer, "scheduling_s": scheduling}
    tl = [{"t": 0, "event": "node_cordoned", "node": "n1"},
          done(13, "default/a", 10, 3), done(13, "default/b", 10, 3),
          done(26, "default/c", 10, 3), done(26, "default/d", 10, 3),
          *_node_chain("n1", 26)]
    cp = report.critical_path(tl)
    assert cp["evacuations"]["n1"]["bound_s"] == 26
    assert cp["evacuations"]["n1"]["migration_sum_s"] == 52
    assert cp["total_s"] == 26 + 320
    assert cp["serial_sum"]["per_node"]["n1"]["migration"] == 40
    # an event without the field (an older report) counts the transfer only
    old = [dict(e, scheduling_s=None) if e.get("event") == "vm_migration_succeeded" else e
           for e in tl]
    assert report.critical_path(old)["evacuations"]["n1"]["bound_s"] == 20


def test_two_lanes_cannot_split_three_equal_migrations_evenly() -> None:
    """Three 10 s migrations on two lanes take 20 s whatever the order (one lane runs two),
    not the 15 s of their total shared by the lanes."""
    tl = [span("migration", 0, 10, node="n1", vm="default/a"),
          span("migration", 0, 10, node="n1", vm="default/b"),
          span("migration", 10, 20, node="n1", vm="default/c"),
          *_node_chain("n1", 20)]
    assert report.critical_path(tl)["evacuations"]["n1"]["bound_s"] == 20
    # 24.5 + 12.5 on one lane, 12.5 + 12.5 on the other: the best split ends at 37 s
    assert report._batched([24.5, 12.5, 12.5, 12.5], 2) == 37.0
    assert report._batched([24.4, 24.4, 12.5, 12.5, 12.5, 12.5], 2) == 49.4
    assert report._batched([10.0, 10.0, 10.0], 3) == 10.0


def test_one_long_migration_bounds_the_evacuation() -> None:
    tl = [span("migration", 0, 30, node="n1", vm="default/big"),
          span("migration", 0, 5, node="n1", vm="default/a"),
          span("migration", 5, 10, node="n1", vm="default/b"),
          *_node_chain("n1", 30)]
    assert report.critical_path(tl)["evacuations"]["n1"]["bound_s"] == 30   # not 40 / 2


def test_migration_lanes_follow_the_clusters_limits() -> None:
    tl = [span("migration", 0, 10, node="n1", vm="default/a"),
          span("migration", 10, 20, node="n1", vm="default/b"),
          span("migration", 20, 30, node="n1", vm="default/c"),
          *_node_chain("n1", 30)]
    one = {"parallel_outbound_migrations_per_node": 1}
    assert report.critical_path(tl, one)["evacuations_s"] == 30
    assert report.critical_path(tl)["evacuations_s"] == 20   # default 2 lanes: one runs two
    # the per-cluster limit binds when it is the smaller one
    assert report.critical_path(tl, {"parallel_outbound_migrations_per_node": 5,
                                     "parallel_migrations_per_cluster": 3})[
        "evacuations_s"] == 10
    assert report.critical_path(tl, one)["migration_lanes"] == 1


def test_only_a_nodes_evacuation_counts() -> None:
    """Migrations before Rancher cordons the node (e.g. KubeVirt's workload update during the
    cluster upgrade) are not the node's evacuation; those during Rancher's drain are (the naive
    evacuation: KubeVirt migrates what the drain evicts, before RKE2 restarts)."""
    tl = [span("migration", 0, 50, node="n1", vm="default/early"),
          {"t": 100, "event": "node_cordoned", "node": "n1"},
          {"t": 100, "event": "pre_drain_set", "node": "n1"},
          {"t": 101, "event": "hook_acked", "hook": "pre-drain", "node": "n1"},
          span("drain", 101, 125, node="n1"),
          span("migration", 102, 124, node="n1", vm="default/drained"),
          *_node_chain("n1", 125),
          span("migration", 500, 509, node="n1", vm="default/later")]
    cp = report.critical_path(tl)
    assert cp["evacuations"]["n1"]["migrations"] == 1
    assert cp["evacuations_s"] == 22
    assert cp["total_s"] == 22 + 320


def test_vm_shutdowns_bound_the_evacuation() -> None:
    tl = [{"t": 0, "event": "node_cordoned", "node": "n1"},
          span("migration", 0, 5, node="n1", vm="default/a"),
          span("vm_shutdown", 0, 12, node="n1", vm="default/pinned"),
          *_node_chain("n1", 12)]
    ev = report.critical_path(tl)["evacuations"]["n1"]
    assert ev["bound_s"] == 12 and ev["vm_shutdowns"] == 1


def test_suc_concurrency_shares_the_jobs() -> None:
    """SUC runs at most the Plan's ``spec.concurrency`` Jobs at once (recorded on
    ``suc_job_created``): image cleanup is then the longest Job or all of them over that many
    lanes; without a recorded concurrency, upstream's 1 (in series)."""
    tl: list[dict[str, Any]] = []
    for i, node in enumerate(("n1", "n2", "n3", "n4")):
        tl += [{"t": 100, "event": "suc_job_created", "plan": "p-image-cleanup", "node": node,
                "concurrency": 2},
               {"t": 110 + i, "event": "suc_node_applied", "plan": "p-image-cleanup",
                "node": node}]
    cp = report.critical_path(tl)
    assert cp["limits"]["image_cleanup_concurrency"] == 2
    assert cp["image_cleanup_s"] == (10 + 11 + 12 + 13) / 2
    assert cp["serial_sum"]["image_cleanup_s"] == 46
    unrecorded = [{k: v for k, v in e.items() if k != "concurrency"} for e in tl]
    assert report.critical_path(unrecorded)["image_cleanup_s"] == 46
    # preload: every node at once by default, else shared by the plan's concurrency
    pre = [span("image_preload", 0, 60, node=f"n{i}") for i in range(4)]
    assert report.critical_path(pre)["image_preload_s"] == 60
    assert report.critical_path(pre, {"image_preload_concurrency": 1})["image_preload_s"] == 240


def test_limits_come_from_the_kubevirt_controller() -> None:
    w = SimpleNamespace(controllers={"kubevirt": SimpleNamespace(
        parallel_outbound_per_node=3, parallel_migrations_per_cluster=4)})
    assert report.world_limits(w) == {"parallel_outbound_migrations_per_node": 3,
                                      "parallel_migrations_per_cluster": 4}
    assert report.world_limits(SimpleNamespace()) == report.DEFAULT_LIMITS


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
                "faults_fired", "scenario", "clock_held_s", "clock_longest_hold_s",
                "clock_holds"):
        assert key in rep, key
    assert 0 <= rep["clock_longest_hold_s"] <= rep["clock_held_s"] <= rep["wall_duration_s"]
    assert rep["scenario"] == "empty"
    assert rep["critical_path_s"] == 1090
    assert rep["critical_path_serial_sum_s"] == 1100
    assert rep["critical_path"]["limits"]["parallel_outbound_migrations_per_node"] == 2
    assert rep["api_requests"]["by_verb"] == {"get": 4}
    assert [v["kind"] for v in rep["invariant_violations"]] == ["vm_killed"]
    assert rep["node_reboots"]["per_node"] == {"n1": 1, "n2": 1}
    assert json.loads(json.dumps(rep)) == rep


def test_main_prints_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rep = {"scenario": "three-node", "speed": 60, "nodes": 3, "vms": 12,
           "simulated_duration_s": 2400.0, "wall_duration_s": 40.0,
           "clock_held_s": 1.5, "clock_longest_hold_s": 1.19, "clock_holds": 3,
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
    assert "clock held 1.50s of wall time (3 holds, longest 1.19s)" in out
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
    assert cp["per_node"] == {"n1": {"reboot": 180.0}}
    assert cp["evacuations"]["n1"]["bound_s"] == 12.0
    assert cp["serial_sum"]["per_node"] == {"n1": {"migration": 12.0, "reboot": 180.0}}
    # a real span of a kind wins over derivation
    assert report.critical_path([*tl, span("reboot", 0, 10, node="n1")])["per_node"]["n1"][
        "reboot"] == 10


def test_a_reboot_counts_from_the_installs_end() -> None:
    """The reboot service polls every 10 s for the install Job's container to have exited:
    the node's reboot counts from the install's end, not from the moment it noticed."""
    tl = [{"t": 100.0, "event": "os_installed", "node": "n1"},
          {"t": 109.0, "event": "node_reboot", "node": "n1"},
          {"t": 289.0, "event": "node_ready", "node": "n1"},
          {"t": 300.0, "event": "node_reboot", "node": "n2"},     # no install before it
          {"t": 480.0, "event": "node_ready", "node": "n2"}]
    cp = report.critical_path(tl)
    assert cp["per_node"] == {"n1": {"reboot": 189.0}, "n2": {"reboot": 180.0}}


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


def _rebuild_run(extra_replica_node: str | None = None) -> tuple[list[dict[str, Any]],
                                                                  dict[str, list[str]]]:
    """Three nodes upgraded one after the other (a 100 s reboot each); volume ``v`` has a
    replica on each. Its replica on n1 is rebuilt 50 s after n1's return, the one on n2
    30 s after n2's; each next node went down only once they were (the pre-drain wait)."""
    tl = [
        {"t": -10, "event": "node_cordoned", "node": "n1"},
        {"t": -5, "event": "replica_failed", "volume": "v", "node": "n1"},
        span("reboot", 0, 100, node="n1"),
        {"t": 110, "event": "node_cordoned", "node": "n2"},
        {"t": 150, "event": "replica_rebuilt", "volume": "v", "node": "n1"},
        {"t": 155, "event": "replica_failed", "volume": "v", "node": "n2"},
        span("reboot", 160, 260, node="n2"),
        {"t": 270, "event": "node_cordoned", "node": "n3"},
        {"t": 290, "event": "replica_rebuilt", "volume": "v", "node": "n2"},
        {"t": 295, "event": "replica_failed", "volume": "v", "node": "n3"},
        span("reboot", 300, 400, node="n3"),
    ]
    nodes = ["n1", "n2", "n3"] + ([extra_replica_node] if extra_replica_node else [])
    return tl, {"v": nodes}


def test_the_limit_waits_for_longhorn_to_rebuild_what_the_earlier_nodes_failed() -> None:
    """A node goes down only once every attached volume is healthy (Harvester's pre-drain
    ``wait_longhorn_engines``): the replicas that failed with the nodes before it are
    rebuilt, each as long after its node's return as in the run, counted in the limit's own
    schedule. n2 waits for n1's replica (50 s after n1's return at 100 s); n3 for n2's (30 s
    after n2's return, at 250 s there)."""
    tl, replicas = _rebuild_run()
    plain = report.critical_path(tl)
    assert plain["nodes_s"] == 300 and plain["longhorn_wait_s"] == 0
    cp = report.critical_path(tl, None, replicas)
    assert cp["longhorn_waits"] == {"n2": 50, "n3": 30}
    assert cp["longhorn_wait_s"] == 80
    assert cp["total_s"] == plain["total_s"] + 80
    # n2's replica never rebuilt (Longhorn replaced it, or its volume detached): nothing to
    # wait for from n2
    late = [e for e in tl if not (e["event"] == "replica_rebuilt" and e["node"] == "n2")]
    assert report.critical_path(late, None, replicas)["longhorn_waits"] == {"n2": 50}


def test_the_limit_waits_only_for_the_rebuilds_the_run_waited_for() -> None:
    # a replica on a node never upgraded does not spare the wait: every volume is to be
    # healthy, not only to have a healthy replica somewhere
    tl, replicas = _rebuild_run("n4")
    assert report.critical_path(tl, None, replicas)["longhorn_waits"] == {"n2": 50, "n3": 30}
    # a rebuild that ended after the next node went down (its volume handed to the
    # script's bypass) was not waited for: not here either
    later = tl + [{"t": 5, "event": "replica_failed", "volume": "w", "node": "n1"},
                  {"t": 500, "event": "replica_rebuilt", "volume": "w", "node": "n1"}]
    assert report.critical_path(later, None, replicas)["longhorn_waits"] == {
        "n2": 50, "n3": 30}
    # a replica that failed again before its rebuild ended (its volume detached meanwhile:
    # the script waits for running engines only) is not waited for
    again = tl + [{"t": 120, "event": "replica_failed", "volume": "v", "node": "n1"}]
    assert report.critical_path(again, None, replicas)["longhorn_waits"] == {"n3": 30}
    # a replica that did not fail with its node's upgrade (a detached volume) stays healthy
    tl, replicas = _rebuild_run()
    kept = [e for e in tl if not (e["event"] == "replica_failed" and e["node"] in ("n1", "n2"))]
    assert report.critical_path(kept, None, replicas)["longhorn_wait_s"] == 0
