"""The pods evicted ahead of Rancher's drain (node_pod_eviction): which ones, under which drain
options, and what a refusal does (nothing but leave the pod to the drain)."""

from __future__ import annotations

import json
from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
pe = pytest.importorskip(f"{_MU}.node_pod_eviction")
errors = pytest.importorskip(f"{_MU}.errors")

NODE = "n1"
# what the collection gives Rancher (manifests.upgrade_strategy), as Rancher encodes it
OPTS = {"enabled": True, "force": True, "ignoreDaemonSets": True, "deleteEmptyDirData": True,
        "disableEviction": False, "gracePeriod": -1, "timeout": 0,
        "skipWaitForDeleteTimeoutSeconds": 0}


def pod(name: str, ns: str = "default", *, node: str = NODE, owner: str | None = "ReplicaSet",
        labels: dict[str, str] | None = None, phase: str = "Running",
        deleting: bool = False, annotations: dict[str, str] | None = None,
        empty_dir: bool = False, ready: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns,
                            "labels": {"app": "web"} if labels is None else labels}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"nodeName": node}
    if empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    status: dict[str, Any] = {"phase": phase}
    if phase == "Running":
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": meta, "spec": spec, "status": status}


def pdb(name: str = "web", ns: str = "default", selector: Any = None, *, allowed: int = 1,
        behind: bool = False) -> dict[str, Any]:
    sel = {"matchLabels": {"app": "web"}} if selector is None else selector
    return {"metadata": {"name": name, "namespace": ns, "generation": 2},
            "spec": {"minAvailable": 2, "selector": sel},
            "status": {"disruptionsAllowed": allowed, "observedGeneration": 1 if behind else 2}}


def picked(pods: list[dict[str, Any]], pdbs: list[dict[str, Any]] | None = None,
           opts: dict[str, Any] | None = None) -> list[str]:
    return [e["pod"] for e in pe.select(pods, [pdb()] if pdbs is None else pdbs, NODE,
                                        OPTS if opts is None else opts)]


def test_a_replicaset_pod_a_budget_selects_is_picked_with_its_budget() -> None:
    got = pe.select([pod("web-1")], [pdb()], NODE, OPTS)
    assert got == [{"pod": "default/web-1", "namespace": "default", "name": "web-1",
                    "pdb": "default/web", "budgeted": True}]
    assert picked([pod("db-0", owner="StatefulSet")]) == ["default/db-0"]


@pytest.mark.parametrize(("p", "why"), [
    (pod("w", node="n2"), "on another node"),
    (pod("w", phase="Succeeded"), "terminal"),
    (pod("w", phase="Failed"), "terminal"),
    (pod("w", deleting=True), "being deleted"),
    (pod("w", owner=None), "a bare pod has no controller to recreate it"),
    (pod("w", owner="DaemonSet"), "a DaemonSet's pod"),
    (pod("w", owner="Job"), "a Job's pod loses its run"),
    (pod("w", annotations={"kubernetes.io/config.mirror": "x"}), "a mirror pod"),
    (pod("w", labels={"app": "web", "kubevirt.io": "virt-launcher"}), "a VM launcher"),
    (pod("w", labels={"app": "other"}), "no budget selects it"),
])
def test_pods_never_evicted_early(p: dict[str, Any], why: str) -> None:
    assert picked([p]) == [], why


@pytest.mark.parametrize("ns", ["kube-system", "cattle-system", "cattle-monitoring-system",
                                "fleet-local", "longhorn-system", "harvester-system", "cdi"])
def test_system_namespaces_stay_rancher_drains_business(ns: str) -> None:
    assert picked([pod("w", ns)], [pdb(ns=ns)]) == []
    assert pe.system_namespace(ns)
    assert not pe.system_namespace("default") and not pe.system_namespace("cattlefarm")


def test_a_budget_of_another_namespace_does_not_count() -> None:
    assert picked([pod("w", "team-a")], [pdb(ns="team-b")]) == []


def test_two_budgets_selecting_a_pod_leave_it_alone() -> None:
    # the eviction API refuses such a pod (500): nothing to gain by asking
    assert picked([pod("w")], [pdb("a"), pdb("b")]) == []


def test_policy_v1_selectors() -> None:
    # an empty selector selects every pod of its namespace, a null one none
    assert picked([pod("w")], [pdb(selector={})]) == ["default/w"]
    none = pdb()
    none["spec"]["selector"] = None
    assert picked([pod("w")], [none]) == []
    expr = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}
    assert picked([pod("w")], [pdb(selector=expr)]) == ["default/w"]
    expr["matchExpressions"][0]["operator"] = "NotIn"
    assert picked([pod("w")], [pdb(selector=expr)]) == []


def test_empty_dir_only_when_the_drain_may_delete_it() -> None:
    assert picked([pod("w", empty_dir=True)]) == ["default/w"]
    assert picked([pod("w", empty_dir=True)], opts={**OPTS, "deleteEmptyDirData": False}) == []


