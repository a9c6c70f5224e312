"""Action plugin: run the module inside the task's worker (see plugin_utils.in_process)."""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.plugin_utils.in_process import (
    InProcessAction,
)


class ActionModule(InProcessAction):
    pass
