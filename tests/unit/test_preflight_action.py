"""The preflight action's ``ensure_plan``: upgrade_plan's ensure first, in the same task, then
the pre-flight module on the plan it named (the modules replaced by recorders here; what they
do is tested against the simulator by tests/integration/test_cluster_phases.py)."""

from __future__ import annotations

import types
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.harvester.upgrade.plugins.action import preflight as action
from ansible_collections.harvester.upgrade.plugins.plugin_utils import phase_action

AUTH = {"kubeconfig": "/k", "validate_certs": False}


class Calls:
    def __init__(self, ensured: dict[str, Any]) -> None:
        self.ensured = ensured
        self.upgrade_plan: list[dict[str, Any]] = []
        self.preflight: list[dict[str, Any]] = []


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    rec = Calls({})

    def execute(act: Any, module: str, args: dict[str, Any], task_vars: Any) -> dict[str, Any]:
        assert module == "harvester.upgrade.upgrade_plan"
        rec.upgrade_plan.append(dict(args))
        return dict(rec.ensured)

    def module(self: Any, args: dict[str, Any], task_vars: Any) -> dict[str, Any]:
        rec.preflight.append(dict(args))
        return {"changed": False, "status": "completed", "phase": "Initialize",
                "plan": args.get("plan"), "checks": [], "failed_checks": [], "msg": "ok"}

    monkeypatch.setattr(action.in_process, "execute", execute)
    monkeypatch.setattr(phase_action.PhaseAction, "_module", module)
    return rec


def run(args: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    act = object.__new__(action.ActionModule)
    act._task = types.SimpleNamespace(  # type: ignore[assignment]
        args=args, async_val=0, check_mode=check_mode, action="harvester.upgrade.preflight")
    act._connection = types.SimpleNamespace(  # type: ignore[assignment]
        _shell=types.SimpleNamespace(tmpdir="/tmp"))
    return act.run(task_vars={})


def test_the_checks_run_on_the_plan_ensure_created(calls: Calls) -> None:
    calls.ensured = {"changed": True, "created": True, "plan": "hvst-upgrade-x",
                     "msg": "created UpgradePlan hvst-upgrade-x to v1.6.0"}
    res = run({**AUTH, "version": "v1.6.0", "skip_checks": ["disk_space"],
               "ensure_plan": {"version": "v1.6.0", "force": True}})
    assert calls.upgrade_plan == [{**AUTH, "version": "v1.6.0", "force": True,
                                   "action": "ensure"}]
    (checked,) = calls.preflight
    assert checked["plan"] == "hvst-upgrade-x" and "ensure_plan" not in checked
    assert checked["skip_checks"] == ["disk_space"] and checked["kubeconfig"] == "/k"
    assert res["upgrade_plan"] == calls.ensured and res["status"] == "completed"
    assert res["changed"] is True   # ensure's change counts


@pytest.mark.parametrize("ensured, status", [
    ({"failed": True, "msg": "Version v9 not found"}, None),
    ({"up_to_date": True, "plan": None, "msg": "no Version newer than v1.6.0"}, "up_to_date"),
])
def test_no_check_runs_when_ensure_fails_or_finds_the_cluster_up_to_date(
        calls: Calls, ensured: dict[str, Any], status: str | None) -> None:
    calls.ensured = ensured
    res = run({**AUTH, "ensure_plan": {}})
    assert calls.preflight == []
    assert res["msg"] == ensured["msg"] and res["upgrade_plan"] == ensured
    assert bool(res.get("failed")) is bool(ensured.get("failed"))
    assert res.get("status") == status


def test_check_mode_would_create_runs_the_what_if_checks(calls: Calls) -> None:
    calls.ensured = {"changed": True, "created": True, "plan": None, "version": "v1.6.0",
                     "msg": "would create an UpgradePlan to v1.6.0"}
    res = run({**AUTH, "ensure_plan": {}}, check_mode=True)
    (checked,) = calls.preflight
    assert "plan" not in checked   # no plan yet: the checks' what-if
    assert res["upgrade_plan"]["version"] == "v1.6.0"


def test_without_ensure_plan_only_the_checks_run(calls: Calls) -> None:
    res = run({**AUTH, "plan": "hvst-upgrade-y"})
    assert calls.upgrade_plan == [] and calls.preflight[0]["plan"] == "hvst-upgrade-y"
    assert "upgrade_plan" not in res


@pytest.mark.parametrize("bad", ["v1.6.0", {"action": "read"}])
def test_a_bad_ensure_plan_is_refused(calls: Calls, bad: Any) -> None:
    with pytest.raises(AnsibleActionFail, match="ensure_plan must be a mapping"):
        run({"ensure_plan": bad})
    assert calls.upgrade_plan == [] and calls.preflight == []
