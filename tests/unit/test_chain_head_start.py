"""The first node's head start done by ClusterUpgrade's call entering NodeUpgrade (``then``
options of NodeUpgrade, phase_table) and node_gate ``step=enter`` finding it done
(node_head_start.answered_already): docs/node-upgrade.md "Head start"."""

from __future__ import annotations

from typing import Any

import pytest

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
cycle_kube = pytest.importorskip(f"{_MU}.cycle_kube")
node_head_start = pytest.importorskip(f"{_MU}.node_head_start")
phase_table = pytest.importorskip(f"{_MU}.phase_table")
phases = pytest.importorskip(f"{_MU}.phases")
pipeline = pytest.importorskip(f"{_MU}.pipeline")

PLAN = "hvst-upgrade-abcde"
NODE_UPGRADE = phases.get("NodeUpgrade")
CLUSTER_UPGRADE = phases.get("ClusterUpgrade")


def plan(phase: str = "NodeUpgrading", **states: str) -> dict[str, Any]:
    return {"metadata": {"name": PLAN, "resourceVersion": "1"}, "spec": {},
            "status": {"currentPhase": phase,
                       "nodeUpgradeStatuses": {n: {"state": s} for n, s in states.items()}}}


class Writer:
    name = PLAN

    def __init__(self, kube: Any, p: dict[str, Any]) -> None:
        self.kube = kube
        self.plan = p
        self.flushed = 0

    @property
    def status(self) -> dict[str, Any]:
        return self.plan["status"]

    def refresh(self) -> dict[str, Any]:
        return self.plan

    def flush(self) -> bool:
        self.flushed += 1
        return False

    holding = False
    sent = 0

    def hold_events(self) -> None:
        self.holding = True

    def send_events(self) -> None:
        self.holding = False
        self.sent += 1


class NoReads:
    """A client that must not be used."""

    check_mode = False
    dyn = object()
    _resources: dict[Any, Any] = {}

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the cluster was read: {name}")


# -- the then options ------------------------------------------------------------------------
def chain(**options: Any) -> list[tuple[Any, dict[str, Any]]]:
    return pipeline.chain_items({"then": [{"phase": "node_upgrade", **options}]},
                                CLUSTER_UPGRADE, phase_table.TABLE)


def test_node_upgrade_then_options_are_checked_and_converted() -> None:
    [(phase, opts)] = chain(head_start="true", head_start_wait="10", head_start_finish=30,
                            play=["node-1", "node-2"])
    assert phase is NODE_UPGRADE
    assert opts == {"head_start": True, "head_start_wait": 10, "head_start_finish": 30,
                    "play": ["node-1", "node-2"]}
    # none given: no head start (as before the options existed)
    assert chain()[0][1]["head_start"] is False


@pytest.mark.parametrize("bad", [{"head_start": "maybe"}, {"head_start_wait": -1},
                                 {"head_start_finish": "1.5"}, {"head_start_wait": None},
                                 {"play": "node-1"}, {"play": [1]}, {"surprise": 1}])
def test_bad_node_upgrade_then_options_are_refused_before_anything(bad: dict[str, Any]
                                                                   ) -> None:
    with pytest.raises(ValueError, match="then: node_upgrade"):
        chain(**bad)


# -- the head start finds it done ------------------------------------------------------------
def test_answered_already_reads_the_plans_node_states() -> None:
    p = plan(**{"node-1": "PostDraining", "node-2": "ImagePreloaded"})
    assert node_head_start.answered_already(p, []) == "node-1"
    assert node_head_start.answered_already(p, ["node-2", "node-1"]) == "node-1"
    assert node_head_start.answered_already(p, ["node-2"]) == ""        # not in the play
    assert node_head_start.answered_already(p, [], node="node-1") == ""  # the node done now
    for state in ("PreDraining", "PostDrained", "PreDrainFailed", "UpgradePaused"):
        assert node_head_start.answered_already(plan(**{"node-1": state}), []) == ""
    for state in ("PreDrained", "WaitingReboot"):
        assert node_head_start.answered_already(plan(**{"node-1": state}), []) == "node-1"


