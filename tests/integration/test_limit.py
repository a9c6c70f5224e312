"""--limit: a limit that leaves out localhost is refused before anything is done.

The cluster phases, NodeUpgrade's entry and finish and the release of the upgrade lock run
on localhost; a limit to nodes alone would skip those plays silently and leave the lock held
until its lease expired, so playbooks/limit_check.yml refuses it. A limit that keeps localhost
(``--limit 'localhost,<node>'``) runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("harvester_sim")

PLAN_API = "management.harvesterhci.io/v1beta1"
LEASE = ("coordination.k8s.io/v1", "Lease", "harvester-upgrade-lock", "harvester-system")

pytestmark = [pytest.mark.timeout(900)]


def _nodes(sim: Any) -> list[str]:
    return sorted(n["metadata"]["name"] for n in sim.world.client.list("v1", "Node"))


@pytest.fixture
def nodes_inventory(tmp_path: Path) -> str:
    """The harvester.upgrade.nodes inventory (as AWX's inventory source), connecting with
    the environment's K8S_AUTH_KUBECONFIG."""
    path = tmp_path / "cluster.nodes.yml"
    path.write_text("plugin: harvester.upgrade.nodes\n")
    return str(path)


@pytest.mark.parametrize("entry", ["upgrade.yml", "playbooks/upgrade.yml",
                                   "playbooks/node_upgrade.yml", "playbooks/abort.yml"])
def test_node_only_limit_is_refused_before_anything_is_done(
        simulator: Any, playbook: Any, nodes_inventory: str, entry: str) -> None:
    sim = simulator("three-node", speed=200)
    node = _nodes(sim)[1]
    res = playbook(sim, entry, "-i", nodes_inventory, "--limit", node,
                   extra_vars={"upgrade_abort_force": True})
    assert res.rc != 0, res
    assert f"--limit 'localhost,{node}'" in " ".join(res.output.split()), res
    assert sim.world.client.try_get(*LEASE) is None
    assert sim.world.client.try_list(PLAN_API, "UpgradePlan") == []
    # nothing but the check ran: no task of any phase
    assert "harvester.upgrade." not in res.output.split("Refuse a --limit")[0], res


def test_limit_that_keeps_localhost_runs_and_releases_the_lock(
        simulator: Any, playbook: Any, nodes_inventory: str) -> None:
    """Initialize (plan created, so the lock was taken) with --limit 'localhost,<node>':
    the check lets it run and the lock is released at the end of the run."""
    sim = simulator("three-node", speed=200)
    node = _nodes(sim)[1]
    res = playbook(sim, "upgrade.yml", "-i", nodes_inventory, "--limit", f"localhost,{node}",
                   tags="preflight", extra_vars={"upgrade_what_if": False})
    assert res.rc == 0, res
    assert "leaves out localhost" not in res.output, res
    assert len(sim.world.client.try_list(PLAN_API, "UpgradePlan")) == 1
    assert sim.world.client.try_get(*LEASE) is None
