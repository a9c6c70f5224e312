"""Which mechanism sends a migration to a chosen node, from what the cluster runs."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

mt = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.migration_target")
_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
node_facts = pytest.importorskip(f"{_MU}.node_facts")
errors = pytest.importorskip(f"{_MU}.errors")
node_migrations = pytest.importorskip(f"{_MU}.node_migrations")
ev = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.evacuation")


class _Kube:
    def __init__(self, kubevirt: dict[str, Any] | None = None,
                 openapi: tuple[int, bytes] = (404, b"")) -> None:
        self.kubevirt, self.openapi = kubevirt, openapi

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None
            ) -> dict[str, Any] | None:
        assert (api_version, kind, name, namespace) == (
            "kubevirt.io/v1", "KubeVirt", "kubevirt", "harvester-system")
        return self.kubevirt

    def raw_get(self, path: str) -> tuple[int, bytes]:
        assert path == "/openapi/v3/apis/kubevirt.io/v1"
        return self.openapi


def _kv(observed: str, target: str | None = None) -> dict[str, Any]:
    return {"status": {"observedKubeVirtVersion": observed,
                       "targetKubeVirtVersion": target or observed, "phase": "Deployed"}}


@pytest.mark.parametrize(("observed", "mechanism"), [
    ("1.3.1-150600.5.9.1", mt.HARVESTER_ACTION),     # Harvester v1.4.3
    ("1.4.0-150600.5.15.1", mt.HARVESTER_ACTION),    # Harvester v1.5.x
    ("1.5.2-150700.3.5.2", mt.HARVESTER_ACTION),     # Harvester v1.6.x
    ("1.6.3-150700.3.13.1", mt.ADDED_NODE_SELECTOR),  # Harvester v1.7.0
    ("v1.6.0", mt.ADDED_NODE_SELECTOR),
])
def test_mechanism_follows_the_kubevirt_the_cluster_runs(observed: str, mechanism: str) -> None:
    m = mt.detect(_Kube(_kv(observed)))
    assert m["mechanism"] == mechanism
    assert m["kubevirt"] == observed and m["source"] == "KubeVirt CR"
    assert observed in m["why"]


def test_a_rolling_kubevirt_counts_as_the_version_it_still_runs() -> None:
    m = mt.detect(_Kube(_kv("1.5.2-150700.3.5.2", target="1.6.3-150700.3.13.1")))
    assert m["mechanism"] == mt.HARVESTER_ACTION
    assert "rolling to 1.6.3-150700.3.13.1" in m["why"]


def _openapi(with_field: bool) -> bytes:
    props = {"vmiName": {"type": "string"}}
    if with_field:
        props["addedNodeSelector"] = {"type": "object"}
    return json.dumps({"components": {"schemas": {
        "io.kubevirt.v1.VirtualMachineInstanceMigration": {
            "properties": {"spec": {"properties": props}}}}}}).encode()


@pytest.mark.parametrize(("with_field", "mechanism"), [
    (True, mt.ADDED_NODE_SELECTOR), (False, mt.HARVESTER_ACTION)])
def test_without_a_version_the_served_schema_decides(with_field: bool, mechanism: str) -> None:
    m = mt.detect(_Kube(None, (200, _openapi(with_field))))
    assert (m["mechanism"], m["source"]) == (mechanism, "served schema")


def test_nothing_known_means_harvesters_action() -> None:
    m = mt.detect(_Kube(None))
    assert (m["mechanism"], m["source"]) == (mt.HARVESTER_ACTION, "default")


class _ActionKube:
    """Harvester's action answers ``answers`` in turn; a 204 creates ``<vm>-xxxxx``."""

    check_mode = False

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        self.answers = answers
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.migs: list[dict[str, Any]] = []
        self.patched: list[dict[str, Any]] = []
        self.created: list[dict[str, Any]] = []

    def raw_post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        self.posts.append((path, body))
        status, text = self.answers.pop(0)
        if status == 204:
            self.migs.append({"metadata": {"name": f"vm-1-{len(self.migs):05d}",
                                           "namespace": "default",
                                           "creationTimestamp":
                                               f"2026-01-01T00:00:0{len(self.migs)}Z",
                                           "labels": {"kubevirt.io/vmi-name": "vm-1"}},
                              "spec": {"vmiName": "vm-1"}})
        return status, text

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        return [*self.migs]

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None) -> dict[str, Any]:
        self.patched.append({"name": name, **patch})
        return {}

    def create_in(self, api_version: str, kind: str, body: dict[str, Any],
                  namespace: str | None = None) -> dict[str, Any]:
        self.created.append(body)
        return body

    def wait(self, sources: Any, pred: Any, *, on_change: Any, timeout: float, what: str,
             describe: Any = None) -> Any:
        node = "node-1"
        for _ in range(10):
            migs = {f"default/{m['metadata']['name']}": {**m, "status": {"phase": "Running"}}
                    for m in self.migs}
            view = {"VirtualMachineInstance": {"default/vm-1": {
                "metadata": {"name": "vm-1", "namespace": "default"},
                "status": {"phase": "Running", "nodeName": node}}},
                "VirtualMachineInstanceMigration": migs}
            on_change(view)
            if pred(view):
                return True
            if self.migs:
                node = "node-2"
        raise AssertionError("the wait never ended")


