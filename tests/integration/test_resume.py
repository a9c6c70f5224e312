"""Resume windows found by reading the chaos runs (``scripts/chaos.py``) that are too narrow
for random kills to hit often: each test recreates the cluster state a SIGKILL at that moment
leaves behind and checks the next run continues from it without redoing or skipping work.

(The node loop's windows are unit-tested on the pure decision: ``tests/unit/test_node_order.py``
``test_restore_only_node_is_finished_whatever_rancher_does_next``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testkit import PLAN_API, install_plan_crd

pytest.importorskip("harvester_sim")

FINALIZER = "harvester-upgrade.harvesterhci.io/cleanup"

pytestmark = [pytest.mark.timeout(600)]


def test_plan_created_but_never_initialized_is_adopted(simulator: Any, playbook: Any) -> None:
    """Killed between creating the UpgradePlan and writing its first status: the re-run adopts
    that plan (no second plan, no plan left behind without a status)."""
    sim = simulator("three-node", speed=200)
    c = sim.world.client
    install_plan_crd(sim)
    left = c.create({"apiVersion": PLAN_API, "kind": "UpgradePlan",
                     "metadata": {"generateName": "hvst-upgrade-", "finalizers": [FINALIZER]},
                     "spec": {"version": "v1.6.0", "imagePreloadOption": {},
                              "nodeUpgradeOption": {}, "restoreVM": True}})
    name = left["metadata"]["name"]
    res = playbook(sim, "upgrade.yml", tags="preflight,iso_download", timeout=300)
    assert res.rc == 0, str(res)
    plans = list(c.list(PLAN_API, "UpgradePlan"))
    assert [p["metadata"]["name"] for p in plans] == [name], [p["metadata"] for p in plans]
    st = plans[0].get("status") or {}
    assert st.get("currentPhase") == "ISODownloaded", st
    assert f"initialized UpgradePlan {name}" in res.output, str(res)


def test_a_cluster_where_another_one_was_before_is_discovered_afresh(
        playbook: Any, tmp_path: Path) -> None:
    """kubernetes.core caches discovery in $TMPDIR keyed by server address and OS user: a
    cluster on an address an earlier one used (a tunnel, a recreated cluster; here a simulator
    on a reused port) read the earlier one's discovery, UpgradePlans looked served and
    creating the plan failed with 404 in Initialize. upgrade_plan ensure re-reads discovery
    first."""
    import socket

    from harvester_sim import testing
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shared = {"TMPDIR": str(tmp_path)}   # one discovery cache for both, as outside the tests
    for attempt in ("first", "second"):
        with testing.running("three-node", speed=200, port=port) as sim:
            res = playbook(sim, "upgrade.yml", tags="preflight", env=shared, timeout=300,
                           extra_vars={"preflight_what_if": False})
            assert res.rc == 0, f"{attempt} cluster on port {port}\n{res}"
            assert len(list(sim.world.client.list(PLAN_API, "UpgradePlan"))) == 1
