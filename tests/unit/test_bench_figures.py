"""``make bench``'s keyed figures (benchmarks/run_all.py): issue 25's keys for the 100- and
200-node runs, and the acceptance targets printed with MISS."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_all() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        yield importlib.import_module("run_all")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _run(scenario: str, nodes: int, ok: bool = True, **kw: Any) -> dict[str, Any]:
    run = {"scenario": scenario, "speed": 300.0, "nodes": nodes, "ok": ok,
           "plan_phase": "Succeeded" if ok else "NodeUpgrading", "wall_s": 100.0,
           "overhead_ratio": 1.05 if ok else None, "overhead_ratio_serial_sum": 0.95,
           "critical_path_wall_s": 95.0, "_hook_samples": {"set_to_action": [0.1]},
           "api_requests_per_node": 120.0, "api_requests_per_node_by_verb": {"get": 120.0},
           "controller_cpu_s_per_node": 1.2, "controller_peak_rss_mb": 300.0,
           "sim_peak_rss_mb": 1000.0, "sim_cpu_s": 500.0, "invariant_violations": 0,
           "migrations": {"ratio": 1.0, "total": 10, "lower_bound": 10,
                          "mechanism": "harvester-migrate-action"}}
    run.update(kw)
    return run


def test_big_runs_have_their_keys(run_all: Any) -> None:
    runs = {"three-node@node": _run("three-node", 3),
            "hundred-node@node": _run("hundred-node", 100, overhead_ratio=1.3),
            "two-hundred-node@node": _run("two-hundred-node", 200, ok=False,
                                          sim_peak_rss_mb=2100.0, sim_cpu_s=1800.0)}
    k = run_all.keyed(runs, "node")
    assert k["overhead_ratio_100node"] == 1.3
    assert k["overhead_ratio_200node"] is None                  # not Succeeded
    assert k["two_hundred_node_wall_s"] is None
    assert k["hundred_node_wall_s"] == 100.0
    # the simulator's cost is recorded whatever the outcome: its growth is the point
    assert k["sim_peak_rss_mb_200node"] == 2100.0 and k["sim_cpu_s_200node"] == 1800.0
    assert k["sim_peak_rss_mb_100node"] == 1000.0
    assert k["controller_cpu_s_per_node_100node"] == 1.2
    assert k["controller_cpu_s_per_node_200node"] is None
    assert set(k["api_requests_per_node"]) == {"3", "100", "200"}
    assert k["overhead_ratio_serial_sum"]["3"] == 0.95
    # the earlier keys stay
    for key in ("overhead_ratio_3node", "overhead_ratio_20node", "hook_reaction_p95_s",
                "controller_cpu_s_per_node", "controller_peak_rss_mb"):
        assert key in k, key


def test_the_table_marks_issue_25s_targets(run_all: Any) -> None:
    runs = {"three-node@node": _run("three-node", 3),
            "two-hundred-node@node": _run("two-hundred-node", 200, overhead_ratio=1.2,
                                          wall_s=1000.0, sim_peak_rss_mb=3000.0)}
    latest = {"node_upgrade_mode": "node", "hook_reaction_p50_s": 0.1,
              "hook_reaction_p95_s": 0.1, "invariant_violations": 0,
              "sim_scale": {"two-hundred-node": {"peak_rss_mb": 900.0, "ready_s": 40.0,
                                                 "ready_cpu_s": 35.0, "rss_mb": 850.0}}}
    out = run_all.table(latest, runs, "three-node@node")
    lines = {ln.split("  ")[0]: ln for ln in out.splitlines()}
    assert "<= 1.15 MISS" in lines["1 overhead two-hundred-node@node"]   # 1.2 > 1.15
    assert "<= 1.1 ok" in lines["1 overhead three-node@node"]
    assert "<= 900 s MISS" in lines["6 two-hundred-node wall"]
    assert "RSS <= 2560 MB MISS" in lines["6 simulator cost, two-hundred-node"]
    assert "boot 40.00 s" in lines["6 simulator cost, two-hundred-node"]
