"""Every scenario fault kind, injected through a scenario and observed from outside.

Each test starts a small world with ``testing.running(scenario)`` whose ``faults:`` list holds
the kind under test (plus, where it says something, a twin fault on another target or
trigger that must not fire), drives it through the HTTPS API (or the release server's HTTP),
and checks the effect a client would see and that ``world.faults.fired`` records it.
The table "fault kind -> effect -> test" is in ``simulator/docs/faults.md``.

Only what has no Kubernetes API is done in-process: a node reboot (``kubelet.reboot``, what
the upgrade's post-drain job asks for) — the outcome is still read through the API.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from harvester_sim import testing
from harvester_sim.faults import CONTEXT_KEYS, Faults
from harvester_sim.scenarios import loader
from harvester_sim.testing import wait_for

SPEED = 300.0
TOOLKIT = "rancher/harvester-upgrade-toolkit:v1.6.0"
KV = "/apis/kubevirt.io/v1/namespaces/default"
LH = "/apis/longhorn.io/v1beta2/namespaces/longhorn-system"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Http:
    """A bare HTTPS client of the simulated API server (admin token)."""

    def __init__(self, sim: testing.Running) -> None:
        self.sim = sim
        self.port = sim.server.port
        with tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False) as f:
            f.write(sim.server.ca_pem)
        self.ctx = ssl.create_default_context()
        self.ctx.load_verify_locations(f.name)

    def conn(self, timeout: float = 30) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx,
                                           timeout=timeout)

    def headers(self, ctype: str | None = None) -> dict[str, str]:
        h = {"Authorization": f"Bearer {self.sim.token}", "Accept": "application/json"}
        if ctype:
            h["Content-Type"] = ctype
        return h

    def call(self, method: str, path: str, body: Any = None,
             ctype: str = "application/json") -> Reply:
        c = self.conn()
        data = None if body is None else json.dumps(body).encode()
        c.request(method, path, body=data, headers=self.headers(ctype if data else None))
        r = c.getresponse()
        out = Reply(r.status, dict(r.getheaders()), r.read())
        c.close()
        return out

    def many(self, method: str, path: str, n: int) -> list[Reply]:
        """``n`` requests over one kept-alive connection."""
        c = self.conn()
        out = []
        for _ in range(n):
            c.request(method, path, headers=self.headers())
            r = c.getresponse()
            out.append(Reply(r.status, dict(r.getheaders()), r.read()))
        c.close()
        return out

    def get(self, path: str) -> Any:
        r = self.call("GET", path)
        assert r.status == 200, (path, r.status, r.body[:300])
        return r.json()

    def create(self, path: str, body: dict[str, Any]) -> Any:
        r = self.call("POST", path, body)
        assert r.status == 201, (path, r.status, r.body[:300])
        return r.json()

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        r = self.call("PATCH", path, body, "application/merge-patch+json")
        assert r.status == 200, (path, r.status, r.body[:300])
        return r.json()


@pytest.fixture
def run() -> Iterator[Callable[..., tuple[testing.Running, Http]]]:
    """``run(faults, nodes=2, **scenario)`` -> (sim, http); stopped after the test."""
    stack: list[Any] = []

    def start(faults: list[dict[str, Any]], nodes: int = 2, speed: float = SPEED,
              **extra: Any) -> tuple[testing.Running, Http]:
        scn = {"name": "faults", "seed": 5, "nodes": [{"name": "node", "count": nodes}],
               "faults": faults, **extra}
        cm = testing.running(scn, speed=speed)
        sim = cm.__enter__()
        stack.append(cm)
        return sim, Http(sim)

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def fired(sim: testing.Running, kind: str) -> list[dict[str, Any]]:
    return [f for f in sim.world.faults.fired if f["kind"] == kind]


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == ctype), {})


# ---------------------------------------------------------------------------- the engine
class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


def test_engine_target_trigger_times_probability_and_fired() -> None:
    clock = FakeClock()
    f = Faults(clock, [  # type: ignore[arg-type]
        {"kind": "pod_fail", "target": {"node": "n1"}, "times": 2},
        {"kind": "job_fail", "target": {"job": ["a", "b"]}, "trigger": {"at": 100}},
        {"kind": "node_never_returns", "trigger": {"on": {"event": "go", "node": "n2"}}},
        {"kind": "api_error", "trigger": {"probability": 0.25}},
        {"kind": "api_conflict", "fraction": 0.5},
        {"kind": "watch_cut", "target": {"resource": "*"}},
    ], seed=1)
    assert f.match("pod_fail", node="n2") is None                   # other target
    assert f.match("pod_fail", pod="x") is None                     # key not in the context
    assert f.match("pod_fail", node="n1") and f.match("pod_fail", node="n1")
    assert f.match("pod_fail", node="n1") is None                   # times: 2 used up
    assert f.match("job_fail", job="a") is None                     # before the trigger time
    clock.t = 100
    assert f.match("job_fail", job="a") and f.match("job_fail", job="b")
    assert f.match("job_fail", job="c") is None                     # not in the list
    assert f.match("node_never_returns", node="n2") is None         # not armed yet
    f.notify("go", node="n1")                                       # wrong event context
    assert f.match("node_never_returns", node="n2") is None
    f.notify("go", node="n2")
    assert f.match("node_never_returns", node="n2") is not None
    hits = sum(f.match("api_error") is not None for _ in range(2000))
    assert 400 < hits < 600                                         # probability 0.25
    hits = sum(f.match("api_conflict") is not None for _ in range(2000))
    assert 900 < hits < 1100                                        # fraction 0.5
    assert f.match("watch_cut", resource="pods") is not None        # "*"
    assert f.match("watch_cut", when=lambda s: False) is None       # caller's condition
    kinds = [e["kind"] for e in f.fired]
    assert kinds.count("pod_fail") == 2 and kinds.count("job_fail") == 2
    assert f.fired[0] == {"kind": "pod_fail", "t": 0.0, "node": "n1"}
    assert {"kind": "job_fail", "t": 100.0, "job": "b"} in f.fired


def test_every_kind_has_a_test_here_or_is_listed() -> None:
    """The table in the docs and this file stay complete when a kind is added."""
    elsewhere = {"cert_near_expiry": "test_cert_fault.py"}
    text = open(__file__).read()
    for kind in CONTEXT_KEYS:
        assert kind in elsewhere or f"def test_{kind}" in text or f'"{kind}"' in text, kind
    doc = (Path(__file__).parents[1] / "docs" / "faults.md").read_text()
    for kind in CONTEXT_KEYS:
        assert f"`{kind}`" in doc, kind
    assert loader.schema()["$defs"]["fault"]["properties"]["kind"]["enum"]


# ------------------------------------------------------------------------------ KubeVirt
def _vmi_node(h: Http, vm: str) -> str:
    return str(wait_for(lambda: (h.call("GET", f"{KV}/virtualmachineinstances/{vm}").json()
                                 .get("status") or {}).get("nodeName")
                        if h.call("GET", f"{KV}/virtualmachineinstances/{vm}").status == 200
                        and (h.get(f"{KV}/virtualmachineinstances/{vm}").get("status") or {})
                        .get("phase") == "Running" else None, what=f"VMI {vm} running"))


def _migrate(h: Http, name: str, vm: str) -> None:
    h.create(f"{KV}/virtualmachineinstancemigrations", {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"vmiName": vm}})


def _mig(h: Http, name: str) -> dict[str, Any]:
    return h.get(f"{KV}/virtualmachineinstancemigrations/{name}")  # type: ignore[no-any-return]


def _phase(h: Http, name: str) -> str:
    return str((_mig(h, name).get("status") or {}).get("phase") or "")


VMS = [{"name": "v1", "memory": "1Gi", "cpu": 1, "volumes": [{"replicas": 2}]},
       {"name": "v2", "memory": "1Gi", "cpu": 1, "volumes": [{"replicas": 2}]}]


def test_migration_fail(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "migration_fail", "target": {"vm": "default/v1"}, "times": 1,
                   "message": "injected: target domain error"}], vms=VMS)
    src = _vmi_node(h, "v1")
    _vmi_node(h, "v2")
    _migrate(h, "m1", "v1")
    wait_for(lambda: _phase(h, "m1") == "Failed", what="migration Failed")
    st = _mig(h, "m1")["status"]
    assert condition(_mig(h, "m1"), "Failed")["message"] == "injected: target domain error"
    vmi = h.get(f"{KV}/virtualmachineinstances/v1")["status"]
    assert vmi["nodeName"] == src and vmi["migrationState"]["failed"] is True
    assert vmi["migrationState"]["failureReason"] == "injected: target domain error"
    assert st["phase"] == "Failed"
    # times: 1 -> the next migration of v1 succeeds; v2 (other target) is never affected
    _migrate(h, "m2", "v1")
    _migrate(h, "m3", "v2")
    wait_for(lambda: _phase(h, "m2") == "Succeeded" and _phase(h, "m3") == "Succeeded",
             what="later migrations succeed")
    assert [(f["vm"], f["source"]) for f in fired(sim, "migration_fail")] == [("default/v1",
                                                                              src)]


def test_migration_hang(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    # armed when a migration of v1 starts ("on" trigger): v2's migration before is unaffected
    sim, h = run([{"kind": "migration_hang", "times": 1,
                   "trigger": {"on": {"event": "migration_started", "vm": "default/v1"}}}],
                 vms=VMS)
    _vmi_node(h, "v1")
    _vmi_node(h, "v2")
    _migrate(h, "m0", "v2")
    wait_for(lambda: _phase(h, "m0") == "Succeeded", what="unaffected migration")
    _migrate(h, "m1", "v1")
    wait_for(lambda: _phase(h, "m1") == "Running", what="migration Running")
    t = sim.world.timings
    normal = t.migration_overhead_s + 1024 / t.migration_bandwidth_mib_s
    time.sleep(10 * normal / SPEED + 0.2)  # ten times as long as it would take
    assert _phase(h, "m1") == "Running"
    assert h.get(f"{KV}/virtualmachines/v1")["status"]["printableStatus"] == "Migrating"
    assert [f["vm"] for f in fired(sim, "migration_hang")] == ["default/v1"]
    # deleting the migration object aborts it
    assert h.call("DELETE", f"{KV}/virtualmachineinstancemigrations/m1").status == 200
    wait_for(lambda: h.get(f"{KV}/virtualmachines/v1")["status"]["printableStatus"]
             == "Running", what="VM Running again")


# -------------------------------------------------------------------------------- kubelet
def _ready(h: Http, node: str) -> str:
    return str(condition(h.get(f"/api/v1/nodes/{node}"), "Ready").get("status"))


def test_node_never_returns(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "node_never_returns", "target": {"node": "node-1"}}])
    kubelet = sim.world.controllers["kubelet"]
    assert kubelet.reboot("node-1") and kubelet.reboot("node-2")
    wait_for(lambda: _ready(h, "node-1") == "Unknown", what="node-1 NotReady")
    wait_for(lambda: _ready(h, "node-2") == "True", what="node-2 back from its reboot")
    time.sleep(2 * sim.world.timings.reboot_s / SPEED)  # twice the reboot time
    assert _ready(h, "node-1") == "Unknown"
    assert [f["node"] for f in fired(sim, "node_never_returns")] == ["node-1"]
    r = h.call("GET", "/api/v1/nodes/node-1/proxy/healthz")
    assert r.status == 502  # the kubelet does not answer either
    # the operator repairs it: the same reboot completes (no second node_reboot), on the OS
    # the reboot was to boot
    assert sim.world.faults.clear("node_never_returns") == 1
    kubelet.repair("node-1")
    wait_for(lambda: _ready(h, "node-1") == "True", what="node-1 back after its repair")
    events = sim.world.timeline.snapshot()
    assert [e["node"] for e in events if e["event"] == "node_reboot"] == ["node-1", "node-2"]
    assert [e["node"] for e in events if e["event"] == "node_repaired"] == ["node-1"]
    kubelet.repair("node-2")   # not lost: nothing happens
    assert [e["node"] for e in sim.world.timeline.snapshot()
            if e["event"] == "node_repaired"] == ["node-1"]


# a toolkit-image program that ends by itself: the image-cleanup script with nothing to remove
_QUICK = ('CRICTL="$HOST_DIR/$(readlink $HOST_DIR/var/lib/rancher/rke2/bin)/crictl"\n'
          'for i in $IMAGES; do "$CRICTL" rmi "$i" || true; done\n')


def _pod(name: str, node: str, args: list[str] | None = None) -> dict[str, Any]:
    """``args``: an ``upgrade_node.sh`` node program (with the env it reads; it then waits for
    an upgrade repo no test provides); none: the quick script."""
    ctr: dict[str, Any] = {"name": "main", "image": TOOLKIT, "command": ["sh", "-c", _QUICK]}
    if args:
        ctr = {"name": "main", "image": TOOLKIT, "command": ["upgrade_node.sh"], "args": args,
               "env": [{"name": "HARVESTER_UPGRADEPLAN_NAME", "value": "p"},
                       {"name": "HARVESTER_UPGRADE_NODE_NAME", "value": node}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [ctr]}}


def _job(name: str, node: str, args: list[str] | None = None) -> dict[str, Any]:
    pod = _pod(name, node, args)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"metadata": {}, "spec": pod["spec"]}}}


def _pod_phase(h: Http, name: str) -> str:
    return str((h.get(f"/api/v1/namespaces/default/pods/{name}").get("status") or {})
               .get("phase") or "")


def _job_cond(h: Http, name: str) -> str:
    job = h.get(f"/apis/batch/v1/namespaces/default/jobs/{name}")
    for ctype in ("Complete", "Failed"):
        if condition(job, ctype).get("status") == "True":
            return f"{ctype}/{condition(job, ctype).get('reason', '')}"
    return ""


def _job_pod(h: Http, job: str) -> dict[str, Any]:
    pods = h.get(f"/api/v1/namespaces/default/pods?labelSelector=job-name%3D{job}")["items"]
    assert len(pods) == 1, pods
    return pods[0]  # type: ignore[no-any-return]


def _log(h: Http, pod: str) -> str:
    r = h.call("GET", f"/api/v1/namespaces/default/pods/{pod}/log")
    assert r.status == 200, r.body
    return r.body.decode()


def test_pod_fail(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "pod_fail", "target": {"pod": "boom"}, "exit_code": 3,
                   "message": "injected crash"}])
    h.create("/api/v1/namespaces/default/pods", _pod("boom", "node-1"))
    h.create("/api/v1/namespaces/default/pods", _pod("fine", "node-2"))
    wait_for(lambda: _pod_phase(h, "boom") == "Failed", what="boom Failed")
    wait_for(lambda: _pod_phase(h, "fine") == "Succeeded", what="fine Succeeded")
    st = h.get("/api/v1/namespaces/default/pods/boom")["status"]["containerStatuses"][0]
    assert st["state"]["terminated"]["exitCode"] == 3
    assert "injected crash" in _log(h, "boom")
    assert [f["pod"] for f in fired(sim, "pod_fail")] == ["boom"]


@pytest.mark.parametrize("kind", ["job_fail", "node_job_fail"])
def test_job_fail_and_node_job_fail(run: Callable[..., tuple[testing.Running, Http]],
                                    kind: str) -> None:
    # job_fail: the kubelet fails the Job's container; node_job_fail: the toolkit's node
    # program (pre-drain here) exits 1 - both on node-1 only
    target = {"node": "node-1"} if kind == "job_fail" else {"node": "node-1",
                                                            "program": "pre-drain"}
    sim, h = run([{"kind": kind, "target": target}])
    h.create("/apis/batch/v1/namespaces/default/jobs", _job("bad", "node-1", ["pre-drain"]))
    h.create("/apis/batch/v1/namespaces/default/jobs", _job("good", "node-2"))
    wait_for(lambda: _job_cond(h, "bad") == "Failed/BackoffLimitExceeded", what="Job Failed")
    wait_for(lambda: _job_cond(h, "good") == "Complete/CompletionsReached", what="Complete")
    pod = _job_pod(h, "bad")
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    log = _log(h, pod["metadata"]["name"])
    assert "Traceback" not in log, log
    assert ("simulated failure (exit code 1)" if kind == "job_fail" else
            "pre-drain: injected failure") in log, log
    got = fired(sim, kind)
    assert len(got) == 1 and got[0]["node"] == "node-1" and got[0]["job"] == "bad"


@pytest.mark.parametrize("kind", ["job_hang", "node_job_hang"])
def test_job_hang_and_node_job_hang(run: Callable[..., tuple[testing.Running, Http]],
                                    kind: str) -> None:
    sim, h = run([{"kind": kind, "target": {"job": "stuck"}}])
    h.create("/apis/batch/v1/namespaces/default/jobs", _job("stuck", "node-1", ["pre-drain"]))
    h.create("/apis/batch/v1/namespaces/default/jobs", _job("done", "node-2"))
    wait_for(lambda: _job_cond(h, "done") == "Complete/CompletionsReached", what="Complete")
    wait_for(lambda: _job_pod(h, "stuck")["status"].get("phase") == "Running", what="Running")
    time.sleep(300 / SPEED)  # five simulated minutes
    assert _job_cond(h, "stuck") == ""
    pod = _job_pod(h, "stuck")
    assert pod["status"]["phase"] == "Running"
    assert h.get("/apis/batch/v1/namespaces/default/jobs/stuck")["status"]["active"] == 1
    # it hung before doing anything: no drain taint on node-1
    taints = {n: [t["key"] for t in h.get(f"/api/v1/nodes/{n}")["spec"].get("taints") or []]
              for n in ("node-1", "node-2")}
    assert not any("drain" in k for k in taints["node-1"]), taints
    if kind == "node_job_hang":
        assert "pre-drain: hanging" in _log(h, pod["metadata"]["name"])
    assert [f["job"] for f in fired(sim, kind)] == ["stuck"]


def _stats(h: Http, node: str) -> dict[str, Any]:
    return h.get(f"/api/v1/nodes/{node}/proxy/stats/summary")  # type: ignore[no-any-return]


def test_disk_nearly_full(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "disk_nearly_full", "target": {"node": "node-1"}, "percent": 95}])
    full, other = _stats(h, "node-1"), _stats(h, "node-2")
    fs, imagefs = full["node"]["fs"], full["node"]["runtime"]["imageFs"]
    assert fs["usedBytes"] / fs["capacityBytes"] >= 0.95
    assert fs["availableBytes"] == fs["capacityBytes"] - fs["usedBytes"]
    # one disk: the image filesystem has the same capacity and free space (its usedBytes is
    # what the images take, as the kubelet reports it)
    assert imagefs["availableBytes"] / imagefs["capacityBytes"] <= 0.05
    fs2 = other["node"]["fs"]
    assert fs2["usedBytes"] / fs2["capacityBytes"] < 0.5
    wait_for(lambda: condition(h.get("/api/v1/nodes/node-1"), "DiskPressure")
             .get("status") == "True", what="DiskPressure")
    assert condition(h.get("/api/v1/nodes/node-2"), "DiskPressure")["status"] == "False"
    assert [f["node"] for f in fired(sim, "disk_nearly_full")] == ["node-1"]


def test_disk_nearly_full_default_percent(
        run: Callable[..., tuple[testing.Running, Http]]) -> None:
    _, h = run([{"kind": "disk_nearly_full", "target": {"node": "node-2"}}], nodes=2)
    fs = _stats(h, "node-2")["node"]["fs"]
    assert 0.89 < fs["usedBytes"] / fs["capacityBytes"] < 0.91  # default 90 %
    # 10 % free is not yet below the simulated kubelet's 10 % DiskPressure threshold
    assert condition(h.get("/api/v1/nodes/node-2"), "DiskPressure")["status"] == "False"


# -------------------------------------------------------------------------------- Longhorn
def _volume_of(h: Http, pvc: str) -> dict[str, Any]:
    pv = h.get(f"/api/v1/namespaces/default/persistentvolumeclaims/{pvc}")["spec"]["volumeName"]
    return h.get(f"{LH}/volumes/{pv}")  # type: ignore[no-any-return]


def test_volume_degraded(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    vms = [{"name": "v1", "memory": "1Gi", "cpu": 1}, {"name": "v2", "memory": "1Gi", "cpu": 1}]
    sim, h = run([{"kind": "volume_degraded", "target": {"pvc": "v1-disk-0"}, "times": 1}],
                 nodes=3, vms=vms)
    wait_for(lambda: _volume_of(h, "v1-disk-0")["status"]["robustness"] == "degraded",
             what="v1's volume degraded")
    vol = _volume_of(h, "v1-disk-0")
    name = vol["metadata"]["name"]
    reps = h.get(f"{LH}/replicas?labelSelector=longhornvolume%3D{name}")["items"]
    assert sum(1 for r in reps if r["spec"].get("failedAt")) == 1
    assert _volume_of(h, "v2-disk-0")["status"]["robustness"] == "healthy"
    assert [f["pvc"] for f in fired(sim, "volume_degraded")] == ["v1-disk-0"]


def test_replica_lost(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    """One replica process dies: the volume is degraded, then Longhorn reuses the replica
    (rebuilt in place, same name) and the volume is healthy again."""
    vms = [{"name": "v1", "memory": "1Gi", "cpu": 1}, {"name": "v2", "memory": "1Gi", "cpu": 1}]
    sim, h = run([{"kind": "replica_lost", "target": {"pvc": "v1-disk-0", "node": "node-2"},
                   "times": 1}], nodes=3, vms=vms)
    wait_for(lambda: fired(sim, "replica_lost"), what="the fault")
    name = _volume_of(h, "v1-disk-0")["metadata"]["name"]
    failed = [e for e in sim.world.timeline.snapshot() if e.get("event") == "replica_failed"
              and e.get("volume") == name]
    assert [e["node"] for e in failed] == ["node-2"]
    assert _volume_of(h, "v2-disk-0")["status"]["robustness"] == "healthy"
    wait_for(lambda: _volume_of(h, "v1-disk-0")["status"]["robustness"] == "healthy",
             what="v1's volume rebuilt", timeout=30)
    reps = h.get(f"{LH}/replicas?labelSelector=longhornvolume%3D{name}")["items"]
    assert sorted(r["spec"]["nodeID"] for r in reps) == ["node-1", "node-2", "node-3"]
    assert not any(r["spec"].get("failedAt") for r in reps)
    assert [(f["pvc"], f["node"]) for f in fired(sim, "replica_lost")] == [("v1-disk-0",
                                                                             "node-2")]


# ------------------------------------------------------------------------------- releases
def _release_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - loopback
            return int(r.status), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


RELEASES = {"harvester": {"installed": "v1.5.1", "available": ["v1.6.0"]}}


@pytest.mark.parametrize("kind", ["image_download_corrupt", "image_download_slow",
                                  "image_download_404", "image_download_cut"])
def test_image_download(run: Callable[..., tuple[testing.Running, Http]], kind: str) -> None:
    params: dict[str, Any] = {"image_download_slow": {"seconds": 2000},
                              "image_download_cut": {"percent": 30}}.get(kind, {})
    sim, _ = run([{"kind": kind, "target": {"version": "v1.6.0"}, "times": 1, **params}],
                 nodes=1, speed=1000, **RELEASES)
    srv = sim.world.extras["release_server"]
    url = srv.url_for("v1.6.0")
    iso = srv.iso_bytes("v1.6.0")
    sums = url + ".sha512"
    t0 = time.monotonic()
    if kind == "image_download_cut":
        with pytest.raises(http.client.IncompleteRead) as exc:
            _release_get(url)
        assert len(exc.value.partial) == int(len(iso) * 0.30)
    else:
        status, body = _release_get(url)
        took = time.monotonic() - t0
        if kind == "image_download_404":
            assert status == 404
            assert _release_get(sums)[0] == 200  # files: iso (default): the checksum is there
        elif kind == "image_download_corrupt":
            assert status == 200 and len(body) == len(iso)
            want = _release_get(sums)[1].decode().split()[0]
            assert hashlib.sha512(body).hexdigest() != want
            assert hashlib.sha512(iso).hexdigest() == want
        else:  # slow: the whole ISO in 2000 simulated seconds = 2 s at speed 1000
            assert status == 200 and body == iso
            assert 1.9 < took < 10, took
    # times: 1 -> the next download is whole and at the base rate (~66 simulated s here)
    t1 = time.monotonic()
    status, body = _release_get(url)
    assert status == 200 and body == iso and time.monotonic() - t1 < 1.5
    got = fired(sim, kind)
    assert [(f["version"], f["file"]) for f in got] == [("v1.6.0", "iso")]


def test_image_download_404_files_all_hides_the_checksum(
        run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, _ = run([{"kind": "image_download_404", "target": {"version": "v1.6.0"},
                   "files": "all", "times": 2},
                  {"kind": "image_download_corrupt", "target": {"version": "v9.9.9"}}],
                 nodes=1, speed=1000, **RELEASES)
    url = sim.world.extras["release_server"].url_for("v1.6.0")
    assert _release_get(url + ".sha512")[0] == 404
    assert _release_get(url)[0] == 404
    assert _release_get(url + ".sha512")[0] == 200  # times: 2 spent
    assert [f["file"] for f in fired(sim, "image_download_404")] == ["sha512", "iso"]
    assert not fired(sim, "image_download_corrupt")


# ----------------------------------------------------------------------------- API server
def test_api_error(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "api_error", "target": {"resource": "configmaps"}, "fraction": 0.5,
                   "code": 503},
                  {"kind": "api_error", "target": {"resource": "secrets"},
                   "trigger": {"at": 1e9}},                      # not yet
                  {"kind": "api_error", "target": {"resource": "services"}, "times": 2}],
                 nodes=1)
    codes = h.many("GET", "/api/v1/namespaces/default/configmaps", 100)
    bad = [r for r in codes if r.status != 200]
    assert 30 <= len(bad) <= 70, len(bad)
    assert {r.status for r in bad} == {503}
    st = bad[0].json()
    assert st["kind"] == "Status" and st["status"] == "Failure" and st["code"] == 503
    assert st["reason"] == "ServiceUnavailable"
    assert all(h.call("GET", "/api/v1/namespaces/default/secrets").status == 200
               for _ in range(10))
    svc = [h.call("GET", "/api/v1/namespaces/default/services").status for _ in range(4)]
    assert svc == [500, 500, 200, 200]
    assert sim.world.client.list("v1", "ConfigMap", "default") is not None  # in-process fine
    assert len(fired(sim, "api_error")) == len(bad) + 2
    assert sim.server.stats()["faults_injected"]["api_error"] == len(bad) + 2


def test_api_latency(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "api_latency", "target": {"resource": "configmaps"},
                   "seconds": 0.4}], nodes=1)

    def timed(path: str) -> float:
        t0 = time.monotonic()
        assert h.call("GET", path).status == 200
        return time.monotonic() - t0

    slow = [timed("/api/v1/namespaces/default/configmaps") for _ in range(3)]
    fast = [timed("/api/v1/namespaces/default/secrets") for _ in range(3)]
    assert min(slow) >= 0.4, slow
    assert min(fast) < 0.3, fast
    assert len(fired(sim, "api_latency")) == 3


def test_api_conflict(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "api_conflict", "target": {"resource": "configmaps"},
                   "times": 1}], nodes=1)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"},
          "data": {"a": "1"}}
    assert h.call("GET", "/api/v1/namespaces/default/configmaps").status == 200  # reads fine
    # a create never gets the generic conflict (only AlreadyExists, for a name in use)
    h.create("/api/v1/namespaces/default/configmaps", cm)
    patch = {"data": {"a": "2"}}
    r = h.call("PATCH", "/api/v1/namespaces/default/configmaps/c1", patch,
               ctype="application/merge-patch+json")
    assert r.status == 409
    st = r.json()
    assert st["kind"] == "Status" and st["reason"] == "Conflict" and st["code"] == 409
    assert "configmaps" in st["message"]
    r = h.call("PATCH", "/api/v1/namespaces/default/configmaps/c1", patch,
               ctype="application/merge-patch+json")
    assert r.status == 200   # the retry goes through (times: 1)
    assert [(f["verb"], f["resource"]) for f in fired(sim, "api_conflict")] == [
        ("patch", "configmaps")]


class Watch:
    """A raw watch stream: ``events()`` yields until the server ends or cuts it."""

    def __init__(self, h: Http, path: str, rv: str) -> None:
        self.conn = h.conn(timeout=10)
        self.conn.request("GET", f"{path}?watch=1&resourceVersion={quote(rv)}",
                          headers=h.headers())
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200

    def next(self) -> dict[str, Any] | None:
        """The next event, or None when the stream ended (cut: no final chunk)."""
        try:
            line = self.resp.readline()
        except (http.client.IncompleteRead, ConnectionError, ssl.SSLError, socket.timeout):
            return None
        return json.loads(line) if line.strip() else None

    def close(self) -> None:
        self.conn.close()


def test_watch_cut(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "watch_cut", "target": {"resource": "configmaps"}, "times": 1,
                   "seconds": 200}], nodes=1, speed=200)
    cms = "/api/v1/namespaces/default/configmaps"
    rv = h.get(cms)["metadata"]["resourceVersion"]
    other = Watch(h, "/api/v1/namespaces/default/secrets",
                  h.get("/api/v1/namespaces/default/secrets")["metadata"]["resourceVersion"])
    t0 = time.monotonic()
    w = Watch(h, cms, rv)
    h.create(cms, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before"}})
    ev = w.next()
    assert ev is not None and ev["type"] == "ADDED"
    last_rv = ev["object"]["metadata"]["resourceVersion"]
    assert w.next() is None  # cut after being open 200 simulated seconds (1 s here)
    assert time.monotonic() - t0 >= 0.9
    w.close()
    # written while no watch was open: a watch resumed from the last version sees it
    h.create(cms, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "during"}})
    w2 = Watch(h, cms, last_rv)
    ev = w2.next()
    assert ev is not None and (ev["type"], ev["object"]["metadata"]["name"]) == (
        "ADDED", "during")
    w2.close()
    # the secrets watch (another resource) was not cut
    h.create("/api/v1/namespaces/default/secrets",
             {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}})
    ev = other.next()
    assert ev is not None and ev["object"]["metadata"]["name"] == "s1"
    other.close()
    got = fired(sim, "watch_cut")
    assert [(f["verb"], f["resource"]) for f in got] == [("watch", "configmaps")]


def _refused(h: Http) -> bool:
    try:
        socket.create_connection(("127.0.0.1", h.port), timeout=2).close()
    except (ConnectionRefusedError, ConnectionResetError):   # reset: closed while connecting
        return True
    return False


def test_api_outage(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    """A control-plane node's reboot takes the API server away for ``seconds``: new
    connections are refused, open watch streams end, then it serves again on the port."""
    sim, h = run([{"kind": "api_outage", "trigger": {"on": {"event": "node_reboot",
                                                            "node": "node-1"}},
                   "times": 1, "seconds": 600}], speed=300)
    kubelet = sim.world.controllers["kubelet"]
    assert kubelet.reboot("node-2")                # another node: no outage
    time.sleep(0.3)
    assert not _refused(h) and not fired(sim, "api_outage")
    cms = "/api/v1/namespaces/default/configmaps"
    w = Watch(h, cms, h.get(cms)["metadata"]["resourceVersion"])
    t0 = time.monotonic()
    assert kubelet.reboot("node-1")
    wait_for(lambda: _refused(h), what="connections refused")
    assert w.next() is None                         # the stream ends without its last chunk
    w.close()
    wait_for(lambda: not _refused(h), what="the API server back", timeout=30)
    assert time.monotonic() - t0 >= 600 / 300 * 0.9
    assert h.get(cms)["kind"] == "ConfigMapList"
    assert [f["endpoint"] for f in fired(sim, "api_outage")] == ["apiserver"]
    assert [o["kind"] for o in sim.server.outages] == ["api_outage"]
    time.sleep(0.3)
    assert not _refused(h)                          # times: 1


def test_api_restart(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    """After a restart a watch resumed from a resourceVersion older than the restart gets a
    410 Expired ERROR event; a fresh list and watch work."""
    sim, h = run([{"kind": "api_restart", "trigger": {"on": "go"}, "times": 1}], nodes=1)
    cms = "/api/v1/namespaces/default/configmaps"
    old_rv = h.get(cms)["metadata"]["resourceVersion"]
    w = Watch(h, cms, old_rv)
    h.create(cms, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before"}})
    ev = w.next()
    assert ev is not None and ev["type"] == "ADDED"
    seen_rv = ev["object"]["metadata"]["resourceVersion"]
    h.create(cms, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "between"}})
    assert w.next() is not None
    sim.world.faults.notify("go")
    assert w.next() is None                         # the restart ended the stream
    w.close()
    wait_for(lambda: sim.server.outages, what="the restart done")
    for rv in (old_rv, seen_rv):
        w2 = Watch(h, cms, rv)
        ev = w2.next()
        w2.close()
        assert ev is not None and ev["type"] == "ERROR", ev
        st = ev["object"]
        assert (st["code"], st["reason"]) == (410, "Expired")
        assert st["message"].startswith(f"too old resource version: {rv} (")
    lst = h.get(cms)
    w3 = Watch(h, cms, lst["metadata"]["resourceVersion"])
    h.create(cms, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}})
    ev = w3.next()
    w3.close()
    assert ev is not None and (ev["type"], ev["object"]["metadata"]["name"]) == (
        "ADDED", "after")
    assert len(fired(sim, "api_restart")) == 1


def test_node_not_ready(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    """The kubelet stops posting status for ``seconds``: Ready Unknown and the unreachable
    taints, pods kept; then Ready again with the taints gone. Another node is untouched."""
    sim, h = run([{"kind": "node_not_ready", "target": {"node": "node-2"}, "times": 1,
                   "seconds": 600}], nodes=2, speed=300)
    wait_for(lambda: _ready(h, "node-2") == "Unknown", what="node-2 NotReady")
    node = h.get("/api/v1/nodes/node-2")
    assert {(t["key"], t["effect"]) for t in node["spec"].get("taints") or []} >= {
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute")}
    assert condition(node, "Ready")["message"] == "Kubelet stopped posting node status."
    assert _ready(h, "node-1") == "True"
    assert h.call("GET", "/api/v1/nodes/node-2/proxy/healthz").status == 502
    wait_for(lambda: _ready(h, "node-2") == "True", what="node-2 Ready again", timeout=30)
    node = h.get("/api/v1/nodes/node-2")
    assert not [t for t in node["spec"].get("taints") or []
                if t["key"] == "node.kubernetes.io/unreachable"]
    assert sim.world.controllers["kubelet"].nodes["node-2"].reboots == 0
    assert [f["node"] for f in fired(sim, "node_not_ready")] == ["node-2"]


# --------------------------------------------------------------------------- Rancher, charts
HOOKS = {"enabled": True, "force": True, "ignoreDaemonSets": True, "deleteEmptyDirData": True,
         "preDrainHooks": [{"annotation": "management.harvesterhci.io/pre-hook"}],
         "postDrainHooks": [{"annotation": "management.harvesterhci.io/post-hook"}]}


def test_planner_stuck(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "planner_stuck", "target": {"node": "node-2"}}], nodes=2)
    ms = h.get("/apis/cluster.x-k8s.io/v1beta1/namespaces/fleet-local/machines")["items"]
    init = [m for m in ms if m["metadata"]["labels"].get("rke.cattle.io/init-node") == "true"]
    order = [m["status"]["nodeRef"]["name"] for m in init] + sorted(
        m["status"]["nodeRef"]["name"] for m in ms if m not in init)
    assert order == ["node-1", "node-2"]

    def secret(node: str) -> str:
        n = h.get(f"/api/v1/nodes/{node}")
        machine = n["metadata"]["annotations"]["cluster.x-k8s.io/machine"]
        return f"/api/v1/namespaces/fleet-local/secrets/{machine}-machine-plan"

    def ann(node: str) -> dict[str, str]:
        return dict(h.get(secret(node))["metadata"].get("annotations") or {})

    h.patch("/apis/provisioning.cattle.io/v1/namespaces/fleet-local/clusters/local",
            {"spec": {"kubernetesVersion": "v1.33.3+rke2r1", "rkeConfig": {"upgradeStrategy": {
                "controlPlaneConcurrency": "1", "workerConcurrency": "1",
                "controlPlaneDrainOptions": HOOKS, "workerDrainOptions": HOOKS}}}})
    for which in ("pre", "post"):  # node-1 is drained as usual; the client answers its hooks
        val = wait_for(lambda w=which: ann("node-1").get(f"rke.cattle.io/{w}-drain"),
                       what=f"{which}-drain on node-1")
        h.patch(secret("node-1"), {"metadata": {"annotations": {
            f"management.harvesterhci.io/{which}-hook": val}}})
    wait_for(lambda: fired(sim, "planner_stuck"), what="planner stuck")
    time.sleep(120 / SPEED)
    assert "rke.cattle.io/pre-drain" not in ann("node-2")
    assert "rke.cattle.io/drain-options" not in ann("node-2")
    assert not h.get("/api/v1/nodes/node-2")["spec"].get("unschedulable")
    assert {f.get("node") for f in fired(sim, "planner_stuck")} == {"node-2"}
    # the operator fixes what held the planner: it steps on from where it stopped
    assert sim.world.faults.clear("planner_stuck") == 1
    assert sim.world.faults.cleared[0]["target"] == {"node": "node-2"}
    wait_for(lambda: ann("node-2").get("rke.cattle.io/pre-drain"), what="pre-drain on node-2")
    assert sim.world.faults.clear("planner_stuck") == 0


def test_chart_stuck(run: Callable[..., tuple[testing.Running, Http]]) -> None:
    sim, h = run([{"kind": "chart_stuck", "target": {"chart": "harvester-crd"}}], nodes=1)
    mc = "/apis/management.cattle.io/v3/namespaces/fleet-local/managedcharts"
    for name in ("harvester-crd", "harvester"):
        h.patch(f"{mc}/{name}", {"spec": {"version": "1.6.0"}})

    def ready(name: str) -> dict[str, Any]:
        obj = h.get(f"{mc}/{name}")
        gen = obj["metadata"]["generation"]
        c = condition(obj, "Ready")
        return c if (obj.get("status") or {}).get("observedGeneration") == gen else {}

    wait_for(lambda: ready("harvester").get("status") == "True", what="harvester Ready")
    stuck = wait_for(lambda: ready("harvester-crd").get("status") == "False"
                     and "ErrApplied" in ready("harvester-crd").get("message", "")
                     and ready("harvester-crd"), what="harvester-crd ErrApplied")
    time.sleep(3 * sim.world.timings.chart_rollout_s / SPEED)
    assert ready("harvester-crd").get("status") == "False", stuck
    assert [f["chart"] for f in fired(sim, "chart_stuck")] == ["harvester-crd"]


def test_fault_added_while_running_and_the_audit_log(
        run: Callable[..., tuple[testing.Running, Http]]) -> None:
    """``Faults.add`` switches a fault on at a moment a test chooses (``remove`` off again);
    the API server's audit log records each external request's verb, user, object and code
    in the order the answers went out."""
    sim, h = run([], nodes=1)
    sim.server.audit = []
    assert h.call("GET", "/api/v1/namespaces/default/configmaps").status == 200
    spec = sim.world.faults.add({"kind": "api_error", "target": {"resource": "configmaps"},
                                 "code": 503})
    assert h.call("GET", "/api/v1/namespaces/default/configmaps").status == 503
    assert h.call("GET", "/api/v1/namespaces/default/secrets").status == 200
    sim.world.faults.remove(spec)
    assert h.call("GET", "/api/v1/namespaces/default/configmaps").status == 200
    with pytest.raises(ValueError, match="no \\['node'\\]"):
        sim.world.faults.add({"kind": "api_error", "target": {"node": "x"}})
    # the server records a request once its answer is written, which may be just after
    # the client has read it
    wait_for(lambda: len(sim.server.audit) >= 4, what="four audit entries")
    log = [(e["verb"], e["objectRef"]["resource"], e["responseStatus"]["code"])
           for e in sim.server.audit]
    assert log == [("list", "configmaps", 200), ("list", "configmaps", 503),
                   ("list", "secrets", 200), ("list", "configmaps", 200)]
    first = sim.server.audit[0]
    assert first["apiVersion"] == "audit.k8s.io/v1" and first["stage"] == "ResponseComplete"
    assert first["user"]["username"] and first["objectRef"]["namespace"] == "default"
    assert first["requestReceivedTimestamp"] <= first["stageTimestamp"]
