"""Action plugin: run the module inside the task's worker (see plugin_utils.in_process), and
say what ``step: enter`` did to the cluster settings held for the roll (NodeUpgrade's
PreRun) and what its head start did for the first node (in the words of the node
cycle's ``head start`` step)."""

from __future__ import annotations

from typing import Any

from ansible.utils.display import Display

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_head_start import (
    head_start_text,
)
from ansible_collections.harvester.upgrade.plugins.plugin_utils.in_process import (
    InProcessAction,
)

display = Display()


class ActionModule(InProcessAction):
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        if self._task.args.get("step") == "enter":
            for line in result.get("settings") or []:
                display.display(f"    NodeUpgrade PreRun: {line}")
        hs = result.get("head_start")
        if self._task.args.get("step") == "enter" and isinstance(hs, dict) \
                and hs.get("next") is not None:
            display.display(f"    Head start: {head_start_text(hs)}")
        return result
