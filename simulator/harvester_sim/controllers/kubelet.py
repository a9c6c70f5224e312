"""The simulated kubelets (one per Node) and the node-lifecycle bits of the controller manager.

Per node: adopts any existing Node object (fills in what a kubelet reports: addresses,
``nodeInfo``, capacity/allocatable, conditions, ``status.images``, daemon endpoints), renews
its Lease in ``kube-node-lease`` (at once when it starts, as the lease controller's
``wait.JitterUntil(sync, renewInterval, 0.04, true)`` does, kubernetes/kubernetes
``staging/src/k8s.io/component-helpers/apimachinery/lease/controller.go``; then on a phase of
its own: real kubelets start at different moments, so a cluster's Leases are not renewed
all at once), reports status only when something changes or every
``STATUS_REPORT_S`` (the real kubelet's nodeStatusReportFrequency), keeps the
``node.kubernetes.io/unschedulable`` taint in step with ``spec.unschedulable``, and serves
``/stats/summary``, ``/configz`` and ``/healthz`` behind ``nodes/<n>/proxy``.

Pods bound to a node run here: Pending (ContainerCreating, image pull when the image is not
in the node's image store: size / ``timings.image_pull_mib_s``) -> init containers in order ->
Running -> each container runs its program from ``programs.base.REGISTRY`` -> Succeeded/
Failed with exit codes; restartPolicy Always/OnFailure restarts containers with a back-off.
Readiness probes (``httpGet``/``tcpSocket``) are run against the HTTP handler the pod's
program registered for the port (``world.proxies``), with ``initialDelaySeconds``,
``periodSeconds``, ``successThreshold`` and ``failureThreshold`` as kubelet's prober
(kubernetes/kubernetes ``pkg/kubelet/prober``, release-1.30) applies them.

A container whose program is not modelled does not hang: a run-to-completion container
(init container, Job pod, a pod with restartPolicy Never/OnFailure) exits 0 after
``timings.short_program_s``; a serving one (owned by a ReplicaSet/DaemonSet/StatefulSet,
restartPolicy Always, or a command that loops forever) keeps running. Each gets a Warning
``ProgramNotModelled`` event naming image and command, and is listed in
:meth:`Kubelet.unmodelled_programs` (the run report's ``unmodelled_programs``).

Deleting a pod sends SIGTERM: modelled programs stop at once (the pod is gone after
``min(grace, timings.pod_stop_s)``); a running unmodelled program is killed when the grace
period (``deletionGracePeriodSeconds``) ends, as kubelet does.

API for other controllers and programs (``world.controllers['kubelet']``): :meth:`reboot`,
:meth:`restart_kubelet`, :meth:`add_images`, :meth:`remove_images`, :meth:`has_image`,
:meth:`images`, :meth:`node_fs`, :meth:`is_up`, and the host model below; for tests,
:meth:`repair` (the operator bringing back a node fault ``node_never_returns`` kept down).

Image store and ``status.images``: the node's images (containerd's store) are the kubelet's
own state, :attr:`NodeState.images`. It is seeded once, from the ``status.images`` the Node
carries when the kubelet adopts it (a scenario's cluster history), and changes only through
this API (image pulls, :meth:`add_images`, :meth:`remove_images`). ``status.images`` is a
report of the store, as kubernetes/kubernetes (release-1.30 and later) writes it: at most
``nodeStatusMaxImages`` images (KubeletConfiguration default 50,
``pkg/kubelet/apis/config/v1beta1/defaults.go``; -1 would mean no limit), the largest first
(``pkg/kubelet/images/image_gc_manager.go`` ``imageCache.set`` sorts with
``pkg/kubelet/util/sliceutils`` ``ByImageSize``: size descending, equal sizes by image ID
descending), each with at most ``MaxNamesPerImageInNodeStatus`` (5) names
(``pkg/kubelet/nodestatus/setters.go`` ``Images``). A client that edits ``status.images``
changes neither the store nor what the kubelet reports: as the real kubelet's
``tryUpdateNodeStatus`` (``pkg/kubelet/kubelet_node_status.go``), which patches the status
when the one it computes differs from the Node's, the report is written back on the next
status update, ``nodeStatusUpdateFrequency`` (10 s) later.

Host model (per node, for the upgrade programs that work on the host through ``/host``):
``host_files(node)`` is the node's file system as far as the upgrade touches it (path ->
content). A control-plane node starts with RKE2's
``/var/lib/rancher/rke2/server/manifests/rke2-canal-config.yaml``. ``/run`` is a tmpfs: a
reboot empties everything under it. ``restart_agent(node)`` is ``systemctl restart
rancher-system-agent``: the agent reads ``EnvironmentFile``s named by drop-ins under
``/run/systemd/system/rancher-system-agent.service.d/`` (upgrade_manifests.sh's
skip-restart Plan writes ``INSTALL_RKE2_SKIP_ENABLE=true`` there). When Rancher applies an
RKE2 plan through the agent (:meth:`restart_kubelet`) while the agent runs with
``INSTALL_RKE2_SKIP_ENABLE=true``, the RKE2 installer puts the new binaries in place but does
not restart the service: the kubelet stays on its old version (timeline
``rke2_restart_skipped``) and Rancher waits for the plan forever, as on a real node whose
pre-drain job never removed the drop-in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..api import errors
from ..programs import podfs
from ..programs.base import REGISTRY, ProgramContext
from . import podutil as pu

log = logging.getLogger("harvester_sim.kubelet")

LEASE_NS = "kube-node-lease"
LEASE_DURATION_S = 40
HEARTBEAT_MIN_WALL_S = 1.0       # never renew a lease more often than this in real time
STATUS_REPORT_S = 300.0          # nodeStatusReportFrequency
STATUS_REPORT_MIN_WALL_S = 10.0
RESTART_BACKOFF_S = 10.0
RESTART_BACKOFF_MAX_S = 300.0
KUBELET_PORT = 10250
NODE_STATUS_UPDATE_S = 10.0      # nodeStatusUpdateFrequency
# KubeletConfiguration nodeStatusMaxImages default (pkg/kubelet/apis/config/v1beta1/
# defaults.go) and nodestatus.MaxNamesPerImageInNodeStatus (pkg/kubelet/nodestatus/setters.go)
NODE_STATUS_MAX_IMAGES = 50
MAX_NAMES_PER_IMAGE_IN_NODE_STATUS = 5
FAULT_POLL_S = 5.0               # how often the node_not_ready fault is asked for
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
DISK_USED_ANNOTATION = "sim.harvesterhci.io/disk-used-bytes"       # set by the scenario
DISK_CAPACITY_ANNOTATION = "sim.harvesterhci.io/disk-capacity-bytes"
MIB = 1024 * 1024
GIB = 1024 * MIB
CANAL_CONFIG = "/var/lib/rancher/rke2/server/manifests/rke2-canal-config.yaml"
AGENT_DROPIN_DIR = "/run/systemd/system/rancher-system-agent.service.d"

DEFAULT_NODE_INFO = {
    "architecture": "amd64",
    "bootID": "",
    "containerRuntimeVersion": "containerd://1.7.23-k3s2",
    "kernelVersion": "5.14.21-150500.55.83-default",
    "kubeProxyVersion": "v1.30.7+rke2r1",
    "kubeletVersion": "v1.30.7+rke2r1",
    "machineID": "",
    "operatingSystem": "linux",
    "osImage": "Harvester v1.4.1",
    "systemUUID": "",
}
DEFAULT_CAPACITY = {"cpu": "16", "memory": "64Gi", "pods": "200",
                    "ephemeral-storage": "250Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
KUBELET_CONFIG = {
    "enableServer": True, "port": KUBELET_PORT, "readOnlyPort": 0,
    "imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80,
    "imageMinimumGCAge": "2m0s", "evictionHard": {
        "imagefs.available": "15%", "memory.available": "100Mi",
        "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
    "maxPods": 200, "nodeStatusUpdateFrequency": "10s", "nodeStatusReportFrequency": "5m0s",
    "nodeStatusMaxImages": NODE_STATUS_MAX_IMAGES,
    "nodeLeaseDurationSeconds": LEASE_DURATION_S, "cgroupDriver": "systemd",
    "clusterDomain": "cluster.local", "clusterDNS": ["10.53.0.10"],
    "serializeImagePulls": True, "shutdownGracePeriod": "0s",
}
NOT_MODELLED_REASON = "ProgramNotModelled"
# commands that never end by themselves (a serving container even in a Job pod)
LONG_RUNNING_MARKERS = ("sleep infinity", "while true", "while :", "tail -f",
                        "daemon off", "sleep 2147483647")
GNS_REASON = "Terminated"
GNS_MESSAGE = "Pod was terminated in response to imminent node shutdown."


def normalize_image(ref: str) -> str:
    """``nginx`` -> ``docker.io/library/nginx:latest`` (how containerd names images)."""
    name, _, digest = ref.partition("@")
    parts = name.split("/")
    if len(parts) == 1 or not ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        if len(parts) == 1:
            parts = ["library", *parts]
        parts = ["docker.io", *parts]
    name = "/".join(parts)
    if not digest and ":" not in parts[-1]:
        name += ":latest"
    return name + (f"@{digest}" if digest else "")


def default_image_size(ref: str) -> int:
    h = int.from_bytes(hashlib.sha256(normalize_image(ref).encode()).digest()[:4], "big")
    return (30 + h % 370) * MIB


Image = tuple[tuple[str, ...], int]     # (names, size in bytes): one image of a node's store


def image_id(names: tuple[str, ...]) -> str:
    """The simulated image ID (containerd's ``sha256:`` config digest): derived from the
    image's first name, so the same image has the same ID on every node and every run."""
    first = normalize_image(names[0]) if names else ""
    return "sha256:" + hashlib.sha256(first.encode()).hexdigest()


def status_images(store: list[Image], max_images: int = NODE_STATUS_MAX_IMAGES
                  ) -> list[dict[str, Any]]:
    """``status.images`` for an image store, as kubelet reports it: the largest images first
    (equal sizes by image ID, descending: ``sliceutils.ByImageSize``), at most ``max_images``
    of them (-1: all), each with at most ``MAX_NAMES_PER_IMAGE_IN_NODE_STATUS`` names."""
    ranked = sorted(store, key=lambda img: (img[1], image_id(img[0])), reverse=True)
    if max_images > -1:
        ranked = ranked[:max_images]
    return [{"names": list(names[:MAX_NAMES_PER_IMAGE_IN_NODE_STATUS]), "sizeBytes": size}
            for names, size in ranked]


@dataclass
class ContainerRun:
    name: str
    image: str
    spec: dict[str, Any]
    init: bool = False
    state: str = "waiting"          # waiting | running | terminated
    reason: str = "ContainerCreating"
    exit_code: int = 0
    restarts: int = 0
    started_at: str = ""
    finished_at: str = ""
    last_term: dict[str, Any] | None = None
    ready: bool = False
    gen: Any = None
    timer: Any = None
    container_id: str = ""
    program: str = ""              # name of the modelled program ("" if none)
    unmodelled: str = ""           # "short" | "serving" when no program is modelled
    probe_ok: int = 0
    probe_fail: int = 0


@dataclass
class PodRun:
    key: pu.Key
    uid: str
    node: str
    pod: dict[str, Any]
    containers: list[ContainerRun]
    inits: list[ContainerRun]
    ip: str = ""
    start_time: str = ""
    phase: str = "Pending"
    reason: str | None = None
    message: str | None = None
    init_done: bool = False
    stopping: bool = False
    timers: list[Any] = field(default_factory=list)

    def all(self) -> list[ContainerRun]:
        return self.inits + self.containers


@dataclass
class NodeState:
    name: str
    index: int
    uid: str = ""
    down: str = ""                 # "" | "reboot" | "restart" | "lost" | "stalled"
    # the node's image store (containerd's images): the kubelet's own state, changed only
    # through set_images; ``status.images`` is a report of it (images_status)
    images: list[Image] = field(default_factory=list)
    image_names: set[str] = field(default_factory=set)
    images_gen: int = 0            # bumped by every change of the store
    fs_capacity: int = 250 * GIB
    base_used: int = 0
    disk_fault_pct: float | None = None
    ip: str = ""
    pod_cidr: str = ""
    next_ip: int = 2
    boot_id: str = ""
    lease_timer: Any = None
    report_timer: Any = None
    # how much later than one interval the renewal after a (re)start comes: each kubelet
    # renews on its own phase, as kubelets started at different moments do, instead of every
    # node's Lease in the same runtime step
    lease_phase: float = 0.0
    written_rv: int = 0            # resourceVersion of our last status write
    pending_info: dict[str, str] = field(default_factory=dict)
    lost_info: dict[str, str] = field(default_factory=dict)   # what a lost node boots once repaired
    reboots: int = 0
    # the host's files that upgrade programs read or write (path -> content); ``/run`` is a
    # tmpfs, emptied by a reboot
    host_files: dict[str, str] = field(default_factory=dict)
    # environment rancher-system-agent read from its drop-ins when it last started
    agent_env: dict[str, str] = field(default_factory=dict)
    # the ``status.images`` report of store generation images_doc_gen: stored objects never
    # change, and a write that leaves the list as it was keeps the same list object
    # (Store._share_unchanged), so a heartbeat neither re-sorts the store nor compares lists
    images_doc: list[dict[str, Any]] | None = None
    images_doc_gen: int = -1
    # the status update that writes the report back over a client's edit of status.images
    images_fix_timer: Any = None

    def set_images(self, images: list[Image]) -> None:
        self.images = images
        self.image_names = {normalize_image(n) for names, _ in images for n in names}
        self.images_gen += 1

    def images_status(self) -> list[dict[str, Any]]:
        """``status.images`` for the image store (the same list object while the store is
        unchanged; read-only, like every stored object)."""
        if self.images_doc is None or self.images_doc_gen != self.images_gen:
            self.images_doc = status_images(self.images)
            self.images_doc_gen = self.images_gen
        return self.images_doc

    def image_bytes(self) -> int:
        return sum(size for _, size in self.images)


class Kubelet:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.clock = world.clock
        self.client = world.client_for("kubelet")
        self.timings = world.timings
        self.pods = pu.informer(world, "v1", "Pod")
        self.nodes_inf = pu.informer(world, "v1", "Node")
        self.pod_rt = self.client.rt("v1", "Pod")
        self.nodes: dict[str, NodeState] = {}
        self.runs: dict[pu.Key, PodRun] = {}
        self.done_uids: set[str] = set()
        self.logs: dict[tuple[str, str, str], list[str]] = {}
        self._dirty_pods: set[pu.Key] = set()
        self._dirty_nodes: set[str] = set()
        self._flush_scheduled = False
        self.image_sizes: dict[str, int] = {
            normalize_image(k): int(v) for k, v in (world.extras.get("image_sizes") or {}).items()}
        self.stats = {"pods_started": 0, "pods_killed": 0, "image_pulls": 0, "reboots": 0}
        self.unmodelled: dict[tuple[str, str, str], dict[str, Any]] = {}
        world.extras["pod_logs"] = self.pod_logs
        self.nodes_inf.add_handler(self._on_node)
        self.pods.add_handler(self._on_pod)
        world.runtime.call_soon(self._initial_sync)
        self._after(FAULT_POLL_S, self._poll_faults)

    # ------------------------------------------------------------------ helpers
    def _now(self) -> str:
        return str(self.clock.timestamp())

    def _after(self, seconds: float, fn: Any) -> Any:
        return self.world.runtime.after(seconds, fn)

    def _lease_interval(self) -> float:
        return max(self.timings.node_heartbeat_s, self.clock.speed * HEARTBEAT_MIN_WALL_S)

    def _report_interval(self) -> float:
        return max(STATUS_REPORT_S, self.clock.speed * STATUS_REPORT_MIN_WALL_S)

    def _default_info(self) -> dict[str, str]:
        """nodeInfo defaults: the installed release when the scenario names one."""
        info = dict(DEFAULT_NODE_INFO)
        rel = self.world.extras.get("installed_release") or {}

        def field(name: str) -> Any:
            return rel.get(name) if isinstance(rel, dict) else getattr(rel, name, None)
        k8s = field("kubernetes") or self.world.scenario.get("rke2")
        if k8s:
            info["kubeletVersion"] = info["kubeProxyVersion"] = str(k8s)
        if field("os"):
            info["osImage"] = str(field("os"))
        return info

    def is_up(self, node: str) -> bool:
        ns = self.nodes.get(node)
        return ns is not None and not ns.down

    # ------------------------------------------------------------------ nodes
    def _initial_sync(self) -> None:
        for node in sorted(self.nodes_inf.all(), key=lambda n: n["metadata"]["name"]):
            if node["metadata"]["name"] not in self.nodes:
                self._adopt(node)

    def _on_node(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = obj["metadata"]["name"]
        if type_ == "DELETED":
            self._forget_node(name)
            return
        ns = self.nodes.get(name)
        if ns is None or ns.uid != obj["metadata"]["uid"]:
            if ns is not None:
                self._forget_node(name)
            self._adopt(obj)
            return
        old_st = (old or {}).get("status") or {}
        new_st = obj.get("status") or {}
        if old is None or old_st.get("capacity") != new_st.get("capacity") or \
                old["metadata"].get("annotations") != obj["metadata"].get("annotations"):
            self._observe_disk(ns, obj)
        self._check_images_report(ns, obj)
        self._sync_unschedulable_taint(obj)

    def _seed_images(self, ns: NodeState, node: dict[str, Any]) -> None:
        """The image store a node has when its kubelet adopts it (its first status write):
        the images its Node carries then (the scenario's history of the cluster; a Node the
        kubelet registers itself has none)."""
        imgs = (node.get("status") or {}).get("images") or []
        ns.set_images([(tuple(i.get("names") or ()), int(i.get("sizeBytes") or 0))
                       for i in imgs])

    def _check_images_report(self, ns: NodeState, node: dict[str, Any]) -> None:
        """``status.images`` that is not the kubelet's report (a client edited it) is written
        back at the next status update; the store is not changed by it."""
        if ns.down or ns.images_fix_timer is not None or ns.name in self._dirty_nodes or \
                int(node["metadata"].get("resourceVersion") or 0) < ns.written_rv:
            return  # not posting status, a write already due, or older than our own write
        imgs = (node.get("status") or {}).get("images")
        if imgs is ns.images_doc:
            return
        if imgs == ns.images_status():
            ns.images_doc = imgs  # the same report, stored as another list: share it
            return
        name = ns.name

        def update() -> None:
            cur = self.nodes.get(name)
            if cur is ns:
                ns.images_fix_timer = None
                if not ns.down:
                    self._mark_node(name)

        ns.images_fix_timer = self._after(NODE_STATUS_UPDATE_S, update)

    def _observe_disk(self, ns: NodeState, node: dict[str, Any]) -> None:
        """Disk size/usage and address from the Node (the scenario may set them after the
        Node was created: status is written right after the create)."""
        st = node.get("status") or {}
        ann = node["metadata"].get("annotations") or {}
        cap = st.get("capacity") or {}
        ns.fs_capacity = int(pu.parse_quantity(
            ann.get(DISK_CAPACITY_ANNOTATION) or cap.get("ephemeral-storage"), 250 * GIB))
        used = ann.get(DISK_USED_ANNOTATION)
        if used is not None:
            ns.base_used = max(0, int(pu.parse_quantity(used)) - ns.image_bytes())
        elif not ns.base_used:
            ns.base_used = int(ns.fs_capacity * 0.08)
        for a in st.get("addresses") or []:
            if a.get("type") == "InternalIP" and a.get("address"):
                ns.ip = a["address"]

    def _adopt(self, node: dict[str, Any]) -> None:
        md = node["metadata"]
        name = md["name"]
        st = node.get("status") or {}
        ns = NodeState(name=name, index=len(self.nodes), uid=md["uid"])
        self.nodes[name] = ns
        if "node-role.kubernetes.io/control-plane" in (md.get("labels") or {}):
            ns.host_files[CANAL_CONFIG] = "# rke2-canal HelmChartConfig\n"
        self._observe_disk(ns, node)
        if not ns.ip:
            ns.ip = (md.get("annotations") or {}).get("rke2.io/internal-ip", "")
        if not ns.ip:
            prefix = (self.world.scenario.get("cluster") or {}).get("nodeIPPrefix", "10.0.0")
            ns.ip = f"{prefix}.{10 + ns.index}"
        ns.pod_cidr = (node.get("spec") or {}).get("podCIDR") or f"10.52.{ns.index}.0/24"
        info = st.get("nodeInfo") or {}
        ns.boot_id = info.get("bootID") or str(uuid.UUID(int=self._det_int(name, "boot")))
        self._write_node_status(name, initial=True)
        self._ensure_spec(node)
        self.world.proxies.register_node(name, self._proxy_handler(name))
        self._schedule_lease(ns, first=True)
        # the periodic report on the node's own phase too (a real kubelet's timer runs from
        # its own last write)
        ns.report_timer = self._after(self._report_interval() * (1 + self._phase(name, "report")),
                                      lambda: self._report(name))
        for pod in self.pods.on_node(name):
            self._handle_pod(pod)

    def _det_int(self, name: str, salt: str) -> int:
        return int.from_bytes(hashlib.sha256(f"{name}/{salt}".encode()).digest()[:16], "big")

    def _forget_node(self, name: str) -> None:
        ns = self.nodes.pop(name, None)
        if ns is None:
            return
        for t in (ns.lease_timer, ns.report_timer, ns.images_fix_timer):
            if t is not None:
                t.cancel()
        self.world.proxies.unregister_node(name)
        for key, run in list(self.runs.items()):
            if run.node == name:
                self._stop_run(run)
                del self.runs[key]
        # pod GC: pods bound to a node that no longer exists are deleted after a quarantine
        self._after(40.0, lambda: self._gc_orphans(name))

    def _gc_orphans(self, name: str) -> None:
        if name in self.nodes:
            return
        for pod in self.pods.on_node(name):
            ns_, pname = pu.key_of(pod)
            self.client.delete("v1", "Pod", pname, ns_, grace_period=0)

    def _ensure_spec(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        ns = self.nodes[name]
        if not (node.get("spec") or {}).get("podCIDR"):
            def fn(cur: dict[str, Any]) -> dict[str, Any]:
                spec = cur.setdefault("spec", {})
                spec.setdefault("podCIDR", ns.pod_cidr)
                spec.setdefault("podCIDRs", [ns.pod_cidr])
                return cur
            pu.ignore_missing(lambda: self.client.modify("v1", "Node", name, fn))
        self._sync_unschedulable_taint(node)

    def _sync_unschedulable_taint(self, node: dict[str, Any]) -> None:
        """The node-lifecycle controller's taint for cordoned nodes."""
        spec = node.get("spec") or {}
        want = bool(spec.get("unschedulable"))
        has = any(t.get("key") == UNSCHEDULABLE and t.get("effect") == "NoSchedule"
                  for t in spec.get("taints") or [])
        if want == has:
            return
        now = self._now()

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            cspec = cur.setdefault("spec", {})
            w = bool(cspec.get("unschedulable"))
            taints = [t for t in cspec.get("taints") or []
                      if not (t.get("key") == UNSCHEDULABLE and t.get("effect") == "NoSchedule")]
            if w:
                taints.append({"key": UNSCHEDULABLE, "effect": "NoSchedule", "timeAdded": now})
            if taints:
                cspec["taints"] = taints
            else:
                cspec.pop("taints", None)
            return cur

        pu.ignore_missing(lambda: self.client.modify("v1", "Node", node["metadata"]["name"], fn))

    def _set_unreachable_taints(self, name: str, on: bool, no_execute: bool = True) -> None:
        now = self._now()

        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            cspec = cur.setdefault("spec", {})
            taints = [t for t in cspec.get("taints") or [] if t.get("key") != UNREACHABLE]
            if on:
                taints.append({"key": UNREACHABLE, "effect": "NoSchedule", "timeAdded": now})
                if no_execute:
                    taints.append({"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": now})
            if taints:
                cspec["taints"] = taints
            else:
                cspec.pop("taints", None)
            return cur

        pu.ignore_missing(lambda: self.client.modify("v1", "Node", name, fn))

    def _node_conditions(self, ns: NodeState, conds: list[dict[str, Any]], now: str,
                         heartbeat: bool) -> None:
        hb = now if heartbeat else None
        if ns.down:
            for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready"):
                pu.set_condition(conds, t, "Unknown", "NodeStatusUnknown",
                                 "Kubelet stopped posting node status.", now, hb)
            return
        fs = self.node_fs(ns.name)
        pressure = fs["availableBytes"] < 0.10 * fs["capacityBytes"]
        pu.set_condition(conds, "MemoryPressure", "False", "KubeletHasSufficientMemory",
                         "kubelet has sufficient memory available", now, hb)
        if pressure:
            pu.set_condition(conds, "DiskPressure", "True", "KubeletHasDiskPressure",
                             "kubelet has disk pressure", now, hb)
        else:
            pu.set_condition(conds, "DiskPressure", "False", "KubeletHasNoDiskPressure",
                             "kubelet has no disk pressure", now, hb)
        pu.set_condition(conds, "PIDPressure", "False", "KubeletHasSufficientPID",
                         "kubelet has sufficient PID available", now, hb)
        pu.set_condition(conds, "Ready", "True", "KubeletReady",
                         "kubelet is posting ready status", now, hb)

    def _write_node_status(self, name: str, initial: bool = False,
                           heartbeat: bool = False) -> None:
        ns = self.nodes.get(name)
        if ns is None:
            return
        now = self._now()

        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            st = cur.setdefault("status", {})
            cap = st.setdefault("capacity", {})
            for k, v in DEFAULT_CAPACITY.items():
                cap.setdefault(k, v)
            alloc = st.setdefault("allocatable", {})
            for k, v in cap.items():
                alloc.setdefault(k, v)
            info = st.setdefault("nodeInfo", {})
            for k, v in self._default_info().items():
                if not info.get(k):
                    info[k] = v
            if info.get("machineID") == "":
                info["machineID"] = f"{self._det_int(name, 'machine'):032x}"
            if info.get("systemUUID") == "":
                info["systemUUID"] = str(uuid.UUID(int=self._det_int(name, "system")))
            if initial and info.get("bootID"):
                ns.boot_id = info["bootID"]
            info["bootID"] = ns.boot_id
            info.update(ns.pending_info)
            addrs = st.get("addresses") or []
            if not any(a.get("type") == "InternalIP" for a in addrs):
                addrs = [{"type": "InternalIP", "address": ns.ip}, *addrs]
            if not any(a.get("type") == "Hostname" for a in addrs):
                addrs.append({"type": "Hostname", "address": name})
            st["addresses"] = addrs
            st.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": KUBELET_PORT}})
            if initial:
                # the Node as stored now: a Node created with a status has it written right
                # after the create, which the informer may not have shown us yet
                self._seed_images(ns, cur)
            st["images"] = ns.images_status()
            conds = st.setdefault("conditions", [])
            self._node_conditions(ns, conds, now, heartbeat or initial)
            return cur

        res = pu.ignore_missing(lambda: self.client.modify("v1", "Node", name, fn,
                                                           subresource="status",
                                                           copy_result=False))
        if res is not None:
            if initial:
                self._observe_disk(ns, res)
            ns.written_rv = int(res["metadata"].get("resourceVersion") or 0)
        ns.pending_info = {}

    def _report(self, name: str) -> None:
        ns = self.nodes.get(name)
        if ns is None:
            return
        if not ns.down:
            self._write_node_status(name, heartbeat=True)
        ns.report_timer = self._after(self._report_interval(), lambda: self._report(name))

    # ------------------------------------------------------------------ leases
    def _phase(self, name: str, salt: str) -> float:
        """A fraction in [0, 1), fixed per node: where in a period this node's timer runs."""
        return (self._det_int(name, salt) % 4096) / 4096

    def _schedule_lease(self, ns: NodeState, first: bool = False) -> None:
        """The first renewal at once (the Lease exists as the kubelet starts), the next one
        on the node's phase, then every interval."""
        interval = self._lease_interval()
        if first:
            delay = 0.0
            ns.lease_phase = interval * self._phase(ns.name, "lease")
        else:
            delay = interval + ns.lease_phase
            ns.lease_phase = 0.0
        ns.lease_timer = self._after(delay, lambda: self._renew(ns.name))

    def _renew(self, name: str) -> None:
        ns = self.nodes.get(name)
        if ns is None or ns.down:
            return
        now = self.clock.micro_timestamp()

        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            spec = cur.setdefault("spec", {})
            spec["holderIdentity"] = name
            spec["leaseDurationSeconds"] = LEASE_DURATION_S
            spec["renewTime"] = now
            return cur

        try:
            self.client.modify("coordination.k8s.io/v1", "Lease", name, fn, LEASE_NS)
        except errors.ApiError as exc:
            if exc.code != 404:
                raise
            self._create_lease(name, now)
        self._schedule_lease(ns)

    def _create_lease(self, name: str, now: str) -> None:
        node = self.nodes_inf.get("", name)
        if self.client.try_get("v1", "Namespace", LEASE_NS) is None:
            try:
                self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": LEASE_NS}})
            except errors.ApiError as exc:
                if exc.code != 409:
                    raise
        md: dict[str, Any] = {"name": name, "namespace": LEASE_NS}
        if node is not None:
            md["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name,
                                      "uid": node["metadata"]["uid"]}]
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": md,
                 "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_S,
                          "acquireTime": now, "renewTime": now}}
        try:
            self.client.create(lease, LEASE_NS)
        except errors.ApiError as exc:
            if exc.code != 409:
                raise

    # ------------------------------------------------------------------ images & disk
    def has_image(self, node: str, image: str) -> bool:
        """Whether the node's image store has ``image`` (under any of its names)."""
        ns = self.nodes.get(node)
        return ns is not None and normalize_image(image) in ns.image_names

    def images(self, node: str) -> list[Image]:
        """The node's whole image store (``crictl images``), in the order the images came:
        (names, size in bytes) each. Empty for a node this kubelet does not run."""
        ns = self.nodes.get(node)
        return list(ns.images) if ns is not None else []

    def image_size(self, image: str) -> int:
        return self.image_sizes.get(normalize_image(image)) or default_image_size(image)

    def pull_seconds(self, node: str, images: list[str]) -> float:
        """Simulated time to pull the images a node lacks."""
        missing = {normalize_image(i) for i in images if not self.has_image(node, i)}
        total = sum(self.image_size(i) for i in missing)
        return total / MIB / max(self.timings.image_pull_mib_s, 1e-9)

    def add_images(self, node: str, images: list[tuple[str, int]] | list[str]) -> list[str]:
        """Add images to a node's store (a pull, ``ctr import``); returns the names added."""
        ns = self.nodes.get(node)
        if ns is None:
            return []
        added: list[str] = []
        store = list(ns.images)
        known = set(ns.image_names)
        for item in images:
            name, size = (item, self.image_size(item)) if isinstance(item, str) else item
            if normalize_image(name) in known:
                continue
            store.append(((name,), int(size)))
            known.add(normalize_image(name))
            added.append(name)
        if added:
            ns.set_images(store)
            self._mark_node(node)
        return added

    def remove_images(self, node: str, names: list[str]) -> list[str]:
        """Remove images (as ``crictl rmi`` would); returns the names removed."""
        ns = self.nodes.get(node)
        if ns is None:
            return []
        drop = {normalize_image(n) for n in names}
        kept, removed = [], []
        for entry in ns.images:
            norm = {normalize_image(n) for n in entry[0]}
            if norm & drop:
                removed.append(entry[0][0] if entry[0] else "")
            else:
                kept.append(entry)
        if removed:
            ns.set_images(kept)
            self._mark_node(node)
        return removed

    def node_fs(self, node: str) -> dict[str, int]:
        ns = self.nodes.get(node)
        if ns is None:
            return {"capacityBytes": 0, "usedBytes": 0, "availableBytes": 0}
        if ns.disk_fault_pct is None:
            spec = self.world.faults.match("disk_nearly_full", node=node)
            if spec is not None:
                ns.disk_fault_pct = float(spec.get("percent", 90))
        cap = ns.fs_capacity
        used = ns.base_used + ns.image_bytes()
        if ns.disk_fault_pct is not None:
            used = max(used, int(cap * ns.disk_fault_pct / 100.0))
        used = min(used, cap)
        return {"capacityBytes": cap, "usedBytes": used, "availableBytes": cap - used}

    def _proxy_handler(self, node: str) -> Any:
        def handler(method: str, path: str, query: str, headers: dict[str, str],
                    body: bytes) -> tuple[int, dict[str, str], bytes]:
            p = urlsplit(path).path.rstrip("/") or "/"
            ctype = {"Content-Type": "application/json"}
            if node not in self.nodes:
                return 503, {"Content-Type": "text/plain"}, b"node not found\n"
            if self.nodes[node].down:
                return 502, {"Content-Type": "text/plain"}, (
                    f"dial tcp {self.nodes[node].ip}:{KUBELET_PORT}: connect: "
                    "no route to host\n").encode()
            if p in ("/healthz", "/livez", "/readyz"):
                return 200, {"Content-Type": "text/plain"}, b"ok"
            if p == "/configz":
                return 200, ctype, json.dumps({"kubeletconfig": KUBELET_CONFIG}).encode()
            if p == "/stats/summary":
                return 200, ctype, json.dumps(self._summary(node)).encode()
            if p == "/pods":
                items = [self.pods.get(*k) for k in self.pods.by_node.get(node, ())]
                return 200, ctype, json.dumps({"kind": "PodList", "apiVersion": "v1",
                                               "items": [i for i in items if i]}).encode()
            return 404, {"Content-Type": "text/plain"}, b"404 page not found\n"
        return handler

    def _summary(self, node: str) -> dict[str, Any]:
        fs = self.node_fs(node)
        ns = self.nodes[node]
        now = self._now()
        img = ns.image_bytes()
        fsd = {"time": now, **fs, "inodesFree": 14_000_000, "inodes": 16_000_000,
               "inodesUsed": 2_000_000}
        imagefs = {"time": now, "capacityBytes": fs["capacityBytes"],
                   "availableBytes": fs["availableBytes"], "usedBytes": img,
                   "inodesFree": 14_000_000, "inodes": 16_000_000, "inodesUsed": 2_000_000}
        pods = []
        for k in sorted(self.pods.by_node.get(node, ())):
            run = self.runs.get(k)
            if run is None:
                continue
            pods.append({"podRef": {"name": k[1], "namespace": k[0], "uid": run.uid},
                         "startTime": run.start_time,
                         "containers": [{"name": c.name, "startTime": c.started_at}
                                        for c in run.containers if c.state == "running"]})
        return {"node": {"nodeName": node, "startTime": now, "fs": fsd,
                         "runtime": {"imageFs": imagefs, "containerFs": imagefs},
                         "systemContainers": []}, "pods": pods}

    # ------------------------------------------------------------------ coalesced writes
    def _mark_node(self, node: str) -> None:
        self._dirty_nodes.add(node)
        self._schedule_flush()

    def _mark_pod(self, key: pu.Key) -> None:
        self._dirty_pods.add(key)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.world.runtime.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        nodes, self._dirty_nodes = sorted(self._dirty_nodes), set()
        pods, self._dirty_pods = sorted(self._dirty_pods), set()
        for n in nodes:
            self._write_node_status(n)
        for k in pods:
            run = self.runs.get(k)
            if run is not None:
                self._write_pod_status(run)

    # ------------------------------------------------------------------ pods
    def _on_pod(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = pu.key_of(obj)
        if type_ == "DELETED":
            run = self.runs.pop(key, None)
            if run is not None:
                self._stop_run(run)
            self.done_uids.discard(obj["metadata"].get("uid", ""))
            podfs.drop_pod(self.world, obj["metadata"].get("uid", ""))
            for c in (obj.get("spec") or {}).get("initContainers") or []:
                self.logs.pop((key[0], key[1], c.get("name", "")), None)
            for c in (obj.get("spec") or {}).get("containers") or []:
                self.logs.pop((key[0], key[1], c.get("name", "")), None)
            return
        self._handle_pod(obj)

    def _handle_pod(self, pod: dict[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        ns = self.nodes.get(node or "")
        if ns is None:
            return
        key = pu.key_of(pod)
        uid = pod["metadata"]["uid"]
        run = self.runs.get(key)
        if run is not None and run.uid != uid:
            self._stop_run(run)
            del self.runs[key]
            run = None
        if pu.is_deleting(pod):
            if ns.down:
                return  # stays Terminating until the node's kubelet is back
            if run is None:
                self._after(0.0, lambda: self._final_delete(key, uid))
            elif not run.stopping:
                self._begin_stop(run, pod)
            return
        if run is not None:
            run.pod = pod
            return
        if pu.is_terminal(pod) or uid in self.done_uids or ns.down:
            return
        self._start(pod, ns)

    def _final_delete(self, key: pu.Key, uid: str) -> None:
        cur = self.pods.get(*key)
        if cur is None or cur["metadata"]["uid"] != uid:
            return
        self.runs.pop(key, None)
        self.world.store.finish_graceful_delete(self.pod_rt, key[0], key[1])

    def _begin_stop(self, run: PodRun, pod: dict[str, Any]) -> None:
        run.stopping = True
        # SIGTERM: a program that is not modelled is killed when the grace period ends
        lingering = any(c.state == "running" and c.unmodelled for c in run.all())
        self._stop_run(run)
        grace = pod["metadata"].get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        delay = float(grace) if lingering else min(float(grace), self.timings.pod_stop_s)
        key, uid = run.key, run.uid
        self._after(delay, lambda: self._final_delete(key, uid))

    def _stop_run(self, run: PodRun) -> None:
        for t in run.timers:
            t.cancel()
        run.timers.clear()
        for c in run.all():
            self._close_container(c)

    def _close_container(self, c: ContainerRun) -> None:
        if c.timer is not None:
            c.timer.cancel()
            c.timer = None
        if c.gen is not None:
            gen, c.gen = c.gen, None
            try:
                gen.close()
            except Exception:  # noqa: BLE001 - a program's cleanup must not break us
                log.warning("program close failed: %s", traceback.format_exc())

    def _start(self, pod: dict[str, Any], ns: NodeState) -> None:
        spec = pod.get("spec") or {}
        key = pu.key_of(pod)
        inits = [ContainerRun(c.get("name", ""), c.get("image", ""), c, init=True,
                              reason="PodInitializing")
                 for c in spec.get("initContainers") or []]
        mains = [ContainerRun(c.get("name", ""), c.get("image", ""), c,
                              reason="PodInitializing" if inits else "ContainerCreating")
                 for c in spec.get("containers") or []]
        if inits:
            inits[0].reason = "ContainerCreating"
        run = PodRun(key=key, uid=pod["metadata"]["uid"], node=ns.name, pod=pod,
                     containers=mains, inits=inits, start_time=self._now())
        if spec.get("hostNetwork"):
            run.ip = ns.ip
        else:
            base = ns.pod_cidr.split("/")[0].rsplit(".", 1)[0]
            run.ip = f"{base}.{ns.next_ip}"
            ns.next_ip = 2 + (ns.next_ip - 1) % 253
        self.runs[key] = run
        self.stats["pods_started"] += 1
        self._write_pod_status(run)
        first = inits[:1] if inits else mains
        self._prepare(run, first)

    def _prepare(self, run: PodRun, conts: list[ContainerRun]) -> None:
        """Pull missing images, then start the containers after ``pod_start_s``."""
        images = [c.image for c in conts]
        pull = self.pull_seconds(run.node, images)
        if pull > 0:
            missing = sorted({i for i in images if not self.has_image(run.node, i)})
            self._pod_event(run, "Normal", "Pulling", f'Pulling image "{missing[0]}"')

            def pulled() -> None:
                self.stats["image_pulls"] += len(missing)
                self.add_images(run.node, missing)
                self.world.timeline.count("image_pulls", len(missing))
                self._pod_event(run, "Normal", "Pulled",
                                f'Successfully pulled image "{missing[0]}" in {pull:.1f}s')
                self._start_after(run, conts, self.timings.pod_start_s)

            run.timers.append(self._after(pull, pulled))
        else:
            self._start_after(run, conts, self.timings.pod_start_s)

    def _start_after(self, run: PodRun, conts: list[ContainerRun], delay: float) -> None:
        def go() -> None:
            if self.runs.get(run.key) is not run or run.stopping:
                return
            for c in conts:
                self._start_container(run, c)
            self._mark_pod(run.key)
        run.timers.append(self._after(delay, go))

    def _fault_ctx(self, run: PodRun, c: ContainerRun) -> dict[str, Any]:
        md = run.pod["metadata"]
        labels = md.get("labels") or {}
        ref = pu.controller_ref(run.pod) or {}
        ctx = {"namespace": run.key[0], "pod": run.key[1], "container": c.name,
               "image": c.image, "node": run.node, "owner": ref.get("name", ""),
               "owner_kind": ref.get("kind", "")}
        job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
        if job:
            ctx["job"] = job
        return ctx

    def _start_container(self, run: PodRun, c: ContainerRun) -> None:
        now = self._now()
        c.state = "running"
        c.reason = ""
        c.started_at = now
        c.container_id = "containerd://" + hashlib.sha256(
            f"{run.uid}/{c.name}/{c.restarts}".encode()).hexdigest()
        probe = c.spec.get("readinessProbe") or {}
        c.probe_ok = c.probe_fail = 0
        self._run_program(run, c)
        if c.init:
            c.ready = False
        elif probe:
            c.ready = False
            delay = float(probe.get("initialDelaySeconds") or 0)
            restarts = c.restarts
            run.timers.append(self._after(delay, lambda: self._probe(run, c, restarts)))
        else:
            c.ready = True

    # ------------------------------------------------------------------ readiness probes
    def _probe(self, run: PodRun, c: ContainerRun, restarts: int) -> None:
        if self.runs.get(run.key) is not run or run.stopping or c.state != "running" or \
                c.restarts != restarts:
            return
        probe = c.spec.get("readinessProbe") or {}
        ok, detail = self._probe_once(run, c, probe)
        if ok is None:
            # an unmodelled server (or a probe kind we cannot run): assumed to pass
            if not c.ready:
                c.ready = True
                self._mark_pod(run.key)
            return
        if ok:
            c.probe_ok += 1
            c.probe_fail = 0
            if not c.ready and c.probe_ok >= int(probe.get("successThreshold") or 1):
                c.ready = True
                self._mark_pod(run.key)
        else:
            c.probe_fail += 1
            c.probe_ok = 0
            self._pod_event(run, "Warning", "Unhealthy", f"Readiness probe failed: {detail}")
            if c.ready and c.probe_fail >= int(probe.get("failureThreshold") or 3):
                c.ready = False
                self._mark_pod(run.key)
        period = float(probe.get("periodSeconds") or 10)
        run.timers.append(self._after(period, lambda: self._probe(run, c, restarts)))

    def _probe_once(self, run: PodRun, c: ContainerRun, probe: dict[str, Any]
                    ) -> tuple[bool | None, str]:
        """(passed, failure text); passed None when the probe cannot be judged here."""
        action = probe.get("httpGet") or probe.get("tcpSocket")
        if action is None:
            return None, ""   # exec/grpc probes: the simulated programs answer no commands
        port = action.get("port")
        if isinstance(port, str) and not port.isdigit():
            port = next((cp.get("containerPort") for cp in c.spec.get("ports") or []
                         if cp.get("name") == port), None)
        if port is None:
            return False, f"strconv.Atoi: parsing {action.get('port')!r}: invalid syntax"
        handler = self.world.proxies.pod_handler(run.key[0], run.key[1], int(port))
        if handler is None:
            if not c.program:
                return None, ""
            verb = "Get" if "httpGet" in probe else "dial tcp"
            return False, (f'{verb} "http://{run.ip}:{port}{action.get("path", "")}": dial tcp '
                           f"{run.ip}:{port}: connect: connection refused"
                           if "httpGet" in probe else
                           f"dial tcp {run.ip}:{port}: connect: connection refused")
        if "tcpSocket" in probe:
            return True, ""
        path = str(action.get("path") or "/")
        try:
            status, _, _ = handler("GET", path, "", {"User-Agent": "kube-probe/1.30"}, b"")
        except Exception as exc:  # noqa: BLE001 - a crashing server fails the probe
            return False, f"Get \"http://{run.ip}:{port}{path}\": {exc}"
        if 200 <= int(status) < 400:
            return True, ""
        return False, f"HTTP probe failed with statuscode: {status}"

    def _run_program(self, run: PodRun, c: ContainerRun) -> None:
        ctx = self._fault_ctx(run, c)
        faults = self.world.faults
        fault = faults.match("pod_fail", **ctx)
        if fault is None and "job" in ctx:
            fault = faults.match("job_fail", **ctx)
        if fault is not None:
            code = int(fault.get("exit_code", 1))
            msg = fault.get("message") or f"simulated failure (exit code {code})"
            self._log(run, c, msg)
            c.timer = self._after(float(fault.get("seconds", 1.0)),
                                  lambda: self._container_exited(run, c, code))
            return
        if "job" in ctx and faults.match("job_hang", **ctx) is not None:
            return  # runs forever
        found = REGISTRY.find(c.image, list(c.spec.get("command") or []),
                              list(c.spec.get("args") or []))
        if found is None:
            self._unmodelled(run, c)
            return
        name, program = found
        c.program = name
        c.unmodelled = ""
        pctx = ProgramContext(world=self.world, client=self.world.client_for(f"program/{name}"),
                              pod=run.pod, container=c.spec, node=run.node,
                              env=self._env(run, c), started_at=self.world.clock.now())
        pctx.logs = self.logs.setdefault((run.key[0], run.key[1], c.name), [])
        try:
            c.gen = program(pctx)
        except Exception:  # noqa: BLE001
            self._log(run, c, traceback.format_exc())
            c.timer = self._after(0.0, lambda: self._container_exited(run, c, 1))
            return
        c.timer = self._after(0.0, lambda: self._step(run, c))

    def _unmodelled(self, run: PodRun, c: ContainerRun) -> None:
        """No program models this container: end it like a short program, or keep it
        serving, and say so (pod event, report)."""
        argv = list(c.spec.get("command") or []) + list(c.spec.get("args") or [])
        text = " ".join(argv)
        ref = pu.controller_ref(run.pod) or {}
        policy = (run.pod.get("spec") or {}).get("restartPolicy") or "Always"
        long_running = any(m in text for m in LONG_RUNNING_MARKERS)
        if c.init or ((ref.get("kind") == "Job" or policy != "Always") and not long_running):
            kind = "short"
        else:
            kind = "serving"
        c.program = ""
        c.unmodelled = kind
        key = (c.image, json.dumps(argv), kind)
        entry = self.unmodelled.get(key)
        if entry is None:
            entry = self.unmodelled[key] = {
                "image": c.image, "command": argv, "kind": kind, "containers": 0,
                "example": f"{run.key[0]}/{run.key[1]}:{c.name}"}
            self.world.timeline.record("program_not_modelled", image=c.image, command=argv,
                                       behaviour=kind, pod=f"{run.key[0]}/{run.key[1]}",
                                       container=c.name)
        entry["containers"] += 1
        if c.restarts == 0:
            what = (f"exits 0 after {self.timings.short_program_s:g}s" if kind == "short"
                    else "keeps running until stopped")
            self._pod_event(run, "Warning", NOT_MODELLED_REASON,
                            f'harvester-sim does not model the program of container "{c.name}"'
                            f' (image "{c.image}", command {json.dumps(argv)}): it {what}')
        if kind == "short":
            self._log(run, c, "harvester-sim: program not modelled, exiting 0")
            c.timer = self._after(self.timings.short_program_s,
                                  lambda: self._container_exited(run, c, 0))

    def unmodelled_programs(self) -> list[dict[str, Any]]:
        """Containers that ran without a modelled program (image, command, kind, count)."""
        return [dict(v) for _, v in sorted(self.unmodelled.items())]

    def _step(self, run: PodRun, c: ContainerRun) -> None:
        c.timer = None
        gen = c.gen
        if gen is None or self.runs.get(run.key) is not run:
            return
        try:
            delay = next(gen)
        except StopIteration as stop:
            c.gen = None
            code = stop.value if isinstance(stop.value, int) else 0
            self._container_exited(run, c, code)
            return
        except Exception:  # noqa: BLE001 - a crashing program is a crashing container
            c.gen = None
            self._log(run, c, traceback.format_exc().rstrip())
            self._container_exited(run, c, 1)
            return
        c.timer = self._after(float(delay or 0.0), lambda: self._step(run, c))

    def _log(self, run: PodRun, c: ContainerRun, line: str) -> None:
        self.logs.setdefault((run.key[0], run.key[1], c.name), []).append(line)

    def _env(self, run: PodRun, c: ContainerRun) -> dict[str, str]:
        pod = run.pod
        ns_ = run.key[0]
        env: dict[str, str] = {}
        for src in c.spec.get("envFrom") or []:
            prefix = src.get("prefix", "")
            if src.get("configMapRef"):
                cm = self.client.try_get("v1", "ConfigMap", src["configMapRef"].get("name", ""),
                                         ns_)
                for k, v in ((cm or {}).get("data") or {}).items():
                    env[prefix + k] = str(v)
            if src.get("secretRef"):
                sec = self.client.try_get("v1", "Secret", src["secretRef"].get("name", ""), ns_)
                for k, v in ((sec or {}).get("data") or {}).items():
                    env[prefix + k] = _b64(v)
        for e in c.spec.get("env") or []:
            name = e.get("name", "")
            if "value" in e:
                env[name] = str(e.get("value") or "")
                continue
            vf = e.get("valueFrom") or {}
            if vf.get("fieldRef"):
                env[name] = self._field_ref(run, vf["fieldRef"].get("fieldPath", ""))
            elif vf.get("configMapKeyRef"):
                r = vf["configMapKeyRef"]
                cm = self.client.try_get("v1", "ConfigMap", r.get("name", ""), ns_)
                env[name] = str(((cm or {}).get("data") or {}).get(r.get("key", ""), ""))
            elif vf.get("secretKeyRef"):
                r = vf["secretKeyRef"]
                sec = self.client.try_get("v1", "Secret", r.get("name", ""), ns_)
                env[name] = _b64(((sec or {}).get("data") or {}).get(r.get("key", ""), ""))
        del pod
        return env

    def _field_ref(self, run: PodRun, path: str) -> str:
        md = run.pod["metadata"]
        ns = self.nodes.get(run.node)
        simple = {"metadata.name": md["name"], "metadata.namespace": md.get("namespace", ""),
                  "metadata.uid": md.get("uid", ""), "spec.nodeName": run.node,
                  "spec.serviceAccountName": (run.pod.get("spec") or {}).get(
                      "serviceAccountName", "default"),
                  "status.podIP": run.ip, "status.hostIP": ns.ip if ns else ""}
        if path in simple:
            return str(simple[path])
        for prefix, src in (("metadata.labels", md.get("labels") or {}),
                            ("metadata.annotations", md.get("annotations") or {})):
            if path.startswith(prefix + "['") and path.endswith("']"):
                return str(src.get(path[len(prefix) + 2:-2], ""))
        return ""

    def _container_exited(self, run: PodRun, c: ContainerRun, code: int) -> None:
        if self.runs.get(run.key) is not run or run.stopping:
            return
        self._close_container(c)
        c.state = "terminated"
        c.ready = False
        c.exit_code = int(code)
        c.reason = "Completed" if code == 0 else "Error"
        c.finished_at = self._now()
        policy = (run.pod.get("spec") or {}).get("restartPolicy") or "Always"
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        if c.init:
            if code == 0:
                idx = run.inits.index(c)
                if idx + 1 < len(run.inits):
                    nxt = run.inits[idx + 1]
                    nxt.reason = "ContainerCreating"
                    self._prepare(run, [nxt])
                else:
                    run.init_done = True
                    for m in run.containers:
                        m.reason = "ContainerCreating"
                    self._prepare(run, run.containers)
            elif policy == "Never":
                self._terminate_pod(run, "Failed")
                return
            else:
                self._restart(run, c)
            self._mark_pod(run.key)
            return
        if restart:
            self._restart(run, c)
            self._mark_pod(run.key)
            return
        if all(m.state == "terminated" for m in run.containers):
            ok = all(m.exit_code == 0 for m in run.containers)
            self._terminate_pod(run, "Succeeded" if ok else "Failed")
            return
        self._mark_pod(run.key)

    def _restart(self, run: PodRun, c: ContainerRun) -> None:
        backoff = min(RESTART_BACKOFF_S * (2 ** min(c.restarts, 10)), RESTART_BACKOFF_MAX_S)
        c.last_term = {"terminated": {"exitCode": c.exit_code, "reason": c.reason,
                                      "startedAt": c.started_at, "finishedAt": c.finished_at,
                                      "containerID": c.container_id}}
        c.restarts += 1
        c.state = "waiting"
        c.reason = "CrashLoopBackOff" if c.exit_code != 0 else "Completed"

        def again() -> None:
            if self.runs.get(run.key) is run and not run.stopping:
                self._start_container(run, c)
                self._mark_pod(run.key)
        c.timer = self._after(backoff, again)

    def _terminate_pod(self, run: PodRun, phase: str, reason: str | None = None,
                       message: str | None = None) -> None:
        run.phase = phase
        run.reason = reason
        run.message = message
        self._stop_run(run)
        self.done_uids.add(run.uid)
        self._write_pod_status(run)
        self.runs.pop(run.key, None)

    # ------------------------------------------------------------------ pod status
    def _container_status(self, run: PodRun, c: ContainerRun) -> dict[str, Any]:
        st: dict[str, Any] = {"name": c.name, "image": c.image, "imageID": "",
                              "ready": c.ready, "restartCount": c.restarts,
                              "started": c.state == "running"}
        if c.state != "waiting" or c.restarts:
            st["imageID"] = normalize_image(c.image).split("@")[0].rsplit(":", 1)[0] + \
                "@sha256:" + hashlib.sha256(normalize_image(c.image).encode()).hexdigest()
        if c.container_id and c.state != "waiting":
            st["containerID"] = c.container_id
        if c.state == "running":
            st["state"] = {"running": {"startedAt": c.started_at}}
        elif c.state == "terminated":
            st["state"] = {"terminated": {"exitCode": c.exit_code, "reason": c.reason,
                                          "startedAt": c.started_at or c.finished_at,
                                          "finishedAt": c.finished_at,
                                          "containerID": c.container_id}}
        else:
            w: dict[str, Any] = {"reason": c.reason}
            if c.reason == "CrashLoopBackOff":
                w["message"] = (f"back-off {int(RESTART_BACKOFF_S)}s restarting failed "
                                f"container={c.name} pod={run.key[1]}_{run.key[0]}({run.uid})")
            st["state"] = {"waiting": w}
        st["lastState"] = c.last_term or {}
        return st

    def _pod_phase(self, run: PodRun) -> str:
        if run.phase in ("Succeeded", "Failed"):
            return run.phase
        if run.init_done or not run.inits:
            if any(c.state == "running" for c in run.containers) or any(
                    c.restarts for c in run.containers):
                return "Running"
        return "Pending"

    def _write_pod_status(self, run: PodRun) -> None:
        ns = self.nodes.get(run.node)
        now = self._now()
        phase = self._pod_phase(run)
        terminal = phase in ("Succeeded", "Failed")
        inits_done = run.init_done or not run.inits or terminal
        not_ready = [c.name for c in run.containers if not c.ready]
        pending_inits = [c.name for c in run.inits if c.state != "terminated" or c.exit_code]

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            if cur["metadata"].get("uid") != run.uid:
                return None
            st = cur.setdefault("status", {})
            st["phase"] = phase
            st["hostIP"] = ns.ip if ns else st.get("hostIP", "")
            st["hostIPs"] = [{"ip": st["hostIP"]}]
            if run.ip:
                st["podIP"] = run.ip
                st["podIPs"] = [{"ip": run.ip}]
            st["startTime"] = st.get("startTime") or run.start_time
            st["qosClass"] = _qos(cur)
            for k, v in (("reason", run.reason), ("message", run.message)):
                if v is None:
                    st.pop(k, None)
                else:
                    st[k] = v
            conds = st.setdefault("conditions", [])
            pu.set_condition(conds, "PodReadyToStartContainers", "False" if terminal and
                             run.phase == "Failed" and run.reason == GNS_REASON else "True",
                             now=now, probe=False)
            if inits_done:
                pu.set_condition(conds, "Initialized", "True", now=now)
            else:
                pu.set_condition(conds, "Initialized", "False", "ContainersNotInitialized",
                                 f"containers with incomplete status: [{' '.join(pending_inits)}]",
                                 now=now)
            if terminal:
                for t in ("Ready", "ContainersReady"):
                    pu.set_condition(conds, t, "False", "PodCompleted", None, now)
            elif not_ready:
                msg = f"containers with unready status: [{' '.join(not_ready)}]"
                for t in ("Ready", "ContainersReady"):
                    pu.set_condition(conds, t, "False", "ContainersNotReady", msg, now)
            else:
                for t in ("Ready", "ContainersReady"):
                    pu.set_condition(conds, t, "True", None, None, now)
            for c in conds:
                c.setdefault("lastProbeTime", None)
            order = {"PodReadyToStartContainers": 0, "Initialized": 1, "Ready": 2,
                     "ContainersReady": 3, "PodScheduled": 4}
            conds.sort(key=lambda c: order.get(c.get("type", ""), 5))
            if run.inits:
                st["initContainerStatuses"] = [self._container_status(run, c)
                                               for c in run.inits]
            st["containerStatuses"] = [self._container_status(run, c) for c in run.containers]
            return cur

        pu.ignore_missing(lambda: self.client.modify("v1", "Pod", run.key[1], fn, run.key[0],
                                                     subresource="status"))

    def _pod_event(self, run: PodRun, type_: str, reason: str, message: str) -> None:
        pu.record_event(self.client, run.pod, type_, reason, message, "kubelet", run.node,
                        self.clock)

    # ------------------------------------------------------------------ logs
    def pod_logs(self, namespace: str, pod: str, container: str | None = None) -> str:
        if not container:
            p = self.pods.get(namespace, pod)
            conts = ((p or {}).get("spec") or {}).get("containers") or []
            container = conts[0].get("name", "") if conts else ""
        lines = self.logs.get((namespace, pod, container or ""), [])
        return "".join(line + "\n" for line in list(lines))

    # ------------------------------------------------------------------ host model
    def host_files(self, node: str) -> dict[str, str] | None:
        """The node's host files (live dict: programs edit it), None for an unknown node."""
        ns = self.nodes.get(node)
        return None if ns is None else ns.host_files

    def restart_agent(self, node: str) -> bool:
        """``systemctl daemon-reload && systemctl restart rancher-system-agent``: the agent
        picks up the ``EnvironmentFile``s its drop-ins name (``-`` prefix: optional)."""
        ns = self.nodes.get(node)
        if ns is None or ns.down:
            return False
        env: dict[str, str] = {}
        for path in sorted(p for p in ns.host_files if p.startswith(AGENT_DROPIN_DIR + "/")
                           and p.endswith(".conf")):
            for line in ns.host_files[path].splitlines():
                line = line.strip()
                if not line.startswith("EnvironmentFile="):
                    continue
                ref = line.split("=", 1)[1].lstrip("-")
                for env_line in ns.host_files.get(ref, "").splitlines():
                    if "=" in env_line and not env_line.lstrip().startswith("#"):
                        k, v = env_line.split("=", 1)
                        env[k.strip()] = v.strip()
        ns.agent_env = env
        self.world.timeline.record("agent_restarted", node=node, env=sorted(env))
        return True

    # ------------------------------------------------------------------ reboot / restart
    def reboot(self, node: str, new_os_image: str | None = None,
               new_kubelet_version: str | None = None) -> bool:
        """Reboot a node: NotReady for ``timings.reboot_s``, every pod on it dies, then Ready
        with the new versions. Returns False when the node is unknown or already down."""
        ns = self.nodes.get(node)
        if ns is None or ns.down:
            return False
        ns.down = "reboot"
        ns.reboots += 1
        for path in [p for p in ns.host_files if p.startswith("/run/")]:
            del ns.host_files[path]
        ns.agent_env = {}
        self.stats["reboots"] += 1
        killed = self._kill_pods(node)
        self.world.timeline.record("node_reboot", node=node, pods_killed=killed,
                                   new_os_image=new_os_image,
                                   new_kubelet_version=new_kubelet_version)
        self.world.timeline.count("node_reboots")
        self.world.faults.notify("node_reboot", node=node)
        self._go_down(ns)
        info: dict[str, str] = {}
        if new_os_image:
            info["osImage"] = new_os_image
        if new_kubelet_version:
            info["kubeletVersion"] = new_kubelet_version
            info["kubeProxyVersion"] = new_kubelet_version
        if self.world.faults.match("node_never_returns", node=node) is not None:
            ns.down = "lost"
            ns.lost_info = info
            self.world.timeline.record("node_lost", node=node)
            return True
        self._after(self.timings.reboot_s, lambda: self._come_back(node, info, True))
        return True

    def repair(self, node: str) -> None:
        """The operator repaired a node that never came back from its reboot (fault
        ``node_never_returns``: a hung boot, a dead disk controller, power): it boots what
        the reboot was to boot (the OS installed before it, the kubelet it brings) and comes
        back Ready ``timings.reboot_s`` later (timeline ``node_repaired``, then
        ``node_ready``). It is the same reboot completing: no second ``node_reboot``. Any
        thread; nothing happens for a node that is not lost."""
        def run() -> None:
            ns = self.nodes.get(node)
            if ns is None or ns.down != "lost":
                return
            ns.down = "reboot"
            info, ns.lost_info = dict(ns.lost_info), {}
            self.world.timeline.record("node_repaired", node=node)
            self._after(self.timings.reboot_s, lambda: self._come_back(node, info, True))

        self.world.runtime.call_soon(run)

    def restart_kubelet(self, node: str, new_kubelet_version: str | None = None) -> bool:
        """Restart the kubelet (RKE2 upgrade): a short NotReady blip, pods keep running.

        Called for an RKE2 plan applied by rancher-system-agent: with
        ``INSTALL_RKE2_SKIP_ENABLE=true`` in the agent's environment nothing restarts."""
        ns = self.nodes.get(node)
        if ns is None or ns.down:
            return False
        if ns.agent_env.get("INSTALL_RKE2_SKIP_ENABLE") == "true":
            self.world.timeline.record("rke2_restart_skipped", node=node,
                                       new_kubelet_version=new_kubelet_version,
                                       why="rancher-system-agent runs with "
                                           "INSTALL_RKE2_SKIP_ENABLE=true")
            return False
        ns.down = "restart"
        self.world.timeline.record("kubelet_restart", node=node,
                                   new_kubelet_version=new_kubelet_version)
        self.world.timeline.count("kubelet_restarts")
        self._go_down(ns, no_execute=False)
        info: dict[str, str] = {}
        if new_kubelet_version:
            info["kubeletVersion"] = new_kubelet_version
            info["kubeProxyVersion"] = new_kubelet_version
        self._after(self.timings.rke2_restart_s, lambda: self._come_back(node, info, False))
        return True

    def _poll_faults(self) -> None:
        """Ask for ``node_not_ready`` for every node that is up (every ``FAULT_POLL_S``)."""
        self._after(FAULT_POLL_S, self._poll_faults)
        faults = self.world.faults
        if not faults.active("node_not_ready"):
            return
        for name in sorted(self.nodes):
            if self.nodes[name].down:
                continue
            spec = faults.match("node_not_ready", node=name)
            if spec is not None:
                self.stall(name, float(spec.get("seconds", 300)))

    def stall(self, node: str, seconds: float) -> bool:
        """The ``node_not_ready`` fault: the kubelet stops posting status for ``seconds``
        (hung or stopped; its containers keep running), then carries on. The node lifecycle
        controller (kubernetes ``pkg/controller/nodelifecycle``) marks every condition
        ``Unknown`` ("Kubelet stopped posting node status.") and taints the node
        ``node.kubernetes.io/unreachable`` NoSchedule and NoExecute; pods stay, nothing new
        starts there, the node proxy does not answer. Longhorn keeps the node's replicas
        (its instance manager runs on), as for a kubelet restart."""
        ns = self.nodes.get(node)
        if ns is None or ns.down:
            return False
        ns.down = "stalled"
        self._go_down(ns)
        self._after(seconds, lambda: self._come_back(node, {}, False))
        return True

    def _go_down(self, ns: NodeState, no_execute: bool = True) -> None:
        if ns.lease_timer is not None:
            ns.lease_timer.cancel()
            ns.lease_timer = None
        self._write_node_status(ns.name)
        self._set_unreachable_taints(ns.name, True, no_execute)
        self.world.timeline.record("node_not_ready", node=ns.name, why=ns.down)
        node = self.nodes_inf.get("", ns.name)
        if node is not None:
            pu.record_event(self.client, node, "Normal", "NodeNotReady",
                            f"Node {ns.name} status is now: NodeNotReady",
                            "node-controller", None, self.clock)

    def _come_back(self, node: str, info: dict[str, str], rebooted: bool) -> None:
        ns = self.nodes.get(node)
        if ns is None or ns.down in ("", "lost"):
            return
        ns.down = ""
        if rebooted:
            ns.boot_id = str(uuid.UUID(int=self._det_int(node, f"boot{ns.reboots}")))
        ns.pending_info = dict(info)
        self._write_node_status(node, heartbeat=True)
        self._set_unreachable_taints(node, False)
        self._schedule_lease(ns, first=True)
        self.world.timeline.record("node_ready", node=node, **info)
        n = self.nodes_inf.get("", node)
        if n is not None:
            if rebooted:
                pu.record_event(self.client, n, "Warning", "Rebooted",
                                f"Node {node} has been rebooted, boot id: {ns.boot_id}",
                                "kubelet", node, self.clock)
            pu.record_event(self.client, n, "Normal", "NodeReady",
                            f"Node {node} status is now: NodeReady", "kubelet", node,
                            self.clock)
        for pod in self.pods.on_node(node):
            self._handle_pod(pod)

    def _kill_pods(self, node: str) -> list[str]:
        """What a node shutdown does to its pods (graceful node shutdown semantics)."""
        killed = []
        for pod in sorted(self.pods.on_node(node), key=pu.key_of):
            key = pu.key_of(pod)
            run = self.runs.get(key)
            if pu.is_deleting(pod):
                if run is not None:
                    self._stop_run(run)
                    self.runs.pop(key, None)
                self.world.store.finish_graceful_delete(self.pod_rt, key[0], key[1])
                killed.append(f"{key[0]}/{key[1]}")
                continue
            if pu.is_terminal(pod) and run is None:
                continue
            if run is None:
                continue  # bound but never started: it starts when the node is back
            now = self._now()
            for c in run.all():
                if c.state != "terminated":
                    self._close_container(c)
                    c.state = "terminated"
                    c.ready = False
                    c.exit_code = 137
                    c.reason = "Error"
                    c.finished_at = now
            self.stats["pods_killed"] += 1
            killed.append(f"{key[0]}/{key[1]}")
            self._terminate_pod(run, "Failed", GNS_REASON, GNS_MESSAGE)
        return killed


def _b64(v: Any) -> str:
    import base64

    try:
        return base64.b64decode(str(v)).decode("utf-8", "replace")
    except ValueError:
        return ""


def _qos(pod: dict[str, Any]) -> str:
    conts = list((pod.get("spec") or {}).get("containers") or []) + list(
        (pod.get("spec") or {}).get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in conts:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and pu.parse_quantity(req[r]) !=
                                pu.parse_quantity(lim[r])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def setup(world: Any) -> Kubelet:
    return Kubelet(world)
