"""core/v1 Events on the UpgradePlan, written like client-go's event recorder.

Events come from source component ``upgradeplan-controller`` with ``involvedObject`` = the
plan, in namespace ``default`` (what the recorder uses for a cluster-scoped object) unless a
spec says otherwise (``ImageCleanupSkipped`` goes to ``harvester-system``). A repeat of an
identical Event (same object, type, reason, message, source) is aggregated: its ``count`` is
incremented and ``lastTimestamp`` moved, instead of creating another object — so
``kubectl describe`` shows ``(x2 over …)`` as for the toolkit. Names follow client-go:
``<plan>.<hex of the creation time in ns>``.
"""

from __future__ import annotations

import time
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_status import (
    EventSpec,
    now_iso,
)


def involved_object(plan: dict[str, Any]) -> dict[str, Any]:
    meta = plan.get("metadata") or {}
    ref = {"apiVersion": c.PLAN_API_VERSION, "kind": c.PLAN_KIND, "name": meta.get("name")}
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


def build_event(plan: dict[str, Any], spec: EventSpec, now: str,
                component: str = c.EVENT_COMPONENT) -> dict[str, Any]:
    """A new core/v1 Event for ``spec`` (pure; used by :class:`Recorder` and tests)."""
    name = (plan.get("metadata") or {}).get("name")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": spec.namespace},
        "involvedObject": involved_object(plan),
        "reason": spec.reason, "message": spec.message, "type": spec.type,
        "source": {"component": component},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        "reportingComponent": component, "reportingInstance": "",
    }


def same_event(ev: dict[str, Any], plan: dict[str, Any], spec: EventSpec,
               component: str = c.EVENT_COMPONENT) -> bool:
    inv = ev.get("involvedObject") or {}
    meta = plan.get("metadata") or {}
    return (inv.get("name") == meta.get("name") and inv.get("kind") == c.PLAN_KIND
            and (not meta.get("uid") or inv.get("uid") in (None, meta.get("uid")))
            and ev.get("reason") == spec.reason and ev.get("message") == spec.message
            and ev.get("type") == spec.type
            and (ev.get("source") or {}).get("component") == component)


class Recorder:
    """Records Events about one plan; ``emit`` aggregates identical repeats."""

    def __init__(self, kube: Kube, plan: dict[str, Any],
                 component: str = c.EVENT_COMPONENT) -> None:
        self.kube, self.plan, self.component = kube, plan, component
        self._cache: dict[str, list[dict[str, Any]]] = {}
        self.emitted: list[dict[str, str]] = []

    def _existing(self, namespace: str) -> list[dict[str, Any]]:
        if namespace not in self._cache:
            name = (self.plan.get("metadata") or {}).get("name")
            try:
                items = self.kube.list(*c.EVENT, namespace=namespace,
                                       field_selector=f"involvedObject.name={name}")
            except ApiError:
                items = self.kube.list(*c.EVENT, namespace=namespace)
            self._cache[namespace] = items
        return self._cache[namespace]

    def emit(self, spec: EventSpec, check_mode: bool = False) -> None:
        """Create the Event or bump the count of an identical one. Never raises: an Event
        that cannot be written must not fail an upgrade step."""
        self.emitted.append({"type": spec.type, "reason": spec.reason,
                             "message": spec.message})
        if check_mode:
            return
        now = now_iso()
        try:
            existing = [e for e in self._existing(spec.namespace)
                        if same_event(e, self.plan, spec, self.component)]
            if existing:
                ev = existing[-1]
                count = int(ev.get("count") or 1) + 1
                updated = self.kube.patch(*c.EVENT, ev["metadata"]["name"],
                                          {"count": count, "lastTimestamp": now},
                                          namespace=spec.namespace)
                existing[-1].update(updated or {"count": count, "lastTimestamp": now})
                return
            created = self.kube.create(build_event(self.plan, spec, now, self.component))
            self._existing(spec.namespace).append(created)
        except ApiError:
            pass
