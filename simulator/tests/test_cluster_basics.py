"""What any Harvester cluster does for objects the simulator did not create itself:
volume provisioning and binding (controllers/volumes.py, the scheduler's VolumeBinding),
in-cluster services and upgrade-toolkit's repo DaemonSet (programs/upgrade_repo.py,
programs/harvester_server.py, programs/cluster_net.py), readiness probes, and containers
whose program is not modelled (controllers/kubelet.py).

Worlds run at 100-200x; waits poll with real-time deadlines, durations are checked in
simulated time only.
"""

from __future__ import annotations

import base64
import functools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harvester_sim import report, testing
from harvester_sim.api.errors import ApiError
from harvester_sim.programs import cluster_net
from harvester_sim.programs.base import REGISTRY, ProgramContext
from harvester_sim.scenarios.loader import load
from harvester_sim.world import World

# an ApiError (an object not there yet) counts as "not yet" in this file's waits
wait_for = functools.partial(testing.wait_for, ignore=(ApiError,))

NS = "harvester-system"


@pytest.fixture
def world() -> Iterator[World]:
    w = World({"name": "basics", "nodes": [{"name": "n1"}, {"name": "n2"}],
               "vms": [{"name": "vm1", "namespace": "default"}]}, speed=100.0, seed=5)
    w.start()
    yield w
    w.stop()


def pvc(name: str, sc: str | None, size: str = "10Gi", mode: str = "ReadWriteMany",
        ns: str = NS) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": [mode], "volumeMode": "Filesystem",
                            "resources": {"requests": {"storage": size}}}
    if sc is not None:
        spec["storageClassName"] = sc
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def storage_class(name: str, provisioner: str = "driver.longhorn.io",
                  binding: str = "Immediate", reclaim: str = "Delete") -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": provisioner,
            "reclaimPolicy": reclaim, "volumeBindingMode": binding,
            "parameters": {"numberOfReplicas": "2", "staleReplicaTimeout": "30"}}


def events(w: World, ns: str, name: str) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in w.client.list("v1", "Event", ns)
            if e["involvedObject"]["name"] == name]


def phase(w: World, name: str, ns: str = NS) -> str | None:
    obj = w.client.try_get("v1", "PersistentVolumeClaim", name, ns)
    return ((obj or {}).get("status") or {}).get("phase")


