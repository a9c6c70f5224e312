#!/usr/bin/env python3
"""`make toolkit-peer`: the REAL Harvester upgrade-toolkit manager against the simulator,
printed beside our collection on the same scenario.

1. checks the steering repo's tool (``UPGRADE_TOOLKIT_SH``) and the bare git clones under
   ``MIRROR_ROOT``; builds the manager with the tool's ``build`` verb unless the binary of the
   pinned commit is already there (``--rebuild`` forces it). Nothing here builds upstream code.
2. serves the scenario with ``harvester-sim serve`` (as ``make upgrade`` does), applies the
   CRDs the toolkit's repository ships (the tool's ``crds``; the other kinds it uses are
   the simulator's upstream CRDs), copies the scenario's published Harvester
   ``Version`` (isoURL, checksum, release date, tags) into a
   ``management.harvesterhci.io/v1beta1`` Version, starts the manager (``run``) and creates an
   UpgradePlan for that version,
3. watches the UpgradePlan until ``Succeeded`` or ``Failed`` and prints its phase timeline and
   the simulator's report (invariant violations, VMs running at the end),
4. runs our collection (``scripts/upgrade_on_simulator.py``) on the same scenario and speed and
   prints both side by side: wall time, live migrations, VMs shut down, API requests.

Outside the simulator the harness does only three things, each printed when it acts
(docs/toolkit-peer.md says why each is needed):

(a) ``shim:metadata``: 127.0.0.1:80 forwards the manager's out-of-cluster metadata request
    ``http://localhost/harvester-release.yaml`` to the repo Service through the API server's
    service proxy (the manager cannot resolve ``<plan>-repo`` outside a cluster);
(b) ``shim:label``: labels one managed node at a time (name order)
    ``management.harvesterhci.io/<plan>=k8s``: the first right after creating the plan (before
    NodeUpgrading creates the k8s Plan that selects on it), the next once the plan reports the
    previous node ``OSUpgraded`` and that node is back (Ready, schedulable, on the new OS:
    the os Job completes before the reboot it schedules); nothing in upgrade-toolkit sets
    that label at the pinned commit, and its handler expects this node-by-node order;
(c) ``shim:retouch``: annotates a completed k8s node-upgrade Job whose node label did not flip
    to ``os`` (the manager's Job controller read a stale cached UpgradePlan; nothing else
    re-triggers it).

SIGTERM or SIGINT stops everything the harness started (the manager, the simulator, the
metadata listener, the collection's run with its playbook and simulator) before it exits.
``--no-build`` never builds (fails when the pinned binary is missing); ``--figures-json
PATH`` writes the figures of the table (``make bench`` uses both: benchmarks/toolkit_side.py).

Exit status 0 only when the toolkit's plan Succeeded with no invariant violation that harms on
the spot (``harvester_sim.invariants.OUTCOME_KINDS`` are the others: the toolkit at the pinned
commit never restarts the VMs its pre-drain shuts down and does not wait for the last node's
replicas) and, unless ``--no-collection``, the collection's Succeeded with no violation at all
and every VM that ran at the start running at the end.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import http.server
import json
import os
import queue
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from harvester_sim.invariants import harms_on_the_spot

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import upgrade_on_simulator as collection_run  # noqa: E402

PINNED_COMMIT = "5ac1bbe35a6b4f61247aa09162cc6a9099dddd4f"
MGMT = "management.harvesterhci.io"
PLAN_PATH = f"/apis/{MGMT}/v1beta1/upgradeplans"
VERSION_PATH = f"/apis/{MGMT}/v1beta1/versions"
LABEL_PLAN = f"{MGMT}/upgrade-plan"
LABEL_COMPONENT = f"{MGMT}/upgrade-component"
LABEL_NODE_TYPE = f"{MGMT}/node-upgrade-type"
LABEL_SUC_NODE = "upgrade.cattle.io/node"
RETOUCH_ANNOTATION = "toolkit-peer.harvester-upgrade.dev/retouch"
TERMINAL = ("Succeeded", "Failed")
USER_AGENT = "toolkit-peer/1 (harness)"
TOOLKIT_AGENT = "upgrade-toolkit"
COLLECTION_AGENT = "harvester-upgrade"   # the collection's client: harvester-upgrade/<module>
RETOUCH_GRACE_S = 2.0      # wall seconds a completed Job's node may keep `k8s` before (c)
RETOUCH_MAX = 5


def log(msg: str) -> None:
    print(f"[{dt.datetime.now().strftime('%H:%M:%S')}] {msg}", flush=True)


def die(msg: str) -> None:
    raise SystemExit(f"toolkit-peer: {msg}")


# ------------------------------------------------------------------------------- API access
class Kube:
    """Just enough of a Kubernetes client: JSON requests and watch streams, from a
    kubeconfig with a bearer token (what ``harvester-sim serve`` writes)."""

    def __init__(self, kubeconfig: Path) -> None:
        cfg = yaml.safe_load(kubeconfig.read_text())
        ctx_name = cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        self.server = str(cluster["server"]).rstrip("/")
        self.token = str(user.get("token") or "")
        ca = base64.b64decode(cluster["certificate-authority-data"])
        self._ca = tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False)  # noqa: SIM115
        self._ca.write(ca)
        self._ca.close()
        self.ssl = ssl.create_default_context(cafile=self._ca.name)

    def close(self) -> None:
        Path(self._ca.name).unlink(missing_ok=True)

    def raw(self, method: str, path: str, body: bytes | None = None,
            content_type: str = "application/json", timeout: float = 30.0,
            ) -> tuple[int, bytes]:
        req = urllib.request.Request(self.server + path, data=body, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("User-Agent", USER_AGENT)
        req.add_header("Accept", "application/json")
        if body is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.ssl, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def call(self, method: str, path: str, obj: Any = None,
             content_type: str = "application/json") -> dict[str, Any]:
        body = None if obj is None else json.dumps(obj).encode()
        code, data = self.raw(method, path, body, content_type)
        if code >= 300:
            text = data[:300].decode(errors="replace")
            raise RuntimeError(f"{method} {path}: HTTP {code}: {text}")
        return json.loads(data) if data else {}

    def get(self, path: str) -> dict[str, Any] | None:
        code, data = self.raw("GET", path)
        if code == 404:
            return None
        if code >= 300:
            raise RuntimeError(f"GET {path}: HTTP {code}: {data[:300].decode(errors='replace')}")
        return json.loads(data)  # type: ignore[no-any-return]

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self.call("PATCH", path, patch, "application/merge-patch+json")

    def watch(self, path: str, stop: threading.Event) -> Iterator[tuple[str, dict[str, Any]]]:
        """LIST then WATCH from the list's resourceVersion, re-listing when the stream ends
        or is too old (410); yields (type, object), LIST items as ADDED."""
        sep = "&" if "?" in path else "?"
        while not stop.is_set():
            lst = self.call("GET", path)
            rv = lst["metadata"].get("resourceVersion", "")
            for item in lst.get("items") or []:
                yield "ADDED", item
            url = f"{self.server}{path}{sep}watch=true&resourceVersion={rv}&timeoutSeconds=60"
            req = urllib.request.Request(url)
            req.add_header("Authorization", f"Bearer {self.token}")
            req.add_header("User-Agent", USER_AGENT)
            try:
                with urllib.request.urlopen(req, context=self.ssl, timeout=90) as resp:
                    for line in resp:
                        if stop.is_set():
                            return
                        if not line.strip():
                            continue
                        ev = json.loads(line)
                        if ev.get("type") == "ERROR":
                            break  # 410 Gone etc.: list again
                        yield str(ev["type"]), ev["object"]
            except (OSError, ValueError):
                if stop.is_set():
                    return
                time.sleep(0.5)


# --------------------------------------------------------------------------- the tool
def toolkit_binary() -> Path:
    """Where the tool builds the manager: ``$PEERS_CACHE/bin/upgrade-toolkit``."""
    cache = Path(os.environ.get("PEERS_CACHE") or Path.home() / ".cache" / "peers")
    return cache / "bin" / "upgrade-toolkit"


def built_commit(binary: Path) -> str:
    """The upgrade-toolkit commit ``binary`` was built from (the tool's version file), or ""."""
    version_file = binary.with_name(".upgrade-toolkit.version")
    if not binary.exists() or not version_file.exists():
        return ""
    return version_file.read_text().split(" ", 1)[0].strip()


class Tool:
    """The steering repo's ``upgrade-toolkit.sh`` (build / crds / run / stop)."""

    def __init__(self, path: Path, mirror_root: Path, state: Path) -> None:
        self.path = path
        self.mirror_root = mirror_root
        self.state = state
        self.binary = toolkit_binary()

    def check(self) -> None:
        if not self.path.is_file() or not os.access(self.path, os.X_OK):
            die(f"{self.path} not found or not executable (set UPGRADE_TOOLKIT_SH to the "
                "steering repo's tools/upgrade-toolkit.sh)")
        for repo in ("harvester+upgrade-toolkit", "rancher+system-upgrade-controller"):
            git = self.mirror_root / repo / "repo"
            if not git.is_dir():
                die(f"git clone {git} missing (set MIRROR_ROOT to the folder holding "
                    "harvester+upgrade-toolkit/repo and rancher+system-upgrade-controller/repo)")

    def _run(self, *args: str, check: bool = True) -> int:
        env = dict(os.environ, MIRROR_ROOT=str(self.mirror_root))
        log(f"$ {self.path.name} {' '.join(args)}")
        rc = subprocess.call([str(self.path), *args], env=env)
        if check and rc != 0:
            die(f"'{self.path.name} {' '.join(args)}' failed with exit code {rc}")
        return rc

    def build(self, force: bool, allowed: bool = True) -> None:
        if not force and built_commit(self.binary) == PINNED_COMMIT:
            log(f"upgrade-toolkit {PINNED_COMMIT[:12]} already built ({self.binary})")
            return
        if not allowed:
            die(f"{self.binary} is not upgrade-toolkit {PINNED_COMMIT[:12]} (built: "
                f"{built_commit(self.binary)[:12] or 'nothing'}) and --no-build was given")
        self._run("build")

    def crds(self, out: Path) -> list[dict[str, Any]]:
        """The CRDs the toolkit's repository ships (``config/crd/bases``): UpgradePlan and
        Version. Only these: the kinds it also needs (VirtualMachineImage, Setting, SUC
        Plan) are the simulator's own upstream CRDs, which the tool's ``prepare`` would
        replace with schema-less stand-ins."""
        self._run("crds", str(out))
        return [d for d in yaml.safe_load_all(out.read_text()) if d]

    def start(self, kubeconfig: Path) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        self._run("run", str(kubeconfig), str(self.state))

    def stop(self) -> None:
        self._run("stop", str(self.state), check=False)


# ------------------------------------------------------------------------- shim (a)
class MetadataForwarder:
    """Shim (a): 127.0.0.1:<port> -> services/<plan>-repo:80/proxy on the simulator."""

    def __init__(self, kube: Kube, port: int) -> None:
        self.kube = kube
        self.plan = ""
        self.requests = 0
        fwd = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                fwd.forward(self)

            def log_message(self, fmt: str, *args: Any) -> None:
                return

        try:
            self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        except PermissionError:
            die(f"cannot bind 127.0.0.1:{port} (needs root or CAP_NET_BIND_SERVICE, or "
                f"sysctl net.ipv4.ip_unprivileged_port_start<={port}): the manager's "
                "out-of-cluster metadata URL is http://localhost/harvester-release.yaml "
                "(docs/toolkit-peer.md)")
        except OSError as exc:
            die(f"cannot bind 127.0.0.1:{port}: {exc} (is another toolkit-peer running?)")
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def forward(self, h: http.server.BaseHTTPRequestHandler) -> None:
        self.requests += 1
        if not self.plan:
            code, body = 503, b"no UpgradePlan yet\n"
        else:
            path = (f"/api/v1/namespaces/harvester-system/services/{self.plan}-repo:80/proxy"
                    f"{h.path}")
            code, body = self.kube.raw("GET", path)
        log(f"shim:metadata GET {h.path} -> services/{self.plan or '?'}-repo:80/proxy "
            f"-> {code} ({len(body)} bytes)")
        h.send_response(code)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ----------------------------------------------------------------------------- the run
def _ts(s: str) -> dt.datetime:
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)


