"""Least privilege: the collection runs under the ServiceAccount of ``deploy/rbac.yaml``.

The simulator enforces RBAC for every token but the admin's (``system:masters``). These tests
apply ``deploy/rbac.yaml`` with the admin kubeconfig, mint a token for
``harvester-system/harvester-upgrade`` (TokenRequest, as ``kubectl create token`` does) and
run the playbooks with only that token.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from typing import Any

import pytest
import yaml

from testkit import ROOT, owned

pytest.importorskip("harvester_sim")

RBAC_YAML = ROOT / "deploy" / "rbac.yaml"
SA = "harvester-system/harvester-upgrade"
PLAN_API = "management.harvesterhci.io/v1beta1"
SPEED = 200
CLUSTER_PHASES = "preflight,iso_download,repo_create,metadata_populate,image_preload"

pytestmark = [pytest.mark.timeout(900)]


def _docs() -> list[dict[str, Any]]:
    """The objects of ``deploy/rbac.yaml`` (one ``v1 List`` document)."""
    doc = yaml.safe_load(RBAC_YAML.read_text())
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List", doc.get("kind")
    return [d for d in doc["items"] if d]


def _apply(sim: Any, docs: list[dict[str, Any]]) -> None:
    """``kubectl apply`` with the admin kubeconfig, as an operator would."""
    proc = subprocess.run(["kubectl", "apply", "-f", "-"], input=yaml.safe_dump_all(docs),
                          env={**os.environ, **sim.env}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def _sa_env(sim: Any) -> dict[str, str]:
    return dict(sim.env_for(sim.service_account_kubeconfig(SA)))


def _forbidden(sim: Any) -> int:
    return int(sim.stats()["by_code"].get("403", 0))


def test_rbac_yaml_is_well_formed() -> None:
    docs = _docs()
    kinds = [(d["kind"], d["metadata"].get("namespace")) for d in docs]
    assert ("ServiceAccount", "harvester-system") in kinds
    assert ("ClusterRole", None) in kinds and ("ClusterRoleBinding", None) in kinds
    for d in docs:
        for rule in d.get("rules") or []:
            assert "*" not in rule.get("verbs", []), rule
            assert "*" not in rule.get("resources", []), rule
            assert "*" not in rule.get("apiGroups", []), rule
            assert not ({"escalate", "bind", "impersonate"} & set(rule.get("verbs", []))), rule
        # no access to Secrets outside fleet-local (the machine-plan Secrets)
        if d["kind"] == "ClusterRole":
            assert not any("secrets" in r.get("resources", []) for r in d["rules"])


def test_cluster_phases_under_the_service_account(simulator: Any, playbook: Any) -> None:
    """Preflight .. ImagePreload with only the ServiceAccount's token: no 403 at all."""
    sim = simulator("three-node", speed=SPEED)
    _apply(sim, _docs())
    env = _sa_env(sim)
    res = playbook(sim, tags=CLUSTER_PHASES, env=env, timeout=600)
    assert res.rc == 0, str(res)
    assert _forbidden(sim) == 0, sim.stats()["by_user_agent_request"]
    plans = sim.world.client.try_list(PLAN_API, "UpgradePlan")
    assert len(plans) == 1
    st = plans[0].get("status") or {}
    assert st.get("currentPhase") == "ImagePreloaded", st
    assert env["K8S_AUTH_KUBECONFIG"] != sim.env["K8S_AUTH_KUBECONFIG"]


