"""Action plugin: run the module inside the task's worker (see plugin_utils.in_process). What
``step: enter`` held for the roll and its head start are printed by the harvester_progress
callback (plugin_utils.status_lines.node_gate_outcome)."""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.plugin_utils.in_process import (
    InProcessAction,
)


class ActionModule(InProcessAction):
    pass