class PeerRun:
    def __init__(self, kube: Kube, forwarder: MetadataForwarder) -> None:
        self.kube = kube
        self.fwd = forwarder
        self.stop = threading.Event()
        self.events: queue.Queue[tuple[str, str, dict[str, Any]]] = queue.Queue()
        self.plan_name = ""
        self.plan: dict[str, Any] = {}
        self.phases: list[tuple[str, float]] = []      # (phase, wall s since plan create)
        self.t0 = 0.0
        self.retouches: dict[str, int] = {}             # job -> times touched
        self.node_order: list[str] = []
        self.nodes: dict[str, dict[str, Any]] = {}
        self.labelled = 0
        self.shim_counts = {"metadata": 0, "label": 0, "retouch": 0}
        self.timers: list[threading.Timer] = []

    def _pump(self, kind: str, path: str) -> None:
        try:
            for etype, obj in self.kube.watch(path, self.stop):
                self.events.put((kind, etype, obj))
        except Exception as exc:  # noqa: BLE001 - reported, the main loop ends on it
            self.events.put(("error", "ERROR", {"message": f"{kind} watch: {exc}"}))

    def start_watches(self) -> None:
        sel = urllib.parse.quote(f"{LABEL_COMPONENT}=node-upgrade")
        for kind, path in (("plan", PLAN_PATH),
                           ("job", f"/apis/batch/v1/namespaces/cattle-system/jobs"
                                   f"?labelSelector={sel}"),
                           ("node", "/api/v1/nodes")):
            threading.Thread(target=self._pump, args=(kind, path), daemon=True).start()

    def create_plan(self, version: str, upgrade_tag: str) -> None:
        spec: dict[str, Any] = {"version": version}
        if upgrade_tag:
            spec["upgrade"] = upgrade_tag
        obj = {"apiVersion": f"{MGMT}/v1beta1", "kind": "UpgradePlan",
               "metadata": {"generateName": "hvst-upgrade-"}, "spec": spec}
        self.t0 = time.monotonic()
        created = self.kube.call("POST", PLAN_PATH, obj)
        self.plan_name = created["metadata"]["name"]
        self.fwd.plan = self.plan_name
        log(f"created UpgradePlan {self.plan_name} (spec {json.dumps(spec)})")
        self.label_nodes()

    def wait(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                kind, etype, obj = self.events.get(timeout=1.0)
            except queue.Empty:
                continue
            if kind == "error":
                die(obj["message"])
            if kind == "plan" and obj["metadata"]["name"] == self.plan_name:
                phase = self.on_plan(obj)
                if phase in TERMINAL:
                    return phase
            elif kind == "job" and etype != "DELETED":
                self.on_job(obj)
            elif kind == "node":
                self.nodes[obj["metadata"]["name"]] = obj
                self.check_label_next()
            elif kind == "retouch":
                self.check_retouch(obj)
        return "Timeout"

    def on_plan(self, obj: dict[str, Any]) -> str:
        self.plan = obj
        st = obj.get("status") or {}
        phase = str(st.get("currentPhase") or "")
        if not self.phases or self.phases[-1][0] != phase:
            self.phases.append((phase, time.monotonic() - self.t0))
            log(f"UpgradePlan {self.plan_name} phase -> {phase or '(none)'}"
                f"  {_conditions(st)}")
        self.check_label_next()
        return phase

    def label_nodes(self) -> None:
        """Shim (b), first node: the managed nodes in name order, one at a time."""
        sel = urllib.parse.quote("harvesterhci.io/managed=true")
        nodes = self.kube.call("GET", f"/api/v1/nodes?labelSelector={sel}")["items"]
        self.node_order = sorted(n["metadata"]["name"] for n in nodes)
        self.label_next()

    def label_next(self) -> None:
        """Shim (b): label the next node ``<plan>=k8s``. The handler's own rationale
        (pkg/upgradeplan/handler.go, handleNodeUpgrade) is that Jobs start only on labelled
        nodes, so that each node runs its k8s then its OS upgrade before the next one starts;
        nothing at the pinned commit sets that label."""
        if self.labelled >= len(self.node_order):
            return
        node = self.node_order[self.labelled]
        self.labelled += 1
        key = f"{MGMT}/{self.plan_name}"
        self.kube.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {key: "k8s"}}})
        self.shim_counts["label"] += 1
        log(f"shim:label {key}=k8s on {node} ({self.labelled}/{len(self.node_order)}): nothing "
            f"in upgrade-toolkit {PINNED_COMMIT[:12]} sets it; one node at a time, the next "
            "once this one's upgrade is done")

    def check_label_next(self) -> None:
        if not self.labelled or self.labelled >= len(self.node_order):
            return
        spec = self.plan.get("spec") or {}
        done = "KubernetesUpgraded" if spec.get("skipOSUpgrade") else "OSUpgraded"
        current = self.node_order[self.labelled - 1]
        state = (((self.plan.get("status") or {}).get("nodeUpgradeStatuses") or {})
                 .get(current) or {}).get("state")
        if state != done:
            return
        # ... and the node is back: Ready, schedulable, on the new OS (the os Job completes
        # before the reboot it schedules)
        node = self.nodes.get(current) or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (node.get("status") or {}).get("conditions") or [])
        want_os = str(((self.plan.get("status") or {}).get("releaseMetadata") or {})
                      .get("os") or "")
        os_now = ((node.get("status") or {}).get("nodeInfo") or {}).get("osImage")
        if not ready or (node.get("spec") or {}).get("unschedulable"):
            return
        if want_os and not spec.get("skipOSUpgrade") and os_now != want_os:
            return
        self.label_next()

    def on_job(self, job: dict[str, Any]) -> None:
        labels = job["metadata"].get("labels") or {}
        if labels.get(LABEL_PLAN) != self.plan_name or labels.get(LABEL_NODE_TYPE) != "k8s":
            return
        if not _job_complete(job):
            return
        name = job["metadata"]["name"]
        if name in self.retouches:
            return
        self.retouches[name] = 0
        self._later(job)

    def _later(self, job: dict[str, Any]) -> None:
        t = threading.Timer(RETOUCH_GRACE_S, lambda: self.events.put(("retouch", "", job)))
        t.daemon = True
        t.start()
        self.timers.append(t)

    def check_retouch(self, job: dict[str, Any]) -> None:
        """Shim (c): the node of a completed k8s Job still carries `k8s` although the plan
        says KubernetesUpgraded for it."""
        name = job["metadata"]["name"]
        node_name = (job["metadata"].get("labels") or {}).get(LABEL_SUC_NODE, "")
        node = self.kube.get(f"/api/v1/nodes/{node_name}")
        key = f"{MGMT}/{self.plan_name}"
        if node is None or (node["metadata"].get("labels") or {}).get(key) != "k8s":
            return  # flipped (or the node is gone): nothing to do
        state = (((self.plan.get("status") or {}).get("nodeUpgradeStatuses") or {})
                 .get(node_name) or {}).get("state")
        if state == "KubernetesUpgraded" and self.retouches[name] < RETOUCH_MAX:
            self.retouches[name] += 1
            self.shim_counts["retouch"] += 1
            self.kube.merge_patch(f"/apis/batch/v1/namespaces/cattle-system/jobs/{name}",
                                  {"metadata": {"annotations": {
                                      RETOUCH_ANNOTATION: str(self.retouches[name])}}})
            log(f"shim:retouch node {node_name} still {key}=k8s {RETOUCH_GRACE_S:.0f}s after "
                f"Job {name} completed (state {state}): annotated the Job")
        self._later(job)

    def close(self) -> None:
        self.stop.set()
        for t in self.timers:
            t.cancel()


