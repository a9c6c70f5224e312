"""Reading and writing the UpgradePlan: lookup, conflict-safe status updates, Events.

:class:`PlanWriter` owns one plan during a module run, for the cluster phases and the node
loop alike. :meth:`PlanWriter.update` applies a mutation (a function over a deep copy of
``status`` returning the Events to emit, usually a :mod:`plan_status` transition) and PUTs
the status subresource; on 409 Conflict it re-reads the plan and applies the mutation again
(bounded). Events are recorded only after the write succeeded. A change that no cluster
action follows before the writer's next status write is held (:meth:`PlanWriter.hold`) and
goes with that write. In check mode nothing is written and the Events are only listed. The
node loop's per-node states (:meth:`PlanWriter.set_node_state`, forward-only by
:mod:`node_states`) are conditional merge patches of ``status.nodeUpgradeStatuses`` on the
plan as it is now.

The active plan (docs/protocol.md "The active plan"): the one with ``Progressing=True``, the
newest if several. upgrade-toolkit sets ``Progressing=True`` on the first reconcile of a plan
and ``Progressing=False`` exactly when the plan enters a terminal phase (Succeeded, Failed),
so this is the plan its controller works on; a plan nobody has initialized yet is not active
(``upgrade_plan`` adopts it explicitly). Lookup: :func:`find_active`, :func:`resolve` (by
name, or the active one; ``None`` when there is none) and :func:`find_plan` (the node loop's:
the same, but an error saying why when there is no plan to work on).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    cluster_id,
    node_states,
    plan_status,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
    json_copy,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    ConflictsExhausted,
    NodeLoopError,
    NotServed,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.events import (
    Recorder,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.retry import (
    retry_on_conflict,
)

# (the result type is quoted: pylint checks module_utils for Python 3.8, where `X | None`
# outside an annotation does not evaluate)
Mutation = Callable[[dict[str, Any]], "list[plan_status.EventSpec] | None"]
MAX_CONFLICT_RETRIES = 10


# the source component of the node loop's own Events (restore-vm and detector Events name
# theirs, as upgrade-toolkit's do)
NODE_EVENT_COMPONENT = "harvester-upgrade"


class PlanError(NodeLoopError):
    """The plan cannot be found/created/updated as asked; the message says why."""


class NoActivePlan(NodeLoopError):
    """No plan was named and none is active: there is no upgrade for the node loop to run."""


def list_plans(kube: Kube) -> list[dict[str, Any]]:
    try:
        return kube.list(c.PLAN_API_VERSION, c.PLAN_KIND)
    except NotServed:
        return []


def _created(plan: dict[str, Any]) -> str:
    return str((plan.get("metadata") or {}).get("creationTimestamp") or "")


def find_active(kube: Kube, plans: list[dict[str, Any]] | None = None
                ) -> dict[str, Any] | None:
    """The active plan: ``Progressing=True`` (the newest, if several; see the module doc)."""
    active = [p for p in (plans if plans is not None else list_plans(kube))
              if plan_status.is_active(p)]
    return same_cluster(kube, sorted(active, key=_created)[-1] if active else None)


def resolve(kube: Kube, name: str | None) -> dict[str, Any] | None:
    """The plan called ``name``, or the active one when no name is given."""
    if name:
        try:
            return same_cluster(kube, kube.get(c.PLAN_API_VERSION, c.PLAN_KIND, name))
        except NotServed:
            return None
    return find_active(kube)


def find_plan(kube: Kube, name: str | None) -> dict[str, Any]:
    """The plan called ``name``, else the active one, for the node loop: an error says why
    there is none (:class:`NoActivePlan` when nothing is being upgraded; a plan that failed
    with the nodes part-way upgraded names itself and how to go on)."""
    try:
        kube.resource(c.PLAN_API_VERSION, c.PLAN_KIND)
    except NotServed:
        if name:
            raise NodeLoopError(f"UpgradePlan {name} not found: the UpgradePlan CRD is not "
                                "installed") from None
        raise NoActivePlan("the UpgradePlan CRD is not installed: no upgrade in progress; "
                           "start one with upgrade.yml") from None
    if name:
        plan = resolve(kube, name)
        if plan is None:
            raise NodeLoopError(f"UpgradePlan {name} not found")
        return plan
    plans = list_plans(kube)
    active = find_active(kube, plans)
    if active is not None:
        return active
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        plan_resume,
    )
    failed = plan_resume.resumable(plans)
    if failed is not None:   # not "nothing to do": the roll stopped part-way
        raise NodeLoopError(
            f"UpgradePlan {failed['metadata']['name']} failed in "
            f"{plan_resume.failed_in(failed)} and the nodes are part-way upgraded: "
            f"{plan_resume.failure_message(failed)}. Fix the cause and run upgrade.yml "
            "again (its first step, Initialize, continues the plan; docs/recovery.md)")
    raise NoActivePlan("no active UpgradePlan found; start one with upgrade.yml")


def same_cluster(kube: Kube, plan: dict[str, Any] | None) -> dict[str, Any] | None:
    """``plan``, after checking it was recorded on this cluster (:mod:`cluster_id`);
    :class:`PlanError` otherwise."""
    try:
        cluster_id.check(kube, plan)
    except cluster_id.ClusterMismatch as exc:
        raise PlanError(str(exc)) from None
    return plan


def owner_reference(plan: dict[str, Any]) -> dict[str, Any]:
    """ownerReference (controller=true) that ties an object to the plan (GC on delete)."""
    meta = plan["metadata"]
    return {"apiVersion": c.PLAN_API_VERSION, "kind": c.PLAN_KIND, "name": meta["name"],
            "uid": meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def labels(plan: dict[str, Any], component: str) -> dict[str, str]:
    return {c.LABEL_PLAN: plan["metadata"]["name"], c.LABEL_COMPONENT: component}


class PlanWriter:
    """Conflict-safe writes to one plan's status, plus its Events.

    ``check_mode`` defaults to the client's. ``events`` lists the Events of the node loop's
    writes (:meth:`set_node_state`, :meth:`event`, :meth:`update_status`) for its modules'
    results; ``recorder.emitted`` those of :meth:`update`."""

    def __init__(self, kube: Kube, plan: dict[str, Any], check_mode: bool | None = None,
                 recorder: Recorder | None = None,
                 component: str = NODE_EVENT_COMPONENT) -> None:
        self.kube = kube
        self.plan = plan
        self.check_mode = bool(kube.check_mode if check_mode is None else check_mode)
        self.recorder = recorder or Recorder(kube, plan)
        self.component = component
        self.changed = False
        self.events: list[dict[str, str]] = []
        self._held: list[Mutation] = []   # written with the next status write (hold())
        # Events kept back by hold_events() until send_events(), with their components
        self._held_events: list[tuple[plan_status.EventSpec, str | None]] | None = None

    @property
    def name(self) -> str:
        return str(self.plan["metadata"]["name"])

    @property
    def status(self) -> dict[str, Any]:
        return self.plan.setdefault("status", {})

    @property
    def spec(self) -> dict[str, Any]:
        return self.plan.get("spec") or {}

    @property
    def annotations(self) -> dict[str, str]:
        return (self.plan.get("metadata") or {}).get("annotations") or {}

    @property
    def generation(self) -> int | None:
        gen = (self.plan.get("metadata") or {}).get("generation")
        return int(gen) if gen is not None else None

    def refresh(self) -> dict[str, Any]:
        fresh = self.kube.get(c.PLAN_API_VERSION, c.PLAN_KIND, self.name)
        if fresh is None:
            raise PlanError(f"UpgradePlan {self.name} was deleted")
        self.plan = fresh
        self.recorder.plan = fresh
        return fresh

    def update(self, mutate: Mutation) -> bool:
        """Apply ``mutate`` to the status and persist it; emit its Events. Returns whether
        the status changed."""
        def attempt() -> bool:
            before = json_copy(self.plan.get("status") or {})
            after = json_copy(before)
            events: list[plan_status.EventSpec] = []
            for held in self._held:   # applied again on the plan as it is after a conflict
                events += held(after) or []
            events += mutate(after) or []
            if after == before:
                self._held = []
                for ev in events:
                    self.recorder.emit(ev, self.check_mode)
                return False
            if self.check_mode:
                self.plan["status"] = after
                self._held = []
                for ev in events:
                    self.recorder.emit(ev, True)
                self.changed = True
                return True
            body = json_copy(self.plan)
            body["status"] = after
            self.plan = self.kube.replace_status(body)
            self._held = []
            self.recorder.plan = self.plan
            self.changed = True
            for ev in events:
                self.recorder.emit(ev)
            return True

        try:
            # after a conflict, decide again on the plan as it is now
            return retry_on_conflict(attempt, MAX_CONFLICT_RETRIES,
                                     f"UpgradePlan {self.name} status", reread=self.refresh)
        except ConflictsExhausted as exc:
            raise PlanError(f"UpgradePlan {self.name}: status update kept conflicting") from exc

    def hold(self, mutate: Mutation) -> None:
        """Apply ``mutate`` with this writer's next status write (:meth:`update` and what
        builds on it) instead of in a request of its own, and emit its Events after that
        write. Only for a change that no cluster action follows before that write (a
        phase's result recorded just before the phase completes, or before the progress
        message of the wait that follows): a run killed in between has written neither,
        and the re-run, which resumes the phase, finds the result again. Until then
        :attr:`status` does not show it; :meth:`flush` writes it on its own. In check mode
        it is applied at once (nothing is written anyway)."""
        if self.check_mode:
            self.update(mutate)
            return
        self._held.append(mutate)

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def flush(self) -> bool:
        """Write what :meth:`hold` holds, if anything; returns whether the status changed."""
        return self.update(lambda s: None) if self._held else False

    # -- common transitions -------------------------------------------------------------------
    def now(self) -> str:
        return plan_status.now_iso()

    def set_fields(self, fields: dict[str, Any], *, hold: bool = False) -> bool:
        """Set top-level status fields (``None`` removes one); with ``hold``, in the next
        status write (:meth:`hold`: returns False)."""
        def mutate(status: dict[str, Any]) -> None:
            for key, value in fields.items():
                if value is None:
                    status.pop(key, None)
                else:
                    status[key] = value
        if hold:
            self.hold(mutate)
            return False
        return self.update(mutate)

    def fail(self, message: str) -> bool:
        return self.update(lambda s: plan_status.fail(s, message, self.now(), self.generation))

    def degrade(self, error: str) -> bool:
        return self.update(lambda s: plan_status.degrade(s, error, self.now(),
                                                         self.generation))

    def set_node_states(self, states: dict[str, Any], *, hold: bool = False) -> bool:
        """Cluster-phase node states (forward-only); ``hold`` as for :meth:`set_fields`."""
        def mutate(status: dict[str, Any]) -> list[plan_status.EventSpec]:
            plan_status.set_node_states(status, states)
            return []
        if hold:
            self.hold(mutate)
            return False
        return self.update(mutate)

    def owner_reference(self) -> dict[str, Any]:
        return owner_reference(self.plan)

    def adopt(self, plan: dict[str, Any]) -> None:
        """The plan as a write of its metadata elsewhere answered (it is newer than ours)."""
        self.plan = plan
        self.recorder.plan = plan

    def labels(self, component: str = c.COMPONENT_NODE_UPGRADE) -> dict[str, str]:
        return labels(self.plan, component)

    def patch_annotations(self, annotations: dict[str, str | None]) -> None:
        """Merge-patch metadata annotations (``None`` removes one)."""
        if self.check_mode:
            return
        self.flush()   # a held status change is not left behind a later write
        self.plan = self.kube.patch(c.PLAN_API_VERSION, c.PLAN_KIND, self.name,
                                    {"metadata": {"annotations": annotations}})
        self.changed = True

    # -- the node loop ------------------------------------------------------------------------
    def node_state(self, node: str) -> str:
        return ((self.status.get("nodeUpgradeStatuses") or {}).get(node) or {}).get(
            "state") or ""

    def set_node_state(self, node: str, state: str, reason: str = "", message: str = "",
                       *, event: bool = True) -> bool:
        """Record ``node``'s state on the plan as it is now, unless that moves it backwards
        (:func:`node_states.set_state`); returns True when the status changed. Conflict-safe;
        an Event per change unless ``event`` is false."""
        self.flush()   # a held status change is not left behind a later write

        def attempt() -> bool:
            plan = self.refresh()
            statuses = dict((plan.get("status") or {}).get("nodeUpgradeStatuses") or {})
            if not node_states.set_state(statuses, node, state, reason, message):
                return False
            if self.check_mode:
                return True
            self._patch_status(plan, {"nodeUpgradeStatuses": statuses})
            if event:
                text = f"Node {node}: {state}" + (f" ({reason})" if reason else "") + (
                    f": {message}" if message else "")
                self.event(f"Node{state}", text, warning=state in node_states.FAILED_STATES)
            return True

        try:
            return retry_on_conflict(attempt, MAX_CONFLICT_RETRIES, f"UpgradePlan {self.name}")
        except ConflictsExhausted as exc:
            raise PlanError(f"could not update UpgradePlan {self.name}: too many "
                            "conflicts") from exc

    def set_progress_message(self, message: str) -> None:
        """Progressing condition message while NodeUpgrading (e.g. paused nodes); given up
        quietly when every write conflicts (the next state change sets it again)."""
        self.flush()   # a held status change is not left behind a later write

        def attempt() -> None:
            plan = self.refresh()
            conds = list((plan.get("status") or {}).get("conditions") or [])
            changed = False
            for cond in conds:
                if cond.get("type") == "Progressing" and cond.get("message") != message:
                    cond["message"] = message
                    changed = True
            if changed and not self.check_mode:
                self._patch_status(plan, {"conditions": conds})

        try:
            retry_on_conflict(attempt, MAX_CONFLICT_RETRIES, f"UpgradePlan {self.name}")
        except ConflictsExhausted:
            pass

    def _patch_status(self, plan: dict[str, Any], status: dict[str, Any]) -> None:
        """Merge-patch the status, conditional on the plan's resourceVersion (409 if stale)."""
        body = {"metadata": {"resourceVersion": plan["metadata"]["resourceVersion"]},
                "status": status}
        self.plan = self.kube.patch(c.PLAN_API_VERSION, c.PLAN_KIND, self.name, body,
                                    subresource="status")
        self.recorder.plan = self.plan

    def event(self, reason: str, message: str, *, warning: bool = False,
              component: str | None = None, namespace: str = c.EVENT_NS) -> None:
        """An Event of the node loop about the plan (cluster-scoped object ⇒ namespace
        ``default``, or ``harvester-system`` for the detector/restore-vm events, as
        upgrade-toolkit does), through the recorder: an identical repeat is aggregated."""
        self.events.append({"reason": reason, "message": message})
        spec = plan_status.EventSpec("Warning" if warning else "Normal", reason,
                                     message[:1024], namespace)
        if self._held_events is not None:
            self._held_events.append((spec, component))
            if not warning:
                return
            # a failure is told at once, after what was held (in their order)
            held, self._held_events = self._held_events, []
        else:
            held = [(spec, component)]
        self._emit(held)

    def hold_events(self) -> None:
        """Keep the Normal Events of :meth:`event` (and of the writes that make one) back
        until :meth:`send_events`: for a reaction whose first action must not wait for the
        Events of the writes before it (a node's post-drain answer, the next node's first
        migrations: node_cycle). A Warning (a failure) sends what was held and itself at
        once. Events say what happened; nothing reads them back, so a run stopped before
        they are sent loses only them."""
        if self._held_events is None:
            self._held_events = []

    @contextlib.contextmanager
    def events_held(self) -> Iterator[None]:
        """:meth:`hold_events` for the writes inside, :meth:`send_events` at its end — unless
        the Events are held already (the holder sends them)."""
        if self._held_events is not None:
            yield
            return
        self.hold_events()
        try:
            yield
        finally:
            self.send_events()

    def send_events(self) -> None:
        """Send the Events :meth:`hold_events` kept back, in their order; stop holding."""
        held, self._held_events = self._held_events, None
        self._emit(held or [])

    def _emit(self, events: list[tuple[plan_status.EventSpec, str | None]]) -> None:
        for spec, component in events:
            self.recorder.plan = self.plan
            self.recorder.emit(spec, self.check_mode, component or self.component)

    def fail_node(self, node: str, state: str, reason: str, message: str) -> None:
        """Record a node failure and fail the plan ("node <n> upgrade failed: <msg>"); when
        the node is cordoned the message says why it stays so and how to go on."""
        held = self._held_note(node)
        self.set_node_state(node, state, reason, message + held)
        self.fail_plan(f"node {node} upgrade failed: {message}{held}")

    def _held_note(self, node: str) -> str:
        """Rancher cordoned the node for its drain and keeps it cordoned (and its drain hook
        waiting) until the node's upgrade is finished: say so in the failure, as nothing
        else in the cluster tells why the node stays unschedulable."""
        try:
            obj = self.kube.get(*c.NODE, node)
        except Exception:  # noqa: BLE001 - the note is extra; the failure is recorded anyway
            return ""
        if not ((obj or {}).get("spec") or {}).get("unschedulable"):
            return ""
        return (f" [node {node} stays cordoned: Rancher holds it, waiting for its drain hook, "
                "until its upgrade finishes; fix the cause and run the same command again to "
                "continue (docs/recovery.md)]")

    def update_status(self, mutate: Mutation, *, reread: bool = True) -> bool:
        """:meth:`update` on the plan as it is now (re-read first, unless ``reread`` is
        false: the caller holds the plan as read moments ago, and a conflict re-reads it
        anyway), as the node loop's writes are; its Events are listed in :attr:`events`
        too."""
        specs: list[Any] = []

        def recorded(status: dict[str, Any]) -> Any:
            specs[:] = mutate(status) or []
            return specs

        if reread:
            self.refresh()
        changed = self.update(recorded)
        if changed:   # listed in the module result, as the node-state Events are
            self.events += [{"reason": e.reason, "message": e.message} for e in specs]
        return changed

    def fail_plan(self, message: str) -> None:
        """Terminal failure (plan_status.fail) on the plan as it is now."""
        self.update_status(lambda st: plan_status.fail(st, message, self.now(),
                                                       self.generation))
