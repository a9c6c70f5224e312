"""Pure builders: scenario entries -> the Kubernetes objects a Harvester cluster holds.

Nothing here touches the store; :mod:`.loader` creates what these functions return through
``world.client``. Every generated name and id is derived from the scenario seed so that the
same scenario always yields the same cluster (machine names, PV names, VM placement).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from typing import Any

from ..clock import Clock

Obj = dict[str, Any]

INITIAL_NODE_ANNOTATION = "sim.harvesterhci.io/initial-node"
DISK_CAPACITY_ANNOTATION = "sim.harvesterhci.io/disk-capacity-bytes"
DISK_USED_ANNOTATION = "sim.harvesterhci.io/disk-used-bytes"
ROBUSTNESS_ANNOTATION = "sim.harvesterhci.io/initial-robustness"

_SUFFIX = {
    "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60, "m": 1e-3,
}
_QTY_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$")


def parse_quantity(q: str | float) -> float:
    """``"4Gi"`` -> 4294967296.0, ``"500m"`` -> 0.5, ``8`` -> 8.0."""
    if isinstance(q, (int, float)):
        return float(q)
    m = _QTY_RE.match(str(q).strip())
    if not m:
        raise ValueError(f"invalid quantity {q!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2) or ""]


def quantity(q: str | float) -> str:
    """A quantity as the API shows it (plain numbers become strings)."""
    if isinstance(q, float) and q.is_integer():
        return str(int(q))
    return str(q)


def digest(seed: int, *parts: str, n: int = 12) -> str:
    h = hashlib.sha256(":".join([str(seed), *parts]).encode()).hexdigest()
    return h[:n]


def fake_uuid(seed: int, *parts: str) -> str:
    h = digest(seed, *parts, n=32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def machine_name(seed: int, node: str) -> str:
    """Rancher custom-cluster machine name ``custom-<12 hex>``, stable per seed + node."""
    return f"custom-{digest(seed, 'machine', node)}"


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


# ---------------------------------------------------------------------------- cluster basics
def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def storage_classes() -> list[Obj]:
    def sc(name: str, default: bool, params: dict[str, str]) -> Obj:
        ann = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
        return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": name, "annotations": ann},
                "provisioner": "driver.longhorn.io", "allowVolumeExpansion": True,
                "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
                "parameters": params}
    base = {"numberOfReplicas": "3", "staleReplicaTimeout": "30", "migratable": "true"}
    return [sc("harvester-longhorn", True, base), sc("longhorn", False, base),
            sc("longhorn-static", False, {**base, "numberOfReplicas": "3"})]


def setting(name: str, value: str, default: str = "") -> Obj:
    return {"apiVersion": "harvesterhci.io/v1beta1", "kind": "Setting",
            "metadata": {"name": name}, "default": default, "value": value}


def longhorn_setting(name: str, value: str) -> Obj:
    """A Longhorn setting (``longhorn.io/v1beta2`` Setting in ``longhorn-system``)."""
    return {"apiVersion": "longhorn.io/v1beta2", "kind": "Setting",
            "metadata": {"name": name, "namespace": "longhorn-system"},
            "value": value, "status": {"applied": True}}


def addon(a: dict[str, Any]) -> Obj:
    """A Harvester Addon (``harvesterhci.io/v1beta1``); the CRD requires every spec field,
    ``valuesContent`` among them, which a scenario never carries (an exported cluster's values
    may hold credentials)."""
    return {"apiVersion": "harvesterhci.io/v1beta1", "kind": "Addon",
            "metadata": {"name": a["name"], "namespace": a["namespace"]},
            "spec": {"enabled": bool(a.get("enabled", False)), "chart": a.get("chart", a["name"]),
                     "version": a.get("version", ""), "repo": a.get("repo", ""),
                     "valuesContent": ""}}


def serving_ca_secret() -> Obj:
    """Secret ``kube-system/serving-ca``: the CA of the Harvester API's serving certificate,
    which the Harvester server (rancher/dynamiclistener ``LoadOrGenCAChain`` as vendored by
    harvester v1.6.0, default CA name ``serving-ca`` in ``kube-system``) creates at start-up.
    upgrade-toolkit gives its ``tls.crt`` to the repo's ISO downloader."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = Clock.wall_now() - dt.timedelta(minutes=5)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dynamic"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "dynamiclistener-ca")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    crt = cert.public_bytes(serialization.Encoding.PEM)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "serving-ca", "namespace": "kube-system"},
            "data": {"tls.crt": base64.b64encode(crt).decode(),
                     "tls.key": base64.b64encode(pem).decode()}}


