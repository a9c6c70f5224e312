"""API plumbing of the node loop: a small client over kubernetes.core's dynamic client,
watch-based waits with deadlines, and the UpgradePlan writes the node loop needs.

Used by the node-loop modules (``node_info``, ``drain_hook_ack``, ``vm_evacuate``,
``node_job``, ``vm_restore``) and the ``harvester.upgrade.nodes`` inventory plugin.

* :class:`Kube` wraps ``kubernetes.core``'s ``get_api_client`` (so the auth options and the
  ``K8S_AUTH_*`` environment variables are kubernetes.core's) with dict-in/dict-out calls.
* :meth:`Kube.wait` waits **by watch** (never by polling) on one or more resource sets until a
  predicate over their current contents holds, with a deadline; a cut stream is resumed from
  the last resourceVersion, a 410 Gone relists. On expiry it raises :class:`WaitTimeout`
  naming what was awaited and the last state seen.
* :class:`PlanWriter` records per-node states in ``status.nodeUpgradeStatuses`` (forward-only
  by ordinal, conflict-safe), fails the plan, and emits Events.
"""

from __future__ import annotations

import datetime as _dt
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import client
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ConflictsExhausted,
    NotServed,
    retry_on_conflict,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.informer import (
    obj_key,
)

PLAN_API = "management.harvesterhci.io/v1beta1"
PLAN_KIND = "UpgradePlan"
PLAN_LABEL = "management.harvesterhci.io/upgrade-plan"
COMPONENT_LABEL = "management.harvesterhci.io/upgrade-component"
NODE_LABEL = "management.harvesterhci.io/node"
JOB_TYPE_LABEL = "management.harvesterhci.io/job-type"
UPGRADE_NS = "harvester-system"
FLEET_NS = "fleet-local"

# Node upgrade states by ordinal (reference §C.3); an update to a lower ordinal is dropped.
NODE_STATE_ORDINAL: dict[str, int] = {
    "ImagePreloading": 0, "ImagePreloaded": 1, "ImagePreloadFailed": 1, "UpgradePaused": 2,
    "PreDraining": 3, "SingleNodeUpgrading": 3, "PreDrained": 4, "PreDrainFailed": 4,
    "PostDraining": 5, "WaitingReboot": 6, "PostDrained": 7, "PostDrainFailed": 7,
    "SingleNodeUpgraded": 7, "SingleNodeUpgradeFailed": 7, "ImageCleaning": 8,
    "ImageCleaned": 9, "ImageCleanFailed": 9,
}
FAILED_NODE_STATES = ("PreDrainFailed", "PostDrainFailed", "SingleNodeUpgradeFailed",
                      "ImagePreloadFailed", "ImageCleanFailed")


def state_ordinal(state: str | None) -> int:
    return NODE_STATE_ORDINAL.get(state or "", -1)


def state_allows(current: str | None, proposed: str) -> bool:
    """Forward-only rule (node_states.is_ahead): ``proposed`` may replace ``current`` unless
    ``current`` is further on."""
    try:
        from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
            node_states,
        )
        return not node_states.is_ahead(current, proposed)
    except (ImportError, KeyError):
        return state_ordinal(proposed) >= state_ordinal(current)


class NodeLoopError(Exception):
    """A step of the node loop cannot go on; ``message`` is what a person should read."""


class NoActivePlan(NodeLoopError):
    """No plan was named and none is active: there is no upgrade for the node loop to run."""


class WaitTimeout(NodeLoopError):
    def __init__(self, what: str, seconds: float, last_seen: str) -> None:
        self.what, self.seconds, self.last_seen = what, seconds, last_seen
        super().__init__(f"timed out after {int(seconds)}s waiting for {what}; "
                         f"last seen: {last_seen or 'nothing'}")


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Source:
    """One resource set a wait watches: api_version/kind, optional namespace and selectors."""

    api_version: str
    kind: str
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    name: str = ""    # key under which the predicate sees this set (default: kind)

    @property
    def key(self) -> str:
        return self.name or self.kind


@dataclass
class _Stream:
    source: Source
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    rv: str = ""


