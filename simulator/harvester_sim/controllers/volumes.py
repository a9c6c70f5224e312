"""PersistentVolumeClaim provisioning and binding: the PV controller, the CSI
external-provisioner running beside Longhorn's CSI plugin, and the pvc/pv-protection
controllers.

Upstream (what each part follows):

* PV controller — kubernetes/kubernetes ``pkg/controller/volume/persistentvolume/
  pv_controller.go`` and ``pv_controller_base.go`` (release-1.30 .. release-1.33, the RKE2
  lines of Harvester v1.4 .. v1.6): ``syncUnboundClaim`` (static binding to an Available PV,
  ``volume.kubernetes.io/storage-provisioner`` + ``volume.beta...`` annotations,
  ``ExternalProvisioning`` event, WaitForFirstConsumer), ``syncBoundClaim`` (``Lost`` when
  the PV is gone), ``bind`` (PV ``claimRef``/``status.phase: Bound``; PVC ``volumeName``,
  ``pv.kubernetes.io/bind-completed``, ``pv.kubernetes.io/bound-by-controller``,
  ``status.phase/accessModes/capacity``), ``syncVolume`` (Released when the claim is gone,
  then the reclaim policy).
* external-provisioner — kubernetes-csi/external-provisioner ``pkg/controller/
  controller.go`` (v3.x .. v5.x) with sig-storage-lib-external-provisioner ``controller/
  controller.go``: PV name ``pvc-<claim uid>``, ``pv.kubernetes.io/provisioned-by``,
  the ``volume.kubernetes.io/provisioner-deletion-secret-name/namespace`` annotations,
  ``csi.volumeHandle`` = the driver's volume id, ``volumeAttributes`` = the driver's volume
  context plus ``storage.kubernetes.io/csiProvisionerIdentity``, ``fsType`` (``ext4`` unless
  ``csi.storage.k8s.io/fstype``) for Filesystem claims, reclaim policy and mount options
  from the StorageClass; events ``Provisioning`` / ``ProvisioningSucceeded``; on a Released
  PV with policy Delete, ``DeleteVolume`` then the PV is deleted.
* Longhorn CSI — longhorn/longhorn-manager ``csi/controller_server.go`` (v1.7 .. v1.9):
  ``CreateVolume`` creates the Longhorn ``Volume`` named like the PV (``numberOfReplicas``,
  ``staleReplicaTimeout``, ``migratable``, ``dataLocality``, ``fromBackup``, ``backingImage``
  from the StorageClass parameters; ``accessMode`` rwx for ReadWriteMany) and returns the
  parameters as volume context; ``DeleteVolume`` deletes it. The Volume's replicas, engine,
  state and ``kubernetesStatus`` are the Longhorn controller's (``controllers/longhorn.py``).
* pvc-protection / pv-protection — ``pkg/controller/volume/pvcprotection`` and
  ``pvprotection``: a deleted claim keeps ``kubernetes.io/pvc-protection`` until no
  running pod uses it; a PV's ``kubernetes.io/pv-protection`` goes once it is not Bound.

Drivers the simulated cluster runs: ``driver.longhorn.io`` (Harvester ships no other CSI
driver by default). A claim whose StorageClass names another provisioner stays Pending
with the ``ExternalProvisioning`` event, as in a cluster where that provisioner is not
running. Provisioning takes ``timings.volume_provision_s``.

Cheap at scale: the scenario loader creates its VM volumes already bound and consistent
with what this controller makes (``scenarios/objects.py``), so the start-up pass finds
nothing to write; only unbound claims and claims/PVs that change are looked at again.
Not modelled: volume expansion, snapshots/clones (``dataSource``), topology
(``allowedTopologies``), the scheduler's ``WaitForPodScheduled`` event, the 15 s resync
re-emitting events, ``Recycle``.
"""

from __future__ import annotations

from typing import Any

from ..api import errors
from . import podutil as pu

Obj = dict[str, Any]
Key = tuple[str, str]

