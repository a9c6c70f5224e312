# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Filter harvester.upgrade.role_argument_spec: the options of this collection's roles'
argument specs (``roles/<role>/meta/argument_specs.yml``), merged into one spec.

The playbooks import the phase roles with ``rolespec_validate: false`` and check all of a
play's roles in one ``ansible.builtin.validate_argument_spec`` task built from this filter:
the same specs, the same validator and messages as the task Ansible prepends to each role,
in one worker fork per play instead of one per role (and per node of the serial node play),
and without Ansible reading and copying each spec again for every role it loads
(docs/performance.md, "Ansible's fixed costs"). A role used on its own still gets Ansible's
own validation task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: role_argument_spec
short_description: Options of harvester.upgrade roles' argument specs, merged
version_added: 0.1.0
description:
  - Takes a role name of this collection, or a list of them, and returns the O(entry_point)
    options of their C(meta/argument_specs.yml), merged into one mapping, ready for the
    C(argument_spec) of M(ansible.builtin.validate_argument_spec).
  - Two roles that declare the same option are refused, as is a role without an argument spec
    for the entry point.
options:
  _input:
    description: A role name (C(preflight)) or a list of role names.
    type: raw
    required: true
  entry_point:
    description: The entry point of the roles' argument specs.
    type: str
    default: main
author:
  - harvester-upgrade contributors
"""

EXAMPLES = r"""
- name: Check the variables of two phase roles in one task
  ansible.builtin.validate_argument_spec:
    argument_spec: "{{ ['image_cleanup', 'finalize'] | harvester.upgrade.role_argument_spec }}"
"""

RETURN = r"""
_value:
  description: Option name to its argument spec (type, elements, choices, default, ...).
  type: dict
"""

ROLES = Path(__file__).resolve().parents[2] / "roles"
_SPECS: dict[str, dict[str, Any]] = {}   # role -> its argument_specs (read once per process)


def _role_specs(role: Any) -> dict[str, Any]:
    if not isinstance(role, str) or not role or "/" in role or role.startswith("."):
        raise AnsibleFilterError(f"role_argument_spec: not a role name: {role!r}")
    if role not in _SPECS:
        path = ROLES / role / "meta" / "argument_specs.yml"
        try:
            # libyaml's parser when PyYAML has it, not the pure-Python one: this runs in the
            # first play's check, before anything else of the run
            data = yaml.load(path.read_text(encoding="utf-8"),
                             Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        except OSError as exc:
            raise AnsibleFilterError(
                f"role_argument_spec: harvester.upgrade.{role} has no argument spec "
                f"({path}: {exc.strerror})") from exc
        except yaml.YAMLError as exc:
            raise AnsibleFilterError(f"role_argument_spec: {path}: {exc}") from exc
        specs = data.get("argument_specs") if isinstance(data, dict) else None
        if not isinstance(specs, dict):
            raise AnsibleFilterError(f"role_argument_spec: {path} has no argument_specs mapping")
        _SPECS[role] = specs
    return _SPECS[role]


def role_argument_spec(roles: Any, entry_point: str = "main") -> dict[str, Any]:
    """The options of ``roles``' ``entry_point`` argument specs, merged."""
    names = [roles] if isinstance(roles, str) else list(roles or [])
    if not names:
        raise AnsibleFilterError("role_argument_spec: no role given")
    return merged_specs([(role, entry_point) for role in names])


def merged_specs(entries: list[tuple[Any, str]]) -> dict[str, Any]:
    """The options of each ``(role, entry point)``'s argument spec, merged; an option
    declared by two of them is refused."""
    merged: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for role, entry_point in entries:
        entry = _role_specs(role).get(entry_point)
        if not isinstance(entry, dict):
            raise AnsibleFilterError(
                f"role_argument_spec: harvester.upgrade.{role} has no argument spec for "
                f"entry point {entry_point!r}")
        for name, spec in (entry.get("options") or {}).items():
            if name in owner:
                raise AnsibleFilterError(
                    f"role_argument_spec: option {name} is declared by both "
                    f"harvester.upgrade.{owner[name]} and harvester.upgrade.{role}")
            owner[name] = role
            merged[name] = spec
    return merged


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"role_argument_spec": role_argument_spec}
