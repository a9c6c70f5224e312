"""CycleKube: which reads go to the server and which are answered from the step's memory, and
Kube's raw-body parsing (no ResourceInstance)."""

from __future__ import annotations

import json
from typing import Any

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    client,
    cycle_kube,
)

VMI = ("kubevirt.io/v1", "VirtualMachineInstance")
POD = ("batch/v1", "Job")   # not followed by an informer (cycle_kube.INFORMED): per step


class Response:
    """What the dynamic client returns for ``serialize=False``: the urllib3 response."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()


class Res:
    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.calls = calls
        self.rv = 100

    def get(self, **kw: Any) -> Response:
        assert kw.pop("serialize") is False   # parsed by Kube, not by the dynamic client
        self.calls.append(kw)
        self.rv += 1
        return Response({"kind": "VirtualMachineInstanceList", "apiVersion": "kubevirt.io/v1",
                         "metadata": {"resourceVersion": str(self.rv)},
                         "items": [{"metadata": {"name": "vm1", "namespace": "default"}}]})


class Dyn:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        res = Res(self.calls)

        class Resources:
            def get(self, api_version: str, kind: str) -> Res:
                return res

        self.resources = Resources()


def test_list_parses_the_raw_body_and_fills_in_apiversion_and_kind() -> None:
    kube = client.Kube(Dyn())
    items, rv = kube.list_with_rv(*VMI)
    assert rv == "101"
    assert items == [{"metadata": {"name": "vm1", "namespace": "default"},
                      "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance"}]


def dyn_of(res: Any) -> Any:
    """A dynamic client whose every kind is ``res``."""
    resources = type("Resources", (), {"get": staticmethod(lambda api_version, kind: res)})
    return type("Dyn", (), {"resources": resources})()


def test_create_in_sets_kind_and_namespace() -> None:
    created: list[tuple[dict[str, Any], str | None]] = []

    class CreateRes:
        def create(self, body: dict[str, Any], namespace: str | None = None,
                   **_: Any) -> Response:
            created.append((body, namespace))
            return Response(body)

    kube = client.Kube(dyn_of(CreateRes()))
    out = kube.create_in("v1", "ConfigMap", {"metadata": {"name": "x"}, "data": {}}, "ns")
    assert out["apiVersion"] == "v1" and out["kind"] == "ConfigMap"
    assert created == [({"metadata": {"name": "x", "namespace": "ns"}, "data": {},
                         "apiVersion": "v1", "kind": "ConfigMap"}, "ns")]


def test_a_wait_starts_from_the_steps_own_list_and_lists_when_there_is_none() -> None:
    dyn = Dyn()
    kube = cycle_kube.CycleKube(dyn)
    kube.begin_step("evacuate")
    rv = kube.list_with_rv(*POD)[1]
    assert len(dyn.calls) == 1
    kube._waiting = 1          # what CycleKube.wait sets around Kube.wait's initial lists
    assert kube.list_with_rv(*POD)[1] == rv, "the wait should watch from the step's list"
    assert len(dyn.calls) == 1
    kube._waiting = 0
    kube.forget(*POD)          # e.g. a VMI/VM written: what was read is stale now
    kube._waiting = 1
    assert kube.list_with_rv(*POD)[1] != rv
    assert len(dyn.calls) == 2
    kube._waiting = 0
    kube.begin_step("restore")  # a new step reads afresh
    kube._waiting = 1
    kube.list_with_rv(*POD, label_selector="a=b")
    assert len(dyn.calls) == 3 and dyn.calls[-1]["label_selector"] == "a=b"


def test_a_delete_with_preconditions_reaches_the_server() -> None:
    """The lock's release deletes its Lease with preconditions through the node module's
    CycleKube (a failing node module releases the lock): they are sent, not refused."""
    sent: list[dict[str, Any]] = []

    class DelRes:
        def delete(self, **kw: Any) -> Response:
            sent.append(kw)
            return Response({"kind": "Status", "status": "Success"})

    kube = cycle_kube.CycleKube(dyn_of(DelRes()))
    pre = {"uid": "u1", "resourceVersion": "7"}
    kube.delete("coordination.k8s.io/v1", "Lease", "harvester-upgrade-lock", "harvester-system",
                preconditions=pre)
    assert sent and sent[0]["body"]["preconditions"] == pre, sent


def test_the_restore_configmap_read_spans_a_step_boundary_until_a_wait_or_a_write() -> None:
    """The restore-vm ConfigMap read as the evacuation ends answers the pre-drain step that
    begins right after (nothing awaited in between); a wait or a write of ConfigMaps, and it
    is read again. Other kinds are read afresh in each step."""
    reads: list[str] = []

    class GetRes:
        def get(self, **kw: Any) -> Response:
            reads.append(kw.get("name") or "")
            return Response({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": kw.get("name"), "namespace": "ns",
                                          "resourceVersion": str(len(reads))},
                             "data": {"node-1": "default/vm"}})

        def patch(self, **kw: Any) -> Response:
            return Response({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": kw["name"], "namespace": "ns"}})

    kube = cycle_kube.CycleKube(dyn_of(GetRes()))
    kube.begin_step("evacuate")
    assert kube.get("v1", "ConfigMap", "p-restore-vm", "ns")["data"] == {"node-1": "default/vm"}
    kube.begin_step("answer_pre_drain")
    kube.get("v1", "ConfigMap", "p-restore-vm", "ns")
    assert reads == ["p-restore-vm"]
    kube.forget()                                   # after every wait
    kube.get("v1", "ConfigMap", "p-restore-vm", "ns")
    assert len(reads) == 2
    kube.patch("v1", "ConfigMap", "p-restore-vm", {"data": {"node-1": ""}}, "ns")
    kube.get("v1", "ConfigMap", "p-restore-vm", "ns")
    assert len(reads) == 3
    kube.begin_step("os_upgrade")
    kube.get("batch/v1", "Job", "j", "ns")          # not kept across steps: read each time
    kube.begin_step("restore")
    kube.get("batch/v1", "Job", "j", "ns")
    assert reads[-2:] == ["j", "j"]


def test_without_informing_a_read_of_an_informed_set_is_a_list_and_starts_no_informer(
        ) -> None:
    # node_gate enter after ClusterUpgrade's call did the head start: one list per set, not
    # a list and a watch each
    dyn = Dyn()
    kube = cycle_kube.CycleKube(dyn)
    kube.informing = False
    for api_version, kind, namespace in sorted(cycle_kube.INFORMED, key=str):
        assert kube._informer_key(api_version, kind, namespace) is None
    kube.list_with_rv(*VMI)
    kube.list_with_rv("v1", "Node")
    assert len(dyn.calls) == 2 and kube._informers == {} and kube._starting == {}


def test_a_stable_object_read_ahead_or_written_is_not_read_again() -> None:
    """The KubeVirt CR read ahead by the head start's preparation (also while another thread
    waits, when a plain get would not remember it) and Rancher's cluster as the entry has
    just patched it answer the head start's reads; other kinds are not read ahead."""
    reads: list[str] = []

    class GetRes:
        def get(self, **kw: Any) -> Response:
            reads.append(kw.get("name") or "")
            return Response({"apiVersion": "x/v1", "kind": "Any",
                             "metadata": {"name": kw.get("name"), "namespace": "ns"}})

        def patch(self, **kw: Any) -> Response:
            return Response({"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
                             "metadata": {"name": kw["name"], "namespace": "fleet-local",
                                          "resourceVersion": "7"},
                             "spec": {"patched": True}})

    kube = cycle_kube.CycleKube(dyn_of(GetRes()))
    kube._waiting = 1                  # another thread waits (the node's reboot)
    kube.warm("kubevirt.io/v1", "KubeVirt", "kubevirt", "harvester-system")
    kube.warm("kubevirt.io/v1", "KubeVirt", "kubevirt", "harvester-system")   # once
    kube.warm("batch/v1", "Job", "j", "ns")    # not a stable object: left to its step
    kube._waiting = 0
    kube.begin_step("restore")
    assert kube.get("kubevirt.io/v1", "KubeVirt", "kubevirt", "harvester-system")
    assert reads == ["kubevirt"]
    kube.patch("provisioning.cattle.io/v1", "Cluster", "local", {"spec": {}}, "fleet-local")
    got = kube.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")
    assert got["spec"] == {"patched": True} and reads == ["kubevirt"]
