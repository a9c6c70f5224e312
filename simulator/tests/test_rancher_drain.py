"""The simulated Rancher planner and machine-drain handler where the drain options decide
what happens (rancher/rancher v2.11.2 and v2.12.0 ``pkg/capr/planner/drain.go``,
``pkg/controllers/capr/machinedrain/machinedrain.go``, identical at both tags here):

* no hooks and drain disabled (or a single machine): no annotation, no cordon;
* ``rke.cattle.io/pre-drain`` / ``post-drain`` only when pre-/post-drain hooks are declared;
* a single-machine cluster with hooks: drain options with ``enabled: false``, cordon, both
  hooks waited for, never drained;
* the drain options string as Go's ``encoding/json`` writes the map of the struct.

The annotations and cordons are observed from outside the controller, through the store
events every change produces, so a short-lived annotation or cordon is seen as well.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from test_upgrade_machinery import events, machine_order, make_world, secret_ann, wait_for

from harvester_sim.controllers.rancher import drain_options_json
from harvester_sim.world import World

TARGET = "v1.33.3+rke2r1"
PRE = "management.harvesterhci.io/pre-hook"
POST = "management.harvesterhci.io/post-hook"
ANSWERS = {"pre": PRE, "post": POST}
RANCHER_DRAIN = ("rke.cattle.io/drain-options", "rke.cattle.io/pre-drain",
                 "rke.cattle.io/drain-done", "rke.cattle.io/uncordon",
                 "rke.cattle.io/post-drain", "rke.cattle.io/drain-error")
# what Harvester writes (reference harvester-upgrade.md §C.1), one of each hook
HARVESTER_OPTS = {"enabled": True, "force": True, "ignoreDaemonSets": True,
                  "deleteEmptyDirData": True,
                  "preDrainHooks": [{"annotation": PRE}],
                  "postDrainHooks": [{"annotation": POST}]}
# drain.go optionsToString of HARVESTER_OPTS: sorted keys, ignoreErrors (omitempty, false)
# left out; the CRD defaults nothing in DrainOptions
HARVESTER_D = ('{"deleteEmptyDirData":true,"disableEviction":false,"enabled":true,'
               '"force":true,"gracePeriod":0,"ignoreDaemonSets":true,'
               f'"postDrainHooks":[{{"annotation":"{POST}"}}],'
               f'"preDrainHooks":[{{"annotation":"{PRE}"}}],'
               '"skipWaitForDeleteTimeoutSeconds":0,"timeout":0}')


class Seen:
    """Every annotation key any machine-plan Secret carried and every node ever cordoned."""

    def __init__(self, w: World) -> None:
        self.lock = threading.Lock()
        self.annotations: set[str] = set()
        self.cordoned: set[str] = set()
        w.runtime.on("", "secrets", self._secret)
        w.runtime.on("", "nodes", self._node)

    def _secret(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if obj.get("type") == "rke.cattle.io/machine-plan":
            with self.lock:
                self.annotations.update((obj["metadata"].get("annotations") or {}).keys())

    def _node(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if (obj.get("spec") or {}).get("unschedulable"):
            with self.lock:
                self.cordoned.add(obj["metadata"]["name"])


def roll(w: World, cp: dict[str, Any], worker: dict[str, Any] | None = None) -> None:
    """Replace the scenario's strategy (a merge patch alone would keep its other drain
    fields) and set the new version."""
    w.client.patch("provisioning.cattle.io/v1", "Cluster", "local",
                   {"spec": {"rkeConfig": {"upgradeStrategy": None}}}, "fleet-local")
    w.client.patch("provisioning.cattle.io/v1", "Cluster", "local",
                   {"spec": {"kubernetesVersion": TARGET, "rkeConfig": {"upgradeStrategy": {
                       "controlPlaneConcurrency": "1", "workerConcurrency": "1",
                       "controlPlaneDrainOptions": cp,
                       "workerDrainOptions": cp if worker is None else worker}}}},
                   "fleet-local")


def answer(w: World, node: str, which: str) -> str:
    """Copy Rancher's ``rke.cattle.io/<which>-drain`` into our hook, as the upgrader does."""
    value = secret_ann(w, node)[f"rke.cattle.io/{which}-drain"]
    m = w.client.get("v1", "Node", node)["metadata"]["annotations"]["cluster.x-k8s.io/machine"]
    w.client.patch("v1", "Secret", f"{m}-machine-plan",
                   {"metadata": {"annotations": {ANSWERS[which]: value}}}, "fleet-local")
    return value


