"""Running one phase from a module: find the plan, decide, act, wait, record.

Every phase module calls :func:`run_phase` with its phase and two functions from the
phase's ``phase_<name>`` module: ``act(ctx) -> Step`` (idempotent get-or-create, then wait)
and ``verify(ctx) -> str`` (cheap check of a phase completed earlier). :func:`run_phase`:

1. resolves the plan (``plan`` option, else the active one); without one it reports and
   stops (in check mode: what the phase would do);
2. compares the plan's ``currentPhase`` with the phase (:func:`phases.relation`):
   *done* → ``verify``; *not reached* → says which phase must run first, unless ``force``;
   *next* → enters the phase (``PhaseTransition``); *active* → resumes it;
3. runs ``act``; ``done`` completes the phase (``PhaseCompleted``); ``pending`` returns so
   the action plugin can print progress and call again; ``failed`` or a wait that reaches the
   deadline sets the plan ``Failed`` (condition + ``UpgradeFailed`` Event) and fails the
   task with the same message; an API error marks the plan Degraded (``ReconcileError``) and
   fails the task, leaving the phase to be resumed by a re-run.

The module result always has ``plan``, ``phase``, ``status`` (``completed``, ``verified``,
``pending``, ``not_reached``, ``no_plan``, ``terminal``), ``proceed``, ``msg``,
``actions`` (what was or would be done), ``current_phase`` and ``events``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    lock,
    phases,
    plan_status,
    waiting,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
    NotServed,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanError,
    PlanWriter,
    resolve,
)


@dataclass
class Step:
    """Outcome of ``act``: ``done``, ``pending`` (slice over, call again) or ``failed``."""

    state: str
    message: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


class PhaseFailed(Exception):
    """The phase failed for good; the plan becomes Failed with this message."""


class Pending(Exception):
    """A wait slice ended before the deadline; carries the last progress line."""

    def __init__(self, progress: str) -> None:
        self.progress = progress
        super().__init__(progress)


@dataclass
class Context:
    """What ``act``/``verify`` get: the cluster, the plan writer and the module options."""

    kube: Kube
    writer: PlanWriter
    params: dict[str, Any]
    check_mode: bool
    deadline: float
    slice_seconds: float | None
    actions: list[str] = field(default_factory=list)
    progress: str = ""
    # the phase was entered by this call: what it creates is not there yet (ensure creates
    # first); a resumed or verified phase finds its objects (ensure reads first)
    entered: bool = False
    # started by the previous phase's call (``then``): create what the phase creates, then
    # leave the waiting to the phase's own call (its first wait ends the call as a slice)
    start_only: bool = False
    # objects :meth:`existing` read as absent: :meth:`ensure` creates them without a read
    _absent: set[tuple[str, str, str, str | None]] = field(default_factory=set, init=False,
                                                           repr=False)

    @property
    def plan(self) -> dict[str, Any]:
        return self.writer.plan

    @property
    def name(self) -> str:
        return self.writer.name

    @property
    def status(self) -> dict[str, Any]:
        return self.writer.status

    def did(self, text: str) -> None:
        """Record an action (``would …`` in check mode)."""
        self.actions.append(("would " + text) if self.check_mode else text)

    def remaining(self) -> float:
        return self.deadline - time.time()

    @property
    def reads_first(self) -> bool:
        """Objects are read before they are created: check mode, or a phase this call did
        not enter (resumed or verified: its objects are there)."""
        return self.check_mode or not self.entered

    def _read(self, api_version: str, kind: str, name: str,
              namespace: str | None) -> dict[str, Any] | None:
        """The object as it is now; as read, it answers the wait that follows on it
        (:meth:`client.Kube.seed`), except in check mode."""
        current = self.kube.get(api_version, kind, name, namespace)
        if current is not None and not self.check_mode:
            self.kube.seed(current)
        return current

    def existing(self, api_version: str, kind: str, name: str,
                 namespace: str | None = None) -> dict[str, Any] | None:
        """An object :meth:`ensure` is about to be asked for, as it is now, for a phase that
        builds it from further reads (the nodes, the repository's files) it can skip when the
        object is there: in a phase this call entered, ``None`` without a read (ensure
        creates first); otherwise the object read now (answering the wait on it, as ensure's
        own read does) or ``None``, and then ensure creates it without reading it again."""
        if not self.reads_first:
            return None
        current = self._read(api_version, kind, name, namespace)
        if current is None:
            self._absent.add((api_version, kind, name, namespace))
        return current

    def ensure(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The object as it is, or created (recorded); ``None`` in check mode if absent.

        In a phase this call entered (:attr:`entered`), created first and read only when
        that fails (it exists: 409, or a webhook refused a duplicate), one request where a
        read first took two; otherwise (a resumed or verified phase, whose objects are
        there) read first. What was created, or read as it is, answers the wait that follows
        on it by name (:meth:`client.Kube.seed`: the wait watches from its resourceVersion,
        so no change after the read is missed)."""
        meta = obj["metadata"]
        api_version, kind, name, ns = obj["apiVersion"], obj["kind"], meta["name"], \
            meta.get("namespace")
        where = f" in {ns}" if ns else ""
        read_first = self.reads_first
        if read_first:
            key = (api_version, kind, name, ns)
            if key in self._absent:   # existing() read it as absent moments ago
                self._absent.discard(key)
                current = None
            else:
                current = self._read(api_version, kind, name, ns)
            if current is not None:
                return current
            self.did(f"create {kind} {name}{where}")
            if self.check_mode:
                return None
        try:
            created = self.kube.create(obj)
        except ApiError as exc:
            if read_first:   # read as absent just now: only a 409 says it was made since
                if exc.status == 409:
                    return self.kube.get(api_version, kind, name, ns)
                raise
            if not 400 <= exc.status < 500 or isinstance(exc, NotServed):
                raise
            current = self.kube.get(api_version, kind, name, ns)
            if current is None:   # not there: the refusal was about the object itself
                raise
            return current
        if not read_first:
            self.did(f"create {kind} {name}{where}")
        self.kube.seed(created)
        return created

    def wait(self, sources: list[waiting.Source], predicate: waiting.Predicate, what: str
             ) -> waiting.Verdict:
        """Wait by watch; raises :class:`Pending` at the end of a slice and
        :class:`waiting.WaitTimeout` at the deadline.

        The Progressing condition's message says what is awaited (as the toolkit's phase
        messages do, e.g. ``upgrade-repo deployment not ready``), with the last progress
        line at the end of each slice; completing the phase clears it."""
        self._say(f"waiting for {what}")
        if self.start_only:
            raise Pending("")
        verdict: waiting.Verdict = self.kube.wait(
            sources, predicate, what=what, timeout=max(0.0, self.remaining()),
            slice_seconds=self.slice_seconds)
        self.progress = verdict.progress
        if not verdict:   # the slice ended first
            self._say(f"waiting for {what}"
                      + (f": {verdict.progress}" if verdict.progress else ""))
            raise Pending(verdict.progress)
        return verdict

    def _say(self, message: str) -> None:
        if self.check_mode:
            return
        w = self.writer
        w.update(lambda s: plan_status.progress(s, message, w.now(), w.generation))


Act = Callable[[Context], Step]
Verify = Callable[[Context], str]
# a phase's entry (run_phase's ``entry``): it may hold status fields to be written with the
# entry (PlanWriter.hold) and returns what the phase's first :meth:`Context.wait` awaits
# (its ``what``), or None when the phase may not wait
Entry = Callable[[Context], "str | None"]


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def phase_deadline(p: dict[str, Any], started: float) -> float:
    """The phase's deadline (epoch seconds): the action's absolute ``deadline`` when it passed
    one, else ``timeout`` seconds from ``started``."""
    return float(p.get("deadline") or (started + int(p.get("timeout") or 3600)))


@dataclass(frozen=True)
class PhaseActions:
    """What a phase module passes to :func:`run_phase` for its phase (phase_table.TABLE)."""

    act: Act
    verify: Verify | None = None
    entry: Entry | None = None
    # the act writes the phase's entry itself (NodeUpgrade: node_phase.enter_phase), so a
    # call that starts it (start_chain) writes none of its own
    enters: bool = False
    # ``verify`` only reads: a call that finds the phase done writes nothing, and does not
    # take the lock (lock.hold is for the calls that write)
    verify_reads_only: bool = False
    # the options of the phase's ``then`` entry, checked (and converted) before the call
    # changes anything: raises ValueError naming what is wrong
    options: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def _enter(ctx: Context, phase: phases.Phase, entry: Entry | None, write: bool = True
           ) -> None:
    """Enter ``phase``: what ``entry`` holds and the Progressing message of the wait that
    follows, written with the entry (none of it when the act writes the entry itself,
    ``write`` false); the context then knows the phase was entered by this call."""
    if write:
        first = entry(ctx) if entry is not None and not ctx.check_mode else None
        said = f"waiting for {first}" if first else ""
        w = ctx.writer
        w.update(lambda s: plan_status.start_phase(s, phase, w.now(), w.generation, said))
    ctx.did(f"enter phase {phase.active}")
    ctx.entered = True


def _complete(writer: PlanWriter, phase: phases.Phase) -> None:
    writer.update(lambda s: plan_status.complete_phase(s, phase, writer.now(),
                                                       writer.generation))


def chain_items(p: dict[str, Any], phase: phases.Phase,
                table: dict[str, PhaseActions] | None) -> list[tuple[phases.Phase,
                                                                     dict[str, Any]]]:
    """``then`` checked: the phases it names, each after the one before (``phase`` first)
    and one that ``table`` can run; anything else is refused before the call changes
    anything (ValueError)."""
    out: list[tuple[phases.Phase, dict[str, Any]]] = []
    before = phase
    for item in p.get("then") or []:
        name = str((item or {}).get("phase") or "")
        try:
            nxt = phases.get(name)
        except KeyError:
            raise ValueError(f"then: unknown phase {name!r}") from None
        if table is None or nxt.name not in table:
            raise ValueError(f"then: {nxt.tag} cannot be started by another phase's call")
        if nxt.index != before.index + 1:
            raise ValueError(f"then: {nxt.tag} does not follow {before.tag}")
        options = {k: v for k, v in item.items() if k != "phase"}
        check = table[nxt.name].options
        try:
            out.append((nxt, check(options) if check is not None else options))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"then: {nxt.tag}: {exc}") from None
        before = nxt
    return out