def version(name: str, iso_url: str, checksum: str, release_date: str, min_upgradable: str,
            tags: list[str]) -> Obj:
    return {"apiVersion": "harvesterhci.io/v1beta1", "kind": "Version",
            "metadata": {"name": name, "namespace": "harvester-system"},
            "spec": {"isoURL": iso_url, "isoChecksum": checksum, "releaseDate": release_date,
                     "minUpgradableVersion": min_upgradable, "tags": list(tags)}}


# ------------------------------------------------------------------------------------ nodes
def node_labels(node: dict[str, Any]) -> dict[str, str]:
    labels = {
        "kubernetes.io/hostname": node["name"],
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": "rke2",
        "node.kubernetes.io/instance-type": "rke2",
        "harvesterhci.io/managed": "true",
    }
    roles = node["roles"]
    if "control-plane" in roles:
        labels["node-role.kubernetes.io/control-plane"] = "true"
        labels["node-role.kubernetes.io/master"] = "true"
    if "etcd" in roles:
        labels["node-role.kubernetes.io/etcd"] = "true"
    if "worker" in roles:
        labels["node-role.kubernetes.io/worker"] = "true"
    if node["witness"]:
        labels["node-role.harvesterhci.io/witness"] = "true"
    elif node["management"]:
        labels["node-role.harvesterhci.io/management"] = "true"
    else:
        labels["node-role.harvesterhci.io/worker"] = "true"
    labels.update(node.get("labels") or {})
    return labels


def node_object(node: dict[str, Any], release: dict[str, Any]) -> Obj:
    """A Ready Harvester node running ``release`` (dict from loader.release_info)."""
    name = node["name"]
    taints = [dict(t) for t in node.get("taints") or []]
    if node["witness"] and not any(t["key"] == "node-role.kubernetes.io/etcd" for t in taints):
        taints.append({"key": "node-role.kubernetes.io/etcd", "value": "true",
                       "effect": "NoExecute"})
    cpu = int(parse_quantity(node["cpu"]))
    mem = int(parse_quantity(node["memory"]))
    disk = int(parse_quantity(node["disk"]["capacity"]))
    used = int(parse_quantity(node["disk"]["used"]))
    capacity = {"cpu": str(cpu), "memory": f"{mem // 1024}Ki", "pods": str(node["pods"]),
                "ephemeral-storage": f"{disk // 1024}Ki", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "devices.kubevirt.io/kvm": "1k",
                "devices.kubevirt.io/tun": "1k", "devices.kubevirt.io/vhost-net": "1k"}
    for res, count in (node.get("devices") or {}).items():
        capacity[res] = str(count)
    allocatable = dict(capacity)
    allocatable["cpu"] = f"{cpu * 1000 - 250}m" if cpu > 1 else str(cpu)
    allocatable["memory"] = f"{max(0, mem - 2 * 2**30) // 1024}Ki"
    allocatable["ephemeral-storage"] = str(int(disk * 0.95))
    ann = {
        "cluster.x-k8s.io/machine": node["machine"],
        "cluster.x-k8s.io/cluster-name": "local",
        "cluster.x-k8s.io/cluster-namespace": "fleet-local",
        "cluster.x-k8s.io/owner-kind": "MachineSet",
        "rke2.io/internal-ip": node["ip"],
        "rke2.io/hostname": name,
        "rke2.io/node-args": "[\"server\"]" if "control-plane" in node["roles"] else
        "[\"agent\"]",
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        DISK_CAPACITY_ANNOTATION: str(disk),
        DISK_USED_ANNOTATION: str(used),
    }
    ann.update(node.get("annotations") or {})
    spec: Obj = {"podCIDR": node["podCIDR"], "podCIDRs": [node["podCIDR"]],
                 "providerID": f"rke2://{name}"}
    if taints:
        spec["taints"] = taints
    if node.get("unschedulable"):
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": node_labels(node), "annotations": ann},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "addresses": [{"type": "InternalIP", "address": node["ip"]},
                          {"type": "Hostname", "address": name}],
            "conditions": node_conditions(),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": fake_uuid(0, "boot", name),
                "containerRuntimeVersion": release.get("containerd", "containerd://1.7.23-k3s2"),
                "kernelVersion": release.get("kernel", "5.14.21-150500.55.97-default"),
                "kubeProxyVersion": release["kubernetes"],
                "kubeletVersion": release["kubernetes"],
                "machineID": digest(0, "machine-id", name, n=32),
                "operatingSystem": "linux",
                "osImage": release["os"],
                "systemUUID": fake_uuid(0, "system", name),
            },
            "images": [dict(i) for i in release["images"]],
        },
    }


