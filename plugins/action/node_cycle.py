"""Action plugin for harvester.upgrade.node_cycle: the paused-node wait.

The serial node play used to spend seven tasks per node around this module (a debug task for
its step lines, and a block holding a paused node: say it is paused, wait, run the cycle
again, print its lines). Each task, even a skipped one, costs the controller a worker fork and
a variable computation for the host (docs/performance.md), so this action does that work
inside the one task:

1. it runs the module with ``pause_timeout: 0``, so a node listed in ``pauseNodes`` returns at
   once (recorded ``UpgradePaused``, nothing else done);
2. if it is paused and the task allows a wait (``pause_timeout`` > 0), it prints that call's
   step lines and says which node is paused and how to resume it (the task goes on: no
   callback could say it yet), then runs the module again with that ``pause_timeout``: the
   module waits for the release and upgrades the node, or returns ``paused: true`` again.

The task's result is the last module result; its ``summary`` holds the lines of every call.
The ``harvester_progress`` callback prints ``node cycle of <node>:`` and one line per step of
the last call (``status_lines.node_cycle_outcome``), also when the module failed. The module
runs inside the task's worker where that is the same thing (see
``plugin_utils/in_process.py``).
"""

from __future__ import annotations

from typing import Any

from ansible.utils.display import Display

from ansible_collections.harvester.upgrade.plugins.plugin_utils import in_process, status_lines

display = Display()


class ActionModule(in_process.ModuleAction):
    """Run node_cycle, hold a paused node."""

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        args = dict(self._task.args)
        try:
            wait = int(args.get("pause_timeout") or 0)
        except (TypeError, ValueError):
            wait = 0   # the module reports the bad value
        node = str(args.get("node") or "")
        res = self._module(dict(args, pause_timeout=0) if wait > 0 else args, task_vars)
        summary = [str(x) for x in res.get("summary") or []]
        if res.get("paused") and not res.get("failed") and not self._task.check_mode \
                and wait > 0:
            status_lines.show(display, [
                *status_lines.node_cycle_steps(node, summary),
                status_lines.Line(status_lines.paused_message(
                    node, str(res.get("plan") or ""), wait))])
            res = self._module(args, task_vars)
            summary += [str(x) for x in res.get("summary") or []]
        result.update(res)
        result["summary"] = summary
        return result