def start_chain(kube: Kube, writer: PlanWriter, p: dict[str, Any],
                chain: list[tuple[phases.Phase, dict[str, Any]]],
                table: dict[str, PhaseActions]) -> list[dict[str, Any]]:
    """Start the phases of ``chain`` (:func:`chain_items`) after the call's own phase has
    completed: each is entered and acted on as its own call would (entry, start, act), but
    its first wait ends it (:attr:`Context.start_only`) and leaves the phase active for its
    own call to resume; a phase that completes without waiting is completed, and the next
    one started. Stops at the first phase the plan is not ready for."""
    started: list[dict[str, Any]] = []
    for nxt, options in chain:
        if phases.relation(writer.status.get("currentPhase"), nxt) != "next":
            break
        fns = table[nxt.name]
        params = {"plan": writer.name, "force": False, "deadline": None,
                  "timeout": int(options.get("timeout") or p.get("timeout") or 3600),
                  "progress_interval": p.get("progress_interval"), **options}
        ctx = Context(kube, writer, params, False, phase_deadline(params, time.time()), None,
                      start_only=True)
        _enter(ctx, nxt, fns.entry, write=not fns.enters)
        try:
            step = fns.act(ctx)
        except Pending:
            step = Step("pending")
        except ApiError as exc:   # the task's message names the phase it was working on
            exc.message = f"{nxt.name}, started after it: {exc.message}"
            exc.args = (exc.message,)
            raise
        if step.state == "failed":
            raise PhaseFailed(f"{nxt.name}: {step.message}")
        if step.state == "pending":
            writer.flush()
            started.append({**step.facts, "phase": nxt.name, "status": "started",
                            "actions": ctx.actions})
            break
        _complete(writer, nxt)
        started.append({**step.facts, "phase": nxt.name, "status": "completed",
                        "actions": ctx.actions, "msg": step.message or f"{nxt.name} completed"})
    return started


