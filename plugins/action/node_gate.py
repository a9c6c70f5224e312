"""Action plugin: run the module inside the task's worker (see plugin_utils.in_process), and
say what ``step: enter``'s head start did for the first node."""

from __future__ import annotations

from typing import Any

from ansible.utils.display import Display

from ansible_collections.harvester.upgrade.plugins.plugin_utils.in_process import (
    InProcessAction,
)

display = Display()


def head_start_line(hs: dict[str, Any]) -> str:
    """``Head start: N migration(s) started off NODE, M VM(s) asked to stop ...``."""
    line = (f"Head start: {len(hs.get('started') or [])} migration(s) started off "
            f"{hs.get('next')}, {len(hs.get('stopping') or [])} VM(s) asked to stop")
    if hs.get("answered"):
        line += "; its pre-drain answered"
    if hs.get("job"):
        line += ", its OS upgrade started"
    if hs.get("why"):
        line += f" ({hs['why']})"
    return line


class ActionModule(InProcessAction):
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        hs = result.get("head_start")
        if self._task.args.get("step") == "enter" and isinstance(hs, dict) \
                and hs.get("next") is not None:
            display.display(f"    {head_start_line(hs)}")
        return result
