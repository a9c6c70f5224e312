"""Action harvester.upgrade.check_variables: role common's one check of the playbook variables
(common's argument spec, the play's phase roles' specs, upgrade_var_errors), and its use by
role common (a bad variable fails the run naming it before any later task; a good run checks
once per run)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleActionFail

from ansible_collections.harvester.upgrade.plugins.action.check_variables import (
    problems,
    spec_of,
)
from testkit import BIN, ROOT, ansible_env

ROLES = ROOT / "roles"


def options(role: str, entry_point: str = "main") -> dict[str, Any]:
    data = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    return data["argument_specs"][entry_point]["options"]  # type: ignore[no-any-return]


def test_spec_is_commons_and_the_named_roles() -> None:
    assert spec_of([]) == options("common", "variables")
    assert spec_of(["iso_download", "finalize"]) == {
        **options("common", "variables"), **options("iso_download"), **options("finalize")}


def test_common_has_no_main_entry_point() -> None:
    """Under ``main`` Ansible would prepend a check task of its own to every load of common
    (a worker fork per play), which check_variables makes anyway."""
    specs = yaml.safe_load((ROLES / "common" / "meta" / "argument_specs.yml").read_text())
    assert "main" not in specs["argument_specs"]


@pytest.mark.parametrize("roles, message", [
    ("iso_download", "must be a list of role names"),
    ([["iso_download"]], "must be a list of role names"),
    (["no_such_role"], "has no argument spec"),
    (["finalize", "finalize"], "declared by both"),
    (["common"], "no argument spec for entry point 'main'"),
])
def test_bad_roles_are_refused(roles: Any, message: str) -> None:
    with pytest.raises(AnsibleActionFail, match=re.escape(message)):
        spec_of(roles)


def test_every_problem_is_named_once() -> None:
    spec = spec_of(["iso_download"])
    found = problems(spec, {
        "upgrade_force": "maybe",                  # the spec's type check and var_errors'
        "iso_download_timeout": -5,                # var_errors only (the spec has no minimum)
        "upgrade_pause_nodes": "a,b",              # the spec would split it; var_errors refuses
        "upgrade_image_preload_concurrency": -1,   # fine: negative skips the phase
        "upgrade_version": "v1.6.0",
    })
    assert len(found) == 3, found
    assert "upgrade_force" in found[0] and "bool" in found[0]
    assert [m.split()[0] for m in found[1:]] == ["iso_download_timeout", "upgrade_pause_nodes"]


def test_good_values_pass() -> None:
    spec = spec_of(["preflight", "finalize"])
    assert problems(spec, {"upgrade_force": "yes", "preflight_timeout": "900",
                           "finalize_force": False, "upgrade_what_if": "",
                           "upgrade_pause_nodes": ["hv-2"]}) == []


def test_a_knob_outside_every_spec_is_still_checked() -> None:
    """upgrade_var_errors covers every role's knobs, whichever roles the play names."""
    assert problems(spec_of([]), {"node_upgrade_concurrency": -2}) == [
        "node_upgrade_concurrency must not be negative, got -2"]


PLAY = """
- name: Check, then write a file
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    harvester_upgrade_checked_roles: [iso_download, finalize]
  roles:
    - role: harvester.upgrade.common
  tasks:
    - name: Include common again (a later phase of the run)
      ansible.builtin.include_role:
        name: harvester.upgrade.common
    - name: Write the file
      ansible.builtin.copy:
        content: written
        dest: "{{ marker }}"
        mode: "0600"
"""


def _run(tmp_path: Path, *args: str) -> tuple[int, str]:
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    marker = tmp_path / "marker"
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), str(play), "-e", json.dumps({"marker": str(marker)}),
         *args], cwd=ROOT, env=ansible_env(None), capture_output=True, text=True,
        timeout=300, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("bad, name", [
    # a named role's spec (Ansible's validator's message)
    ({"iso_download_timeout": "soon"}, "argument 'iso_download_timeout'"),
    ({"finalize_force": "perhaps"}, "argument 'finalize_force'"),
    ({"upgrade_progress_interval": "soon"}, "argument 'upgrade_progress_interval'"),  # common's
    ({"upgrade_skip_checks": "disk_space"}, "upgrade_skip_checks must be"),   # var_errors
])
def test_a_bad_variable_fails_the_run_before_any_later_task(
        tmp_path: Path, bad: dict[str, Any], name: str) -> None:
    rc, out = _run(tmp_path, "-e", json.dumps(bad))
    assert rc != 0, out
    assert "Invalid variables" in out and name in out, out
    assert not (tmp_path / "marker").exists(), out
    assert "TASK [Write the file]" not in out, out


def test_good_variables_pass_once_per_run_in_check_mode_too(tmp_path: Path) -> None:
    rc, out = _run(tmp_path, "--check")
    assert rc == 0, out
    assert out.count("TASK [harvester.upgrade.common : Check the upgrade variables]") == 1, out
    assert "Validating arguments" not in out, out
    assert not (tmp_path / "marker").exists(), out   # check mode
    rc, out = _run(tmp_path)
    assert rc == 0 and (tmp_path / "marker").read_text() == "written", out
