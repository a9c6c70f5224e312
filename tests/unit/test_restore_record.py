"""The VMs the collection stopped for a node survive Harvester's VM detector rewriting the
node's entry of ``<plan>-restore-vm`` (node_restore.RECORD_ANNOTATION).

The pre-drain Job's ``vm-live-migrate-detector --shutdown`` (harvester v1.6.0
pkg/upgradehelper/vmlivemigratedetector/detector.go createOrUpdateConfigMap) gets the
ConfigMap, sets ``data[<node>]`` to the non-migratable VMs it finds *running* and updates the
object: a VM this collection stopped before the Job ran is no longer running, so its name is
dropped from ``data``. A run killed before merging its record back (make chaos, seed
595569926, runs 36 and 37) used to leave that VM stopped for good."""

from __future__ import annotations

import copy
from typing import Any

import pytest

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
c = pytest.importorskip(f"{_MU}.constants")
node_restore = pytest.importorskip(f"{_MU}.node_restore")

PLAN = "hvst-upgrade-abcde"
CM = f"{PLAN}-restore-vm"


class Writer:
    name = PLAN

    def __init__(self) -> None:
        self.plan = {"metadata": {"name": PLAN, "uid": "u1"}, "spec": {"restoreVM": True}}

    def labels(self, component: str) -> dict[str, str]:
        return {c.LABEL_PLAN: PLAN, c.LABEL_COMPONENT: component}

    def owner_reference(self) -> dict[str, Any]:
        return {"apiVersion": "management.harvesterhci.io/v1beta1", "kind": "UpgradePlan",
                "name": PLAN, "uid": "u1"}

    def event(self, *_a: Any, **_kw: Any) -> None:
        pass


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            into.pop(k, None)
        elif isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = copy.deepcopy(v)


class Kube:
    """One ConfigMap, with a JSON merge patch as the apiserver applies it."""
    check_mode = False

    def __init__(self, cm: dict[str, Any] | None = None) -> None:
        self.cm = cm

    def get(self, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> dict[str, Any] | None:
        assert (kind, name, namespace) == ("ConfigMap", CM, c.UPGRADE_NS)
        return copy.deepcopy(self.cm)

    def create_in(self, api_version: str, kind: str, body: dict[str, Any],
                  namespace: str) -> dict[str, Any]:
        assert self.cm is None
        self.cm = copy.deepcopy(body)
        return body

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None) -> dict[str, Any]:
        assert self.cm is not None
        _merge(self.cm, patch)
        return copy.deepcopy(self.cm)


def detector_rewrites(kube: Kube, node: str, running: list[str]) -> None:
    """What the detector does: Get, ``Data[node] = <running non-migratable VMs>``, Update."""
    cm = kube.get("v1", "ConfigMap", CM, c.UPGRADE_NS)
    assert cm is not None
    cm.setdefault("data", {})[node] = ",".join(running)
    kube.cm = cm


def test_a_record_made_before_the_job_survives_the_detectors_rewrite() -> None:
    kube, w = Kube(), Writer()
    assert node_restore.record_shutdowns(kube, w, "n2", ["default/pinned"])
    detector_rewrites(kube, "n2", [])       # pinned is already stopped: not running
    assert kube.cm is not None and kube.cm["data"]["n2"] == ""
    assert node_restore.restore_entries(kube, w, "n2") == ["default/pinned"]
    # merged back, Harvester's own entry is whole again
    assert node_restore.record_shutdowns(
        kube, w, "n2", node_restore.restore_entries(kube, w, "n2"))
    assert kube.cm["data"]["n2"] == "default/pinned"


def test_a_configmap_the_detector_created_keeps_its_entries_and_gets_ours() -> None:
    kube = Kube({"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": CM, "namespace": c.UPGRADE_NS},
                 "data": {"n1": "default/gpu"}})
    w = Writer()
    assert node_restore.record_shutdowns(kube, w, "n2", ["default/b", "default/a"])
    assert node_restore.restore_entries(kube, w, "n1") == ["default/gpu"]
    detector_rewrites(kube, "n2", ["default/c"])
    assert node_restore.restore_entries(kube, w, "n2") == ["default/a", "default/b",
                                                           "default/c"]
    # n1's entry copied once (ours lacked it), then nothing new: no write
    assert node_restore.record_shutdowns(kube, w, "n1", ["default/gpu"])
    assert not node_restore.record_shutdowns(kube, w, "n1", ["default/gpu"])


def test_an_unreadable_copy_falls_back_to_harvesters_entry() -> None:
    kube = Kube({"metadata": {"name": CM, "annotations": {
        node_restore.RECORD_ANNOTATION: "not json"}}, "data": {"n1": "default/x"}})
    assert node_restore.restore_entries(kube, Writer(), "n1") == ["default/x"]
