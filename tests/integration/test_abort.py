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


FINALIZER = "harvester-upgrade.harvesterhci.io/cleanup"


def _kubectl(sim: Any, *args: str) -> str:
    import os
    import subprocess
    proc = subprocess.run(["kubectl", *args], env={**os.environ, **sim.env},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _plans(sim: Any) -> list[dict[str, Any]]:
    return list(sim.world.client.list(PLAN_API, "UpgradePlan"))


def _gone(sim: Any, name: str, timeout: float = 10.0) -> bool:
    """The plan and what it owns are gone (the garbage collector may take a moment)."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not [p for p in _plans(sim) if p["metadata"]["name"] == name] and \
                _owned(sim, name) == []:
            return True
        time.sleep(0.1)
    return False


def test_deleting_the_plan_runs_the_toolkits_finalizer_cleanup(
        simulator: Any, playbook: Any) -> None:
    """``kubectl delete upgradeplan``: the collection's finalizer keeps the plan Terminating
    until the next run does the toolkit's cleanup (refused mid cluster upgrade, as the toolkit
    refuses it; abort.yml with force then cleans up); the plan and what it owns then go."""
    sim = simulator("three-node", speed=200)
    res = playbook(sim, "upgrade.yml", tags="preflight,iso_download,repo_create", timeout=600)
    assert res.rc == 0, str(res)
    plan = _plan(sim)
    name = plan["metadata"]["name"]
    assert FINALIZER in plan["metadata"]["finalizers"]
    owned = _owned(sim, name)
    assert owned

    # 1. deleted in ClusterUpgrading: refused like the toolkit, the plan stays Terminating
    c = sim.world.client
    plan["status"]["currentPhase"] = "ClusterUpgrading"
    c.update_status(plan)
    _kubectl(sim, "delete", "upgradeplan", name, "--wait=false")
    plan = _plan(sim)
    assert plan["metadata"].get("deletionTimestamp") and _owned(sim, name) == owned
    refused = playbook(sim, "upgrade.yml", timeout=300)
    assert refused.rc != 0, refused
    flat = " ".join(refused.output.split())
    assert f"UpgradePlan {name} was deleted while the cluster is being upgraded" in flat \
        and "upgrade_abort_force=true" in flat, refused
    assert _plans(sim) and _owned(sim, name) == owned

    # 2. abort.yml with force: the cleanup runs, the finalizer goes, so does the plan
    done = playbook(sim, "playbooks/abort.yml", extra_vars={"upgrade_abort_force": True},
                    timeout=300)
    assert done.rc == 0, done
    assert f"removed finalizer {FINALIZER}" in done.output, done
    assert _gone(sim, name), (_plans(sim), _owned(sim, name))

    # 3. a new plan, deleted between phases: the next upgrade.yml run does the cleanup and
    # stops there (creates nothing new)
    res = playbook(sim, "upgrade.yml", tags="preflight,iso_download,repo_create", timeout=600)
    assert res.rc == 0, str(res)
    second = _plan(sim)["metadata"]["name"]
    assert second != name and _owned(sim, second)
    _kubectl(sim, "delete", "upgradeplan", second, "--wait=false")
    assert _plan(sim)["metadata"].get("deletionTimestamp")
    after = playbook(sim, "upgrade.yml", timeout=300)
    assert after.rc == 0, after
    flat = " ".join(after.output.split())   # the YAML callback wraps long messages
    assert f"UpgradePlan {second} was deleted: cleaned up as upgrade-toolkit" in \
        flat, str(after)
    assert _gone(sim, second), (_plans(sim), _owned(sim, second))
    assert _plans(sim) == []
