"""Abort (playbooks/abort.yml, upgrade.yml -e upgrade_abort=true) with upgrade-toolkit's rules:
refused in ClusterUpgrading/NodeUpgrading unless forced; otherwise the plan's objects are
cleaned up and the plan ends Failed with reason Aborted."""

from __future__ import annotations

from typing import Any

import pytest

from testkit import kubectl, only_plan, owned, plans

pytest.importorskip("harvester_sim")

from harvester_sim.testing import wait_for  # noqa: E402

pytestmark = [pytest.mark.timeout(900)]


def test_abort_refused_mid_cluster_upgrade_then_forced_and_cleaned(
        simulator: Any, playbook: Any) -> None:
    sim = simulator("three-node", speed=200)
    res = playbook(sim, "upgrade.yml", tags="preflight,iso_download,repo_create", timeout=600)
    assert res.rc == 0, str(res)
    name = only_plan(sim)["metadata"]["name"]
    assert owned(sim, name), "the repo and the ISO image should exist before the abort"
    c = sim.world.client
    plan = only_plan(sim)
    plan["status"]["currentPhase"] = "ClusterUpgrading"
    c.update_status(plan)

    refused = playbook(sim, "upgrade.yml", extra_vars={"upgrade_abort": True}, timeout=300)
    assert refused.rc != 0, refused
    assert "ClusterUpgrading" in refused.output and "upgrade_abort_force" in refused.output
    assert only_plan(sim)["status"]["currentPhase"] == "ClusterUpgrading"
    assert owned(sim, name)

    done = playbook(sim, "playbooks/abort.yml", extra_vars={"upgrade_abort_force": True,
                                                            "upgrade_abort_reason": "test"},
                    timeout=300)
    assert done.rc == 0, done
    plan = only_plan(sim)
    assert plan["status"]["currentPhase"] == "Failed"
    cond = next(x for x in plan["status"]["conditions"] if x["type"] == "Progressing")
    assert cond["reason"] == "Aborted" and "test" in cond["message"]
    assert owned(sim, name) == []
    again = playbook(sim, "playbooks/abort.yml", timeout=300)   # idempotent
    assert again.rc == 0, again


FINALIZER = "harvester-upgrade.harvesterhci.io/cleanup"


def _wait_gone(sim: Any, name: str) -> None:
    """Until the plan and what it owns are gone (the garbage collector may take a moment)."""
    wait_for(lambda: not [p for p in plans(sim) if p["metadata"]["name"] == name]
             and owned(sim, name) == [],
             what=f"UpgradePlan {name} and its objects to go")


def test_deleting_the_plan_runs_the_toolkits_finalizer_cleanup(
        simulator: Any, playbook: Any) -> None:
    """``kubectl delete upgradeplan``: the collection's finalizer keeps the plan Terminating
    until the next run does the toolkit's cleanup (refused mid cluster upgrade, as the toolkit
    refuses it; abort.yml with force then cleans up); the plan and what it owns then go."""
    sim = simulator("three-node", speed=200)
    res = playbook(sim, "upgrade.yml", tags="preflight,iso_download,repo_create", timeout=600)
    assert res.rc == 0, str(res)
    plan = only_plan(sim)
    name = plan["metadata"]["name"]
    assert FINALIZER in plan["metadata"]["finalizers"]
    objects = owned(sim, name)
    assert objects

    # 1. deleted in ClusterUpgrading: refused like the toolkit, the plan stays Terminating
    c = sim.world.client
    plan["status"]["currentPhase"] = "ClusterUpgrading"
    c.update_status(plan)
    kubectl(sim, "delete", "upgradeplan", name, "--wait=false", check=True)
    plan = only_plan(sim)
    assert plan["metadata"].get("deletionTimestamp") and owned(sim, name) == objects
    refused = playbook(sim, "upgrade.yml", timeout=300)
    assert refused.rc != 0, refused
    flat = " ".join(refused.output.split())
    assert f"UpgradePlan {name} was deleted while the cluster is being upgraded" in flat \
        and "upgrade_abort_force=true" in flat, refused
    assert plans(sim) and owned(sim, name) == objects

    # 2. abort.yml with force: the cleanup runs, the finalizer goes, so does the plan
    done = playbook(sim, "playbooks/abort.yml", extra_vars={"upgrade_abort_force": True},
                    timeout=300)
    assert done.rc == 0, done
    assert f"removed finalizer {FINALIZER}" in done.output, done
    _wait_gone(sim, name)

    # 3. a new plan, deleted between phases: the next upgrade.yml run does the cleanup and
    # stops there (creates nothing new)
    res = playbook(sim, "upgrade.yml", tags="preflight,iso_download,repo_create", timeout=600)
    assert res.rc == 0, str(res)
    second = only_plan(sim)["metadata"]["name"]
    assert second != name and owned(sim, second)
    kubectl(sim, "delete", "upgradeplan", second, "--wait=false", check=True)
    assert only_plan(sim)["metadata"].get("deletionTimestamp")
    after = playbook(sim, "upgrade.yml", timeout=300)
    assert after.rc == 0, after
    flat = " ".join(after.output.split())   # the YAML callback wraps long messages
    assert f"UpgradePlan {second} was deleted: cleaned up as upgrade-toolkit" in \
        flat, str(after)
    _wait_gone(sim, second)
    assert plans(sim) == []
