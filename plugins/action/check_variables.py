# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Action harvester.upgrade.check_variables: every check of the playbook variables, in one task.

What used to take three tasks before the first cluster write (Ansible's check of role common's
argument spec, the cross-variable assert, the play's ``validate_argument_spec`` of the phase
roles' specs), each a worker fork of its own, in one (docs/performance.md, "Variable checks in
one task"): common's argument spec (entry point ``variables``: not ``main``, so Ansible adds no
check task of its own to each load of the role), the ``main`` argument specs of the roles the
play names (``roles``), with Ansible's validator, and :func:`upgrade_vars.errors` over the
variables :func:`upgrade_vars.checked_names` selects. The values are templated once; every
message names its variable. It only reads variables: nothing is written, in any mode.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail, AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.harvester.upgrade.plugins.filter import upgrade_vars
from ansible_collections.harvester.upgrade.plugins.filter.role_argument_spec import (
    merged_specs,
)

COMMON = "common"
COMMON_ENTRY_POINT = "variables"   # roles/common/meta/argument_specs.yml


def spec_of(roles: Any) -> dict[str, Any]:
    """Common's ``variables`` options and ``roles``' ``main`` options, merged (an option
    declared twice is refused: :func:`role_argument_spec.merged_specs`)."""
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise AnsibleActionFail(f"check_variables: roles must be a list of role names, got "
                                f"{roles!r}")
    try:
        return merged_specs([(COMMON, COMMON_ENTRY_POINT)] + [(r, "main") for r in roles])
    except AnsibleFilterError as exc:
        raise AnsibleActionFail(f"check_variables: {exc}") from exc


def problems(spec: dict[str, Any], values: dict[str, Any]) -> list[str]:
    """The messages, each naming a variable: Ansible's validator over the spec's options
    among ``values``, then :func:`upgrade_vars.errors` over the checked names that the
    validator found nothing wrong with (one message per bad variable)."""
    given = {k: v for k, v in values.items() if k in spec}
    found = list(ArgumentSpecValidator(spec).validate(
        given, validate_role_argument_spec=True).error_messages)
    named = " ".join(found)
    checked = {k: values[k] for k in upgrade_vars.checked_names(values)
               if f"'{k}'" not in named}
    return found + upgrade_vars.errors(checked)


class ActionModule(ActionBase):
    """See the module docstring and plugins/modules/check_variables.py."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset({"roles"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        spec = spec_of(self._task.args.get("roles", []))
        names = set(spec) | set(upgrade_vars.checked_names(task_vars))
        # templated once, together (the defaults refer to each other: iso_download_timeout
        # is "{{ upgrade_iso_download_timeout }}")
        values = self._templar.template({n: task_vars[n] for n in sorted(names)
                                         if n in task_vars})
        errors = problems(spec, values)
        result.update(changed=False, checked=sorted(values), errors=errors)
        if errors:
            result.update(failed=True, msg="Invalid variables: " + "; ".join(errors))
        else:
            result["msg"] = f"{len(values)} variables checked"
        return result