# ----------------------------------------------------------------------------- volumes
def test_immediate_claim_is_provisioned_and_bound_like_longhorn_csi(world: World) -> None:
    c = world.client
    c.create(pvc("up-repo", "longhorn-static"))
    wait_for(lambda: phase(world, "up-repo") == "Bound", what="claim bound")
    claim = c.get("v1", "PersistentVolumeClaim", "up-repo", NS)
    uid = claim["metadata"]["uid"]
    assert claim["spec"]["volumeName"] == f"pvc-{uid}"
    ann = claim["metadata"]["annotations"]
    assert ann["pv.kubernetes.io/bind-completed"] == "yes"
    assert ann["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert ann["volume.kubernetes.io/storage-provisioner"] == "driver.longhorn.io"
    assert ann["volume.beta.kubernetes.io/storage-provisioner"] == "driver.longhorn.io"
    assert claim["status"] == {"phase": "Bound", "accessModes": ["ReadWriteMany"],
                               "capacity": {"storage": "10Gi"}}
    pv = c.get("v1", "PersistentVolume", f"pvc-{uid}")
    assert pv["status"]["phase"] == "Bound"
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == \
        "driver.longhorn.io"
    assert "kubernetes.io/pv-protection" in pv["metadata"]["finalizers"]
    spec = pv["spec"]
    assert spec["claimRef"]["uid"] == uid and spec["claimRef"]["name"] == "up-repo"
    assert spec["csi"]["driver"] == "driver.longhorn.io"
    assert spec["csi"]["volumeHandle"] == f"pvc-{uid}"
    assert spec["csi"]["fsType"] == "ext4"
    assert spec["csi"]["volumeAttributes"]["numberOfReplicas"] == "3"
    assert "storage.kubernetes.io/csiProvisionerIdentity" in spec["csi"]["volumeAttributes"]
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["capacity"] == {"storage": "10Gi"}
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert spec["storageClassName"] == "longhorn-static"
    vol = c.get("longhorn.io/v1beta2", "Volume", f"pvc-{uid}", "longhorn-system")
    assert vol["spec"]["accessMode"] == "rwx"
    assert vol["spec"]["size"] == str(10 * 1024 ** 3)
    assert vol["spec"]["numberOfReplicas"] == 3
    assert vol["status"]["kubernetesStatus"]["pvcName"] == "up-repo"
    reasons = [r for _, r, _ in events(world, NS, "up-repo")]
    assert {"ExternalProvisioning", "Provisioning", "ProvisioningSucceeded"} <= set(reasons)


def test_unknown_provisioner_and_missing_class_stay_pending(world: World) -> None:
    c = world.client
    c.create(storage_class("nfs", provisioner="nfs.csi.k8s.io"))
    c.create(pvc("on-nfs", "nfs"))
    c.create(pvc("no-class", "does-not-exist"))
    wait_for(lambda: any(r == "ExternalProvisioning" for _, r, _ in events(world, NS, "on-nfs")),
             what="ExternalProvisioning event")
    wait_for(lambda: events(world, NS, "no-class"), what="ProvisioningFailed event")
    time.sleep(0.2)   # 20 simulated seconds: far beyond volume_provision_s
    assert phase(world, "on-nfs") == "Pending"
    assert phase(world, "no-class") == "Pending"
    assert not c.get("v1", "PersistentVolumeClaim", "on-nfs", NS)["spec"].get("volumeName")
    msg = [m for _, r, m in events(world, NS, "on-nfs") if r == "ExternalProvisioning"][0]
    assert "external provisioner 'nfs.csi.k8s.io'" in msg
    assert events(world, NS, "no-class") == [
        ("Warning", "ProvisioningFailed", 'storageclass.storage.k8s.io "does-not-exist" not found')]
    ann = c.get("v1", "PersistentVolumeClaim", "on-nfs", NS)["metadata"]["annotations"]
    assert ann["volume.kubernetes.io/storage-provisioner"] == "nfs.csi.k8s.io"


def test_wait_for_first_consumer_binds_on_the_scheduled_node(world: World) -> None:
    c = world.client
    c.create(storage_class("lh-wffc", binding="WaitForFirstConsumer"))
    c.create(pvc("late", "lh-wffc", mode="ReadWriteOnce", ns="default"))
    wait_for(lambda: any(r == "WaitForFirstConsumer" for _, r, _ in
                         events(world, "default", "late")), what="WaitForFirstConsumer event")
    assert phase(world, "late", "default") == "Pending"
    c.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user", "namespace":
                                                              "default"},
              "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
                       "volumes": [{"name": "d", "persistentVolumeClaim": {
                           "claimName": "late"}}]}})
    wait_for(lambda: phase(world, "late", "default") == "Bound", what="claim bound")
    claim = c.get("v1", "PersistentVolumeClaim", "late", "default")
    node = claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"]
    pod = wait_for(lambda: (c.get("v1", "Pod", "user", "default")["spec"].get("nodeName")
                            and c.get("v1", "Pod", "user", "default")), what="pod bound")
    assert pod["spec"]["nodeName"] == node


def test_pod_with_unbound_immediate_claim_is_unschedulable(world: World) -> None:
    c = world.client
    c.create(storage_class("other", provisioner="example.com/none"))
    c.create(pvc("stuck", "other", ns="default"))
    c.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waits",
                                                              "namespace": "default"},
              "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
                       "volumes": [{"name": "d", "persistentVolumeClaim": {
                           "claimName": "stuck"}}]}})

    def cond() -> Any:
        st = c.get("v1", "Pod", "waits", "default").get("status") or {}
        return next((x for x in st.get("conditions") or [] if x["type"] == "PodScheduled"),
                    None)
    got = wait_for(cond, what="PodScheduled condition")
    assert got["status"] == "False"
    assert "pod has unbound immediate PersistentVolumeClaims" in got["message"]


def test_reclaim_policy_on_claim_deletion(world: World) -> None:
    c = world.client
    c.create(storage_class("keep", reclaim="Retain"))
    c.create(pvc("gone", "longhorn-static"))
    c.create(pvc("kept", "keep"))
    wait_for(lambda: phase(world, "gone") == "Bound" and phase(world, "kept") == "Bound",
             what="claims bound")
    gone_pv = c.get("v1", "PersistentVolumeClaim", "gone", NS)["spec"]["volumeName"]
    kept_pv = c.get("v1", "PersistentVolumeClaim", "kept", NS)["spec"]["volumeName"]
    c.delete("v1", "PersistentVolumeClaim", "gone", NS)
    c.delete("v1", "PersistentVolumeClaim", "kept", NS)
    wait_for(lambda: c.try_get("v1", "PersistentVolume", gone_pv) is None, what="PV deleted")
    wait_for(lambda: c.try_get("longhorn.io/v1beta2", "Volume", gone_pv,
                               "longhorn-system") is None, what="Longhorn volume deleted")
    wait_for(lambda: c.get("v1", "PersistentVolume", kept_pv)["status"]["phase"] == "Released",
             what="retained PV released")
    assert c.try_get("longhorn.io/v1beta2", "Volume", kept_pv, "longhorn-system") is not None


