"""Scenarios: every built-in loads, bad files name the bad field, populate builds the cluster."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harvester_sim import crds as harvester_crds
from harvester_sim.faults import CONTEXT_KEYS
from harvester_sim.releases.catalog import get_release
from harvester_sim.scenarios import loader, objects
from harvester_sim.timings import Timings
from harvester_sim.world import World


@pytest.mark.parametrize("name", loader.builtin_names())
def test_every_builtin_loads(name: str) -> None:
    scn = loader.load(name)
    assert scn["name"] == name
    assert scn["nodes"], name
    names = [n["name"] for n in scn["nodes"]]
    assert len(names) == len(set(names))
    for vm in scn["vms"]:
        assert vm["initialNode"] in names, vm["name"]
    Timings.from_scenario(scn)


def test_builtins_have_the_promised_shapes() -> None:
    three = loader.load("three-node")
    assert len(three["nodes"]) == 3 and 10 <= len(three["vms"]) <= 14
    assert three["harvester"]["installed"] == "v1.5.1"
    assert [a["version"] for a in three["harvester"]["available"]] == ["v1.6.0"]
    assert any(v["pinned"] for v in three["vms"])
    assert any(v["devices"]["hostDevices"] for v in three["vms"])
    assert any(w["pdb"] for w in three["workloads"])
    mixed = loader.load("five-node-mixed")
    roles = [tuple(n["roles"]) for n in mixed["nodes"]]
    assert sum("etcd" in r for r in roles) == 3 and roles.count(("worker",)) == 2
    assert any(n["witness"] for n in mixed["nodes"])
    assert any(v["robustness"] == "degraded" for vm in mixed["vms"] for v in vm["volumes"])
    hundred = loader.load("hundred-node")
    assert len(hundred["nodes"]) == 100 and len(hundred["vms"]) == 3000
    two = loader.load("two-hundred-node")      # issue 25's bigger rehearsal
    assert len(two["nodes"]) == 200 and len(two["vms"]) == 6000
    roles = {tuple(n["roles"]) for n in two["nodes"]}
    assert roles == {("control-plane", "etcd", "worker"), ("etcd",), ("worker",)}
    assert [n["name"] for n in two["nodes"] if n["witness"]] == ["witness-1"]
    assert all(v["initialNode"] != "witness-1" for v in two["vms"])
    pinned = [v for v in two["vms"] if v["pinned"]]
    assert len(pinned) == 64 and all(v["initialNode"] == v["pinned"] for v in pinned)
    gpu = [v for v in two["vms"] if v["devices"]["gpus"]]
    assert len(gpu) == 16 and {v["initialNode"] for v in gpu} <= {
        n["name"] for n in two["nodes"] if n["devices"]}
    assert sum(1 for w in two["workloads"] if w["pdb"]) == 3
    assert len(loader.load("single-node")["nodes"]) == 1
    assert not loader.load("empty")["vms"]
    assert loader.load("three-node-migration-fail")["faults"][0]["kind"] == "migration_fail"


def test_placement_is_deterministic_and_honours_constraints() -> None:
    a, b = loader.load("three-node"), loader.load("three-node")
    assert [v["initialNode"] for v in a["vms"]] == [v["initialNode"] for v in b["vms"]]
    by = {v["name"]: v for v in a["vms"]}
    assert by["pinned"]["initialNode"] == "node-2"
    assert by["pinned"]["nodeSelector"] == {"kubernetes.io/hostname": "node-2"}
    assert by["gpu"]["initialNode"] == "node-3"  # the only node with the A10
    assert not by["web-01"]["nodeSelector"]
    # unpinned VMs are spread over every node
    assert {v["initialNode"] for v in a["vms"] if v["fleet"] == "web"} == {
        "node-1", "node-2", "node-3"}
    mixed = {v["name"]: v for v in loader.load("five-node-mixed")["vms"]}
    assert all(v["initialNode"] != "node-3" for v in mixed.values())  # witness runs no VM
    assert {mixed[f"zone-b-0{i}"]["initialNode"] for i in range(1, 5)} <= {"worker-4",
                                                                          "worker-5"}
    assert {mixed[f"zone-a-0{i}"]["initialNode"] for i in range(1, 4)} <= {"node-1", "node-2"}


def test_machine_names_follow_the_seed() -> None:
    a = loader.normalize({"seed": 1, "nodes": [{"name": "n1"}]})
    b = loader.normalize({"seed": 2, "nodes": [{"name": "n1"}]})
    m = a["nodes"][0]["machine"]
    assert m.startswith("custom-") and len(m) == len("custom-") + 12
    assert m == loader.normalize({"seed": 1, "nodes": [{"name": "n1"}]})["nodes"][0]["machine"]
    assert m != b["nodes"][0]["machine"]
    fixed = loader.normalize({"nodes": [{"name": "n1", "machine": "custom-abc"}]})
    assert fixed["nodes"][0]["machine"] == "custom-abc"


def test_node_count_expansion() -> None:
    scn = loader.normalize({"nodes": [{"name": "cp", "count": 3, "roles": ["control-plane"]},
                                      {"name": "w{n:03d}", "count": 2, "first": 7}]})
    assert [n["name"] for n in scn["nodes"]] == ["cp-1", "cp-2", "cp-3", "w007", "w008"]
    assert len({n["ip"] for n in scn["nodes"]}) == 5


def test_schema_timings_match_the_timings_dataclass() -> None:
    props = loader.schema()["properties"]["timings"]["properties"]
    assert set(props) == {f.name for f in dataclasses.fields(Timings)}


def test_schema_fault_kinds() -> None:
    kinds = loader.schema()["$defs"]["fault"]["properties"]["kind"]["enum"]
    assert len(kinds) == len(set(kinds)) == 25
    assert set(kinds) == set(CONTEXT_KEYS)


def test_every_fault_kind_asked_for_in_the_code_is_in_the_schema() -> None:
    """A kind some component asks for but the schema rejects can never be injected."""
    kinds = set(loader.schema()["$defs"]["fault"]["properties"]["kind"]["enum"])
    pkg = Path(loader.__file__).parents[1]
    asked: set[str] = set()
    for f in pkg.rglob("*.py"):
        text = f.read_text()
        asked |= set(re.findall(r"""faults\.(?:match|active)\(\s*["']([a-z0-9_]+)["']""", text))
        asked |= set(re.findall(r"""_fault\(\s*["']([a-z0-9_]+)["']""", text))
        for kinds_arg in re.findall(r"""_fault\(ctx, [^,()]+, ([^)]*)\)""", text):  # toolkit
            asked |= set(re.findall(r'"([a-z_]+)"', kinds_arg))
    asked |= set(loader.DownloadFaults.KINDS)
    asked.discard("release_download")  # the release server's own kind (DownloadFaults maps it)
    assert {"chart_stuck", "api_error", "watch_cut", "node_job_hang", "volume_degraded",
            "cert_near_expiry"} <= asked  # the scan works
    assert asked == kinds


# --------------------------------------------------------------------------- bad files
BAD = [
    ("roles enum", "nodes: [{name: a}, {name: b}, {name: c, roles: [master]}]",
     "nodes[2].roles[0]: 'master' is not one of ['control-plane', 'etcd', 'worker']"),
    ("unknown top-level field", "nodez: []", "nodez: unknown field"),
    ("unknown node field", "nodes: [{name: a, cpus: 4}]", "nodes[0].cpus: unknown field"),
    ("node without name", "nodes: [{roles: [worker]}]",
     "nodes[0]: 'name' is a required property"),
    ("bad memory quantity", "nodes: [{name: a, memory: lots}]", "nodes[0].memory"),
    ("bad speed", "speed: 0", "speed: 0 is less than or equal to the minimum of 0"),
    ("bad version", "harvester: {installed: 1.5}", "harvester.installed"),
    ("bad fault kind", "faults: [{kind: explode}]", "faults[0].kind: 'explode' is not one of"),
    ("bad probability", "faults: [{kind: api_error, trigger: {probability: 2}}]",
     "faults[0].trigger.probability: 2 is greater than the maximum of 1"),
    ("unknown trigger", "faults: [{kind: api_error, trigger: {when: 3}}]",
     "faults[0].trigger.when: unknown field"),
    ("unknown timing", "timings: {reboot_seconds: 3}", "timings.reboot_seconds: unknown field"),
    ("negative timing", "timings: {reboot_s: -1}", "timings.reboot_s: -1 is less than"),
    ("bad run strategy", "vms: [{name: v, runStrategy: Sometimes}]",
     "vms[0].runStrategy: 'Sometimes' is not one of"),
    ("bad VM name", "vms: [{name: My_VM}]", "vms[0].name: 'My_VM' does not match"),
    ("bad replicas", "vms: [{name: v, volumes: [{replicas: 0}]}]",
     "vms[0].volumes[0].replicas: 0 is less than the minimum of 1"),
    ("bad access mode", "vms: [{name: v, volumes: [{accessMode: RWX}]}]",
     "vms[0].volumes[0].accessMode: 'RWX' is not one of"),
    ("bad taint effect", "nodes: [{name: a, taints: [{key: k, effect: Never}]}]",
     "nodes[0].taints[0].effect: 'Never' is not one of"),
    ("bad pdb", "workloads: [{name: w, pdb: {minAvailable: lots}}]",
     "workloads[0].pdb.minAvailable"),
    ("bad volume robustness", "volumes: [{name: v, robustness: fine}]",
     "volumes[0].robustness: 'fine' is not one of"),
    ("pinned to an unknown node", "nodes: [{name: a}]\nvms: [{name: v, placement: {node: b}}]",
     "vms[0].placement.node: unknown node 'b'"),
    ("duplicate node", "nodes: [{name: a}, {name: a}]", "nodes[1].name: duplicate node name"),
    ("witness with worker role", "nodes: [{name: a, witness: true, roles: [etcd, worker]}]",
     "nodes[0].roles: a witness node has only the etcd role"),
    ("disk used > capacity", "nodes: [{name: a, disk: {capacity: 1Gi, used: 2Gi}}]",
     "nodes[0].disk.used: larger than disk.capacity"),
    ("attached volume without node", "volumes: [{name: v, state: attached}]",
     "volumes[0].node: required when state is attached"),
    ("top level is a list", "- a\n- b", "the top level must be a mapping"),
    ("not YAML", "nodes: [a, b", "not valid YAML"),
    ("extends an unknown scenario", "extends: nowhere", "extends: unknown scenario 'nowhere'"),
    # wrong types
    ("nodes not a list", "nodes: 3", "nodes: 3 is not of type 'array'"),
    ("speed not a number", "speed: fast", "speed: 'fast' is not of type 'number'"),
    ("node count not an integer", "nodes: [{name: a, count: two}]",
     "nodes[0].count: 'two' is not of type 'integer'"),
    ("faults not a list", "faults: {kind: api_error}", "faults: {'kind': 'api_error'} is not of "
     "type 'array'"),
    ("fault times not an integer", "faults: [{kind: api_error, times: once}]",
     "faults[0].times: 'once' is not of type 'integer'"),
    ("fault times zero", "faults: [{kind: api_error, times: 0}]",
     "faults[0].times: 0 is less than the minimum of 1"),
    ("fault fraction > 1", "faults: [{kind: api_error, fraction: 1.5}]",
     "faults[0].fraction: 1.5 is greater than the maximum of 1"),
    ("fault code out of range", "faults: [{kind: api_error, code: 42}]",
     "faults[0].code: 42 is less than the minimum of 100"),
    ("trigger at negative", "faults: [{kind: api_error, trigger: {at: -5}}]",
     "faults[0].trigger.at: -5 is less than the minimum of 0"),
    ("trigger on without event", "faults: [{kind: migration_fail, trigger: {'on': {node: a}}}]",
     "faults[0].trigger.on: 'event' is a required property"),
    ("empty trigger", "faults: [{kind: api_error, trigger: {}}]",
     "faults[0].trigger: {} should be non-empty"),
    ("target not a mapping", "faults: [{kind: api_error, target: node-1}]",
     "faults[0].target: 'node-1' is not of type 'object'"),
    ("target value a mapping", "faults: [{kind: node_never_returns, target: {node: {a: 1}}}]",
     "faults[0].target.node: {'a': 1} is not of type"),
    ("404 files enum", "faults: [{kind: image_download_404, files: some}]",
     "faults[0].files: 'some' is not one of ['iso', 'all']"),
    # missing required fields / unknown keys in faults
    ("fault without kind", "faults: [{target: {node: a}}]",
     "faults[0]: 'kind' is a required property"),
    ("unknown fault field", "faults: [{kind: api_error, fractoin: 0.5}]",
     "faults[0].fractoin: unknown field (allowed: code, days,"),
    ("bad fault kind in a list", "faults: [{kind: api_error}, {kind: disk_full}]",
     "faults[1].kind: 'disk_full' is not one of ['migration_fail'"),
    # targets that could never match
    ("target key the kind never sees", "faults: [{kind: api_error, target: {node: a}}]",
     "faults[0].target.node: api_error faults have no 'node' to match (target keys: verb, "
     "resource, group, namespace, name, user, user_agent)"),
    ("target names an unknown node", "nodes: [{name: a}]\n"
     "faults: [{kind: node_never_returns, target: {node: b}}]",
     "faults[0].target.node: unknown node 'b'"),
    ("target lists an unknown node", "nodes: [{name: a}]\n"
     "faults: [{kind: migration_fail, target: {source: [a, c]}}]",
     "faults[0].target.source: unknown node 'c'"),
    ("volume fault on unknown node", "nodes: [{name: a}]\n"
     "faults: [{kind: volume_degraded, nodes: [a, z]}]", "faults[0].nodes[1]: unknown node 'z'"),
    ("several errors at once", "speed: 0\nnodez: 1\nfaults: [{kind: x}]",
     "faults[0].kind: 'x' is not one of"),
]


@pytest.mark.parametrize(("case", "text", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_files_name_the_field(tmp_path: Path, case: str, text: str, expected: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text + "\n")
    with pytest.raises(ValueError) as exc:
        loader.load(f)
    msg = str(exc.value)
    assert msg.startswith("scenario bad.yaml: "), msg
    assert expected in msg, msg


def test_several_errors_are_all_named(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("speed: 0\nnodez: 1\nfaults: [{kind: x, times: 0}]\n")
    with pytest.raises(ValueError) as exc:
        loader.load(f)
    msg = str(exc.value)
    for part in ("faults[0].kind: 'x' is not one of", "faults[0].times: 0 is less than",
                 "nodez: unknown field", "speed: 0 is less than or equal"):
        assert part in msg, msg


def test_fault_targets_that_can_match_load(tmp_path: Path) -> None:
    f = tmp_path / "ok.yaml"
    f.write_text(textwrap.dedent("""\
        extends: three-node
        faults:
          - {kind: node_never_returns, target: {node: [node-1, node-2]}}
          - {kind: migration_fail, target: {source: "*", vm: default/web-01}}
          - {kind: volume_degraded, nodes: [node-3], replicas: 2, heal_after_s: 60}
          - {kind: api_error, target: {resource: secrets, verb: list}, fraction: 0.5}
          - {kind: chart_stuck, target: {chart: harvester}}
        """))
    assert len(loader.load(f)["faults"]) == 5


def test_unknown_builtin_lists_the_builtins() -> None:
    with pytest.raises(ValueError, match="unknown scenario 'nope'.*three-node"):
        loader.load("nope")


def test_trigger_on_key_survives_yaml_1_1(tmp_path: Path) -> None:
    # PyYAML reads an unquoted `on:` as True; the trigger written as in docs/scenarios.md loads.
    f = tmp_path / "on.yaml"
    f.write_text(textwrap.dedent("""\
        extends: three-node
        faults:
          - kind: migration_fail
            trigger: {on: {event: migration_started, node: node-1}}
        """))
    scn = loader.load(f)
    assert scn["faults"][0]["trigger"] == {"on": {"event": "migration_started", "node": "node-1"}}
    raw = {"faults": [{"kind": "migration_fail", "trigger": {True: "migration_started"}}]}
    assert loader.normalize(raw)["faults"][0]["trigger"] == {"on": "migration_started"}
    assert raw["faults"][0]["trigger"] == {True: "migration_started"}  # input left unchanged


def test_extends_merges_and_detects_cycles(tmp_path: Path) -> None:
    child = tmp_path / "child.yaml"
    child.write_text(textwrap.dedent("""\
        extends: three-node
        timings: {reboot_s: 5}
        faults: [{kind: node_never_returns, target: {node: node-2}, times: 1}]
        """))
    scn = loader.load(child)
    assert scn["name"] == "child" and len(scn["nodes"]) == 3 and len(scn["vms"]) == 12
    assert scn["timings"] == {"reboot_s": 5} and scn["faults"][0]["target"] == {"node": "node-2"}
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ValueError, match="extends: cycle"):
        loader.load(tmp_path / "a.yaml")


def test_quantities() -> None:
    assert objects.parse_quantity("4Gi") == 4 * 2**30
    assert objects.parse_quantity("500m") == 0.5
    assert objects.parse_quantity(8) == 8.0
    with pytest.raises(ValueError):
        objects.parse_quantity("4 GB")


# ------------------------------------------------------------------------------ populate
@pytest.fixture
def populated() -> Iterator[World]:
    world = World(loader.load("three-node"), speed=1000)
    loader.populate(world)
    yield world
    world.stop()


def _one(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["metadata"]["name"] == name)


def test_populate_creates_the_cluster(populated: World) -> None:
    c = populated.client
    ns = {n["metadata"]["name"] for n in c.list("v1", "Namespace")}
    assert {"default", "kube-system", "kube-node-lease", "harvester-system", "longhorn-system",
            "cattle-system", "fleet-local", "cattle-fleet-local-system"} <= ns
    crds = {c_["metadata"]["name"] for c_ in c.list("apiextensions.k8s.io/v1",
                                                     "CustomResourceDefinition")}
    assert crds == {d["metadata"]["name"] for d in harvester_crds.crds_for(
        get_release(populated.scenario["harvester"]["installed"]))}
    nodes = c.list("v1", "Node")
    assert [n["metadata"]["name"] for n in nodes] == ["node-1", "node-2", "node-3"]
    n1 = nodes[0]
    labels, ann = n1["metadata"]["labels"], n1["metadata"]["annotations"]
    assert labels["harvesterhci.io/managed"] == "true"
    assert labels["kubernetes.io/hostname"] == "node-1"
    assert labels["node-role.kubernetes.io/control-plane"] == "true"
    assert labels["node-role.kubernetes.io/etcd"] == "true"
    scn = populated.scenario
    assert ann["cluster.x-k8s.io/machine"] == scn["nodes"][0]["machine"]
    assert ann["rke2.io/internal-ip"] == n1["status"]["addresses"][0]["address"]
    info = n1["status"]["nodeInfo"]
    rel = populated.extras["releases"].get("v1.5.1")
    assert info["osImage"] == "Harvester v1.5.1" == rel.os
    assert info["kubeletVersion"] == rel.kubernetes
    assert len(n1["status"]["images"]) == len(rel.images()) > 100
    assert all(i["sizeBytes"] > 0 for i in n1["status"]["images"])
    assert any(cond["type"] == "Ready" and cond["status"] == "True"
               for cond in n1["status"]["conditions"])
    assert nodes[2]["status"]["allocatable"]["nvidia.com/GA102GL_A10"] == "1"


def test_populate_creates_rancher_and_harvester_objects(populated: World) -> None:
    c = populated.client
    scn = populated.scenario
    cluster = c.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")
    rel = populated.extras["releases"].get("v1.5.1")
    assert cluster["spec"]["kubernetesVersion"] == rel.kubernetes
    assert cluster["status"]["ready"] is True
    machines = c.list("cluster.x-k8s.io/v1beta1", "Machine", "fleet-local")
    assert sorted(m["metadata"]["name"] for m in machines) == sorted(
        n["machine"] for n in scn["nodes"])
    inits = [m for m in machines if m["metadata"]["labels"].get("rke.cattle.io/init-node")]
    assert len(inits) == 1 and inits[0]["status"]["nodeRef"]["name"] == "node-1"
    assert all(m["status"]["phase"] == "Running" for m in machines)
    for n in scn["nodes"]:
        sec = c.get("v1", "Secret", f"{n['machine']}-machine-plan", "fleet-local")
        assert sec["type"] == "rke.cattle.io/machine-plan"
        assert sec["metadata"]["labels"]["rke.cattle.io/machine-name"] == n["machine"]
    setting = c.get("harvesterhci.io/v1beta1", "Setting", "server-version")
    assert setting["value"] == "v1.5.1"
    ver = c.get("harvesterhci.io/v1beta1", "Version", "v1.6.0", "harvester-system")
    server = populated.extras["release_server"]
    assert ver["spec"]["isoURL"] == server.url_for("v1.6.0")
    assert ver["spec"]["isoChecksum"] == server.checksum("v1.6.0")
    assert ver["spec"]["minUpgradableVersion"]
    charts = c.list("management.cattle.io/v3", "ManagedChart", "fleet-local")
    assert {ch["metadata"]["name"] for ch in charts} == {"harvester", "harvester-crd"}


def test_populate_creates_vms_volumes_and_workloads(populated: World) -> None:
    c = populated.client
    vms = c.list("kubevirt.io/v1", "VirtualMachine", "default")
    assert len(vms) == 12
    pinned = _one(vms, "pinned")["spec"]["template"]["spec"]
    assert pinned["nodeSelector"] == {"kubernetes.io/hostname": "node-2"}
    web = _one(vms, "web-01")
    assert "nodeSelector" not in web["spec"]["template"]["spec"]
    assert web["spec"]["runStrategy"] == "Always"
    assert web["metadata"]["annotations"][objects.INITIAL_NODE_ANNOTATION] == "node-1"
    gpu = _one(vms, "gpu")["spec"]["template"]["spec"]["domain"]["devices"]
    assert gpu["hostDevices"] == [{"name": "a10", "deviceName": "nvidia.com/GA102GL_A10"}]
    cd = _one(vms, "installer")["spec"]["template"]["spec"]
    assert any("cdrom" in d for d in cd["domain"]["devices"]["disks"])
    assert any("containerDisk" in v for v in cd["volumes"])
    claim = web["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    pvc = c.get("v1", "PersistentVolumeClaim", claim, "default")
    assert pvc["status"]["phase"] == "Bound"
    vol = c.get("longhorn.io/v1beta2", "Volume", pvc["spec"]["volumeName"], "longhorn-system")
    assert vol["spec"]["numberOfReplicas"] == 3
    assert vol["status"]["robustness"] == "healthy"
    reps = c.list("longhorn.io/v1beta2", "Replica", "longhorn-system",
                  label_selector={"longhornvolume": vol["metadata"]["name"]})
    assert len({r["spec"]["nodeID"] for r in reps}) == 3
    dep = c.get("apps/v1", "Deployment", "web-frontend", "default")
    assert dep["spec"]["replicas"] == 3
    pdb = c.get("policy/v1", "PodDisruptionBudget", "web-frontend", "default")
    assert pdb["spec"]["minAvailable"] == 2


def test_populate_degraded_volume_and_witness() -> None:
    world = World(loader.load("five-node-mixed"), speed=1000)
    try:
        loader.populate(world)
        c = world.client
        witness = c.get("v1", "Node", "node-3")
        assert witness["metadata"]["labels"]["node-role.harvesterhci.io/witness"] == "true"
        assert any(t["key"] == "node-role.kubernetes.io/etcd" for t in witness["spec"]["taints"])
        vm = c.get("kubevirt.io/v1", "VirtualMachine", "degraded", "default")
        claim = vm["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]
        pvc = c.get("v1", "PersistentVolumeClaim", claim["claimName"], "default")
        name = pvc["spec"]["volumeName"]
        vol = c.get("longhorn.io/v1beta2", "Volume", name, "longhorn-system")
        assert vol["status"]["robustness"] == "degraded"
        reps = c.list("longhorn.io/v1beta2", "Replica", "longhorn-system",
                      label_selector={"longhornvolume": name})
        assert sorted(r["status"]["currentState"] for r in reps) == ["error", "running",
                                                                     "running"]
        standalone = c.get("longhorn.io/v1beta2", "Volume", "backup-target", "longhorn-system")
        assert standalone["status"]["state"] == "detached"
    finally:
        world.stop()


def test_populate_tolerates_missing_crds(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    monkeypatch.setattr(harvester_crds, "crds_for", lambda *a, **k: [])  # no CRD at all
    world = World(loader.load("three-node"), speed=1000)
    try:
        loader.populate(world)
        assert len(world.client.list("v1", "Node")) == 3
        assert len(world.client.list("v1", "PersistentVolumeClaim", "default")) == 15
        loaded = [e for e in world.timeline.snapshot() if e["event"] == "scenario_loaded"][0]
        assert loaded["skipped"]["VirtualMachine.kubevirt.io/v1"] == 12
    finally:
        world.stop()


def test_populate_accepts_an_unloaded_dict() -> None:
    world = World({"name": "tiny", "nodes": [{"name": "n1"}]}, speed=1000)
    try:
        loader.populate(world)
        assert world.scenario["nodes"][0]["machine"].startswith("custom-")
        assert world.client.get("v1", "Node", "n1")["metadata"]["labels"][
            "node-role.kubernetes.io/worker"] == "true"
    finally:
        world.stop()


def test_download_faults_map_onto_the_release_server() -> None:
    from harvester_sim.clock import Clock
    from harvester_sim.faults import Faults

    faults = Faults(Clock(1000), [
        {"kind": "image_download_corrupt", "target": {"version": "v1.6.0"}, "times": 1},
        {"kind": "image_download_slow", "rate_mib_s": 2},
    ])
    src = loader.DownloadFaults(faults)
    assert src.match("release_download", version="v1.6.0", file="sha512") is None
    assert src.match("release_download", version="v1.6.0", file="iso") == {"fault": "corrupt"}
    assert src.match("release_download", version="v1.6.0", file="iso") == {
        "fault": "slow", "rate_bytes_per_s": 2 * 1024 * 1024}
    assert json.dumps(faults.fired)


def test_three_node_is_ready_when_running_returns() -> None:
    """The cluster is usable as soon as ``testing.running`` returns: the HTTPS API answers
    and every node is Ready (how fast is ``benchmarks/sim_scale.py``'s business)."""
    import http.client
    import ssl
    import tempfile

    from harvester_sim import testing

    with testing.running("three-node", speed=1000) as sim:
        with tempfile.NamedTemporaryFile("wb", suffix=".crt") as f:
            f.write(sim.server.ca_pem)
            f.flush()
            ctx = ssl.create_default_context(cafile=f.name)
        conn = http.client.HTTPSConnection("127.0.0.1", sim.server.port, context=ctx,
                                           timeout=30)
        conn.request("GET", "/api/v1/nodes", headers={"Authorization": f"Bearer {sim.token}"})
        resp = conn.getresponse()
        nodes = json.loads(resp.read())["items"]
        conn.close()
    assert resp.status == 200
    assert [n["metadata"]["name"] for n in nodes] == ["node-1", "node-2", "node-3"]
    for n in nodes:
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", n["metadata"]["name"]