def node_conditions() -> list[Obj]:
    from ..clock import Clock

    now = Clock.timestamp()

    def cond(t: str, status: str, reason: str, msg: str) -> Obj:
        return {"type": t, "status": status, "reason": reason, "message": msg,
                "lastHeartbeatTime": now, "lastTransitionTime": now}
    return [
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory",
             "kubelet has sufficient memory available"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID",
             "kubelet has sufficient PID available"),
        cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]


# --------------------------------------------------------------------------------- Rancher
def rancher_cluster(kubernetes_version: str) -> Obj:
    drain = {"enabled": False, "deleteEmptyDirData": True, "ignoreDaemonSets": True,
             "force": False, "gracePeriod": -1, "timeout": 0, "disableEviction": False,
             "skipWaitForDeleteTimeoutSeconds": 0}
    return {
        "apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
        "metadata": {"name": "local", "namespace": "fleet-local",
                     "labels": {"provider.cattle.io": "harvester"},
                     "finalizers": ["wrangler.cattle.io/provisioning-cluster-remove"]},
        "spec": {
            "kubernetesVersion": kubernetes_version,
            "localClusterAuthEndpoint": {},
            "rkeConfig": {
                "upgradeStrategy": {"controlPlaneConcurrency": "1", "workerConcurrency": "1",
                                    "controlPlaneDrainOptions": dict(drain),
                                    "workerDrainOptions": dict(drain)},
                "machineGlobalConfig": {}, "machinePools": [],
            },
        },
        "status": {
            "clusterName": "local", "fleetWorkspaceName": "fleet-local", "ready": True,
            "observedGeneration": 1, "agentDeployed": True,
            "conditions": [
                {"type": t, "status": "True", "lastUpdateTime": ""}
                for t in ("Ready", "Provisioned", "Updated", "Created", "RKECluster",
                          "Connected", "AgentDeployed")
            ],
        },
    }


def machine_labels(node: dict[str, Any], init: bool) -> dict[str, str]:
    labels = {"cluster.x-k8s.io/cluster-name": "local", "rke.cattle.io/cluster-name": "local",
              "rke.cattle.io/machine": node["machine"]}
    if "control-plane" in node["roles"]:
        labels["rke.cattle.io/control-plane-role"] = "true"
        labels["cluster.x-k8s.io/control-plane"] = "true"
    if "etcd" in node["roles"]:
        labels["rke.cattle.io/etcd-role"] = "true"
    if "worker" in node["roles"]:
        labels["rke.cattle.io/worker-role"] = "true"
    if init:
        labels["rke.cattle.io/init-node"] = "true"
    return labels


