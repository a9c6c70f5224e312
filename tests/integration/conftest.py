"""Fixtures for end-to-end runs of the playbooks against the simulator.

``simulator(scenario, speed=..., **kw)`` starts an in-process ``harvester-sim`` (API server +
controllers) and stops it at the end of the test; ``playbook(sim, ...)`` is
``testkit.run_playbook``: ``ansible-playbook`` from the repo root against it exactly as a user
would run it (only the kubeconfig differs), returning the exit code and the output.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from testkit import PlaybookResult, run_playbook


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
