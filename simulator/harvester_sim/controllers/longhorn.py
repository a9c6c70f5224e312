"""Simulated Longhorn (``longhorn.io/v1beta2``): volumes, replicas, engines, instance managers.

* Every Volume has ``spec.numberOfReplicas`` Replica objects on distinct nodes (the scenario
  loader usually creates them; missing ones are created here) and one Engine. A replica
  created while its node's instance manager is not running yet stays ``stopped`` (no data,
  not failed) and starts with the instance manager; a volume whose replicas have all not
  started is ``unknown``, not ``faulted``.
* Replicas live in their node's instance manager: a pod ``instance-manager-<hash>`` in
  ``longhorn-system`` per node. When that pod dies (node reboot, eviction) the node's
  replicas of attached volumes fail (``spec.failedAt``, ``status.currentState: error``;
  a detached volume's replicas run no process and keep their data; attaching it fails those
  whose node is down or whose instance manager a drain holds back, while those of a Ready
  node whose instance manager is starting again wait for it, as
  ``canInstanceManagerLaunchReplica`` has it) and volumes become
  ``degraded`` (``faulted`` with no healthy replica). The pod is recreated once the node is
  Ready and schedulable: longhorn-manager v1.8.2 / v1.9.1
  ``controller/instance_manager_controller.go`` ``handlePod`` deletes a dead instance
  manager pod and creates none while the Kubernetes node is unschedulable
  (``IsKubeNodeUnschedulable``), rebooted or not, so a node's failed replicas are rebuilt
  after its uncordon. The failed replicas then rebuild for ``timings.replica_rebuild_s``
  and are healthy again. A kubelet restart (node NotReady, pods kept) does not touch
  replicas, as in Longhorn.
* Attachment follows the pods that mount the volume's PVC: ``status.state``
  attached/detached, ``status.currentNodeID`` (the oldest running user), engine ``nodeID``,
  ``kubernetesStatus.workloadsStatus``. Robustness is ``unknown`` while detached (unless
  faulted), as in Longhorn.
* The instance-manager PodDisruptionBudget (``minAvailable: 1``, named after the instance
  manager), as ``syncInstanceManagerPDB`` keeps it: every running instance manager of a
  schedulable node has one; on a cordoned node it is deleted only once no volume is
  attached there any more and, by ``node-drain-policy``, each replica on the node that
  matters has a healthy copy on another schedulable, PDB-protected node
  (:meth:`Longhorn.can_delete_pdb`). So a drain cannot evict an instance manager
  while VMs using its node's engines still run there.
* Settings: a few defaults (``replica-replenishment-wait-interval`` etc.) are created when
  missing, so the upgrade can read and change them.
* Failed replicas of an attached volume (longhorn-manager v1.8.2 and v1.9.1
  ``controller/volume_controller.go`` ``replenishReplicas``, ``scheduler/replica_scheduler.go``
  ``CheckAndReuseFailedReplica`` / ``isFailedReplicaReusable`` / ``IsPotentiallyReusableReplica``
  / ``RequireNewReplica`` / ``timeToReplacementReplica``): while the volume is ``degraded``
  (``status.lastDegradedAt``) and no replica is rebuilding, one failed replica at a time
  (the latest failed first, ``GetLatestFailedReplica``) whose node's instance manager runs
  is reused: ``failedAt`` and ``healthyAt`` cleared, rebuilt in place for
  ``timings.replica_rebuild_s``, ``healthyAt`` set again once rebuilt (RW). That
  holds whatever failed it: its instance manager (rebuilt once it is back), the scenario's
  initial state (``robustness: degraded`` is a failed replica on a node that is up, so it
  is rebuilt as soon as the volume attaches), or a healed ``volume_degraded`` fault. A
  failed replica that cannot be reused yet (instance manager down; held by the fault) is
  waited for ``replica-replenishment-wait-interval`` seconds from ``lastDegradedAt``, read
  from the Setting whenever it re-checks; past that a new replica is created (one at a
  time) on a node that is Ready, schedulable, not a witness and holds no replica of the
  volume (hard anti-affinity, Longhorn's default), which rebuilds from scratch. The failed
  replica is then not reused when it becomes reusable (the volume has its replicas); it
  stays failed, as Longhorn keeps it until the volume's ``staleReplicaTimeout``. No
  eligible node: nothing is created (Longhorn sets ``Scheduled=False``). Timeline:
  ``replica_replenished`` (volume, replica, node, ``waited_s``), ``replica_rebuilt``.
  Rebuilds always succeed here (``rebuildRetryCount``, the reuse back-off and
  ``FailedReplicaMaxRetryCount`` do not arise).
* Per-node rebuild limit (``replica_controller.go`` ``CanStartRebuildingReplica``): a
  replica reused or created for a rebuild starts (its instance, and the rebuild) only while
  its node runs fewer rebuilds than the Setting ``concurrent-replica-rebuild-per-node-limit``
  (below 1: no limit); meanwhile it waits, ``stopped``, ``failedAt`` and ``healthyAt``
  cleared, not in the engine's mode map. A slot that frees goes to the node's next waiting
  replica. The limit 0 disables rebuilding (``replenishReplicas``). Timeline
  ``replica_rebuild_started`` (``waited_s``). A volume that detaches meanwhile
  (``closeVolumeDependentResources``) marks its replicas being rebuilt or waiting failed,
  freeing their slots; attached again, it reuses them.

Fault ``volume_degraded`` (target keys ``volume``, ``pvc``, ``namespace``; params
``replicas`` (default 1), ``nodes`` (only replicas on these nodes) and ``heal_after_s``):
fails healthy replicas of the volume and keeps them unusable to Longhorn for
``heal_after_s`` (forever without it), as a disk that is not Ready would
(``isFailedReplicaReusable``) but for this volume's replicas only. Longhorn does not rebuild
them while the fault lasts; it does what it would with any unusable failed replica: after
``replica-replenishment-wait-interval`` it replaces them on an eligible node, if there is
one. When the fault heals they are reused (rebuilt in place, one at a time) if the volume
still needs them. Timeline: ``replica_failed``, ``replica_rebuilt``, ``volume_degraded``.

Upstream: longhorn/longhorn-manager ``v1.8.2`` (Harvester v1.5.1) and ``v1.9.1``
(Harvester v1.6.0): ``controller/volume_controller.go``, ``replica_controller.go``,
``engine_controller.go``, ``instance_manager_controller.go`` (the instance-manager PDB),
``scheduler/replica_scheduler.go``.
Not modelled: engine images and live engine upgrades, snapshots/backups, disk-level
scheduling (space, tags, disk selectors), data locality, replica auto-balance, the share
manager (RWX volumes), Longhorn's own VolumeAttachment tickets, the cluster autoscaler
mode of the instance-manager PDBs, stale-replica cleanup,
the pause of a volume's replenishment while it migrates with its VM (``replenishReplicas``
returns at once while ``IsVolumeMigrating``: a live migration holds back the reuse of that
volume's failed replicas for its duration; here it does not).
"""

