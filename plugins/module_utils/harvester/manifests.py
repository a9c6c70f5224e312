"""Builders for every object the collection creates (docs/protocol.md), as pure functions.

Each takes the plan (for its name, uid, labels) plus plain values and returns a dict ready
for :meth:`client.Kube.create`. All objects carry the labels
``management.harvesterhci.io/upgrade-plan=<plan>`` and ``…/upgrade-component=<component>``
and an ownerReference (controller=true) to the UpgradePlan.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    labels,
    owner_reference,
)

DEFAULT_TOLERATIONS: list[dict[str, Any]] = [
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
     "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/etcd", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
     "effect": "NoSchedule"},
    {"key": "kubevirt.io/drain", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
]

# The repo is a Deployment: it must leave cordoned/draining nodes like any workload (a
# toleration for `unschedulable` would put its replacement pod straight back on the node
# Rancher is draining, and the drain would never end). Jobs pinned to a node keep them all.
REPO_TOLERATIONS: list[dict[str, Any]] = [
    t for t in DEFAULT_TOLERATIONS
    if t["key"] not in ("node.kubernetes.io/unschedulable", "kubevirt.io/drain")
]


def _meta(plan: dict[str, Any], name: str, component: str, namespace: str | None,
          **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels(plan, component),
                            "ownerReferences": [owner_reference(plan)]}
    if namespace:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def plan_name(plan: dict[str, Any]) -> str:
    return str(plan["metadata"]["name"])


def toolkit_tag(plan: dict[str, Any]) -> str:
    """Tag of the toolkit image: ``spec.upgrade``, else ``releaseMetadata.harvester``."""
    spec, status = plan.get("spec") or {}, plan.get("status") or {}
    return str(spec.get("upgrade") or (status.get("releaseMetadata") or {}).get("harvester")
               or spec.get("version") or "")


def toolkit_repo(plan: dict[str, Any]) -> str:
    ann = (plan.get("metadata") or {}).get("annotations") or {}
    return str(ann.get(c.ANN_TOOLKIT_IMAGE) or c.TOOLKIT_IMAGE_REPO)


def toolkit_image(plan: dict[str, Any]) -> str:
    return f"{toolkit_repo(plan)}:{toolkit_tag(plan)}"


def upgrade_plan(name: str | None, spec: dict[str, Any],
                 annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A new UpgradePlan (``generateName: hvst-upgrade-`` when no name is given)."""
    meta: dict[str, Any] = {"name": name} if name else {"generateName": c.PLAN_GENERATE_NAME}
    # the cleanup is owed until Finalize or an abort ran it (plan_cleanup)
    meta["finalizers"] = [c.PLAN_FINALIZER]
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": c.PLAN_API_VERSION, "kind": c.PLAN_KIND, "metadata": meta,
            "spec": spec}


def plan_spec(version: str | None, image: str | None, toolkit_tag_: str | None,
              concurrency: int | None, pause_nodes: list[str], restore_vm: bool,
              force: bool) -> dict[str, Any]:
    """``spec`` of a new plan, shaped like the toolkit's (seed 001)."""
    spec: dict[str, Any] = {}
    if version:
        spec["version"] = version
    if image:
        spec["image"] = image
    if toolkit_tag_:
        spec["upgrade"] = toolkit_tag_
    spec["imagePreloadOption"] = {} if concurrency is None else {"concurrency": concurrency}
    spec["nodeUpgradeOption"] = {"pauseNodes": list(pause_nodes)} if pause_nodes else {}
    spec["restoreVM"] = bool(restore_vm)
    if force:
        spec["force"] = True
    return spec


def iso_image(plan: dict[str, Any], url: str, checksum: str) -> dict[str, Any]:
    """VirtualMachineImage ``<plan>-iso`` downloading the release ISO.

    ``displayName`` is ``<plan>-<spec.version>`` as the toolkit's
    (upgrade-toolkit pkg/upgradeplan/handler.go ``constructVirtualMachineImage``): unique per
    plan, because Harvester's image webhook refuses a second image with a displayName already
    used in the namespace (a user-uploaded ISO keeps its file name)."""
    name = f"{plan_name(plan)}-iso"
    version = str((plan.get("spec") or {}).get("version") or "")
    display = f"{plan_name(plan)}-{version}" if version else name
    return {
        "apiVersion": c.VM_IMAGE[0], "kind": c.VM_IMAGE[1],
        "metadata": _meta(plan, name, c.COMPONENT_ISO, c.UPGRADE_NS,
                          annotations={c.ANN_OS_UPGRADE_IMAGE: "True"}),
        "spec": {"backend": "cdi", "displayName": display,
                 "sourceType": "download", "url": url, "checksum": checksum or "",
                 "retry": 3, "targetStorageClassName": c.ISO_STORAGE_CLASS},
    }