def kubelet(w: World, node: str) -> str:
    return str(w.client.get("v1", "Node", node)["status"]["nodeInfo"]["kubeletVersion"])


def unschedulable(w: World, node: str) -> bool:
    return bool(w.client.get("v1", "Node", node)["spec"].get("unschedulable"))


def updated_message(w: World) -> str:
    cl = w.client.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")
    cond = next(c for c in cl["status"]["conditions"] if c["type"] == "Updated")
    return str(cond.get("message") or "")


def finished(w: World) -> Callable[[], bool]:
    return lambda: bool(events(w, "planner_done"))


def running_launchers(w: World) -> list[str]:
    return sorted(p["metadata"]["name"] for p in w.client.list("v1", "Pod")
                  if p["metadata"]["name"].startswith("virt-launcher-")
                  and (p.get("status") or {}).get("phase") == "Running")


def nodes(w: World) -> list[str]:
    return sorted(n["metadata"]["name"] for n in w.client.list("v1", "Node"))


# ----------------------------------------------------------------------- options string
def test_drain_options_string_is_the_go_encoding_of_the_struct() -> None:
    assert drain_options_json(HARVESTER_OPTS) == HARVESTER_D
    # a single machine: drain.go optionsToString(options, true) clears enabled only
    single = json.loads(drain_options_json(HARVESTER_OPTS, disable=True))
    assert single == {**json.loads(HARVESTER_D), "enabled": False}
    # nothing set: every field without omitempty, nothing else
    assert drain_options_json({}) == (
        '{"deleteEmptyDirData":false,"disableEviction":false,"enabled":false,"force":false,'
        '"gracePeriod":0,"skipWaitForDeleteTimeoutSeconds":0,"timeout":0}')
    # omitempty fields once set; a hook without an annotation is an empty object
    got = json.loads(drain_options_json({"ignoreDaemonSets": False, "ignoreErrors": True,
                                         "gracePeriod": -1, "preDrainHooks": [{}]}))
    assert (got["ignoreDaemonSets"], got["ignoreErrors"], got["gracePeriod"],
            got["preDrainHooks"]) == (False, True, -1, [{}])
    assert "postDrainHooks" not in got


# ---------------------------------------------------------------------- short-circuit
def test_drain_disabled_without_hooks_neither_annotates_nor_cordons() -> None:
    """The scenario's own strategy (``enabled: false``, no hooks): drain.go returns at once,
    so the plan is applied with no annotation and no cordon on any node."""
    w = make_world()
    try:
        seen = Seen(w)
        strategy = ((w.client.get("provisioning.cattle.io/v1", "Cluster", "local",
                                   "fleet-local")["spec"].get("rkeConfig") or {})
                    .get("upgradeStrategy") or {})
        cp = strategy.get("controlPlaneDrainOptions") or {}
        assert not cp.get("enabled") and not cp.get("preDrainHooks") and \
            not cp.get("postDrainHooks"), cp
        w.client.patch("provisioning.cattle.io/v1", "Cluster", "local",
                       {"spec": {"kubernetesVersion": TARGET}}, "fleet-local")
        wait_for(finished(w), timeout=30, what="planner done")
        assert [kubelet(w, n) for n in nodes(w)] == [TARGET] * len(nodes(w))
        with seen.lock:
            assert not seen.cordoned, seen.cordoned
            assert not seen.annotations & set(RANCHER_DRAIN), seen.annotations
    finally:
        w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


