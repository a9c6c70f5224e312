"""Conformance through kubectl: the simulator answers the kubectl on PATH like an apiserver."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Any

import pytest
import yaml

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.test.example.com
spec:
  group: test.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gdg]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    schema:
      openAPIV3Schema:
        type: object
        description: A gadget for the conformance tests.
        properties:
          spec:
            type: object
            description: What the gadget should be.
            properties:
              size: {type: integer, description: How big the gadget is., default: 1}
              color: {type: string, enum: [red, blue]}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""


@pytest.fixture(scope="module")
def gadget_crd(kubectl: Any) -> str:
    kubectl("apply", "-f", "-", input=CRD)
    kubectl("wait", "--for=condition=Established", "crd/gadgets.test.example.com",
            "--timeout=10s")
    return "gadgets.test.example.com"


def test_get_output_formats(kubectl: Any) -> None:
    out = json.loads(kubectl("get", "nodes", "-o", "json").stdout)
    assert out["kind"] == "List" or out["kind"] == "NodeList"
    names = sorted(i["metadata"]["name"] for i in out["items"])
    assert names == ["node-1", "node-2"]
    doc = yaml.safe_load(kubectl("get", "node", "node-1", "-o", "yaml").stdout)
    assert doc["kind"] == "Node" and doc["metadata"]["name"] == "node-1"
    table = kubectl("get", "nodes").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert table[1].split()[1] == "Ready"
    wide = kubectl("get", "nodes", "-o", "wide").stdout.splitlines()[0]
    assert "INTERNAL-IP" in wide and "CONTAINER-RUNTIME" in wide
    jp = kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").stdout
    assert jp.split() == ["node-1", "node-2"]
    err = kubectl("get", "pod", "nope", "-n", "default", check=False)
    assert err.returncode == 1
    assert 'Error from server (NotFound): pods "nope" not found' in err.stderr


def test_create_label_annotate_patch_delete(kubectl: Any, ns: str, sim: Any) -> None:
    dep = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [
                                  {"name": "app", "image": "nginx:1.27",
                                   "env": [{"name": "A", "value": "1"}]},
                                  {"name": "side", "image": "busybox:1.36"}]}}}}
    assert "deployment.apps/web created" in kubectl("create", "-f", "-",
                                                    input=json.dumps(dep)).stdout
    dup = kubectl("create", "-f", "-", input=json.dumps(dep), check=False)
    assert 'deployments.apps "web" already exists' in dup.stderr
    kubectl("label", "deploy/web", "-n", ns, "tier=front")
    kubectl("annotate", "deploy/web", "-n", ns, "note=hello")
    gen1 = sim.world.client.get("apps/v1", "Deployment", "web", ns)["metadata"]["generation"]
    # strategic merge: containers merge by name, env by name
    kubectl("patch", "deploy/web", "-n", ns, "-p", json.dumps(
        {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "env": [{"name": "B", "value": "2"}]}]}}}}))
    d = sim.world.client.get("apps/v1", "Deployment", "web", ns)
    cs = d["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in cs] == ["app", "side"]
    assert cs[0]["image"] == "nginx:1.27"
    assert {e["name"] for e in cs[0]["env"]} == {"A", "B"}
    assert d["metadata"]["labels"]["tier"] == "front"
    assert d["metadata"]["annotations"]["note"] == "hello"
    assert d["metadata"]["generation"] > gen1
    # merge patch replaces lists whole
    kubectl("patch", "deploy/web", "-n", ns, "--type=merge", "-p", json.dumps(
        {"spec": {"template": {"spec": {"containers": [
            {"name": "only", "image": "nginx:1.28"}]}}}}))
    d = sim.world.client.get("apps/v1", "Deployment", "web", ns)
    assert [c["name"] for c in d["spec"]["template"]["spec"]["containers"]] == ["only"]
    # json patch, and a failing test op is the generic 422
    kubectl("patch", "deploy/web", "-n", ns, "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/replicas", "value": 0},
         {"op": "add", "path": "/metadata/labels/x", "value": "y"}]))
    assert sim.world.client.get("apps/v1", "Deployment", "web", ns)["metadata"]["labels"][
        "x"] == "y"
    bad = kubectl("patch", "deploy/web", "-n", ns, "--type=json", "-p", json.dumps(
        [{"op": "test", "path": "/spec/replicas", "value": 5}]), check=False)
    assert bad.returncode == 1
    assert "the server rejected our request due to an error in our request" in bad.stderr
    # a no-op patch keeps the resourceVersion
    rv = sim.world.client.get("apps/v1", "Deployment", "web", ns)["metadata"]["resourceVersion"]
    out = kubectl("label", "deploy/web", "-n", ns, "tier=front", "--overwrite").stdout
    assert "not labeled" in out or "labeled" in out
    assert sim.world.client.get("apps/v1", "Deployment", "web", ns)["metadata"][
        "resourceVersion"] == rv
    assert 'deployment.apps "web" deleted' in kubectl("delete", "deploy/web", "-n", ns).stdout
    assert sim.world.client.try_get("apps/v1", "Deployment", "web", ns) is None


def test_apply_client_side_and_server_side(kubectl: Any, ns: str, sim: Any) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "cfg", "namespace": ns}, "data": {"a": "1", "b": "2"}}
    assert "configmap/cfg created" in kubectl("apply", "-f", "-",
                                              input=json.dumps(cm)).stdout
    cm["data"] = {"a": "10"}
    assert "configmap/cfg configured" in kubectl("apply", "-f", "-",
                                                 input=json.dumps(cm)).stdout
    live = sim.world.client.get("v1", "ConfigMap", "cfg", ns)
    assert live["data"] == {"a": "10"}  # b removed by the three-way merge
    assert "kubectl.kubernetes.io/last-applied-configuration" in live["metadata"]["annotations"]
    assert "unchanged" in kubectl("apply", "-f", "-", input=json.dumps(cm)).stdout

    ss = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "ssa", "namespace": ns}, "data": {"k": "v1"}}
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", "-",
                                           input=json.dumps(ss)).stdout
    mf = sim.world.client.get("v1", "ConfigMap", "ssa", ns)["metadata"]["managedFields"]
    assert mf[0]["manager"] == "kubectl" and mf[0]["operation"] == "Apply"
    kubectl("patch", "cm/ssa", "-n", ns, "--type=merge", "-p", '{"data":{"k":"patched"}}')
    ss["data"] = {"k": "v2"}
    conflict = kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ss), check=False)
    assert conflict.returncode == 1
    assert 'conflict with "kubectl-patch"' in conflict.stderr
    assert ".data.k" in conflict.stderr
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(ss))
    assert sim.world.client.get("v1", "ConfigMap", "ssa", ns)["data"] == {"k": "v2"}


def test_crd_table_explain_and_cr_patches(kubectl: Any, ns: str, gadget_crd: str,
                                          sim: Any) -> None:
    res = kubectl("api-resources", "--api-group=test.example.com").stdout
    assert "gadgets" in res and "gdg" in res
    g = {"apiVersion": "test.example.com/v1", "kind": "Gadget",
         "metadata": {"name": "g1", "namespace": ns}, "spec": {"color": "red"}}
    kubectl("apply", "-f", "-", input=json.dumps(g))
    assert sim.world.client.get("test.example.com/v1", "Gadget", "g1", ns)["spec"]["size"] == 1
    lines = kubectl("get", "gdg", "-n", ns).stdout.splitlines()
    assert lines[0].split() == ["NAME", "SIZE", "READY"]
    assert lines[1].split() == ["g1", "1"]
    smp = kubectl("patch", "gadget/g1", "-n", ns, "-p", '{"spec":{"size":2}}', check=False)
    assert smp.returncode == 1 and "strategic-merge-patch+json is not supported" in smp.stderr
    kubectl("patch", "gadget/g1", "-n", ns, "--type=merge", "-p", '{"spec":{"size":3}}')
    bad = kubectl("patch", "gadget/g1", "-n", ns, "--type=merge", "-p",
                  '{"spec":{"size":"big"}}', check=False)
    assert 'The Gadget "g1" is invalid' in bad.stderr
    g["spec"]["bogus"] = True
    strict = kubectl("apply", "-f", "-", input=json.dumps(g), check=False)
    assert 'unknown field "spec.bogus"' in strict.stderr
    explain = kubectl("explain", "gadgets.spec").stdout
    assert "What the gadget should be." in explain and "size" in explain
    assert "How big the gadget is." in kubectl("explain", "gadget.spec.size").stdout


def test_cordon_uncordon(kubectl: Any, sim: Any) -> None:
    assert "node/node-1 cordoned" in kubectl("cordon", "node-1").stdout
    assert sim.world.client.get("v1", "Node", "node-1")["spec"]["unschedulable"] is True
    assert "Ready,SchedulingDisabled" in kubectl("get", "node", "node-1").stdout
    assert "node/node-1 uncordoned" in kubectl("uncordon", "node-1").stdout
    assert not sim.world.client.get("v1", "Node", "node-1")["spec"].get("unschedulable")


def _pod(name: str, ns: str, node: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox:1.36"}]}}


def _pdb_status(sim: Any, ns: str, allowed: int) -> None:
    """The budget's status as the test wants it; read-modify-write again on a conflict (the
    simulated disruption controller may write the status between the read and the update)."""
    def fn(pdb: dict[str, Any]) -> dict[str, Any]:
        pdb["status"] = {"observedGeneration": pdb["metadata"]["generation"],
                         "disruptionsAllowed": allowed, "currentHealthy": 2,
                         "desiredHealthy": 2 - allowed, "expectedPods": 2}
        return pdb

    sim.world.client.modify("policy/v1", "PodDisruptionBudget", "guard", fn, ns,
                            subresource="status")


def test_drain_blocked_by_pdb_then_allowed(kubectl: Any, ns: str, sim: Any) -> None:
    c = sim.world.client
    for i in (1, 2):
        c.create(_pod(f"d{i}", ns, "node-2", {"app": "drain"}))
    c.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "guard", "namespace": ns},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "drain"}}}})
    _pdb_status(sim, ns, 0)
    try:
        blocked = kubectl("drain", "node-2", "--force", "--ignore-daemonsets",
                          "--delete-emptydir-data", "--pod-selector=app=drain",
                          "--timeout=3s", check=False)
        assert blocked.returncode != 0
        assert "Cannot evict pod as it would violate the pod's disruption budget" in \
            blocked.stdout + blocked.stderr
        assert c.get("v1", "Node", "node-2")["spec"]["unschedulable"] is True
        assert c.try_get("v1", "Pod", "d1", ns) is not None
        c.delete("policy/v1", "PodDisruptionBudget", "guard", ns)
        ok = kubectl("drain", "node-2", "--force", "--ignore-daemonsets",
                     "--delete-emptydir-data", "--pod-selector=app=drain",
                     "--grace-period=0", "--timeout=20s")
        assert "node/node-2 drained" in ok.stdout
        assert c.try_get("v1", "Pod", "d1", ns) is None and c.try_get("v1", "Pod", "d2",
                                                                        ns) is None
    finally:
        kubectl("uncordon", "node-2")


def test_wait_for_condition_and_jsonpath(kubectl: Any, ns: str, gadget_crd: str,
                                         sim: Any) -> None:
    c = sim.world.client
    c.create({"apiVersion": "test.example.com/v1", "kind": "Gadget",
              "metadata": {"name": "w", "namespace": ns}, "spec": {"size": 1}})

    def later() -> None:
        time.sleep(0.7)
        g = c.get("test.example.com/v1", "Gadget", "w", ns)
        g["status"] = {"phase": "Done", "conditions": [{"type": "Ready", "status": "True"}]}
        c.update_status(g)

    t = threading.Thread(target=later)
    t.start()
    out = kubectl("wait", "--for=condition=Ready", "gadget/w", "-n", ns, "--timeout=15s")
    t.join()
    assert "gadget.test.example.com/w condition met" in out.stdout
    out = kubectl("wait", "--for=jsonpath={.status.phase}=Done", "gadget/w", "-n", ns,
                  "--timeout=5s")
    assert "condition met" in out.stdout
    timeout = kubectl("wait", "--for=jsonpath={.status.phase}=Never", "gadget/w", "-n", ns,
                      "--timeout=1s", check=False)
    assert timeout.returncode != 0 and "timed out" in timeout.stderr


def test_get_watch_streams_changes(sim: Any, ns: str) -> None:
    import os
    import shutil

    env = dict(os.environ)
    env.update(sim.env)
    c = sim.world.client
    c.create({"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "sentinel", "namespace": ns}})
    proc = subprocess.Popen([shutil.which("kubectl") or "kubectl", "get", "configmaps", "-n", ns,
                             "--watch", "--output-watch-events", "--request-timeout=60s"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")),
                              daemon=True)   # type: ignore[union-attr]
    reader.start()

    def seen(what: str) -> bool:   # no sleeps sized for a fast machine: wait for the output
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(what in ln for ln in list(lines)):
            time.sleep(0.05)
        return any(what in ln for ln in list(lines))

    try:
        assert seen("sentinel"), lines   # the initial list is out: the watch is open
        c.create({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "watched", "namespace": ns}, "data": {"a": "1"}})
        c.patch("v1", "ConfigMap", "watched", {"data": {"b": "2"}}, ns)
        c.delete("v1", "ConfigMap", "watched", ns)
        seen("DELETED")
    finally:
        proc.terminate()
    proc.communicate(timeout=10)
    reader.join(timeout=10)
    out = "".join(lines)
    events = [ln.split()[0] for ln in out.splitlines() if "watched" in ln]
    assert events == ["ADDED", "MODIFIED", "DELETED"], out


def test_api_resources_and_short_names(kubectl: Any) -> None:
    out = kubectl("api-resources").stdout
    rows = {ln.split()[0]: ln for ln in out.splitlines()[1:]}
    assert " po " in rows["pods"] and " deploy " in rows["deployments"]
    assert "policy/v1" in rows["poddisruptionbudgets"]
    assert "customresourcedefinitions" in rows
    assert kubectl("get", "po", "-A", "-o", "name").returncode == 0