def capi_machine(node: dict[str, Any], init: bool, kubernetes_version: str,
                 node_info: dict[str, Any]) -> Obj:
    """A running CAPI Machine; ``status.nodeInfo`` is the Node's (CAPI copies it) and every
    condition has ``lastTransitionTime`` (required by the CRD)."""
    from ..clock import Clock

    now = Clock.timestamp()
    m = node["machine"]
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
        "metadata": {"name": m, "namespace": "fleet-local",
                     "labels": machine_labels(node, init),
                     "annotations": {"rke.cattle.io/node-name": node["name"]}},
        "spec": {
            "clusterName": "local",
            "bootstrap": {"configRef": {"apiVersion": "rke.cattle.io/v1", "kind": "RKEBootstrap",
                                        "name": m, "namespace": "fleet-local"},
                          "dataSecretName": f"{m}-machine-bootstrap"},
            "infrastructureRef": {"apiVersion": "rke.cattle.io/v1", "kind": "CustomMachine",
                                  "name": m, "namespace": "fleet-local"},
            "providerID": f"rke2://{node['name']}",
            "version": kubernetes_version,
        },
        "status": {
            "phase": "Running", "bootstrapReady": True, "infrastructureReady": True,
            "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": node["name"]},
            "addresses": [{"type": "InternalIP", "address": node["ip"]},
                          {"type": "Hostname", "address": node["name"]}],
            "nodeInfo": dict(node_info),
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": now} for t in
                           ("Ready", "BootstrapReady", "InfrastructureReady", "NodeHealthy")],
        },
    }


def custom_machine(node: dict[str, Any]) -> Obj:
    return {"apiVersion": "rke.cattle.io/v1", "kind": "CustomMachine",
            "metadata": {"name": node["machine"], "namespace": "fleet-local",
                         "labels": {"cluster.x-k8s.io/cluster-name": "local"}},
            "spec": {"providerID": f"rke2://{node['name']}"},
            "status": {"ready": True, "addresses": [
                {"type": "InternalIP", "address": node["ip"]},
                {"type": "Hostname", "address": node["name"]}]}}


def machine_plan_secret(node: dict[str, Any], init: bool) -> Obj:
    m = node["machine"]
    plan = json.dumps({"files": [], "instructions": [], "probes": {}})
    labels = {"rke.cattle.io/machine-name": m, "rke.cattle.io/cluster-name": "local"}
    for role in ("control-plane", "etcd", "worker"):
        if role in node["roles"]:
            labels[f"rke.cattle.io/{role}-role"] = "true"
    if init:
        labels["rke.cattle.io/init-node"] = "true"
    return {"apiVersion": "v1", "kind": "Secret", "type": "rke.cattle.io/machine-plan",
            "metadata": {"name": f"{m}-machine-plan", "namespace": "fleet-local",
                         "labels": labels, "annotations": {}},
            "data": {"plan": b64(plan), "appliedPlan": b64(plan),
                     "applied-checksum": b64(hashlib.sha256(plan.encode()).hexdigest()),
                     "probe-statuses": b64("{}"), "success-count": b64("1"),
                     "failure-count": b64("0")}}


def managed_chart(name: str, chart_version: str, namespace: str) -> Obj:
    return {"apiVersion": "management.cattle.io/v3", "kind": "ManagedChart",
            "metadata": {"name": name, "namespace": "fleet-local"},
            "spec": {"chart": name, "releaseName": name, "version": chart_version,
                     "defaultNamespace": namespace, "repoName": "harvester-charts",
                     "timeoutSeconds": 600, "targets": [{"clusterName": "local"}],
                     "values": {}},
            "status": {"observedGeneration": 1,
                       "conditions": [{"type": "Ready", "status": "True"},
                                      {"type": "Processed", "status": "True"},
                                      {"type": "Defined", "status": "True"}],
                       "summary": {"desiredReady": 1, "ready": 1}}}