# (role namespace or None for the ClusterRole, group, resource, verb) a whole three-node
# upgrade may not use, each for a path it does not take
NOT_ON_THE_HAPPY_PATH = {
    # upgrade-toolkit's Versions: read when Harvester's own Version of the target is missing
    (None, "management.harvesterhci.io", "versions", "get"),
    (None, "management.harvesterhci.io", "versions", "list"),
    # a node read outside the node cycle's informer (e.g. a node module run on its own)
    (None, "", "nodes", "get"),
    # a VMI without a VirtualMachine on the node being drained; a hung migration aborted
    (None, "kubevirt.io", "virtualmachineinstances", "delete"),
    (None, "kubevirt.io", "virtualmachineinstancemigrations", "delete"),
    # the lease renewed (a module running longer than a third of its duration)
    ("harvester-system", "coordination.k8s.io", "leases", "update"),
    # the restore-vm ConfigMap when upgrade-toolkit's pre-drain script has not made it
    ("harvester-system", "", "configmaps", "create"),
    # an Event repeated in a later module call (read by name, its count bumped)
    ("harvester-system", "", "events", "get"),
    ("default", "", "events", "get"),
    ("harvester-system", "", "events", "patch"),
    ("default", "", "events", "patch"),
    # a machine-plan Secret read by name outside the node cycle's informer
    ("fleet-local", "", "secrets", "get"),
    # a phase's object read only when creating it fails (it exists: a resumed phase), or in
    # check mode (pipeline.Context.ensure creates first)
    (None, "harvesterhci.io", "virtualmachineimages", "get"),
    ("harvester-system", "apps", "deployments", "get"),
    ("harvester-system", "", "services", "get"),
    ("cattle-system", "upgrade.cattle.io", "plans", "get"),
    # the descheduler Addon enabled (Harvester v1.7.0+)
    ("kube-system", "harvesterhci.io", "addons", "patch"),
}


