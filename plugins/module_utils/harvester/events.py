"""core/v1 Events on the UpgradePlan, written like client-go's event recorder.

Events come from source component ``upgradeplan-controller`` with ``involvedObject`` = the
plan, in namespace ``default`` (what the recorder uses for a cluster-scoped object) unless a
spec says otherwise (``ImageCleanupSkipped`` goes to ``harvester-system``). A repeat of an
identical Event (same object, type, reason, message, source) is aggregated: its ``count`` is
incremented and ``lastTimestamp`` moved, instead of creating another object — so
``kubectl describe`` shows ``(x2 over …)`` as for the toolkit.

client-go aggregates within one process (its correlator's cache); a run of the collection is
many module calls, so a repeat has to be found across them without listing the namespace's
Events in every call. The name is ``<plan>.<16 hex digits of a hash of what makes two Events
identical>`` (client-go's ``<plan>.<hex of the time>`` is unique per object, which only a
list could find again): the first Event is a create, a repeat's create is answered 409 and
becomes a read and a count patch.
"""

from __future__ import annotations

import hashlib
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


def event_name(plan: dict[str, Any], spec: EventSpec,
               component: str = c.EVENT_COMPONENT) -> str:
    """The name every identical Event about ``plan`` gets (see the module docstring)."""
    meta = plan.get("metadata") or {}
    parts = (meta.get("uid") or meta.get("name"), spec.namespace, spec.type, spec.reason,
             spec.message, component)
    key = "\0".join(str(x) for x in parts)
    return f"{meta.get('name')}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def build_event(plan: dict[str, Any], spec: EventSpec, now: str,
                component: str = c.EVENT_COMPONENT) -> dict[str, Any]:
    """A new core/v1 Event for ``spec`` (pure; used by :class:`Recorder` and tests)."""
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event_name(plan, spec, component), "namespace": spec.namespace},
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
        self._known: dict[tuple[str, str], dict[str, Any]] = {}   # (namespace, name) -> Event
        self.emitted: list[dict[str, str]] = []

    def emit(self, spec: EventSpec, check_mode: bool = False,
             component: str | None = None) -> None:
        """Create the Event or bump the count of an identical one (``component``: the source,
        the recorder's by default). Never raises: an Event that cannot be written must not
        fail an upgrade step."""
        self.emitted.append({"type": spec.type, "reason": spec.reason,
                             "message": spec.message})
        if check_mode:
            return
        component = component or self.component
        now = now_iso()
        ev = build_event(self.plan, spec, now, component)
        key = (spec.namespace, ev["metadata"]["name"])
        try:
            known = self._known.get(key)
            if known is None:
                try:
                    self._known[key] = self.kube.create(ev)
                    return
                except ApiError as e:
                    if e.status != 409:
                        raise
                known = self.kube.get(*c.EVENT, key[1], namespace=spec.namespace)
                if known is None or not same_event(known, self.plan, spec, component):
                    return
            count = int(known.get("count") or 1) + 1
            updated = self.kube.patch(*c.EVENT, key[1], {"count": count, "lastTimestamp": now},
                                      namespace=spec.namespace)
            self._known[key] = updated or {**known, "count": count, "lastTimestamp": now}
        except ApiError:
            pass