# ------------------------------------------------------------------------ volumes and VMs
def claim_uid(seed: int, namespace: str, pvc: str) -> str:
    """The uid a scenario claim gets (pre-assigned, so its PV can be named after it)."""
    return fake_uuid(seed, "pv", namespace, pvc)


def pv_name(seed: int, namespace: str, pvc: str) -> str:
    """``pvc-<claim uid>``, the name external-provisioner gives a provisioned PV."""
    return "pvc-" + claim_uid(seed, namespace, pvc)


def storage_class_params(name: str) -> dict[str, str]:
    for sc in storage_classes():
        if sc["metadata"]["name"] == name:
            return dict(sc["parameters"])
    return {}


def pvc_object(name: str, namespace: str, size: str, access_mode: str, storage_class: str,
               volume_mode: str, pv: str, owner_vm: str | None, uid: str | None = None) -> Obj:
    """A claim bound long ago, as the PV controller left it (``controllers/volumes.py``);
    the status is written after the create (the API drops it on create)."""
    md: Obj = {"name": name, "namespace": namespace,
               "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                               "pv.kubernetes.io/bound-by-controller": "yes",
                               "volume.beta.kubernetes.io/storage-provisioner":
                                   "driver.longhorn.io",
                               "volume.kubernetes.io/storage-provisioner": "driver.longhorn.io"},
               "finalizers": ["kubernetes.io/pvc-protection"]}
    if uid:
        md["_preassigned_uid"] = uid
    if owner_vm:
        md["annotations"]["harvesterhci.io/owned-by"] = json.dumps(
            [{"schema": "kubevirt.io.virtualmachine", "refs": [f"{namespace}/{owner_vm}"]}])
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": md,
            "spec": {"accessModes": [access_mode], "storageClassName": storage_class,
                     "volumeMode": volume_mode, "volumeName": pv,
                     "resources": {"requests": {"storage": size}}},
            "status": {"phase": "Bound", "accessModes": [access_mode],
                       "capacity": {"storage": size}}}


def pv_object(pv: str, pvc: str, namespace: str, size: str, access_mode: str,
              storage_class: str, volume_mode: str, replicas: int,
              claim_uid_: str = "") -> Obj:
    """The PV external-provisioner made for the claim (``controllers/volumes.py``)."""
    from ..controllers.volumes import volume_attributes

    params = {**storage_class_params(storage_class), "numberOfReplicas": str(replicas)}
    csi: Obj = {"driver": "driver.longhorn.io", "volumeHandle": pv,
                "volumeAttributes": volume_attributes(params)}
    if volume_mode == "Filesystem":
        csi["fsType"] = "ext4"
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv,
                         "annotations": {
                             "pv.kubernetes.io/provisioned-by": "driver.longhorn.io",
                             "volume.kubernetes.io/provisioner-deletion-secret-name": "",
                             "volume.kubernetes.io/provisioner-deletion-secret-namespace": ""},
                         "finalizers": ["kubernetes.io/pv-protection"]},
            "spec": {"accessModes": [access_mode], "capacity": {"storage": size},
                     "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "name": pvc, "namespace": namespace, "uid": claim_uid_},
                     "csi": csi,
                     "persistentVolumeReclaimPolicy": "Delete",
                     "storageClassName": storage_class, "volumeMode": volume_mode},
            "status": {"phase": "Bound"}}


