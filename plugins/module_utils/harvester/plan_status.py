"""The UpgradePlan status state machine, as pure functions over a ``status`` dict.

Each transition changes ``status`` in place and returns the Events the toolkit would emit,
as :class:`EventSpec` values; :mod:`plan_writer` persists the status (conflict-safe) and
records the Events. Conditions follow reference §A.1:

* ``Progressing``: True with reason = current phase while running; False/``Succeeded``
  ("UpgradePlan has completed") or False/``Failed`` (the failure message) at the end.
* ``Degraded``: False/``ReconcileSuccess`` normally, True/``ReconcileError`` on an error.
* ``Available``: True/``Executable`` from Initialize, False/``Executed`` ("Entered one of the
  terminal phases") at the end.

``lastTransitionTime`` changes only when a condition's status changes, as
``meta.SetStatusCondition`` does. Unit-tested in ``tests/unit/test_plan_status.py``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_states,
    phases,
)

COND_AVAILABLE = "Available"
COND_PROGRESSING = "Progressing"
COND_DEGRADED = "Degraded"
MSG_COMPLETED = "UpgradePlan has completed"
MSG_TERMINAL = "Entered one of the terminal phases"


@dataclass(frozen=True)
class EventSpec:
    """An Event to record on the plan: ``type`` is ``Normal`` or ``Warning``."""

    type: str
    reason: str
    message: str
    namespace: str = c.EVENT_NS


def now_iso() -> str:
    """Current UTC time as Kubernetes writes it (``2026-03-13T03:57:09Z``)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(status: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def condition_true(obj_status: dict[str, Any] | None, ctype: str) -> bool:
    cond = find_condition(obj_status or {}, ctype)
    return bool(cond) and str(cond.get("status")) == "True"


def set_condition(status: dict[str, Any], ctype: str, cstatus: str, reason: str,
                  message: str, now: str, generation: int | None) -> None:
    """Set one condition like ``meta.SetStatusCondition`` (new ones are appended)."""
    conds: list[dict[str, Any]] = status.setdefault("conditions", [])
    cond = find_condition(status, ctype)
    if cond is None:
        cond = {"type": ctype, "lastTransitionTime": now}
        conds.append(cond)
    elif cond.get("status") != cstatus:
        cond["lastTransitionTime"] = now
    cond.update({"status": cstatus, "reason": reason, "message": message})
    if generation is not None:
        cond["observedGeneration"] = generation


def is_active(plan: dict[str, Any]) -> bool:
    """The toolkit's "active plan" marker: ``Progressing=True``."""
    return condition_true(plan.get("status"), COND_PROGRESSING)


def set_phase(status: dict[str, Any], value: str, now: str) -> bool:
    """Set ``currentPhase`` and append a ``phaseTransitionTimestamps`` entry if it changed."""
    if status.get("currentPhase") == value:
        return False
    status["currentPhase"] = value
    status.setdefault("phaseTransitionTimestamps", []).append(
        {"phase": value, "phaseTransitionTimestamp": now})
    return True


def _progress(status: dict[str, Any], message: str, now: str, gen: int | None) -> None:
    set_condition(status, COND_PROGRESSING, "True", status["currentPhase"], message, now, gen)


def _reconcile_ok(status: dict[str, Any], now: str, gen: int | None) -> None:
    set_condition(status, COND_DEGRADED, "False", "ReconcileSuccess", "", now, gen)


def initialize(status: dict[str, Any], now: str, gen: int | None) -> list[EventSpec]:
    """A new plan enters ``Initializing``: Progressing, Degraded, Available (that order)."""
    set_phase(status, phases.PHASES[0].active, now)
    _progress(status, "", now, gen)
    _reconcile_ok(status, now, gen)
    set_condition(status, COND_AVAILABLE, "True", "Executable", "", now, gen)
    return []


def start_phase(status: dict[str, Any], phase: phases.Phase, now: str, gen: int | None,
                message: str = "") -> list[EventSpec]:
    """Enter ``phase`` (its active value); ``PhaseTransition`` except for Initialize."""
    if phase.index == 0:
        return initialize(status, now, gen)
    changed = set_phase(status, phase.active, now)
    _progress(status, message, now, gen)
    _reconcile_ok(status, now, gen)
    if not changed:
        return []
    return [EventSpec("Normal", c.REASON_PHASE_TRANSITION, f"Entering phase {phase.name}")]


def progress(status: dict[str, Any], message: str, now: str, gen: int | None) -> list[EventSpec]:
    """Update the Progressing message of the running phase (e.g. what is awaited)."""
    _progress(status, message, now, gen)
    return []


def complete_phase(status: dict[str, Any], phase: phases.Phase, now: str,
                   gen: int | None) -> list[EventSpec]:
    """Mark ``phase`` completed; ``PhaseCompleted`` except for Initialize."""
    changed = set_phase(status, phase.completed, now)
    _progress(status, "", now, gen)
    _reconcile_ok(status, now, gen)
    if not changed or phase.index == 0:
        return []
    return [EventSpec("Normal", c.REASON_PHASE_COMPLETED, f"Completed phase {phase.name}")]


def degrade(status: dict[str, Any], error: str, now: str, gen: int | None) -> list[EventSpec]:
    """A step hit an error that a re-run may cure: Degraded=True + ``ReconcileError``."""
    set_condition(status, COND_DEGRADED, "True", "ReconcileError", error, now, gen)
    return [EventSpec("Warning", c.REASON_RECONCILE_ERROR, f"Pipeline error: {error}")]


def fail(status: dict[str, Any], message: str, now: str, gen: int | None) -> list[EventSpec]:
    """Terminal failure: ``Failed`` with the cause in Progressing and ``UpgradeFailed``."""
    if status.get("currentPhase") == phases.FAILED:
        return []
    set_phase(status, phases.FAILED, now)
    set_condition(status, COND_PROGRESSING, "False", "Failed", message, now, gen)
    _reconcile_ok(status, now, gen)
    set_condition(status, COND_AVAILABLE, "False", "Executed", MSG_TERMINAL, now, gen)
    return [EventSpec("Warning", c.REASON_UPGRADE_FAILED, f"Upgrade failed: {message}")]


def succeed(status: dict[str, Any], now: str, gen: int | None) -> list[EventSpec]:
    """Terminal success after Finalize: ``Succeeded`` and ``UpgradeSucceeded``."""
    if status.get("currentPhase") == phases.SUCCEEDED:
        return []
    set_phase(status, phases.SUCCEEDED, now)
    set_condition(status, COND_PROGRESSING, "False", "Succeeded", MSG_COMPLETED, now, gen)
    _reconcile_ok(status, now, gen)
    set_condition(status, COND_AVAILABLE, "False", "Executed", MSG_TERMINAL, now, gen)
    return [EventSpec("Normal", c.REASON_UPGRADE_SUCCEEDED, "Upgrade completed successfully")]


def set_node_states(status: dict[str, Any], states: dict[str, str | tuple[str, str, str]]
                    ) -> bool:
    """Apply ``{node: state}`` or ``{node: (state, reason, message)}`` forward-only."""
    statuses: dict[str, Any] = status.setdefault("nodeUpgradeStatuses", {})
    changed = False
    for node, value in sorted(states.items()):
        state, reason, message = (value, "", "") if isinstance(value, str) else value
        changed |= node_states.set_state(statuses, node, state, reason, message)
    if not statuses:
        status.pop("nodeUpgradeStatuses", None)
    return changed


def failure_message(plan: dict[str, Any]) -> str:
    cond = find_condition(plan.get("status") or {}, COND_PROGRESSING) or {}
    return str(cond.get("message") or "")
