"""Fixtures of the unit tests that run a phase module against a simulated cluster
(test_pipeline.py, test_phase_actions.py). The collection is imported as
``ansible_collections.harvester.upgrade`` (tests/conftest.py puts the repository root on
``sys.path``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from phase_child import NewPlan, Run

from testkit import PLAN_API, ROOT, install_plan_crd

CHILD = Path(__file__).with_name("phase_child.py")


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    """A simulated three-node cluster with the UpgradePlan CRD, for the test module."""
    testing = pytest.importorskip("harvester_sim.testing")
    with testing.running("three-node", speed=1000) as running:
        install_plan_crd(running)
        yield running


@pytest.fixture(scope="module")
def run(sim: Any, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``run(phase, act, verify=None, check_mode=False, **params)``: the result of a phase
    module run (phase_child.py) against ``sim``."""
    lock_dir = tmp_path_factory.mktemp("lock")

    def call(phase: str, act: str, verify: str | None = None, check_mode: bool = False,
             module: str | None = None, **params: Any) -> dict[str, Any]:
        spec = {"phase": phase, "act": act, "verify": verify, "check_mode": check_mode,
                "module": module,
                "params": {"kubeconfig": str(sim.kubeconfig), "timeout": 60,
                           "progress_interval": 30, "force": False, **params}}
        env = {**os.environ, "HARVESTER_UPGRADE_LOCK_DIR": str(lock_dir)}
        proc = subprocess.run([sys.executable, str(CHILD), json.dumps(spec)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120,
                              check=False)
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stdout + proc.stderr
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result

    return call


@pytest.fixture
def new_plan(sim: Any) -> NewPlan:
    """``new_plan(current_phase, **spec)``: an UpgradePlan (spec.version v1.6.0 unless given)
    in that phase, Progressing as a running plan is; its name."""
    def make(current: str, **spec: Any) -> str:
        ts = "2026-01-01T00:00:00Z"
        active = current not in ("Succeeded", "Failed")
        plan = sim.world.client.create({
            "apiVersion": PLAN_API, "kind": "UpgradePlan",
            "metadata": {"generateName": "hvst-upgrade-"},
            "spec": {"version": "v1.6.0", **spec},
            "status": {"currentPhase": current,
                       "phaseTransitionTimestamps": [{"phase": current,
                                                      "phaseTransitionTimestamp": ts}],
                       "conditions": [{"type": "Progressing",
                                       "status": "True" if active else "False",
                                       "reason": current, "message": "",
                                       "lastTransitionTime": ts}]}})
        return str(plan["metadata"]["name"])
    return make
