"""A plan records its cluster (kube-system's uid); every lookup of a plan checks it."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    cluster_id,
    errors,
    plan_writer,
)

ANN = "harvester-upgrade.harvesterhci.io/cluster-uid"
PLAN_API = "management.harvesterhci.io/v1beta1"


class FakeKube:
    check_mode = False

    def __init__(self, uid: str, plans: list[dict[str, Any]]) -> None:
        self.uid, self.plans, self.gets = uid, plans, 0

    def get(self, api: str, kind: str, name: str, ns: str | None = None) -> Any:
        self.gets += 1
        if kind == "Namespace":
            return {"metadata": {"name": name, "uid": self.uid}} if self.uid else None
        return next((p for p in self.plans if p["metadata"]["name"] == name), None)

    def list(self, api: str, kind: str, *a: Any, **kw: Any) -> list[dict[str, Any]]:
        return self.plans

    def resource(self, api: str, kind: str) -> object:
        return object()


def plan(name: str, uid: str | None, active: bool = True) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"}
    if uid is not None:
        md["annotations"] = {ANN: uid}
    st = {"currentPhase": "ISODownloading",
          "conditions": [{"type": "Progressing", "status": "True" if active else "False"}]}
    return {"apiVersion": PLAN_API, "kind": "UpgradePlan", "metadata": md, "status": st}


def test_same_cluster_and_unrecorded_plans_pass() -> None:
    kube = FakeKube("uid-a", [plan("p", "uid-a")])
    assert plan_writer.resolve(kube, "p")["metadata"]["name"] == "p"
    assert plan_writer.resolve(kube, None)["metadata"]["name"] == "p"
    assert plan_writer.find_plan(kube, "p")["metadata"]["name"] == "p"
    assert plan_writer.find_plan(kube, None)["metadata"]["name"] == "p"
    # an older collection's plan (no annotation) is not checked, and costs no read
    kube = FakeKube("uid-a", [plan("old", None)])
    assert plan_writer.resolve(kube, "old") is not None and kube.gets == 1


def test_plan_of_another_cluster_is_refused_by_every_lookup() -> None:
    kube = FakeKube("uid-b", [plan("p", "uid-a")])
    for lookup in (lambda: plan_writer.resolve(kube, "p"), lambda: plan_writer.resolve(kube, None),
                   lambda: plan_writer.find_active(kube)):
        with pytest.raises(plan_writer.PlanError, match="belongs to another cluster.*uid-a.*uid-b"):
            lookup()
    for name in ("p", None):
        with pytest.raises(errors.NodeLoopError, match="another cluster"):
            plan_writer.find_plan(kube, name)


def test_cluster_uid_is_read_once_and_missing_is_an_error() -> None:
    kube = FakeKube("uid-a", [])
    assert cluster_id.cluster_uid(kube) == "uid-a" == cluster_id.cluster_uid(kube)
    assert kube.gets == 1
    with pytest.raises(cluster_id.ClusterMismatch, match="kube-system"):
        cluster_id.cluster_uid(FakeKube("", []))


class ClusterKube(FakeKube):
    """A cluster with kube-system uid ``uid`` and the lock Lease of uid ``lease_uid`` (None:
    no Lease); counts the reads of each kind."""

    def __init__(self, uid: str, lease_uid: str | None) -> None:
        super().__init__(uid, [])
        self.lease_uid = lease_uid
        self.reads: list[str] = []

    def get(self, api: str, kind: str, name: str, ns: str | None = None) -> Any:
        self.reads.append(kind)
        if kind == "Lease":
            return None if self.lease_uid is None else {
                "metadata": {"name": name, "namespace": ns, "uid": self.lease_uid}}
        return super().get(api, kind, name, ns)


def test_the_run_reads_kube_system_once_and_then_knows_the_cluster_by_its_lease(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The module that read kube-system records it beside the uid of the lock Lease it holds
    (lock.hold); a later module of the run that finds that very Lease (its uid is made by the
    API server that created it) knows the cluster without reading kube-system; any other
    Lease, or none, and kube-system is read again, so a plan of another cluster is refused
    as before."""
    lock_run = pytest.importorskip(
        "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_run")
    monkeypatch.setenv("HARVESTER_UPGRADE_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(lock_run, "playbook_pid", lambda: 4242)
    first = ClusterKube("uid-a", "lease-1")
    assert cluster_id.cluster_uid(first) == "uid-a" and first.reads == ["Namespace"]
    lock_run.remember_cluster("lease-1", "uid-a")            # what lock.hold then records

    later = ClusterKube("uid-a", "lease-1")
    assert cluster_id.cluster_uid(later) == "uid-a" and later.reads == ["Lease"]
    read = cluster_id.lease_read(later)                      # kept for the lock, once
    assert read is not None and read[0]["metadata"]["uid"] == "lease-1"
    assert cluster_id.lease_read(later) is None
    stale = ClusterKube("uid-a", "lease-1")
    cluster_id.cluster_uid(stale)
    stale._lease_read = (stale._lease_read[0], stale._lease_read[1] - 5)  # read 5 s ago
    assert cluster_id.lease_read(stale) is None              # the lock reads it again
    plan_writer.same_cluster(later, plan("p", "uid-a"))

    # another cluster behind the same kubeconfig: another Lease, or none
    for lease in ("lease-9", None):
        other = ClusterKube("uid-b", lease)
        with pytest.raises(plan_writer.PlanError, match="belongs to another cluster"):
            plan_writer.same_cluster(other, plan("p", "uid-a"))
        assert other.reads == ["Lease", "Namespace"]

    # another run has no record: it reads kube-system
    monkeypatch.setattr(lock_run, "playbook_pid", lambda: 4343)
    fresh = ClusterKube("uid-a", "lease-1")
    assert cluster_id.cluster_uid(fresh) == "uid-a" and fresh.reads == ["Namespace"]
