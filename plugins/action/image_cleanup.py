"""Action plugin: progress lines for this phase module (see plugin_utils.phase_action)."""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.plugin_utils.phase_action import (
    PhaseAction,
)


class ActionModule(PhaseAction):
    pass