def test_scenario_volumes_are_what_the_provisioner_would_have_made(world: World) -> None:
    c = world.client
    claim = c.get("v1", "PersistentVolumeClaim", "vm1-disk-0", "default")
    pv = c.get("v1", "PersistentVolume", claim["spec"]["volumeName"])
    assert pv["metadata"]["name"] == f"pvc-{claim['metadata']['uid']}"
    assert pv["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert claim["status"]["phase"] == "Bound" and pv["status"]["phase"] == "Bound"
    rvs = (claim["metadata"]["resourceVersion"], pv["metadata"]["resourceVersion"])
    time.sleep(0.2)
    # nothing for the PV controller to fix: no write at all
    assert (c.get("v1", "PersistentVolumeClaim", "vm1-disk-0", "default")["metadata"]
            ["resourceVersion"], c.get("v1", "PersistentVolume", pv["metadata"]["name"])
            ["metadata"]["resourceVersion"]) == rvs
    assert world.controllers["volumes"].stats == {"provisioned": 0, "bound": 0, "deleted": 0}


# ----------------------------------------------------------------------------- programs
def job(name: str, image: str, command: list[str]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": image, "command": command}]}}}}


def test_unmodelled_run_to_completion_container_exits_zero(world: World) -> None:
    c = world.client
    c.create(job("hello", "busybox", ["sh", "-c", "echo hello"]))

    def complete() -> bool:
        st = c.get("batch/v1", "Job", "hello", "default").get("status") or {}
        return any(x["type"] == "Complete" and x["status"] == "True"
                   for x in st.get("conditions") or [])
    wait_for(complete, what="Job complete")
    pod = next(p for p in c.list("v1", "Pod", "default")
               if p["metadata"]["name"].startswith("hello-"))
    assert pod["status"]["phase"] == "Succeeded"
    warn = [m for t, r, m in events(world, "default", pod["metadata"]["name"])
            if r == "ProgramNotModelled"]
    assert len(warn) == 1 and '"busybox"' in warn[0] and "echo hello" in warn[0]
    listed = world.controllers["kubelet"].unmodelled_programs()
    assert any(u["image"] == "busybox" and u["kind"] == "short" for u in listed)
    assert any(u["image"] == "busybox" for u in report.build(world)["unmodelled_programs"])


def test_unmodelled_serving_container_runs_and_is_killed_after_grace(world: World) -> None:
    c = world.client
    c.create({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "svc", "namespace": "default"},
              "spec": {"terminationGracePeriodSeconds": 40,
                       "containers": [{"name": "main", "image": "example.com/some-server:1"}]}})
    wait_for(lambda: (c.get("v1", "Pod", "svc", "default").get("status") or {})
             .get("phase") == "Running", what="running")
    time.sleep(0.2)
    assert c.get("v1", "Pod", "svc", "default")["status"]["phase"] == "Running"
    t0 = world.clock.now()
    c.delete("v1", "Pod", "svc", "default")
    wait_for(lambda: c.try_get("v1", "Pod", "svc", "default") is None, what="pod gone")
    assert world.clock.now() - t0 >= 40   # killed when the grace period ended
    # pause exits on SIGTERM, long before its grace period ends
    assert _stop_time(world, "paused", "main", "registry.k8s.io/pause:3.9") < 3600


def test_virt_operator_exits_on_sigterm_like_a_go_binary_without_a_handler(
        world: World) -> None:
    """virt-operator installs no signal handler (kubevirt ``pkg/virt-operator``): a drain
    evicting it does not wait for its grace period, and it is not an unmodelled program."""
    image = "registry.suse.com/suse/sles/15.7/virt-operator:1.5.2-150700.3.5.2"
    assert _stop_time(world, "vo", "virt-operator", image) < 3600
    assert not [u for u in world.controllers["kubelet"].unmodelled_programs()
                if u["image"] == image]


def _stop_time(world: World, name: str, container: str, image: str) -> float:
    """Simulated seconds from deleting a running pod of ``image`` (grace period 3600 s) to
    its removal, timed when the removal is committed (not when this thread sees it): a
    loaded machine cannot make a prompt exit look like the grace period's end."""
    c = world.client
    c.create({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": name, "namespace": "default"},
              "spec": {"terminationGracePeriodSeconds": 3600,
                       "containers": [{"name": container, "image": image}]}})
    wait_for(lambda: (c.get("v1", "Pod", name, "default").get("status") or {})
             .get("phase") == "Running", what="running")
    gone: list[float] = []
    world.store.subscribe(lambda ev: gone.append(world.clock.now()) if ev.type == "DELETED"
                          and ev.obj["metadata"]["name"] == name else None)
    t0 = world.clock.now()
    c.delete("v1", "Pod", name, "default")
    wait_for(lambda: c.try_get("v1", "Pod", name, "default") is None, what="pod gone")
    assert gone
    return gone[0] - t0


def _flip_server(ctx: ProgramContext) -> Any:
    """Test program: serves 404 on :8080 for its first 30 s, then 200."""
    md = ctx.pod["metadata"]
    state = {"ok": False}

    def handler(method: str, path: str, query: str, headers: dict[str, str],
                body: bytes) -> tuple[int, dict[str, str], bytes]:
        return (200 if state["ok"] else 404), {}, b""
    ctx.world.proxies.register_pod(md["namespace"], md["name"], 8080, handler)
    try:
        yield 30.0
        state["ok"] = True
        while True:
            yield 3600.0
    finally:
        ctx.world.proxies.unregister_pod(md["namespace"], md["name"])


REGISTRY.register("test-basics-flip", lambda image, cmd, args: image == "test/flip",
                  _flip_server)


def test_readiness_probe_runs_against_the_program(world: World) -> None:
    c = world.client
    c.create({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "probed", "namespace": "default"},
              "spec": {"containers": [{"name": "main", "image": "test/flip", "readinessProbe": {
                  "httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5}}]}})
    wait_for(lambda: (c.get("v1", "Pod", "probed", "default").get("status") or {})
             .get("phase") == "Running", what="running")
    started = world.clock.now()

    def ready() -> bool:
        st = c.get("v1", "Pod", "probed", "default").get("status") or {}
        return any(x["type"] == "Ready" and x["status"] == "True"
                   for x in st.get("conditions") or [])
    wait_for(ready, what="ready")
    assert world.clock.now() - started >= 25   # not before the server answers 200
    assert any(r == "Unhealthy" and "statuscode: 404" in m
               for _, r, m in events(world, "default", "probed"))


# ----------------------------------------------------------------------------- upgrade repo
# The shape of upgrade-toolkit's repo DaemonSet (pkg/upgradeplan/handler.go at 5ac1bbe,
# constructDaemonSet); the scripts are abbreviated to the commands the programs are
# recognised by and act on.
DOWNLOADER = ('curl -sSfL --cacert "$CA_FILE" "https://harvester:8443/v1/harvester/'
              'harvesterhci.io.virtualmachineimages/$VM_IMAGE_NS/$VM_IMAGE_NAME/download" '
              '-o harvester.iso.gz; gzip -dc harvester.iso.gz > /iso/harvester.iso')
PRELOADER = ("mount -o loop,ro /iso/harvester.iso /mnt; for archive in $(yq e "
             "'.images.common[].archive' /mnt/bundle/metadata.yaml); do zstd -dc "
             "/mnt/bundle/$archive | $CTR -n k8s.io images import --no-unpack -; done")
MOUNTER = ('mount -o loop,ro /iso/harvester.iso /share-mount; trap "umount -v '
           '/iso/harvester.iso; exit 0" EXIT; while true; do sleep 30; done')
REPO = 'echo "Starting Nginx..."; nginx -g "daemon off;"'


def toolkit_daemonset(plan: str, claim: str, ca: str, image_id: str, prev: str,
                      tag: str) -> dict[str, Any]:
    labels = {"management.harvesterhci.io/upgrade-plan": plan,
              "management.harvesterhci.io/upgrade-component": "repo"}
    img_ns, img_name = image_id.split("/", 1)
    toolkit = "starbops/harvester-upgrade-toolkit"
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": f"{plan}-repo", "namespace": NS, "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "updateStrategy": {
                "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                "template": {"metadata": {"labels": labels}, "spec": {
                    "initContainers": [
                        {"name": "iso-downloader", "image": f"{toolkit}:{prev}",
                         "command": ["sh", "-c", DOWNLOADER],
                         "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {
                             "fieldPath": "metadata.name"}}},
                             {"name": "VM_IMAGE_NS", "value": img_ns},
                             {"name": "VM_IMAGE_NAME", "value": img_name},
                             {"name": "CA_CERT", "value": ca}],
                         "volumeMounts": [{"name": "iso", "mountPath": "/iso"}]},
                        {"name": "preloader", "image": f"{toolkit}:{prev}",
                         "command": ["sh", "-c", PRELOADER],
                         "securityContext": {"privileged": True},
                         "env": [{"name": "HOST_DIR", "value": "/host"}],
                         "volumeMounts": [{"name": "host-root", "mountPath": "/host"},
                                          {"name": "iso", "mountPath": "/iso"}]}],
                    "containers": [
                        {"name": "iso-mounter", "image": f"{toolkit}:{tag}",
                         "command": ["sh", "-c", MOUNTER],
                         "securityContext": {"privileged": True},
                         "volumeMounts": [{"name": "iso", "mountPath": "/iso"},
                                          {"name": "share-mount", "mountPath": "/share-mount",
                                           "mountPropagation": "Bidirectional"}]},
                        {"name": "repo", "image": f"{toolkit}:{tag}",
                         "command": ["sh", "-c", REPO], "ports": [{"containerPort": 80}],
                         "readinessProbe": {"httpGet": {"path": "/harvester-release.yaml",
                                                        "port": 80},
                                            "initialDelaySeconds": 5, "periodSeconds": 10,
                                            "timeoutSeconds": 5, "successThreshold": 1,
                                            "failureThreshold": 1},
                         "securityContext": {"privileged": True},
                         "volumeMounts": [{"name": "share-mount",
                                           "mountPath": "/srv/www/htdocs",
                                           "mountPropagation": "Bidirectional"}]}],
                    "volumes": [{"name": "host-root", "hostPath": {"path": "/"}},
                                {"name": "iso", "persistentVolumeClaim": {"claimName": claim}},
                                {"name": "share-mount", "emptyDir": {}}]}}}}