def _job_complete(job: dict[str, Any]) -> bool:
    return any(c.get("type") == "Complete" and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _conditions(st: dict[str, Any]) -> str:
    out = []
    for c in st.get("conditions") or []:
        s = f"{c.get('type')}={c.get('status')}/{c.get('reason', '')}"
        if c.get("message"):
            s += f" ({str(c['message'])[:80]})"
        out.append(s)
    return "; ".join(out)


def vm_states(kube: Kube) -> tuple[int, int]:
    """(VMs, VMs whose VMI is Running)."""
    vms = kube.call("GET", "/apis/kubevirt.io/v1/virtualmachines")["items"]
    vmis = kube.call("GET", "/apis/kubevirt.io/v1/virtualmachineinstances")["items"]
    running = {(v["metadata"]["namespace"], v["metadata"]["name"]) for v in vmis
               if (v.get("status") or {}).get("phase") == "Running"}
    return len(vms), sum(1 for v in vms
                         if (v["metadata"]["namespace"], v["metadata"]["name"]) in running)


# --------------------------------------------------------------------------- summaries
def plan_timeline(plan: dict[str, Any]) -> list[str]:
    st = plan.get("status") or {}
    stamps = st.get("phaseTransitionTimestamps") or []
    if not stamps:
        return ["  (no phaseTransitionTimestamps)"]
    t0 = _ts(plan["metadata"]["creationTimestamp"])
    lines = []
    for i, e in enumerate(stamps):
        at = _ts(e["phaseTransitionTimestamp"])
        nxt = _ts(stamps[i + 1]["phaseTransitionTimestamp"]) if i + 1 < len(stamps) else at
        lines.append(f"  {e['phase']:<20} +{(at - t0).total_seconds():>5.0f} s  "
                     f"({(nxt - at).total_seconds():>4.0f} s)")
    return lines


def plan_wall_s(plan: dict[str, Any]) -> float | None:
    stamps = (plan.get("status") or {}).get("phaseTransitionTimestamps") or []
    if not stamps:
        return None
    return (_ts(stamps[-1]["phaseTransitionTimestamp"])
            - _ts(plan["metadata"]["creationTimestamp"])).total_seconds()


def report_figures(report: dict[str, Any], agents: Callable[[str], bool]) -> dict[str, Any]:
    inv = report.get("invariants") or {}
    viol = report.get("invariant_violations") or []
    expected = int(inv.get("vms_expected_running") or 0)
    # not running at the end: the monitor's violations (stopped and never restarted
    # included), plus VMs deleted (the monitor does not count those as violations)
    not_running = sum(1 for v in viol if v.get("kind") == "vm_not_running_at_end") + sum(
        1 for st in (inv.get("explicit_stops") or {}).values() if st.get("how") == "deleted")
    by_agent = (report.get("api_requests") or {}).get("by_user_agent") or {}
    stopped = {str(ev.get("vm")) for ev in report.get("timeline") or []
               if ev.get("event") == "vm_stopped"}
    return {
        "violations": len(viol),
        "violations_on_the_spot": sum(1 for v in viol if harms_on_the_spot(v)),
        "violation_kinds": sorted({str(v.get("kind")) for v in viol}),
        "vms_expected": expected,
        "vms_running_end": expected - not_running,
        "migrations": int((report.get("vm_migrations") or {}).get("total") or 0),
        "vms_shut_down": max(len(inv.get("explicit_stops") or {}), len(stopped)),
        "api_upgrader": sum(int(n) for a, n in by_agent.items() if agents(a)),
        "api_total": int((report.get("api_requests") or {}).get("total") or 0),
        "by_agent": by_agent,
        "reboots": int((report.get("node_reboots") or {}).get("total") or 0),
        "simulated_s": float(report.get("simulated_duration_s") or 0.0),
    }


def print_report(title: str, fig: dict[str, Any], report: dict[str, Any]) -> None:
    print(f"--- simulator report ({title}) ---")
    print(f"invariant violations: {fig['violations']}"
          + (f" ({', '.join(fig['violation_kinds'])})" if fig["violations"] else ""))
    for v in (report.get("invariant_violations") or [])[:10]:
        print(f"  - {v.get('kind')}: {v.get('message')}")
    print(f"VMs running at the end: {fig['vms_running_end']}/{fig['vms_expected']}")
    print(f"live migrations: {fig['migrations']}, VMs shut down: {fig['vms_shut_down']}, "
          f"node reboots: {fig['reboots']}")
    print("API requests by user agent: " + ", ".join(
        f"{a}={n}" for a, n in sorted(fig["by_agent"].items(), key=lambda x: -int(x[1]))))


def side_by_side(tk: dict[str, Any], col: dict[str, Any] | None) -> list[str]:
    rows = [("UpgradePlan result", "phase"), ("wall time, plan created -> terminal (s)", "wall"),
            ("simulated time, whole run (s)", "simulated_s"),
            ("live migrations", "migrations"), ("VMs shut down", "vms_shut_down"),
            ("VMs running at end", "running"), ("node reboots", "reboots"),
            ("invariant violations", "violations"),
            ("  of which harm on the spot", "violations_on_the_spot"),
            ("API requests by the upgrader", "api_upgrader"),
            ("API requests, all HTTP clients", "api_total")]

    def cell(f: dict[str, Any] | None, key: str) -> str:
        if f is None:
            return "(not run)"
        if key == "running":
            return f"{f['vms_running_end']}/{f['vms_expected']}"
        v = f.get(key)
        if v is None:
            return "-"
        return f"{v:.0f}" if isinstance(v, float) else str(v)

    w = max(len(r[0]) for r in rows)
    out = [f"{'':<{w}}  {'upgrade-toolkit (real)':>24}  {'collection':>12}",
           f"{'-' * w}  {'-' * 24}  {'-' * 12}"]
    for label, key in rows:
        out.append(f"{label:<{w}}  {cell(tk, key):>24}  {cell(col, key):>12}")
    return out


# ------------------------------------------------------------------------------ main
def install_toolkit_crds(kube: Kube, crds: list[dict[str, Any]]) -> None:
    """Create the toolkit's CRDs (the manager needs them before it starts, as in-cluster
    its Helm chart installs them); the groups the simulator serves already are refused."""
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for crd in crds:
        name = crd["metadata"]["name"]
        if not name.endswith(".management.harvesterhci.io"):
            die(f"unexpected CRD {name} in the toolkit's config/crd/bases")
        if kube.get(f"{path}/{name}") is None:
            kube.call("POST", path, crd)
        log(f"CRD {name} from upgrade-toolkit {PINNED_COMMIT[:12]} installed")


def run_toolkit(args: argparse.Namespace, tool: Tool, out: Path) -> dict[str, Any]:
    fwd_kube: Kube | None = None
    proc, kubeconfig = collection_run.start_simulator(
        args.scenario, args.speed, out, args.seed,
        ["--without", "suc"] if args.suc_bin else [])
    suc = None
    plan: dict[str, Any] = {}
    phase = "NotStarted"
    vms = (0, 0)
    peer: PeerRun | None = None
    fwd: MetadataForwarder | None = None
    try:
        log(f"simulator: scenario {args.scenario}, speed {args.speed} ({kubeconfig})")
        if args.suc_bin:
            suc = collection_run.start_suc(args.suc_bin, kubeconfig, out)
            log(f"real system-upgrade-controller {args.suc_bin} in place of the simulated one "
                f"(pid {suc.pid}, log {out / 'system-upgrade-controller.log'})")
        kube = Kube(kubeconfig)
        fwd_kube = kube
        install_toolkit_crds(kube, tool.crds(out / "upgrade-toolkit-crds.yaml"))
        target = pick_version(kube, args.version)
        copy_version(kube, target)
        fwd = MetadataForwarder(kube, args.metadata_port)
        log(f"shim:metadata listening on 127.0.0.1:{args.metadata_port}")
        tool.start(kubeconfig)
        peer = PeerRun(kube, fwd)
        peer.start_watches()
        peer.create_plan(target["metadata"]["name"], args.upgrade_tag)
        phase = peer.wait(args.timeout)
        plan = peer.plan
        if phase == "Timeout":
            log(f"no terminal phase within {args.timeout:.0f} s; last phase "
                f"{(plan.get('status') or {}).get('currentPhase')}")
        peer.shim_counts["metadata"] = fwd.requests
        vms = vm_states(kube)
        (out / "upgradeplan.json").write_text(json.dumps(plan, indent=2))
    finally:
        if peer is not None:
            peer.close()
        tool.stop()
        if fwd is not None:
            fwd.close()
        if suc is not None:
            collection_run.stop_simulator(suc)
        collection_run.stop_simulator(proc)
        if fwd_kube is not None:
            fwd_kube.close()
    report = json.loads((out / "report.json").read_text()) \
        if (out / "report.json").exists() else {}
    fig = report_figures(report, lambda a: a == TOOLKIT_AGENT)
    fig["phase"] = phase
    fig["wall"] = plan_wall_s(plan) if plan and phase in TERMINAL else None
    print()
    print(f"=== upgrade-toolkit {PINNED_COMMIT[:12]} on {args.scenario} (speed {args.speed}) ===")
    if plan:
        st = plan.get("status") or {}
        print(f"plan {plan['metadata']['name']}: {st.get('previousVersion', '?')} -> "
              f"{plan['spec'].get('version')}  phase {st.get('currentPhase')}")
        print("phase timeline (phaseTransitionTimestamps, since creation):")
        print("\n".join(plan_timeline(plan)))
        nodes = st.get("nodeUpgradeStatuses") or {}
        print(f"nodes ({len(nodes)}): " + ", ".join(
            f"{n}={s.get('state')}" for n, s in sorted(nodes.items())))
    if peer is not None:
        print(f"shims: metadata requests forwarded {peer.shim_counts['metadata']}, nodes "
              f"labelled {peer.shim_counts['label']}, Jobs re-touched "
              f"{peer.shim_counts['retouch']}")
    print(f"VMs running at the end (API): {vms[1]}/{vms[0]}")
    print_report("toolkit run", fig, report)
    print(f"report: {out / 'report.json'}  plan: {out / 'upgradeplan.json'}  "
          f"manager log: {tool.state / 'manager.log'}")
    return fig


def pick_version(kube: Kube, want: str) -> dict[str, Any]:
    items = kube.call("GET", "/apis/harvesterhci.io/v1beta1/namespaces/harvester-system/"
                             "versions")["items"]
    if not items:
        die("the scenario publishes no harvesterhci.io Version to upgrade to")
    if want:
        for v in items:
            if v["metadata"]["name"] == want:
                return v  # type: ignore[no-any-return]
        die(f"version {want} not published (have {[v['metadata']['name'] for v in items]})")

    def key(v: dict[str, Any]) -> tuple[int, ...]:
        nums = v["metadata"]["name"].lstrip("v").split("-", 1)[0].split(".")
        return tuple(int(n) if n.isdigit() else 0 for n in nums)

    return max(items, key=key)


def copy_version(kube: Kube, src: dict[str, Any]) -> None:
    spec = src.get("spec") or {}
    obj = {"apiVersion": f"{MGMT}/v1beta1", "kind": "Version",
           "metadata": {"name": src["metadata"]["name"]},
           "spec": {k: spec[k] for k in ("isoURL", "isoChecksum", "releaseDate", "tags")
                    if spec.get(k)}}
    kube.call("POST", VERSION_PATH, obj)
    log(f"created {MGMT} Version {obj['metadata']['name']} from the published Harvester "
        f"Version (isoURL {spec.get('isoURL')})")


def collection_figures(out: Path, rc: int | None = None) -> dict[str, Any]:
    """The table's figures of a collection run whose ``report.json`` and
    ``upgradeplan.json`` are in ``out`` (``make toolkit-peer``'s, or a ``make bench`` run's)."""
    report = json.loads((out / "report.json").read_text()) \
        if (out / "report.json").exists() else {}
    plan = json.loads((out / "upgradeplan.json").read_text()) \
        if (out / "upgradeplan.json").exists() else {}
    fig = report_figures(report, lambda a: a == COLLECTION_AGENT)
    fig["phase"] = (plan.get("status") or {}).get("currentPhase") or f"rc {rc}"
    fig["wall"] = plan_wall_s(plan) if plan and fig["phase"] in TERMINAL else None
    return fig


def run_collection(args: argparse.Namespace, out: Path) -> dict[str, Any] | None:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(ROOT / "scripts" / "upgrade_on_simulator.py"),
           "--scenario", args.scenario, "--speed", str(args.speed), "--scenario-overrides",
           "--out", str(out.relative_to(ROOT) if out.is_relative_to(ROOT) else out)]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    if args.suc_bin:
        cmd += ["--suc-bin", str(args.suc_bin)]
    log(f"collection: $ {' '.join(cmd)}")
    child = subprocess.Popen(cmd, cwd=ROOT)
    try:
        rc = child.wait()
    finally:   # interrupted: it stops its playbook and simulator on SIGTERM
        collection_run.stop_process(child, timeout=90)
    report = json.loads((out / "report.json").read_text()) \
        if (out / "report.json").exists() else {}
    fig = collection_figures(out, rc)
    print_report("collection run", fig, report)
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="three-node")
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="out/toolkit-peer")
    ap.add_argument("--tool", default=os.environ.get("UPGRADE_TOOLKIT_SH",
                                                     "../shared/tools/upgrade-toolkit.sh"),
                    help="the steering repo's upgrade-toolkit.sh (relative to the repo root)")
    ap.add_argument("--mirror-root", default=os.environ.get("MIRROR_ROOT", "/work/.mirror"))
    ap.add_argument("--version", default="", help="target version (default: the newest "
                    "published harvesterhci.io Version)")
    ap.add_argument("--upgrade-tag", default="", help="UpgradePlan spec.upgrade (image tag)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="wall seconds to wait")
    ap.add_argument("--metadata-port", type=int, default=80)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--no-build", action="store_true",
                    help="never build: fail unless the pinned binary is there")
    ap.add_argument("--figures-json", type=Path, default=None, metavar="PATH",
                    help="write the side-by-side figures as JSON")
    ap.add_argument("--no-collection", action="store_true")
    ap.add_argument("--suc-bin", type=Path, default=None, metavar="PATH",
                    help="a real system-upgrade-controller binary run in place of the "
                         "simulated one (harvester-sim serve --without suc), for both runs")
    args = ap.parse_args(argv)
    if args.rebuild and args.no_build:
        die("--rebuild and --no-build exclude each other")
    if args.suc_bin is not None:
        if not (args.suc_bin.is_file() and os.access(args.suc_bin, os.X_OK)):
            die(f"--suc-bin: {args.suc_bin}: no such executable file")
        args.suc_bin = args.suc_bin.resolve()
    with collection_run.stop_children_on_signals():
        return peer_main(args)