from __future__ import annotations

import copy
import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

from ..api.errors import ApiError

log = logging.getLogger("harvester_sim.longhorn")

Obj = dict[str, Any]
Key = tuple[str, str]
API = "longhorn.io/v1beta2"
NS = "longhorn-system"
IM_IMAGE = "longhornio/longhorn-instance-manager:v1.7.2"
IM_LABEL = "longhorn.io/component"
FAULT_POLL_S = 5.0
# longhorn-manager scheduler/replica_scheduler.go FailedReplicaMaxRetryCount
FAILED_REPLICA_MAX_RETRY_COUNT = 5

DEFAULT_SETTINGS = {
    "replica-replenishment-wait-interval": "600",
    "node-drain-policy": "block-if-contains-last-replica",
    "default-replica-count": "3",
    "concurrent-replica-rebuild-per-node-limit": "5",
    "storage-over-provisioning-percentage": "200",
    "storage-minimal-available-percentage": "25",
    "auto-delete-pod-when-volume-detached-unexpectedly": "true",
}


@dataclass
class Rep:
    name: str
    volume: str
    node: str
    healthy: bool
    rebuilding: bool = False
    # reused (or new) for a rebuild, its instance not started yet: its node already runs
    # ``concurrent-replica-rebuild-per-node-limit`` rebuilds (``CanStartRebuildingReplica``)
    waiting: bool = False
    queued_at: float = 0.0
    # why it is not healthy: "im" (its node's instance manager died), "initial" (failed in
    # the scenario's initial state), "failed" (a fault that has healed), "fault" (held failed
    # by a volume_degraded fault: not reusable while it lasts), "new", or "pending": created
    # for a new volume while its node's instance manager was not running; it holds no data
    # yet and starts when the instance manager does
    cause: str = ""
    # sim time of spec.failedAt (GetLatestFailedReplica); the initial state's is older
    failed_at: float = -1.0
    # written by this controller: its in-memory state is the truth, and a watch event that
    # carries an older write must not undo it
    managed: bool = False


@dataclass
class Vol:
    name: str
    replicas: int
    attached: str = ""
    users: dict[Key, str] = field(default_factory=dict)   # pod -> node (running pods)
    pvc: Key | None = None
    faulted_by: int = 0
    degraded_at: float | None = None    # sim time of status.lastDegradedAt
    replenish_timer: Any = None
    unschedulable: bool = False         # condition Scheduled=False (ReplicaSchedulingFailure)


def replica_available(obj: Obj) -> bool:
    """A Replica object that holds the volume's data and serves it: running, and
    longhorn-manager's ``datastore.IsAvailableHealthyReplica`` (no ``failedAt``,
    ``healthyAt`` set: RW since it was last built)."""
    spec = obj.get("spec") or {}
    return (obj.get("status") or {}).get("currentState") == "running" and \
        not spec.get("failedAt") and bool(spec.get("healthyAt"))


def replica_restoring(obj: Obj) -> bool:
    """A Replica object Longhorn reused or created for a rebuild and has not rebuilt yet:
    ``failedAt`` and ``healthyAt`` cleared, ``desireState: running`` (rebuilding, or waiting
    for one of its node's rebuild slots)."""
    spec = obj.get("spec") or {}
    return not spec.get("failedAt") and not spec.get("healthyAt") and \
        spec.get("desireState") == "running"


def im_name(node: str) -> str:
    return "instance-manager-" + hashlib.md5(node.encode()).hexdigest()  # noqa: S324