@pytest.mark.parametrize(("opts", "why"), [
    (None, "not known"),
    ({**OPTS, "enabled": False}, "does not drain"),
    ({**OPTS, "disableEviction": True}, "disableEviction"),
])
def test_drain_options_that_evict_nothing_early(opts: dict[str, Any] | None, why: str) -> None:
    assert why in pe.not_early(opts)
    assert pe.not_early(OPTS) == ""


def test_drain_options_are_read_from_rancher_annotation_value() -> None:
    assert pe.drain_options(json.dumps(OPTS)) == OPTS
    assert pe.drain_options(None) is None
    assert pe.drain_options("{not json") is None
    assert pe.drain_options("[1]") is None


class Kube:
    """The reads and the eviction of client.Kube that evict_early uses; ``answers`` maps a
    pod name to the ApiError its eviction raises."""

    def __init__(self, pods: list[dict[str, Any]], pdbs: list[dict[str, Any]], *,
                 answers: dict[str, Exception] | None = None, check_mode: bool = False) -> None:
        self.pods, self.pdbs = pods, pdbs
        self.answers = answers or {}
        self.check_mode = check_mode
        self.evictions: list[tuple[str, str, int | None]] = []
        self.lists: list[tuple[str, str | None]] = []

    def list(self, api: str, kind: str, ns: str | None = None,
             label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        self.lists.append((kind, field_selector))
        return self.pods if kind == "Pod" else self.pdbs

    def evict(self, name: str, namespace: str, grace_period: int | None = None) -> None:
        self.evictions.append((namespace, name, grace_period))
        if name in self.answers:
            raise self.answers[name]


def test_round_evicts_through_the_eviction_api_and_leaves_a_refused_pod() -> None:
    kube = Kube([pod("web-1"), pod("web-2"), pod("gone"), pod("ds", owner="DaemonSet")],
                [pdb()],
                answers={"web-2": errors.ApiError(429, "TooManyRequests", "budget"),
                         "gone": errors.ApiError(404, "NotFound", "gone")})
    res = pe.evict_early(kube, NODE, json.dumps(OPTS), cordoned=True)   # type: ignore[arg-type]
    # a pod gone meanwhile took nothing of the budget; the one it allows went; the next one
    # was not asked for (the apiserver answers 429: docs/performance.md, round three)
    assert kube.evictions == [("default", "gone", None), ("default", "web-1", None)]
    assert res["evicted"] == ["default/web-1"]
    assert res["left"] == ["default/web-2: PodDisruptionBudget default/web allows no "
                           "disruption now"]
    # the node's pods only (the field the API server indexes)
    assert ("Pod", f"spec.nodeName={NODE}") in kube.lists
    assert pe.short(res) == "1 pod(s) evicted ahead of Rancher's drain, 1 left to its drain"


def test_any_other_refusal_is_left_to_the_drain_too() -> None:
    kube = Kube([pod("web-1")], [pdb()],
                answers={"web-1": errors.ApiError(403, "Forbidden", "no pods/eviction")})
    res = pe.evict_early(kube, NODE, json.dumps(OPTS), cordoned=True)   # type: ignore[arg-type]
    assert res["evicted"] == [] and res["left"][0].startswith("default/web-1: eviction "
                                                              "refused (403")


def test_grace_period_as_kubectls_drain_helper_sends_it() -> None:
    for grace, sent in ((-1, None), (0, 0), (30, 30)):
        kube = Kube([pod("web-1")], [pdb()])
        pe.evict_early(kube, NODE, json.dumps({**OPTS, "gracePeriod": grace}),  # type: ignore[arg-type]
                       cordoned=True)
        assert kube.evictions == [("default", "web-1", sent)]


def test_nothing_before_rancher_cordons_the_node_nor_without_its_drain() -> None:
    kube = Kube([pod("web-1")], [pdb()])
    res = pe.evict_early(kube, NODE, json.dumps(OPTS), cordoned=False)  # type: ignore[arg-type]
    assert "not cordoned" in res["skipped"]
    res = pe.evict_early(kube, NODE, json.dumps({**OPTS, "disableEviction": True}),  # type: ignore[arg-type]
                         cordoned=True)
    assert "disableEviction" in res["skipped"]
    res = pe.evict_early(kube, NODE, None, cordoned=True)  # type: ignore[arg-type]
    assert "not known" in res["skipped"]
    assert kube.evictions == [] and kube.lists == []
    assert pe.short(res) == ""


def test_check_mode_evicts_nothing_and_says_what_it_would() -> None:
    kube = Kube([pod("web-1"), pod("web-2")], [pdb()], check_mode=True)
    # before Rancher wrote the node's drain options or cordoned it: the collection's own
    rnd = pe.start_round(kube, NODE, None, cordoned=False,  # type: ignore[arg-type]
                         roles=["control-plane", "etcd", "worker"])
    assert rnd.line() == ("would evict 2 pod(s) ahead of Rancher's drain "
                          "(PodDisruptionBudget): default/web-1, default/web-2")
    res = rnd.result()
    assert res["would_evict"] == ["default/web-1", "default/web-2"]
    assert kube.evictions == []
    assert pe.short(res) == "2 pod(s) to evict ahead of Rancher's drain"


def test_a_round_names_its_pods_at_once_and_sends_them_beside_the_caller() -> None:
    import threading
    gate = threading.Event()

    class Slow(Kube):
        def evict(self, name: str, namespace: str, grace_period: int | None = None) -> None:
            assert gate.wait(10)          # answered only once the caller went on
            super().evict(name, namespace, grace_period)
    kube = Slow([pod("web-1")], [pdb()])
    rnd = pe.start_round(kube, NODE, json.dumps(OPTS), cordoned=True)  # type: ignore[arg-type]
    assert rnd.line() == ("evicting 1 pod(s) ahead of Rancher's drain (PodDisruptionBudget): "
                          "default/web-1")
    gate.set()
    assert rnd.result()["evicted"] == ["default/web-1"]


def test_a_round_that_cannot_send_leaves_its_pods_to_the_drain() -> None:
    class Lost(Kube):
        def evict(self, name: str, namespace: str, grace_period: int | None = None) -> None:
            raise RuntimeError("upgrade lock lost")
    res = pe.evict_early(Lost([pod("web-1")], [pdb()]), NODE,  # type: ignore[arg-type]
                         json.dumps(OPTS), cordoned=True)
    assert res["evicted"] == [] and res["left"] == [
        "default/web-1: not sent (upgrade lock lost)"]


def test_rounds_merge_into_one_result() -> None:
    first = {"evicted": ["default/a"], "left": ["default/b: budget"], "skipped": ""}
    second = {"evicted": ["default/b"], "left": [], "skipped": ""}
    assert pe.merge(first, second) == {"evicted": ["default/a", "default/b"], "left": [],
                                       "skipped": ""}


def test_a_round_asks_for_no_more_ready_pods_than_their_budget_allows() -> None:
    """Each Eviction the budget is known to refuse (429) is not sent; the pod is left to
    Rancher's drain with the same reason as a refused one, and the same pods are evicted."""
    pods = [pod("web-1"), pod("web-2"), pod("web-3")]
    for allowed, sent in ((0, []), (1, ["web-1"]), (2, ["web-1", "web-2"]),
                          (3, ["web-1", "web-2", "web-3"])):
        kube = Kube(pods, [pdb(allowed=allowed)])
        res = pe.evict_early(kube, NODE, json.dumps(OPTS), cordoned=True)  # type: ignore[arg-type]
        assert [n for _ns, n, _g in kube.evictions] == sent, allowed
        assert res["evicted"] == [f"default/{n}" for n in sent]
        assert res["left"] == [f"default/{n}: PodDisruptionBudget default/web allows no "
                               "disruption now" for n in ("web-1", "web-2", "web-3")
                               if n not in sent]
    # budgets count separately
    other = [pod("db-0", labels={"app": "db"}), pod("db-1", labels={"app": "db"})]
    kube = Kube(pods + other, [pdb(allowed=1), pdb("db", selector={"matchLabels": {
        "app": "db"}}, allowed=1)])
    pe.evict_early(kube, NODE, json.dumps(OPTS), cordoned=True)  # type: ignore[arg-type]
    assert [n for _ns, n, _g in kube.evictions] == ["db-0", "web-1"]


def test_pods_the_apiserver_may_evict_past_the_budget_are_still_asked_for() -> None:
    """A Pending pod (no budget consulted) and a Running pod that is not Ready (evicted without
    a disruption under the budget's unhealthy-pod policy) are asked for whatever the budget
    allows: the apiserver decides."""
    kube = Kube([pod("web-1", phase="Pending"), pod("web-2", ready=False), pod("web-3")],
                [pdb(allowed=0)])
    res = pe.evict_early(kube, NODE, json.dumps(OPTS), cordoned=True)  # type: ignore[arg-type]
    assert [n for _ns, n, _g in kube.evictions] == ["web-1", "web-2"]
    assert res["evicted"] == ["default/web-1", "default/web-2"]
    assert res["left"] == ["default/web-3: PodDisruptionBudget default/web allows no "
                           "disruption now"]


def test_a_budget_whose_status_is_behind_is_asked_and_its_first_429_ends_it() -> None:
    kube = Kube([pod("web-1"), pod("web-2"), pod("web-3")], [pdb(allowed=3, behind=True)],
                answers={"web-1": errors.ApiError(429, "TooManyRequests", "not observed")})
    res = pe.evict_early(kube, NODE, json.dumps(OPTS), cordoned=True)  # type: ignore[arg-type]
    assert [n for _ns, n, _g in kube.evictions] == ["web-1"]
    assert res["evicted"] == [] and len(res["left"]) == 3
    assert pe.allowed_disruptions([pdb(allowed=2), pdb("x", behind=True),
                                   {"metadata": {"name": "y", "namespace": "default"}}]) == {
        "default/web": 2}
