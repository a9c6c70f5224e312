"""Action plugin: run the module inside the task's worker (see plugin_utils.in_process), and
say which UpgradePlan ``action: ensure`` created or adopted."""

from __future__ import annotations

from typing import Any

from ansible.utils.display import Display

from ansible_collections.harvester.upgrade.plugins.plugin_utils.in_process import (
    InProcessAction,
)

display = Display()


class ActionModule(InProcessAction):
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        if self._task.args.get("action") == "ensure" and result.get("msg") \
                and not result.get("failed"):
            display.display(f"    UpgradePlan: {result['msg']}")
        return result