def _granted(docs: list[dict[str, Any]]) -> list[tuple[str | None, dict[str, Any]]]:
    """Every (role namespace, rule) of ``docs`` split to one resource and one verb each."""
    out = []
    for d in docs:
        if d["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in d["rules"]:
            for res in rule["resources"]:
                for verb in rule["verbs"]:
                    out.append((d["metadata"].get("namespace"),
                                {**rule, "resources": [res], "verbs": [verb]}))
    return out


def _key(ns: str | None, rule: dict[str, Any]) -> tuple[str | None, str, str, str]:
    return ns, rule["apiGroups"][0], rule["resources"][0], rule["verbs"][0]


def _used(ns: str | None, rule: dict[str, Any], made: list[Any]) -> bool:
    """Whether a request of ``made`` needed ``rule`` (one resource, one verb) of a role in
    ``ns`` (None: the ClusterRole).

    A ``watch`` is also used by a ``list`` of the same set: every wait
    (``waiting.wait``) lists first and watches only when its condition does not hold yet, and
    whether it holds at that first read is a race with the cluster (the simulated one runs
    on its own clock, further ahead the busier the machine). Requiring the watch itself made
    the test fail whenever a wait found its condition met (a Job already complete, an image
    already Imported)."""
    from harvester_sim.api.rbac import rule_allows
    verbs = ["watch", "list"] if rule["verbs"] == ["watch"] else rule["verbs"]
    for verb in verbs:
        r = {**rule, "verbs": [verb]}
        if any(rule_allows(r, m) and (ns is None or m.namespace == ns) for m in made):
            return True
    return False


def test_whole_upgrade_under_the_service_account(simulator: Any, playbook: Any) -> None:
    """No request refused; and every rule of deploy/rbac.yaml is used by the run (a watch:
    or the list a wait starts with, :func:`_used`), or is listed in NOT_ON_THE_HAPPY_PATH
    with the path that needs it (least privilege that is minimal, not merely sufficient)."""
    from harvester_sim.api.rbac import Request
    sim = simulator("three-node", speed=SPEED)
    docs = _docs()
    _apply(sim, docs)
    sim.server.audit = []
    res = playbook(sim, env=_sa_env(sim), timeout=420)
    forbidden = _forbidden(sim)
    assert forbidden == 0, json.dumps(sim.stats()["by_user_agent_request"], indent=1)
    assert res.rc == 0, str(res)
    plans = sim.world.client.try_list(PLAN_API, "UpgradePlan")
    assert plans and plans[0]["status"]["currentPhase"] == "Succeeded"

    user = "system:serviceaccount:" + SA.replace("/", ":")
    made = []
    for ev in sim.server.audit:
        if ev["user"]["username"] != user:
            continue
        o = ev["objectRef"]
        resource, _, sub = (o["resource"] or "").partition("/")
        made.append(Request(ev["verb"], True, o["apiGroup"] or "", resource, sub,
                            o["namespace"] or "", o["name"] or ""))
    assert made, "the audit log recorded none of the ServiceAccount's requests"
    unused = {_key(ns, rule) for ns, rule in _granted(docs) if not _used(ns, rule, made)}
    assert unused <= NOT_ON_THE_HAPPY_PATH, sorted(unused - NOT_ON_THE_HAPPY_PATH, key=str)
    granted = {_key(ns, rule) for ns, rule in _granted(docs)}
    assert NOT_ON_THE_HAPPY_PATH <= granted, sorted(NOT_ON_THE_HAPPY_PATH - granted, key=str)


def _without(docs: list[dict[str, Any]], kind: str, namespace: str | None, group: str,
             resource: str, verb: str) -> list[dict[str, Any]]:
    """``docs`` with ``verb`` on ``group/resource`` removed from one role."""
    out = copy.deepcopy(docs)
    removed = False
    for d in out:
        if d["kind"] != kind or d["metadata"].get("namespace") != namespace:
            continue
        for rule in d["rules"]:
            if group in rule.get("apiGroups", []) and resource in rule.get("resources", []) \
                    and verb in rule.get("verbs", []):
                rule["verbs"] = [v for v in rule["verbs"] if v != verb]
                removed = True
        d["rules"] = [r for r in d["rules"] if r.get("verbs")]
    assert removed, (kind, namespace, group, resource, verb)
    return out


def test_missing_rule_gives_a_clear_403_from_the_step_that_needs_it(
        simulator: Any, playbook: Any) -> None:
    """No ``create`` on VirtualMachineImages: ISODownload fails (started by the pre-flight
    task's call), naming the phase, resource and verb, and the plan records why; no later
    phase runs."""
    sim = simulator("three-node", speed=SPEED)
    _apply(sim, _without(_docs(), "Role", "harvester-system", "harvesterhci.io",
                         "virtualmachineimages", "create"))
    res = playbook(sim, tags=CLUSTER_PHASES, env=_sa_env(sim), timeout=600)
    assert res.rc != 0, res
    out = res.output
    needle = ('virtualmachineimages.harvesterhci.io is forbidden: User '
              '"system:serviceaccount:harvester-system:harvester-upgrade" cannot create '
              'resource "virtualmachineimages" in API group "harvesterhci.io" in the '
              'namespace "harvester-system"')
    assert needle in out, res
    failed_task = [ln for ln in out.splitlines() if ln.startswith("TASK [")]
    # the pre-flight task's call starts ISODownload once Initialize is done (the phase
    # chain): the create is that call's, and its error names the phase it was starting
    assert failed_task and "preflight" in failed_task[-1], failed_task[-3:]
    assert "ISODownload, started after it: " in out, res
    assert "repo_create" not in "".join(failed_task)
    plans = sim.world.client.try_list(PLAN_API, "UpgradePlan")
    assert len(plans) == 1
    st = plans[0].get("status") or {}
    text = json.dumps(st)
    assert "forbidden" in text and "virtualmachineimages" in text, st
    assert st.get("currentPhase") in ("ISODownloading", "Failed"), st


LEASE = ("coordination.k8s.io/v1", "Lease", "harvester-upgrade-lock", "harvester-system")
LH_SETTING = ("longhorn.io/v1beta2", "Setting", "replica-replenishment-wait-interval",
              "longhorn-system")


def _no_403(sim: Any) -> None:
    assert _forbidden(sim) == 0, json.dumps(sim.stats()["by_user_agent_request"], indent=1)


def _aborted(sim: Any) -> dict[str, Any]:
    plans = sim.world.client.try_list(PLAN_API, "UpgradePlan")
    assert len(plans) == 1
    st = plans[0].get("status") or {}
    assert st.get("currentPhase") == "Failed", st
    cond = next(x for x in st.get("conditions") or [] if x["type"] == "Progressing")
    assert cond["reason"] == "Aborted", cond
    return plans[0]


def test_abort_under_the_service_account(simulator: Any, playbook: Any) -> None:
    """Cluster phases, then ``-e upgrade_abort=true``, both with only the ServiceAccount's
    token: the plan's ISO, repo and SUC plans are deleted, the plan ends Failed (Aborted),
    the lock is released, and not one request is refused."""
    sim = simulator("three-node", speed=SPEED)
    _apply(sim, _docs())
    env = _sa_env(sim)
    res = playbook(sim, tags=CLUSTER_PHASES, env=env, timeout=600)
    assert res.rc == 0, str(res)
    name = sim.world.client.try_list(PLAN_API, "UpgradePlan")[0]["metadata"]["name"]
    assert owned(sim, name), "the repo, ISO and preload plan should exist before the abort"
    res = playbook(sim, extra_vars={"upgrade_abort": True}, env=env, timeout=300)
    assert res.rc == 0, str(res)
    _no_403(sim)
    _aborted(sim)
    assert owned(sim, name) == []
    assert sim.world.client.try_get(*LEASE) is None


def test_failed_node_and_abort_under_the_service_account(simulator: Any,
                                                         playbook: Any) -> None:
    """The whole upgrade with node-1's OS-upgrade Job failing, then the abort, both under the
    ServiceAccount: the run ends Failed naming the Job and releases the lock; the abort
    restores what the node roll held (Longhorn's replenishment wait, Rancher's upgrade
    strategy) and deletes the plan's Jobs, ISO, repo and SUC plans. Not one request is
    refused on either path (the failure path writes the plan's status, Events and the lock
    as the happy path does not)."""
    from harvester_sim.scenarios import loader
    scenario = loader.load("three-node")
    scenario.update(name="three-node-rbac-node-job-fail", faults=[
        {"kind": "node_job_fail", "target": {"node": "node-1", "program": "post-drain"}}])
    sim = simulator(scenario, speed=SPEED)
    _apply(sim, _docs())
    env = _sa_env(sim)
    before = (sim.world.client.get(*LH_SETTING) or {}).get("value")
    res = playbook(sim, env=env, timeout=600)
    assert res.rc != 0, str(res)
    _no_403(sim)
    plans = sim.world.client.try_list(PLAN_API, "UpgradePlan")
    assert len(plans) == 1
    st = plans[0].get("status") or {}
    assert st.get("currentPhase") == "Failed", st
    assert "node-upgrade-post-drain-node-1" in json.dumps(st), st
    assert (st.get("nodeUpgradeStatuses") or {}).get("node-1", {}).get("state") \
        == "PostDrainFailed", st
    assert sim.world.client.try_get(*LEASE) is None, "the failed run did not release the lock"
    assert (sim.world.client.get(*LH_SETTING) or {}).get("value") != before, \
        "the node roll should have raised Longhorn's replenishment wait"

    res = playbook(sim, extra_vars={"upgrade_abort": True}, env=env, timeout=300)
    assert res.rc == 0, str(res)
    _no_403(sim)
    # a Failed plan is cleaned up and keeps its verdict
    plans = sim.world.client.try_list(PLAN_API, "UpgradePlan")
    assert len(plans) == 1 and plans[0]["status"]["currentPhase"] == "Failed"
    assert owned(sim, plans[0]["metadata"]["name"]) == []
    assert (sim.world.client.get(*LH_SETTING) or {}).get("value") == before
    cluster = sim.world.client.get("provisioning.cattle.io/v1", "Cluster", "local",
                                   "fleet-local")
    assert not ((cluster.get("spec") or {}).get("rkeConfig") or {}).get("upgradeStrategy")
    assert sim.world.client.try_get(*LEASE) is None


def test_without_node_proxy_disk_space_fails_naming_it_until_skipped(
        simulator: Any, playbook: Any) -> None:
    """An operator may withhold the most powerful read, ``nodes/proxy`` (kubelet API): the
    pre-flight (a what-if here) disk_space check then fails naming the grant and the way
    around it, and with ``preflight_skip_checks: [disk_space]`` it passes without a kubelet
    read."""
    sim = simulator("three-node", speed=SPEED)
    _apply(sim, _without(_docs(), "ClusterRole", None, "", "nodes/proxy", "get"))
    env = _sa_env(sim)
    res = playbook(sim, tags="preflight", env=env, timeout=300)
    assert res.rc != 0, res
    assert "disk_space" in res.output and "may not get nodes/proxy" in res.output, res
    assert "preflight_skip_checks: [disk_space]" in res.output, res
    refused = _forbidden(sim)
    assert refused == 3, sim.stats()["by_user_agent_request"]   # stats/summary of each node

    # --tags preflight alone is a what-if: nothing created
    assert sim.world.client.try_list(PLAN_API, "UpgradePlan") == []
    res = playbook(sim, tags="preflight", env=env, timeout=300,
                   extra_vars={"preflight_skip_checks": ["disk_space"]})
    assert res.rc == 0, str(res)
    assert _forbidden(sim) == refused, "a skipped disk_space check still read kubelet stats"
