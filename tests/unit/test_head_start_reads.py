"""The end of a head start (node_head_start.finish_head_start) answers the node's pre-drain
with the pre-drain Job it has just seen complete and counts the node's migrations from the
wait that saw its VMs off: neither the Job, the restore-vm ConfigMap nor the migrations are
read again for it (docs/performance.md "API requests, round three")."""

from __future__ import annotations

from typing import Any

import pytest

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
c = pytest.importorskip(f"{_MU}.constants")
node_hooks = pytest.importorskip(f"{_MU}.node_hooks")
node_head_start = pytest.importorskip(f"{_MU}.node_head_start")
no = pytest.importorskip(f"{_MU}.node_order")

NODE = "n2"
PLAN = "hvst-upgrade-abcde"


class Writer:
    name = PLAN

    def __init__(self) -> None:
        self.plan = {"metadata": {"name": PLAN}, "spec": {}, "status": {
            "currentPhase": "NodeUpgrading"}}
        self.states: list[str] = []
        self.events: list[str] = []

    def refresh(self) -> dict[str, Any]:
        return self.plan

    def labels(self, component: str) -> dict[str, str]:
        return {c.LABEL_PLAN: PLAN, c.LABEL_COMPONENT: component}

    def set_node_state(self, node: str, state: str, *_a: Any, **_kw: Any) -> bool:
        self.states.append(state)
        return True

    def event(self, reason: str, message: str, **_kw: Any) -> None:
        self.events.append(reason)


class Kube:
    check_mode = False

    def __init__(self) -> None:
        self.patched: list[str] = []
        self.secret = {"metadata": {"name": "mp", "annotations": {no.PRE_DRAIN: "v1"}}}

    def get(self, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> dict[str, Any] | None:
        if kind == "Secret":
            return self.secret
        if kind == "Node":
            return {"metadata": {"name": NODE}, "spec": {"unschedulable": True}}
        raise AssertionError(f"not read again: {kind} {name}")

    def list(self, *args: Any, **kw: Any) -> list[dict[str, Any]]:
        raise AssertionError(f"not listed again: {args}")

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None) -> dict[str, Any]:
        self.patched.append(f"{kind}/{name}")
        return {}


def _facts(monkeypatch: pytest.MonkeyPatch) -> None:
    fact = {"name": NODE, "machine_plan_secret": "mp", "upgraded": False}
    monkeypatch.setattr(node_hooks, "cluster_facts", lambda *_a, **_kw: [fact])
    monkeypatch.setattr(node_hooks, "hook_names", lambda _k: (no.DEFAULT_PRE_HOOK,
                                                               no.DEFAULT_POST_HOOK))


