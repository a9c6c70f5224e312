"""Action plugin for harvester.upgrade.node_cycle: the paused-node wait and the step lines.

The serial node play used to spend seven tasks per node around this module (a debug task for
its step lines, and a block holding a paused node: say it is paused, wait, run the cycle
again, print its lines). Each task, even a skipped one, costs the controller a worker fork and
a variable computation for the host (docs/performance.md), so this action does that work
inside the one task:

1. it runs the module with ``pause_timeout: 0``, so a node listed in ``pauseNodes`` returns at
   once (recorded ``UpgradePaused``, nothing else done);
2. if it is paused, it says which node is paused and how to resume it; if the task allows a
   wait (``pause_timeout`` > 0) it runs the module again with that ``pause_timeout``: the
   module waits for the release and upgrades the node, or returns ``paused: true`` again;
3. it prints ``node cycle of <node>:`` and one line per step, also when the module failed.

The task's result is the last module result; its ``summary`` holds the lines of every call.
The module runs inside the task's worker where that is the same thing (see
``plugin_utils/in_process.py``).
"""

from __future__ import annotations

from typing import Any

from ansible.utils.display import Display

from ansible_collections.harvester.upgrade.plugins.plugin_utils import in_process

display = Display()


def paused_message(node: str, plan: str, timeout: int) -> str:
    return (f"Node {node} is paused (UpgradePaused): it is listed in "
            f"spec.nodeUpgradeOption.pauseNodes of UpgradePlan {plan}. Resume it by removing "
            f"it from that list, e.g. kubectl edit upgradeplan {plan}. Waiting up to "
            f"{timeout}s; after that this run ends cleanly and a later run of the same "
            f"playbook resumes.")


class ActionModule(in_process.ModuleAction):
    """Run node_cycle, hold a paused node, print the step lines."""

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        args = dict(self._task.args)
        try:
            wait = int(args.get("pause_timeout") or 0)
        except (TypeError, ValueError):
            wait = 0   # the module reports the bad value
        node = str(args.get("node") or "")
        summary: list[str] = []
        res = self._cycle(dict(args, pause_timeout=0) if wait > 0 else args, task_vars,
                          summary)
        if res.get("paused") and not res.get("failed") and not self._task.check_mode:
            display.display(paused_message(node, str(res.get("plan") or ""), wait))
            if wait > 0:
                res = self._cycle(args, task_vars, summary, after_pause=True)
        result.update(res)
        result["summary"] = summary
        return result

    def _cycle(self, args: dict[str, Any], task_vars: dict[str, Any] | None,
               summary: list[str], after_pause: bool = False) -> dict[str, Any]:
        res = self._module(args, task_vars)
        lines = [str(x) for x in res.get("summary") or []]
        if lines:
            what = "after the pause " if after_pause else ""
            display.display(f"node cycle {what}of {args.get('node')}:\n"
                            + "\n".join(f"  {line}" for line in lines))
            summary.extend(lines)
        return res