class Kube(client.Kube):
    """The collection's shared client (:class:`client.Kube`: kubernetes.core auth, dict in and
    out, retries on 429/5xx/transport errors, ``None`` for 404) plus the node loop's
    watch-based :meth:`wait`."""

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_options(cls, **auth: Any) -> Kube:
        from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import (
            get_api_client,
        )
        given = {k: v for k, v in auth.items() if v is not None}
        try:
            api = get_api_client(**given)
        except Exception as exc:  # noqa: BLE001 - every way of not connecting gets one line
            raise client.ApiError(0, "ConnectionFailed",
                                  client.connection_failure(exc, given)) from exc
        return cls(api.client)

    # -- node-loop call shapes over the shared transport ---------------------------------------
    def items(self, api_version: str, kind: str, namespace: str | None = None,
              label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.list(api_version, kind, namespace, label_selector)

    def create_in(self, api_version: str, kind: str, body: dict[str, Any],
                  namespace: str | None = None) -> dict[str, Any]:
        """Create ``body`` as ``api_version``/``kind`` in ``namespace``."""
        obj = dict(body)
        obj["apiVersion"], obj["kind"] = api_version, kind
        if namespace:
            obj["metadata"] = {**(obj.get("metadata") or {}), "namespace": namespace}
        return self.create(obj)

    # -- waits -------------------------------------------------------------------------------
    def wait(self, sources: Iterable[Source],
             predicate: Callable[[dict[str, dict[str, dict[str, Any]]]], Any], *,
             timeout: float, what: str,
             describe: Callable[[dict[str, dict[str, dict[str, Any]]]], str] | None = None,
             on_change: Callable[[dict[str, dict[str, dict[str, Any]]]], None] | None = None
             ) -> Any:
        """Watch ``sources`` until ``predicate(view)`` returns something truthy; return it.

        ``view`` maps each source's key to ``{ns/name: object}``. ``predicate`` may raise
        :class:`NodeLoopError` to stop the wait early. ``on_change`` is called after each
        batch of events (e.g. to start more migrations). Raises :class:`WaitTimeout`.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        streams = [_Stream(s) for s in sources]
        for st in streams:
            self._relist(st)

        def view() -> dict[str, dict[str, dict[str, Any]]]:
            return {st.source.key: st.items for st in streams}

        result = predicate(view())
        if result:
            return result
        if on_change is not None:
            on_change(view())
            result = predicate(view())
            if result:
                return result
        events: queue.Queue[tuple[int, str, dict[str, Any] | None]] = queue.Queue()
        stop = threading.Event()
        threads = [threading.Thread(target=self._pump, args=(i, st, events, stop, deadline),
                                    daemon=True) for i, st in enumerate(streams)]
        for t in threads:
            t.start()
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    last = describe(view()) if describe else ""
                    raise WaitTimeout(what, timeout, last)
                try:
                    idx, etype, obj = events.get(timeout=min(left, 2.0))
                except queue.Empty:
                    if on_change is not None:   # time-based checks (hung migrations)
                        on_change(view())
                        result = predicate(view())
                        if result:
                            return result
                    continue
                self._apply(streams[idx], etype, obj)
                while True:   # drain what else arrived, then evaluate once
                    try:
                        idx, etype, obj = events.get_nowait()
                    except queue.Empty:
                        break
                    self._apply(streams[idx], etype, obj)
                if on_change is not None:
                    on_change(view())
                result = predicate(view())
                if result:
                    return result
        finally:
            stop.set()

    def _relist(self, st: _Stream) -> None:
        s = st.source
        items, rv = self.list_with_rv(s.api_version, s.kind, s.namespace, s.label_selector,
                                      s.field_selector)
        st.items = {obj_key(o): o for o in items}
        st.rv = rv

    @staticmethod
    def _apply(st: _Stream, etype: str, obj: dict[str, Any] | None) -> None:
        if etype == "RELIST" or obj is None:
            return
        key = obj_key(obj)
        if etype == "DELETED":
            st.items.pop(key, None)
        else:
            st.items[key] = obj

    def _pump(self, idx: int, st: _Stream, out: queue.Queue[Any], stop: threading.Event,
              deadline: float) -> None:
        """Background watch of one source, resumed after cuts; relists on 410 Gone."""
        from kubernetes import watch as kwatch
        from kubernetes.client.exceptions import ApiException
        s = st.source
        res = self.resource(s.api_version, s.kind)
        rv = st.rv
        backoff = 0.2
        while not stop.is_set() and time.monotonic() < deadline:
            w = kwatch.Watch()
            try:
                chunk = max(1, min(60, int(deadline - time.monotonic()) + 1))
                for ev in self.stream(res, namespace=s.namespace,
                                      label_selector=s.label_selector,
                                      field_selector=s.field_selector,
                                      resource_version=rv or None, timeout=chunk, watcher=w):
                    if stop.is_set():
                        w.stop()
                        return
                    raw = ev.get("raw_object") or {}
                    etype = ev.get("type") or ""
                    if etype == "ERROR":
                        if (raw.get("code") == 410):
                            raise ApiException(status=410, reason="Gone")
                        continue
                    new_rv = (raw.get("metadata") or {}).get("resourceVersion")
                    if new_rv:
                        rv = str(new_rv)
                    if etype == "BOOKMARK":
                        continue
                    out.put((idx, etype, raw))
                backoff = 0.2
            except ApiException as exc:
                if exc.status == 410:
                    try:
                        items, rv = self.list_with_rv(s.api_version, s.kind, s.namespace,
                                                      s.label_selector, s.field_selector)
                    except Exception:  # noqa: BLE001 - retried below
                        time.sleep(backoff)
                        backoff = min(backoff * 2, 5.0)
                        continue
                    seen = set()
                    for o in items:
                        seen.add(obj_key(o))
                        out.put((idx, "MODIFIED", o))
                    for key in list(st.items):
                        if key not in seen:
                            out.put((idx, "DELETED", st.items[key]))
                    continue
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception:  # noqa: BLE001 - cut stream / transient error: resume
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)


# ---------------------------------------------------------------------------------------------
# The UpgradePlan as the node loop writes it
# ---------------------------------------------------------------------------------------------

def find_plan(kube: Kube, name: str | None) -> dict[str, Any]:
    """The named plan, else the single active one (Progressing=True or not terminal)."""
    try:
        kube.resource(PLAN_API, PLAN_KIND)
    except NotServed:
        if name:
            raise NodeLoopError(f"UpgradePlan {name} not found: the UpgradePlan CRD is not "
                                "installed") from None
        raise NoActivePlan("the UpgradePlan CRD is not installed: no upgrade in progress; "
                           "start one with upgrade.yml") from None
    if name:
        plan = kube.get(PLAN_API, PLAN_KIND, name)
        if plan is None:
            raise NodeLoopError(f"UpgradePlan {name} not found")
        return _same_cluster(kube, plan)
    plans = kube.items(PLAN_API, PLAN_KIND)
    active = [p for p in plans if ((p.get("status") or {}).get("currentPhase") or "")
              not in ("Succeeded", "Failed")]
    if not active:
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
    active.sort(key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    return _same_cluster(kube, active[-1])


def _same_cluster(kube: Kube, plan: dict[str, Any]) -> dict[str, Any]:
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        cluster_id,
    )
    try:
        cluster_id.check(kube, plan)
    except cluster_id.ClusterMismatch as exc:
        raise NodeLoopError(str(exc)) from None
    return plan


class PlanWriter:
    """Writes the node-loop parts of one UpgradePlan's status and its Events."""

    def __init__(self, kube: Kube, plan: dict[str, Any], component: str = "harvester-upgrade"
                 ) -> None:
        self.kube = kube
        self.plan = plan
        self.name = plan["metadata"]["name"]
        self.component = component
        self.events: list[dict[str, str]] = []

    def refresh(self) -> dict[str, Any]:
        plan = self.kube.get(PLAN_API, PLAN_KIND, self.name)
        if plan is None:
            raise NodeLoopError(f"UpgradePlan {self.name} disappeared")
        self.plan = plan
        return plan

    @property
    def status(self) -> dict[str, Any]:
        return self.plan.get("status") or {}

    def node_state(self, node: str) -> str:
        return ((self.status.get("nodeUpgradeStatuses") or {}).get(node) or {}).get(
            "state") or ""

    def set_node_state(self, node: str, state: str, reason: str = "", message: str = "",
                       *, event: bool = True) -> bool:
        """Forward-only; returns True when the status changed. Conflict-safe."""
        def attempt() -> bool:
            plan = self.refresh()
            statuses = dict((plan.get("status") or {}).get("nodeUpgradeStatuses") or {})
            cur = statuses.get(node) or {}
            if not state_allows(cur.get("state"), state):
                return False
            new = {"state": state}
            if reason:
                new["reason"] = reason
            if message:
                new["message"] = message
            if cur == new:
                return False
            if self.kube.check_mode:
                return True
            statuses[node] = new
            self._patch_status(plan, {"nodeUpgradeStatuses": statuses})
            if event:
                text = f"Node {node}: {state}" + (f" ({reason})" if reason else "") + (
                    f": {message}" if message else "")
                failed = state in FAILED_NODE_STATES
                self.event(f"Node{state}", text, warning=failed)
            return True

        try:
            return retry_on_conflict(attempt, 10, f"UpgradePlan {self.name}")
        except ConflictsExhausted as exc:
            raise NodeLoopError(f"could not update UpgradePlan {self.name}: too many "
                                "conflicts") from exc

    def set_progress_message(self, message: str) -> None:
        """Progressing condition message while NodeUpgrading (e.g. paused nodes); given up
        quietly when every write conflicts (the next state change sets it again)."""
        def attempt() -> None:
            plan = self.refresh()
            conds = list((plan.get("status") or {}).get("conditions") or [])
            changed = False
            for c in conds:
                if c.get("type") == "Progressing" and c.get("message") != message:
                    c["message"] = message
                    changed = True
            if changed and not self.kube.check_mode:
                self._patch_status(plan, {"conditions": conds})

        try:
            retry_on_conflict(attempt, 10, f"UpgradePlan {self.name}")
        except ConflictsExhausted:
            pass

    def _patch_status(self, plan: dict[str, Any], status: dict[str, Any]) -> None:
        """Merge-patch the status, conditional on the plan's resourceVersion (409 if stale)."""
        body = {"metadata": {"resourceVersion": plan["metadata"]["resourceVersion"]},
                "status": status}
        self.plan = self.kube.patch(PLAN_API, PLAN_KIND, self.name, body, subresource="status")

    def event(self, reason: str, message: str, *, warning: bool = False,
              component: str | None = None, namespace: str = "default") -> None:
        """An Event about the plan (cluster-scoped object ⇒ namespace ``default``, or
        ``harvester-system`` for the detector/restore-vm events, as upgrade-toolkit does)."""
        self.events.append({"reason": reason, "message": message})
        if self.kube.check_mode:
            return
        ts = now_iso()
        meta = self.plan.get("metadata") or {}
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{self.name}.", "namespace": namespace},
            "involvedObject": {"apiVersion": PLAN_API, "kind": PLAN_KIND, "name": self.name,
                               "uid": meta.get("uid"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": component or self.component},
            "reportingComponent": component or self.component,
            "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
        }
        try:
            self.kube.create(body)
        except Exception as exc:  # noqa: BLE001 - an Event is best effort, never fails a step
            self.events.append({"reason": "EventNotRecorded", "message": str(exc)[:200]})

    def owner_reference(self) -> dict[str, Any]:
        meta = self.plan["metadata"]
        return {"apiVersion": PLAN_API, "kind": PLAN_KIND, "name": meta["name"],
                "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}

    def labels(self, component: str = "node-upgrade") -> dict[str, str]:
        return {PLAN_LABEL: self.name, COMPONENT_LABEL: component}

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
            obj = self.kube.get("v1", "Node", node)
        except Exception:  # noqa: BLE001 - the note is extra; the failure is recorded anyway
            return ""
        if not ((obj or {}).get("spec") or {}).get("unschedulable"):
            return ""
        return (f" [node {node} stays cordoned: Rancher holds it, waiting for its drain hook, "
                "until its upgrade finishes; fix the cause and run the same command again to "
                "continue (docs/recovery.md)]")

    def update_status(self, mutate: Any) -> bool:
        """Apply ``mutate(status)`` (a plan_status transition returning EventSpecs) through the
        shared :class:`plan_writer.PlanWriter` (fresh plan, conditional write, re-read and
        re-apply on 409; its Events after the write)."""
        from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
            plan_writer,
        )
        specs: list[Any] = []

        def recorded(status: dict[str, Any]) -> Any:
            specs[:] = mutate(status) or []
            return specs

        pw = plan_writer.PlanWriter(self.kube, self.refresh(), check_mode=self.kube.check_mode)
        try:
            changed = pw.update(recorded)
        except plan_writer.PlanError as exc:
            raise NodeLoopError(str(exc)) from exc
        if not self.kube.check_mode:
            self.plan = pw.plan
        if changed:   # listed in the module result, as the node-state Events are
            self.events += [{"reason": e.reason, "message": e.message} for e in specs]
        return changed

    def fail_plan(self, message: str) -> None:
        """Terminal failure through upgrade_plan's transition (plan_status.fail)."""
        from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
            plan_status,
        )
        gen = (self.plan.get("metadata") or {}).get("generation")
        self.update_status(lambda st: plan_status.fail(st, message, now_iso(), gen))