def test_the_answer_takes_a_pre_drain_job_seen_complete_just_now(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _facts(monkeypatch)

    def again(*_a: Any, **_kw: Any) -> dict[str, Any]:
        raise AssertionError("the pre-drain Job is not run (read) again")
    monkeypatch.setattr(node_hooks, "run_pre_drain_job", again)
    kube, writer = Kube(), Writer()
    res = node_hooks.answer_hook(kube, writer, NODE, "pre-drain",  # type: ignore[arg-type]
                                 pre_drain_job={"complete": True, "changed": False})
    assert res["changed"] and kube.patched == ["Secret/mp"], res
    assert writer.states == ["PreDrained"] and writer.events == ["NodePreDrained"]
    # a Job not seen complete is run (awaited) as before
    monkeypatch.setattr(node_hooks, "run_pre_drain_job",
                        lambda *_a, **_kw: {"complete": True, "changed": True})
    kube.secret["metadata"]["annotations"].pop(no.DEFAULT_PRE_HOOK, None)
    assert node_hooks.answer_hook(kube, Writer(), NODE, "pre-drain",  # type: ignore[arg-type]
                                  pre_drain_job={"complete": False})["changed"]


def test_the_end_of_a_head_start_reads_neither_the_job_nor_the_migrations_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mig = {"metadata": {"name": "m1", "namespace": "default"},
           "spec": {"vmiName": "vm1"},
           "status": {"phase": "Succeeded", "migrationState": {"targetNode": "n3"}}}

    class Waiting(Kube):
        def wait(self, sources: list[Any], predicate: Any, **_kw: Any) -> Any:
            return predicate({"VirtualMachineInstance": {},
                              "VirtualMachineInstanceMigration": {"default/m1": mig}})

    class Round:
        def result(self) -> dict[str, Any]:
            return {"evicted": [], "left": [], "skipped": ""}

    answered: dict[str, Any] = {}

    def answer(*_a: Any, **kw: Any) -> dict[str, Any]:
        answered.update(kw)
        return {"changed": True, "passed": True}
    hs = node_head_start
    for name in ("wait_volumes_safe", "wait_pdbs", "wait_nodes_ready", "check_phase"):
        monkeypatch.setattr(hs, name, lambda *_a, **_kw: {})
    monkeypatch.setattr(hs.pe, "start_round", lambda *_a, **_kw: Round())
    monkeypatch.setattr(hs, "taint_node", lambda *_a: False)
    monkeypatch.setattr(hs, "no_shutdown_event", lambda *_a: None)
    monkeypatch.setattr(hs, "run_pre_drain_job", lambda *_a, **_kw: {
        "complete": True, "changed": True, "job": "j"})
    monkeypatch.setattr(hs, "answer_hook", answer)
    out = hs.finish_head_start(Waiting(), Writer(), NODE, "mp", 30)  # type: ignore[arg-type]
    assert answered["pre_drain_job"]["complete"], answered
    assert out["migrated"] == [{"vm": "default/vm1", "attempts": 1, "to": "n3"}], out


def test_a_head_start_creates_the_pre_drain_job_before_it_taints_the_node(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the VMs are off, the pre-drain Job is created first: the taint (and the
    detector's Event) follow at once, while its pod starts, instead of holding it up."""
    order: list[str] = []

    class Waiting(Kube):
        def wait(self, sources: list[Any], predicate: Any, **_kw: Any) -> Any:
            return predicate({"VirtualMachineInstance": {},
                              "VirtualMachineInstanceMigration": {}})

    class Round:
        def result(self) -> dict[str, Any]:
            return {"evicted": [], "left": [], "skipped": ""}

    def job(*_a: Any, on_created: Any = None, **_kw: Any) -> dict[str, Any]:
        order.append("job created")
        if on_created is not None:
            on_created()
        order.append("job awaited")
        return {"complete": True, "changed": True, "job": "j"}
    hs = node_head_start
    for name in ("wait_volumes_safe", "wait_pdbs", "wait_nodes_ready", "check_phase"):
        monkeypatch.setattr(hs, name, lambda *_a, **_kw: {})
    monkeypatch.setattr(hs.pe, "start_round", lambda *_a, **_kw: Round())
    monkeypatch.setattr(hs, "taint_node", lambda *_a: order.append("taint") or True)
    monkeypatch.setattr(hs, "no_shutdown_event", lambda *_a: order.append("event"))
    monkeypatch.setattr(hs, "run_pre_drain_job", job)
    monkeypatch.setattr(hs, "answer_hook", lambda *_a, **_kw: order.append("answer") or {
        "changed": True, "passed": True})
    out = hs.finish_head_start(Waiting(), Writer(), NODE, "mp", 30)  # type: ignore[arg-type]
    assert order == ["job created", "taint", "event", "job awaited", "answer"], order
    assert out["changed"]


def test_the_pre_drain_job_is_created_before_what_follows_it_and_reads_engines_once(
        ) -> None:
    """run_pre_drain_job: ``on_created`` runs right after the create, before the wait; the
    Engines are listed once for both of its questions (settled? what to skip?)."""
    node_job = pytest.importorskip(f"{_MU}.node_job")
    name = node_job.job_name(PLAN, "pre-drain", NODE)
    order: list[str] = []
    engine = {"metadata": {"name": "e1", "labels": {"longhornvolume": "pvc-a"}},
              "status": {"currentState": "running"}}
    volume = {"metadata": {"name": "pvc-a"},
              "status": {"state": "attached", "robustness": "degraded", "conditions": [
                  {"type": "Scheduled", "status": "False"}]}}
    replica = {"spec": {"volumeName": "pvc-a", "nodeID": "n3",
                        "healthyAt": "2026-01-01T00:00:00Z"},
               "status": {"currentState": "running"}}

    class Jobs(Kube):
        def get(self, api_version: str, kind: str, name: str,
                namespace: str | None = None) -> dict[str, Any] | None:
            return None

        def list(self, api_version: str, kind: str, *_a: Any, **_kw: Any
                 ) -> list[dict[str, Any]]:
            order.append(f"list {kind}")
            return {"Engine": [engine], "Volume": [volume], "Replica": [replica]}[kind]

        def create_in(self, api_version: str, kind: str, body: dict[str, Any],
                      namespace: str) -> dict[str, Any]:
            order.append("create")
            self.body = body
            return {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}

        def seed(self, obj: dict[str, Any]) -> None:
            pass

        def wait(self, sources: list[Any], predicate: Any, **_kw: Any) -> Any:
            order.append("wait")
            done = {"metadata": {"name": name}, "status": {"conditions": [
                {"type": "Complete", "status": "True"}]}}
            return predicate({"Job": {name: done}})

    class JobWriter(Writer):
        def __init__(self) -> None:
            super().__init__()
            self.plan["spec"] = {"upgrade": "v1.6.0"}

        def owner_reference(self) -> dict[str, Any]:
            return {"kind": "UpgradePlan", "name": PLAN, "controller": True}

    kube = Jobs()
    out = node_job.run_pre_drain_job(kube, JobWriter(), NODE,  # type: ignore[arg-type]
                                     on_created=lambda: order.append("on_created"))
    assert out["complete"] and out["skip_volumes"] == ["pvc-a"], out
    assert order == ["list Engine", "list Volume", "list Replica", "create", "on_created",
                     "wait"], order


def test_a_node_job_read_as_running_answers_the_wait_on_it() -> None:
    node_job = pytest.importorskip(f"{_MU}.node_job")
    name = node_job.job_name(PLAN, "pre-drain", NODE)
    running = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "namespace": c.UPGRADE_NS, "resourceVersion": "9"},
               "status": {"active": 1}}
    order: list[str] = []

    class Jobs(Kube):
        def get(self, api_version: str, kind: str, name: str,
                namespace: str | None = None) -> dict[str, Any] | None:
            return running if kind == "Job" else None

        def seed(self, obj: dict[str, Any]) -> None:
            order.append(f"seed {obj['metadata']['name']}")

        def wait(self, sources: list[Any], predicate: Any, **_kw: Any) -> Any:
            order.append("wait")
            done = {**running, "status": {"conditions": [{"type": "Complete",
                                                          "status": "True"}]}}
            return predicate({"Job": {name: done}})
    out = node_job.run_pre_drain_job(Jobs(), Writer(), NODE)  # type: ignore[arg-type]
    assert out["complete"] and order == [f"seed {name}", "wait"], (out, order)


@pytest.mark.parametrize(("held", "status", "reads"), [
    # the run's ClusterUpgrade call entered the phase moments ago, and the plan says so
    (True, {"currentPhase": "NodeUpgrading", "provisionGeneration": 4}, False),
    # ... but the plan does not record the whole entry: held again
    (True, {"currentPhase": "NodeUpgrading"}, True),
    # a resumed run (no call of this run entered it): held again, as the protocol says
    (False, {"currentPhase": "NodeUpgrading", "provisionGeneration": 4}, True),
])
def test_the_node_plays_entry_holds_the_settings_again_unless_this_run_just_did(
        monkeypatch: pytest.MonkeyPatch, held: bool, status: dict[str, Any],
        reads: bool) -> None:
    node_phase = pytest.importorskip(f"{_MU}.node_phase")
    facts = [{"name": n, "roles": ["control-plane", "etcd", "worker"]} for n in ("a", "b")]
    calls: list[str] = []
    monkeypatch.setattr(node_phase, "cluster_facts", lambda *_a, **_kw: facts)
    monkeypatch.setattr(node_phase, "inventory", lambda _f: {"order": ["a", "b"]})
    monkeypatch.setattr(node_phase.node_settings, "hold", lambda *_a, **_kw: calls.append(
        "hold") or {"changed": False, "actions": []})
    monkeypatch.setattr(node_phase, "start_rancher_upgrade",
                        lambda *_a, **_kw: {"changed": False})
    writer = Writer()
    writer.plan["status"] = {**status, "nodeUpgradeStatuses": {
        "a": {"state": "ImagePreloaded"}, "b": {"state": "ImagePreloaded"}}}
    res = node_phase.enter_phase(Kube(), writer, held=held)  # type: ignore[arg-type]
    assert res["phase"] == "NodeUpgrading" and res["settings"] == []
    assert calls == (["hold"] if reads else []), calls