LONGHORN_DRIVER = "driver.longhorn.io"
DRIVERS = (LONGHORN_DRIVER,)
LH_API = "longhorn.io/v1beta2"
LH_NS = "longhorn-system"

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_DEFAULT_SC = "storageclass.kubernetes.io/is-default-class"
ANN_DELETION_SECRET_NAME = "volume.kubernetes.io/provisioner-deletion-secret-name"
ANN_DELETION_SECRET_NS = "volume.kubernetes.io/provisioner-deletion-secret-namespace"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
PROVISIONER_IDENTITY_KEY = "storage.kubernetes.io/csiProvisionerIdentity"
# the identity external-provisioner derives at start: "<start ms>-<rand>-<driver>"
PROVISIONER_IDENTITY = "1735689600000-8081-" + LONGHORN_DRIVER
PV_CONTROLLER = "persistentvolume-controller"
LH_MIN_SIZE = 2 * 1024 * 1024   # Longhorn rounds sizes up to a multiple of 2 MiB
GI = 1024 ** 3
MI = 1024 ** 2

EXTERNAL_PROVISIONING_MSG = (
    "Waiting for a volume to be created either by the external provisioner '{p}' or "
    "manually by the system administrator. If volume creation is delayed, please verify "
    "that the provisioner is running and correctly registered.")


def provisioner_component() -> str:
    """The events' source of external-provisioner: ``<driver>_<pod>_<uuid>``."""
    return f"{LONGHORN_DRIVER}_csi-provisioner-7f8d5c8b6d-x2k9q_" \
        "5f0c6a1e-3b1d-4f43-9a51-0e5a0b5c2d11"


def quantity_bytes(q: Any) -> int:
    return int(pu.parse_quantity(q, 0))


def format_bytes(n: int) -> str:
    """A byte count as the BinarySI quantity the API prints (``10Gi``, ``512Mi``, ``1000``)."""
    if n and n % GI == 0:
        return f"{n // GI}Gi"
    if n and n % MI == 0:
        return f"{n // MI}Mi"
    return str(n)


def longhorn_size(requested: int) -> int:
    """Longhorn's CreateVolume rounds the size up to a multiple of 2 MiB."""
    return max(LH_MIN_SIZE, (requested + LH_MIN_SIZE - 1) // LH_MIN_SIZE * LH_MIN_SIZE)


def volume_attributes(params: dict[str, Any]) -> dict[str, str]:
    """PV ``csi.volumeAttributes`` of a Longhorn volume provisioned with ``params``."""
    attrs = {str(k): str(v) for k, v in (params or {}).items()
             if not str(k).startswith("csi.storage.k8s.io/")}
    attrs[PROVISIONER_IDENTITY_KEY] = PROVISIONER_IDENTITY
    return attrs


def pv_for_claim(pvc: Obj, sc: Obj, size_bytes: int) -> Obj:
    """The PV external-provisioner writes for ``pvc`` provisioned by Longhorn."""
    md = pvc["metadata"]
    spec = pvc.get("spec") or {}
    name = f"pvc-{md['uid']}"
    params = sc.get("parameters") or {}
    mode = spec.get("volumeMode") or "Filesystem"
    csi: Obj = {"driver": sc.get("provisioner", LONGHORN_DRIVER), "volumeHandle": name,
                "volumeAttributes": volume_attributes(params)}
    if mode == "Filesystem":
        csi["fsType"] = str(params.get("csi.storage.k8s.io/fstype") or params.get("fsType")
                            or "ext4")
    pv_spec: Obj = {
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "capacity": {"storage": format_bytes(size_bytes)},
        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": md.get("namespace", ""),
                     "name": md["name"], "uid": md["uid"], "apiVersion": "v1",
                     "resourceVersion": md.get("resourceVersion", "")},
        "csi": csi,
        "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
        "storageClassName": sc["metadata"]["name"],
        "volumeMode": mode,
    }
    if sc.get("mountOptions"):
        pv_spec["mountOptions"] = list(sc["mountOptions"])
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name,
                         "annotations": {ANN_PROVISIONED_BY: pv_spec["csi"]["driver"],
                                         ANN_DELETION_SECRET_NAME: "",
                                         ANN_DELETION_SECRET_NS: ""},
                         "finalizers": [PV_PROTECTION]},
            "spec": pv_spec}


