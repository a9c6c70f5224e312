"""The node step order is written once (module_utils/harvester/node_step_order.py): the steps
mode's task files call the table's modules in the table's order, and node_cycle runs exactly
the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_cycle,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_step_order as order,
)

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "roles" / "node_upgrade" / "tasks"
ALL = (*order.GATE, *order.MULTI_NODE, *order.SINGLE_NODE)
PREFIX = "harvester.upgrade."


def _selecting(module: str) -> list[str]:
    """The options that select what ``module`` does, as the table uses them."""
    return sorted({k for s in ALL if s.module == module for k in s.args})


def _module_tasks(file: str) -> list[dict[str, Any]]:
    """The collection's module calls of a task file, in order: module, the selecting options,
    the task's ``when``; a task repeated with the same selection (the pause check, then the
    wait for the release) counts once."""
    out: list[dict[str, Any]] = []
    for task in yaml.safe_load((TASKS / file).read_text()):
        key = next((k for k in task if k.startswith(PREFIX)), None)
        if key is None:
            continue
        module = key[len(PREFIX):]
        args = task[key] or {}
        entry = {"module": module, "args": {k: args.get(k) for k in _selecting(module)},
                 "when": task.get("when")}
        if out and {**out[-1], "when": None} == {**entry, "when": None}:
            continue
        out.append(entry)
    return out


@pytest.mark.parametrize(("file", "steps"), [
    ("main.yml", order.GATE),
    ("multi_node.yml", order.MULTI_NODE),
    ("single_node.yml", order.SINGLE_NODE),
])
def test_role_follows_the_table(file: str, steps: tuple[order.Step, ...]) -> None:
    tasks = _module_tasks(file)
    want = [{"module": s.module, "args": {k: s.args.get(k) for k in _selecting(s.module)}}
            for s in steps]
    assert [{"module": t["module"], "args": t["args"]} for t in tasks] == want
    if file == "main.yml":
        return
    for step, task in zip(steps, tasks):
        # the only condition of the node path: evacuation skipped past pre-drain (resume)
        assert bool(task["when"]) == step.resume_skip, step.name
        if step.resume_skip:
            assert "passed" in str(task["when"]), step.name


def test_table_modules_exist() -> None:
    for step in ALL:
        assert (ROOT / "plugins" / "modules" / f"{step.module}.py").is_file(), step.module


def test_every_step_has_one_runner() -> None:
    assert set(node_cycle.RUNNERS) == {s.name for s in ALL}


class _Kube:
    check_mode = False

    scoped: list[Any] = []

    def prefetch(self, wait: bool = True, scoped: Any = ()) -> None:
        # the cycle's node-scoped sets: the VMIs labelled as on its node
        self.scoped = list(scoped)


class _Writer:
    plan: dict[str, Any] = {"spec": {}}

    def node_state(self, node: str) -> str | None:
        return None


def _record(monkeypatch: pytest.MonkeyPatch, passed: bool = False) -> list[str]:
    """Replace every runner by one that records its step (the pre-drain await says
    ``passed`` as a resumed node's would)."""
    ran: list[str] = []

    def runner(kube: Any, writer: Any, p: Any, cycle: Any, result: dict[str, Any],
               step: order.Step) -> bool:
        ran.append(step.name)
        if step.name == "await pre-drain":
            result["passed"] = passed
        return False

    monkeypatch.setattr(node_cycle, "RUNNERS", {s.name: runner for s in ALL})
    return ran


@pytest.mark.parametrize("single", [False, True])
def test_cycle_runs_the_table_in_order(monkeypatch: pytest.MonkeyPatch, single: bool) -> None:
    ran = _record(monkeypatch)
    cycle = node_cycle.Cycle("n1")
    params = node_cycle.Params("n1", single_node=single)
    kube = _Kube()
    node_cycle.run_cycle(kube, _Writer(), params, cycle)  # type: ignore[arg-type]
    assert ran == [s.name for s in (*order.GATE, *order.path(single))]
    assert kube.scoped == [("kubevirt.io/v1", "VirtualMachineInstance", None,
                            f"kubevirt.io/nodeName={params.node}")]
    assert cycle.steps == []


def test_cycle_skips_evacuation_past_pre_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _record(monkeypatch, passed=True)
    cycle = node_cycle.Cycle("n1")
    params = node_cycle.Params("n1")
    node_cycle.run_cycle(_Kube(), _Writer(), params, cycle)  # type: ignore[arg-type]
    assert "evacuate" not in ran
    assert [(s["step"], s["status"]) for s in cycle.steps] == [("evacuate", "skipped")]


def test_cycle_stops_where_a_gate_step_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def runner(kube: Any, writer: Any, p: Any, cycle: Any, result: dict[str, Any],
               step: order.Step) -> bool:
        ran.append(step.name)
        return step.name == "gate"

    monkeypatch.setattr(node_cycle, "RUNNERS", {s.name: runner for s in ALL})
    node_cycle.run_cycle(_Kube(), _Writer(), node_cycle.Params("n1"),  # type: ignore[arg-type]
                         node_cycle.Cycle("n1"))
    assert ran == ["gate"]