def peer_main(args: argparse.Namespace) -> int:
    tool_path = Path(args.tool)
    if not tool_path.is_absolute():
        tool_path = (ROOT / tool_path).resolve()
    out = (ROOT / args.out).resolve()
    tool = Tool(tool_path, Path(args.mirror_root), out / "toolkit" / "manager")
    tool.check()
    tool.build(args.rebuild, allowed=not args.no_build)
    (out / "toolkit").mkdir(parents=True, exist_ok=True)
    tk = run_toolkit(args, tool, out / "toolkit")
    col = None if args.no_collection else run_collection(args, out / "collection")
    print()
    print(f"=== side by side: {args.scenario}, speed {args.speed} ===")
    print("\n".join(side_by_side(tk, col)))
    print(f"(upgrader requests: user agent {TOOLKIT_AGENT} for the toolkit, {COLLECTION_AGENT} "
          "for the collection)")
    if args.figures_json is not None:
        args.figures_json.parent.mkdir(parents=True, exist_ok=True)
        args.figures_json.write_text(json.dumps(
            {"scenario": args.scenario, "speed": args.speed, "toolkit": tk,
             "collection": col}, indent=2, sort_keys=True) + "\n")

    if tk["vms_running_end"] < tk["vms_expected"]:
        print(f"note: upgrade-toolkit {PINNED_COMMIT[:12]} shuts down the VMs that cannot "
              "live-migrate in its pre-drain step (upgrade-helper vm-live-migrate-detector "
              "--shutdown, recorded in ConfigMap <plan>-restore-vm) and nothing at that "
              "commit starts them again (docs/toolkit-peer.md)")

    # the toolkit is held to what harms on the spot; its outcome (VMs it shut down and does
    # not restart, replicas still rebuilding at Succeeded) is its design, shown in the table
    def ok(f: dict[str, Any] | None, outcome_too: bool) -> bool:
        return f is not None and f["phase"] == "Succeeded" and f["violations_on_the_spot"] == 0 \
            and (not outcome_too or (f["violations"] == 0
                                     and f["vms_running_end"] == f["vms_expected"]))

    return 0 if ok(tk, False) and (args.no_collection or ok(col, True)) else 1


if __name__ == "__main__":
    sys.exit(main())
