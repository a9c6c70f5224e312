"""Modules run inside the task's worker (plugin_utils/in_process.py): every module builds its
AnsibleModule through module_utils' module_factory, which builds the in-process stand-in for
the call; the stand-in validates as AnsibleModule does, its exits become the result (secrets
masked), a crash is a module failure, and only a local task under the controller's own Python
is run that way."""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import types
from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path
in_process = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.plugin_utils.in_process")
module_factory = in_process.module_factory


def test_a_real_module_refuses_an_unknown_option_as_ansible_does() -> None:
    res = in_process.run("harvester.upgrade.upgrade_lock", {"state": "released", "bogus": 1},
                         check_mode=False)
    assert res["failed"] is True
    # named as the task names the module, as AnsibleModule names it from _ansible_module_name
    assert res["msg"].startswith(
        "Unsupported parameters for (harvester.upgrade.upgrade_lock) module: bogus"), res


def test_a_real_module_refuses_a_bad_choice() -> None:
    res = in_process.run("harvester.upgrade.upgrade_lock", {"state": "gone"}, check_mode=False)
    assert res["failed"] is True
    assert "state" in res["msg"] and "acquired" in res["msg"], res


def test_a_real_modules_own_check_runs_and_secrets_are_masked() -> None:
    secret = "s3cret-token-value"
    res = in_process.run("harvester.upgrade.upgrade_lock",
                         {"duration": 0, "api_key": secret, "host": "https://127.0.0.1:1"},
                         check_mode=False)
    assert res["failed"] is True
    assert res["msg"] == "duration must be at least 1 second, got 0", res
    assert secret not in json.dumps(res), res                       # no_log option
    assert res["invocation"]["module_args"]["duration"] == 0


def fake(monkeypatch: pytest.MonkeyPatch, main: Any) -> types.SimpleNamespace:
    """A module whose main() is ``main(new_module)``: it builds its module as ours do, through
    ``module_factory.new_module``."""
    code = types.SimpleNamespace()
    code.main = lambda: main(module_factory.new_module)
    monkeypatch.setattr(in_process.importlib, "import_module", lambda name: code)
    return code