def longhorn_volume(name: str, size_bytes: int, replicas: int, access_mode: str,
                    robustness: str, node: str | None, pvc: str | None,
                    namespace: str | None, workload: str | None) -> Obj:
    attached = node is not None
    lh_access = "rwx" if access_mode == "ReadWriteMany" else "rwo"
    ks: Obj = {"pvName": name, "pvStatus": "Bound", "namespace": namespace or "",
               "pvcName": pvc or "", "lastPVCRefAt": "", "lastPodRefAt": ""}
    if workload:
        ks["workloadsStatus"] = [{"podName": "", "podStatus": "", "workloadName": workload,
                                  "workloadType": "VirtualMachineInstance"}]
    return {
        "apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
        "metadata": {"name": name, "namespace": "longhorn-system",
                     "labels": {"longhornvolume": name},
                     "annotations": {ROBUSTNESS_ANNOTATION: robustness},
                     "finalizers": ["longhorn.io"]},
        "spec": {"size": str(size_bytes), "numberOfReplicas": replicas, "frontend": "blockdev",
                 "accessMode": lh_access, "migratable": lh_access == "rwx",
                 "dataLocality": "disabled", "dataEngine": "v1",
                 "nodeID": node or "", "staleReplicaTimeout": 30},
        "status": {"state": "attached" if attached else "detached",
                   "robustness": robustness if attached or robustness == "faulted"
                   else "unknown",
                   "currentNodeID": node or "", "kubernetesStatus": ks,
                   "conditions": [{"type": "Scheduled", "status": "True"}]},
    }


def longhorn_replica(seed: int, volume: str, node: str, healthy: bool, index: int) -> Obj:
    name = f"{volume}-r-{digest(seed, 'replica', volume, str(index), n=8)}"
    return {"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
            "metadata": {"name": name, "namespace": "longhorn-system",
                         "labels": {"longhornvolume": volume, "longhornnode": node},
                         "finalizers": ["longhorn.io"]},
            "spec": {"volumeName": volume, "nodeID": node, "active": True,
                     "dataDirectoryName": f"{volume}-{digest(seed, 'dir', name, n=8)}",
                     # it held the volume's data once (healthyAt); a degraded one has
                     # failed since (failedAt)
                     "healthyAt": "2024-12-01T00:00:00Z",
                     "failedAt": "" if healthy else "2025-01-01T00:00:00Z",
                     "desireState": "running" if healthy else "stopped",
                     "dataEngine": "v1"},
            "status": {"currentState": "running" if healthy else "error",
                       "ownerID": node}}


