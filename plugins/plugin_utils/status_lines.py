"""The lines the collection prints about its own tasks, made from their module results.

One printer: the ``harvester_progress`` callback prints, for every finished task of a
harvester.upgrade module, the lines :func:`outcome` makes of its result (a phase's preflight
checks and how it ended, the node cycle's steps, the settings ``node_gate`` held, the plan
``upgrade_plan`` created). The action plugins print nothing about a result; they print only
while their task is still running, because no callback event exists before a task ends: a
phase module's start and each progress slice (:func:`phase_started`, :func:`phase_progress`)
and a paused node before its wait (:func:`node_cycle_steps`, :func:`paused_message`). Their
texts are made here too, so every status line's wording is in this file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_head_start import (
    head_start_text,
)

# the modules whose action loops them over progress slices (plugin_utils/phase_action.py)
PHASE_MODULES = ("preflight", "iso_download", "repo_create", "metadata_populate",
                 "image_preload", "cluster_upgrade", "image_cleanup", "finalize")


@dataclass(frozen=True)
class Line:
    """One display call: ``text`` (may hold several lines), its colour, or a warning."""

    text: str
    color: str | None = None
    warning: bool = False


def show(display: Any, lines: Sequence[Line]) -> None:
    """Print ``lines`` with an ansible ``Display``."""
    for line in lines:
        if line.warning:
            display.warning(line.text)
        else:
            display.display(line.text, color=line.color)


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# -- phase modules ---------------------------------------------------------------------------
def phase_started(phase: str, plan: Any) -> Line:
    return Line(f"==> {phase}: started" + (f" (plan {plan})" if plan else ""))


def phase_progress(phase: str, progress: Any, seconds: float) -> Line:
    return Line(f"    {phase}: {progress or 'waiting'} [{duration(seconds)}]")


def phase_outcome(res: dict[str, Any], label: str, check_mode: bool, seconds: float
                  ) -> list[Line]:
    """How the phase ended: one line per preflight check, then the closing line."""
    phase = res.get("phase") or label
    out = [Line(f"    {check.get('status')} | {check.get('name')} | {check.get('message')}")
           for check in res.get("checks") or [] if isinstance(check, dict)]
    took = duration(seconds)
    status = res.get("status")
    if res.get("failed"):
        out.append(Line(f"<== {phase}: FAILED after {took}: {res.get('msg')}", color="red"))
    elif status == "completed":
        out.append(Line(f"<== {phase}: completed in {took}: {res.get('msg')}"))
    elif status == "no_plan" and check_mode:
        out.append(Line(f"--- {phase}: {res.get('msg')}"))
    elif status in ("not_reached", "no_plan"):
        out.append(Line(str(res.get("msg")), warning=True))
    else:
        out.append(Line(f"--- {phase}: {res.get('msg')}"))
    # what the phase's call started after it (then): the first node's head start, when
    # ClusterUpgrade's call did it (node_gate's enter then only finds it done)
    for started in res.get("started") or []:
        hs = started.get("head_start") if isinstance(started, dict) else None
        if isinstance(hs, dict) and hs.get("next") is not None:
            out.append(Line(f"    {started.get('phase')} head start: {head_start_text(hs)}"))
    return out


# -- node_cycle ------------------------------------------------------------------------------
def paused_message(node: str, plan: str, timeout: int) -> str:
    return (f"Node {node} is paused (UpgradePaused): it is listed in "
            f"spec.nodeUpgradeOption.pauseNodes of UpgradePlan {plan}. Resume it by removing "
            f"it from that list, e.g. kubectl edit upgradeplan {plan}. Waiting up to "
            f"{timeout}s; after that this run ends cleanly and a later run of the same "
            f"playbook resumes.")


def node_cycle_steps(node: Any, lines: Sequence[str], after_pause: bool = False
                     ) -> list[Line]:
    """``node cycle of <node>:`` and one line per step of one module call."""
    if not lines:
        return []
    what = "after the pause " if after_pause else ""
    return [Line(f"node cycle {what}of {node}:\n" + "\n".join(f"  {line}" for line in lines))]


def node_cycle_outcome(args: dict[str, Any], res: dict[str, Any], check_mode: bool
                       ) -> list[Line]:
    """The step lines of the task's last module call, and the paused message when the node
    is paused and the action did not wait for it.

    The action calls the module a second time only to wait for a paused node, after printing
    the first call's steps and the paused message itself; ``summary`` then holds the lines of
    both calls, ``steps`` those of the last (its lines are one per step and a total)."""
    summary = [str(x) for x in res.get("summary") or []]
    steps = res.get("steps") or []
    last = summary[len(summary) - len(steps) - 1:] if steps else []
    waited = len(summary) > len(last)
    node = args.get("node") or res.get("node")
    out = node_cycle_steps(node, last, after_pause=waited)
    if res.get("paused") and not res.get("failed") and not check_mode and not waited:
        out.append(Line(paused_message(str(node or ""), str(res.get("plan") or ""),
                                       _int(args.get("pause_timeout")))))
    return out


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


# -- node_gate, upgrade_plan -----------------------------------------------------------------
def node_gate_outcome(args: dict[str, Any], res: dict[str, Any]) -> list[Line]:
    """What ``step: enter`` did to the cluster settings held for the roll (NodeUpgrade's
    PreRun) and what its head start did for the first node."""
    if args.get("step") != "enter":
        return []
    out = [Line(f"    NodeUpgrade PreRun: {line}") for line in res.get("settings") or []]
    hs = res.get("head_start")
    if isinstance(hs, dict) and hs.get("next") is not None:
        out.append(Line(f"    Head start: {head_start_text(hs)}"))
    return out


def upgrade_plan_outcome(args: dict[str, Any], res: dict[str, Any]) -> list[Line]:
    """Which UpgradePlan ``action: ensure`` created or adopted."""
    if args.get("action", "ensure") == "ensure" and res.get("msg") and not res.get("failed"):
        return [Line(f"    UpgradePlan: {res['msg']}")]
    return []


def outcome(module: str, args: dict[str, Any], res: dict[str, Any], check_mode: bool,
            seconds: float) -> list[Line]:
    """The lines about a finished task of ``module`` (short name) with result ``res``;
    ``args``: the module arguments the result says it ran with; ``seconds``: how long the
    task took."""
    if module in PHASE_MODULES:
        return phase_outcome(res, module, check_mode, seconds)
    if module == "node_cycle":
        return node_cycle_outcome(args, res, check_mode)
    if module == "node_gate":
        return node_gate_outcome(args, res)
    if module == "upgrade_plan":
        return upgrade_plan_outcome(args, res)
    return []
