# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see galaxy.yml)
"""Status lines for a Harvester upgrade run: phase, node N/M, VMs, ETA."""

from __future__ import annotations

DOCUMENTATION = r"""
name: harvester_progress
type: aggregate
short_description: Status lines of a Harvester upgrade (phase, node N/M, VMs, ETA)
description:
  - Prints one short status line whenever the upgrade moves on, next to whatever the stdout
    callback prints (it does not replace it), and a summary at the end of the run.
  - "It is also the printer of what each finished task of a harvester.upgrade module did: how a
    phase ended (C(<== ISODownload: completed in 1m02s: ...)) with one line per preflight
    check, the node cycle's step lines (C(node cycle of <node>:)) and the paused-node notice,
    the settings C(node_gate) held for the roll (C(NodeUpgrade PreRun: ...)) and its head
    start, and the UpgradePlan C(upgrade_plan) created or adopted. Only lines about a task
    still running (a phase's start and progress, a paused node about to be waited for) are
    printed by the modules' action plugins."
  - "Lines look like C(harvester | plan hvst-upgrade-x | NodeUpgrade 7/8 | node 2/3 hv-2 |
    nodes done 1/3 | VMs migrated 5, shut down 1, restored 1 | elapsed 12m03s | ETA ~6m40s)."
  - "It reads only the results of the harvester.upgrade modules, never the cluster. Keys read:
    C(plan), C(phase), C(current_phase), C(progress) (upgrade_plan and the phase modules);
    C(order) and C(node_plan.nodes[].node/estimated_seconds/upgraded) (node_info); C(phase),
    C(done), C(todo), C(order) (node_gate); C(migrated), C(shutdown) (vm_evacuate); C(restored),
    C(failed) (vm_restore, finalize); and the module argument C(node) of drain_hook_ack,
    vm_evacuate, node_job, vm_restore and node_gate. A play whose name starts with a phase
    name followed by a colon, or the first task of a phase's role
    (C(harvester.upgrade.iso_download)...), marks that phase as started."
  - "ETA: during NodeUpgrade, the mean duration of the nodes finished in this run times the
    nodes left, or node_info's estimate until one node has finished; otherwise none."
  - Enable it with C(callbacks_enabled = harvester.upgrade.harvester_progress) in
    C(ansible.cfg) (or C(ANSIBLE_CALLBACKS_ENABLED)); in AWX add it to the job template's
    environment as C(ANSIBLE_CALLBACKS_ENABLED).
version_added: 0.1.0
author: harvester-upgrade contributors (!UNKNOWN)
options:
  summary:
    description: Print the per-phase summary when the playbook ends.
    type: bool
    default: true
    env:
      - name: HARVESTER_PROGRESS_SUMMARY
    ini:
      - section: harvester_progress
        key: summary
  fast_exit:
    description:
      - When the playbook's stats are sent (the run is over), make ansible-playbook's final
        exit skip Python's teardown of the interpreter (freeing every object of the run, about
        0.1 s). The exit status is the same, the exit handlers run and the output is flushed
        before the process ends.
      - Only in the C(ansible-playbook) process itself, and only when no non-daemon thread is
        left; otherwise Python's own exit.
    type: bool
    default: true
    env:
      - name: HARVESTER_PROGRESS_FAST_EXIT
    ini:
      - section: harvester_progress
        key: fast_exit
"""

# Imports after DOCUMENTATION (ansible-test validate-modules: import-before-documentation).
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

from ansible.plugins.callback import CallbackBase  # noqa: E402

from ansible_collections.harvester.upgrade.plugins.plugin_utils import bytecode  # noqa: E402

# ansible-playbook loads this plugin before anything else of the collection: what it imports
# below, and everything the collection imports later, from cached bytecode
# (plugin_utils/bytecode.py; in_process does the same when this callback is not enabled)
bytecode.install()

from ansible_collections.harvester.upgrade.plugins.plugin_utils import (  # noqa: E402
    fast_exit,
    preload,
    status_lines,
)