# ----------------------------------------------------------------- declared hooks only
def test_only_declared_hooks_are_asked_for() -> None:
    """Post-drain hooks only, drain disabled: cordon, no ``pre-drain``, no drain, the plan,
    then ``post-drain`` waited for before the uncordon."""
    w = make_world()
    try:
        seen = Seen(w)
        opts = {"enabled": False, "postDrainHooks": [{"annotation": POST}]}
        roll(w, opts)
        for node in machine_order(w):
            wait_for(lambda n=node: "rke.cattle.io/post-drain" in secret_ann(w, n),
                     what=f"post-drain on {node}")
            ann = secret_ann(w, node)
            d = ann["rke.cattle.io/drain-options"]
            assert d == drain_options_json(opts)
            assert ann["rke.cattle.io/drain-done"] == d and ann["rke.cattle.io/uncordon"] == d
            assert "rke.cattle.io/pre-drain" not in ann
            assert kubelet(w, node) == TARGET
            assert unschedulable(w, node)
            assert "post-drain hooks" in updated_message(w)
            answer(w, node, "post")
            wait_for(lambda n=node: not unschedulable(w, n), what=f"{node} uncordoned")
            wait_for(lambda n=node: not set(secret_ann(w, n)) & {*RANCHER_DRAIN, POST},
                     what=f"annotations gone from {node}")
        wait_for(finished(w), what="planner done")
        with seen.lock:
            assert seen.cordoned == set(nodes(w))
            assert "rke.cattle.io/pre-drain" not in seen.annotations
            assert "rke.cattle.io/post-drain" in seen.annotations
        assert not [e for e in events(w, "span") if e.get("what") == "drain"]
    finally:
        w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


# ------------------------------------------------------------------------ single node
def test_single_node_with_hooks_cordons_and_waits_for_both_hooks() -> None:
    """One machine with Harvester's hooks: the drain options say ``enabled: false``; the
    node is cordoned, ``pre-drain`` waits for its answer before the plan, ``post-drain``
    after it, and only then is the node uncordoned. Its VMs are never evicted."""
    w = make_world("single-node")
    try:
        seen = Seen(w)
        [node] = nodes(w)
        before = kubelet(w, node)
        launchers = wait_for(lambda: running_launchers(w) if len(running_launchers(w)) == 4
                             else None, what="the 4 VMs running")
        roll(w, HARVESTER_OPTS)
        d = wait_for(lambda: secret_ann(w, node).get("rke.cattle.io/pre-drain"),
                     what="pre-drain on the single node")
        assert json.loads(d) == {**json.loads(HARVESTER_D), "enabled": False}
        ann = secret_ann(w, node)
        assert ann["rke.cattle.io/drain-options"] == d
        assert "rke.cattle.io/drain-done" not in ann
        assert unschedulable(w, node)
        assert kubelet(w, node) == before
        assert "pre-drain hooks" in updated_message(w)
        assert answer(w, node, "pre") == d
        wait_for(lambda: "rke.cattle.io/post-drain" in secret_ann(w, node),
                 what="post-drain on the single node")
        ann = secret_ann(w, node)
        assert ann["rke.cattle.io/drain-done"] == d and ann["rke.cattle.io/uncordon"] == d
        assert ann["rke.cattle.io/post-drain"] == d
        assert kubelet(w, node) == TARGET
        assert unschedulable(w, node)
        answer(w, node, "post")
        wait_for(lambda: not unschedulable(w, node), what="uncordoned")
        wait_for(lambda: not set(secret_ann(w, node)) & {*RANCHER_DRAIN, PRE, POST},
                 what="annotations gone")
        wait_for(finished(w), what="planner done")
        with seen.lock:
            assert seen.cordoned == {node}
        assert not [e for e in events(w, "span") if e.get("what") == "drain"]
        assert running_launchers(w) == launchers
    finally:
        w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


