"""Rancher's drain order, node facts and the per-batch "is it this node's turn" check."""

from __future__ import annotations

from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path

no = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_order")


def k8s_node(name: str, machine: str, *, os_image: str = "Harvester v1.5.1",
             kubelet: str = "v1.31.4+rke2r1", witness: bool = False) -> dict[str, Any]:
    labels = {"harvesterhci.io/managed": "true"}
    if witness:
        labels["node-role.harvesterhci.io/witness"] = "true"
    return {"metadata": {"name": name, "labels": labels,
                         "annotations": {"cluster.x-k8s.io/machine": machine}},
            "spec": {},
            "status": {"nodeInfo": {"osImage": os_image, "kubeletVersion": kubelet},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def machine(name: str, node: str, roles: tuple[str, ...], init: bool = False) -> dict[str, Any]:
    labels = {f"rke.cattle.io/{r}-role": "true" for r in roles}
    if init:
        labels["rke.cattle.io/init-node"] = "true"
    return {"metadata": {"name": name, "labels": labels},
            "status": {"nodeRef": {"name": node}, "phase": "Running"}}


def secret(machine_name: str, ann: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": f"{machine_name}-machine-plan", "annotations": ann}}


CP = ("etcd", "control-plane", "worker")


def five_node() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [k8s_node("node-a", "custom-zz"), k8s_node("node-b", "custom-aa"),
             k8s_node("node-c", "custom-mm"), k8s_node("node-d", "custom-bb"),
             k8s_node("node-e", "custom-ab")]
    machines = [machine("custom-zz", "node-a", CP), machine("custom-aa", "node-b", CP),
                machine("custom-mm", "node-c", CP, init=True),
                machine("custom-bb", "node-d", ("worker",)),
                machine("custom-ab", "node-e", ("worker",))]
    return nodes, machines


def test_rancher_order_init_then_etcd_cp_by_machine_then_workers() -> None:
    nodes, machines = five_node()
    facts = no.node_facts(nodes, machines, [])
    assert [f["name"] for f in facts] == ["node-c", "node-b", "node-a", "node-e", "node-d"]
    assert [f["order"] for f in facts] == [0, 1, 2, 3, 4]
    assert facts[0]["init"] and facts[0]["tier"] == "init"
    assert facts[3]["roles"] == ["worker"] and facts[3]["tier"] == "worker"
    assert facts[1]["machine_plan_secret"] == "custom-aa-machine-plan"


def test_a_nodes_machine_is_the_annotated_one_else_the_one_whose_node_ref_it_is() -> None:
    nodes = [k8s_node("n1", "m-named"), k8s_node("n2", ""), k8s_node("n3", "m-gone")]
    machines = [machine("m-other", "n1", CP, init=True), machine("m-named", "elsewhere", CP),
                machine("m2", "n2", ("worker",)), machine("m2-later", "n2", CP),
                machine("m3", "n3", ("worker",))]
    by = {f["name"]: f["machine"] for f in no.node_facts(nodes, machines, [])}
    # the annotation wins over a nodeRef; without one (or naming no machine) the first
    # machine whose nodeRef is the node
    assert by == {"n1": "m-named", "n2": "m2", "n3": "m3"}
    index = no.machine_index(machines)
    assert no.machine_for({"metadata": {"name": "nowhere"}}, index) is None


def test_witness_is_an_etcd_node_and_in_its_group() -> None:
    nodes = [k8s_node("n1", "m1"), k8s_node("w", "m0", witness=True)]
    machines = [machine("m1", "n1", CP, init=True), machine("m0", "w", ("etcd",))]
    facts = no.node_facts(nodes, machines, [])
    assert [f["name"] for f in facts] == ["n1", "w"]
    assert "witness" in facts[1]["roles"]
    assert set(no.groups_for(facts[1])) >= {"harvester_nodes", "etcd", "witness", "pending"}


def test_roles_from_node_labels_without_machines() -> None:
    n = k8s_node("x", "")
    n["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = "true"
    n["metadata"]["labels"]["node-role.kubernetes.io/etcd"] = "true"
    assert no.roles_of(n, None) == ["etcd", "control-plane"]


def test_upgraded_from_plan_state_or_versions() -> None:
    nodes, machines = five_node()
    nodes[0]["status"]["nodeInfo"] = {"osImage": "Harvester v1.6.0",
                                      "kubeletVersion": "v1.32.4+rke2r1"}
    plan = {"status": {"releaseMetadata": {"os": "Harvester v1.6.0",
                                           "kubernetes": "v1.32.4+rke2r1"},
                       "nodeUpgradeStatuses": {"node-c": {"state": "PostDrained"}}}}
    facts = {f["name"]: f for f in no.node_facts(nodes, machines, [], plan=plan)}
    assert facts["node-c"]["upgraded"]             # plan says so
    assert facts["node-a"]["upgraded"]             # runs the target OS and kubelet
    assert not facts["node-b"]["upgraded"]
    assert "upgraded" in no.groups_for(facts["node-a"])
    # a node on the new versions that Rancher still holds is not done
    secrets = [secret("custom-zz", {"rke.cattle.io/post-drain": "x"})]
    facts = {f["name"]: f for f in no.node_facts(nodes, machines, secrets, plan=plan)}
    assert not facts["node-a"]["upgraded"]


def test_kubelet_version_forms() -> None:
    assert no.kubelet_matches("v1.32.4+rke2r1", "v1.32.4+rke2r1")
    assert no.kubelet_matches("v1.32.4+rke2r1", "v1.32.4-rke2r1")
    assert no.kubelet_matches("v1.32.4+rke2r1", "v1.32.4-rc2+rke2r1")
    assert not no.kubelet_matches("v1.31.4+rke2r1", "v1.32.4+rke2r1")
    assert not no.kubelet_matches("", "v1.32.4+rke2r1")


def test_expected_node_is_rancher_request_else_next_in_order() -> None:
    nodes, machines = five_node()
    facts = no.node_facts(nodes, machines, [])
    assert no.expected_nodes(facts, {})[0] == ["node-c"]
    # Rancher asks for node-a (unanswered pre-drain)
    secrets = [secret("custom-zz", {"rke.cattle.io/pre-drain": "D"})]
    facts = no.node_facts(nodes, machines, secrets)
    names, why = no.expected_nodes(facts, {"node-a": None})
    assert names == ["node-a"] and "pre-drain" in why
    # answered but still between hooks: still the node in progress
    names, _reason = no.expected_nodes(facts, {"node-a": "D"})
    assert names == ["node-a"]


def test_host_vars_are_local_and_prefixed() -> None:
    nodes, machines = five_node()
    hv = no.host_vars(no.node_facts(nodes, machines, [])[0])
    assert hv["ansible_connection"] == "local"
    assert hv["harvester_node_name"] == "node-c"
    assert hv["harvester_machine"] == "custom-mm"
    assert hv["harvester_machine_plan_secret"] == "custom-mm-machine-plan"


@pytest.mark.parametrize(("state", "ann", "upgraded"), [
    ("PostDrained", {}, True),
    # rebooted, but our post-drain answer never reached Rancher (run killed in between)
    ("PostDrained", {no.PRE_DRAIN: "1", no.POST_DRAIN: "1"}, False),
    ("ImageCleaned", {no.POST_DRAIN: "2"}, False),
    ("", {}, True),                                  # already on the target OS and kubelet
    ("", {no.PRE_DRAIN: "3"}, False),                # ... but Rancher is draining it again
])
def test_a_node_is_done_only_when_rancher_let_go_of_it(state: str, ann: dict[str, str],
                                                       upgraded: bool) -> None:
    release = {"os": "Harvester v1.6.0", "kubernetes": "v1.32.4+rke2r1"}
    info = {"osImage": "Harvester v1.6.0", "kubeletVersion": "v1.32.4+rke2r1"}
    assert no.is_upgraded(state, info, release, ann) is upgraded


def _plan(states: dict[str, str]) -> dict[str, Any]:
    return {"status": {"nodeUpgradeStatuses": {n: {"state": s} for n, s in states.items()},
                       "releaseMetadata": {"os": "Harvester v1.6.0",
                                           "kubernetes": "v1.32.4+rke2r1"}}}


def test_restore_only_node_is_finished_whatever_rancher_does_next() -> None:
    """A run killed after Rancher released a node but before its stopped VMs were restored:
    the node is still to do (restore), though Rancher already asks for the next node -- or for
    none, after the last one. The batch gate must let the play finish it, not refuse it as
    the wrong node (seen in the chaos analysis: every re-run failed)."""
    nodes, machines = five_node()
    order = ["node-c", "node-b", "node-a", "node-e", "node-d"]
    # node-c released; Rancher set pre-drain on node-b (not answered yet)
    plan = _plan({"node-c": "PostDrained"})
    secrets = [secret("custom-aa", {no.PRE_DRAIN: "D"})]
    facts = no.node_facts(nodes, machines, secrets, plan=plan)
    d = no.batch_decision(facts, ["node-c"], {"node-b": None}, {"node-c"})
    assert d["todo"] == ["node-c"] and d["restore_only"] == ["node-c"] and not d["wrong"], d
    # without VMs to restore node-c is done and the batch is skipped
    d = no.batch_decision(facts, ["node-c"], {"node-b": None}, set())
    assert d["done"] == ["node-c"] and d["todo"] == [] and not d["wrong"], d
    # a batch on a node Rancher is not asking for is still refused
    d = no.batch_decision(facts, ["node-a"], {"node-b": None}, set())
    assert d["wrong"] and d["expected"] == ["node-b"], d
    # the last node: everything upgraded, Rancher asks for nobody, its VMs still stopped
    plan = _plan(dict.fromkeys(order, "PostDrained"))
    facts = no.node_facts(nodes, machines, [], plan=plan)
    d = no.batch_decision(facts, ["node-d"], {}, {"node-d"})
    assert d["todo"] == ["node-d"] and d["expected"] == [] and not d["wrong"], d