try:
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.phases import (
        PHASES,
    )

    PHASE_NAMES: tuple[str, ...] = tuple(p.name for p in PHASES)
    _ACTIVE_TO_NAME = {p.active: p.name for p in PHASES}
    _COMPLETED_TO_NAME = {p.completed: p.name for p in PHASES}
    _TAG_TO_NAME = {p.tag: p.name for p in PHASES}
except ImportError:  # pragma: no cover - the callback is always loaded from the collection
    PHASE_NAMES = ("Initialize", "ISODownload", "RepoCreate", "MetadataPopulate",
                   "ImagePreload", "ClusterUpgrade", "NodeUpgrade", "ImageCleanup", "Finalize")
    _ACTIVE_TO_NAME = {}
    _COMPLETED_TO_NAME = {}
    _TAG_TO_NAME = {}

# the filters and lookups that the first play's checks call (common's variable check, the
# phase roles' argument specs): looked up and loaded here, in ansible-playbook, before the
# first play, so that the checks' workers (each a new fork) do not each look them up again
# (docs/performance.md)
CHECK_FILTERS = ("harvester.upgrade.upgrade_var_errors", "harvester.upgrade.role_argument_spec")
CHECK_LOOKUPS = ("ansible.builtin.varnames", "ansible.builtin.vars")


def _load_check_filters() -> None:
    from ansible.plugins.loader import filter_loader, lookup_loader

    for loader, names in ((filter_loader, CHECK_FILTERS), (lookup_loader, CHECK_LOOKUPS)):
        for name in names:
            try:
                loader.get(name)
            except Exception:  # noqa: BLE001 - the check that calls it reports it
                continue


PREFIX = "harvester | "
NODE_MODULES = ("drain_hook_ack", "vm_evacuate", "vm_restore", "node_job", "node_gate",
                "node_cycle")