@pytest.fixture(scope="module")
def cluster() -> Iterator[World]:
    scn = load("three-node")
    scn["timings"] = {"download_mib_s": 20000, "image_pull_mib_s": 20000}
    w = World(scn, speed=200.0)
    w.start()
    c = w.client
    ver = c.get("harvesterhci.io/v1beta1", "Version", "v1.6.0", NS)
    c.create({"apiVersion": "harvesterhci.io/v1beta1", "kind": "VirtualMachineImage",
              "metadata": {"name": "up-iso", "namespace": NS},
              "spec": {"backend": "backingimage", "displayName": "up-v1.6.0",
                       "sourceType": "download", "url": ver["spec"]["isoURL"],
                       "checksum": ver["spec"].get("isoChecksum", ""), "retry": 3}})

    def imported() -> bool:
        st = c.get("harvesterhci.io/v1beta1", "VirtualMachineImage", "up-iso", NS).get(
            "status") or {}
        return any(x["type"] == "Imported" and x["status"] == "True"
                   for x in st.get("conditions") or [])
    wait_for(imported, timeout=60, what="ISO imported")
    yield w
    w.stop()


def _ca(w: World) -> str:
    sec = wait_for(lambda: w.client.try_get("v1", "Secret", "serving-ca", "kube-system"),
                   what="serving-ca")
    return base64.b64decode(sec["data"]["tls.crt"]).decode()


