"""Reading and writing the UpgradePlan: lookup, creation, conflict-safe status updates.

:class:`PlanWriter` owns one plan during a module run. :meth:`PlanWriter.update` applies a
mutation (a function over a deep copy of ``status`` returning the Events to emit, usually a
:mod:`plan_status` transition) and PUTs the status subresource; on 409 Conflict it re-reads
the plan and applies the mutation again (bounded). Events are recorded only after the write
succeeded. In check mode nothing is written and the Events are only listed.

Plan lookup: :func:`find_active` (``Progressing=True``), :func:`resolve` (by name, or the
active one).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    cluster_id,
    plan_status,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ConflictsExhausted,
    Kube,
    NotServed,
    retry_on_conflict,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.events import (
    Recorder,
)

# (the result type is quoted: pylint checks module_utils for Python 3.8, where `X | None`
# outside an annotation does not evaluate)
Mutation = Callable[[dict[str, Any]], "list[plan_status.EventSpec] | None"]
MAX_CONFLICT_RETRIES = 10


class PlanError(Exception):
    """The plan cannot be found/created/updated as asked; the message says why."""


def list_plans(kube: Kube) -> list[dict[str, Any]]:
    try:
        return kube.list(c.PLAN_API_VERSION, c.PLAN_KIND)
    except NotServed:
        return []


def _created(plan: dict[str, Any]) -> str:
    return str((plan.get("metadata") or {}).get("creationTimestamp") or "")


def find_active(kube: Kube, plans: list[dict[str, Any]] | None = None
                ) -> dict[str, Any] | None:
    """The plan with ``Progressing=True`` (the newest, if several)."""
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
    """Conflict-safe writes to one plan's status, plus its Events."""

    def __init__(self, kube: Kube, plan: dict[str, Any], check_mode: bool = False,
                 recorder: Recorder | None = None) -> None:
        self.kube = kube
        self.plan = plan
        self.check_mode = check_mode
        self.recorder = recorder or Recorder(kube, plan)
        self.changed = False

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
            before = copy.deepcopy(self.plan.get("status") or {})
            after = copy.deepcopy(before)
            events = mutate(after) or []
            if after == before:
                for ev in events:
                    self.recorder.emit(ev, self.check_mode)
                return False
            if self.check_mode:
                self.plan["status"] = after
                for ev in events:
                    self.recorder.emit(ev, True)
                self.changed = True
                return True
            body = copy.deepcopy(self.plan)
            body["status"] = after
            self.plan = self.kube.replace_status(body)
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

    # -- common transitions -------------------------------------------------------------------
    def now(self) -> str:
        return plan_status.now_iso()

    def set_fields(self, fields: dict[str, Any]) -> bool:
        """Set top-level status fields (``None`` removes one)."""
        def mutate(status: dict[str, Any]) -> None:
            for key, value in fields.items():
                if value is None:
                    status.pop(key, None)
                else:
                    status[key] = value
        return self.update(mutate)

    def fail(self, message: str) -> bool:
        return self.update(lambda s: plan_status.fail(s, message, self.now(), self.generation))

    def degrade(self, error: str) -> bool:
        return self.update(lambda s: plan_status.degrade(s, error, self.now(),
                                                         self.generation))

    def set_node_states(self, states: dict[str, Any]) -> bool:
        return self.update(lambda s: (plan_status.set_node_states(s, states), [])[1])

    def patch_annotations(self, annotations: dict[str, str | None]) -> None:
        """Merge-patch metadata annotations (``None`` removes one)."""
        if self.check_mode:
            return
        self.plan = self.kube.patch(c.PLAN_API_VERSION, c.PLAN_KIND, self.name,
                                    {"metadata": {"annotations": annotations}})
        self.changed = True