def longhorn_volume_spec(params: dict[str, Any], size_bytes: int, access_modes: list[str]
                         ) -> Obj:
    """``spec`` of the Longhorn Volume CreateVolume makes from the StorageClass parameters."""
    rwx = "ReadWriteMany" in access_modes
    spec: Obj = {
        "size": str(size_bytes),
        "numberOfReplicas": int(params.get("numberOfReplicas") or 3),
        "staleReplicaTimeout": int(params.get("staleReplicaTimeout") or 30),
        "frontend": "blockdev", "accessMode": "rwx" if rwx else "rwo",
        "migratable": str(params.get("migratable", "false")).lower() == "true",
        "dataLocality": str(params.get("dataLocality") or "disabled"),
        "dataEngine": str(params.get("dataEngine") or "v1"),
        "fromBackup": str(params.get("fromBackup") or ""),
        "backingImage": str(params.get("backingImage") or ""),
        "nodeID": "",
    }
    return spec


def claim_bound_status(pv: Obj) -> Obj:
    """PVC ``status`` once bound to ``pv``."""
    spec = pv.get("spec") or {}
    return {"phase": "Bound", "accessModes": list(spec.get("accessModes") or []),
            "capacity": dict(spec.get("capacity") or {})}


class Volumes:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.clock = world.clock
        self.client = world.client_for(PV_CONTROLLER)
        self.prov_client = world.client_for("csi-provisioner")
        self.pvcs = pu.informer(world, "v1", "PersistentVolumeClaim")
        self.pvs = pu.informer(world, "v1", "PersistentVolume")
        self.scs = pu.informer(world, "storage.k8s.io/v1", "StorageClass")
        self.pods = pu.informer(world, "v1", "Pod")
        self.claims = pu.Batcher(world, self.sync_claim)
        self.volumes = pu.Batcher(world, self.sync_volume)
        self.provisioning: dict[Key, Any] = {}
        self.noted: dict[Key, set[str]] = {}     # events already emitted per claim (by uid)
        self.stats = {"provisioned": 0, "bound": 0, "deleted": 0}
        self.pvcs.add_handler(self._on_pvc)
        self.pvs.add_handler(self._on_pv)
        self.scs.add_handler(self._on_sc)
        self.pods.add_handler(self._on_pod)
        for c in self.pvcs.all():
            if _needs_sync(c):
                self.claims.add(pu.key_of(c))
        for v in self.pvs.all():
            if _pv_needs_sync(v):
                self.volumes.add(pu.key_of(v))

    # ------------------------------------------------------------------ events
    def _on_pvc(self, type_: str, obj: Obj, old: Obj | None) -> None:
        key = pu.key_of(obj)
        if type_ == "DELETED":
            self.noted.pop(key, None)
            t = self.provisioning.pop(key, None)
            if t is not None:
                t.cancel()
            vn = (obj.get("spec") or {}).get("volumeName")
            if vn:
                self.volumes.add(("", vn))
            return
        if _needs_sync(obj) or old is None or \
                (obj["metadata"].get("annotations") or {}).get(ANN_SELECTED_NODE) != \
                ((old["metadata"].get("annotations") or {}).get(ANN_SELECTED_NODE)):
            self.claims.add(key)

    def _on_pv(self, type_: str, obj: Obj, old: Obj | None) -> None:
        key = pu.key_of(obj)
        ref = (obj.get("spec") or {}).get("claimRef") or {}
        if type_ == "DELETED":
            if ref.get("name"):
                self.claims.add((ref.get("namespace", ""), ref["name"]))
            return
        if _pv_needs_sync(obj) or old is None:
            self.volumes.add(key)
        if ref.get("name"):
            c = self.pvcs.get(ref.get("namespace", ""), ref["name"])
            if c is not None and _needs_sync(c):
                self.claims.add(pu.key_of(c))

    def _on_sc(self, type_: str, obj: Obj, old: Obj | None) -> None:
        name = obj["metadata"]["name"]
        for c in self.pvcs.all():
            if not (c.get("spec") or {}).get("volumeName") and \
                    (c.get("spec") or {}).get("storageClassName") in (name, None):
                self.claims.add(pu.key_of(c))

    def _on_pod(self, type_: str, obj: Obj, old: Obj | None) -> None:
        """pvc-protection: a pod leaving may release a deleted claim."""
        if type_ != "DELETED" and not pu.is_terminal(obj):
            return
        ns = obj["metadata"].get("namespace", "")
        for claim in _pod_claims(obj):
            c = self.pvcs.get(ns, claim)
            if c is not None and pu.is_deleting(c):
                self.claims.add((ns, claim))

    # ------------------------------------------------------------------ claims
    def sync_claim(self, key: Key) -> None:
        pvc = self.pvcs.get(*key)
        if pvc is None:
            return
        if pu.is_deleting(pvc):
            self._protect_claim(pvc)
            return
        spec = pvc.get("spec") or {}
        if spec.get("volumeName"):
            self._sync_bound_claim(pvc)
            return
        self._sync_unbound_claim(pvc)

    def _note(self, pvc: Obj, what: str) -> bool:
        """True the first time ``what`` happens to this claim (one event, not one per sync)."""
        key = pu.key_of(pvc)
        seen = self.noted.setdefault(key, set())
        tag = f"{pvc['metadata'].get('uid')}/{what}"
        if tag in seen:
            return False
        seen.add(tag)
        return True

    def _event(self, obj: Obj, type_: str, reason: str, message: str,
               component: str = PV_CONTROLLER) -> None:
        pu.record_event(self.client, obj, type_, reason, message, component, None, self.clock)

    def _default_class(self) -> str | None:
        defaults = sorted((sc for sc in self.scs.all()
                           if (sc["metadata"].get("annotations") or {}).get(ANN_DEFAULT_SC)
                           == "true"),
                          key=lambda s: (s["metadata"].get("creationTimestamp", ""),
                                         s["metadata"]["name"]))
        return defaults[-1]["metadata"]["name"] if defaults else None

    def _set_pending(self, pvc: Obj) -> Obj:
        if (pvc.get("status") or {}).get("phase") == "Pending":
            return pvc

        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            if st.get("phase") == "Pending" or (cur.get("spec") or {}).get("volumeName"):
                return None
            st["phase"] = "Pending"
            return cur
        out = pu.ignore_missing(lambda: self.client.modify(
            "v1", "PersistentVolumeClaim", pvc["metadata"]["name"], fn,
            pvc["metadata"]["namespace"], subresource="status"))
        self.pvcs.observe(out)
        return out or pvc

    def _sync_unbound_claim(self, pvc: Obj) -> None:
        md = pvc["metadata"]
        ns, name = md["namespace"], md["name"]
        spec = pvc.get("spec") or {}
        sc_name = spec.get("storageClassName")
        if sc_name is None:
            # retroactive default StorageClass assignment (GA in 1.28)
            default = self._default_class()
            if default is not None:
                def set_class(cur: Obj) -> Obj | None:
                    if (cur.get("spec") or {}).get("storageClassName") is not None:
                        return None
                    cur["spec"]["storageClassName"] = default
                    return cur
                self.pvcs.observe(pu.ignore_missing(lambda: self.client.modify(
                    "v1", "PersistentVolumeClaim", name, set_class, ns)))
                return  # the update's event syncs again
        pvc = self._set_pending(pvc)
        pv = self._find_static_match(pvc)
        if pv is not None:
            self._bind(pvc, pv, by_controller_pv=not (pv.get("spec") or {}).get("claimRef"))
            return
        if not sc_name:
            return  # no class, no matching PV: waits for one
        sc = self.scs.get("", sc_name)
        if sc is None:
            if self._note(pvc, "no-class"):
                self._event(pvc, "Warning", "ProvisioningFailed",
                            f'storageclass.storage.k8s.io "{sc_name}" not found')
            return
        if (sc.get("volumeBindingMode") or "Immediate") == "WaitForFirstConsumer" and \
                not (md.get("annotations") or {}).get(ANN_SELECTED_NODE):
            if self._note(pvc, "wffc"):
                self._event(pvc, "Normal", "WaitForFirstConsumer",
                            "waiting for first consumer to be created before binding")
            return
        provisioner = str(sc.get("provisioner") or "")
        ann = md.get("annotations") or {}
        if ann.get(ANN_STORAGE_PROVISIONER) != provisioner or \
                ann.get(ANN_BETA_STORAGE_PROVISIONER) != provisioner:
            def set_ann(cur: Obj) -> Obj | None:
                a = cur["metadata"].setdefault("annotations", {})
                if a.get(ANN_STORAGE_PROVISIONER) == provisioner and \
                        a.get(ANN_BETA_STORAGE_PROVISIONER) == provisioner:
                    return None
                a[ANN_STORAGE_PROVISIONER] = provisioner
                a[ANN_BETA_STORAGE_PROVISIONER] = provisioner
                return cur
            self.pvcs.observe(pu.ignore_missing(lambda: self.client.modify(
                "v1", "PersistentVolumeClaim", name, set_ann, ns)))
        if self._note(pvc, "external"):
            self._event(pvc, "Normal", "ExternalProvisioning",
                        EXTERNAL_PROVISIONING_MSG.format(p=provisioner))
        if provisioner not in DRIVERS:
            return
        key = (ns, name)
        if key in self.provisioning:
            return
        if self._note(pvc, "provisioning"):
            self._event(pvc, "Normal", "Provisioning",
                        f'External provisioner is provisioning volume for claim "{ns}/{name}"',
                        provisioner_component())
        uid = md["uid"]
        self.provisioning[key] = self.world.runtime.after(
            self.world.timings.volume_provision_s, lambda: self._provision(key, uid))

    def _find_static_match(self, pvc: Obj) -> Obj | None:
        """An existing PV for the claim: pre-bound to it, or Available with the same class,
        enough capacity and the access modes (the PV controller's ``findBestMatch``)."""
        md = pvc["metadata"]
        spec = pvc.get("spec") or {}
        want = quantity_bytes(((spec.get("resources") or {}).get("requests") or {})
                              .get("storage"))
        modes = set(spec.get("accessModes") or [])
        sc_name = spec.get("storageClassName") or ""
        mode = spec.get("volumeMode") or "Filesystem"
        best: tuple[int, str] | None = None
        found: Obj | None = None
        for pv in self.pvs.all():
            pspec = pv.get("spec") or {}
            ref = pspec.get("claimRef")
            if pu.is_deleting(pv):
                continue
            if ref:
                if ref.get("name") != md["name"] or ref.get("namespace") != md["namespace"] \
                        or (ref.get("uid") and ref["uid"] != md["uid"]):
                    continue
                return pv  # pre-bound to this claim
            if (pv.get("status") or {}).get("phase") not in (None, "Available"):
                continue
            if (pspec.get("storageClassName") or "") != sc_name or \
                    (pspec.get("volumeMode") or "Filesystem") != mode or \
                    not modes <= set(pspec.get("accessModes") or []):
                continue
            cap = quantity_bytes((pspec.get("capacity") or {}).get("storage"))
            if cap < want:
                continue
            cand = (cap, pv["metadata"]["name"])
            if best is None or cand < best:
                best, found = cand, pv
        return found

    def _provision(self, key: Key, uid: str) -> None:
        self.provisioning.pop(key, None)
        pvc = self.pvcs.get(*key)
        if pvc is None or pvc["metadata"].get("uid") != uid or pu.is_deleting(pvc) or \
                (pvc.get("spec") or {}).get("volumeName"):
            return
        spec = pvc.get("spec") or {}
        sc = self.scs.get("", spec.get("storageClassName") or "")
        if sc is None:
            self.claims.add(key)
            return
        requested = quantity_bytes(((spec.get("resources") or {}).get("requests") or {})
                                   .get("storage"))
        size = longhorn_size(requested)
        pv = pv_for_claim(pvc, sc, size)
        name = pv["metadata"]["name"]
        self._create_longhorn_volume(name, pvc, sc, size)
        try:
            created = self.prov_client.create(pv)
        except errors.ApiError as exc:
            if exc.code != 409:
                raise
            created = self.prov_client.try_get("v1", "PersistentVolume", name)
        if created is None:
            return
        self.pvs.observe(created)
        self.stats["provisioned"] += 1
        self.world.timeline.record("volume_provisioned", pvc=f"{key[0]}/{key[1]}", pv=name,
                                   storage_class=sc["metadata"]["name"], size=size)
        self._event(pvc, "Normal", "ProvisioningSucceeded",
                    f"Successfully provisioned volume {name}", provisioner_component())
        self._bind(pvc, created, by_controller_pv=False)

    def _create_longhorn_volume(self, name: str, pvc: Obj, sc: Obj, size: int) -> None:
        if self.world.client.registry.by_kind(LH_API, "Volume") is None:
            return  # Longhorn CRDs not installed (a bare test world)
        md = pvc["metadata"]
        vol = {"apiVersion": LH_API, "kind": "Volume",
               "metadata": {"name": name, "namespace": LH_NS,
                            "labels": {"longhornvolume": name},
                            "finalizers": ["longhorn.io"]},
               "spec": longhorn_volume_spec(sc.get("parameters") or {}, size,
                                            list((pvc.get("spec") or {}).get("accessModes")
                                                 or []))}
        c = self.world.client_for("longhorn-csi-plugin")
        try:
            c.create(vol)
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                raise
            return
        ks = {"pvName": name, "pvStatus": "Bound", "namespace": md["namespace"],
              "pvcName": md["name"], "lastPVCRefAt": "", "lastPodRefAt": ""}

        def fn(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            st["kubernetesStatus"] = {**(st.get("kubernetesStatus") or {}), **ks}
            return cur
        try:
            c.modify(LH_API, "Volume", name, fn, LH_NS, "status")
        except errors.ApiError:
            pass

    def _bind(self, pvc: Obj, pv: Obj, by_controller_pv: bool) -> None:
        md = pvc["metadata"]
        ns, name, uid = md["namespace"], md["name"], md["uid"]
        pv_name = pv["metadata"]["name"]

        def pv_spec(cur: Obj) -> Obj | None:
            spec = cur.setdefault("spec", {})
            ref = spec.get("claimRef") or {}
            if ref.get("uid") == uid and ref.get("name") == name:
                return None
            if ref.get("uid") and ref["uid"] != uid:
                raise errors.conflict("persistentvolumes", "", pv_name, "bound to another claim")
            spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": ns, "name": name,
                                "uid": uid, "apiVersion": "v1",
                                "resourceVersion": md.get("resourceVersion", "")}
            if by_controller_pv:
                cur["metadata"].setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
            return cur
        try:
            out = self.client.modify("v1", "PersistentVolume", pv_name, pv_spec)
        except errors.ApiError as exc:
            if exc.code in (404, 409):
                self.claims.add((ns, name))
                return
            raise
        self.pvs.observe(out)

        def pv_status(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            if st.get("phase") == "Bound":
                return None
            st["phase"] = "Bound"
            st["lastPhaseTransitionTime"] = self.clock.timestamp()
            return cur
        out = pu.ignore_missing(lambda: self.client.modify(
            "v1", "PersistentVolume", pv_name, pv_status, subresource="status"))
        self.pvs.observe(out)
        bound_pv = out or pv

        def claim_spec(cur: Obj) -> Obj | None:
            if cur["metadata"].get("uid") != uid:
                return None
            spec = cur.setdefault("spec", {})
            ann = cur["metadata"].setdefault("annotations", {})
            if spec.get("volumeName") == pv_name and ann.get(ANN_BIND_COMPLETED) == "yes":
                return None
            if not spec.get("volumeName"):
                spec["volumeName"] = pv_name
                ann[ANN_BOUND_BY_CONTROLLER] = "yes"
            ann[ANN_BIND_COMPLETED] = "yes"
            return cur
        self.pvcs.observe(pu.ignore_missing(lambda: self.client.modify(
            "v1", "PersistentVolumeClaim", name, claim_spec, ns)))
        want = claim_bound_status(bound_pv)

        def claim_status(cur: Obj) -> Obj | None:
            if cur["metadata"].get("uid") != uid:
                return None
            st = cur.setdefault("status", {})
            if all(st.get(k) == v for k, v in want.items()):
                return None
            st.update(want)
            return cur
        self.pvcs.observe(pu.ignore_missing(lambda: self.client.modify(
            "v1", "PersistentVolumeClaim", name, claim_status, ns, subresource="status")))
        self.stats["bound"] += 1
        self.world.timeline.record("pvc_bound", pvc=f"{ns}/{name}", pv=pv_name)

    def _sync_bound_claim(self, pvc: Obj) -> None:
        md = pvc["metadata"]
        vn = pvc["spec"]["volumeName"]
        pv = self.pvs.get("", vn)
        if pv is None:
            if (pvc.get("status") or {}).get("phase") in (None, "", "Pending", "Bound") and \
                    (md.get("annotations") or {}).get(ANN_BIND_COMPLETED):
                self._set_claim_phase(pvc, "Lost")
                if self._note(pvc, "lost"):
                    self._event(pvc, "Warning", "ClaimLost",
                                "Bound claim has lost reference to PersistentVolume. "
                                "Data on the volume is lost!")
            return
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref and (ref.get("name") != md["name"] or ref.get("namespace") != md["namespace"]
                    or (ref.get("uid") and ref["uid"] != md["uid"])):
            self._set_claim_phase(pvc, "Lost")
            if self._note(pvc, "misbound"):
                self._event(pvc, "Warning", "ClaimMisbound",
                            "Two claims are bound to the same volume, this one is bound "
                            "incorrectly")
            return
        st = pvc.get("status") or {}
        want = claim_bound_status(pv)
        consistent = ref.get("uid") == md["uid"] and \
            (pv.get("status") or {}).get("phase") == "Bound" and \
            all(st.get(k) == v for k, v in want.items()) and \
            (md.get("annotations") or {}).get(ANN_BIND_COMPLETED) == "yes"
        if not consistent:
            self._bind(pvc, pv, by_controller_pv=not ref)

    def _set_claim_phase(self, pvc: Obj, phase: str) -> None:
        md = pvc["metadata"]

        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            if st.get("phase") == phase:
                return None
            st["phase"] = phase
            return cur
        self.pvcs.observe(pu.ignore_missing(lambda: self.client.modify(
            "v1", "PersistentVolumeClaim", md["name"], fn, md["namespace"],
            subresource="status")))

    def _protect_claim(self, pvc: Obj) -> None:
        md = pvc["metadata"]
        if PVC_PROTECTION not in (md.get("finalizers") or []):
            return
        ns, name = md["namespace"], md["name"]
        for p in self.pods.in_namespace(ns):
            if not pu.is_terminal(p) and name in _pod_claims(p):
                return  # still in use

        def fn(cur: Obj) -> Obj | None:
            fins = cur["metadata"].get("finalizers") or []
            if PVC_PROTECTION not in fins:
                return None
            cur["metadata"]["finalizers"] = [f for f in fins if f != PVC_PROTECTION]
            return cur
        pu.ignore_missing(lambda: self.client.modify("v1", "PersistentVolumeClaim", name,
                                                     fn, ns))

    # ------------------------------------------------------------------ volumes
    def sync_volume(self, key: Key) -> None:
        pv = self.pvs.get(*key)
        if pv is None:
            return
        spec = pv.get("spec") or {}
        st = pv.get("status") or {}
        if pu.is_deleting(pv):
            if st.get("phase") != "Bound":
                self._drop_finalizer(pv, PV_PROTECTION)
            return
        ref = spec.get("claimRef")
        if not ref:
            if st.get("phase") != "Available":
                self._set_pv_phase(pv, "Available")
            return
        claim = self.pvcs.get(ref.get("namespace", ""), ref.get("name", ""))
        if claim is not None and (not ref.get("uid") or
                                  claim["metadata"].get("uid") == ref.get("uid")):
            return  # bound (or being bound): the claim's sync does the binding
        if claim is None and not ref.get("uid"):
            return  # pre-bound to a claim that does not exist yet
        # the claim is gone: Released, then the reclaim policy
        if st.get("phase") != "Released":
            self._set_pv_phase(pv, "Released")
        policy = spec.get("persistentVolumeReclaimPolicy") or "Retain"
        driver = (spec.get("csi") or {}).get("driver") or ""
        provisioned_by = (pv["metadata"].get("annotations") or {}).get(ANN_PROVISIONED_BY)
        if policy != "Delete" or driver not in DRIVERS or provisioned_by not in DRIVERS:
            return  # Retain (or a volume nobody here can delete): stays Released
        self._delete_volume(pv)

    def _delete_volume(self, pv: Obj) -> None:
        name = pv["metadata"]["name"]
        handle = ((pv.get("spec") or {}).get("csi") or {}).get("volumeHandle") or name
        if self.world.client.registry.by_kind(LH_API, "Volume") is not None:
            c = self.world.client_for("longhorn-csi-plugin")
            try:
                c.delete(LH_API, "Volume", handle, LH_NS)
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise
        try:
            self.pvs.observe_deleted(self.prov_client.delete("v1", "PersistentVolume", name))
        except errors.ApiError as exc:
            if exc.code != 404:
                raise
        self.stats["deleted"] += 1
        self.world.timeline.record("volume_deleted", pv=name)
        cur = self.pvs.get("", name)
        if cur is not None:
            self._drop_finalizer(cur, PV_PROTECTION)

    def _set_pv_phase(self, pv: Obj, phase: str) -> None:
        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            if st.get("phase") == phase:
                return None
            st["phase"] = phase
            st["lastPhaseTransitionTime"] = self.clock.timestamp()
            return cur
        self.pvs.observe(pu.ignore_missing(lambda: self.client.modify(
            "v1", "PersistentVolume", pv["metadata"]["name"], fn, subresource="status")))

    def _drop_finalizer(self, pv: Obj, fin: str) -> None:
        def fn(cur: Obj) -> Obj | None:
            fins = cur["metadata"].get("finalizers") or []
            if fin not in fins:
                return None
            cur["metadata"]["finalizers"] = [f for f in fins if f != fin]
            return cur
        pu.ignore_missing(lambda: self.client.modify("v1", "PersistentVolume",
                                                     pv["metadata"]["name"], fn))


def _needs_sync(pvc: Obj) -> bool:
    """Whether a claim may need work: unbound, deleting, or bound without the Bound status."""
    if pu.is_deleting(pvc):
        return True
    if not (pvc.get("spec") or {}).get("volumeName"):
        return True
    return (pvc.get("status") or {}).get("phase") != "Bound"


def _pv_needs_sync(pv: Obj) -> bool:
    phase = (pv.get("status") or {}).get("phase")
    return pu.is_deleting(pv) or phase != "Bound" or not \
        ((pv.get("spec") or {}).get("claimRef") or {}).get("uid")


def _pod_claims(pod: Obj) -> list[str]:
    return [str((v.get("persistentVolumeClaim") or {}).get("claimName"))
            for v in (pod.get("spec") or {}).get("volumes") or []
            if (v.get("persistentVolumeClaim") or {}).get("claimName")]


def setup(world: Any) -> Volumes:
    return Volumes(world)
