"""Run one of this collection's modules inside the task's worker instead of a new process.

Ansible runs a module by building an AnsiballZ payload and starting a new Python for it, which
imports ``ansible.module_utils.basic``, ``kubernetes`` and our code from a zip (no bytecode
cache) every time, most of a short phase's cost (docs/performance.md). Our modules only talk to
the Kubernetes API, and every play of the collection runs them with ``connection: local`` under
the controller's own Python, so the action plugins run them here instead: the task's worker (a
fork of ansible-playbook) calls the module's own ``main()``. Every module builds its
``AnsibleModule`` through ``module_utils/harvester/module_factory.py``; for this call the
factory builds an :class:`InProcessModule` instead, which validates the arguments with the
validator ``AnsibleModule`` uses and turns ``exit_json``/``fail_json`` into the result. Nothing
in the module is replaced: the module and in-process paths run the same code. This file's
imports load ``kubernetes`` and our module_utils once, in ansible-playbook itself (action
plugins are loaded there before a task is queued), so every fork has them.

Used only when it is the same thing: the task runs on the ``local`` connection, without
become or async, with the controller's Python, for a module of this collection, and
``harvester_upgrade_in_process`` (a variable; default true) is not false. Anything else runs
the module the usual way. A killed run stops the same way: the lock's watchdog ends the
process the module runs in (here the worker) when ansible-playbook is gone.
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib
import os
import sys
import traceback
from typing import Any

from ansible.module_utils.common.arg_spec import ModuleArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.errors import UnsupportedError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import filter_loader
from ansible.utils.display import Display

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import module_factory
from ansible_collections.harvester.upgrade.plugins.plugin_utils import bytecode, preload

# loaded here, in ansible-playbook, so that every worker forked from it has them already
# (the reason this runner saves time): the Kubernetes client and every module of the
# collection with the module_utils it imports (preload.import_all); a missing dependency
# shows when a module runs
MODULES = preload.MODULES


# the filter the phase tasks' then option calls: found and loaded here once, else every such
# task's worker looks it up in the collection again as it templates its arguments
FILTERS = ("harvester.upgrade.phase_chain",)


def _preload() -> None:
    # with cached bytecode (plugin_utils/bytecode.py: ansible-core's collection loader
    # compiles every file from source), here and in the workers' later imports
    bytecode.install()
    # the imports may have been started already, beside the run's first worker (preload.py)
    preload.wait()
    if not preload.import_all():
        return
    for name in FILTERS:
        try:
            filter_loader.get(name)
        except Exception:  # noqa: BLE001 - the task that calls it reports it
            continue


def _preload_once() -> None:
    """:func:`_preload` with the cyclic collector paused, then ansible-playbook's heap frozen.

    The imports allocate some 25,000 long-lived objects (classes, functions, modules) in a
    process already holding the playbook: the collector ran ~180 times during them, the
    full collections walking the whole heap, about a third of the preload's CPU. None of
    it is garbage; frozen, it is also left out of every later collection of ansible-playbook
    and of the workers forked from it (which then do not copy those pages to write the
    collector's bookkeeping)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        _preload()
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


_preload_once()
# At exit, Python's last collections walk every object left (the Kubernetes client's ~700
# model classes, the collection, the playbook), a cost at the run's end for nothing. Frozen
# objects are skipped by them (and still freed); exit handlers run before that teardown.
atexit.register(gc.freeze)
display = Display()

COLLECTION = "harvester.upgrade."
CLIENT = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client"
LOCK = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock"
SWITCH = "harvester_upgrade_in_process"


class ModuleExit(BaseException):
    """``exit_json``/``fail_json`` of :class:`InProcessModule`: a BaseException like the
    SystemExit of a real module, so no ``except Exception`` of the module catches it."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result.get("msg", ""))
        self.result = result


class InProcessModule:
    """What our modules use of ``AnsibleModule`` (see ``module_factory``): ``params``,
    ``check_mode``, ``warn``, ``exit_json``, ``fail_json``, ``_name``; the arguments validated
    by the validator ``AnsibleModule`` uses, with the same messages."""

    def __init__(self, argument_spec: dict[str, Any], bypass_checks: bool = False,
                 no_log: bool = False, mutually_exclusive: Any = None,
                 required_together: Any = None, required_one_of: Any = None,
                 add_file_common_args: bool = False, supports_check_mode: bool = False,
                 required_if: Any = None, required_by: Any = None, *,
                 args: dict[str, Any], check_mode: bool, name: str) -> None:
        self.argument_spec = argument_spec
        self.check_mode = check_mode
        self._name = name   # as AnsibleModule's: the module name the task gave
        self.warnings: list[str] = []
        self.params: dict[str, Any] = dict(args)
        validation = ModuleArgumentSpecValidator(
            argument_spec, mutually_exclusive, required_together, required_one_of,
            required_if, required_by).validate(self.params)
        self.params.update(validation.validated_parameters)
        # the values of no_log options and their fallbacks: ansible-core has no public
        # accessor for them; AnsibleModule reads this same attribute
        self.no_log_values: set[str] = set(validation._no_log_values)  # noqa: SLF001
        try:
            error = validation.errors[0]
        except IndexError:
            error = None
        if error is not None:
            msg = validation.errors.msg
            if isinstance(error, UnsupportedError):
                msg = f"Unsupported parameters for ({name}) module: {msg}"
            self.fail_json(msg=msg)
        if self.check_mode and not supports_check_mode:
            self.exit_json(skipped=True,
                           msg=f"remote module ({name}) does not support check mode")

    def warn(self, warning: str) -> None:
        self.warnings.append(str(warning))

    def _result(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        result = dict(kwargs)
        result.setdefault("changed", False)
        result["invocation"] = {"module_args": self.params}
        result = remove_values(result, self.no_log_values)
        if self.warnings:
            result["warnings"] = list(self.warnings)
        return result  # type: ignore[no-any-return]

    def exit_json(self, **kwargs: Any) -> None:
        raise ModuleExit(self._result(kwargs))

    def fail_json(self, msg: str, **kwargs: Any) -> None:
        kwargs["failed"] = True
        kwargs["msg"] = msg
        raise ModuleExit(self._result(kwargs))


def _same_python(action: ActionBase, task_vars: dict[str, Any]) -> bool:
    interpreter = task_vars.get("ansible_python_interpreter")
    if interpreter in (None, "", "auto", "auto_silent", "auto_legacy", "auto_legacy_silent"):
        return True
    templar = getattr(action, "_templar", None)
    if templar is not None and isinstance(interpreter, str):
        try:
            interpreter = templar.template(interpreter)
        except Exception:  # noqa: BLE001 - then it is not known to be ours
            return False
    return os.path.realpath(str(interpreter)) == os.path.realpath(sys.executable)


def usable(action: ActionBase, module_fqcn: str, task_vars: dict[str, Any] | None) -> bool:
    """Whether ``module_fqcn`` may run in this worker (see the module doc)."""
    task_vars = task_vars or {}
    if not module_fqcn.startswith(COLLECTION):
        return False
    try:
        if not boolean(task_vars.get(SWITCH, True), strict=False):
            return False
    except TypeError:
        return False
    task = action._task  # noqa: SLF001 - the action's own task
    if task.async_val or action._play_context.become:  # noqa: SLF001
        return False
    if getattr(action._connection, "transport", "") not in ("local", "ansible.builtin.local"):  # noqa: SLF001
        return False
    return _same_python(action, task_vars)


def resolve(action: ActionBase, name: str) -> str:
    """The module's fully qualified name (``harvester.upgrade.x``) or ``name``: the task's
    action is resolved to the plugin of that name, ours or another collection's."""
    if name.startswith(COLLECTION):
        return name
    resolved = getattr(action._task, "resolved_action", None)  # noqa: SLF001 - its own task
    return str(resolved) if resolved else name


def _flush_discovery() -> None:
    """The discovery cache the module held back (``client.defer_discovery_writes``): a
    module process writes it at exit, a worker ends without exit handlers."""
    client = sys.modules.get(CLIENT)
    if client is not None:
        try:
            client.flush_discovery_cache()
        except Exception:  # noqa: BLE001 - a cache not written is discovered again
            pass


def run(module_fqcn: str, args: dict[str, Any], check_mode: bool,
        name: str | None = None) -> dict[str, Any]:
    """Call the module's ``main()`` here with ``args``; its result (failed on a crash).
    ``name``: the module name the task gave (``AnsibleModule._name``), else ``module_fqcn``."""
    short = module_fqcn.rsplit(".", 1)[-1]
    code = importlib.import_module(f"{MODULES}.{short}")
    builder = functools.partial(InProcessModule, args=dict(args), check_mode=check_mode,
                                name=name or module_fqcn)
    try:
        with module_factory.building(builder):
            code.main()
    except ModuleExit as done:
        return done.result
    except Exception as exc:  # noqa: BLE001 - as a crashed module process is reported
        return {"failed": True, "changed": False,
                "msg": f"MODULE FAILURE: {type(exc).__name__}: {exc}",
                "exception": traceback.format_exc()}
    finally:
        lock = sys.modules.get(LOCK)
        if lock is not None:   # a lock lost from now on is not this module's failure
            lock.module_ended()
        _flush_discovery()
    return {"failed": True, "changed": False,
            "msg": f"MODULE FAILURE: {short} returned without exit_json or fail_json"}


def execute(action: ActionBase, module_name: str, module_args: dict[str, Any],
            task_vars: dict[str, Any] | None) -> dict[str, Any]:
    """``action._execute_module(module_name, module_args)``, in this worker when
    :func:`usable`; module warnings are shown as a module's are."""
    fqcn = resolve(action, module_name)
    if not usable(action, fqcn, task_vars):
        return action._execute_module(module_name=module_name,  # noqa: SLF001
                                      module_args=module_args, task_vars=task_vars)
    # this worker is a fork of ansible-playbook and holds its whole heap (plays, variables,
    # plugins): leave those objects out of the garbage collector's passes, which the module's
    # allocations would otherwise set off over and over (and which would copy the pages
    # shared with ansible-playbook); the worker ends with the task
    gc.freeze()
    result = run(fqcn, module_args, bool(action._task.check_mode),  # noqa: SLF001
                 name=module_name)
    for warning in result.pop("warnings", None) or []:
        display.warning(str(warning))
    return result


class ModuleAction(ActionBase):
    """Base of the collection's action plugins: nothing to transfer, no connection needed;
    :meth:`_module` runs the task's module (in this worker when :func:`usable`)."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def _module(self, args: dict[str, Any], task_vars: dict[str, Any] | None
                ) -> dict[str, Any]:
        return execute(self, self._task.action, args, task_vars)


class InProcessAction(ModuleAction):
    """Action plugin of a module with nothing to do on the controller but to run it."""

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        result.update(self._module(dict(self._task.args), task_vars))
        return result