REPO_SCRIPT = (
    "set -e; mkdir -p /srv/www/htdocs/harvester-iso; "
    "mount -o loop,ro /iso/disk.img /srv/www/htdocs/harvester-iso; "
    "printf 'server { listen 80; root /srv/www/htdocs; autoindex on; }' "
    "> /etc/nginx/conf.d/default.conf; exec nginx -g 'daemon off;'")


def repo_deployment(plan: dict[str, Any], iso_pvc: str, replicas: int) -> dict[str, Any]:
    """Deployment ``<plan>-repo`` serving the loop-mounted ISO over HTTP on port 80."""
    name = f"{plan_name(plan)}-repo"
    lab = labels(plan, c.COMPONENT_REPO)
    return {
        "apiVersion": c.DEPLOYMENT[0], "kind": c.DEPLOYMENT[1],
        "metadata": _meta(plan, name, c.COMPONENT_REPO, c.UPGRADE_NS),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": lab},
            "template": {
                "metadata": {"labels": lab},
                "spec": {
                    "affinity": {"podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 100, "podAffinityTerm": {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": lab}}}]}},
                    "containers": [{
                        "name": c.REPO_CONTAINER, "image": c.REPO_IMAGE,
                        "command": ["sh", "-c", REPO_SCRIPT],
                        "securityContext": {"privileged": True},
                        "ports": [{"name": "http", "containerPort": 80}],
                        "readinessProbe": {"httpGet": {
                            "path": f"/{c.ISO_HTTP_PREFIX}/{c.RELEASE_FILE}", "port": 80},
                            "periodSeconds": 5},
                        "volumeMounts": [{"name": "iso", "mountPath": "/iso"}],
                    }],
                    "tolerations": REPO_TOLERATIONS,
                    "volumes": [{"name": "iso", "persistentVolumeClaim": {
                        "claimName": iso_pvc, "readOnly": True}}],
                },
            },
        },
    }


def repo_service(plan: dict[str, Any]) -> dict[str, Any]:
    name = f"{plan_name(plan)}-repo"
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(plan, name, c.COMPONENT_REPO, c.UPGRADE_NS),
        "spec": {"type": "ClusterIP", "selector": labels(plan, c.COMPONENT_REPO),
                 "ports": [{"name": "http", "port": 80, "targetPort": 80,
                            "protocol": "TCP"}]},
    }


def repo_proxy_path(plan_name_: str, path: str) -> str:
    """API path that reaches ``<path>`` of the repository through the service proxy."""
    return (f"/api/v1/namespaces/{c.UPGRADE_NS}/services/{plan_name_}-repo:80/proxy/"
            f"{c.ISO_HTTP_PREFIX}/{path.lstrip('/')}")


def suc_plan(plan: dict[str, Any], component: str, args: list[str], concurrency: int,
             env: list[dict[str, str]] | None = None, deadline_seconds: int = 0,
             command: list[str] | None = None) -> dict[str, Any]:
    """system-upgrade-controller Plan ``<plan>-<component>`` running ``upgrade_node.sh``
    (or ``command``). SUC's ``ContainerSpec`` names its env list ``envs``
    (pkg/apis/upgrade.cattle.io/v1/types.go); an ``env`` field would be dropped.
    ``jobActiveDeadlineSecs`` is written as upgrade-toolkit's ``constructPlan`` writes it,
    ``0`` (no deadline) unless ``deadline_seconds`` says otherwise: left unset, SUC gives
    each Job its own default deadline (600 s), which a slow image pull on a big cluster
    outlives, and a Job failed on its deadline fails the phase. A negative
    ``deadline_seconds`` leaves the field unset (the controller's default)."""
    name = f"{plan_name(plan)}-{component}"
    upgrade: dict[str, Any] = {
        "image": toolkit_repo(plan),
        "command": list(command or ["upgrade_node.sh"]),
        "envs": [{"name": "HARVESTER_UPGRADEPLAN_NAME", "value": plan_name(plan)}]
        + list(env or []),
    }
    if args:
        upgrade["args"] = list(args)
    spec: dict[str, Any] = {
        "concurrency": concurrency,
        "nodeSelector": {"matchLabels": {c.LABEL_MANAGED: "true"}},
        "serviceAccountName": "system-upgrade-controller",
        "tolerations": [{"operator": "Exists"}],
        "upgrade": upgrade,
        "version": toolkit_tag(plan),
    }
    if deadline_seconds >= 0:
        spec["jobActiveDeadlineSecs"] = deadline_seconds
    return {"apiVersion": c.SUC_PLAN[0], "kind": c.SUC_PLAN[1],
            "metadata": _meta(plan, name, component, c.SUC_NS), "spec": spec}