class _Writer:
    def __init__(self) -> None:
        self.failed: list[tuple[str, str, str, str]] = []

    def labels(self, component: str) -> dict[str, str]:
        return {"app": "harvester-upgrade"}

    def event(self, *args: Any, **kwargs: Any) -> None:
        pass

    def fail_node(self, node: str, state: str, reason: str, message: str) -> None:
        self.failed.append((node, state, reason, message))


def _plan() -> Any:
    vmi = {"metadata": {"name": "vm-1", "namespace": "default"},
           "status": {"phase": "Running", "nodeName": "node-1"}}
    return ev.EvacuationPlan(node="node-1", migrate=[
        ev.Move(ev.vm_view(vmi), "node-2", "upgraded node with room")])


def test_on_older_kubevirt_the_target_goes_through_harvesters_action() -> None:
    kube = _ActionKube([(503, b"no endpoints available"), (204, b"")])
    result: dict[str, Any] = {"migrated": []}
    node_migrations.migrate_all(
        kube, _Writer(), "node-1", _plan(), [], result,  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=0, migration_timeout=900, timeout=60,
        mechanism=mt.HARVESTER_ACTION)
    assert not kube.created                       # no VMIM of ours: Harvester makes it
    assert kube.posts[-1] == ("/api/v1/namespaces/harvester-system/services/"
                              "https:harvester:8443/proxy/v1/harvester/"
                              "kubevirt.io.virtualmachines/default/vm-1?action=migrate",
                              {"nodeName": "node-2"})
    assert len(kube.posts) == 2                   # the 503 was retried, not counted
    (p,) = kube.patched
    assert p["metadata"]["annotations"][node_facts.TARGET_ANNOTATION] == "node-2"
    assert p["metadata"]["labels"]["kubevirt.io/vmi-name"] == "vm-1"
    assert result["migrated"] == [{"vm": "default/vm-1", "to": "node-2", "attempts": 1}]


def test_a_refused_action_is_a_failed_attempt() -> None:
    kube = _ActionKube([(500, b"The target node is non-migratable")])
    writer = _Writer()
    with pytest.raises(errors.NodeLoopError, match="non-migratable"):
        node_migrations.migrate_all(
            kube, writer, "node-1", _plan(), [],  # type: ignore[arg-type]
            {"migrated": []}, target_aware=True, concurrency=2, retries=0,
            migration_timeout=900, timeout=60, mechanism=mt.HARVESTER_ACTION)
    assert writer.failed[0][:3] == ("node-1", "PreDrainFailed", "MigrationFailed")
    assert "Harvester's migrate action answered 500" in writer.failed[0][3]
    assert len(kube.posts) == 1 and not kube.migs and not kube.created


class _CdromKube(_ActionKube):
    """A VM with a CD-ROM: Harvester's action always refuses it (ValidateVMMigratable)."""

    def wait(self, sources: Any, pred: Any, *, on_change: Any, timeout: float, what: str,
             describe: Any = None) -> Any:
        for _ in range(3):
            moved = bool(self.created)
            view = {"VirtualMachineInstance": {"default/vm-1": {
                "metadata": {"name": "vm-1", "namespace": "default"},
                "spec": {"domain": {"devices": {"disks": [{"name": "iso",
                                                           "cdrom": {"bus": "sata"}}]}}},
                "status": {"phase": "Running", "nodeName": "node-2" if moved else "node-1"}}},
                "VirtualMachineInstanceMigration": {}}
            on_change(view)
            if pred(view):
                return True
        raise AssertionError("the wait never ended")