def run_phase(module: Any, phase: phases.Phase, act: Act, verify: Verify | None = None,
              kube: Kube | None = None, entry: Entry | None = None,
              table: dict[str, PhaseActions] | None = None,
              verify_reads_only: bool = False) -> None:
    """Entry point of a phase module (exits through ``exit_json``/``fail_json``).

    ``entry``: called as this call enters the phase, before the entry is written. What it
    holds (status fields known before anything is created, e.g. ``isoImageID``, which the
    toolkit also writes as it enters ISODownloading) and the Progressing message of the
    wait that follows the phase's create (``waiting for <what it returns>``) are written
    with the entry, so that the wait's own write of the same message is none: one status
    write where there were two or three, the phase still entered before anything is
    created."""
    p = module.params
    started = time.time()
    result: dict[str, Any] = {"changed": False, "phase": phase.name, "proceed": False,
                              "actions": [], "events": [], "plan": None}
    deadline = phase_deadline(p, started)
    interval = p.get("progress_interval")
    slice_seconds = float(interval) if interval and p.get("deadline") else None
    writer: PlanWriter | None = None
    try:
        chain = chain_items(p, phase, table)
    except ValueError as exc:
        module.fail_json(**_timed(result, started), msg=str(exc))
    try:
        kube = kube or Kube.from_module(module)
        plan = resolve(kube, p.get("plan"))
        if plan is None:
            what = f'UpgradePlan "{p["plan"]}"' if p.get("plan") else "active UpgradePlan"
            msg = f"no {what}; {phase.name} would {phase.summary}" if module.check_mode else (
                f"no {what} to run {phase.name} on; run the whole playbook (or --tags "
                "preflight) to create one")
            module.exit_json(**_timed(result, started), status="no_plan", msg=msg)
        current = (plan.get("status") or {}).get("currentPhase")
        rel = phases.relation(current, phase)
        # a phase found done is only verified: no lock when the verification writes nothing
        reads_only = rel == "done" and (verify is None or verify_reads_only)
        if rel not in ("succeeded", "failed") and not reads_only:
            lock.hold(kube, module)   # before any write; fails at once if another run holds it
        writer = PlanWriter(kube, plan, module.check_mode)
        result["plan"] = writer.name
        ctx = Context(kube, writer, p, module.check_mode, deadline, slice_seconds)
        if rel in ("succeeded", "failed"):
            extra = (f": {plan_status.failure_message(plan)}" if rel == "failed" else "")
            msg = f"UpgradePlan {writer.name} is {current}{extra}"
            if rel == "failed":
                module.fail_json(**_timed(result, started), status="terminal",
                                 current_phase=current, msg=msg + "; start a new plan to retry")
            module.exit_json(**_timed(result, started), status="terminal",
                             current_phase=current, msg=msg)
        if rel == "done":
            note = verify(ctx) if verify else ""
            result.update(changed=writer.changed or bool(ctx.actions), proceed=True,
                          actions=ctx.actions, status="verified", current_phase=current,
                          msg=f"{phase.name} already completed" + (f"; {note}" if note else ""))
            module.exit_json(**_timed(result, started))
        if rel == "not_reached" and not p.get("force"):
            nxt = phases.next_to_run(current)
            hint = f" (next: {nxt.name}, tag {nxt.tag})" if nxt else ""
            module.exit_json(**_timed(result, started), status="not_reached",
                             current_phase=current, msg=(
                f"UpgradePlan {writer.name} is at {current or 'the start'}{hint}; "
                f"{phase.name} runs only after {phases.previous(phase).completed}. Run the "
                f"playbook without --tags to continue in order, or set force=true to run "
                f"{phase.name} now."))
        if rel in ("next", "not_reached"):
            _enter(ctx, phase, entry)
        try:
            step = act(ctx)
        except Pending as pend:
            step = Step("pending", pend.progress)
        if step.state == "failed":
            raise PhaseFailed(step.message)
        result.update(step.facts)
        if step.state == "pending":
            writer.flush()   # what the phase recorded so far (PlanWriter.hold)
            result.update(status="pending", progress=step.message, msg=step.message)
        else:
            _complete(writer, phase)
            result.update(status="completed", proceed=True,
                          msg=step.message or f"{phase.name} completed")
            if chain and table is not None and not module.check_mode:
                result["started"] = start_chain(kube, writer, p, chain, table)
    except waiting.WaitTimeout as exc:
        _fail(module, writer, result, f"{phase.name}: {exc}", awaited=exc.what,
              last_seen=exc.last_seen)
    except PhaseFailed as exc:
        _fail(module, writer, result, str(exc))
    except (ApiError, PlanError) as exc:
        msg = f"{phase.name}: {exc}"
        if writer is not None and not module.check_mode:
            try:
                writer.degrade(str(exc))
            except (ApiError, PlanError):
                pass
        module.fail_json(**_finish(result, writer, started),
                         msg=msg + " (the plan keeps its phase; re-run to resume)")
    result["actions"] = ctx.actions
    module.exit_json(**_finish(result, writer, started))


def _timed(result: dict[str, Any], started: float) -> dict[str, Any]:
    """``result`` with ``duration`` (every exit of a phase module returns it)."""
    result["duration"] = _duration(time.time() - started)
    return result


def _finish(result: dict[str, Any], writer: PlanWriter | None, started: float
            ) -> dict[str, Any]:
    if writer is not None:
        result["changed"] = result.get("changed") or writer.changed
        result["current_phase"] = writer.status.get("currentPhase")
        result["events"] = writer.recorder.emitted
    result["duration"] = _duration(time.time() - started)
    return result


def _fail(module: Any, writer: PlanWriter | None, result: dict[str, Any], message: str,
          **extra: Any) -> None:
    if writer is not None:
        try:
            writer.fail(message)
        except (ApiError, PlanError) as exc:
            message += f" (could not record the failure in the plan: {exc})"
    module.fail_json(**_finish(result, writer, time.time()), msg=message, **extra)