def test_toolkit_repo_daemonset_serves_the_release(cluster: World) -> None:
    c = cluster.client
    c.create(pvc("up-repo", "longhorn-static"))
    wait_for(lambda: phase(cluster, "up-repo") == "Bound", what="repo claim bound")
    c.create(toolkit_daemonset("up", "up-repo", _ca(cluster), f"{NS}/up-iso", "v1.5.1",
                               "v1.6.0"))

    def ds_ready() -> bool:
        st = c.get("apps/v1", "DaemonSet", "up-repo", NS).get("status") or {}
        return st.get("desiredNumberScheduled", 0) > 0 and \
            st.get("numberReady") == st["desiredNumberScheduled"]
    wait_for(ds_ready, timeout=60, what="repo DaemonSet ready")
    pods = [p for p in c.list("v1", "Pod", NS) if p["metadata"]["name"].startswith("up-repo-")]
    logs = cluster.extras["pod_logs"]
    roles = sorted("leader" if "is the leader" in logs(NS, p["metadata"]["name"],
                                                         "iso-downloader") else "follower"
                   for p in pods)
    assert roles == ["follower"] * (len(pods) - 1) + ["leader"]
    node = pods[0]["spec"]["nodeName"]
    kubelet = cluster.controllers["kubelet"]
    assert kubelet.has_image(node, "docker.io/longhornio/backing-image-manager:v1.9.1")
    c.create({"apiVersion": "v1", "kind": "Service",
              "metadata": {"name": "up-repo", "namespace": NS},
              "spec": {"selector": {"management.harvesterhci.io/upgrade-plan": "up",
                                    "management.harvesterhci.io/upgrade-component": "repo"},
                       "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}]}})

    def ready_slice() -> bool:
        return any(ep["conditions"]["ready"]
                   for sl in c.list("discovery.k8s.io/v1", "EndpointSlice", NS,
                                    label_selector={"kubernetes.io/service-name": "up-repo"})
                   for ep in sl.get("endpoints") or [])
    wait_for(ready_slice, what="ready EndpointSlice")
    resp = cluster_net.request(cluster, "http://up-repo/harvester-release.yaml", NS)
    assert resp.status == 200 and resp.body.startswith(b"harvester: v1.6.0")
    assert not [u for u in kubelet.unmodelled_programs()
                if "harvester-upgrade-toolkit" in u["image"]]


def test_iso_download_with_a_wrong_ca_fails_like_curl(cluster: World) -> None:
    c = cluster.client
    c.create(pvc("bad-repo", "longhorn-static"))
    wait_for(lambda: phase(cluster, "bad-repo") == "Bound", what="claim bound")
    wrong = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    ds = toolkit_daemonset("bad", "bad-repo", wrong, f"{NS}/up-iso", "v1.5.1", "v1.6.0")
    c.create(ds)
    logs = cluster.extras["pod_logs"]

    def failed_leader() -> str:
        for p in c.list("v1", "Pod", NS):
            if p["metadata"]["name"].startswith("bad-repo-"):
                text = logs(NS, p["metadata"]["name"], "iso-downloader")
                if "curl: (60)" in text:
                    return text
        return ""
    text = wait_for(failed_leader, what="curl (60) in the leader's log")
    assert "SSL certificate problem" in text
    c.delete("apps/v1", "DaemonSet", "bad-repo", NS)


def test_cluster_dns_names() -> None:
    assert cluster_net.resolve("harvester", "harvester-system") == ("harvester-system",
                                                                     "harvester")
    assert cluster_net.resolve("up-repo.harvester-system.svc.cluster.local", "x") == (
        "harvester-system", "up-repo")
    assert cluster_net.resolve("up-repo.harvester-system.svc", "x") == (
        "harvester-system", "up-repo")
    assert cluster_net.resolve("example.com.evil.org", "x") is None


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


class _Runtime:
    def __init__(self) -> None:
        self.timers: list[tuple[float, Any]] = []

    def after(self, seconds: float, fn: Any) -> object:
        self.timers.append((seconds, fn))
        return object()

    def call_soon(self, fn: Any) -> None:
        pass


def test_unschedulable_pods_come_back_after_their_backoff_not_a_fixed_delay() -> None:
    """The scheduling queue's backoff (scheduling_queue.go, release-1.30): 1 s doubled per
    failed attempt, at most 10 s; a cluster event (a claim bound, a node changed) sends a pod
    whose backoff is over back at once, the others at the end of theirs."""
    from harvester_sim.controllers.scheduler import Scheduler

    sched = Scheduler.__new__(Scheduler)
    clock, runtime = _Clock(100.0), _Runtime()
    sched.clock = clock
    sched.world = type("W", (), {"runtime": runtime})()
    sched.unschedulable, sched.queue, sched.attempts = set(), set(), {}
    sched._retry_timer, sched._scheduled = None, True
    old, new = ("default", "old"), ("default", "new")
    for _ in range(5):
        sched._failed(old)                       # 5 failed attempts: backoff capped at 10 s
    assert sched._backoff_until(old) == 110.0
    clock.t = 103.0
    sched._failed(new)                           # first failure: 1 s
    assert sched._backoff_until(new) == 104.0
    clock.t = 105.0                              # an event: new's backoff is over, old's not
    sched._retry_soon()
    assert sched.queue == {new} and sched.unschedulable == {old}
    assert [round(s, 3) for s, _ in runtime.timers] == [5.0]
    clock.t = 110.0
    runtime.timers[0][1]()                       # the end of old's backoff
    assert sched.queue == {new, old} and not sched.unschedulable
