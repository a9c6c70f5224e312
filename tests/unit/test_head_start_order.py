"""The head start's order (node_evacuation.evacuate ``start_only``, node_migrations.migrate_all
``started``, node_head_start.next_node): the next node's first migrations are asked for
before the writes they do not need (its state, the plan's Event, the pod evictions, the
stops), and the node expected next is the first one not upgraded in Rancher's order
(docs/node-upgrade.md "Head start")."""

from __future__ import annotations

from typing import Any

import pytest

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
c = pytest.importorskip(f"{_MU}.constants")
ev = pytest.importorskip(f"{_MU}.evacuation")
mt = pytest.importorskip(f"{_MU}.migration_target")
ne = pytest.importorskip(f"{_MU}.node_evacuation")
nm = pytest.importorskip(f"{_MU}.node_migrations")
node_head_start = pytest.importorskip(f"{_MU}.node_head_start")
waiting = pytest.importorskip(f"{_MU}.waiting")

NODE = "n2"
PLAN = "hvst-upgrade-abcde"


def vmi(name: str, node: str = NODE) -> dict[str, Any]:
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": "default"},
            "status": {"phase": "Running", "nodeName": node}}


def view(name: str) -> Any:
    return ev.VmView(namespace="default", name=name, node=NODE)


class Writer:
    name = PLAN

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.plan = {"metadata": {"name": PLAN}, "spec": {}, "status": {}}

    def refresh(self) -> dict[str, Any]:
        return self.plan

    def node_state(self, node: str) -> str:
        return ""

    def labels(self, component: str) -> dict[str, str]:
        return {c.LABEL_PLAN: PLAN, c.LABEL_COMPONENT: component}

    def event(self, reason: str, message: str, **_kw: Any) -> None:
        self.log.append(f"event {reason}")


class Kube:
    """The VMIs of the node, the migrations created (by their requests, in order)."""

    check_mode = False

    def __init__(self, log: list[str], vmis: list[dict[str, Any]]) -> None:
        self.log = log
        self.vmis = vmis

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None
             ) -> list[dict[str, Any]]:
        assert kind == "VirtualMachineInstance", kind
        return list(self.vmis)

    def list_with_rv(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None, field_selector: str | None = None
                     ) -> tuple[list[dict[str, Any]], str]:
        assert kind == "VirtualMachineInstanceMigration", kind
        self.log.append("list migrations")
        return [], "1"

    def create_in(self, api_version: str, kind: str, body: dict[str, Any],
                  namespace: str) -> dict[str, Any]:
        self.log.append(f"migrate {body['spec']['vmiName']}")
        return body


def test_migrate_all_tells_when_the_first_round_was_asked_for_once() -> None:
    log: list[str] = []
    kube = Kube(log, [vmi("a"), vmi("b"), vmi("c")])
    plan = ev.EvacuationPlan(node=NODE, migrate=[
        ev.Move(view(n), "n1", "upgraded node with room") for n in ("a", "b", "c")])
    result: dict[str, Any] = {"migrated": []}
    nm.migrate_all(kube, Writer(log), NODE, plan, [], result, target_aware=True,
                   concurrency=2, retries=0, migration_timeout=0, timeout=0,
                   start_only=True, started=lambda: log.append("started"))
    # the first round (as many as may run at once), then the caller's writes, once
    assert log == ["list migrations", "migrate a", "migrate b", "started"]
    assert result["started"] == ["default/a", "default/b"]