def test_a_head_start_done_already_returns_at_once_reading_nothing() -> None:
    w = Writer(NoReads(), plan(**{"node-1": "PreDrained", "node-2": "ImagePreloaded"}))
    res = node_head_start.first_head_start(NoReads(), w, ["node-1", "node-2"], wait=10,
                                           finish=30)
    assert res["next"] == "node-1" and not res["changed"] and not res["started"]
    assert "answered already" in res["why"]


def test_a_head_start_stopped_before_the_answer_is_taken_up_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # killed between the migrations and the answer: the node is PreDraining; the enter's head
    # start goes on (reads the cluster, waits for the pre-drain, adopts the migrations)
    class Went(Exception):
        pass

    def facts(*_a: Any, **_kw: Any) -> Any:
        raise Went

    monkeypatch.setattr(node_head_start, "cluster_facts", facts)
    w = Writer(NoReads(), plan(**{"node-1": "PreDraining"}))
    with pytest.raises(Went):
        node_head_start.head_start(NoReads(), w, "", ["node-1", "node-2"], wait=10)


# -- ClusterUpgrade's call does it -----------------------------------------------------------
def test_cluster_upgrades_call_enters_node_upgrade_then_head_starts_through_informers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    plain = NoReads()
    w = Writer(plain, plan("ClusterUpgraded"))
    calls: list[str] = []
    monkeypatch.setattr(cycle_kube.CycleKube, "prefetch",
                        lambda self, wait=True, scoped=(): calls.append("prefetch"))
    monkeypatch.setattr(cycle_kube.CycleKube, "close", lambda self: calls.append("close"))
    monkeypatch.setattr(node_head_start, "prepare",
                        lambda kube, writer, node, play: calls.append(f"prepare {node!r}"))

    def enter(kube: Any, writer: Any, **kw: Any) -> dict[str, Any]:
        # the entry (Rancher's upgrade) first, through the cycle's client (its writes seen
        # by the informers), before the informers of the head start's reads are started
        # (the first node's own reads prepared before it); its record of Rancher's upgrade
        # is held for the head start's first write, its Events for after the first
        # migrations
        assert isinstance(kube, cycle_kube.CycleKube) and writer.kube is kube
        assert kube.dyn is plain.dyn
        assert kw == {"fresh": True, "light": True, "hold_record": True}
        assert calls == ["prepare ''"] and writer.holding
        calls.append("enter")
        writer.plan["status"]["currentPhase"] = "NodeUpgrading"
        return {"changed": True, "phase": "NodeUpgrading", "settings": ["held x"],
                "order": ["node-1", "node-2"], "single_node": False}

    def first(kube: Any, writer: Any, play: list[str], wait: float, finish: float,
              started: Any = None) -> dict[str, Any]:
        assert isinstance(kube, cycle_kube.CycleKube) and writer.kube is kube
        assert calls == ["prepare ''", "enter", "prefetch"] and writer.holding
        assert (play, wait, finish) == (["node-1", "node-2"], 7.0, 30.0)
        calls.append("head start")
        started()   # its first migrations asked for: the held Events go
        assert not writer.holding
        return {"changed": True, "next": "node-1", "why": "", "started": ["m1"],
                "stopping": [], "answered": True, "migrated": ["vm1"], "job": "j1"}

    monkeypatch.setattr(node_head_start, "enter_phase", enter)
    monkeypatch.setattr(node_head_start, "first_head_start", first)
    [(phase, opts)] = chain(head_start=True, head_start_wait=7, head_start_finish=30)
    flushed = w.flushed
    started = pipeline.start_chain(plain, w, {"timeout": 60}, [(phase, opts)],
                                   phase_table.TABLE)
    assert calls == ["prepare ''", "enter", "prefetch", "head start", "close"]
    assert w.flushed > flushed and not w.holding   # the held record written at the latest
    assert w.kube is plain   # writes through the call's client again
    [entry] = started
    assert entry["phase"] == "NodeUpgrade" and entry["status"] == "started"
    assert entry["head_start"]["next"] == "node-1" and "changed" not in entry["head_start"]
    assert entry["actions"][:2] == ["enter phase NodeUpgrading", "held x"]
    assert entry["actions"][2].startswith("head start: 1 migration(s) started off node-1")


