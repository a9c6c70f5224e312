# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Filter harvester.upgrade.upgrade_var_errors: what is wrong with the playbook variables.

roles/common (a dependency of every phase role) runs :func:`errors` on every ``upgrade_*``
variable and every role knob (``preflight_*``, ``node_upgrade_*``, ...; :func:`checked_names`)
through the action ``harvester.upgrade.check_variables`` before any task talks to the cluster,
and fails with the messages, each naming the variable. Role argument specs check
types too, but they accept a string for a list (``"a,b"`` is split) and have no minimum.
"""

from __future__ import annotations

import re
from typing import Any

DOCUMENTATION = r"""
name: upgrade_var_errors
short_description: Problems of the harvester.upgrade playbook variables
version_added: 0.1.0
description:
  - Takes a mapping of variable name to value and returns a list of messages, each naming a
    variable whose value has the wrong type or range (empty when all are fine).
options:
  _input:
    description: Variable name to value.
    type: dict
    required: true
author:
  - harvester-upgrade contributors
"""

EXAMPLES = r"""
- name: Check the variables
  ansible.builtin.assert:
    that: errors | length == 0
    fail_msg: "{{ errors | join('; ') }}"
  vars:
    errors: "{{ {'upgrade_force': 'maybe'} | harvester.upgrade.upgrade_var_errors }}"
"""

RETURN = r"""
_value:
  description: Messages, each naming a variable.
  type: list
  elements: str
"""

BOOLS = ("true", "false", "yes", "no", "on", "off", "1", "0", "y", "n", "t", "f")
BOOL_VARS = frozenset({
    "upgrade_restore_vm", "upgrade_force", "upgrade_force_phase", "node_upgrade_target_aware",
    "node_upgrade_restore_fail_on_error", "upgrade_abort_force", "upgrade_abort",
    "upgrade_lock", "upgrade_abort_restore_vms", "upgrade_allow_downgrade",
    "upgrade_allow_version_skip", "upgrade_allow_unverified_iso", "upgrade_resume_failed",
})
# may be empty: "" means "automatic"/"kubernetes.core default"
OPTIONAL_BOOL_VARS = frozenset({"upgrade_what_if", "upgrade_validate_certs"})
LIST_VARS = frozenset({"upgrade_pause_nodes", "upgrade_skip_checks", "preflight_skip_checks"})
DICT_VARS = frozenset({"upgrade_annotations"})
INT_VARS = frozenset({"upgrade_image_preload_concurrency"})   # may be negative
NON_NEGATIVE = re.compile(r"_(timeout|interval|retries|concurrency|duration|seconds)$")
SECRET = re.compile(r"(api_key|token|password|kubeconfig)")
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# The variables checked (action harvester.upgrade.check_variables): <prefix>_<suffix>, the
# prefixes being roles/common's and every phase role's, the suffixes the knobs above
CHECKED_PREFIXES = ("upgrade", "preflight", "iso_download", "repo_create", "metadata_populate",
                    "image_preload", "cluster_upgrade", "node_upgrade", "image_cleanup",
                    "finalize")
CHECKED_SUFFIXES = ("(.*_)?(timeout|interval|retries|concurrency|duration|seconds)",
                    "pause_nodes", "skip_checks", "annotations", "restore_vm", "force",
                    "force_phase", "allow_downgrade", "allow_version_skip",
                    "allow_unverified_iso", "what_if", "validate_certs", "abort", "abort_force",
                    "lock", "target_aware", "restore_fail_on_error", "resume_failed")
CHECKED = re.compile(f"^({'|'.join(CHECKED_PREFIXES)})_({'|'.join(CHECKED_SUFFIXES)})$")


def checked_names(names: Any) -> list[str]:
    """The names among ``names`` that :func:`errors` is to check (sorted)."""
    return sorted(n for n in names if isinstance(n, str) and CHECKED.match(n))


def _show(name: str, value: Any) -> str:
    if SECRET.search(name):
        return f"a {type(value).__name__}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or str(value).strip().lower() in BOOLS


def errors(values: dict[str, Any]) -> list[str]:
    """Messages naming each variable with a bad value (see module docstring)."""
    out: list[str] = []
    for name in sorted(values):
        value = values[name]
        if name in BOOL_VARS and not _is_bool(value):
            out.append(f"{name} must be a boolean (true/false), got {_show(name, value)}")
        elif name in OPTIONAL_BOOL_VARS and str(value) != "" and not _is_bool(value):
            out.append(f"{name} must be true, false or empty, got {_show(name, value)}")
        elif name in LIST_VARS:
            if not isinstance(value, list):
                out.append(f"{name} must be a list of strings (e.g. -e "
                           f"'{{\"{name}\": [\"a\", \"b\"]}}'), got {_show(name, value)}")
            elif not all(isinstance(v, str) and v for v in value):
                out.append(f"{name} must be a list of non-empty strings, got "
                           f"{_show(name, value)}")
            elif name == "upgrade_pause_nodes":
                bad = [v for v in value if not NODE_NAME.match(v) or len(v) > 253]
                if bad:
                    out.append(f"{name}: {', '.join(repr(b) for b in bad)} not a valid node "
                               "name (RFC 1123: lower-case letters, digits, '-', '.')")
        elif name in DICT_VARS and not isinstance(value, dict):
            out.append(f"{name} must be a mapping (dict), got {_show(name, value)}")
        elif name in INT_VARS and _as_int(value) is None:
            out.append(f"{name} must be an integer, got {_show(name, value)}")
        elif NON_NEGATIVE.search(name) and name not in INT_VARS:
            number = _as_int(value)
            if number is None:
                out.append(f"{name} must be a non-negative integer (seconds/count), got "
                           f"{_show(name, value)}")
            elif number < 0:
                out.append(f"{name} must not be negative, got {number}")
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"upgrade_var_errors": errors}
