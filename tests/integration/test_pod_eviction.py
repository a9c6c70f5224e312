"""The pods evicted ahead of Rancher's drain (node_pod_eviction) on the simulator: on three-node
a cordoned node's ``web-frontend`` pod (a Deployment whose PodDisruptionBudget says
minAvailable 2 of 3) goes through the eviction API; while the budget allows no disruption the
pod stays where it is, left to Rancher's drain (no Eviction sent: the API server would answer
429); no budget is ever violated. (The whole upgrade doing the same on every node, in both
node-upgrade modes: test_node_cycle.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("harvester_sim")

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (  # noqa: E402
    client,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (  # noqa: E402
    node_pod_eviction as pe,
)
from harvester_sim import report as rep  # noqa: E402
from harvester_sim.testing import wait_for  # noqa: E402

pytestmark = [pytest.mark.timeout(300)]

PDB = ("policy/v1", "PodDisruptionBudget")
DRAIN = json.dumps(pe.own_drain_options(["control-plane", "etcd", "worker"]))


def _frontend(sim: Any) -> list[dict[str, Any]]:
    return [p for p in sim.world.client.list("v1", "Pod", namespace="default")
            if p["metadata"]["name"].startswith("web-frontend-")]


def _budget_allows(sim: Any, n: int) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        b = sim.world.client.get(*PDB, "web-frontend", namespace="default")
        st = b.get("status") or {}
        ok = (st.get("observedGeneration") == b["metadata"].get("generation")
              and st.get("disruptionsAllowed") == n)
        return b if ok else None
    return wait_for(check, 60, f"PodDisruptionBudget web-frontend allowing {n}", poll=0.05)


def _min_available(sim: Any, n: int) -> None:
    def fn(b: dict[str, Any]) -> dict[str, Any]:
        b["spec"]["minAvailable"] = n
        return b
    sim.world.client.modify(*PDB, "web-frontend", fn, namespace="default")


def test_cordoned_nodes_frontend_pod_is_evicted_and_a_429_leaves_it(simulator: Any) -> None:
    sim = simulator("three-node", speed=200)
    c = sim.world.client
    wait_for(lambda: len([p for p in _frontend(sim)
                          if (p.get("status") or {}).get("phase") == "Running"]) == 3,
             60, "three web-frontend pods Running", poll=0.05)
    _budget_allows(sim, 1)
    on = {}
    for p in _frontend(sim):
        on.setdefault(p["spec"]["nodeName"], []).append(p["metadata"]["name"])
    node = "node-1" if "node-1" in on else sorted(on)[0]

    def cordon(n: dict[str, Any]) -> dict[str, Any]:
        n["spec"]["unschedulable"] = True
        return n
    c.modify("v1", "Node", node, cordon)
    kube = client.Kube.from_options(kubeconfig=str(sim.kubeconfig))

    # the budget allows no disruption: the API server refuses, the pod is left where it is
    _min_available(sim, 3)
    _budget_allows(sim, 0)
    res = pe.evict_early(kube, node, DRAIN, cordoned=True)
    assert res["evicted"] == [], res
    assert sorted(x.split(":")[0] for x in res["left"]) == sorted(
        f"default/{n}" for n in on[node]), res
    assert all("allows no disruption now" in x for x in res["left"]), res
    still = {p["metadata"]["name"]: p for p in _frontend(sim)}
    assert all(n in still and not still[n]["metadata"].get("deletionTimestamp")
               for n in on[node]), still

    # one disruption allowed: one pod goes (a second one on the node would get a 429)
    _min_available(sim, 2)
    _budget_allows(sim, 1)
    res = pe.evict_early(kube, node, DRAIN, cordoned=True)
    assert len(res["evicted"]) == 1 and len(res["left"]) == len(on[node]) - 1, res
    gone = res["evicted"][0].split("/", 1)[1]
    wait_for(lambda: gone not in {p["metadata"]["name"] for p in _frontend(sim)}, 60,
             f"pod {gone} deleted", poll=0.05)
    # its replacement lands elsewhere: the node is cordoned
    wait_for(lambda: len(_frontend(sim)) == 3, 60, "the replacement pod", poll=0.05)
    assert not [p for p in _frontend(sim) if p["spec"].get("nodeName") == node
                and p["metadata"]["name"] not in on[node]]

    report = rep.build(sim.world)
    # one Eviction in all: none while the budget allowed none, one when it allowed one (a
    # round asks for no more Ready pods than the budget's disruptionsAllowed; a refused one
    # is not retried)
    by = report["api_requests"]["by_verb_resource"]
    assert by.get("create pods/eviction") == 1, by
    assert [v for v in report["invariant_violations"] if v.get("kind") == "pdb_violated"] == []


def test_nothing_is_evicted_without_the_eviction_api_or_before_the_cordon(
        simulator: Any) -> None:
    sim = simulator("three-node", speed=200)
    wait_for(lambda: len(_frontend(sim)) == 3, 60, "three web-frontend pods", poll=0.05)
    node = sorted({p["spec"]["nodeName"] for p in _frontend(sim)})[0]
    kube = client.Kube.from_options(kubeconfig=str(sim.kubeconfig))
    no_eviction = json.dumps({**json.loads(DRAIN), "disableEviction": True})
    assert "disableEviction" in pe.evict_early(kube, node, no_eviction, cordoned=True)[
        "skipped"]
    assert "not cordoned" in pe.evict_early(kube, node, DRAIN, cordoned=False)["skipped"]
    by = rep.build(sim.world)["api_requests"]["by_verb_resource"]
    assert "create pods/eviction" not in by, by
    assert len(_frontend(sim)) == 3
