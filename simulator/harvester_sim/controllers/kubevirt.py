"""Simulated KubeVirt: virt-controller, virt-handler and the parts of virt-api an upgrade meets.

What it does, through the API only (see ``simulator/docs/kubevirt-longhorn.md``):

* VirtualMachine (``runStrategy`` / legacy ``running``) -> VirtualMachineInstance -> a
  ``virt-launcher-<vm>-xxxxx`` pod; VMI phases Pending -> Scheduling -> Scheduled -> Running,
  ``status.nodeName``, label ``kubevirt.io/nodeName``, conditions ``Ready`` and
  ``LiveMigratable`` (False with KubeVirt's reasons and messages); VM ``printableStatus``.
* Stopping (runStrategy Halted, a ``Stop`` state change request, or deleting the VMI) shuts
  the guest down gracefully in ``timings.vm_stop_s``.
* virt-api's eviction webhook (``store.admission``): evicting the launcher pod of a VMI whose
  eviction strategy asks for live migration is refused with 429 and marks the VMI
  (``status.evacuationNodeName``); the evacuation controller then migrates it.
* The evacuation controller also migrates the VMIs off nodes tainted ``kubevirt.io/drain``,
  bounded by ``parallel_migrations_per_cluster`` (5) and ``parallel_outbound_per_node`` (2).
* VirtualMachineInstanceMigration: Pending -> Scheduling -> Scheduled -> PreparingTarget ->
  TargetReady -> Running -> Succeeded/Failed, target pod placed honouring the VMI's
  nodeSelector/affinity plus ``spec.addedNodeSelector`` and never on the source node;
  duration = ``migration_overhead_s`` + memory / ``migration_bandwidth_mib_s``.
* virt-operator: the KubeVirt CR ``harvester-system/kubevirt`` reports the version of the
  ``virt-operator`` Deployment's image tag (the SUSE build tag Harvester ships, e.g.
  ``1.4.0-150600.5.15.1``) as ``status.observedKubeVirtVersion``, phase ``Deployed`` and
  condition ``Available`` (``AllComponentsReady``); when the chart gives the Deployment a new
  tag it reports ``Deploying`` (``targetKubeVirtVersion``, ``UpdateInProgress``) for
  ``timings.kubevirt_upgrade_s``, then the new version (kubevirt/kubevirt
  pkg/virt-operator/util/client.go conditions, api/core/v1 KubeVirtStatus).
* Version-dependent behaviour follows the observed version (without a KubeVirt CR: the
  installed release's ``kubevirt``): ``VirtualMachineInstanceMigration.spec.addedNodeSelector``
  is honoured from v1.6.0 (kubevirt/kubevirt pkg/virt-controller/watch/migration/migration.go
  at v1.6.0; the field does not exist at v1.4.x / v1.5.x, so older versions ignore it).
* VM rollout strategy ``LiveUpdate`` (KubeVirt CR ``spec.configuration.vmRolloutStrategy``,
  set by Harvester's chart from v1.6.0): a change of the VM template's ``nodeSelector`` is
  copied to the running VMI unless it is migrating (pkg/virt-controller/watch/vm/vm.go
  ``handleAffinityChangeRequest`` / ``VMNodeSelectorPatch`` at v1.5.2).
* A launcher pod that dies under a running VMI (node reboot, forced delete) fails the VMI and
  records ``vm_killed`` in the timeline; VMs with runStrategy Always/RerunOnFailure restart.

Faults: ``migration_fail`` and ``migration_hang`` (target keys ``vm`` = ``ns/name``,
``name``, ``namespace``, ``node`` = the source node, ``target``). A hung migration makes no
progress: virt-launcher aborts it after ``MigrationProgressTimeout`` (150 s) as KubeVirt does,
unless the migration object is deleted first.
Timeline: ``vm_started``, ``vm_stopped``, ``vm_killed``, ``vmi_failed``,
``vm_migration_started``/``succeeded``/``failed``, ``vm_evacuation_blocked``; counters
``vm_migrations`` (succeeded) and ``vm_migrations_failed``.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any

from ..api import errors
from ..api.errors import ApiError
from ..api.jsoncopy import json_copy
from ..scenarios.objects import INITIAL_NODE_ANNOTATION
from . import podutil as pu

log = logging.getLogger("harvester_sim.kubevirt")

Obj = dict[str, Any]
Key = tuple[str, str]

GROUP = "kubevirt.io"
API = "kubevirt.io/v1"
VM = "VirtualMachine"
VMI = "VirtualMachineInstance"
VMIM = "VirtualMachineInstanceMigration"

LAUNCHER_IMAGE = "registry.suse.com/suse/sles/15.6/virt-launcher:1.4.0-150600.5.15.1"
LAUNCHER_VERSION = "1.4.0-150600.5.15.1"
KUBEVIRT = "KubeVirt"
KUBEVIRT_NS = "harvester-system"
KUBEVIRT_NAME = "kubevirt"
VIRT_OPERATOR = "virt-operator"
ADDED_NODE_SELECTOR_SINCE = (1, 6, 0)   # kubevirt/kubevirt 6aee7891e7, first in v1.6.0
# the migration target's virt-handler drops kubevirt.io/migrationTargetNodeName once it has
# finalized the migration (pkg/virt-handler/migration-target.go, first in v1.6.0); before
# that nothing removes it: the label stays on the VMI until the next migration rewrites it
TARGET_LABEL_DROPPED_SINCE = (1, 6, 0)
FINALIZER = "kubevirt.io/virtualMachineControllerFinalize"
DRAIN_TAINT = "kubevirt.io/drain"
NODE_LABEL = "kubevirt.io/nodeName"
TARGET_NODE_LABEL = "kubevirt.io/migrationTargetNodeName"
MIGRATION_UID_LABEL = "kubevirt.io/migrationJobUID"
VMI_NAME_LABEL = "kubevirt.io/vmi-name"
EVACUATION_ANNOTATION = "kubevirt.io/evacuationMigration"
DOMAIN_ANNOTATION = "kubevirt.io/domain"
BRIDGE_MIGRATION_ANNOTATION = "kubevirt.io/allow-pod-bridge-network-live-migration"

EVICTION_WEBHOOK = ('admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" '
                    "denied the request: ")
MIGRATION_WEBHOOK = ('admission webhook "migration-create-validator.kubevirt.io" '
                     "denied the request: ")
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."

FINAL = ("Succeeded", "Failed")
MIG_ACTIVE = ("Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running")
LAUNCHER_OVERHEAD_MIB = 256


# --------------------------------------------------------------------------- helpers
def vmi_memory_mib(spec: Obj) -> float:
    dom = spec.get("domain") or {}
    res = dom.get("resources") or {}
    q = ((dom.get("memory") or {}).get("guest") or (res.get("requests") or {}).get("memory")
         or (res.get("limits") or {}).get("memory") or "1Gi")
    return pu.parse_quantity(q) / 1024 ** 2


def vmi_vcpus(spec: Obj) -> int:
    cpu = (spec.get("domain") or {}).get("cpu") or {}
    return max(1, int(cpu.get("cores", 1)) * int(cpu.get("sockets", 1)) *
               int(cpu.get("threads", 1)))


def effective_run_strategy(vm: Obj) -> str:
    spec = vm.get("spec") or {}
    if spec.get("runStrategy"):
        return str(spec["runStrategy"])
    if spec.get("running") is True:
        return "Always"
    return "Halted"


def live_migratable(vmi: Obj, pvcs: dict[str, Obj | None]) -> tuple[bool, str, str, bool]:
    """KubeVirt's verdict: (migratable, reason, message, block_migration).

    ``pvcs`` maps claim name -> PVC (or None when missing). Checks in virt-handler's order:
    disks, pod network interface, virtiofs, host devices/GPUs, SEV, SCSI reservations.
    """
    spec = vmi.get("spec") or {}
    dom = spec.get("domain") or {}
    devices = dom.get("devices") or {}
    block = False
    ro_disks = {d.get("name") for d in devices.get("disks") or []
                if "cdrom" in d or (d.get("disk") or {}).get("readonly")
                or (d.get("lun") or {}).get("readonly")}
    fs_names = {f.get("name") for f in devices.get("filesystems") or []}
    for vol in spec.get("volumes") or []:
        claim = (vol.get("persistentVolumeClaim") or {}).get("claimName") or \
            (vol.get("dataVolume") or {}).get("name")
        if claim:
            pvc = pvcs.get(claim)
            if pvc is None:
                return (False, "DisksNotLiveMigratable",
                        f"cannot migrate VMI: Unable to determine if PVC {claim} is shared, live "
                        "migration requires that all PVCs must be shared (using ReadWriteMany "
                        "access mode)", True)
            modes = (pvc.get("spec") or {}).get("accessModes") or []
            if "ReadWriteMany" not in modes:
                return (False, "DisksNotLiveMigratable",
                        f"cannot migrate VMI: PVC {claim} is not shared, live migration requires "
                        "that all PVCs must be shared (using ReadWriteMany access mode)", True)
        elif "hostDisk" in vol:
            if not (vol.get("hostDisk") or {}).get("shared"):
                return (False, "DisksNotLiveMigratable",
                        "cannot migrate VMI with non-shared HostDisk", True)
        elif vol.get("name") in fs_names or vol.get("name") in ro_disks:
            continue
        else:  # containerDisk, emptyDisk, cloudInit...: copied by block migration
            block = True
    pod_net = next((n.get("name") for n in spec.get("networks") or [] if "pod" in n), None)
    if pod_net is not None:
        iface = next((i for i in devices.get("interfaces") or [] if i.get("name") == pod_net),
                     None)
        if iface is not None and "masquerade" not in iface:
            allowed = "bridge" in iface and BRIDGE_MIGRATION_ANNOTATION in (
                (vmi.get("metadata") or {}).get("annotations") or {})
            if not allowed:
                return (False, "InterfaceNotLiveMigratable",
                        "cannot migrate VMI which does not use masquerade, bridge with "
                        f"{BRIDGE_MIGRATION_ANNOTATION} VM annotation or a migratable plugin to "
                        "connect to the pod network", block)
    if fs_names:
        return False, "VirtIOFSNotLiveMigratable", "VMI uses virtiofs", block
    if devices.get("hostDevices") or devices.get("gpus"):
        return False, "HostDeviceNotLiveMigratable", "VMI uses a PCI host devices", block
    if ((dom.get("launchSecurity") or {}).get("sev")) is not None:
        return False, "SEVNotLiveMigratable", "VMI uses SEV", block
    for d in devices.get("disks") or []:
        if (d.get("lun") or {}).get("reservation"):
            return (False, "PersistentReservationNotLiveMigratable",
                    "VMI uses SCSI persitent reservation", block)
    return True, "", "", block


def vmi_claims(spec: Obj) -> list[str]:
    out = []
    for vol in spec.get("volumes") or []:
        claim = (vol.get("persistentVolumeClaim") or {}).get("claimName") or \
            (vol.get("dataVolume") or {}).get("name")
        if claim:
            out.append(str(claim))
    return out


# --------------------------------------------------------------------------- state
@dataclass
class PodInfo:
    ns: str
    name: str
    vmi: str
    uid: str = ""
    vmi_uid: str = ""
    node: str = ""
    phase: str = "Pending"
    ip: str = ""
    role: str = "main"          # main | target | retired
    mig: str = ""               # migration name for target pods
    graceful: bool = False      # graceful deletion seen (eviction / delete)
    unschedulable: str = ""     # scheduler message while unbound


# KubeVirt's default migrations.progressTimeout (v1.5.2 pkg/virt-config/virt-config.go)
MIGRATION_PROGRESS_TIMEOUT_S = 150

@dataclass
class VmiInfo:
    ns: str
    name: str
    uid: str = ""
    phase: str = ""
    node: str = ""
    deleting: bool = False
    migratable: bool | None = None
    strategy: str = ""
    evac_node: str = ""
    had_pod: bool = False
    start_pending: bool = False
    stop_timer: Any = None
    mem_mib: float = 1024.0


@dataclass
class MigInfo:
    ns: str
    name: str
    uid: str
    vmi: str
    seq: int
    phase: str = ""
    source: str = ""
    target: str = ""
    target_pod: str = ""
    evacuation: bool = False
    timer: Any = None
    admitted_at: float = 0.0
    started_at: float = 0.0
    hang: bool = False


class KubeVirt:
    """virt-controller + virt-handler + the eviction / migration webhooks of virt-api."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self.c = world.client_for("virt-controller")
        self.hooks_client = world.client_for("virt-api")
        self.clock = world.clock
        self.timings = world.timings
        cfg = world.scenario.get("kubevirt") if isinstance(world.scenario, dict) else None
        if not isinstance(cfg, dict):
            cfg = {}
        self.default_eviction_strategy: str = str(cfg.get("evictionStrategy", "None"))
        self.parallel_migrations_per_cluster: int = int(
            cfg.get("parallelMigrationsPerCluster", 5))
        self.parallel_outbound_per_node: int = int(
            cfg.get("parallelOutboundMigrationsPerNode", 2))
        self.unschedulable_timeout_s: float = float(
            cfg.get("unschedulablePendingTimeoutSeconds", 300))
        self.launcher_image: str = str(cfg.get("launcherImage", LAUNCHER_IMAGE))
        self._launcher_detected = "launcherImage" in cfg
        self.migrations_per_vm: dict[str, int] = {}
        self.vmis: dict[Key, VmiInfo] = {}
        self.by_node: dict[str, set[Key]] = {}
        # the VMIs whose status names an evacuation node: the evacuation pass looks at these
        # and at the tainted nodes' VMIs, not at every VMI of the cluster
        self.evac_marked: set[Key] = set()
        self.pods: dict[Key, PodInfo] = {}
        self.pods_by_vmi: dict[Key, set[str]] = {}
        self.migs: dict[Key, MigInfo] = {}
        # migrations not known to be final, and migrations by uid: finished ones pile up
        # over an upgrade, and scanning them all on every migration event grows with it
        self._open_keys: set[Key] = set()
        self._mig_by_uid: dict[str, Key] = {}
        self.active_mig: dict[Key, str] = {}      # vmi key -> in-flight migration name
        self.nodes: dict[str, Obj] = {}           # last seen Node objects (read-only)
        self.tainted: set[str] = set()
        self._seq = itertools.count()
        self._ips = itertools.count(10)
        self._evac_backoff: dict[Key, tuple[float, int]] = {}
        self._evac_blocked: set[tuple[Key, str]] = set()
        self._evac_queued = False
        self._unbound: set[Key] = set()
        self._retry_timer: Any = None
        self._succeeded_vms: set[Key] = set()
        self._placed_once: set[Key] = set()
        self._usage: dict[str, list[float]] = {}
        self._pod_usage: dict[Key, tuple[str, float, float]] = {}
        rt = world.runtime
        rt.on(GROUP, "virtualmachines", self._on_vm)
        rt.on(GROUP, "virtualmachineinstances", self._on_vmi)
        rt.on(GROUP, "virtualmachineinstancemigrations", self._on_vmim)
        rt.on("", "pods", self._on_pod)
        rt.on("", "nodes", self._on_node)
        rt.on(GROUP, "kubevirts", self._on_kubevirt)
        rt.on("apps", "deployments", self._on_operator_deployment)
        world.store.admission.append(self._admission)
        self._operator_timer: Any = None
        self._seed()
        rt.call_soon(self._reconcile_operator)

    # ------------------------------------------------------------------ plumbing
    @property
    def has_kubelet(self) -> bool:
        return bool(self.world.simulates("kubelet"))

    @property
    def has_scheduler(self) -> bool:
        return bool(self.world.simulates("scheduler"))

    def _seed(self) -> None:
        """Pick up what exists already (objects created before the runtime started)."""
        for node in self.c.list_refs("v1", "Node"):
            self._note_node(node)
        for pod in self.c.list_refs("v1", "Pod",
                                    label_selector={"kubevirt.io": "virt-launcher"}):
            md = pod["metadata"]
            labels = md.get("labels") or {}
            vmi_name = (md.get("annotations") or {}).get(DOMAIN_ANNOTATION) or \
                labels.get("vm.kubevirt.io/name", "")
            self.pods[(md["namespace"], md["name"])] = PodInfo(
                md["namespace"], md["name"], vmi_name, uid=md.get("uid", ""),
                node=pod["spec"].get("nodeName") or "",
                phase=(pod.get("status") or {}).get("phase") or "Pending",
                ip=(pod.get("status") or {}).get("podIP") or "",
                vmi_uid=labels.get("kubevirt.io/created-by", ""),
                role="target" if labels.get(MIGRATION_UID_LABEL) else "main")
            self.pods_by_vmi.setdefault((md["namespace"], vmi_name), set()).add(md["name"])
        try:
            vms = self.c.list_refs(API, VM)
            vmis = self.c.list_refs(API, VMI)
        except ApiError:
            return
        for vmi in vmis:
            ns, name = vmi["metadata"]["namespace"], vmi["metadata"]["name"]
            uid = vmi["metadata"]["uid"]
            if self._main_pod((ns, name), uid) is not None:
                self.vmis[(ns, name)] = VmiInfo(ns, name, uid=uid, had_pod=True)
            self.world.runtime.call_soon(lambda ns=ns, name=name: self._sync_vmi(ns, name))
        for vm in vms:
            ns, name = vm["metadata"]["namespace"], vm["metadata"]["name"]
            self.world.runtime.call_soon(lambda ns=ns, name=name: self._sync_vm(ns, name))

    def _now_ts(self) -> str:
        return str(self.clock.timestamp())

    def _status_sub(self, kind: str) -> str | None:
        """``"status"`` if the served CRD has a status subresource: KubeVirt's VM and VMIM
        have one, the VMI has none (crds.go), so virt-controller writes a VMI's status with
        a plain update."""
        rt = self.c.registry.by_kind(API, kind)
        return "status" if rt is not None and rt.has_status else None

    def _modify(self, kind: str, ns: str, name: str, fn: Any, status: bool = False) -> Obj | None:
        try:
            return self.c.modify(API, kind, name, fn, ns,
                                 self._status_sub(kind) if status else None,
                                 copy_result=False)
        except ApiError as exc:
            if exc.code in (404, 409):
                return None
            raise

    def _delete_pod(self, ns: str, name: str, graceful: bool = True) -> None:
        info = self.pods.get((ns, name))
        if info is not None and info.role != "retired":
            info.role = "retired"
        grace = None if graceful and self.has_kubelet else 0
        self.c.delete("v1", "Pod", name, ns, grace_period=grace)

    def _vm_id(self, ns: str, name: str) -> str:
        return f"{ns}/{name}"

    # ------------------------------------------------------------------ virt-operator
    def kubevirt_cr(self) -> Obj | None:
        try:
            return self.c.peek(API, KUBEVIRT, KUBEVIRT_NAME, KUBEVIRT_NS)  # type: ignore
        except ApiError:
            return None

    def kubevirt_version(self) -> tuple[int, int, int]:
        """Upstream version of the KubeVirt the cluster runs: the KubeVirt CR's
        ``observedKubeVirtVersion``, else the installed release's ``kubevirt``."""
        from ..releases.catalog import kubevirt_semver

        cr = self.kubevirt_cr()
        observed = str(((cr or {}).get("status") or {}).get("observedKubeVirtVersion") or "")
        if not observed:
            inst = getattr(self.world.extras.get("releases"), "installed", None)
            observed = str(getattr(inst, "kubevirt", "") or LAUNCHER_VERSION)
        return kubevirt_semver(observed) or (1, 4, 0)

    def honours_added_node_selector(self) -> bool:
        return self.kubevirt_version() >= ADDED_NODE_SELECTOR_SINCE

    def live_update(self) -> bool:
        conf = (((self.kubevirt_cr() or {}).get("spec") or {}).get("configuration") or {})
        return conf.get("vmRolloutStrategy") == "LiveUpdate"

    def _on_kubevirt(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        if type_ == "DELETED" or md.get("namespace") != KUBEVIRT_NS:
            return
        if old is None or obj.get("spec") != old.get("spec"):
            self._reconcile_operator()
            for ns, name in [k for k in self.vmis]:   # LiveUpdate may have been switched on
                self.world.runtime.call_soon(lambda ns=ns, name=name: self._sync_vm(ns, name))

    def _on_operator_deployment(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        if md.get("namespace") == KUBEVIRT_NS and md.get("name") == VIRT_OPERATOR and \
                type_ != "DELETED":
            self._reconcile_operator()

    def _operator_tag(self) -> str:
        dep = self.c.peek("apps/v1", "Deployment", VIRT_OPERATOR, KUBEVIRT_NS)
        for ctr in (((dep or {}).get("spec") or {}).get("template") or {}).get(
                "spec", {}).get("containers") or []:
            image = str(ctr.get("image") or "")
            if image.rsplit("/", 1)[-1].startswith(VIRT_OPERATOR + ":"):
                return image.rsplit(":", 1)[1]
        return ""

    def _write_kubevirt_status(self, fn: Any) -> None:
        try:
            self.c.modify(API, KUBEVIRT, KUBEVIRT_NAME, fn, KUBEVIRT_NS, "status")
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    def _reconcile_operator(self) -> None:
        cr, tag = self.kubevirt_cr(), self._operator_tag()
        if cr is None or not tag:
            return
        st = cr.get("status") or {}
        observed = str(st.get("observedKubeVirtVersion") or "")
        if observed == tag or (st.get("targetKubeVirtVersion") == tag and observed):
            return
        registry = "registry.suse.com"
        ts = self._now_ts()

        def cond(type_: str, status: str, reason: str, msg: str) -> Obj:
            return {"type": type_, "status": status, "reason": reason, "message": msg,
                    "lastProbeTime": ts, "lastTransitionTime": ts}

        def deployed(cur: Obj) -> Obj:
            s = cur.setdefault("status", {})
            s.update({"phase": "Deployed", "operatorVersion": tag, "targetKubeVirtVersion": tag,
                      "targetKubeVirtRegistry": registry, "observedKubeVirtVersion": tag,
                      "observedKubeVirtRegistry": registry})
            s["conditions"] = [
                cond("Available", "True", "AllComponentsReady", "All components are ready."),
                cond("Progressing", "False", "AllComponentsReady", "All components are ready."),
                cond("Degraded", "False", "AllComponentsReady", "All components are ready.")]
            return cur

        if not observed:   # a fresh install: nothing to roll
            self._write_kubevirt_status(deployed)
            return
        msg = (f"Transitioning from previous version {observed} with registry {registry} to "
               f"target version {tag} using registry {registry}")

        def updating(cur: Obj) -> Obj:
            s = cur.setdefault("status", {})
            s.update({"phase": "Deploying", "operatorVersion": tag,
                      "targetKubeVirtVersion": tag, "targetKubeVirtRegistry": registry})
            s["conditions"] = [cond("Available", "True", "UpdateInProgress", msg),
                               cond("Progressing", "True", "UpdateInProgress", msg),
                               cond("Degraded", "False", "UpdateInProgress", msg)]
            return cur

        self._write_kubevirt_status(updating)
        self.world.timeline.record("kubevirt_upgrade_started", version=tag, previous=observed)
        if self._operator_timer is not None:
            self._operator_timer.cancel()

        def finish() -> None:
            self._operator_timer = None
            if self._operator_tag() != tag:
                return
            self._write_kubevirt_status(deployed)
            self.world.timeline.record("kubevirt_upgraded", version=tag)

        self._operator_timer = self.world.runtime.after(self.timings.kubevirt_upgrade_s, finish)

    # ------------------------------------------------------------------ admission
    def _admission(self, op: str, rt: Any, obj: Obj, old: Obj | None,
                   subresource: str | None) -> None:
        key = rt.key
        if key == ("", "pods"):
            if subresource == "eviction" and old is not None:
                self._admit_eviction(old)
        elif key == (GROUP, "virtualmachineinstancemigrations") and op == "CREATE" and \
                subresource is None:
            self._admit_migration(obj)
        elif key == (GROUP, "virtualmachineinstances") and op == "CREATE" and \
                subresource is None:
            fins = obj["metadata"].setdefault("finalizers", [])
            if FINALIZER not in fins:
                fins.append(FINALIZER)

    def eviction_strategy(self, vmi: Obj) -> str:
        return str((vmi.get("spec") or {}).get("evictionStrategy") or
                   self.default_eviction_strategy)

    def _admit_eviction(self, pod: Obj) -> None:
        md = pod.get("metadata") or {}
        if (md.get("labels") or {}).get("kubevirt.io") != "virt-launcher":
            return
        vmi_name = (md.get("annotations") or {}).get(DOMAIN_ANNOTATION)
        if not vmi_name:
            return
        ns = md.get("namespace", "")
        vmi = self.hooks_client.peek(API, VMI, vmi_name, ns)
        if vmi is None:
            return
        st = vmi.get("status") or {}
        if st.get("phase") in FINAL:
            return
        strategy = self.eviction_strategy(vmi)
        cond = pu.get_condition(vmi, "LiveMigratable")
        migratable = bool(cond and cond.get("status") == "True")
        if strategy == "LiveMigrate":
            if not migratable:
                raise errors.too_many_requests(
                    EVICTION_WEBHOOK + f"VMI {vmi_name} is configured with an eviction strategy "
                    "but is not live-migratable")
        elif strategy == "LiveMigrateIfPossible":
            if not migratable:
                return
        elif strategy != "External":
            return
        node = (pod.get("spec") or {}).get("nodeName", "")
        if st.get("evacuationNodeName") or node != st.get("nodeName"):
            # the VMI is already being evacuated: KubeVirt's PDB on the launcher pods holds
            raise errors.too_many_requests(PDB_MESSAGE)

        def mark(cur: Obj) -> Obj:
            cur.setdefault("status", {})["evacuationNodeName"] = node
            return cur

        self.hooks_client.modify(API, VMI, vmi_name, mark, ns, self._status_sub(VMI))
        self.world.runtime.call_soon(self._kick_evacuation)
        raise errors.too_many_requests(
            EVICTION_WEBHOOK + f'Eviction triggered evacuation of VMI "{ns}/{vmi_name}"')

    def _admit_migration(self, obj: Obj) -> None:
        md = obj["metadata"]
        ns = md.get("namespace", "")
        vmi_name = (obj.get("spec") or {}).get("vmiName")
        if not vmi_name:
            raise errors.invalid(VMIM, GROUP, md.get("name", ""), [errors.field_required(
                "spec.vmiName", "vmiName is missing")])
        vmi = self.hooks_client.peek(API, VMI, vmi_name, ns)
        if vmi is None:
            raise errors.bad_request(
                MIGRATION_WEBHOOK + f'the VMI "{ns}/{vmi_name}" does not exist')
        if (vmi.get("status") or {}).get("phase") in FINAL:
            raise errors.bad_request(MIGRATION_WEBHOOK + "Cannot migrate VMI in finalized state.")
        cond = pu.get_condition(vmi, "LiveMigratable")
        if cond and cond.get("status") == "False":
            raise errors.bad_request(
                MIGRATION_WEBHOOK + f"Cannot migrate VMI, Reason: {cond.get('reason')}, "
                f"Message: {cond.get('message')}")
        for m in self.hooks_client.list(API, VMIM, ns, label_selector={VMI_NAME_LABEL: vmi_name}):
            if (m.get("status") or {}).get("phase") not in FINAL:
                raise errors.bad_request(
                    MIGRATION_WEBHOOK + "in-flight migration detected. Active migration job "
                    f"({m['metadata'].get('uid')}) is currently already in progress for VMI "
                    f"{vmi_name}.")
        md.setdefault("labels", {})[VMI_NAME_LABEL] = vmi_name

    # ------------------------------------------------------------------ nodes
    def _note_node(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        self.nodes[name] = node
        if not self._launcher_detected:
            self._detect_launcher(name, node)
        drain = any(t.get("key") == DRAIN_TAINT and t.get("effect") in ("NoSchedule",
                                                                         "NoExecute")
                    for t in (node.get("spec") or {}).get("taints") or [])
        if drain:
            self.tainted.add(name)
        else:
            self.tainted.discard(name)

    def _detect_launcher(self, name: str, node: Obj) -> None:
        """The installed KubeVirt's launcher image, as preloaded in the node's image store:
        the kubelet's store (``status.images`` reports only its 50 largest images); without
        a kubelet module, the images the Node reports."""
        kubelet = self.world.controllers.get("kubelet")
        if kubelet is not None and hasattr(kubelet, "images"):
            store: list[Any] = [names for names, _ in kubelet.images(name)]
        else:
            store = [img.get("names") or [] for img in (node.get("status") or {}).get("images")
                     or []]
        for names in store:
            found = next((n for n in names if "/virt-launcher:" in n), None)
            if found:
                self.launcher_image = found
                self._launcher_detected = True
                return

    def _on_node(self, type_: str, obj: Obj, old: Obj | None) -> None:
        name = obj["metadata"]["name"]
        if type_ == "DELETED":
            self.nodes.pop(name, None)
            self.tainted.discard(name)
            return
        was = name in self.tainted
        self._note_node(obj)
        if name in self.tainted and not was:
            self.world.timeline.record("node_drain_tainted", node=name)
        if name in self.tainted:
            self._kick_evacuation()
        if self._unbound:
            self._retry_unbound()

    # ------------------------------------------------------------------ placement
    def _pick_node(self, pod: Obj, exclude: set[str], prefer: str = "") -> str | None:
        """The built-in placement of a world without a simulated scheduler. With one, the
        launcher pod is created unbound and the scheduler binds it, as kube-scheduler does
        for virt-controller's pods (None here)."""
        if self.has_scheduler:
            return None
        if prefer and prefer not in exclude and prefer in self.nodes:
            node = self.nodes[prefer]
            if _placeable(pod, node):
                return prefer
        cpu, mem = pu.pod_requests(pod)
        best: tuple[float, str] | None = None
        for name, node in self.nodes.items():
            if name in exclude or not _placeable(pod, node):
                continue
            alloc = (node.get("status") or {}).get("allocatable") or {}
            a_cpu = pu.cpu_milli(alloc.get("cpu")) or float("inf")
            a_mem = pu.mem_bytes(alloc.get("memory")) or float("inf")
            used = self._usage.get(name, [0.0, 0.0])
            if used[0] + cpu > a_cpu or used[1] + mem > a_mem:
                continue
            score = (used[1] + mem) / a_mem if a_mem != float("inf") else used[1] + mem
            if best is None or (score, name) < best:
                best = (score, name)
        return best[1] if best else None

    def _account(self, key: Key, obj: Obj | None) -> None:
        """Resource usage per node for the built-in placement (no scheduler module)."""
        prev = self._pod_usage.pop(key, None)
        if prev is not None:
            u = self._usage.setdefault(prev[0], [0.0, 0.0])
            u[0] -= prev[1]
            u[1] -= prev[2]
        if obj is None:
            return
        node = (obj.get("spec") or {}).get("nodeName")
        phase = (obj.get("status") or {}).get("phase")
        if not node or phase in FINAL:
            return
        cpu, mem = pu.pod_requests(obj)
        self._pod_usage[key] = (node, cpu, mem)
        u = self._usage.setdefault(node, [0.0, 0.0])
        u[0] += cpu
        u[1] += mem

    def _retry_unbound(self) -> None:
        if self.has_scheduler:
            self._unbound.clear()
            return
        for key in sorted(self._unbound):
            info = self.pods.get(key)
            pod = self.c.try_get("v1", "Pod", key[1], key[0])
            if info is None or pod is None or pod["spec"].get("nodeName") or \
                    pod["metadata"].get("deletionTimestamp"):
                self._unbound.discard(key)
                continue
            exclude = set()
            if info.role == "target":
                mig = self.migs.get((key[0], info.mig))
                if mig is not None:
                    exclude.add(mig.source)
            node = self._pick_node(pod, exclude)
            if node is None:
                continue
            self._unbound.discard(key)
            try:
                self.c.modify("v1", "Pod", key[1], lambda p, n=node: _bind(p, n), key[0])
            except ApiError:
                pass
        if self._unbound and self._retry_timer is None:
            def again() -> None:
                self._retry_timer = None
                self._retry_unbound()
            self._retry_timer = self.world.runtime.after(10.0, again)

    # ------------------------------------------------------------------ launcher pods
    def _create_launcher(self, vmi: Obj, mig: MigInfo | None = None) -> PodInfo:
        md = vmi["metadata"]
        ns, name = md["namespace"], md["name"]
        spec = vmi.get("spec") or {}
        dom = spec.get("domain") or {}
        res = dom.get("resources") or {}
        mem_mib = vmi_memory_mib(spec) + LAUNCHER_OVERHEAD_MIB
        cpu_req = (res.get("requests") or {}).get("cpu") or f"{vmi_vcpus(spec) * 100}m"
        resources: Obj = {"requests": {"cpu": str(cpu_req), "memory": f"{int(mem_mib)}Mi"}}
        lim = res.get("limits") or {}
        if lim:
            resources["limits"] = {}
            if lim.get("cpu"):
                resources["limits"]["cpu"] = str(lim["cpu"])
            if lim.get("memory"):
                resources["limits"]["memory"] = \
                    f"{int(pu.parse_quantity(lim['memory']) / 1024 ** 2 + LAUNCHER_OVERHEAD_MIB)}Mi"
        labels = dict(md.get("labels") or {})
        labels.update({"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": md["uid"],
                       "vm.kubevirt.io/name": name})
        labels.pop(NODE_LABEL, None)
        labels.pop(TARGET_NODE_LABEL, None)
        node_selector = dict(spec.get("nodeSelector") or {})
        affinity = json_copy(spec.get("affinity")) if spec.get("affinity") else None
        exclude: set[str] = set()
        if mig is not None:
            labels[MIGRATION_UID_LABEL] = mig.uid
            added = self._mig_added_selector(ns, mig.name)
            for k, v in added.items():
                node_selector.setdefault(k, v)  # on collisions the VM's value wins
            exclude.add(mig.source)
            affinity = _exclude_host(affinity, mig.source)
        volumes = []
        for claim in vmi_claims(spec):
            volumes.append({"name": claim, "persistentVolumeClaim": {"claimName": claim}})
        grace = int(spec.get("terminationGracePeriodSeconds", 180)) + 15
        pod: Obj = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "generateName": f"virt-launcher-{name}-",
                "namespace": ns,
                "labels": labels,
                "annotations": {DOMAIN_ANNOTATION: name,
                                "kubectl.kubernetes.io/default-container": "compute",
                                "kubevirt.io/migrationTransportUnix": "true"},
                "ownerReferences": [{"apiVersion": API, "kind": VMI, "name": name,
                                     "uid": md["uid"], "controller": True,
                                     "blockOwnerDeletion": True}],
            },
            "spec": {
                "containers": [{
                    "name": "compute", "image": self.launcher_image,
                    "command": ["/usr/bin/virt-launcher-monitor", "--qemu-timeout", "264s",
                                "--name", name, "--uid", md["uid"], "--namespace", ns],
                    "resources": resources,
                }],
                "nodeSelector": node_selector or None,
                "affinity": affinity,
                "tolerations": json_copy(spec.get("tolerations")) or None,
                "volumes": volumes or None,
                "restartPolicy": "Never",
                "schedulerName": "default-scheduler",
                "terminationGracePeriodSeconds": grace,
                "serviceAccountName": "default",
                "automountServiceAccountToken": False,
            },
        }
        pod["spec"] = {k: v for k, v in pod["spec"].items() if v is not None}
        prefer = ""
        if mig is None and (ns, name) not in self._placed_once:
            prefer = str((md.get("annotations") or {}).get(INITIAL_NODE_ANNOTATION, ""))
        self._placed_once.add((ns, name))
        if prefer and self.has_scheduler:
            pod["metadata"]["annotations"][INITIAL_NODE_ANNOTATION] = prefer
        node = self._pick_node(pod, exclude, prefer)
        if node:
            pod["spec"]["nodeName"] = node
        created = self.c.create(pod)
        pname = created["metadata"]["name"]
        info = PodInfo(ns, pname, name, uid=created["metadata"]["uid"], vmi_uid=md["uid"],
                       node=node or "",
                       role="target" if mig else "main", mig=mig.name if mig else "")
        self.pods[(ns, pname)] = info
        self.pods_by_vmi.setdefault((ns, name), set()).add(pname)
        if not node:
            if not self.has_scheduler:
                info.unschedulable = self._unschedulable_message(created)
                self._set_unschedulable(ns, pname, info.unschedulable)
                self._unbound.add((ns, pname))
                self._retry_unbound()
        elif not self.has_kubelet:
            self._fake_run(ns, pname)
        return info

    def _unschedulable_message(self, pod: Obj) -> str:
        return (f"0/{len(self.nodes)} nodes are available: no node matches the pod's node "
                "selector, affinity, taints and resource requests.")

    def _set_unschedulable(self, ns: str, name: str, msg: str) -> None:
        def fn(p: Obj) -> Obj:
            st = p.setdefault("status", {})
            st["phase"] = "Pending"
            st["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable", "message": msg,
                                 "lastTransitionTime": self._now_ts()}]
            return p
        try:
            self.c.modify("v1", "Pod", name, fn, ns, "status")
        except ApiError:
            pass

    def _fake_run(self, ns: str, name: str) -> None:
        """Without a kubelet module: the launcher container starts after pod_start_s."""
        def run() -> None:
            n = next(self._ips)
            ip = f"10.52.{n // 250 % 250}.{n % 250 + 2}"

            def fn(p: Obj) -> Obj | None:
                if p["metadata"].get("deletionTimestamp") or not p["spec"].get("nodeName"):
                    return None
                now = self._now_ts()
                p["status"] = {
                    "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now,
                    "hostIP": p["spec"]["nodeName"],
                    "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                                   for t in ("PodScheduled", "Initialized", "ContainersReady",
                                             "Ready")],
                    "containerStatuses": [{"name": "compute", "ready": True, "started": True,
                                           "restartCount": 0, "image": self.launcher_image,
                                           "state": {"running": {"startedAt": now}}}]}
                return p
            try:
                self.c.modify("v1", "Pod", name, fn, ns, "status")
            except ApiError:
                pass
        self.world.runtime.after(self.timings.pod_start_s, run)

    def _on_pod(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        key = (md.get("namespace", ""), md["name"])
        if not self.has_scheduler:
            self._account(key, None if type_ == "DELETED" else obj)
        labels = md.get("labels") or {}
        if labels.get("kubevirt.io") != "virt-launcher":
            return
        ns = key[0]
        vmi_name = (md.get("annotations") or {}).get(DOMAIN_ANNOTATION) or \
            labels.get("vm.kubevirt.io/name", "")
        info = self.pods.get(key)
        if info is None:
            if type_ == "DELETED":
                return
            mig_uid = labels.get(MIGRATION_UID_LABEL, "")
            mig = self.migs.get(self._mig_by_uid.get(mig_uid, ("", ""))) if mig_uid else None
            mig_name = mig.name if mig is not None and mig.uid == mig_uid else ""
            info = PodInfo(ns, md["name"], vmi_name, uid=md.get("uid", ""),
                           vmi_uid=labels.get("kubevirt.io/created-by", ""),
                           role="target" if mig_uid else "main", mig=mig_name)
            self.pods[key] = info
            self.pods_by_vmi.setdefault((ns, vmi_name), set()).add(md["name"])
        spec = obj.get("spec") or {}
        st = obj.get("status") or {}
        bound_now = not info.node and bool(spec.get("nodeName"))
        info.node = spec.get("nodeName") or ""
        info.ip = st.get("podIP") or info.ip
        if type_ == "DELETED":
            info.phase = "Gone"
        else:
            info.phase = st.get("phase") or "Pending"
            if md.get("deletionTimestamp"):
                if (md.get("deletionGracePeriodSeconds") or 0) > 0:
                    info.graceful = True
                if not self.has_kubelet:
                    self.c.delete("v1", "Pod", md["name"], ns, grace_period=0)
            elif bound_now and self.has_scheduler and not self.has_kubelet:
                self._fake_run(ns, md["name"])   # the scheduler bound it; nobody runs it
        vkey = (ns, info.vmi)
        if info.role == "target" and info.mig:
            self._advance_migration((ns, info.mig))
        if info.role != "retired":
            self._sync_vmi(*vkey)
        if type_ == "DELETED":
            self.pods.pop(key, None)
            s = self.pods_by_vmi.get(vkey)
            if s is not None:
                s.discard(md["name"])
                if not s:
                    self.pods_by_vmi.pop(vkey, None)
            self._unbound.discard(key)

    def _main_pod(self, key: Key, uid: str) -> PodInfo | None:
        for pname in self.pods_by_vmi.get(key, ()):
            p = self.pods.get((key[0], pname))
            if p is not None and p.role == "main" and p.vmi_uid == uid:
                return p
        return None

    def _vmi_uid(self, key: Key) -> str:
        info = self.vmis.get(key)
        return info.uid if info else ""

    # ------------------------------------------------------------------ VM controller
    def _on_vm(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        if type_ == "DELETED":
            self._succeeded_vms.discard((md["namespace"], md["name"]))
            return
        self._sync_vm(md["namespace"], md["name"])

    def _sync_vm(self, ns: str, name: str) -> None:
        vm = self.c.peek(API, VM, name, ns)
        if vm is None:
            return
        key = (ns, name)
        strategy = effective_run_strategy(vm)
        vmi = self.c.peek(API, VMI, name, ns)
        if vmi is not None and not any(r.get("uid") == vm["metadata"]["uid"]
                                       for r in vmi["metadata"].get("ownerReferences") or []):
            vmi_owned = False
        else:
            vmi_owned = True
        requests = (vm.get("status") or {}).get("stateChangeRequests") or []
        handled_requests = bool(requests)
        if vm["metadata"].get("deletionTimestamp"):
            self._write_vm_status(vm, vmi, strategy, requests=[])
            return
        for req in requests:
            action = req.get("action")
            if action == "Stop" and vmi is not None and vmi_owned and \
                    not vmi["metadata"].get("deletionTimestamp"):
                self.c.delete(API, VMI, name, ns)
                vmi = self.c.peek(API, VMI, name, ns)
            elif action == "Start" and vmi is None:
                vmi = self._create_vmi(vm)
        if vmi_owned:
            phase = ((vmi or {}).get("status") or {}).get("phase")
            deleting = bool(vmi and vmi["metadata"].get("deletionTimestamp"))
            if strategy in ("Always", "RerunOnFailure", "Once"):
                if vmi is None:
                    if not (strategy in ("RerunOnFailure", "Once") and
                            key in self._succeeded_vms) and not handled_requests:
                        vmi = self._create_vmi(vm)
                elif phase in FINAL and not deleting:
                    if strategy == "Always" or (strategy == "RerunOnFailure" and
                                                phase == "Failed"):
                        self.c.delete(API, VMI, name, ns)
                        vmi = self.c.peek(API, VMI, name, ns)
                    else:
                        self._succeeded_vms.add(key)
            elif strategy == "Halted":
                if vmi is not None and not deleting:
                    self.c.delete(API, VMI, name, ns)
                    vmi = self.c.peek(API, VMI, name, ns)
            if strategy in ("Always", "Halted"):
                self._succeeded_vms.discard(key)
        if vmi_owned and vmi is not None:
            self._live_update_node_selector(vm, vmi)
        self._write_vm_status(vm, vmi, strategy, requests=[] if handled_requests else None)

    def _live_update_node_selector(self, vm: Obj, vmi: Obj) -> None:
        """LiveUpdate: the VM template's nodeSelector goes to the running VMI, except while a
        migration is under way (``migrationState.startTimestamp`` set, no end). Compared as
        ``equality.Semantic`` does (an empty map equals none); copied as
        ``VMNodeSelectorPatch`` sends it (kubevirt v1.5.2 pkg/virt-controller/watch/vm/vm.go):
        a template without one removes the VMI's, an empty one is copied as it is."""
        if vmi["metadata"].get("deletionTimestamp") or not self.live_update():
            return
        want = ((((vm.get("spec") or {}).get("template") or {}).get("spec") or {})
                .get("nodeSelector"))
        have = (vmi.get("spec") or {}).get("nodeSelector")
        if (want or None) == (have or None):
            return
        ms = (vmi.get("status") or {}).get("migrationState") or {}
        if ms.get("startTimestamp") and not ms.get("endTimestamp"):
            return   # "Node affinity should not be changed during VMI migration"; retried later

        def fn(cur: Obj) -> Obj | None:
            spec = cur.setdefault("spec", {})
            if want is None:
                spec.pop("nodeSelector", None)
            else:
                spec["nodeSelector"] = json_copy(want)
            return cur

        md = vmi["metadata"]
        self._modify(VMI, md["namespace"], md["name"], fn)

    def _create_vmi(self, vm: Obj) -> Obj | None:
        md = vm["metadata"]
        tmpl = (vm.get("spec") or {}).get("template") or {}
        tmd = tmpl.get("metadata") or {}
        vmi = {
            "apiVersion": API, "kind": VMI,
            "metadata": {
                "name": md["name"], "namespace": md["namespace"],
                "labels": dict(tmd.get("labels") or {}),
                "annotations": {**(tmd.get("annotations") or {}),
                                **({INITIAL_NODE_ANNOTATION: md["annotations"][
                                    INITIAL_NODE_ANNOTATION]} if INITIAL_NODE_ANNOTATION in
                                   (md.get("annotations") or {}) else {}),
                                "kubevirt.io/latest-observed-api-version": "v1",
                                "kubevirt.io/storage-observed-api-version": "v1"},
                "ownerReferences": [{"apiVersion": API, "kind": VM, "name": md["name"],
                                     "uid": md["uid"], "controller": True,
                                     "blockOwnerDeletion": True}],
            },
            "spec": json_copy(tmpl.get("spec") or {}),
        }
        try:
            return self.c.create(vmi)
        except ApiError as exc:
            if exc.code == 409:
                return self.c.peek(API, VMI, md["name"], md["namespace"])
            log.warning("cannot create VMI %s/%s: %s", md["namespace"], md["name"], exc)
            return None

    def _write_vm_status(self, vm: Obj, vmi: Obj | None, strategy: str,
                         requests: list[Obj] | None) -> None:
        vst = (vmi or {}).get("status") or {}
        phase = vst.get("phase", "")
        ready = False
        if vm["metadata"].get("deletionTimestamp"):
            printable = "Terminating"
        elif vmi is None:
            printable = "Stopped"
        elif vmi["metadata"].get("deletionTimestamp"):
            printable = "Stopping"
        elif phase == "Running":
            ms = vst.get("migrationState") or {}
            migrating = bool(ms) and not ms.get("completed") and not ms.get("failed")
            printable = "Migrating" if migrating else "Running"
            rc = pu.get_condition(vmi, "Ready")
            ready = bool(rc and rc.get("status") == "True")
        elif phase in FINAL:
            printable = "Stopped"
        else:
            ps = pu.get_condition(vmi, "PodScheduled")
            printable = "ErrorUnschedulable" if ps and ps.get("status") == "False" else "Starting"
        now = self._now_ts()

        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            before = json_copy(st)
            st["printableStatus"] = printable
            st["ready"] = ready
            st["created"] = vmi is not None
            st["runStrategy"] = strategy
            st["observedGeneration"] = cur["metadata"].get("generation", 1)
            st["desiredGeneration"] = cur["metadata"].get("generation", 1)
            if requests is not None:
                st.pop("stateChangeRequests", None)
            old = {c.get("type"): c for c in st.get("conditions") or []}
            rc = old.get("Ready") or {}
            want = "True" if ready else "False"
            if rc.get("status") != want:
                rc = {"type": "Ready", "status": want, "lastProbeTime": None,
                      "lastTransitionTime": now}
                if not ready:
                    rc["reason"] = "VMINotExists" if vmi is None else "PodNotReady"
                    rc["message"] = "VMI does not exist" if vmi is None else \
                        "virt-launcher pod is not ready"
            conds = [rc]
            if vmi is not None:
                lm = pu.get_condition(vmi, "LiveMigratable")
                if lm is not None:
                    conds.append(dict(lm))
            st["conditions"] = conds
            if st == before:
                return None
            return cur
        # most calls change nothing: decide that on a copy of the status alone before paying
        # for a copy of the whole VM in a read-modify-write
        stored = self.c.peek(API, VM, vm["metadata"]["name"], vm["metadata"]["namespace"])
        if stored is not None and fn({"metadata": stored["metadata"],
                                      "status": json_copy(stored.get("status") or {})}) is None:
            return
        self._modify(VM, vm["metadata"]["namespace"], vm["metadata"]["name"], fn, status=True)

    # ------------------------------------------------------------------ VMI controller
    def _on_vmi(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        key = (md["namespace"], md["name"])
        uid = md.get("uid", "")
        if type_ == "DELETED":
            self._forget_vmi(key, uid)
        else:
            info = self._info_for(key, uid)
            if info is None:  # a stale event of an earlier incarnation
                for ref in md.get("ownerReferences") or []:
                    if ref.get("kind") == VM:
                        self._sync_vm(key[0], ref.get("name", ""))
                return
            st = obj.get("status") or {}
            node = st.get("nodeName") or ""
            if node != info.node:
                if info.node:
                    self.by_node.get(info.node, set()).discard(key)
                if node:
                    self.by_node.setdefault(node, set()).add(key)
                info.node = node
            info.phase = st.get("phase") or ""
            info.deleting = bool(md.get("deletionTimestamp"))
            info.strategy = self.eviction_strategy(obj)
            lm = pu.get_condition(obj, "LiveMigratable")
            info.migratable = None if lm is None else lm.get("status") == "True"
            evac = st.get("evacuationNodeName") or ""
            if evac and not info.evac_node:
                self._kick_evacuation()
            self._set_evac_node(key, info, evac)
            self._sync_vmi(*key)
        for ref in md.get("ownerReferences") or []:
            if ref.get("kind") == VM:
                self._sync_vm(key[0], ref.get("name", ""))

    def _info_for(self, key: Key, uid: str) -> VmiInfo | None:
        """The cache entry of the VMI incarnation ``uid`` (None if the store has a newer one)."""
        info = self.vmis.get(key)
        if info is not None and info.uid == uid:
            return info
        cur = self.c.peek(API, VMI, key[1], key[0])
        if cur is None or cur["metadata"]["uid"] != uid:
            return None
        if info is not None:
            self._forget_vmi(key, info.uid)
        info = self.vmis[key] = VmiInfo(key[0], key[1], uid=uid,
                                        mem_mib=vmi_memory_mib(cur.get("spec") or {}))
        return info

    def _set_evac_node(self, key: Key, info: VmiInfo, node: str) -> None:
        """The VMI's evacuation mark (``status.evacuationNodeName``) and its index."""
        info.evac_node = node
        if node:
            self.evac_marked.add(key)
        else:
            self.evac_marked.discard(key)

    def _forget_vmi(self, key: Key, uid: str) -> None:
        info = self.vmis.get(key)
        if info is not None and info.uid != uid:
            return
        self.vmis.pop(key, None)
        self.evac_marked.discard(key)
        if info is not None:
            if info.node:
                self.by_node.get(info.node, set()).discard(key)
            if info.stop_timer is not None:
                info.stop_timer.cancel()
        mig = self.active_mig.get(key)
        if mig is not None:
            self._fail_migration((key[0], mig), "VMI was deleted", record=True)
        for pname in list(self.pods_by_vmi.get(key, ())):
            p = self.pods.get((key[0], pname))
            if p is None or p.vmi_uid != uid:
                continue
            if p.role != "retired" and p.phase != "Gone":
                self._delete_pod(key[0], pname, graceful=False)
            p.role = "retired"
        self._evac_backoff.pop(key, None)

    def _sync_vmi(self, ns: str, name: str) -> None:
        key = (ns, name)
        vmi = self.c.peek(API, VMI, name, ns)
        if vmi is None:
            return
        uid = vmi["metadata"]["uid"]
        info = self._info_for(key, uid)
        if info is None:
            return
        st = vmi.get("status") or {}
        phase = st.get("phase") or ""
        if vmi["metadata"].get("deletionTimestamp"):
            self._stop_vmi(vmi, info)
            return
        if phase in FINAL:
            for pname in list(self.pods_by_vmi.get(key, ())):
                p = self.pods.get((ns, pname))
                if p is not None and p.vmi_uid == uid and p.role != "retired" and \
                        p.phase != "Gone":
                    self._delete_pod(ns, pname, graceful=False)
            return
        main = self._main_pod(key, uid)
        if main is None or main.phase in ("Gone", "Failed", "Succeeded"):
            if main is None and not info.had_pod and phase in ("", "Pending", "Scheduling"):
                self._start_vmi(vmi, info)
            else:
                self._vmi_pod_died(vmi, info, main)
            return
        info.had_pod = True
        if main.node and phase in ("", "Pending", "Scheduling"):
            self._vmi_scheduled(vmi, main)
            phase = "Scheduled"
        elif not main.node and main.unschedulable and phase in ("", "Pending", "Scheduling"):
            self._vmi_unschedulable(vmi, main)
        if phase == "Scheduled" and main.phase == "Running" and not info.start_pending:
            info.start_pending = True
            pname = main.name
            self.world.runtime.after(self.timings.vm_start_s,
                                     lambda: self._vmi_started(ns, name, pname))

    def _transition(self, st: Obj, phase: str) -> None:
        st["phase"] = phase
        pts = st.setdefault("phaseTransitionTimestamps", [])
        pts.append({"phase": phase, "phaseTransitionTimestamp": self._now_ts()})

    def _start_vmi(self, vmi: Obj, info: VmiInfo) -> None:
        ns, name = vmi["metadata"]["namespace"], vmi["metadata"]["name"]
        info.had_pod = True
        pod = self._create_launcher(vmi)

        def fn(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            if not st.get("phase"):
                self._transition(st, "Pending")
            self._transition(st, "Scheduling")
            st["guestOSInfo"] = {}
            st["qosClass"] = "Burstable"
            st["activePods"] = {pod.uid: pod.node} if pod.node else {pod.uid: ""}
            st["conditions"] = [{"type": "Ready", "status": "False", "lastProbeTime": None,
                                 "lastTransitionTime": self._now_ts(),
                                 "reason": "GuestNotRunning",
                                 "message": "Guest VM is not reported as running"}]
            return cur
        self._modify(VMI, ns, name, fn, status=True)
        if pod.node:
            main = self.pods.get((ns, pod.name))
            if main is not None:
                self._vmi_scheduled(self.c.get(API, VMI, name, ns), main)

    def _vmi_unschedulable(self, vmi: Obj, pod: PodInfo) -> None:
        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            conds = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                          "message": pod.unschedulable, "lastProbeTime": None,
                          "lastTransitionTime": self._now_ts()})
            if conds == st.get("conditions"):
                return None
            st["conditions"] = conds
            return cur
        self._modify(VMI, vmi["metadata"]["namespace"], vmi["metadata"]["name"], fn, status=True)

    def _vmi_scheduled(self, vmi: Obj, pod: PodInfo) -> None:
        ns, name = vmi["metadata"]["namespace"], vmi["metadata"]["name"]

        # one update, label and status together (virt-controller v1.5.2
        # pkg/virt-controller/watch/vmi/vmi.go: the hand-over to Scheduled sets
        # Labels[kubevirt.io/nodeName] and Status.NodeName on the same copy)
        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            if st.get("phase") not in ("", None, "Pending", "Scheduling"):
                return None
            cur["metadata"].setdefault("labels", {})[NODE_LABEL] = pod.node
            self._transition(st, "Scheduled")
            st["nodeName"] = pod.node
            st["activePods"] = {pod.uid: pod.node}
            st["conditions"] = [c for c in st.get("conditions") or []
                                if c.get("type") != "PodScheduled"]
            return cur
        self._modify(VMI, ns, name, fn, status=True)

    def _vmi_started(self, ns: str, name: str, pname: str) -> None:
        key = (ns, name)
        info = self.vmis.get(key)
        if info is not None:
            info.start_pending = False
        vmi = self.c.peek(API, VMI, name, ns)
        main = self._main_pod(key, vmi["metadata"]["uid"]) if vmi else None
        if vmi is None or main is None or main.name != pname or main.phase != "Running" or \
                vmi["metadata"].get("deletionTimestamp") or \
                (vmi.get("status") or {}).get("phase") != "Scheduled":
            if vmi is not None:
                self._sync_vmi(ns, name)
            return
        spec = vmi.get("spec") or {}
        pvcs = {c: self.c.peek("v1", "PersistentVolumeClaim", c, ns) for c in vmi_claims(spec)}
        ok, reason, message, block = live_migratable(vmi, pvcs)
        now = self._now_ts()
        ip = main.ip or "10.52.0.2"
        ifaces = []
        for i, net in enumerate(spec.get("networks") or [{"name": "default", "pod": {}}]):
            entry: Obj = {"name": net.get("name"), "infoSource": "domain, guest-agent",
                          "interfaceName": f"eth{i}", "mac": f"52:54:00:{i:02x}:00:01",
                          "queueCount": 1}
            if "pod" in net:
                entry["ipAddress"] = ip
                entry["ipAddresses"] = [ip]
            ifaces.append(entry)
        vol_status = []
        for vol in spec.get("volumes") or []:
            vs: Obj = {"name": vol.get("name"), "target": ""}
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName") or \
                (vol.get("dataVolume") or {}).get("name")
            if claim and pvcs.get(claim) is not None:
                pspec = pvcs[claim].get("spec") or {}  # type: ignore[union-attr]
                vs["persistentVolumeClaimInfo"] = {
                    "claimName": claim, "accessModes": pspec.get("accessModes") or [],
                    "volumeMode": pspec.get("volumeMode", "Filesystem")}
            vol_status.append(vs)

        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            if st.get("phase") != "Scheduled":
                return None
            self._transition(st, "Running")
            st["nodeName"] = main.node
            st["interfaces"] = ifaces
            st["volumeStatus"] = vol_status
            st["migrationMethod"] = "BlockMigration" if block else "LiveMigration"
            st["migrationTransport"] = "Unix"
            st["launcherContainerImageVersion"] = self.launcher_image
            st["guestOSInfo"] = {"id": "sles", "name": "SLES"}
            lm: Obj = {"type": "LiveMigratable", "status": "True" if ok else "False",
                       "lastProbeTime": None, "lastTransitionTime": None}
            if not ok:
                lm["reason"] = reason
                lm["message"] = message
            st["conditions"] = [
                {"type": "Ready", "status": "True", "lastProbeTime": None,
                 "lastTransitionTime": now},
                lm,
                {"type": "AgentConnected", "status": "True", "lastProbeTime": now,
                 "lastTransitionTime": now},
            ]
            return cur
        if self._modify(VMI, ns, name, fn, status=True) is not None:
            self.world.timeline.record("vm_started", vm=self._vm_id(ns, name), node=main.node)
            if main.node in self.tainted:
                self._kick_evacuation()

    def _vmi_pod_died(self, vmi: Obj, info: VmiInfo, main: PodInfo | None) -> None:
        ns, name = vmi["metadata"]["namespace"], vmi["metadata"]["name"]
        st = vmi.get("status") or {}
        phase = st.get("phase") or ""
        node = (main.node if main else "") or st.get("nodeName") or ""
        node_obj = self.nodes.get(node)
        kubelet = self.world.controllers.get("kubelet")
        if kubelet is not None and hasattr(kubelet, "is_up") and node:
            node_down = not kubelet.is_up(node)
        else:
            node_down = bool(node and (node_obj is None or not pu.node_ready(node_obj)))
        graceful = bool(main and main.graceful) and not node_down
        if graceful:
            new_phase, reason = "Succeeded", "PodTerminated"
        else:
            new_phase = "Failed"
            reason = "NodeNotReady" if node_down else (
                "PodFailed" if main and main.phase == "Failed" else "PodDeleted")

        def fn(cur: Obj) -> Obj | None:
            s = cur.setdefault("status", {})
            if s.get("phase") in FINAL:
                return None
            self._transition(s, new_phase)
            s["reason"] = reason
            s["conditions"] = [{"type": "Ready", "status": "False", "lastProbeTime": None,
                                "lastTransitionTime": self._now_ts(), "reason": "PodNotExists",
                                "message": "virt-launcher pod has been deleted"}]
            return cur
        if self._modify(VMI, ns, name, fn, status=True) is None:
            return
        vm = self._vm_id(ns, name)
        mig = self.active_mig.get((ns, name))
        if mig is not None:
            self._fail_migration((ns, mig), "source virt-launcher pod died")
        if graceful:
            self.world.timeline.record("vm_stopped", vm=vm, node=node, reason=reason)
        elif phase == "Running":
            self.world.timeline.record("vm_killed", vm=vm, node=node, reason=reason)
            self.world.timeline.count("vm_killed")
        else:
            self.world.timeline.record("vmi_failed", vm=vm, node=node, reason=reason,
                                       phase=phase)

    def _stop_vmi(self, vmi: Obj, info: VmiInfo) -> None:
        ns, name = vmi["metadata"]["namespace"], vmi["metadata"]["name"]
        key = (ns, name)
        mig = self.active_mig.get(key)
        if mig is not None:
            self._fail_migration((ns, mig), "VMI is shutting down")
        phase = (vmi.get("status") or {}).get("phase") or ""
        main = self._main_pod(key, vmi["metadata"]["uid"])
        alive = main is not None and main.phase not in ("Gone", "Failed", "Succeeded")
        if phase in FINAL or not alive or phase in ("", "Pending", "Scheduling"):
            self._finish_stop(ns, name, record=phase == "Running" and alive)
            return
        if info.stop_timer is None:
            info.stop_timer = self.world.runtime.after(
                self.timings.vm_stop_s, lambda: self._finish_stop(ns, name, record=True))

    def _finish_stop(self, ns: str, name: str, record: bool) -> None:
        key = (ns, name)
        info = self.vmis.get(key)
        if info is not None:
            info.stop_timer = None
        vmi = self.c.peek(API, VMI, name, ns)
        if vmi is None:
            return
        node = (vmi.get("status") or {}).get("nodeName", "")

        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            if st.get("phase") in FINAL:
                return None
            self._transition(st, "Succeeded")
            st["conditions"] = [{"type": "Ready", "status": "False", "lastProbeTime": None,
                                 "lastTransitionTime": self._now_ts(),
                                 "reason": "PodTerminating",
                                 "message": "virt-launcher pod is terminating"}]
            return cur
        self._modify(VMI, ns, name, fn, status=True)
        for pname in list(self.pods_by_vmi.get(key, ())):
            p = self.pods.get((ns, pname))
            if p is not None and p.vmi_uid == vmi["metadata"]["uid"] and \
                    p.role != "retired" and p.phase != "Gone":
                self._delete_pod(ns, pname, graceful=False)
        if record:
            self.world.timeline.record("vm_stopped", vm=self._vm_id(ns, name), node=node)

        def drop(cur: Obj) -> Obj | None:
            fins = cur["metadata"].get("finalizers") or []
            if FINALIZER not in fins:
                return None
            cur["metadata"]["finalizers"] = [f for f in fins if f != FINALIZER]
            return cur
        self._modify(VMI, ns, name, drop)

    # ------------------------------------------------------------------ migrations
    def _on_vmim(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        key = (md["namespace"], md["name"])
        if type_ == "DELETED":
            m = self.migs.get(key)
            if m is not None and m.phase not in FINAL:
                self._fail_migration(key, "Migration aborted: the migration object was deleted",
                                     write=False)
            gone = self.migs.pop(key, None)
            self._open_keys.discard(key)
            if gone is not None and self._mig_by_uid.get(gone.uid) == key:
                del self._mig_by_uid[gone.uid]
            return
        m = self.migs.get(key)
        phase = (obj.get("status") or {}).get("phase") or ""
        if m is None:
            if phase in FINAL:
                return
            vmi_name = (obj.get("spec") or {}).get("vmiName", "")
            m = MigInfo(key[0], key[1], md["uid"], vmi_name, next(self._seq),
                        evacuation=EVACUATION_ANNOTATION in (md.get("annotations") or {}))
            self.migs[key] = m
            self._open_keys.add(key)
            self._mig_by_uid[m.uid] = key
        if md.get("deletionTimestamp") and m.phase not in FINAL:
            self._fail_migration(key, "Migration aborted: the migration object is being deleted")
            return
        if not phase and not m.phase:
            m.phase = "Pending"
            vkey = (key[0], m.vmi)
            if vkey not in self.active_mig:
                self.active_mig[vkey] = m.name

            def fn(cur: Obj) -> Obj:
                self._transition(cur.setdefault("status", {}), "Pending")
                return cur
            self._modify(VMIM, key[0], key[1], fn, status=True)
        self._schedule_pending()

    def _mig_added_selector(self, ns: str, name: str) -> dict[str, str]:
        """The migration's ``addedNodeSelector`` where the running KubeVirt knows the field
        (v1.6.0+); older virt-controllers have no such field and build the target pod from the
        VMI alone."""
        if not self.honours_added_node_selector():
            return {}
        m = self.c.try_get(API, VMIM, name, ns)
        return dict(((m or {}).get("spec") or {}).get("addedNodeSelector") or {})

    def _set_mig_status(self, m: MigInfo, phase: str | None, state: Obj | None = None) -> None:
        def fn(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            if phase and st.get("phase") != phase:
                self._transition(st, phase)
            if state is not None:
                ms = st.setdefault("migrationState", {})
                ms.update(state)
            return cur
        if phase:
            m.phase = phase
        self._modify(VMIM, m.ns, m.name, fn, status=True)

    def _set_vmi_migration_state(self, m: MigInfo, state: Obj, labels: dict[str, str | None]
                                 | None = None, status_extra: Obj | None = None) -> None:
        def fn(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            ms = st.get("migrationState") or {}
            if ms.get("migrationUid") != m.uid:
                ms = {}
            ms.update(state)
            st["migrationState"] = ms
            for k, v in (status_extra or {}).items():
                if v is None:
                    st.pop(k, None)
                else:
                    st[k] = v
            return cur
        self._modify(VMI, m.ns, m.vmi, fn, status=True)
        if labels:
            def lab(cur: Obj) -> Obj | None:
                lb = cur["metadata"].setdefault("labels", {})
                before = dict(lb)
                for k, v in labels.items():
                    if v is None:
                        lb.pop(k, None)
                    else:
                        lb[k] = v
                return None if lb == before else cur
            self._modify(VMI, m.ns, m.vmi, lab)

    def _open_migs(self) -> list[MigInfo]:
        """The migrations not in a final phase (a final phase is never left), in creation
        order."""
        out = []
        for key in list(self._open_keys):
            m = self.migs.get(key)
            if m is None or m.phase in FINAL:
                self._open_keys.discard(key)
            else:
                out.append(m)
        return sorted(out, key=lambda m: m.seq)

    def _schedule_pending(self) -> None:
        open_ = self._open_migs()
        active = [m for m in open_ if m.phase in MIG_ACTIVE]
        if len(active) >= self.parallel_migrations_per_cluster:
            return
        outbound: dict[str, int] = {}
        for m in active:
            outbound[m.source] = outbound.get(m.source, 0) + 1
        pending = [m for m in open_ if m.phase == "Pending"]
        for m in pending:
            if len(active) >= self.parallel_migrations_per_cluster:
                break
            vmi = self.c.peek(API, VMI, m.vmi, m.ns)
            st = (vmi or {}).get("status") or {}
            if vmi is None or st.get("phase") != "Running" or \
                    vmi["metadata"].get("deletionTimestamp"):
                self._fail_migration((m.ns, m.name), "the VMI is not running")
                continue
            lm = pu.get_condition(vmi, "LiveMigratable")
            if lm is not None and lm.get("status") == "False":
                self._fail_migration((m.ns, m.name),
                                     f"VMI is not live-migratable: {lm.get('reason')}: "
                                     f"{lm.get('message')}")
                continue
            source = st.get("nodeName") or ""
            if outbound.get(source, 0) >= self.parallel_outbound_per_node:
                continue
            m.source = source
            outbound[source] = outbound.get(source, 0) + 1
            active.append(m)
            self._start_migration(m, vmi)

    def _start_migration(self, m: MigInfo, vmi: Obj) -> None:
        m.phase = "Scheduling"
        m.admitted_at = self.clock.now()
        self.active_mig[(m.ns, m.vmi)] = m.name
        pod = self._create_launcher(vmi, m)
        m.target_pod = pod.name
        self._set_mig_status(m, "Scheduling", {
            "migrationUid": m.uid, "sourceNode": m.source, "targetPod": pod.name,
            "sourcePod": (self._main_pod((m.ns, m.vmi), vmi["metadata"]["uid"]) or
                          PodInfo("", "", "")).name})
        self._set_vmi_migration_state(m, {"migrationUid": m.uid, "sourceNode": m.source,
                                          "targetPod": pod.name, "mode": "PreCopy"})
        key = (m.ns, m.name)

        def unschedulable_timeout() -> None:
            cur = self.migs.get(key)
            if cur is not None and cur.phase == "Scheduling":
                self._fail_migration(key, "Migration target pod has been unschedulable for "
                                     f"{int(self.unschedulable_timeout_s)}s: "
                                     f"{self._pod_message(m)}")
        m.timer = self.world.runtime.after(self.unschedulable_timeout_s, unschedulable_timeout)
        self._advance_migration(key)

    def _pod_message(self, m: MigInfo) -> str:
        p = self.pods.get((m.ns, m.target_pod))
        return p.unschedulable if p and p.unschedulable else "no node satisfies the constraints"

    def _advance_migration(self, key: Key) -> None:
        m = self.migs.get(key)
        if m is None or m.phase in FINAL or m.phase == "Pending":
            return
        pod = self.pods.get((m.ns, m.target_pod))
        if pod is None or pod.phase in ("Gone", "Failed", "Succeeded"):
            self._fail_migration(key, "target virt-launcher pod died")
            return
        if m.phase == "Scheduling" and pod.node:
            if m.timer is not None:
                m.timer.cancel()
                m.timer = None
            m.target = pod.node
            self._set_mig_status(m, "Scheduled", {"targetNode": pod.node})
            self._set_vmi_migration_state(m, {"targetNode": pod.node,
                                              "targetNodeAddress": pod.node},
                                          labels={TARGET_NODE_LABEL: pod.node})
        if m.phase == "Scheduled" and pod.phase == "Running":
            self._set_mig_status(m, "PreparingTarget")
            self.world.runtime.after(min(1.0, self.timings.migration_overhead_s / 2),
                                     lambda: self._begin_transfer(key))

    def _begin_transfer(self, key: Key) -> None:
        m = self.migs.get(key)
        if m is None or m.phase != "PreparingTarget":
            return
        self._set_mig_status(m, "TargetReady", {"targetNodeDomainDetected": True})
        info = self.vmis.get((m.ns, m.vmi))
        mem = info.mem_mib if info else 1024.0
        duration = self.timings.migration_overhead_s + mem / max(
            1e-6, self.timings.migration_bandwidth_mib_s)
        now = self._now_ts()
        m.started_at = self.clock.now()
        self._set_mig_status(m, "Running", {"startTimestamp": now, "mode": "PreCopy"})
        self._set_vmi_migration_state(m, {"startTimestamp": now, "targetNode": m.target})
        vm = self._vm_id(m.ns, m.vmi)
        self.world.timeline.record("vm_migration_started", vm=vm, source=m.source,
                                   target=m.target, migration=m.name)
        faults = self.world.faults
        ctx = {"vm": vm, "name": m.vmi, "namespace": m.ns, "node": m.source,
               "source": m.source, "target": m.target}
        faults.notify("migration_started", **ctx)
        if faults.match("migration_hang", **ctx) is not None:
            m.hang = True
            self.world.timeline.record("vm_migration_hanging", vm=vm, source=m.source,
                                       target=m.target, migration=m.name)
            # virt-launcher's migration monitor aborts a migration whose remaining data has
            # not shrunk for progressTimeout seconds (kubevirt v1.5.2
            # pkg/virt-launcher/virtwrap/live-migration-source.go isMigrationProgressing,
            # default MigrationProgressTimeout 150 in pkg/virt-config/virt-config.go)
            delay = MIGRATION_PROGRESS_TIMEOUT_S + 1
            m.timer = self.world.runtime.after(delay, lambda: self._fail_migration(
                key, f"Live migration stuck for {delay} seconds and has been aborted"))
            return
        spec = faults.match("migration_fail", **ctx)
        if spec is not None:
            msg = str(spec.get("message") or "Live migration failed: error encountered during "
                      "MigrateToURI3 libvirt api call: operation failed: migration job: "
                      "unexpectedly failed (simulated fault migration_fail)")
            m.timer = self.world.runtime.after(
                duration / 2, lambda: self._fail_migration(key, msg))
            return
        m.timer = self.world.runtime.after(duration, lambda: self._succeed_migration(key))

    def _succeed_migration(self, key: Key) -> None:
        m = self.migs.get(key)
        if m is None or m.phase != "Running":
            return
        vkey = (m.ns, m.vmi)
        tpod = self.pods.get((m.ns, m.target_pod))
        if tpod is None or tpod.phase != "Running":
            self._fail_migration(key, "target virt-launcher pod died")
            return
        old_main = self._main_pod(vkey, self._vmi_uid(vkey))
        now = self._now_ts()
        m.timer = None
        tpod.role = "main"
        if old_main is not None:
            old_main.role = "retired"
        ifaces_ip = tpod.ip

        drop_target_label = self.kubevirt_version() >= TARGET_LABEL_DROPPED_SINCE

        # the migration's acknowledgement: label and status in one update (virt-handler
        # v1.5.2 pkg/virt-handler/vm.go, "this is the migration ACK")
        def fn(cur: Obj) -> Obj:
            lb = cur["metadata"].setdefault("labels", {})
            lb[NODE_LABEL] = m.target
            if drop_target_label:
                lb.pop(TARGET_NODE_LABEL, None)
            st = cur.setdefault("status", {})
            st["nodeName"] = m.target
            st.pop("evacuationNodeName", None)
            st["activePods"] = {tpod.uid: m.target}
            for iface in st.get("interfaces") or []:
                if "ipAddress" in iface and ifaces_ip:
                    iface["ipAddress"] = ifaces_ip
                    iface["ipAddresses"] = [ifaces_ip]
            ms = st.get("migrationState") or {}
            ms.update({"endTimestamp": now, "completed": True, "targetNode": m.target,
                       "sourceNode": m.source, "migrationUid": m.uid})
            st["migrationState"] = ms
            return cur
        self._modify(VMI, m.ns, m.vmi, fn, status=True)
        self._set_mig_status(m, "Succeeded", {"endTimestamp": now, "completed": True})
        if old_main is not None:
            self._delete_pod(m.ns, old_main.name)
        self.active_mig.pop(vkey, None)
        vm = self._vm_id(m.ns, m.vmi)
        self.migrations_per_vm[vm] = self.migrations_per_vm.get(vm, 0) + 1
        self.world.timeline.count("vm_migrations")
        self.world.timeline.record("vm_migration_succeeded", vm=vm, source=m.source,
                                   target=m.target, migration=m.name,
                                   duration_s=round(self.clock.now() - m.started_at, 3),
                                   scheduling_s=round(m.started_at - m.admitted_at, 3))
        self._evac_backoff.pop(vkey, None)
        info = self.vmis.get(vkey)
        if info is not None:
            if info.node:
                self.by_node.get(info.node, set()).discard(vkey)
            info.node = m.target
            self.by_node.setdefault(m.target, set()).add(vkey)
            self._set_evac_node(vkey, info, "")
        self._schedule_pending()
        self._kick_evacuation()

    def _fail_migration(self, key: Key, reason: str, record: bool = True,
                        write: bool = True) -> None:
        m = self.migs.get(key)
        if m is None or m.phase in FINAL:
            return
        was = m.phase
        m.phase = "Failed"
        if m.timer is not None:
            m.timer.cancel()
            m.timer = None
        vkey = (m.ns, m.vmi)
        if self.active_mig.get(vkey) == m.name:
            self.active_mig.pop(vkey, None)
        now = self._now_ts()
        tp = self.pods.get((m.ns, m.target_pod)) if m.target_pod else None
        if tp is not None and tp.role == "target":
            tp.role = "retired"
            if tp.phase != "Gone":
                self._delete_pod(m.ns, tp.name, graceful=False)
        if write:
            def fn(cur: Obj) -> Obj:
                st = cur.setdefault("status", {})
                self._transition(st, "Failed")
                ms = st.setdefault("migrationState", {})
                ms.update({"endTimestamp": now, "completed": True, "failed": True,
                           "failureReason": reason})
                st["conditions"] = [{"type": "Failed", "status": "True", "reason": "Failed",
                                     "message": reason, "lastProbeTime": None,
                                     "lastTransitionTime": now}]
                return cur
            self._modify(VMIM, m.ns, m.name, fn, status=True)
        if was not in ("", "Pending") or m.source:
            vmi = self.c.peek(API, VMI, m.vmi, m.ns)
            ms = ((vmi or {}).get("status") or {}).get("migrationState") or {}
            if vmi is not None and ms.get("migrationUid") == m.uid:
                self._set_vmi_migration_state(
                    m, {"endTimestamp": now, "completed": True, "failed": True,
                        "failureReason": reason}, labels={TARGET_NODE_LABEL: None})
        vm = self._vm_id(m.ns, m.vmi)
        if record:
            self.world.timeline.count("vm_migrations_failed")
            self.world.timeline.record("vm_migration_failed", vm=vm, source=m.source,
                                       target=m.target, migration=m.name, reason=reason)
        if m.evacuation or (self.vmis.get(vkey) and self.vmis[vkey].evac_node):
            n = self._evac_backoff.get(vkey, (0.0, 0))[1] + 1
            delay = min(300.0, 20.0 * 2 ** (n - 1))
            self._evac_backoff[vkey] = (self.clock.now() + delay, n)
            self.world.runtime.after(delay + 0.01, self._kick_evacuation)
        self._schedule_pending()
        self._kick_evacuation()

    # ------------------------------------------------------------------ evacuation
    def _kick_evacuation(self) -> None:
        if self._evac_queued:
            return
        self._evac_queued = True
        self.world.runtime.call_soon(self._evacuate)

    def _evacuate(self) -> None:
        self._evac_queued = False
        inflight = self._open_migs()
        slots = self.parallel_migrations_per_cluster - len(inflight)
        if slots <= 0:
            return
        outbound: dict[str, int] = {}
        for m in inflight:
            src = m.source or (self.vmis.get((m.ns, m.vmi)) or VmiInfo("", "")).node
            outbound[src] = outbound.get(src, 0) + 1
        cands: set[Key] = set()
        for node in self.tainted:
            cands.update(self.by_node.get(node, ()))
        cands.update(self.evac_marked)
        now = self.clock.now()
        for key in sorted(cands):
            info = self.vmis.get(key)
            if info is None or info.phase != "Running" or info.deleting or \
                    key in self.active_mig:
                continue
            marked = bool(info.evac_node) and info.evac_node == info.node
            if not marked:
                if info.node not in self.tainted:
                    continue
                if info.strategy == "LiveMigrate":
                    pass
                elif info.strategy == "LiveMigrateIfPossible" and info.migratable:
                    pass
                else:
                    continue
            if self._evac_backoff.get(key, (0.0, 0))[0] > now:
                continue
            if outbound.get(info.node, 0) >= self.parallel_outbound_per_node:
                continue
            body = {"apiVersion": API, "kind": VMIM,
                    "metadata": {"generateName": "kubevirt-evacuation-", "namespace": key[0],
                                 "annotations": {EVACUATION_ANNOTATION: info.node}},
                    "spec": {"vmiName": key[1]}}
            try:
                self.c.create(body)
            except ApiError as exc:
                if (key, info.node) not in self._evac_blocked:
                    self._evac_blocked.add((key, info.node))
                    self.world.timeline.record("vm_evacuation_blocked",
                                               vm=self._vm_id(*key), node=info.node,
                                               reason=exc.message)
                self._evac_backoff[key] = (now + 60.0, 0)
                self.world.runtime.after(60.01, self._kick_evacuation)
                continue
            outbound[info.node] = outbound.get(info.node, 0) + 1
            slots -= 1
            if slots <= 0:
                break

    # ------------------------------------------------------------------ queries
    def vm_node(self, namespace: str, name: str) -> str:
        """Where the VMI of a VM runs now ('' when not running)."""
        info = self.vmis.get((namespace, name))
        return info.node if info and info.phase == "Running" else ""


def _placeable(pod: Obj, node: Obj) -> bool:
    """The built-in placement's filters: a Ready node whose taints the pod tolerates and
    that its nodeSelector and required node affinity match."""
    return (pu.node_ready(node) and pu.tolerates_taints(pod, node)
            and pu.node_affinity_matches(pod, node))


def _bind(pod: Obj, node: str) -> Obj | None:
    if pod["spec"].get("nodeName"):
        return None
    pod["spec"]["nodeName"] = node
    return pod


def _exclude_host(affinity: Obj | None, host: str) -> Obj:
    """Add ``kubernetes.io/hostname NotIn [host]`` to every required node-affinity term."""
    aff = json_copy(affinity) if affinity else {}
    na = aff.setdefault("nodeAffinity", {})
    req = na.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = req.setdefault("nodeSelectorTerms", [])
    expr = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [host]}
    if not terms:
        terms.append({"matchExpressions": [expr]})
    else:
        for t in terms:
            t.setdefault("matchExpressions", []).append(dict(expr))
    return aff


def setup(world: Any) -> KubeVirt:
    return KubeVirt(world)


__all__ = ["KubeVirt", "setup", "live_migratable", "vmi_memory_mib"]