def virtual_machine(vm: dict[str, Any], claims: list[dict[str, Any]]) -> Obj:
    """KubeVirt VirtualMachine as Harvester creates it. ``claims``: [{name, ...}] per volume."""
    name, ns = vm["name"], vm["namespace"]
    disks: list[Obj] = []
    volumes: list[Obj] = []
    boot = 1
    for i, c in enumerate(claims):
        kind = "cdrom" if c.get("cdrom") else "disk"
        disks.append({"name": f"disk-{i}", "bootOrder": boot if i == 0 else None,
                      kind: {"bus": c.get("bus", "sata" if kind == "cdrom" else "virtio")}})
        volumes.append({"name": f"disk-{i}", "persistentVolumeClaim": {"claimName": c["name"]}})
    for d in disks:
        if d["bootOrder"] is None:
            del d["bootOrder"]
    if vm.get("containerDisk"):
        if vm.get("cdrom"):
            disks.append({"name": "cdrom-0", "cdrom": {"bus": "sata"},
                          "bootOrder": len(disks) + 1})
            volumes.append({"name": "cdrom-0", "containerDisk": {"image": vm["containerDisk"]}})
        else:
            disks.append({"name": "containerdisk", "disk": {"bus": "virtio"}})
            volumes.append({"name": "containerdisk",
                            "containerDisk": {"image": vm["containerDisk"]}})
    elif vm.get("cdrom"):
        disks.append({"name": "cdrom-0", "cdrom": {"bus": "sata"}})
    volumes.append({"name": "cloudinitdisk",
                    "cloudInitNoCloud": {"userData": "#cloud-config\npackage_update: false\n"}})
    disks.append({"name": "cloudinitdisk", "disk": {"bus": "virtio"}})
    mem = vm["memory"]
    cores = int(vm["cpu"])
    devices: Obj = {"disks": disks,
                    "interfaces": [{"name": "default", "masquerade": {},
                                    "model": "virtio"}]}
    host_devs = vm.get("devices", {}).get("hostDevices") or []
    gpus = vm.get("devices", {}).get("gpus") or []
    if host_devs:
        devices["hostDevices"] = [{"name": d.get("name") or f"hostdev-{i}",
                                   "deviceName": d["deviceName"]}
                                  for i, d in enumerate(host_devs)]
    if gpus:
        devices["gpus"] = [{"name": d.get("name") or f"gpu-{i}", "deviceName": d["deviceName"]}
                           for i, d in enumerate(gpus)]
    tmpl_spec: Obj = {
        "domain": {
            "cpu": {"cores": cores, "sockets": 1, "threads": 1},
            "memory": {"guest": quantity(mem)},
            "machine": {"type": "q35"},
            "features": {"acpi": {"enabled": True}},
            "resources": {"limits": {"cpu": str(cores), "memory": quantity(mem)},
                          "requests": {"cpu": f"{cores * 1000 // 16}m",
                                       "memory": quantity(mem)}},
            "devices": devices,
        },
        "evictionStrategy": vm["evictionStrategy"],
        "hostname": name,
        "networks": [{"name": "default", "pod": {}}],
        "terminationGracePeriodSeconds": 120,
        "volumes": volumes,
    }
    if vm.get("nodeSelector"):
        tmpl_spec["nodeSelector"] = dict(vm["nodeSelector"])
    if vm.get("affinity"):
        tmpl_spec["affinity"] = vm["affinity"]
    ann = {"harvesterhci.io/vmRunStrategy": vm["runStrategy"],
           "network.harvesterhci.io/ips": "[]",
           "harvesterhci.io/volumeClaimTemplates": json.dumps(
               [{"metadata": {"name": c["name"]},
                 "spec": {"accessModes": [c["accessMode"]],
                          "resources": {"requests": {"storage": c["size"]}},
                          "volumeMode": c["volumeMode"],
                          "storageClassName": c["storageClass"]}} for c in claims],
               separators=(",", ":"))}
    if vm.get("initialNode"):
        ann[INITIAL_NODE_ANNOTATION] = vm["initialNode"]
    ann.update(vm.get("annotations") or {})
    labels = {"harvesterhci.io/creator": "harvester", "harvesterhci.io/os": "linux",
              "sim.harvesterhci.io/fleet": vm["fleet"]}
    labels.update(vm.get("labels") or {})
    return {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": ann,
                     "finalizers": ["harvesterhci.io/VMController.UnsetOwnerOfPVCs"]},
        "spec": {
            "runStrategy": vm["runStrategy"],
            "template": {
                "metadata": {"labels": {"harvesterhci.io/vmName": name,
                                        "sim.harvesterhci.io/fleet": vm["fleet"]},
                             "annotations": {"harvesterhci.io/sshNames": "[]"}},
                "spec": tmpl_spec,
            },
        },
    }


def deployment(w: dict[str, Any]) -> Obj:
    labels = dict(w.get("labels") or {"app": w["name"]})
    container: Obj = {"name": w["name"], "image": w["image"],
                      "resources": {"requests": {"cpu": quantity(w["cpu"]),
                                                 "memory": quantity(w["memory"])}}}
    pod_spec: Obj = {"containers": [container], "terminationGracePeriodSeconds": 30}
    if w.get("nodeSelector"):
        pod_spec["nodeSelector"] = dict(w["nodeSelector"])
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": w["name"], "namespace": w["namespace"], "labels": labels},
            "spec": {"replicas": w["replicas"], "selector": {"matchLabels": labels},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxSurge": "25%",
                                                    "maxUnavailable": "25%"}},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}


def pdb(w: dict[str, Any]) -> Obj:
    p = w["pdb"]
    selector = p.get("selector") or {"matchLabels": dict(w.get("labels") or {"app": w["name"]})}
    spec: Obj = {"selector": copy.deepcopy(selector)}
    for key in ("minAvailable", "maxUnavailable"):
        if key in p:
            spec[key] = p[key]
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": p.get("name") or w["name"], "namespace": w["namespace"]},
            "spec": spec}
