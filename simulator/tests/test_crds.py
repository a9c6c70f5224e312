"""The upstream CRDs the simulator serves (``harvester_sim.crds``, data from
``simulator/scripts/import_crds.py``): what they pin, that each names its source, and that a
cluster's set follows its release through the chart upgrade."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from harvester_sim import crds, testing
from harvester_sim.controllers._upgrade_util import switch_crds
from harvester_sim.releases.catalog import CATALOG, get_release
from harvester_sim.testing import wait_for

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _schema(crd: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    for v in crd["spec"]["versions"]:
        if v["name"] == version or (version is None and v.get("storage")):
            return v["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]
    raise AssertionError(f"{crd['metadata']['name']}: no version {version}")


def _crd(release: str, name: str) -> dict[str, Any]:
    return next(c for c in crds.crds_for(get_release(release)) if c["metadata"]["name"] == name)


def test_served_plan_crd_has_envs_and_no_env(raw: Callable[..., Any]) -> None:
    r = raw("GET", f"{CRD_PATH}/plans.upgrade.cattle.io")
    assert r.status == 200
    upgrade = _schema(r.json())["properties"]["spec"]["properties"]["upgrade"]["properties"]
    assert "envs" in upgrade and "env" not in upgrade
    assert "system-upgrade-controller" in crds.source_of(r.json())


def test_plan_with_env_comes_back_without_it(raw: Callable[..., Any], ns: str) -> None:
    plan = {"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
            "metadata": {"name": "p", "namespace": ns},
            "spec": {"concurrency": 1, "serviceAccountName": "system-upgrade-controller",
                     "nodeSelector": {"matchLabels": {"a": "b"}}, "version": "v1",
                     "upgrade": {"image": "busybox", "env": [{"name": "A", "value": "1"}],
                                 "envs": [{"name": "B", "value": "2"}]}}}
    r = raw("POST", f"/apis/upgrade.cattle.io/v1/namespaces/{ns}/plans", plan)
    assert r.status == 201, r.body
    assert "env" not in r.json()["spec"]["upgrade"]
    got = raw("GET", f"/apis/upgrade.cattle.io/v1/namespaces/{ns}/plans/p").json()
    assert "env" not in got["spec"]["upgrade"]
    assert got["spec"]["upgrade"]["envs"] == [{"name": "B", "value": "2"}]


def test_vmim_added_node_selector_only_from_kubevirt_1_6() -> None:
    name = "virtualmachineinstancemigrations.kubevirt.io"
    for release, has in (("v1.5.1", False), ("v1.6.0", False), ("v1.7.0", True)):
        spec = _schema(_crd(release, name), "v1")["properties"]["spec"]["properties"]
        assert ("addedNodeSelector" in spec) is has, release
        assert "vmiName" in spec


def test_served_vmim_crd_of_a_v1_5_1_cluster(raw: Callable[..., Any]) -> None:
    r = raw("GET", f"{CRD_PATH}/virtualmachineinstancemigrations.kubevirt.io").json()
    assert "addedNodeSelector" not in _schema(r)["properties"]["spec"]["properties"]
    assert "kubevirt/kubevirt" in crds.source_of(r) and "@v1.4.0" in crds.source_of(r)


def test_every_served_crd_names_its_source(raw: Callable[..., Any]) -> None:
    items = [c for c in raw("GET", CRD_PATH).json()["items"]
             if c["spec"]["group"] in crds.GROUP_COMPONENT]  # other tests add their own
    assert len(items) == 23
    for c in items:
        src = crds.source_of(c)
        assert src.startswith("github.com/") and "@" in src, (c["metadata"]["name"], src)


def test_vmi_has_no_status_subresource_vm_and_vmim_do() -> None:
    for release in ("v1.5.1", "v1.7.0"):
        subs = {c["spec"]["names"]["kind"]: "status" in (c["spec"]["versions"][0].get(
            "subresources") or {}) for c in crds.crds_for(get_release(release), ("kubevirt",))}
        assert subs == {"VirtualMachine": True, "VirtualMachineInstance": False,
                        "VirtualMachineInstanceMigration": True}


def _walk(node: Any, path: str = "") -> list[str]:
    """Paths of ``description`` keywords left in a schema."""
    out: list[str] = []
    if isinstance(node, dict):
        if isinstance(node.get("description"), str):
            out.append(path)
        for k in ("properties", "patternProperties"):
            for name, sub in (node.get(k) or {}).items():
                out += _walk(sub, f"{path}.{name}")
        for k in ("items", "additionalProperties", "not"):
            out += _walk(node.get(k), f"{path}/{k}")
        for k in ("allOf", "anyOf", "oneOf"):
            for i, sub in enumerate(node.get(k) or []):
                out += _walk(sub, f"{path}/{k}[{i}]")
    return out


def test_every_catalog_release_resolves_to_stored_files() -> None:
    idx = crds.index()
    for version, rel in CATALOG.items():
        files = crds.component_files(rel)
        assert set(files) == {"harvester", "kubevirt", "longhorn", "rancher", "suc", "static"}
        assert version in idx["harvester"], version
        assert rel.longhorn in idx["longhorn"] and rel.rancher in idx["rancher"], version
        docs = crds.crds_for(rel)
        names = [d["metadata"]["name"] for d in docs]
        assert len(names) == len(set(names)) == 23, version
        for d in docs:
            for v in d["spec"]["versions"]:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                assert schema is not None
                assert _walk(schema) == [], (d["metadata"]["name"], _walk(schema)[:3])


def test_unknown_versions_use_the_nearest_known() -> None:
    known = ["v1.4.3", "v1.5.0", "v1.5.1", "v1.6.0", "v1.7.0"]
    assert crds.nearest("v1.5.1", known) == "v1.5.1"
    assert crds.nearest("v1.5.3", known) == "v1.5.1"
    assert crds.nearest("v1.8.0", known) == "v1.7.0"
    assert crds.nearest("v1.2.0", known) == "v1.4.3"
    files = crds.component_files(get_release("v1.6.5"))
    assert files["harvester"] == crds.component_files(get_release("v1.6.1"))["harvester"]


def test_data_files_are_compact_json_with_sources() -> None:
    for comp in ("harvester", "kubevirt", "longhorn", "rancher", "suc", "upgrade-toolkit"):
        for f in sorted((crds.HERE / comp).glob("*.json")):
            data = json.loads(f.read_text())
            assert data["component"] == comp and data["sources"], f
            for c in data["crds"]:
                assert crds.source_of(c) in data["sources"]


def test_toolkit_crds_are_the_pinned_commit() -> None:
    docs = {d["metadata"]["name"]: d for d in crds.toolkit_crds()}
    assert set(docs) == {"upgradeplans.management.harvesterhci.io",
                         "versions.management.harvesterhci.io"}
    for d in docs.values():
        assert "5ac1bbe35a6b4f61247aa09162cc6a9099dddd4f" in crds.source_of(d)


def _source(world: Any, name: str) -> str:
    crd = world.client.try_get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    return crds.source_of(crd or {})


@pytest.mark.parametrize("target", ["1.6.0"])
def test_crd_set_switches_at_the_chart_upgrade(target: str) -> None:
    scn = {"name": "crd-switch", "harvester": {"installed": "v1.5.1"},
           "timings": {"chart_rollout_s": 5}}
    world = testing.build_world(scn, speed=200)
    try:
        c = world.client
        assert "@v1.5.0" in _source(world, "versions.harvesterhci.io")  # same at v1.5.1
        assert "@v1.4.0" in _source(world, "virtualmachineinstancemigrations.kubevirt.io")
        assert "@v1.8.1" in _source(world, "volumes.longhorn.io")  # same at v1.8.2

        def bump(name: str) -> None:
            def fn(cur: dict[str, Any]) -> dict[str, Any]:
                cur["spec"]["version"] = target
                return cur
            c.modify("management.cattle.io/v3", "ManagedChart", name, fn, "fleet-local")

        bump("harvester-crd")
        wait_for(lambda: "@v1.6.0" in _source(world, "versions.harvesterhci.io"),
                 what="harvesterhci.io CRDs of v1.6.0")
        assert "@v1.4.0" in _source(world, "virtualmachineinstancemigrations.kubevirt.io")
        bump("harvester")
        # the chart writes its CRDs one by one: the step is over when its record lands
        wait_for(lambda: any(e["event"] == "crds_switched" and e.get("step") == "harvester"
                             for e in world.timeline.snapshot()),
                 what="the harvester chart's CRDs of v1.6.0")
        kubevirt_crd = "virtualmachineinstancemigrations.kubevirt.io"
        assert "@v1.5.2" in _source(world, kubevirt_crd)
        assert "@v1.9.1" in _source(world, "volumes.longhorn.io")
        assert world.extras["crd_components"]["kubevirt"] == "kubevirt/v1.5.2.json"
        # Rancher's CRDs stay until Rancher itself is upgraded
        assert "v2.11" in _source(world, "machines.cluster.x-k8s.io")
        switch_crds(world, world.client_for("rancher"), get_release("v1.6.0"), "rancher")
        assert "v2.12.0" in _source(world, "machines.cluster.x-k8s.io")
        assert any(e["event"] == "crds_switched" for e in world.timeline.snapshot())
    finally:
        world.stop()
