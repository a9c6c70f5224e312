"""``harvester-sim export``: serve a scenario, export it, serve the export, compare the clusters.

Also: the export reads only (the API server's request counters for its user agent show get and
list and nothing on Secrets), writes no secret value, and fails with a clear message and no
file on a bad kubeconfig, an unreachable server, refused credentials or a missing API.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harvester_sim import cli, export, testing
from harvester_sim.scenarios import loader

SYSTEM = export.SYSTEM_NAMESPACES


def _md(o: dict[str, Any]) -> dict[str, Any]:
    return o.get("metadata") or {}


def snapshot(sim: testing.Running) -> dict[str, Any]:
    """What the upgrade cares about, read in-process (not through the API counters)."""
    c = sim.world.client
    nodes = {}
    for n in c.list("v1", "Node"):
        md = _md(n)
        labels = md.get("labels") or {}
        cap = (n.get("status") or {}).get("capacity") or {}
        nodes[md["name"]] = {
            "roles": sorted(k for k, v in labels.items()
                            if k.startswith("node-role.") and v == "true"),
            "zone": labels.get("topology.kubernetes.io/zone"),
            "capacity": {k: v for k, v in cap.items()},
            "taints": sorted((t["key"], t["effect"]) for t in (n.get("spec") or {})
                             .get("taints") or [] if not t["key"].startswith("node.kubernetes")),
            "machine": (md.get("annotations") or {}).get("cluster.x-k8s.io/machine"),
            "ip": [a["address"] for a in (n.get("status") or {}).get("addresses") or []
                   if a["type"] == "InternalIP"],
        }
    lh_by_pv = {}
    replicas: dict[str, list[str]] = {}
    for r in c.list("longhorn.io/v1beta2", "Replica", "longhorn-system"):
        replicas.setdefault(r["spec"]["volumeName"], []).append(r["spec"]["nodeID"])
    lh_vols = {}
    for v in c.list("longhorn.io/v1beta2", "Volume", "longhorn-system"):
        name = _md(v)["name"]
        lh_vols[name] = {"replicas": v["spec"]["numberOfReplicas"],
                         "size": v["spec"]["size"],
                         "replicaNodes": sorted(replicas.get(name, [])),
                         "initialRobustness": (_md(v).get("annotations") or {})
                         .get("sim.harvesterhci.io/initial-robustness")}
        lh_by_pv[name] = lh_vols[name]
    claims = {}
    for pvc in c.list("v1", "PersistentVolumeClaim"):
        md, spec = _md(pvc), pvc["spec"]
        claims[(md["namespace"], md["name"])] = {
            "size": spec["resources"]["requests"]["storage"],
            "accessModes": spec["accessModes"], "storageClass": spec["storageClassName"],
            "volumeMode": spec["volumeMode"],
            "longhorn": lh_by_pv.get(spec.get("volumeName") or "")}
    claimed = {spec_pv for spec_pv in (p["spec"].get("volumeName") for p in
                                       c.list("v1", "PersistentVolumeClaim")) if spec_pv}
    vms = {}
    for vm in c.list("kubevirt.io/v1", "VirtualMachine"):
        md, tspec = _md(vm), vm["spec"]["template"]["spec"]
        devs = tspec["domain"]["devices"]
        vms[(md["namespace"], md["name"])] = {
            "runStrategy": vm["spec"].get("runStrategy"),
            "evictionStrategy": tspec.get("evictionStrategy"),
            "nodeSelector": tspec.get("nodeSelector"), "affinity": tspec.get("affinity"),
            "hostDevices": [d["deviceName"] for d in devs.get("hostDevices") or []],
            "gpus": [d["deviceName"] for d in devs.get("gpus") or []],
            "disks": [(d["name"], sorted(k for k in d if k in ("disk", "cdrom")))
                      for d in devs["disks"]],
            "claims": [v["persistentVolumeClaim"]["claimName"] for v in tspec["volumes"]
                       if "persistentVolumeClaim" in v],
            "containerDisks": [v["containerDisk"]["image"] for v in tspec["volumes"]
                               if "containerDisk" in v],
            "cores": tspec["domain"]["cpu"]["cores"],
            "memory": tspec["domain"]["memory"]["guest"],
            "initialNode": (md.get("annotations") or {}).get("sim.harvesterhci.io/initial-node"),
        }
    pdbs = {(_md(p)["namespace"], _md(p)["name"]): p["spec"]
            for p in c.list("policy/v1", "PodDisruptionBudget")
            if _md(p)["namespace"] not in SYSTEM}
    deps = {(_md(d)["namespace"], _md(d)["name"]): (d["spec"]["replicas"],
                                                    d["spec"]["selector"])
            for d in c.list("apps/v1", "Deployment") if _md(d)["namespace"] not in SYSTEM}
    versions = {_md(v)["name"]: v["spec"].get("minUpgradableVersion")
                for v in c.list("harvesterhci.io/v1beta1", "Version", "harvester-system")}
    server_version = c.get("harvesterhci.io/v1beta1", "Setting", "server-version")["value"]
    lh_settings = {_md(s)["name"]: s.get("value")
                   for s in c.list("longhorn.io/v1beta2", "Setting", "longhorn-system")}
    return {"nodes": nodes, "vms": vms, "claims": claims,
            "standalone": {k: v for k, v in lh_vols.items() if k not in claimed},
            "pdbs": pdbs, "deployments": deps, "versions": versions,
            "installed": server_version, "longhorn_settings": lh_settings}


@pytest.fixture(scope="module", params=["three-node", "five-node-mixed"])
def roundtrip(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[dict[str, Any]]:
    out = tmp_path_factory.mktemp("export") / f"{request.param}-export.yaml"
    with testing.running(request.param, speed=1) as orig:
        rc = cli.main(["export", "--kubeconfig", str(orig.kubeconfig), "-o", str(out),
                       "--name", f"{request.param}-copy"])
        assert rc == 0
        before = snapshot(orig)
        secrets = orig.world.client.list("v1", "Secret")
        info = {"scenario": request.param, "file": out, "text": out.read_text(),
                "orig": before, "stats": orig.stats(), "token": orig.token,
                "url": orig.url, "ca": orig.server.ca_pem.decode(), "secrets": secrets}
    with testing.running(str(out), speed=1) as copy:
        info["copy"] = snapshot(copy)
        again = export.export(str(copy.kubeconfig), name=f"{request.param}-copy")
    info["again"] = again
    yield info


def test_export_is_a_valid_scenario(roundtrip: dict[str, Any]) -> None:
    data = yaml.safe_load(roundtrip["text"])
    loader.validate(data, "export")
    scn = loader.load(roundtrip["file"])
    assert scn["name"] == f"{roundtrip['scenario']}-copy"
    assert scn["notes"], "the export says what it left out"


def test_same_nodes(roundtrip: dict[str, Any]) -> None:
    assert roundtrip["copy"]["nodes"] == roundtrip["orig"]["nodes"]


def test_same_vms_placement_devices(roundtrip: dict[str, Any]) -> None:
    orig, copy = roundtrip["orig"]["vms"], roundtrip["copy"]["vms"]
    assert sorted(copy) == sorted(orig)
    for key, want in orig.items():
        assert copy[key] == want, key
    if roundtrip["scenario"] == "three-node":
        assert orig[("default", "pinned")]["nodeSelector"] == {"kubernetes.io/hostname": "node-2"}
        assert orig[("default", "gpu")]["hostDevices"] == ["nvidia.com/GA102GL_A10"]
    else:
        assert orig[("default", "zone-b-01")]["affinity"]


def test_same_volumes_and_replicas(roundtrip: dict[str, Any]) -> None:
    orig, copy = roundtrip["orig"], roundtrip["copy"]
    assert copy["claims"] == orig["claims"]
    assert all(c["longhorn"] is not None for c in orig["claims"].values())
    assert copy["standalone"] == orig["standalone"]
    if roundtrip["scenario"] == "five-node-mixed":
        assert orig["standalone"]["backup-target"]["replicaNodes"] == ["worker-4"]
        deg = orig["claims"][("default", "degraded-disk-0")]["longhorn"]
        assert deg["initialRobustness"] == "degraded"


def test_same_workloads_and_pdbs(roundtrip: dict[str, Any]) -> None:
    orig, copy = roundtrip["orig"], roundtrip["copy"]
    assert orig["pdbs"], "the scenario has a PDB"
    assert copy["pdbs"] == orig["pdbs"]
    assert copy["deployments"] == orig["deployments"]


def test_same_versions_and_settings(roundtrip: dict[str, Any]) -> None:
    orig, copy = roundtrip["orig"], roundtrip["copy"]
    assert copy["installed"] == orig["installed"] == "v1.5.1"
    assert copy["versions"] == orig["versions"] and "v1.6.0" in orig["versions"]
    assert copy["longhorn_settings"] == orig["longhorn_settings"]


def test_export_of_the_copy_is_the_same(roundtrip: dict[str, Any]) -> None:
    first = yaml.safe_load(roundtrip["text"])
    again = roundtrip["again"]
    for key in ("harvester", "nodes", "vms", "workloads", "volumes", "settings", "addons"):
        assert again.get(key) == first.get(key), key


def test_read_only(roundtrip: dict[str, Any]) -> None:
    per_agent = roundtrip["stats"]["by_user_agent_request"]
    mine = per_agent.get("harvester-sim-export") or {}
    assert mine, per_agent.keys()
    verbs = {k.split(" ", 1)[0] for k in mine}
    assert verbs <= {"get", "list"}, mine
    assert not [k for k in mine if "secrets" in k], mine
    others = set(per_agent) - {"harvester-sim-export"}
    assert not others, f"only the export spoke to the API: {others}"
    assert set(roundtrip["stats"]["by_verb"]) <= {"get", "list"}, roundtrip["stats"]["by_verb"]


def test_no_secret_in_output(roundtrip: dict[str, Any]) -> None:
    text = roundtrip["text"]
    assert roundtrip["token"] not in text
    assert roundtrip["url"] not in text
    ca_body = "".join(roundtrip["ca"].splitlines()[1:-1])
    assert ca_body[:40] not in text
    assert "package_update" not in text  # cloud-init user data is not exported
    values = 0
    for s in roundtrip["secrets"]:
        for v in (s.get("data") or {}).values():
            plain = base64.b64decode(v).decode(errors="replace")
            for needle in (v, plain):
                if len(needle) >= 8:
                    values += 1
                    assert needle not in text, _md(s)["name"]
    assert values, "the cluster had Secret values to leak"


# ------------------------------------------------------------------------- bad input
def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = cli.main(argv)
    return rc, capsys.readouterr().err


def _kubeconfig(path: Path, server: str, token: str = "x", ca: str = "",
                context: str = "c") -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca:
        cluster["certificate-authority-data"] = ca
    else:
        cluster["insecure-skip-tls-verify"] = True
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "k", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": "k", "user": "u"}}]}))
    return path


def test_missing_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.yaml"
    rc, err = _run(["export", "--kubeconfig", str(tmp_path / "nope"), "-o", str(out)], capsys)
    assert rc == 2 and "no such file" in err and "nothing written" in err
    assert not out.exists()


def test_kubeconfig_not_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kc = tmp_path / "kc"
    kc.write_text("clusters: [unclosed\n")
    out = tmp_path / "x.yaml"
    rc, err = _run(["export", "--kubeconfig", str(kc), "-o", str(out)], capsys)
    assert rc == 2 and f"kubeconfig {kc}" in err
    assert not out.exists()


def test_unknown_context(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kc = _kubeconfig(tmp_path / "kc", "https://127.0.0.1:1")
    out = tmp_path / "x.yaml"
    rc, err = _run(["export", "--kubeconfig", str(kc), "--context", "prod", "-o", str(out)],
                   capsys)
    assert rc == 2 and "prod" in err
    assert not out.exists()


def test_unreachable(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                     monkeypatch: pytest.MonkeyPatch) -> None:
    # the socket stays bound, never listening, for the whole export: connecting is refused,
    # and neither another server nor an outgoing connection's source port can take the port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        kc = _kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}")
        monkeypatch.setenv("KUBECONFIG", str(kc))  # the usual KUBECONFIG, no --kubeconfig
        out = tmp_path / "x.yaml"
        rc, err = _run(["export", "-o", str(out)], capsys)
    assert rc == 2, err
    assert f"cannot reach the API server https://127.0.0.1:{port} (context c)" in err
    assert "refused" in err.lower()
    assert not out.exists()


@pytest.fixture(scope="module")
def small() -> Iterator[testing.Running]:
    with testing.running("empty:1", speed=1) as sim:
        yield sim


def test_credentials_refused(small: testing.Running, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    ca = base64.b64encode(small.server.ca_pem).decode()
    kc = _kubeconfig(tmp_path / "kc", small.url, token="wrong-token", ca=ca)
    out = tmp_path / "x.yaml"
    rc, err = _run(["export", "--kubeconfig", str(kc), "-o", str(out)], capsys)
    assert rc == 2 and "refused GET" in err and "401" in err, err
    assert "wrong-token" not in err
    assert not out.exists()


def test_api_not_served(small: testing.Running, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.yaml"
    out.write_text("previous\n")
    small.world.client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                              "virtualmachines.kubevirt.io")
    rc, err = _run(["export", "--kubeconfig", str(small.kubeconfig), "-o", str(out)], capsys)
    assert rc == 2, err
    assert "does not serve kubevirt.io/v1 virtualmachines" in err
    assert out.read_text() == "previous\n", "a failed export leaves the file alone"


def test_bad_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kc = _kubeconfig(tmp_path / "kc", "https://127.0.0.1:1")
    rc, err = _run(["export", "--kubeconfig", str(kc), "--name", "My Cluster", "-o",
                    str(tmp_path / "x.yaml")], capsys)
    assert rc == 2 and "--name" in err


def test_settings_addons_and_custom_workloads(tmp_path: Path) -> None:
    """What the built-in scenarios do not have: upgrade-relevant settings and Addons (and
    settings that hold secrets, which stay out), a PDB with its own name and selector over a
    Deployment with its own labels, a StatefulSet, and KubeVirt's migration PDB (left out)."""
    out = tmp_path / "custom.yaml"
    with testing.running("empty:2", speed=1) as orig:
        c = orig.world.client
        hv = "harvesterhci.io/v1beta1"
        c.create({"apiVersion": hv, "kind": "Setting", "metadata": {"name": "upgrade-config"},
                  "value": '{"imagePreloadOption":{"strategy":{"type":"parallel"}}}'})
        c.create({"apiVersion": hv, "kind": "Setting", "metadata": {"name": "ssl-certificates"},
                  "value": '{"privateKey":"-----BEGIN PRIVATE KEY-----SECRETKEYDATA"}'})
        c.create({"apiVersion": hv, "kind": "Addon",
                  "metadata": {"name": "descheduler", "namespace": "kube-system"},
                  "spec": {"enabled": True, "chart": "descheduler", "version": "0.1.0",
                           "repo": "http://harvester-cluster-repo.cattle-system.svc/charts",
                           "valuesContent": "token: hunter2hunter2"}})
        lh = c.get("longhorn.io/v1beta2", "Setting", "replica-replenishment-wait-interval",
                   "longhorn-system")
        lh["value"] = "1800"
        c.update(lh)
        c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
        labels = {"app.kubernetes.io/name": "cart", "tier": "web"}
        c.create({"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "cart", "namespace": "shop"},
                  "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels}, "spec": {
                               "containers": [{"name": "c", "image": "nginx:1",
                                               "resources": {"requests": {"cpu": "250m",
                                                                          "memory": "1Gi"}}}]}}}})
        sel = {"matchLabels": {"app.kubernetes.io/name": "cart"}}
        c.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": "cart-budget", "namespace": "shop"},
                  "spec": {"maxUnavailable": 1, "selector": sel}})
        db = {"app": "db"}
        c.create({"apiVersion": "apps/v1", "kind": "StatefulSet",
                  "metadata": {"name": "db", "namespace": "shop"},
                  "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": db},
                           "template": {"metadata": {"labels": db}, "spec": {
                               "containers": [{"name": "c", "image": "postgres:16"}]}}}})
        c.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": "kubevirt-disruption-budget-abcde", "namespace": "shop",
                               "ownerReferences": [{"apiVersion": "kubevirt.io/v1",
                                                    "kind": "VirtualMachineInstance",
                                                    "name": "vm", "uid": "u-1"}]},
                  "spec": {"minAvailable": 2,
                           "selector": {"matchLabels": {"kubevirt.io/vm": "x"}}}})
        rc = cli.main(["export", "--kubeconfig", str(orig.kubeconfig), "-o", str(out)])
        assert rc == 0
    text = out.read_text()
    assert "SECRETKEYDATA" not in text and "ssl-certificates" not in text
    assert "hunter2" not in text
    scn = yaml.safe_load(text)
    assert scn["settings"]["harvester"]["upgrade-config"]["value"].startswith('{"imagePreload')
    assert scn["settings"]["longhorn"]["replica-replenishment-wait-interval"] == "1800"
    assert scn["addons"] == [{"name": "descheduler", "namespace": "kube-system",
                              "enabled": True, "chart": "descheduler", "version": "0.1.0",
                              "repo": "http://harvester-cluster-repo.cattle-system.svc/charts"}]
    works = {w["name"]: w for w in scn["workloads"]}
    assert works["cart"]["labels"] == labels
    assert works["cart"]["pdb"] == {"name": "cart-budget", "maxUnavailable": 1, "selector": sel}
    assert works["db"]["replicas"] == 2 and "pdb" not in works["db"]
    assert any("StatefulSet shop/db exported as a Deployment" in n for n in scn["notes"])
    assert not any("kubevirt-disruption-budget" in n for n in scn["notes"])
    with testing.running(str(out), speed=1) as copy:
        c = copy.world.client
        assert c.get(hv, "Setting", "upgrade-config")["value"] == \
            scn["settings"]["harvester"]["upgrade-config"]["value"]
        assert c.get("longhorn.io/v1beta2", "Setting", "replica-replenishment-wait-interval",
                     "longhorn-system")["value"] == "1800"
        addon = c.get(hv, "Addon", "descheduler", "kube-system")
        assert addon["spec"]["enabled"] is True and addon["spec"]["valuesContent"] == ""
        pdb = c.get("policy/v1", "PodDisruptionBudget", "cart-budget", "shop")
        assert pdb["spec"]["selector"] == sel and pdb["spec"]["maxUnavailable"] == 1
        dep = c.get("apps/v1", "Deployment", "cart", "shop")
        assert dep["spec"]["selector"] == {"matchLabels": labels}
        assert dep["spec"]["template"]["metadata"]["labels"] == labels


@pytest.mark.parametrize(("given", "want"), [("134217728Ki", "128Gi"), ("4096Mi", "4Gi"),
                                             ("131890436Ki", "131890436Ki"), (0, "0"),
                                             ("1G", "1000000000"), ("2Ti", "2Ti")])
def test_quantities_read_back(given: Any, want: str) -> None:
    assert export.qty(given) == want


@pytest.mark.parametrize(("vm", "error"), [
    ({"name": "a", "placement": {"initialNode": "node-9"}},
     "vms[0].placement.initialNode: unknown node 'node-9'"),
    ({"name": "a", "count": 2, "placement": {"initialNode": "node-1"}},
     "vms[0].placement.initialNode: cannot be set when count > 1"),
    ({"name": "a", "volumes": [{"name": "c"}, {"name": "c"}]},
     "vms[0].volumes[1].name: duplicate claim default/c"),
    ({"name": "a", "volumes": [{"replicaNodes": ["node-1", "nope"]}]},
     "vms[0].volumes[0].replicaNodes[1]: unknown node 'nope'"),
])
def test_new_scenario_fields_refuse_bad_input(vm: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        loader.normalize({"nodes": [{"name": "node", "count": 2}], "vms": [vm]}, "t")