def test_single_node_without_hooks_only_applies_the_plan() -> None:
    """One machine, drain enabled but no hooks: drain.go short-circuits (a single machine is
    never drained), so neither an annotation nor a cordon."""
    w = make_world("single-node")
    try:
        seen = Seen(w)
        [node] = nodes(w)
        roll(w, {"enabled": True, "force": True, "ignoreDaemonSets": True,
                 "deleteEmptyDirData": True})
        wait_for(finished(w), timeout=30, what="planner done")
        assert kubelet(w, node) == TARGET
        with seen.lock:
            assert not seen.cordoned
            assert not seen.annotations & set(RANCHER_DRAIN)
    finally:
        w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


# ------------------------------------------------------------------- the drain helper
def _pod(w: World, name: str, node: str, owner: str, phase: str, grace: int = 30) -> None:
    w.client.create({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": "default", "ownerReferences": [{
                         "apiVersion": "batch/v1" if owner == "Job" else "apps/v1",
                         "kind": owner, "name": f"{name}-owner", "uid": f"uid-{name}",
                         "controller": True}]},
                     "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                              "containers": [{"name": "c", "image": "busybox"}]}})

    def status(cur: dict[str, Any]) -> dict[str, Any]:
        cur["status"] = {"phase": phase}
        return cur

    w.client.modify("v1", "Pod", name, status, "default", subresource="status")


def _run(gen: Any) -> tuple[list[Any], str]:
    """Drive a drain task by hand: the steps it yielded and what it returned."""
    steps: list[Any] = []
    try:
        while len(steps) < 100:
            steps.append(next(gen))
    except StopIteration as stop:
        return steps, stop.value
    raise AssertionError(f"the drain never ended: {steps[:5]}")


def _planner_on(node: str) -> tuple[World, Any, Any]:
    """A world not started (no kubelet deletes anything, no scenario objects) with Rancher's
    planner, and a machine entry for ``node`` (no such Node: only the test's pods are on
    it)."""
    from harvester_sim.controllers.rancher import Entry, RancherPlanner
    from harvester_sim.scenarios import loader

    w = World(loader.load("three-node"), speed=1000.0)
    w.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    return w, RancherPlanner(w), Entry("m-x", node, etcd=False, cp=False, worker=True,
                                       init=False)


def test_drain_of_finished_pods_waits_for_no_poll() -> None:
    """kubectl's drain helper (RunNodeDrain → waitForDelete: wait.PollImmediate, 1 s)
    checks for the evicted pods at once: a terminal pod is deleted by its eviction, so a
    node with only finished Job pods left is drained without a 1 s poll."""
    w, planner, e = _planner_on("n-x")
    _pod(w, "done-1", "n-x", "Job", "Succeeded")
    _pod(w, "done-2", "n-x", "Job", "Failed")
    steps, error = _run(planner._run_node_drain(e, HARVESTER_OPTS, -1, 600.0))
    assert (steps, error) == ([], "")
    assert w.client.list("v1", "Pod", field_selector="spec.nodeName=n-x") == []


def test_drain_polls_each_second_for_a_terminating_pod_until_its_timeout() -> None:
    """A running pod's eviction only starts its graceful deletion: the helper polls every
    1 s until it is gone, and fails at the drain options' timeout (no kubelet here)."""
    w, planner, e = _planner_on("n-y")
    _pod(w, "web", "n-y", "ReplicaSet", "Running")
    now = [0.0]
    w.clock.now = lambda: now[0]  # type: ignore[method-assign]
    gen = planner._run_node_drain(e, HARVESTER_OPTS, -1, 3.0)
    steps: list[Any] = []
    try:
        while len(steps) < 10:
            steps.append(next(gen))
            if len(steps) == 1:
                pod = w.client.get("v1", "Pod", "web", "default")
                assert pod["metadata"].get("deletionTimestamp"), "evicted: deleting"
            now[0] += steps[-1]
    except StopIteration as stop:
        error = stop.value
    assert steps == [1.0, 1.0, 1.0]
    assert error == "drain did not complete within 3s"