class Longhorn:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.c = world.client_for("longhorn-manager")
        self.timings = world.timings
        self.vols: dict[str, Vol] = {}
        self.reps: dict[str, Rep] = {}
        self.reps_by_vol: dict[str, set[str]] = {}
        self.reps_by_node: dict[str, set[str]] = {}
        # node -> the attached volumes whose engine runs there; the cordoned nodes; the nodes
        # whose PDB may have to be created since the last sync
        self.attached_on: dict[str, set[str]] = {}
        self.cordoned: set[str] = set()
        self._pdb_dirty: set[str] = set()
        self.im_up: dict[str, bool] = {}
        # per node: the replicas rebuilding there, and those waiting for one of its rebuild
        # slots in the order they were reused (the replica controller's inProgressRebuildingMap
        # and the replicas it turned away)
        self.rebuilding_on: dict[str, set[str]] = {}
        self.rebuild_queue: dict[str, list[str]] = {}
        self.nodes: dict[str, Obj] = {}
        self.pdbs: set[str] = set()
        self.claim_vol: dict[Key, str] = {}
        self.pod_vols: dict[Key, list[str]] = {}
        self._pdb_queued = False
        self._fault_timer: Any = None
        rt = world.runtime
        rt.on("longhorn.io", "volumes", self._on_volume)
        rt.on("longhorn.io", "replicas", self._on_replica)
        rt.on("", "nodes", self._on_node)
        rt.on("", "pods", self._on_pod)
        rt.call_soon(self._seed)
        self._fault_timer = rt.after(FAULT_POLL_S, self._poll_faults)

    @property
    def has_kubelet(self) -> bool:
        return bool(self.world.simulates("kubelet"))

    def _now(self) -> str:
        return str(self.world.clock.timestamp())

    def _ensure_namespace(self) -> None:
        if self.c.try_get("v1", "Namespace", NS) is None:
            try:
                self.c.create({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": NS}})
            except ApiError:
                pass

    def _seed(self) -> None:
        self._ensure_namespace()
        try:
            for name, value in DEFAULT_SETTINGS.items():
                if self.c.try_get(API, "Setting", name, NS) is None:
                    self.c.create({"apiVersion": API, "kind": "Setting",
                                   "metadata": {"name": name, "namespace": NS},
                                   "value": value, "status": {"applied": True}})
            vols = self.c.list(API, "Volume", NS)
            reps = self.c.list(API, "Replica", NS)
        except ApiError:
            return  # Longhorn CRDs not installed
        for pod in self.c.list("v1", "Pod", NS, label_selector={IM_LABEL: "instance-manager"}):
            self._on_pod("ADDED", pod, None)
        for node in self.c.list("v1", "Node"):
            self._on_node("ADDED", node, None)
        for r in reps:
            self._on_replica("ADDED", r, None)
        for v in vols:
            self._on_volume("ADDED", v, None)

    # ------------------------------------------------------------------ nodes / IM pods
    def _on_node(self, type_: str, obj: Obj, old: Obj | None) -> None:
        name = obj["metadata"]["name"]
        if type_ == "DELETED":
            self.nodes.pop(name, None)
            self.cordoned.discard(name)
            self._pdb_dirty.add(name)
            self._queue_pdbs()
            return
        before = self.nodes.get(name)
        self.nodes[name] = obj
        ready = _ready(obj)
        cordoned = bool((obj.get("spec") or {}).get("unschedulable"))
        if before is None or (name in self.cordoned) != cordoned:
            if cordoned:
                self.cordoned.add(name)
            else:
                self.cordoned.discard(name)
            self._pdb_dirty.add(name)
            self._queue_pdbs()   # the PDB follows the node's cordon
        if before is None:
            self._ensure_lh_node(name)
        if ready and not self.im_up.get(name):
            self._ensure_im(name)

    def _ensure_lh_node(self, name: str) -> None:
        if self.c.try_get(API, "Node", name, NS) is not None:
            return
        try:
            self.c.create({"apiVersion": API, "kind": "Node",
                           "metadata": {"name": name, "namespace": NS},
                           "spec": {"name": name, "allowScheduling": True,
                                    "evictionRequested": False, "disks": {}},
                           "status": {"conditions": [
                               {"type": "Ready", "status": "True"},
                               {"type": "Schedulable", "status": "True"}]}})
        except ApiError:
            pass

    def _ensure_im(self, node: str) -> None:
        n = self.nodes.get(node)
        if n is None or not _ready(n):
            return
        name = im_name(node)
        pod = self.c.try_get("v1", "Pod", name, NS)
        if pod is not None:
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp"):
                self.c.delete("v1", "Pod", name, NS, grace_period=0)
            return
        if self._im_held_back(node, n):
            return  # being drained: Longhorn's manager waits for the node to come back
        self._ensure_namespace()
        try:
            self.c.create({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": NS, "labels": {
                    IM_LABEL: "instance-manager", "longhorn.io/instance-manager-type": "aio",
                    "longhorn.io/node": node, "longhorn.io/managed-by": "longhorn-manager",
                    "longhorn.io/data-engine": "v1"}},
                "spec": {"nodeName": node, "restartPolicy": "Never",
                         "priorityClassName": "longhorn-critical",
                         "tolerations": [{"operator": "Exists"}],
                         "terminationGracePeriodSeconds": 30,
                         "containers": [{"name": "instance-manager", "image": IM_IMAGE,
                                         "resources": {"requests": {"cpu": "100m"}}}]},
            })
        except ApiError:
            return
        if not self.has_kubelet:
            def run() -> None:
                def fn(p: Obj) -> Obj | None:
                    if p["metadata"].get("deletionTimestamp"):
                        return None
                    p["status"] = {"phase": "Running", "conditions": [
                        {"type": "Ready", "status": "True"}]}
                    return p
                try:
                    self.c.modify("v1", "Pod", name, fn, NS, "status")
                except ApiError:
                    pass
            self.world.runtime.after(self.timings.pod_start_s, run)

    def _im_held_back(self, node: str, n: Obj) -> bool:
        """An instance manager that went away (a drain evicted it, the node rebooted) is not
        recreated while its node is cordoned (``handlePod``). One the scenario starts without
        on a cordoned node is created: it stands for the one that ran before the cordon."""
        return bool((n.get("spec") or {}).get("unschedulable")) and node in self.im_up

    def _im_can_launch(self, node: str) -> bool:
        """longhorn-manager ``canInstanceManagerLaunchReplica``: the node is neither down nor
        deleted and its instance manager is running or starting. A Ready node's instance
        manager that is not running is being (re)created (``_ensure_im``), i.e. starting,
        unless a drain holds it back (stopped)."""
        if self.im_up.get(node, True):
            return True
        n = self.nodes.get(node)
        return n is not None and _ready(n) and not self._im_held_back(node, n)

    def _on_pod(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        labels = md.get("labels") or {}
        if md.get("namespace") == NS and labels.get(IM_LABEL) == "instance-manager":
            self._on_im_pod(type_, obj)
            return
        vols = (obj.get("spec") or {}).get("volumes")
        if not vols:
            return
        key = (md.get("namespace", ""), md["name"])
        phase = (obj.get("status") or {}).get("phase")
        node = (obj.get("spec") or {}).get("nodeName") or ""
        using = type_ != "DELETED" and phase == "Running" and bool(node) and \
            not md.get("deletionTimestamp")
        names = self.pod_vols.get(key)
        if names is None:
            if not using:
                return
            names = []
            for v in vols:
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    vol = self._claim_volume(key[0], claim)
                    if vol:
                        names.append(vol)
            self.pod_vols[key] = names
        if not using:
            self.pod_vols.pop(key, None)
        for vol in names:
            v = self.vols.get(vol)
            if v is None:
                continue
            if using:
                v.users[key] = node
            else:
                v.users.pop(key, None)
            self._sync_attachment(v)

    def _claim_volume(self, ns: str, claim: str) -> str:
        ck = (ns, claim)
        if ck not in self.claim_vol:
            pvc = self.c.try_get("v1", "PersistentVolumeClaim", claim, ns)
            vol = str(((pvc or {}).get("spec") or {}).get("volumeName") or "")
            if not vol:
                return ""
            self.claim_vol[ck] = vol
            v = self.vols.get(vol)
            if v is not None:
                v.pvc = ck
        return self.claim_vol[ck]

    def _on_im_pod(self, type_: str, obj: Obj) -> None:
        node = (obj["metadata"].get("labels") or {}).get("longhorn.io/node") or \
            (obj.get("spec") or {}).get("nodeName") or ""
        phase = (obj.get("status") or {}).get("phase")
        up = type_ != "DELETED" and phase == "Running" and \
            not obj["metadata"].get("deletionTimestamp")
        was = self.im_up.get(node)
        self.im_up[node] = up
        if up != bool(was):
            self._pdb_dirty.add(node)
        # Each of the node's replicas is handled in a runtime step of its own, as Longhorn's
        # replica controller (controller/replica_controller.go) takes them one by one from
        # its work queue: a node's hundred replicas do not hold back the steps of other
        # controllers that fall due meanwhile (the drain's poll, the evicted pod's
        # termination).
        call_soon = self.world.runtime.call_soon
        if was and not up:
            for r in [r for r in self.reps.values() if r.node == node]:
                call_soon(lambda r=r: self._im_gone(r, node))
        elif up and not was:
            # after the steps of its going down still queued, whose failures it rebuilds
            call_soon(lambda: self._im_started(node))
        if type_ == "DELETED" or phase in ("Failed", "Succeeded"):
            self.world.runtime.after(1.0, lambda: self._ensure_im(node))
        self._queue_pdbs()

    def _im_gone(self, r: Rep, node: str) -> None:
        """Only replicas with a running process die with the instance manager: those of
        attached volumes. A detached volume's replicas are stopped, their data stays on the
        node's disk (they fail if the volume attaches while the node is down)."""
        if self.reps.get(r.name) is r and self._attached(r.volume):
            self._fail_replica(r, "instance manager on the node is gone")

    def _im_started(self, node: str) -> None:
        if not self.im_up.get(node):
            return
        call_soon = self.world.runtime.call_soon
        for r in [r for r in self.reps.values() if r.node == node and not r.healthy]:
            call_soon(lambda r=r: self._im_back(r, node))
        call_soon(lambda: self._reuse_failed(node))

    def _im_back(self, r: Rep, node: str) -> None:
        if not self.im_up.get(node) or self.reps.get(r.name) is not r or r.healthy:
            return
        if r.cause == "pending":   # a new, empty replica: nothing to rebuild
            r.cause = ""
            self._set_replica(r, True)
        elif r.cause == "im" and self._needs_replica(r.volume):
            self._rebuild(r)

    def _reuse_failed(self, node: str) -> None:
        """The node's other failed replicas became reusable again: the volume controller's
        next pass reuses them (one at a time)."""
        if not self.im_up.get(node):
            return
        for vol in sorted({r.volume for r in self.reps.values()
                           if r.node == node and not r.healthy and not r.rebuilding
                           and not r.waiting}):
            v = self.vols.get(vol)
            if v is not None and v.degraded_at is not None:
                self._schedule_replenish(v, 0.0)

    # ------------------------------------------------------------------ volumes / replicas
    def _on_volume(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        name = md["name"]
        if type_ == "DELETED":
            gone = self.vols.pop(name, None)
            if gone is not None and gone.attached:
                self.attached_on.get(gone.attached, set()).discard(name)
            self._queue_pdbs()
            return
        if md.get("deletionTimestamp"):
            self._delete_volume(obj)
            return
        spec = obj.get("spec") or {}
        v = self.vols.get(name)
        st = obj.get("status") or {}
        if v is None:
            v = self.vols[name] = Vol(name, int(spec.get("numberOfReplicas") or 3),
                                      attached=str(st.get("currentNodeID") or "")
                                      if st.get("state") == "attached" else "")
            ks = st.get("kubernetesStatus") or {}
            if ks.get("pvcName"):
                v.pvc = (ks.get("namespace", ""), ks["pvcName"])
                self.claim_vol[v.pvc] = name
            self._ensure_replicas(v)
            self._ensure_engine(v)
            self._write_volume(v)
        else:
            v.replicas = int(spec.get("numberOfReplicas") or v.replicas)

    def _ensure_replicas(self, v: Vol) -> None:
        have = [self.reps[r] for r in self.reps_by_vol.get(v.name, ()) if r in self.reps]
        used = {r.node for r in have}
        pool = sorted(n for n, o in self.nodes.items()
                      if "node-role.harvesterhci.io/witness" not in
                      ((o.get("metadata") or {}).get("labels") or {}))
        start = int(hashlib.md5(v.name.encode()).hexdigest(), 16) % max(1, len(pool))  # noqa: S324
        pool = pool[start:] + pool[:start]
        for node in pool:
            if len(have) >= v.replicas:
                break
            if node in used:
                continue
            rname = f"{v.name}-r-{hashlib.md5((v.name + node).encode()).hexdigest()[:8]}"  # noqa: S324
            healthy = self.im_up.get(node, True)
            try:
                self.c.create({
                    "apiVersion": API, "kind": "Replica",
                    "metadata": {"name": rname, "namespace": NS,
                                 "labels": {"longhornvolume": v.name, "longhornnode": node}},
                    # a replica started with its new volume is RW at once here, so it
                    # carries the healthyAt the engine's first RW report would give it
                    "spec": {"volumeName": v.name, "nodeID": node, "active": True,
                             "desireState": "running", "dataEngine": "v1",
                             "failedAt": "", "healthyAt": self._now() if healthy else ""}})
            except ApiError:
                continue
            # status in a create body is dropped (status subresource): the replica
            # controller reports the started instance in a status write of its own
            state = {"currentState": "running" if healthy else "stopped", "ownerID": node,
                     "started": healthy, "instanceManagerName": im_name(node)}

            def status_fn(cur: Obj, state: Obj = state) -> Obj:
                cur.setdefault("status", {}).update(state)
                return cur
            try:
                self.c.modify(API, "Replica", rname, status_fn, NS, "status")
            except ApiError:
                pass
            r = Rep(rname, v.name, node, healthy, cause="" if healthy else "pending",
                    managed=True)
            self.reps[rname] = r
            self.reps_by_vol.setdefault(v.name, set()).add(rname)
            self.reps_by_node.setdefault(node, set()).add(rname)
            have.append(r)
            used.add(node)

    def _ensure_engine(self, v: Vol) -> None:
        name = f"{v.name}-e-0"
        if self.c.try_get(API, "Engine", name, NS) is not None:
            return
        try:
            self.c.create({"apiVersion": API, "kind": "Engine",
                           "metadata": {"name": name, "namespace": NS,
                                        "labels": {"longhornvolume": v.name}},
                           "spec": {"volumeName": v.name, "nodeID": v.attached,
                                    "desireState": "running" if v.attached else "stopped",
                                    "dataEngine": "v1"},
                           "status": {"currentState": "running" if v.attached else "stopped",
                                      "replicaModeMap": self._mode_map(v)}})
        except ApiError:
            pass

    def _mode_map(self, v: Vol) -> dict[str, str]:
        out = {}
        for rn in sorted(self.reps_by_vol.get(v.name, ())):
            r = self.reps.get(rn)
            if r is not None:
                if r.waiting:
                    continue   # no instance yet: the engine does not know it
                out[rn] = "RW" if r.healthy else ("WO" if r.rebuilding else "ERR")
        return out

    def _on_replica(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        name = md["name"]
        spec = obj.get("spec") or {}
        if type_ == "DELETED":
            r = self.reps.pop(name, None)
            if r is not None:
                self._release_rebuild(r)
                self.reps_by_vol.get(r.volume, set()).discard(name)
                self.reps_by_node.get(r.node, set()).discard(name)
            return
        healthy = replica_available(obj)
        r = self.reps.get(name)
        if r is None:
            r = self.reps[name] = Rep(name, str(spec.get("volumeName") or ""),
                                      str(spec.get("nodeID") or ""), healthy,
                                      cause="" if healthy else "initial")
            self.reps_by_vol.setdefault(r.volume, set()).add(name)
            self.reps_by_node.setdefault(r.node, set()).add(name)
        elif not r.rebuilding and not r.waiting and not r.managed:
            r.healthy = healthy

    def _set_replica(self, r: Rep, healthy: bool, rebuilding: bool = False,
                     waiting: bool = False) -> None:
        """Write ``r``'s state as longhorn-manager keeps it on the Replica: healthy (RW in
        the engine: ``failedAt`` empty, ``healthyAt`` set once it first became RW), being
        rebuilt (``failedAt`` and ``healthyAt`` both cleared when Longhorn reused or created
        it; its instance running, WO in the engine), waiting for a rebuild slot on its node
        (cleared as well, its instance not started: ``stopped``), or failed (``failedAt``
        set, ``healthyAt`` kept: it held data once)."""
        r.managed = True
        r.healthy = healthy
        r.rebuilding = rebuilding
        r.waiting = waiting
        now = self._now()
        fresh = rebuilding or waiting
        running = healthy or rebuilding

        def spec_fn(cur: Obj) -> Obj | None:
            sp = cur.setdefault("spec", {})
            before = dict(sp)
            if healthy:
                sp["failedAt"] = ""
                if not sp.get("healthyAt"):
                    sp["healthyAt"] = now
                    sp["rebuildRetryCount"] = 0
                sp["lastHealthyAt"] = now
            elif fresh:
                if sp.get("failedAt"):
                    # reused (replenishReplicas: IsReplicaRebuildingFailed holds without a
                    # RebuildFailed condition, which the simulator never sets)
                    sp["rebuildRetryCount"] = int(sp.get("rebuildRetryCount") or 0) + 1
                sp["failedAt"] = ""
                sp["healthyAt"] = ""
            elif not sp.get("failedAt"):
                sp["failedAt"] = now
                sp["lastFailedAt"] = now
            sp["desireState"] = "running" if healthy or fresh else "stopped"
            return None if sp == before else cur

        def status_fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            before = dict(st)
            st["currentState"] = "running" if running else ("stopped" if waiting else "error")
            st["started"] = running
            return None if st == before else cur
        try:
            self.c.modify(API, "Replica", r.name, spec_fn, NS)
            self.c.modify(API, "Replica", r.name, status_fn, NS, "status")
        except ApiError as exc:
            if exc.code != 404:
                raise
        v = self.vols.get(r.volume)
        if v is not None:
            self._write_volume(v)
        self._queue_pdbs()

    def _fail_replica(self, r: Rep, why: str, cause: str = "im") -> None:
        if not r.healthy and not r.rebuilding and not r.waiting:
            return
        self._release_rebuild(r)
        r.cause = cause
        r.failed_at = self.world.clock.now()
        self._set_replica(r, False)
        self.world.timeline.record("replica_failed", volume=r.volume, replica=r.name,
                                   node=r.node, reason=why)

    # ------------------------------------------------------------------ rebuilds
    def _rebuild_limit(self) -> int:
        """``concurrent-replica-rebuild-per-node-limit``, read whenever it is needed, as
        longhorn-manager reads the Setting (0 disables rebuilding)."""
        s = self.c.try_get(API, "Setting", "concurrent-replica-rebuild-per-node-limit", NS)
        try:
            return int(str((s or {}).get("value", DEFAULT_SETTINGS[
                "concurrent-replica-rebuild-per-node-limit"])))
        except ValueError:
            return int(DEFAULT_SETTINGS["concurrent-replica-rebuild-per-node-limit"])

    def _rebuild(self, r: Rep) -> None:
        """Reuse ``r`` (or start the new replica ``r``) for a rebuild: ``failedAt`` and
        ``healthyAt`` cleared at once; its instance starts — and the rebuild with it — only
        while its node runs fewer rebuilds than the per-node limit (replica_controller.go
        ``CanStartRebuildingReplica``), else it waits for one of them to end. Nothing with the
        limit 0."""
        if r.healthy or r.rebuilding or r.waiting or not self.im_up.get(r.node):
            return
        limit = self._rebuild_limit()
        if limit == 0:
            return   # the per-node limit 0 disables rebuilding (replenishReplicas)
        running = self.rebuilding_on.setdefault(r.node, set())
        if limit < 1 or len(running) < limit:
            self._start_rebuild(r)
            return
        self.rebuild_queue.setdefault(r.node, []).append(r.name)
        r.queued_at = self.world.clock.now()
        self._set_replica(r, False, waiting=True)

    def _start_rebuild(self, r: Rep) -> None:
        self.rebuilding_on.setdefault(r.node, set()).add(r.name)
        waited = self.world.clock.now() - r.queued_at if r.waiting else 0.0
        self._set_replica(r, False, rebuilding=True)
        self.world.timeline.record("replica_rebuild_started", volume=r.volume, replica=r.name,
                                   node=r.node, waited_s=round(waited, 1))

        def done() -> None:
            if r.rebuilding and self.im_up.get(r.node) and self.reps.get(r.name) is r:
                self._release_rebuild(r)
                r.cause = ""
                self._set_replica(r, True)
                self.world.timeline.record("replica_rebuilt", volume=r.volume,
                                           replica=r.name, node=r.node)
        self.world.runtime.after(self.timings.replica_rebuild_s, done)

    def _release_rebuild(self, r: Rep) -> None:
        """``r`` no longer rebuilds or waits (rebuilt, failed, deleted): its slot goes to the
        node's next waiting replica, in a step of its own (the replica controller takes the
        node's replicas again when its instance manager's status changes)."""
        q = self.rebuild_queue.get(r.node)
        if r.waiting and q and r.name in q:
            q.remove(r.name)
        running = self.rebuilding_on.get(r.node)
        if running is not None and r.name in running:
            running.discard(r.name)
            self.world.runtime.call_soon(lambda: self._next_rebuild(r.node))

    def _next_rebuild(self, node: str) -> None:
        q = self.rebuild_queue.get(node) or []
        running = self.rebuilding_on.setdefault(node, set())
        limit = self._rebuild_limit()
        while q and self.im_up.get(node) and (limit < 1 or len(running) < limit):
            r = self.reps.get(q.pop(0))
            if r is not None and r.waiting:
                self._start_rebuild(r)

    # ------------------------------------------------------------------ replenishment
    def _needs_replica(self, volume: str) -> bool:
        """Fewer healthy or rebuilding replicas than ``numberOfReplicas``."""
        v = self.vols.get(volume)
        if v is None:
            return True
        usable = sum(1 for rn in self.reps_by_vol.get(volume, ())
                     if rn in self.reps and (self.reps[rn].healthy or self.reps[rn].rebuilding
                                             or self.reps[rn].waiting))
        return usable < v.replicas

    def _wait_interval(self) -> float:
        s = self.c.try_get(API, "Setting", "replica-replenishment-wait-interval", NS)
        try:
            return max(0.0, float(str((s or {}).get("value", DEFAULT_SETTINGS[
                "replica-replenishment-wait-interval"]))))
        except ValueError:
            return float(DEFAULT_SETTINGS["replica-replenishment-wait-interval"])

    def _schedule_replenish(self, v: Vol, delay: float) -> None:
        if v.replenish_timer is not None:
            v.replenish_timer.cancel()
        v.replenish_timer = self.world.runtime.after(delay, lambda: self._replenish(v.name))

    def _replenish(self, volume: str) -> None:
        """One pass of ``replenishReplicas`` for a degraded, attached volume."""
        v = self.vols.get(volume)
        if v is None:
            return
        v.replenish_timer = None
        if v.degraded_at is None or not v.attached:
            return
        reps = [self.reps[rn] for rn in sorted(self.reps_by_vol.get(volume, ()))
                if rn in self.reps]
        if any(r.rebuilding for r in reps) or not self._needs_replica(volume):
            return   # one rebuild at a time; the next state change re-checks
        if self._rebuild_limit() == 0:
            return   # the per-node limit 0 disables rebuilding (replenishReplicas)
        # CheckAndReuseFailedReplica: a failed replica is reused (failedAt cleared, rebuilt in
        # place) once its node's instance manager runs and its disk is usable; a replica held
        # by the volume_degraded fault is not (isFailedReplicaReusable: disk not Ready). The
        # latest failed one goes first (GetLatestFailedReplica).
        failed = [r for r in reps if not r.healthy and not r.waiting and r.cause != "pending"]
        reusable = [r for r in failed if r.cause != "fault" and self.im_up.get(r.node)]
        if reusable:
            self._rebuild(max(reusable, key=lambda r: (r.failed_at, r.name)))
            return
        if failed:   # RequireNewReplica: potentially reusable ones are waited for until the
            due = v.degraded_at + self._wait_interval()   # interval from lastDegradedAt
            now = self.world.clock.now()
            if now < due:
                self._schedule_replenish(v, due - now + 1.0)   # Longhorn adds a second
                return
        used = {r.node for r in reps}
        pool = [n for n, o in sorted(self.nodes.items())
                if n not in used and _ready(o) and self.im_up.get(n)
                and not (o.get("spec") or {}).get("unschedulable")
                and "node-role.harvesterhci.io/witness" not in
                ((o.get("metadata") or {}).get("labels") or {})]
        if not pool:
            # precheckCreateReplica found no node: condition Scheduled=False, reason
            # ReplicaSchedulingFailure (longhorn-manager v1.9.1 controller/volume_controller.go
            # replenishReplicas); the next change of a node or replica re-checks
            if not v.unschedulable:
                v.unschedulable = True
                self._write_volume(v)
            return
        node = pool[0]
        rname = f"{v.name}-r-{hashlib.md5((v.name + node).encode()).hexdigest()[:8]}"  # noqa: S324
        try:
            self.c.create({
                "apiVersion": API, "kind": "Replica",
                "metadata": {"name": rname, "namespace": NS,
                             "labels": {"longhornvolume": v.name, "longhornnode": node}},
                # createReplica: a new replica for a rebuild is never reused should it fail
                "spec": {"volumeName": v.name, "nodeID": node, "active": True,
                         "desireState": "running", "dataEngine": "v1", "failedAt": "",
                         "rebuildRetryCount": FAILED_REPLICA_MAX_RETRY_COUNT}})
        except ApiError:
            return
        r = Rep(rname, v.name, node, False, cause="new")
        self.reps[rname] = r
        self.reps_by_vol.setdefault(v.name, set()).add(rname)
        self.reps_by_node.setdefault(node, set()).add(rname)
        self.world.timeline.record("replica_replenished", volume=v.name, replica=rname,
                                   node=node,
                                   waited_s=round(self.world.clock.now() - v.degraded_at, 1))
        self._rebuild(r)

    def _sync_attachment(self, v: Vol) -> None:
        node = next(iter(v.users.values()), "") if v.users else ""
        if v.attached in v.users.values():
            node = v.attached
        if node == v.attached:
            return
        if v.attached:
            self.attached_on.get(v.attached, set()).discard(v.name)
        if node:
            self.attached_on.setdefault(node, set()).add(v.name)
        v.attached = node
        if not node:
            # detaching stops the replicas (``closeVolumeDependentResources``): one being
            # rebuilt, or waiting for a slot (no ``healthyAt``, no ``failedAt``), never
            # became RW and is marked failed; its rebuild slot frees
            for rn in sorted(self.reps_by_vol.get(v.name, ())):
                r = self.reps.get(rn)
                if r is not None and (r.rebuilding or r.waiting):
                    self._fail_replica(r, "volume detached while rebuilding", cause="failed")
        if node:
            # attaching starts the replicas (volume_controller.go
            # ``openVolumeDependentResources``): one whose instance manager cannot launch it
            # (node down or deleted, instance manager stopped) fails; one whose instance
            # manager is starting (a Ready, uncordoned node's) waits for it
            for rn in sorted(self.reps_by_vol.get(v.name, ())):
                r = self.reps.get(rn)
                if r is not None and not self._im_can_launch(r.node):
                    self._fail_replica(r, "instance manager on the node is gone")
            # the volume controller syncs the volume now: a failed replica that became
            # reusable while it was detached is reused at once, not when a replenishment
            # wait scheduled before is due
            if v.replenish_timer is not None:
                v.replenish_timer.cancel()
                v.replenish_timer = None

        def eng(cur: Obj) -> Obj:
            cur.setdefault("spec", {})["nodeID"] = node
            cur["spec"]["desireState"] = "running" if node else "stopped"
            return cur
        try:
            self.c.modify(API, "Engine", f"{v.name}-e-0", eng, NS)
        except ApiError:
            pass
        self._write_volume(v)
        self._queue_pdbs()

    def _attached(self, volume: str) -> bool:
        v = self.vols.get(volume)
        return v is None or bool(v.attached)

    def robustness(self, v: Vol) -> str:
        healthy = sum(1 for rn in self.reps_by_vol.get(v.name, ())
                      if rn in self.reps and self.reps[rn].healthy)
        reps = [self.reps[rn] for rn in self.reps_by_vol.get(v.name, ()) if rn in self.reps]
        if healthy == 0 and reps and all(r.cause == "pending" for r in reps):
            return "unknown"   # a new volume whose replicas have not started yet
        if healthy == 0 and reps:
            return "faulted"
        if not v.attached:
            return "unknown"
        return "healthy" if healthy >= v.replicas else "degraded"

    def _write_volume(self, v: Vol) -> None:
        rob = self.robustness(v)
        now = self._now()
        if rob == "degraded":
            if v.degraded_at is None:
                v.degraded_at = self.world.clock.now()
            if v.replenish_timer is None:   # every change of a degraded volume re-checks
                self._schedule_replenish(v, 0.0)
        else:
            v.degraded_at = None
        if v.unschedulable and not self._needs_replica(v.name):
            # all replicas placed, nothing to replenish: Scheduled=True (ReconcileVolumeState)
            v.unschedulable = False
        scheduled = {"type": "Scheduled", "status": "True"} if not v.unschedulable else {
            "type": "Scheduled", "status": "False", "reason": "ReplicaSchedulingFailure"}
        users = dict(v.users)

        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            before = {k: st.get(k) for k in ("state", "robustness", "currentNodeID")}
            ks_before = copy.deepcopy(st.get("kubernetesStatus"))
            st["state"] = "attached" if v.attached else "detached"
            st["robustness"] = rob
            st["currentNodeID"] = v.attached
            conds = [c for c in st.get("conditions") or [] if c.get("type") != "Scheduled"]
            conds_before = st.get("conditions")
            st["conditions"] = [scheduled, *conds]
            ks = st.setdefault("kubernetesStatus", {})
            if v.pvc:
                ks["namespace"], ks["pvcName"] = v.pvc
            if users:
                ks["workloadsStatus"] = [
                    {"podName": p[1], "podStatus": "Running",
                     "workloadName": p[1].rsplit("-", 1)[0].removeprefix("virt-launcher-"),
                     "workloadType": "VirtualMachineInstance"} for p in sorted(users)]
                ks["lastPodRefAt"] = ""
            elif before["state"] == "attached" and not v.attached:
                ks["lastPodRefAt"] = now
            after = {k: st.get(k) for k in ("state", "robustness", "currentNodeID")}
            # longhorn-manager updates a Volume's status only when it changed (v1.9.1
            # controller/volume_controller.go syncVolume: reflect.DeepEqual on the status)
            return cur if after != before or st.get("kubernetesStatus") != ks_before \
                or st["conditions"] != conds_before else None
        try:
            self.c.modify(API, "Volume", v.name, fn, NS, "status")
        except ApiError as exc:
            if exc.code != 404:
                raise

        def eng(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            modes = self._mode_map(v)
            state = "running" if v.attached else "stopped"
            if st.get("replicaModeMap") == modes and st.get("currentState") == state:
                return None
            st["replicaModeMap"] = modes
            st["currentState"] = state
            return cur
        try:
            self.c.modify(API, "Engine", f"{v.name}-e-0", eng, NS, "status")
        except ApiError:
            pass

    def _delete_volume(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        for rn in list(self.reps_by_vol.get(name, ())):
            self._drop(API, "Replica", rn)
        self._drop(API, "Engine", f"{name}-e-0")
        self._drop(API, "Volume", name)

    def _drop(self, api: str, kind: str, name: str) -> None:
        def fn(cur: Obj) -> Obj | None:
            if not cur["metadata"].get("finalizers"):
                return None
            cur["metadata"]["finalizers"] = []
            return cur
        try:
            self.c.delete(api, kind, name, NS)
            self.c.modify(api, kind, name, fn, NS)
        except ApiError:
            pass

    # ------------------------------------------------------------------ PDBs
    def _queue_pdbs(self) -> None:
        if self._pdb_queued:
            return
        self._pdb_queued = True
        self.world.runtime.after(0.5, self._sync_pdbs)

    def _sync_pdbs(self) -> None:
        """longhorn-manager v1.8.2 / v1.9.1 ``instance_manager_controller.go``
        ``syncInstanceManagerPDB`` (``kubernetes-cluster-autoscaler-enabled`` false, its
        default): a running instance manager on a schedulable node has its PDB; on a
        cordoned node the PDB is deleted once ``canDeleteInstanceManagerPDB`` allows it;
        an instance manager that is not running keeps whatever it had. A deleted node's
        PDB goes (``cleanUpPDBForNonExistingIM``)."""
        self._pdb_queued = False
        dirty, self._pdb_dirty = self._pdb_dirty, set()
        for node in sorted(dirty):
            if node not in self.nodes:
                if node in self.pdbs:
                    self._delete_pdb(node)
            elif self.im_up.get(node) and node not in self.cordoned and node not in self.pdbs:
                self._create_pdb(node)
        held = sorted(n for n in self.pdbs & self.cordoned if self.im_up.get(n))
        if not held:
            return
        policy = self._drain_policy()
        for node in held:
            if self.can_delete_pdb(node, policy) is None:
                self._delete_pdb(node)

    def _drain_policy(self) -> str:
        s = self.c.try_get(API, "Setting", "node-drain-policy", NS)
        return str((s or {}).get("value") or DEFAULT_SETTINGS["node-drain-policy"])

    def can_delete_pdb(self, node: str, policy: str) -> str | None:
        """``canDeleteInstanceManagerPDB`` for an ``aio`` instance manager: ``None`` when
        the PDB of ``node``'s instance manager may go, else why not. First no volume may be
        attached to the node (its engines gone: ``areAllVolumesDetachedFromNode``); then by
        ``node-drain-policy``: ``always-allow`` allows it; ``block-for-eviction`` needs no
        replica on the node; ``block-if-contains-last-replica`` (Longhorn's default) checks
        every replica on the node, ``allow-if-replica-is-stopped`` only those not stopped
        (here: of attached volumes; a detached volume's replicas are stopped): each needs a
        healthy replica of its volume on another schedulable node whose running instance
        manager has its PDB (``ListVolumePDBProtectedHealthyReplicasRO``), unless it never
        held data (no ``healthyAt``, no ``failedAt``: being rebuilt, waiting for a slot,
        or new)."""
        attached = sorted(self.attached_on.get(node, ()))
        if attached:
            return f"some volumes are still attached: {', '.join(attached[:5])}"
        if policy == "always-allow":
            return None
        mine = [self.reps[rn] for rn in self.reps_by_node.get(node, ()) if rn in self.reps]
        if policy == "block-for-eviction" and mine:
            return f"some replicas block eviction: {', '.join(sorted(r.name for r in mine)[:5])}"
        if policy == "allow-if-replica-is-stopped":
            mine = [r for r in mine if self._attached(r.volume)]
        protected = {n for n in self.pdbs - self.cordoned if n != node and self.im_up.get(n)}
        for r in sorted(mine, key=lambda r: r.name):
            if not r.healthy and (r.rebuilding or r.waiting or r.cause == "pending"):
                continue   # never held data
            if not any(o is not None and o.healthy and o.node in protected
                       for o in (self.reps.get(rn) for rn in self.reps_by_vol.get(r.volume, ()))):
                return f"replica {r.name} has no pdb on another node"
        return None

    def _create_pdb(self, node: str) -> None:
        try:
            self.c.create({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": im_name(node), "namespace": NS,
                             "labels": {"longhorn.io/managed-by": "longhorn-manager"}},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {
                    IM_LABEL: "instance-manager", "longhorn.io/node": node}}}})
        except ApiError as exc:
            if exc.code != 409:
                return
        self.pdbs.add(node)

    def _delete_pdb(self, node: str) -> None:
        try:
            self.c.delete("policy/v1", "PodDisruptionBudget", im_name(node), NS)
        except ApiError as exc:
            if exc.code != 404:
                raise
        self.pdbs.discard(node)

    # ------------------------------------------------------------------ faults
    def _poll_faults(self) -> None:
        self._fault_timer = self.world.runtime.after(FAULT_POLL_S, self._poll_faults)
        faults = self.world.faults
        if faults.active("replica_lost"):
            self._lose_replicas()
        specs = faults.active("volume_degraded")
        for spec in specs:
            target = spec.get("target") or {}
            names = [target["volume"]] if isinstance(target.get("volume"), str) and \
                target["volume"] != "*" else sorted(self.vols)
            for name in names:
                v = self.vols.get(name)
                if v is None or v.faulted_by:
                    continue
                ctx: dict[str, Any] = {"volume": name}
                if v.pvc:
                    ctx["namespace"], ctx["pvc"] = v.pvc
                hit = faults.match("volume_degraded", **ctx)
                if hit is not None:
                    self.degrade(name, int(hit.get("replicas", 1)), hit.get("heal_after_s"),
                                 hit.get("nodes"))

    def _lose_replicas(self) -> None:
        """The ``replica_lost`` fault, asked once per healthy replica of an attached volume
        (context ``volume``, ``namespace``, ``pvc``, ``node``: the replica's node): the
        replica process dies (longhorn-manager marks it ``failedAt``, ``currentState:
        error``; the engine drops it, mode ``ERR``) and the volume is ``degraded``. Its disk is
        fine, so Longhorn reuses it at once (``CheckAndReuseFailedReplica``) and rebuilds it
        in place for ``timings.replica_rebuild_s``."""
        for name in sorted(self.vols):
            v = self.vols[name]
            if not v.attached:
                continue
            for rn in sorted(self.reps_by_vol.get(name, ())):
                r = self.reps.get(rn)
                if r is None or not r.healthy:
                    continue
                ctx: dict[str, Any] = {"volume": name, "node": r.node}
                if v.pvc:
                    ctx["namespace"], ctx["pvc"] = v.pvc
                if self.world.faults.match("replica_lost", **ctx) is not None:
                    self._fail_replica(r, "fault replica_lost", cause="failed")

    def degrade(self, volume: str, replicas: int = 1, heal_after_s: Any = None,
                nodes: list[str] | None = None) -> list[str]:
        """Fail ``replicas`` healthy replicas of ``volume`` (the ``volume_degraded`` fault),
        only among those on ``nodes`` when given."""
        v = self.vols.get(volume)
        if v is None:
            return []
        victims = [self.reps[rn] for rn in sorted(self.reps_by_vol.get(volume, ()))
                   if rn in self.reps and self.reps[rn].healthy
                   and (nodes is None or self.reps[rn].node in nodes)][:max(0, replicas)]
        for r in victims:
            self._fail_replica(r, "fault volume_degraded", cause="fault")
        v.faulted_by = len(victims)
        self.world.timeline.record("volume_degraded", volume=volume,
                                   replicas=[r.name for r in victims],
                                   robustness=self.robustness(v))
        if heal_after_s is not None:
            def heal() -> None:
                # the fault is over: the replicas are ordinary failed ones, which Longhorn
                # reuses one at a time if the volume still needs them (it may have replaced
                # them after replica-replenishment-wait-interval)
                v.faulted_by = 0
                for r in victims:
                    if r.cause == "fault":
                        r.cause = "failed"
                if v.degraded_at is not None:
                    self._schedule_replenish(v, 0.0)
            self.world.runtime.after(float(heal_after_s), heal)
        return [r.name for r in victims]

    def stop(self) -> None:
        if self._fault_timer is not None:
            self._fault_timer.cancel()


def _ready(node: Obj) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def setup(world: Any) -> Longhorn:
    return Longhorn(world)