# The image-cleanup Plan's program (reference §B.2, as Harvester v1.6's cleanup Plan): the
# host's crictl (RKE2's bin directory, through the /host mount SUC gives the container)
# removes each image named in IMAGES; one image that cannot be removed (gone already, or
# referenced elsewhere) does not stop the others, and the Plan's Job does not fail for it.
IMAGE_CLEANUP_SCRIPT = """\
HOST_DIR="${HOST_DIR:-/host}"
export CONTAINER_RUNTIME_ENDPOINT="unix://$HOST_DIR/run/k3s/containerd/containerd.sock"
CRICTL="$HOST_DIR/$(readlink $HOST_DIR/var/lib/rancher/rke2/bin)/crictl"
if [ ! -x "$CRICTL" ]; then
  echo "no crictl found under $HOST_DIR/var/lib/rancher/rke2/bin; nothing removed"
  exit 0
fi
for image in $IMAGES; do
  "$CRICTL" rmi "$image" || echo "could not remove $image (continuing)"
done
exit 0
"""


def image_cleanup_plan(plan: dict[str, Any], images: list[str]) -> dict[str, Any]:
    """SUC Plan ``<plan>-image-cleanup``: concurrency 1, ``sh -c`` the script above with env
    ``IMAGES`` (space separated)."""
    return suc_plan(plan, c.COMPONENT_IMAGE_CLEANUP, [], 1,
                    env=[{"name": "IMAGES", "value": " ".join(images)}],
                    command=["sh", "-c", IMAGE_CLEANUP_SCRIPT])


def cluster_upgrade_job(plan: dict[str, Any], service_account: str | None) -> dict[str, Any]:
    """Job ``<plan>-cluster-upgrade`` running ``upgrade_manifests.sh``."""
    name = f"{plan_name(plan)}-cluster-upgrade"
    lab = labels(plan, c.COMPONENT_CLUSTER_UPGRADE)
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{
            "name": "apply", "image": toolkit_image(plan),
            "imagePullPolicy": "IfNotPresent",
            "command": ["upgrade_manifests.sh"],
            "env": [{"name": "HARVESTER_UPGRADEPLAN_NAME", "value": plan_name(plan)}],
        }],
        "tolerations": DEFAULT_TOLERATIONS,
    }
    if service_account:
        pod["serviceAccountName"] = service_account
    return {
        "apiVersion": c.JOB[0], "kind": c.JOB[1],
        "metadata": _meta(plan, name, c.COMPONENT_CLUSTER_UPGRADE, c.UPGRADE_NS),
        "spec": {"backoffLimit": 6, "ttlSecondsAfterFinished": c.JOB_TTL_SECONDS,
                 "template": {"metadata": {"labels": lab}, "spec": pod}},
    }


def upgrade_strategy() -> dict[str, Any]:
    """Rancher ``spec.rkeConfig.upgradeStrategy`` with the Harvester drain hooks (§C.1)."""
    drain = {"enabled": True, "force": True, "ignoreDaemonSets": True,
             "deleteEmptyDirData": True,
             "preDrainHooks": [{"annotation": c.ANN_PRE_HOOK}],
             "postDrainHooks": [{"annotation": c.ANN_POST_HOOK}]}
    return {"controlPlaneConcurrency": "1", "workerConcurrency": "1",
            "controlPlaneDrainOptions": dict(drain), "workerDrainOptions": dict(drain)}


def job_condition(job: dict[str, Any]) -> tuple[str, str, str] | None:
    """``("Complete"|"Failed", reason, message)`` once a Job finished, else ``None``."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"]), str(cond.get("reason") or ""), str(
                cond.get("message") or "")
    return None