def test_without_head_start_the_entry_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = NoReads()
    w = Writer(plain, plan("ClusterUpgraded"))

    def enter(kube: Any, writer: Any, **kw: Any) -> dict[str, Any]:
        return {"changed": True, "phase": "NodeUpgrading", "settings": [], "order": ["a"],
                "single_node": False}

    monkeypatch.setattr(phase_table.node_phase, "enter_phase", enter)
    monkeypatch.setattr(node_head_start, "first_head_start",
                        lambda *_a, **_kw: pytest.fail("no head start asked for"))
    [entry] = pipeline.start_chain(plain, w, {"timeout": 60}, chain(), phase_table.TABLE)
    assert entry["status"] == "started" and "head_start" not in entry


def test_a_single_node_cluster_gets_no_head_start(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = NoReads()
    w = Writer(plain, plan("ClusterUpgraded"))
    w.plan["status"]["singleNode"] = "a"   # as Initialize records it
    monkeypatch.setattr(node_head_start, "enter_phase", lambda *_a, **_kw: {
        "changed": True, "phase": "NodeUpgrading", "settings": [], "order": ["a"],
        "single_node": True})
    monkeypatch.setattr(cycle_kube.CycleKube, "close", lambda self: None)
    monkeypatch.setattr(cycle_kube.CycleKube, "prefetch",
                        lambda *_a, **_kw: pytest.fail("no informer for a single node"))
    [entry] = pipeline.start_chain(plain, w, {"timeout": 60}, chain(head_start=True),
                                   phase_table.TABLE)
    assert "head_start" not in entry


def _vmi(name: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"domain": {}}
    if selector is not None:
        spec["nodeSelector"] = selector
    return {"metadata": {"namespace": "default", "name": name}, "spec": spec,
            "status": {"nodeName": "node-2", "phase": "Running"}}


def _mig(vmi: str, phase: str, run: str = "run-1") -> dict[str, Any]:
    return {"metadata": {"namespace": "default", "name": f"{vmi}-x",
                         "annotations": {node_head_start.RUN_ANNOTATION: run}},
            "spec": {"vmiName": vmi}, "status": {"phase": phase}}


def test_the_pre_drain_job_may_start_beside_admitted_unpinned_migrations_only() -> None:
    """node_head_start.all_under_way: the pre-drain Job's VM detector stops every VMI with a
    node selector (an empty one too), and KubeVirt's evacuation moves, without a target,
    every VMI with no migration under way: the Job starts early only when neither applies."""
    under_way = node_head_start.all_under_way
    left = [_vmi("a"), _vmi("b")]
    migs = [_mig("a", "Running"), _mig("b", "Scheduling")]
    assert under_way(left, migs, "run-1")
    assert under_way([], [], "run-1")
    # queued at KubeVirt, finished or failed: not in a lane
    for phase in ("Pending", "", "Succeeded", "Failed"):
        assert not under_way(left, [migs[0], _mig("b", phase)], "run-1")
    # moved by a migration of someone else (another run, KubeVirt's evacuation)
    assert not under_way(left, [migs[0], _mig("b", "Running", run="run-0")], "run-1")
    # no migration at all for one of them
    assert not under_way(left, migs[:1], "run-1")
    # Harvester's v1.6 pin still on the VMI, or an empty selector (NodeSelector != nil)
    for sel in ({"kubernetes.io/hostname": "node-1"}, {}):
        assert not under_way([_vmi("a"), _vmi("b", sel)], migs, "run-1")
