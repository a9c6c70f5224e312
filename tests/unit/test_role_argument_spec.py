"""Filter harvester.upgrade.role_argument_spec and the playbooks' one-task argument checks.

playbooks/upgrade.yml imports its phase roles with ``rolespec_validate: false`` and has role
common's one check task (harvester.upgrade.check_variables) check their argument specs: the
play names them in ``harvester_upgrade_checked_roles`` (docs/performance.md, "Variable checks
in one task"). Every such role must be named there, or its variables would go unchecked."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.harvester.upgrade.plugins.filter.role_argument_spec import (
    FilterModule,
    role_argument_spec,
)
from testkit import ROOT

ROLES = ROOT / "roles"


def options(role: str) -> dict[str, Any]:
    data = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    return data["argument_specs"]["main"]["options"]  # type: ignore[no-any-return]


def test_one_role_is_its_spec_options() -> None:
    assert role_argument_spec("node_upgrade") == options("node_upgrade")
    assert FilterModule().filters()["role_argument_spec"] is role_argument_spec


def test_roles_are_merged() -> None:
    merged = role_argument_spec(["image_cleanup", "finalize"])
    assert merged == {**options("image_cleanup"), **options("finalize")}
    assert "finalize_restore_timeout" in merged and "image_cleanup_plan" in merged


@pytest.mark.parametrize("roles, message", [
    (["finalize", "finalize"], "declared by both"),
    ("no_such_role", "has no argument spec"),
    ("../roles/common", "not a role name"),
    ([["preflight"]], "not a role name"),
    ([], "no role given"),
])
def test_bad_input_is_refused(roles: Any, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        role_argument_spec(roles)


def test_unknown_entry_point_is_refused() -> None:
    with pytest.raises(AnsibleFilterError, match="entry point 'other'"):
        role_argument_spec("finalize", entry_point="other")


def test_merged_spec_validates_as_each_role_does() -> None:
    """Ansible's validator over the merged spec gives the messages of each role's own."""
    merged = role_argument_spec(["iso_download", "finalize"])
    bad = {"iso_download_timeout": "soon", "finalize_force": "perhaps"}
    together = ArgumentSpecValidator(merged).validate(bad, validate_role_argument_spec=True)
    alone = ArgumentSpecValidator(options("iso_download")).validate(
        {"iso_download_timeout": "soon"}, validate_role_argument_spec=True).error_messages
    alone += ArgumentSpecValidator(options("finalize")).validate(
        {"finalize_force": "perhaps"}, validate_role_argument_spec=True).error_messages
    assert sorted(together.error_messages) == sorted(alone) and len(alone) == 2


def _plays(path: Path) -> list[dict[str, Any]]:
    return [p for p in yaml.safe_load(path.read_text()) if "hosts" in p]


def _imports(play: dict[str, Any]) -> list[dict[str, Any]]:
    return [t["ansible.builtin.import_role"] for t in play.get("tasks") or []
            if "ansible.builtin.import_role" in t]


def _checked_roles(play: dict[str, Any]) -> list[str]:
    """The roles whose specs the play's common checks (``harvester_upgrade_checked_roles``,
    a literal list among the play's vars; common must be among the play's roles)."""
    roles = (play.get("vars") or {}).get("harvester_upgrade_checked_roles") or []
    if roles:
        assert isinstance(roles, list) and all(isinstance(r, str) for r in roles), roles
        assert any(r["role"] == "harvester.upgrade.common" for r in play.get("roles") or []), \
            f"{play['name']}: names roles to check but does not run common"
    return list(roles)


def test_every_role_imported_without_its_check_is_checked_by_the_playbook() -> None:
    playbook = "playbooks/upgrade.yml"
    plays = _plays(ROOT / playbook)
    checked: list[str] = []   # by this play or an earlier one (a later check comes too late)
    unchecked = []
    for play in plays:
        assert "roles" not in play or all(
            r["role"] == "harvester.upgrade.common" for r in play["roles"]), \
            f"{play['name']}: a role under roles: gets Ansible's own check; import it instead"
        checked += _checked_roles(play)
        for imp in _imports(play):
            assert imp.get("rolespec_validate") is False, (play["name"], imp)
            role = imp["name"].removeprefix("harvester.upgrade.")
            if role not in checked:
                unchecked.append(role)
    assert checked and not unchecked, f"{playbook}: imported unchecked: {unchecked}"
    # and each checked role has an argument spec the filter reads
    assert role_argument_spec(checked)
