"""One phase module run, in a process of its own, as Ansible runs a module: for the tests of
``pipeline.run_phase`` and of the phase actions (test_pipeline.py, test_phase_actions.py).

    python phase_child.py '{"phase": "ISODownload", "act": "done", "params": {...},
                            "check_mode": false}'

prints the module's result as one JSON line (``exit`` is ``exit_json`` or ``fail_json``). A
process per run because a run that writes holds the upgrade lock, which keeps process-wide
state (its renewal thread, a signal handler, the request fence), as in a real module.

``act``/``verify`` name a phase action of one of the ``phase_*`` modules (``iso_download``,
``verify_iso``...) or one of the scripted behaviours in ``ACTS``/``VERIFIES`` below;
``"act": "module"`` runs the phase module's own body (``phase_table.run``, the ``then``
option included); ``"act": "in_process"`` runs the module ``"module"`` names
(``plugins/modules/<module>.py``) as its action plugin does (``in_process.run``: its argument
spec's validation and defaults).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (  # noqa: E402
    phase_cluster_upgrade,
    phase_image_cleanup,
    phase_image_preload,
    phase_iso_download,
    phase_metadata,
    phase_repo,
    phase_table,
    phases,
    pipeline,
    waiting,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (  # noqa: E402, E501
    ApiError,
)

CONFIGMAP = ("v1", "ConfigMap")

# the tests' fixtures (conftest.py): run(phase, act, verify=None, check_mode=False, **params)
# -> the module's result; new_plan(current_phase, **spec) -> the new UpgradePlan's name
Run = Callable[..., dict[str, Any]]
NewPlan = Callable[..., str]


class Module:
    """What ``run_phase`` uses of ``AnsibleModule``."""

    def __init__(self, params: dict[str, Any], check_mode: bool) -> None:
        self.params = params
        self.check_mode = check_mode
        self._name = "phase_child"
        self.warnings: list[str] = []

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)

    def exit_json(self, **result: Any) -> NoReturn:
        self._out("exit_json", result)

    def fail_json(self, **result: Any) -> NoReturn:
        self._out("fail_json", result)

    def _out(self, how: str, result: dict[str, Any]) -> NoReturn:
        print(json.dumps({"exit": how, "warnings": self.warnings, **result}, default=str))
        sys.stdout.flush()
        sys.exit(0)


def _never(_snapshot: waiting.Snapshot) -> waiting.Verdict:
    return waiting.Verdict(progress="still waiting for the marker")


def _wait_forever(ctx: pipeline.Context) -> pipeline.Step:
    ctx.wait([waiting.Source.named(*CONFIGMAP, "never-there", "default", key="cm")], _never,
             "ConfigMap default/never-there")
    raise AssertionError("the wait returned")


def _ensure_configmap(ctx: pipeline.Context) -> pipeline.Step:
    ctx.ensure({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"{ctx.name}-marker", "namespace": "default"},
                "data": {"plan": ctx.name}})
    return pipeline.Step("done", "marker in place")


def _api_error(ctx: pipeline.Context) -> pipeline.Step:
    raise ApiError(500, "InternalError", "the API server is having a bad day")


def _must_not_run(ctx: pipeline.Context) -> pipeline.Step:
    raise AssertionError("act ran")


def _done(ctx: pipeline.Context) -> pipeline.Step:
    ctx.did("did the work")
    return pipeline.Step("done", "work done", {"answer": 42})


ACTS = {
    "done": _done,
    "failed": lambda ctx: pipeline.Step("failed", "the work cannot be done"),
    "wait": _wait_forever,
    "ensure": _ensure_configmap,
    "api_error": _api_error,
    "must_not_run": _must_not_run,
}
VERIFIES = {"checked": lambda ctx: "checked again"}


PHASE_MODULES = (phase_iso_download, phase_repo, phase_metadata, phase_image_preload,
                 phase_cluster_upgrade, phase_image_cleanup)


def phase_action(name: str) -> Any:
    """The phase action ``name`` of the phase module that has it."""
    for mod in PHASE_MODULES:
        if hasattr(mod, name):
            return getattr(mod, name)
    raise AssertionError(f"no phase action {name}")


def phase_entry(name: str) -> Any:
    """The ``entry`` the phase module of action ``name`` passes to ``run_phase`` (None for
    the scripted acts and the phases without one), as its module in plugins/modules does."""
    if name in ACTS:
        return None
    return next((getattr(mod, "entry", None) for mod in PHASE_MODULES if hasattr(mod, name)),
                None)


def main(spec: dict[str, Any]) -> None:
    if spec["act"] == "in_process":   # a module of plugins/modules, as the action runs it
        from ansible_collections.harvester.upgrade.plugins.plugin_utils import in_process
        res = in_process.run(f"harvester.upgrade.{spec['module']}", spec["params"],
                             bool(spec.get("check_mode")))
        print(json.dumps({"exit": "fail_json" if res.get("failed") else "exit_json", **res},
                         default=str))
        return
    if spec["act"] == "module":   # the phase module's own body (plugins/modules/<phase>.py)
        phase_table.run(Module(spec["params"], bool(spec.get("check_mode"))), spec["phase"])
        raise AssertionError("phase_table.run returned without exit_json or fail_json")
    act = ACTS.get(spec["act"]) or phase_action(spec["act"])
    name = spec.get("verify")
    verify = (VERIFIES.get(name) or phase_action(name)) if name else None
    module = Module(spec["params"], bool(spec.get("check_mode")))
    pipeline.run_phase(module, phases.get(spec["phase"]), act, verify,
                       entry=phase_entry(spec["act"]))
    raise AssertionError("run_phase returned without exit_json or fail_json")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
