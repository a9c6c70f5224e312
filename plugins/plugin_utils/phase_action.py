"""Controller side of the phase modules: one line at start and end, progress while waiting.

A phase module waits in slices of ``progress_interval`` seconds and returns
``status: pending`` with a progress line when a slice ends; this action calls it again
(with the same absolute ``deadline``) until the phase completes, fails or is not to be run,
printing each progress line. Modules stay usable without it (then they block until done).
The module runs inside the task's worker where that is the same thing (see
:mod:`in_process`).
"""

from __future__ import annotations

import time
from typing import Any

from ansible.utils.display import Display

from ansible_collections.harvester.upgrade.plugins.plugin_utils import in_process

display = Display()


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class PhaseAction(in_process.ModuleAction):
    """Loop a phase module until it stops answering ``pending``."""

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        args = dict(self._task.args)
        timeout = int(args.get("timeout") or 3600)
        args.setdefault("progress_interval", 30)
        args["deadline"] = time.time() + timeout
        label = self._task.action.rsplit(".", 1)[-1]
        started = time.time()
        announced = False
        while True:
            res = self._module(args, task_vars)
            phase = res.get("phase") or label
            plan = res.get("plan")
            if not announced and res.get("status") in ("pending", "completed") \
                    and not res.get("failed"):
                display.display(f"==> {phase}: started" + (f" (plan {plan})" if plan else ""))
                announced = True
            if res.get("status") == "pending" and not res.get("failed") \
                    and not self._task.check_mode:
                display.display(f"    {phase}: {res.get('progress') or 'waiting'} "
                                f"[{_duration(time.time() - started)}]")
                continue
            break
        took = _duration(time.time() - started)
        for check in res.get("checks") or []:   # preflight: one line per check
            if isinstance(check, dict):
                display.display(f"    {check.get('status')} | {check.get('name')} | "
                                f"{check.get('message')}")
        if res.get("failed"):
            display.display(f"<== {phase}: FAILED after {took}: {res.get('msg')}",
                            color="red")
        elif res.get("status") == "completed":
            display.display(f"<== {phase}: completed in {took}: {res.get('msg')}")
        elif res.get("status") == "no_plan" and self._task.check_mode:
            display.display(f"--- {phase}: {res.get('msg')}")
        elif res.get("status") in ("not_reached", "no_plan"):
            display.warning(str(res.get("msg")))
        else:
            display.display(f"--- {phase}: {res.get('msg')}")
        result.update(res)
        return result
