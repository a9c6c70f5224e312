"""Action plugin: run the module inside the task's worker (see plugin_utils.in_process). Which
UpgradePlan ``action: ensure`` created or adopted is printed by the harvester_progress
callback (plugin_utils.status_lines.upgrade_plan_outcome)."""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.plugin_utils.in_process import (
    InProcessAction,
)


class ActionModule(InProcessAction):
    pass
