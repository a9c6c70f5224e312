"""Fixtures for end-to-end runs of the playbooks against the simulator.

``simulator(scenario, speed=..., **kw)`` starts an in-process ``harvester-sim`` (API server +
controllers) and stops it at the end of the test; ``run_playbook(sim, ...)`` runs
``ansible-playbook`` from the repo root against it exactly as a user would (only the
kubeconfig differs) and returns the exit code and the output.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# tests import the collection as ansible_collections.harvester.upgrade through the repo-root
# link (make venv); without this only some other test file's import made it resolvable
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclass
class PlaybookResult:
    rc: int
    output: str

    def __str__(self) -> str:  # shown by pytest on assertion failures
        return f"rc={self.rc}\n{self.output[-6000:]}"


def run_playbook(sim: Any, playbook: str = "upgrade.yml", *args: str,
                 extra_vars: dict[str, Any] | None = None, tags: str | None = None,
                 skip_tags: str | None = None, check: bool = False, timeout: float = 900,
                 env: dict[str, str] | None = None) -> PlaybookResult:
    import json

    cmd = [str(BIN / "ansible-playbook"), playbook, *args]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if tags:
        cmd += ["--tags", tags]
    if skip_tags:
        cmd += ["--skip-tags", skip_tags]
    if check:
        cmd.append("--check")
    full_env = dict(os.environ)
    full_env.update(sim.env)
    full_env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    full_env["PATH"] = f"{BIN}:{full_env.get('PATH', '')}"
    full_env.setdefault("ANSIBLE_FORCE_COLOR", "0")
    # kubernetes.core keeps its discovery cache in $TMPDIR/k8srcp-<sha of host+user>.json:
    # without a TMPDIR of its own, a simulator on a port an earlier one used reads that one's
    # discovery (e.g. an UpgradePlan CRD it does not have yet)
    kubeconfig = Path(str(sim.env.get("KUBECONFIG", ""))) if getattr(sim, "env", None) else None
    if kubeconfig and kubeconfig.parent.is_dir():
        tmp = kubeconfig.parent / "tmp"
        tmp.mkdir(exist_ok=True)
        full_env["TMPDIR"] = str(tmp)
    if env:
        full_env.update(env)
    proc = subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return PlaybookResult(proc.returncode, proc.stdout + proc.stderr)


@pytest.fixture
def simulator() -> Iterator[Callable[..., Any]]:
    """Factory: ``sim = simulator("three-node", speed=200)``; stopped after the test."""
    from harvester_sim import testing

    stack = contextlib.ExitStack()

    def start(scenario: str | dict[str, Any] = "three-node", **kw: Any) -> Any:
        return stack.enter_context(testing.running(scenario, **kw))

    with stack:
        yield start


@pytest.fixture
def playbook() -> Callable[..., PlaybookResult]:
    return run_playbook


@pytest.fixture(scope="session")
def playbook_runner() -> Callable[..., PlaybookResult]:
    """``run_playbook`` for module-scoped fixtures (e.g. runs shared between tests)."""
    return run_playbook


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "node_run(*names): simulator runs the test asserts on "
                            "(test_node_upgrade.py runs them on a shared pool)")