def test_exit_json_is_not_swallowed_by_the_modules_own_except_exception(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def main(new_module: Any) -> None:
        module = new_module(argument_spec={"n": {"type": "int"}}, supports_check_mode=True)
        try:
            module.warn("careful")
            module.exit_json(changed=True, n=module.params["n"], check=module.check_mode)
        except Exception:  # noqa: BLE001 - what the test is about
            seen.append("swallowed")

    fake(monkeypatch, main)
    res = in_process.run("harvester.upgrade.fake", {"n": "7"}, check_mode=True)
    assert seen == []
    assert res["changed"] is True and res["n"] == 7 and res["check"] is True
    assert res["warnings"] == ["careful"]


def test_check_mode_without_support_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def main(new_module: Any) -> None:
        new_module(argument_spec={}, supports_check_mode=False)
        calls.append("ran on")

    fake(monkeypatch, main)
    res = in_process.run("harvester.upgrade.fake", {}, check_mode=True)
    assert res["skipped"] is True and "does not support check mode" in res["msg"]
    assert calls == []


def test_a_crash_or_no_exit_is_a_module_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> None:
        raise RuntimeError("kaput")

    fake(monkeypatch, lambda new_module: boom())
    res = in_process.run("harvester.upgrade.fake", {}, check_mode=False)
    assert res["failed"] is True and res["msg"] == "MODULE FAILURE: RuntimeError: kaput"
    assert "RuntimeError" in res["exception"]
    fake(monkeypatch, lambda new_module: None)
    res = in_process.run("harvester.upgrade.fake", {}, check_mode=False)
    assert res["failed"] is True and "without exit_json" in res["msg"]


def test_after_the_call_the_factory_builds_ansible_modules_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(new_module: Any) -> None:
        new_module(argument_spec={}, supports_check_mode=True)
        raise RuntimeError("kaput")

    fake(monkeypatch, boom)
    assert in_process.run("harvester.upgrade.fake", {}, check_mode=False)["failed"] is True
    built: list[dict[str, Any]] = []
    monkeypatch.setattr(module_factory, "AnsibleModule", lambda **kw: built.append(kw))
    module_factory.new_module({"n": {"type": "int"}}, supports_check_mode=True)
    assert built == [{"argument_spec": {"n": {"type": "int"}}, "supports_check_mode": True}]


def test_the_module_gets_the_name_the_task_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    def main(new_module: Any) -> None:
        module = new_module(argument_spec={}, supports_check_mode=True)
        module.exit_json(name=module._name)

    fake(monkeypatch, main)
    assert in_process.run("harvester.upgrade.fake", {}, check_mode=False,
                          name="fake")["name"] == "fake"
    assert in_process.run("harvester.upgrade.fake", {},
                          check_mode=False)["name"] == "harvester.upgrade.fake"


class _Built(Exception):
    """Raised by the capturing builder: main() stops where its module is built."""


# every module that runs (the others are documentation of an action plugin alone, as
# ansible.builtin.assert's: harvester.upgrade.check_variables)
MODULES = sorted(info.name for info in pkgutil.iter_modules(
    importlib.import_module(in_process.MODULES).__path__)
    if hasattr(importlib.import_module(f"{in_process.MODULES}.{info.name}"), "main"))


@pytest.mark.parametrize("name", MODULES)
def test_every_module_builds_its_module_through_the_factory(name: str) -> None:
    """What the in-process path relies on: a module building AnsibleModule itself would read
    its arguments from stdin inside the worker."""
    code = importlib.import_module(f"{in_process.MODULES}.{name}")

    def capture(**kw: Any) -> None:
        raise _Built(kw)

    with pytest.raises(_Built) as built, module_factory.building(capture):
        code.main()
    assert built.value.args[0]["argument_spec"], name
    assert built.value.args[0]["supports_check_mode"] is True, name


class Action:
    """What usable() reads of an action plugin."""

    def __init__(self, transport: str = "local", become: bool = False, async_val: int = 0
                 ) -> None:
        self._task = types.SimpleNamespace(async_val=async_val, collections=[])
        self._play_context = types.SimpleNamespace(become=become)
        self._connection = types.SimpleNamespace(transport=transport)
        self._templar = None


@pytest.mark.parametrize(("action", "fqcn", "task_vars", "expected"), [
    (Action(), "harvester.upgrade.node_cycle", {}, True),
    (Action(), "harvester.upgrade.node_cycle",
     {"ansible_python_interpreter": sys.executable}, True),
    (Action(), "harvester.upgrade.node_cycle",
     {"ansible_python_interpreter": "/usr/bin/python3.6"}, False),
    (Action(), "kubernetes.core.k8s", {}, False),
    (Action(), "harvester.upgrade.node_cycle", {"harvester_upgrade_in_process": False}, False),
    (Action(), "harvester.upgrade.node_cycle", {"harvester_upgrade_in_process": "no"}, False),
    (Action(transport="ssh"), "harvester.upgrade.node_cycle", {}, False),
    (Action(become=True), "harvester.upgrade.node_cycle", {}, False),
    (Action(async_val=60), "harvester.upgrade.node_cycle", {}, False),
])
def test_only_a_local_task_under_our_python_runs_in_the_worker(
        action: Action, fqcn: str, task_vars: dict[str, Any], expected: bool) -> None:
    assert in_process.usable(action, fqcn, task_vars) is expected


@pytest.mark.parametrize(("name", "resolved", "expected"), [
    ("harvester.upgrade.node_cycle", None, "harvester.upgrade.node_cycle"),
    ("node_cycle", "harvester.upgrade.node_cycle", "harvester.upgrade.node_cycle"),
    ("k8s", "kubernetes.core.k8s", "kubernetes.core.k8s"),
    ("node_cycle", None, "node_cycle"),
])
def test_a_short_name_is_what_the_task_resolved_it_to(name: str, resolved: str | None,
                                                      expected: str) -> None:
    action = Action()
    action._task.resolved_action = resolved
    assert in_process.resolve(action, name) == expected  # type: ignore[arg-type]