def fmt_duration(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3725`` -> ``1h02m05s``."""
    s = max(0, int(round(seconds)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"


def phase_name(value: Any) -> str | None:
    """A phase name from a phase name, a currentPhase value or a tag."""
    if not isinstance(value, str) or not value:
        return None
    if value in PHASE_NAMES:
        return value
    return _ACTIVE_TO_NAME.get(value) or _COMPLETED_TO_NAME.get(value) or _TAG_TO_NAME.get(value)


@dataclass
class Progress:
    """Everything the status line says; fed by :meth:`update` with module results."""

    plan: str | None = None
    phase: str | None = None
    phase_started: dict[str, float] = field(default_factory=dict)
    phase_finished: dict[str, float] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    node_estimates: dict[str, float] = field(default_factory=dict)
    node: str | None = None
    node_started: dict[str, float] = field(default_factory=dict)
    nodes_done: dict[str, float] = field(default_factory=dict)
    migrated: set[str] = field(default_factory=set)
    migrations: int = 0   # live migrations reported (a VM may move twice: off node 1, later
    #                       off the node it first went to); ``migrated`` counts VMs
    shutdown: set[str] = field(default_factory=set)
    restored: set[str] = field(default_factory=set)
    restore_failed: set[str] = field(default_factory=set)
    progress: str | None = None
    start: float = field(default_factory=time.monotonic)

    # -- input ---------------------------------------------------------------------------
    def enter_phase(self, name: str, now: float) -> bool:
        """Mark ``name`` as the running phase; True if that is news."""
        if name == self.phase:
            return False
        if self.phase and self.phase not in self.phase_finished:
            self.phase_finished[self.phase] = now
        self.phase = name
        self.phase_started.setdefault(name, now)
        self.progress = None
        return True

    def update(self, module: str, args: dict[str, Any], res: dict[str, Any], now: float) -> bool:
        """Fold one module result in; True if the status line changed."""
        before = self.line(now, with_time=False)
        if isinstance(res.get("plan"), str) and res["plan"]:
            self.plan = res["plan"]
        name = phase_name(res.get("phase")) if module != "node_gate" else None
        if name is None and module in ("upgrade_plan", "preflight"):
            name = "Initialize" if module == "preflight" else None
        if name:
            self.enter_phase(name, now)
        current = res.get("current_phase")
        if isinstance(current, str) and current in _COMPLETED_TO_NAME:
            done = _COMPLETED_TO_NAME[current]
            self.phase_finished.setdefault(done, now)
        if isinstance(res.get("progress"), str) and res["progress"]:
            self.progress = res["progress"].strip().splitlines()[-1][:120]
        if module in ("node_info", "node_gate"):
            order = res.get("order")
            if isinstance(order, list) and order:
                self.nodes = [str(n) for n in order]
        if module == "node_info":
            plan = res.get("node_plan")
            if isinstance(plan, dict):
                for entry in plan.get("nodes") or []:
                    if isinstance(entry, dict) and entry.get("node") and not entry.get("upgraded"):
                        self.node_estimates[str(entry["node"])] = float(
                            entry.get("estimated_seconds") or 0)
                    elif isinstance(entry, dict) and entry.get("upgraded"):
                        self.nodes_done.setdefault(str(entry.get("node")), 0.0)
        node = args.get("node")
        if module in NODE_MODULES and isinstance(node, str) and node:
            self.enter_phase("NodeUpgrade", now)
            if node != self.node:
                self.node = node
                self.node_started.setdefault(node, now)
            if node not in self.nodes:
                self.nodes.append(node)
        if module == "node_gate":
            gate_phase = res.get("phase")
            if gate_phase in _ACTIVE_TO_NAME:
                self.enter_phase(_ACTIVE_TO_NAME[gate_phase], now)
            elif gate_phase in _COMPLETED_TO_NAME:
                self.phase_finished.setdefault(_COMPLETED_TO_NAME[gate_phase], now)
            for n in res.get("done") or []:
                self.nodes_done.setdefault(str(n), now)
            if not self.nodes:
                listed = [*(res.get("done") or []), *(res.get("todo") or [])]
                self.nodes = [str(n) for n in listed]
        if module in ("vm_evacuate", "node_cycle"):
            for vm in res.get("migrated") or []:
                self.migrated.add(_vm_key(vm))
                self.migrations += 1
            for vm in res.get("shutdown") or []:
                self.shutdown.add(_vm_key(vm))
        if module == "finalize":   # the VMs it awaited after the node loop started them
            self.restored.update(_vm_key(vm) for vm in res.get("restored") or [])
            self.restore_failed.update(_vm_key(vm) for vm in res.get("failed") or [])
        # a node is done when its cycle (or restore) ended well: not a failed one
        if not res.get("failed") and (module == "vm_restore" or (
                module == "node_cycle" and not res.get("paused")
                and res.get("status") != "no_plan")):
            for vm in res.get("restored") or []:
                self.restored.add(_vm_key(vm))
            for vm in res.get("failed") or []:
                self.restore_failed.add(_vm_key(vm))
            if isinstance(node, str) and node:
                self.nodes_done.setdefault(node, now)
        return self.line(now, with_time=False) != before

    # -- output --------------------------------------------------------------------------
    def eta(self, now: float) -> float | None:
        """Seconds left in NodeUpgrade, or None."""
        if self.phase != "NodeUpgrade" or not self.nodes:
            return None
        left = [n for n in self.nodes if n not in self.nodes_done]
        if not left:
            return 0.0
        spans = [self.nodes_done[n] - self.node_started[n] for n in self.nodes_done
                 if n in self.node_started and self.nodes_done[n] > self.node_started[n]]
        if spans:
            mean = sum(spans) / len(spans)
            running = self.node if self.node in left else None
            spent = now - self.node_started[running] if running in self.node_started else 0.0
            return max(0.0, mean * len(left) - min(spent, mean))
        estimates = [self.node_estimates.get(n) for n in left]
        if all(e is not None for e in estimates) and estimates:
            return float(sum(e for e in estimates if e is not None))
        return None

    def line(self, now: float, with_time: bool = True) -> str:
        parts: list[str] = []
        if self.phase:
            index = PHASE_NAMES.index(self.phase) + 1 if self.phase in PHASE_NAMES else 0
            parts.append(f"{self.phase} {index}/{len(PHASE_NAMES)}" if index else self.phase)
        if self.plan:
            parts.insert(0, f"plan {self.plan}")
        if self.phase == "NodeUpgrade" and self.nodes:
            if self.node:
                pos = self.nodes.index(self.node) + 1 if self.node in self.nodes else 0
                parts.append(f"node {pos}/{len(self.nodes)} {self.node}")
            parts.append(f"nodes done {len(self.nodes_done)}/{len(self.nodes)}")
        if self.migrated or self.shutdown or self.restored:
            vms = f"VMs migrated {len(self.migrated)}, shut down {len(self.shutdown)}"
            pending = len(self.shutdown - self.restored)
            vms += f", restored {len(self.restored)}"
            if pending:
                vms += f" (pending restore {pending})"
            parts.append(vms)
        if self.progress and self.phase != "NodeUpgrade":
            parts.append(self.progress)
        if with_time:
            parts.append(f"elapsed {fmt_duration(now - self.start)}")
            eta = self.eta(now)
            if eta is not None:
                parts.append(f"ETA ~{fmt_duration(eta)}")
        return PREFIX + " | ".join(parts)

    def summary(self, now: float) -> list[str]:
        lines = [PREFIX + "summary" + (f" of plan {self.plan}" if self.plan else "")]
        for name in PHASE_NAMES:
            if name not in self.phase_started:
                continue
            end = self.phase_finished.get(name)
            state = (f"done in {fmt_duration(end - self.phase_started[name])}" if end
                     else f"stopped after {fmt_duration(now - self.phase_started[name])}")
            lines.append(f"{PREFIX}  {name:<17} {state}")
        if self.nodes:
            lines.append(f"{PREFIX}  nodes upgraded {len(self.nodes_done)}/{len(self.nodes)}")
        if self.migrated or self.shutdown:
            moves = (f" ({self.migrations} live migrations)"
                     if self.migrations != len(self.migrated) else "")
            lines.append(f"{PREFIX}  VMs migrated {len(self.migrated)}{moves}, shut down "
                         f"{len(self.shutdown)}, restored {len(self.restored)}, restore "
                         f"failed {len(self.restore_failed)}")
        lines.append(f"{PREFIX}  elapsed {fmt_duration(now - self.start)}")
        return lines


def _vm_key(vm: Any) -> str:
    if isinstance(vm, dict):
        ns = vm.get("namespace")
        name = vm.get("name") or vm.get("vm")
        return f"{ns}/{name}" if ns else str(name)
    return str(vm)


def _module_name(task: Any) -> str | None:
    """Short name of a harvester.upgrade module run by ``task``, else None (only where the
    task's action is resolved: a task's result)."""
    prefix = "harvester.upgrade."
    action = str(getattr(task, "action", "") or "")
    if not action.startswith(prefix):   # a short name (the play's ``collections``)
        action = str(getattr(task, "resolved_action", None) or "")
    return action[len(prefix):] if action.startswith(prefix) else None


class CallbackModule(CallbackBase):
    """Aggregate callback: adds status lines, leaves the stdout callback alone."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "harvester.upgrade.harvester_progress"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state = Progress()
        self._last_line: str | None = None
        self._broken = False
        self._started: dict[tuple[str, str], float] = {}   # (host, task) -> when it started
        _load_check_filters()

    # -- helpers -------------------------------------------------------------------------
    def _say(self, msg: str, color: str | None = None) -> None:
        self._display.display(msg, color=color)

    def _status(self) -> None:
        line = self.state.line(time.monotonic())
        if line != self._last_line:
            self._last_line = line
            self._say(line, color="cyan")

    def _guard(self, fn: Any, *args: Any) -> None:
        """Never let a progress line break a run."""
        if self._broken:
            return
        try:
            fn(*args)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            self._broken = True
            self._display.warning(f"harvester_progress disabled itself: {exc!r}")

    # -- events --------------------------------------------------------------------------
    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._guard(self._play_start, play)

    def _play_start(self, play: Any) -> None:
        name = str(play.get_name() or "").strip()
        head = name.split(":", 1)[0].strip()
        self._enter(phase_name(head))

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._guard(self._task_start, task)

    def _task_start(self, task: Any) -> None:
        role = getattr(task, "_role", None)
        if role is None:
            return
        self._enter(_TAG_TO_NAME.get(str(role.get_name()).rsplit(".", 1)[-1]))

    def _enter(self, phase: str | None) -> None:
        """A phase started (a play named after it, or its role's first task)."""
        if phase and self.state.enter_phase(phase, time.monotonic()):
            self._status()

    def v2_runner_on_start(self, host: Any, task: Any) -> None:
        self._guard(self._start, host, task)

    def _start(self, host: Any, task: Any) -> None:
        self._started[(str(host), str(task._uuid))] = time.monotonic()

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._guard(self._forget, result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._guard(self._forget, result)

    def _forget(self, result: Any) -> None:
        self._started.pop((str(result._host), str(result._task._uuid)), None)

    def v2_runner_on_ok(self, result: Any) -> None:
        self._guard(self._result, result, False, False)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._guard(self._result, result, not ignore_errors, True)

    def v2_runner_item_on_ok(self, result: Any) -> None:
        self._guard(self._outcome, result, False)

    def v2_runner_item_on_failed(self, result: Any) -> None:
        self._guard(self._outcome, result, True)

    def _outcome(self, result: Any, failed: bool) -> tuple[str, dict[str, Any],
                                                           dict[str, Any]] | None:
        """Print the lines about the task's result (status_lines.outcome); the module's
        short name, its arguments and the result (with ``failed`` put back: callbacks get
        results without it, the event says it) for the status line."""
        module = _module_name(result._task)
        if module is None:
            return None
        res = dict(result._result) if isinstance(result._result, dict) else {}
        if failed:
            res["failed"] = True
        args = (res.get("invocation") or {}).get("module_args") or {}
        if not isinstance(args, dict) or not args:
            args = result._task.args if isinstance(result._task.args, dict) else {}
        # not a loop's list of item results, nor a result hidden by the task's no_log
        if not isinstance(res.get("results"), list) and "censored" not in res:
            fields = getattr(result, "task_fields", None)
            if fields is None:   # ansible-core < 2.19
                fields = getattr(result, "_task_fields", None) or {}
            started = self._started.get((str(result._host), str(result._task._uuid)))
            seconds = time.monotonic() - started if started is not None else 0.0
            status_lines.show(self._display, status_lines.outcome(
                module, args, res, bool(fields.get("check_mode")), seconds))
        return module, args, res

    def _result(self, result: Any, failed: bool, event_failed: bool) -> None:
        seen = self._outcome(result, event_failed)
        self._forget(result)
        if seen is None:
            return
        module, args, res = seen
        now = time.monotonic()
        if self.state.update(module, args, res, now):
            self._status()
        if failed:
            where = [f"phase {self.state.phase}"] if self.state.phase else []
            if isinstance(args.get("node"), str):
                where.append(f"node {args['node']}")
            msg = str(res.get("msg") or "").strip().splitlines()
            self._say(f"{PREFIX}FAILED ({', '.join(where) or module}) in task "
                      f"'{result._task.get_name()}'" + (f": {msg[0][:200]}" if msg else ""),
                      color="red")

    def v2_playbook_on_start(self, playbook: Any) -> None:
        # the collection's imports for its module tasks done beside the run's first worker
        # (common's variable check) instead of after it (plugin_utils/preload.py)
        self._guard(preload.start_after_next_fork)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._guard(self._stats)
        if self.get_option("fast_exit"):   # the run is over (plugin_utils/fast_exit.py)
            self._guard(fast_exit.install)

    def _stats(self) -> None:
        if not self.get_option("summary") or not self.state.phase_started:
            return
        for line in self.state.summary(time.monotonic()):
            self._say(line, color="cyan")