def test_start_only_asks_for_the_first_migrations_before_anything_else_is_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    writer = Writer(log)
    plan = ev.EvacuationPlan(node=NODE, migrate=[ev.Move(view("a"), "n1", "room")],
                             shutdown=[ev.Shutdown(view("gpu"), "host device")])
    fact = {"name": NODE, "upgraded": False, "pre_drain": "{}", "unschedulable": True,
            "roles": []}
    monkeypatch.setattr(ne, "cluster_facts", lambda *_a, **_kw: [fact])
    monkeypatch.setattr(ne, "evacuation_views", lambda *_a, **_kw: ([], []))
    monkeypatch.setattr(ne, "_plan_for", lambda *_a, **_kw: plan)
    monkeypatch.setattr(ne.mt, "detect", lambda _k: {"mechanism": mt.ADDED_NODE_SELECTOR,
                                                      "why": "test"})
    # the checks decide on the state now, before anything starts
    monkeypatch.setattr(ne, "wait_volumes_safe", lambda *_a: log.append("volumes") or {})
    monkeypatch.setattr(ne, "wait_pdbs", lambda *_a: log.append("pdbs") or {})

    class Round:
        def line(self) -> str:
            return ""

        def result(self) -> dict[str, Any]:
            return {"evicted": [], "skipped": []}

    monkeypatch.setattr(ne, "_evictions", lambda *_a: log.append("evictions") or Round())

    def shut_down(*_a: Any, **_kw: Any) -> dict[str, Any]:
        log.append("stop gpu")
        return {"stopped": ["default/gpu"], "failed": []}
    monkeypatch.setattr(ne, "_shut_down", shut_down)

    def migrate_all(*_a: Any, started: Any = None, **_kw: Any) -> None:
        log.append("migrate a")
        started()
        log.append("more migrations")
        _a[5]["started"] = ["default/a"]
    monkeypatch.setattr(ne, "migrate_all", migrate_all)

    out = ne.evacuate(Kube(log, []), writer, NODE, start_only=True,
                      then=lambda: log.append("PreDraining"))
    assert log == ["volumes", "pdbs", "migrate a", "PreDraining", "evictions",
                   "event VMEvacuationStarted", "stop gpu", "more migrations"]
    assert out["started"] == ["default/a"] and "deferred" not in out


def test_with_nothing_to_migrate_the_rest_is_done_all_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    plan = ev.EvacuationPlan(node=NODE, shutdown=[ev.Shutdown(view("gpu"), "host device")])
    fact = {"name": NODE, "upgraded": False}
    monkeypatch.setattr(ne, "cluster_facts", lambda *_a, **_kw: [fact])
    monkeypatch.setattr(ne, "evacuation_views", lambda *_a, **_kw: ([], []))
    monkeypatch.setattr(ne, "_plan_for", lambda *_a, **_kw: plan)
    monkeypatch.setattr(ne, "wait_volumes_safe", lambda *_a: {})
    monkeypatch.setattr(ne, "wait_pdbs", lambda *_a: {})
    monkeypatch.setattr(ne, "_evictions", lambda *_a: None)
    monkeypatch.setattr(ne, "migrate_all", lambda *_a, **_kw: pytest.fail("nothing to move"))
    monkeypatch.setattr(ne, "_shut_down", lambda *_a, **_kw: log.append("stop") or {
        "stopped": [], "failed": ["default/gpu: refused"]})
    out = ne.evacuate(Kube(log, []), Writer(log), NODE, start_only=True,
                      then=lambda: log.append("PreDraining"))
    assert log == ["PreDraining", "event VMEvacuationStarted", "stop"]
    assert out["deferred"] == "default/gpu: refused"


@pytest.mark.parametrize(("node", "play", "want"), [
    ("n1", [], "n2"),                     # Rancher's order: the first one not upgraded
    ("", ["n1", "n2", "n3"], "n1"),       # the first node (nothing done yet)
    ("n1", ["n1", "n3"], ""),             # the next one is not a host of this play
    ("n3", [], ""),                       # nothing left
])
def test_the_node_expected_next(node: str, play: list[str], want: str) -> None:
    facts = [{"name": "n1", "upgraded": node in ("n1", "n3")},
             {"name": "n2", "upgraded": node == "n3"},
             {"name": "n3", "upgraded": node == "n3"}]
    if node == "":
        facts[0]["upgraded"] = False
    assert node_head_start.next_node(facts, node, play) == want


def test_nothing_is_prepared_without_informers_or_in_check_mode() -> None:
    class Plain:   # a client without informers (no ``warm``)
        check_mode = False

        def list(self, *_a: Any, **_kw: Any) -> Any:
            raise AssertionError("nothing is read")

    class Checking(Plain):
        check_mode = True
        warm = prefetch = list

    log: list[str] = []
    assert node_head_start.prepare(Plain(), Writer(log), "n1", []) == ""
    assert node_head_start.prepare(Checking(), Writer(log), "n1", []) == ""


def test_the_cycle_sends_what_it_put_off_once() -> None:
    node_cycle = pytest.importorskip(f"{_MU}.node_cycle")
    log: list[str] = []

    class Held:
        def hold_events(self) -> None:
            log.append("hold")

        def send_events(self) -> None:
            log.append("send")

    cycle = node_cycle.Cycle(NODE)
    w = Held()
    cycle.settle(w)                 # nothing held, nothing put off: nothing to do
    assert log == []
    cycle.hold(w)
    cycle.later.append(lambda: log.append("drop pending OS"))
    cycle.settle(w)
    cycle.settle(w)
    assert log == ["hold", "drop pending OS", "send"]


