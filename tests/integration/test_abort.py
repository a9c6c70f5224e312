"""Abort (playbooks/abort.yml, upgrade.yml -e upgrade_abort=true) with upgrade-toolkit's rules:
refused in ClusterUpgrading/NodeUpgrading unless forced; otherwise the plan's objects are
cleaned up and the plan ends Failed with reason Aborted."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("harvester_sim")

PLAN_API = "management.harvesterhci.io/v1beta1"
LABEL = "management.harvesterhci.io/upgrade-plan"

pytestmark = [pytest.mark.timeout(900)]


def _plan(sim: Any) -> dict[str, Any]:
    plans = list(sim.world.client.list(PLAN_API, "UpgradePlan"))
    assert len(plans) == 1
    return plans[0]


def _owned(sim: Any, plan: str) -> list[str]:
    c = sim.world.client
    out = []
    for av, kind, ns in [("apps/v1", "Deployment", "harvester-system"),
                         ("v1", "Service", "harvester-system"),
                         ("harvesterhci.io/v1beta1", "VirtualMachineImage", "harvester-system"),
                         ("upgrade.cattle.io/v1", "Plan", "cattle-system")]:
        out += [f"{kind}/{o['metadata']['name']}" for o in c.list(av, kind, ns)
                if (o["metadata"].get("labels") or {}).get(LABEL) == plan]
    return out


def test_abort_refused_mid_cluster_upgrade_then_forced_and_cleaned(
        simulator: Any, playbook: Any) -> None:
    sim = simulator("three-node", speed=200)
    res = playbook(sim, "upgrade.yml", tags="preflight,iso_download,repo_create", timeout=600)
    assert res.rc == 0, str(res)
    name = _plan(sim)["metadata"]["name"]
    assert _owned(sim, name), "the repo and the ISO image should exist before the abort"
    c = sim.world.client
    plan = _plan(sim)
    plan["status"]["currentPhase"] = "ClusterUpgrading"
    c.update_status(plan)

    refused = playbook(sim, "upgrade.yml", extra_vars={"upgrade_abort": True}, timeout=300)
    assert refused.rc != 0, refused
    assert "ClusterUpgrading" in refused.output and "upgrade_abort_force" in refused.output
    assert _plan(sim)["status"]["currentPhase"] == "ClusterUpgrading"
    assert _owned(sim, name)

    done = playbook(sim, "playbooks/abort.yml", extra_vars={"upgrade_abort_force": True,
                                                            "upgrade_abort_reason": "test"},
                    timeout=300)
    assert done.rc == 0, done
    plan = _plan(sim)
    assert plan["status"]["currentPhase"] == "Failed"
    cond = next(x for x in plan["status"]["conditions"] if x["type"] == "Progressing")
    assert cond["reason"] == "Aborted" and "test" in cond["message"]
    assert _owned(sim, name) == []
    again = playbook(sim, "playbooks/abort.yml", timeout=300)   # idempotent
    assert again.rc == 0, again
