"""Action plugin of phase Initialize: progress lines (see plugin_utils.phase_action) and, with
``ensure_plan``, the UpgradePlan created or adopted first, in the same task.

``ensure_plan`` holds the options of ``harvester.upgrade.upgrade_plan`` ``action: ensure``.
That module runs first, in this task's worker (one task, one worker fork, instead of a task of
its own before this one: docs/performance.md, "Initialize in one task"), with the task's
connection options; then the pre-flight module runs on the plan it named. What ensure
returned is the result's ``upgrade_plan``. When ensure fails, or finds the cluster up to date,
no check runs. Which plan was created or adopted is printed as soon as ensure returns."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import args as specs
from ansible_collections.harvester.upgrade.plugins.plugin_utils import in_process, status_lines
from ansible_collections.harvester.upgrade.plugins.plugin_utils.phase_action import (
    PhaseAction,
)

display = Display()
UPGRADE_PLAN = "harvester.upgrade.upgrade_plan"
AUTH = frozenset(specs.spec())   # the connection options (kubernetes.core's), no other


class ActionModule(PhaseAction):
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        args = dict(self._task.args)
        ensure = args.pop("ensure_plan", None)
        if ensure is None:
            return super().run(tmp, task_vars)
        if not isinstance(ensure, dict) or "action" in ensure:
            raise AnsibleActionFail("preflight: ensure_plan must be a mapping of "
                                    "harvester.upgrade.upgrade_plan options (without action)")
        result: dict[str, Any] = super(PhaseAction, self).run(tmp, task_vars)
        auth = {k: v for k, v in args.items() if k in AUTH}
        planned = in_process.execute(self, UPGRADE_PLAN, {**auth, **ensure, "action": "ensure"},
                                     task_vars)
        result.update(upgrade_plan=planned, phase="Initialize", plan=planned.get("plan"),
                      checks=[], failed_checks=[])
        if planned.get("failed"):
            return {**result, "failed": True, "changed": bool(planned.get("changed")),
                    "msg": planned.get("msg")}
        if planned.get("up_to_date"):
            return {**result, "changed": bool(planned.get("changed")),
                    "status": "up_to_date", "msg": planned.get("msg")}
        status_lines.show(display, status_lines.upgrade_plan_outcome({}, planned))
        if planned.get("plan"):
            args["plan"] = planned["plan"]
        elif not args.get("plan"):
            args.pop("plan", None)
        result = self._phase(result, args, task_vars)
        result["changed"] = bool(result.get("changed") or planned.get("changed"))
        return result
