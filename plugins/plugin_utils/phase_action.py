"""Controller side of the phase modules: call the module again while it answers ``pending``.

A phase module waits in slices of ``progress_interval`` seconds and returns
``status: pending`` with a progress line when a slice ends; this action calls it again
(with the same absolute ``deadline``) until the phase completes, fails or is not to be run.
While it loops it prints the phase's start and each progress line (no callback event exists
before the task ends); how the phase ended is printed by the ``harvester_progress`` callback
from the result (``status_lines.phase_outcome``). Modules stay usable without it (then they
block until done). The module runs inside the task's worker where that is the same thing
(see :mod:`in_process`).
"""

from __future__ import annotations

import time
from typing import Any

from ansible.utils.display import Display

from ansible_collections.harvester.upgrade.plugins.plugin_utils import in_process, status_lines

display = Display()


class PhaseAction(in_process.ModuleAction):
    """Loop a phase module until it stops answering ``pending``."""

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        return self._phase(result, dict(self._task.args), task_vars)

    def _phase(self, result: dict[str, Any], args: dict[str, Any],
               task_vars: dict[str, Any] | None) -> dict[str, Any]:
        """Call the module with ``args`` until it stops answering ``pending``; its last
        result, on top of ``result``."""
        timeout = int(args.get("timeout") or 3600)
        args.setdefault("progress_interval", 30)
        args["deadline"] = time.time() + timeout
        label = self._task.action.rsplit(".", 1)[-1]
        started = time.time()
        announced = False
        while True:
            res = self._module(args, task_vars)
            phase = res.get("phase") or label
            if not announced and res.get("status") in ("pending", "completed") \
                    and not res.get("failed"):
                status_lines.show(display, [status_lines.phase_started(phase, res.get("plan"))])
                announced = True
            if res.get("status") == "pending" and not res.get("failed") \
                    and not self._task.check_mode:
                status_lines.show(display, [status_lines.phase_progress(
                    phase, res.get("progress"), time.time() - started)])
                continue
            break
        result.update(res)
        return result
