"""Safety checks fail closed on the simulator: a check that cannot read what it checks fails,
naming what it could not read, and a volume whose only healthy replica sits on the node
about to go down holds that node even though Longhorn calls it ``healthy``.

One small simulated cluster (three nodes, a standalone Longhorn volume with one replica on
node-1, attached on node-2) serves the tests in file order; the last one deletes Longhorn's
``volumes.longhorn.io`` CRD.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("harvester_sim")

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (  # noqa: E402
    node_job,
    node_kube,
    node_safety,
)
from harvester_sim import testing  # noqa: E402

pytestmark = [pytest.mark.timeout(600)]

SCENARIO: dict[str, Any] = {
    "name": "fail-closed",
    "description": "three nodes and a healthy 1-replica volume attached away from its replica",
    "seed": 3,
    "harvester": {"installed": "v1.5.1", "available": ["v1.6.0"]},
    "nodes": [{"name": f"node-{i}", "roles": ["control-plane", "etcd", "worker"]}
              for i in (1, 2, 3)],
    "volumes": [{"name": "lonely", "size": "10Gi", "replicas": 1, "robustness": "healthy",
                 "state": "attached", "node": "node-2", "replicaNodes": ["node-1"]}],
}
LH = "longhorn.io/v1beta2"
LIMITED = "harvester-system/no-longhorn"


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with testing.running(SCENARIO, speed=50) as running:
        c = running.world.client
        # a ServiceAccount that may read Harvester's Settings but nothing of Longhorn
        c.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                  "metadata": {"name": "no-longhorn"},
                  "rules": [{"apiGroups": ["harvesterhci.io"], "resources": ["settings"],
                             "verbs": ["get"]}]})
        c.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                  "metadata": {"name": "no-longhorn"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": "no-longhorn"},
                  "subjects": [{"kind": "ServiceAccount", "name": "no-longhorn",
                                "namespace": "harvester-system"}]})
        running.service_account_kubeconfig(LIMITED)
        yield running


def _kube(kubeconfig: Any) -> node_kube.Kube:
    return node_kube.Kube.from_options(kubeconfig=str(kubeconfig))


def test_healthy_volume_whose_only_replica_is_on_the_node_holds_it(sim: Any) -> None:
    vol = sim.world.client.get(LH, "Volume", "lonely", "longhorn-system")
    assert vol["status"]["robustness"] == "healthy", vol["status"]
    reps = [r for r in sim.world.client.list(LH, "Replica", "longhorn-system")
            if r["spec"]["volumeName"] == "lonely"]
    assert [r["spec"]["nodeID"] for r in reps] == ["node-1"], reps
    kube = _kube(sim.kubeconfig)
    # node-1 holds the volume's only healthy replica: draining it is not safe
    with pytest.raises(node_kube.WaitTimeout, match="lonely.*only healthy replica.*node-1"):
        node_safety.wait_volumes_safe(kube, "node-1", 0)
    # node-2 (where it is attached) and node-3 are: the replica on node-1 stays
    assert node_safety.wait_volumes_safe(kube, "node-3", 0)["waited"] is False


def test_volume_check_fails_when_longhorn_is_forbidden(sim: Any) -> None:
    # a 403 is not "no Longhorn": the check fails, naming what it could not read
    kube = _kube(sim.sa_kubeconfigs[LIMITED])
    with pytest.raises(node_kube.NodeLoopError) as exc:
        node_safety.wait_volumes_safe(kube, "node-3", 0)
    msg = str(exc.value)
    assert "Volumes and Replicas" in msg and "forbidden" in msg.lower(), msg
    with pytest.raises(node_kube.NodeLoopError, match="Engines and Volumes.*forbidden"):
        node_job._engines_settled(kube)


def test_checks_fail_when_longhorns_volume_crd_is_missing(sim: Any, playbook: Any) -> None:
    c = sim.world.client
    c.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", "volumes.longhorn.io")
    kube = _kube(sim.kubeconfig)
    with pytest.raises(node_kube.NodeLoopError, match="not served.*ships Longhorn"):
        node_safety.wait_volumes_safe(kube, "node-3", 0)
    with pytest.raises(node_kube.NodeLoopError, match="not served"):
        node_job._engines_settled(kube)
    # the what-if pre-flight: no "passed | volumes_healthy | 0 volumes checked"
    res = playbook(sim, "upgrade.yml", tags="preflight", extra_vars={"upgrade_what_if": True},
                   timeout=400)
    assert res.rc != 0, res
    out = res.output
    assert "volumes_healthy" in out and "Volume.longhorn.io/v1beta2" in out, res
    assert "0 volumes checked" not in out, res