def test_a_vm_the_action_always_refuses_is_migrated_without_a_target_and_no_post() -> None:
    """A CD-ROM or a container disk makes Harvester refuse its action whatever the moment
    (harvester/harvester ValidateVMMigratable, v1.5.0 and v1.6.0): such a VM goes through a
    migration without a target at once, not after a refused POST."""
    assert mt.action_refuses({"spec": {"domain": {"devices": {"disks": [
        {"name": "iso", "cdrom": {}}]}}}}) == "CD-ROM or container disk is set"
    assert mt.action_refuses({"spec": {"volumes": [
        {"name": "boot", "containerDisk": {"image": "x"}}]}}) is not None
    assert mt.action_refuses({"spec": {"domain": {"devices": {"disks": [
        {"name": "root", "disk": {"bus": "virtio"}}]}}}}) is None
    assert mt.action_refuses(None) is None
    kube = _CdromKube([])
    result: dict[str, Any] = {"migrated": []}
    node_migrations.migrate_all(
        kube, _Writer(), "node-1", _plan(), [], result,  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=0, migration_timeout=900, timeout=60,
        mechanism=mt.HARVESTER_ACTION)
    assert kube.posts == []
    (vmim,) = kube.created
    assert "addedNodeSelector" not in vmim["spec"] and vmim["spec"]["vmiName"] == "vm-1"
    assert result["migrated"] == [{"vm": "default/vm-1", "to": "node-2", "attempts": 1}]


class _TwoVmKube(_ActionKube):
    """Two VMs, one lane: the second migration starts once the first VM moved. The patch
    that adopts the first one's migration is held until the second action is posted (or
    fails when ``patch_error`` is set)."""

    def __init__(self, patch_error: Exception | None = None) -> None:
        super().__init__([(204, b""), (204, b"")])
        self.released = threading.Event()
        self.patch_error = patch_error
        self.held_patch_released: list[bool] = []

    def raw_post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        vm = path.rsplit("/", 1)[1].split("?", 1)[0]
        self.posts.append((path, body))
        self.migs.append({"metadata": {"name": f"{vm}-{len(self.migs):05d}",
                                       "namespace": "default",
                                       "creationTimestamp": f"2026-01-01T00:00:0{len(self.migs)}Z",
                                       "labels": {"kubevirt.io/vmi-name": vm}},
                          "spec": {"vmiName": vm}})
        if len(self.posts) == 2:
            self.released.set()
        return 204, b""

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None) -> dict[str, Any]:
        if not self.patched:
            self.held_patch_released.append(self.released.wait(5))
        if self.patch_error is not None:
            raise self.patch_error
        return super().patch(api_version, kind, name, patch, namespace)

    def wait(self, sources: Any, pred: Any, *, on_change: Any, timeout: float, what: str,
             describe: Any = None) -> Any:
        for _ in range(10):
            vmis = {}
            for vm in ("vm-1", "vm-2"):
                moved = any(m["spec"]["vmiName"] == vm for m in self.migs)
                vmis[f"default/{vm}"] = {"metadata": {"name": vm, "namespace": "default"},
                                         "status": {"phase": "Running",
                                                    "nodeName": "node-2" if moved else "node-1"}}
            view = {"VirtualMachineInstance": vmis, "VirtualMachineInstanceMigration": {
                f"default/{m['metadata']['name']}": {**m, "status": {"phase": "Succeeded"}}
                for m in self.migs}}
            on_change(view)
            if pred(view):
                return True
        raise AssertionError("the wait never ended")


def _two_vm_plan() -> Any:
    moves = []
    for vm in ("vm-1", "vm-2"):
        vmi = {"metadata": {"name": vm, "namespace": "default"},
               "status": {"phase": "Running", "nodeName": "node-1"}}
        moves.append(ev.Move(ev.vm_view(vmi), "node-2", "upgraded node with room"))
    return ev.EvacuationPlan(node="node-1", migrate=moves)


def test_the_next_migration_does_not_wait_for_the_adoption_patch() -> None:
    kube = _TwoVmKube()
    result: dict[str, Any] = {"migrated": []}
    node_migrations.migrate_all(
        kube, _Writer(), "node-1", _two_vm_plan(), [], result,  # type: ignore[arg-type]
        target_aware=True, concurrency=1, retries=0, migration_timeout=900, timeout=60,
        mechanism=mt.HARVESTER_ACTION)
    # the first adoption patch was still out when the second action was posted
    assert kube.held_patch_released == [True]
    assert sorted(p["name"] for p in kube.patched) == ["vm-1-00000", "vm-2-00001"]
    assert [m["vm"] for m in result["migrated"]] == ["default/vm-1", "default/vm-2"]


def test_a_failed_adoption_patch_fails_the_evacuation() -> None:
    kube = _TwoVmKube(errors.ApiError(403, "Forbidden", "virtualmachineinstancemigrations "
                                      "is forbidden"))
    with pytest.raises(errors.ApiError, match="forbidden"):
        node_migrations.migrate_all(
            kube, _Writer(), "node-1", _two_vm_plan(), [],  # type: ignore[arg-type]
            {"migrated": []}, target_aware=True, concurrency=1, retries=0,
            migration_timeout=900, timeout=60, mechanism=mt.HARVESTER_ACTION)