class NodeViews:
    """``wait`` over a sequence of Node views, as a watch would show them one after another:
    the predicate's answer on the first view that satisfies it, WaitTimeout past the last."""

    def __init__(self, *views: list[dict[str, Any]]) -> None:
        self.views = views
        self.shown = 0

    def wait(self, sources: Any, predicate: Any, *, what: str, timeout: float, **_: Any) -> Any:
        assert [(s.api_version, s.kind) for s in sources] == [("v1", "Node")]
        for nodes in self.views:
            self.shown += 1
            got = predicate({"Node": {n["metadata"]["name"]: n for n in nodes}})
            if got:
                return got
        raise waiting.WaitTimeout(what, timeout, "")


def _node(name: str, ready: bool = True, cordoned: bool = False,
          taints: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"unschedulable": cordoned,
                     "taints": [{"key": k, "effect": "NoSchedule"} for k in taints]},
            "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


def test_the_head_start_waits_for_the_node_done_to_show_back_before_planning() -> None:
    # Rancher uncordoned node-1 before asking for node-2; a Node view still showing it
    # cordoned (or NotReady) is behind: waited for, not planned on
    kube = NodeViews([_node("node-1", cordoned=True), _node("node-2")],
                     [_node("node-1", ready=False), _node("node-2")],
                     [_node("node-1"), _node("node-2")])
    assert node_head_start.await_back(kube, "node-1") is True
    assert kube.shown == 3


def test_the_head_start_waits_for_the_cordon_taint_to_go_too() -> None:
    # the node lifecycle controller removes node.kubernetes.io/unschedulable in a write of its
    # own after the uncordon: a view between the two leaves node-1 out of every VM's targets
    # (the VMs went to node-3, not upgraded, and moved twice: make test under load)
    kube = NodeViews([_node("node-1", taints=("node.kubernetes.io/unschedulable",))],
                     [_node("node-1", taints=("node.kubernetes.io/not-ready",))],
                     [_node("node-1", taints=("example.com/dedicated",))])
    assert node_head_start.await_back(kube, "node-1") is True
    assert kube.shown == 3
    # why: the first view's node is no VM's target
    vm = ev.VmView(namespace="default", name="vm", node="node-2")
    assert not ev.schedulable_for(vm, ev.node_view(kube.views[0][0], [], upgraded=True))


def test_a_node_that_stays_cordoned_is_planned_without_after_the_wait() -> None:
    kube = NodeViews([_node("node-1", cordoned=True)], [])
    assert node_head_start.await_back(kube, "node-1", timeout=0.1) is False


def test_longhorn_holds_the_migrations_only_when_a_vm_has_to_stop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A volume at risk on the node (its other replicas still being rebuilt) does not hold
    back live migrations, which leave every volume attached and every replica in place: they
    start at once and the wait comes after them. A VM to stop, whose stop would detach its
    volume mid-rebuild, makes the evacuation wait first (node_evacuation._volumes_before)."""
    calls: list[float] = []

    def at_risk(_kube: Any, _node: str, timeout: float) -> dict[str, Any]:
        calls.append(timeout)
        raise waiting.WaitTimeout("Longhorn volumes to be healthy", timeout,
                                  "volume v has its only healthy replica(s) on node n2")
    monkeypatch.setattr(ne, "wait_volumes_safe", at_risk)
    move = ev.EvacuationPlan(node=NODE, migrate=[ev.Move(view("a"), "n1", "room")])
    assert ne._volumes_before(None, NODE, move, 1800) == {"waited": False,
                                                          "after_migrations": True}
    assert calls == [0]
    calls.clear()
    stop = ev.EvacuationPlan(node=NODE, migrate=[ev.Move(view("a"), "n1", "room")],
                             shutdown=[ev.Shutdown(view("gpu"), "host device")])
    with pytest.raises(waiting.WaitTimeout):
        ne._volumes_before(None, NODE, stop, 1800)
    assert calls == [1800]
    calls.clear()
    with pytest.raises(waiting.WaitTimeout):      # nothing to migrate: wait first, as before
        ne._volumes_before(None, NODE, ev.EvacuationPlan(node=NODE), 60)
    assert calls == [60]
    monkeypatch.setattr(ne, "wait_volumes_safe", lambda *_a: {"waited": False})
    assert ne._volumes_before(None, NODE, move, 1800) == {"waited": False}
