"""Programs of the upgrade image ``rancher/harvester-upgrade-toolkit:<tag>``.

Models ``package/upgrade_node.sh``, ``package/upgrade_manifests.sh`` and ``package/lib.sh``
of harvester/upgrade-toolkit at commit ``5ac1bbe35a6b4f61247aa09162cc6a9099dddd4f`` (the
image's ``/usr/local/bin``). Every container of this image is claimed here: a command that
is none of the modelled programs fails as the image would (``exec: ... not found``, 127),
never runs forever.

``upgrade_node.sh`` (``set -euo pipefail``; sources ``lib.sh`` first):

* ``lib.sh`` builds the repo URL from env ``HARVESTER_UPGRADEPLAN_NAME``: unset, the
  script dies at once (``lib.sh: line 2: HARVESTER_UPGRADEPLAN_NAME: unbound variable``,
  exit 1, before the subcommand is looked at); empty, the URL is ``http://-repo...`` and
  ``wait_repo`` polls it forever.
* subcommands ``prepare | pre-drain | post-drain | single-node-upgrade`` (``$1``); anything
  else, or none, prints ``Usage: /usr/local/bin/upgrade_node.sh
  {prepare|pre-drain|post-drain|single-node-upgrade}`` and exits 1.
* env read: ``HARVESTER_UPGRADEPLAN_NAME`` (all; ``prepare`` also reads the UpgradePlan's
  ``status.previousVersion`` and annotation ``harvesterhci.io/skip-version-check``),
  ``HARVESTER_UPGRADE_NODE_NAME`` (pre-drain, post-drain, single-node-upgrade: ``kubectl``
  on that Node; unset, the script dies with ``unbound variable`` at its first use),
  ``HARVESTER_UPGRADE_POD_NAME`` (post-drain/single-node-upgrade, only when the OS is
  installed: the reboot service waits for that pod; unset, ``unbound variable``, exit 1).
  The node a script works on is the one named by ``HARVESTER_UPGRADE_NODE_NAME``, not
  necessarily the one the pod runs on; host files are those of the pod's node (``/host``).
* ``wait_repo`` polls ``http://$HARVESTER_UPGRADEPLAN_NAME-repo.harvester-system/
  harvester-iso/harvester-release.yaml`` every 5 s (the Service's ready pods, as curl in a
  pod reaches them); ``detect_repo`` reads that file and exits 1 (``yq -e``) when a key it
  needs is missing.

Where the pinned snapshot is incomplete, the bodies follow harvester/harvester ``v1.6.0``
``package/upgrade/upgrade_node.sh`` (the released script it was derived from), as the
reference describes V2 (``harvester-upgrade.md`` §C.6-§C.8): the snapshot's case statement
calls ``command_single_node_upgrade``, which it does not define; it calls ``upgrade-helper
vm-live-migrate-detector``, which its Dockerfile does not install; its
``recover_rancher_system_agent`` tests the container's ``/run`` instead of the host's; its
reboot service looks for the pod in ``cattle-system``/container ``upgrade`` (SUC Plans),
while V2 node Jobs run in ``harvester-system``/container ``apply``. The repo path
``/harvester-iso`` is the V2 repo's (reference §A.3); the snapshot's DaemonSet served the
ISO at the root, and so do the scripts of the snapshot's own image
(``starbops/harvester-upgrade-toolkit``, what the real 5ac1bbe manager runs: lib.sh
``UPGRADE_REPO_URL=http://$HARVESTER_UPGRADEPLAN_NAME-repo.$UPGRADE_NAMESPACE``).

Steps per subcommand (all start with ``wait_repo`` + ``detect_repo``):

* ``prepare``: ``detect_upgrade``; pulls the release's images the node lacks
  (``preload_images``) and leaves the RKE2/agent image archives under
  ``/var/lib/rancher/rke2/agent/images``.
* ``pre-drain``: ``recover_rancher_system_agent`` (removes
  ``/run/systemd/system/rancher-system-agent.service.d``, restarts the agent),
  ``wait_longhorn_engines`` (per volume bypass: a file ``/tmp/skip-<volume>`` in the
  container, e.g. left in an emptyDir by an init container), the VM live-migrate detector
  (``--shutdown --upgrade``: stops
  the node's non-live-migratable VMs, records them in ConfigMap ``<plan>-restore-vm``, key =
  node, overwritten), taint ``kubevirt.io/drain=draining:NoSchedule``,
  ``wait_vms_out_or_shutdown`` (VMIs labelled ``kubevirt.io/nodeName=<node>`` with phase !=
  Succeeded), ``wait_evacuation_pdb_gone``, removes RKE2's canal config and writes
  ``/etc/rancher/rke2/config.yaml.d/40-disable-charts.yaml``.
* ``post-drain``: kubelet config files, ``wait_rke2_upgrade`` (Node ``kubeletVersion`` ==
  release ``kubernetes`` without ``-rcN``, exact), removes the RKE2 archives, removes the
  ``kubevirt.io/drain`` taint, ``upgrade_os`` (skipped when the node already runs the
  release's ``os``; else installs it and starts the reboot service).
* ``single-node-upgrade`` (v1.6.0): recover agent, canal/charts, detector, wait for every
  VM on the node to stop, kubelet config, patch ``clusters.provisioning.cattle.io
  fleet-local/local`` ``spec.kubernetesVersion`` (with ``rkeConfig: {}``),
  ``wait_rke2_upgrade``, archives, ``upgrade_os``.

``upgrade_manifests.sh`` (``set -e`` only): ``wait_repo``, ``detect_repo``,
``detect_upgrade``; annotates ``clusters.management.cattle.io local``
``rancher.io/imported-cluster-version-management=false``; creates SUC Plan
``<plan>-skip-restart-rancher-system-agent`` (image ``registry.suse.com/bci/bci-base:15.6``,
``chroot /host sh -c ...``: the drop-in that makes rancher-system-agent run the RKE2
installer with ``INSTALL_RKE2_SKIP_ENABLE=true``, see :mod:`.host_scripts`), waits until
every Node carries the Plan's latest hash, deletes the Plan; upgrades Rancher; ManagedCharts
``harvester-crd`` then ``harvester`` (and monitoring when present), the latter with
``patch_longhorn_settings`` (:func:`patch_longhorn_settings`). It does **not** touch
``spec.kubernetesVersion`` of the Rancher cluster: the upgrader does that when NodeUpgrade
begins. Not modelled: the version pre-hooks, pausing charts, cluster repo/CDI manifests,
addons, logging, CSI RBAC, Fleet bundle waits.

Faults: ``pod_fail``/``job_fail``/``job_hang`` are applied by the kubelet to every Job
container before its program runs; the node jobs (pre-drain, post-drain,
single-node-upgrade) also honour ``node_job_fail`` (exit 1) and ``node_job_hang`` (never
ends), target keys ``node``, ``job``, ``pod``, ``plan``, ``program``.
"""

from __future__ import annotations

import posixpath
import re
import secrets
from collections.abc import Callable, Generator
from typing import Any

import yaml

from ..controllers._upgrade_util import (
    image_repository,
    release_for,
    release_images,
    switch_crds,
)
from ..controllers.podutil import node_term_matches
from .base import REGISTRY, ProgramContext, image_repo
from .host_scripts import pod_file_exists

PLAN_API = "management.harvesterhci.io/v1beta1"
SUC_API = "upgrade.cattle.io/v1"
UPGRADE_NS = "harvester-system"
MiB = 1024 * 1024
DRAIN_TAINT = "kubevirt.io/drain"
POLL_S = 5.0
REBOOT_POLL_S = 10.0
HANG_S = 3600.0
NODE_SCRIPT = "/usr/local/bin/upgrade_node.sh"
LIB_SH = "/usr/local/bin/lib.sh"
SUBCOMMANDS = ("prepare", "pre-drain", "post-drain", "single-node-upgrade")
USAGE = f"Usage: {NODE_SCRIPT} {{{'|'.join(SUBCOMMANDS)}}}"
AGENT_DROPIN_DIR = "/run/systemd/system/rancher-system-agent.service.d"
CANAL_CONFIG = "/var/lib/rancher/rke2/server/manifests/rke2-canal-config.yaml"
DISABLE_CHARTS = "/etc/rancher/rke2/config.yaml.d/40-disable-charts.yaml"
RKE2_IMAGES_DIR = "/var/lib/rancher/rke2/agent/images"
KUBELET_CONFIGS = {
    "/etc/rancher/rke2/config.yaml.d/99-max-pods.yaml": 'kubelet-arg:\n- "max-pods=200"\n',
    "/etc/rancher/rke2/config.yaml.d/91-harvester-cdi.yaml": '"nonroot-devices": true\n',
    "/oem/91_cleanup_kubelet.yaml": "name: Cleanup Kubelet\n",
}
RESERVED_CONFIG = "/etc/rancher/rke2/config.yaml.d/99-z00-harvester-reserved-resources.yaml"
SKIP_RESTART_IMAGE = "registry.suse.com/bci/bci-base:15.6"
# detect_repo: keys read with ``yq -e`` (missing => exit 1)
RELEASE_KEYS = ("harvester", "harvesterChart", "os", "kubernetes", "rancher", "monitoringChart",
                "loggingChart", "loggingChartHarvesterEventRouter",
                "rancherDependencies.fleet.chart", "rancherDependencies.fleet.app",
                "rancherDependencies.fleet-crd.chart", "rancherDependencies.fleet-crd.app",
                "rancherDependencies.rancher-webhook.chart",
                "rancherDependencies.rancher-webhook.app", "kubevirt")

Prog = Generator[float, None, int]


class ScriptExit(Exception):
    """``exit N`` somewhere inside a modelled script."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ------------------------------------------------------------------------ helpers
def _argv(ctx: ProgramContext) -> list[str]:
    return ctx.command + ctx.args


def _toolkit_image(image: str, command: list[str], args: list[str]) -> bool:
    return image_repo(image).endswith("harvester-upgrade-toolkit")


def _job_name(ctx: ProgramContext) -> str:
    md = ctx.pod.get("metadata") or {}
    labels = md.get("labels") or {}
    if labels.get("job-name"):
        return str(labels["job-name"])
    if labels.get("batch.kubernetes.io/job-name"):
        return str(labels["batch.kubernetes.io/job-name"])
    for o in md.get("ownerReferences") or []:
        if o.get("kind") == "Job":
            return str(o.get("name"))
    return ""


def _fault(ctx: ProgramContext, program: str, *kinds: str) -> str | None:
    fctx = {"node": ctx.node, "job": _job_name(ctx),
            "pod": (ctx.pod.get("metadata") or {}).get("name", ""),
            "plan": ctx.env.get("HARVESTER_UPGRADEPLAN_NAME", ""), "program": program}
    for kind in kinds:
        if ctx.world.faults.match(kind, **fctx) is not None:
            ctx.world.timeline.record("fault", fault=kind, **fctx)
            return kind
    return None


def _job_pod(ctx: ProgramContext) -> dict[str, Any]:
    """For a span of a Job's program: the pod it runs in and when its container started (the
    report adds the pod's start, from its ``job_pod_created``, to the span)."""
    md = ctx.pod.get("metadata") or {}
    if any(ref.get("kind") == "Job" for ref in md.get("ownerReferences") or []):
        return {"job_pod": str(md.get("name") or ""), "pod_started": ctx.started_at}
    return {}


def _span(ctx: ProgramContext, what: str, t0: float, **kw: Any) -> None:
    ctx.world.timeline.record("span", what=what, node=ctx.node, start=t0,
                              end=ctx.world.clock.now(), **_job_pod(ctx), **kw)


def _hang(ctx: ProgramContext, why: str) -> Prog:
    ctx.log(f"{why}: hanging")
    while True:
        yield HANG_S


def _add_images(ctx: ProgramContext, chunk: list[tuple[str, int]]) -> None:
    """Import pulled images into the node's containerd (the kubelet's image store). Without a
    kubelet module there is no container runtime to keep them: nothing is recorded (the
    Node's ``status.images`` is the kubelet's report, never a store a program writes)."""
    kubelet = ctx.host
    if kubelet is not None and hasattr(kubelet, "add_images"):
        kubelet.add_images(ctx.node, chunk)


def _node_has_image(ctx: ProgramContext, ref: str) -> bool:
    """Whether the node's containerd has ``ref``: the kubelet's image store, not the Node's
    ``status.images`` (which reports only the 50 largest images). Without a kubelet module
    the node has no images."""
    kubelet = ctx.host
    return kubelet is not None and hasattr(kubelet, "has_image") and \
        bool(kubelet.has_image(ctx.node, ref))


def _deployment_rolled(ctx: ProgramContext, ns: str, name: str) -> bool:
    d = ctx.client.try_get("apps/v1", "Deployment", name, ns)
    if d is None:
        return True
    if not ctx.world.simulates("deployments"):
        return True  # nobody rolls Deployments in this world
    st = d.get("status") or {}
    want = int((d.get("spec") or {}).get("replicas", 1))
    return (int(st.get("observedGeneration") or 0) >= int(d["metadata"].get("generation") or 0)
            and int(st.get("updatedReplicas") or 0) >= want
            and int(st.get("availableReplicas") or 0) >= want
            and int(st.get("replicas") or 0) <= want)


def _with_tag(image: str, tag: str) -> str:
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    return f"{name}:{tag}"


def _upgrade_rancher(ctx: ProgramContext, version: str) -> Prog:
    d = ctx.client.try_get("apps/v1", "Deployment", "rancher", "cattle-system")
    if d is None or not version:
        ctx.log("rancher deployment not found; skipping Rancher upgrade")
        return 0
    containers = d["spec"]["template"]["spec"].get("containers") or []
    if containers and containers[0].get("image", "").endswith(f":{version}"):
        ctx.log(f"Rancher is already {version}; skipping")
        return 0
    ctx.log(f"upgrading Rancher to {version} (helm upgrade)")
    t0 = ctx.world.clock.now()
    yield ctx.world.timings.rancher_upgrade_s

    def fn(cur: dict[str, Any]) -> dict[str, Any]:
        for c in cur["spec"]["template"]["spec"].get("containers") or []:
            if image_repository(str(c.get("image", ""))).endswith("rancher/rancher"):
                c["image"] = _with_tag(str(c["image"]), version)
        cur["spec"]["template"]["metadata"].setdefault("annotations", {})[
            "harvesterhci.io/upgrade-rancher"] = version
        return cur

    ctx.client.modify("apps/v1", "Deployment", "rancher", fn, "cattle-system")
    while not _deployment_rolled(ctx, "cattle-system", "rancher"):
        yield 2.0
    # The new Rancher installs its CRDs at start-up (its own, CAPI's, the fleet bootstrap
    # ones, and system-upgrade-controller's through the app it deploys).
    target = _release_of_rancher(ctx, version)
    if target is not None:
        switch_crds(ctx.world, ctx.world.client_for("rancher"), target, "rancher")
    ctx.world.timeline.record("span", what="rancher_upgrade", node="", start=t0,
                              end=ctx.world.clock.now())
    ctx.world.timeline.record("rancher_upgraded", version=version)
    return 0


def _release_of_rancher(ctx: ProgramContext, rancher: str) -> Any:
    """The release the UpgradePlan upgrades to, if it ships Rancher ``rancher``."""
    name = _plan_name(ctx, strict=False)
    plan = ctx.client.try_get(PLAN_API, "UpgradePlan", name) if name else None
    meta = ((plan or {}).get("status") or {}).get("releaseMetadata") or {}
    rel = release_for(ctx.world, str(meta.get("harvester", "")))
    return rel if rel is not None and rel.rancher == rancher else None


def _chart_ready(ctx: ProgramContext, name: str, prev_gen: int) -> bool:
    mc = ctx.client.try_get("management.cattle.io/v3", "ManagedChart", name, "fleet-local")
    if mc is None:
        return True
    st = mc.get("status") or {}
    gen = int(mc["metadata"].get("generation") or 0)
    summ = st.get("summary") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in st.get("conditions") or [])
    return (int(st.get("observedGeneration") or 0) >= gen and gen >= prev_gen
            and int(summ.get("ready", 0)) >= int(summ.get("desiredReady", 1)) and ready)


# harvester/harvester package/upgrade/upgrade_manifests.sh ``patch_longhorn_settings`` (v1.5.1,
# v1.6.0): Longhorn Setting ->
# (the value Longhorn ships as its default, the value Harvester wants, the chart value)
LONGHORN_SETTING_PATCHES = (
    ("node-drain-policy", "block-if-contains-last-replica", "allow-if-replica-is-stopped",
     "nodeDrainPolicy"),
    ("detach-manually-attached-volumes-when-cordoned", "false", "true",
     "detachManuallyAttachedVolumesWhenCordoned"),
)


def patch_longhorn_settings(client: Any, log: Callable[[str], None]) -> None:
    """``patch_longhorn_settings`` on the ``harvester`` ManagedChart patch: each Longhorn
    setting the chart does not set and Longhorn still has at its default gets Harvester's
    value in ``spec.values.longhorn.defaultSettings``. A setting that cannot be read is
    left alone (the script's ``[ $x == ... ]`` on an empty value takes the else branch).
    The chart's rollout then carries the values to Longhorn's default-settings ConfigMap,
    which longhorn-manager applies to its Settings: collapsed here into writing the
    Setting right away."""
    api = "management.cattle.io/v3"
    mc = client.try_get(api, "ManagedChart", "harvester", "fleet-local")
    if mc is None:
        return
    defaults = (((mc.get("spec") or {}).get("values") or {}).get("longhorn") or {}).get(
        "defaultSettings") or {}
    chosen: dict[str, str] = {}
    for setting, longhorn_default, wanted, key in LONGHORN_SETTING_PATCHES:
        if key in defaults:
            log(f"longhorn {key} has been set in managedchart, do not patch again")
            continue
        cur = client.try_get("longhorn.io/v1beta2", "Setting", setting, "longhorn-system")
        if cur is None or str(cur.get("value")) != longhorn_default:
            log(f"longhorn {key} {(cur or {}).get('value')} is not the default value, "
                    "do not patch")
            continue
        log(f"patch longhorn {key} to {wanted}")
        chosen[setting] = wanted
        defaults = {**defaults, key: wanted}
    if not chosen:
        return

    def fn(cur: dict[str, Any]) -> dict[str, Any]:
        values = cur.setdefault("spec", {}).setdefault("values", {}) or {}
        cur["spec"]["values"] = values
        lh = values.setdefault("longhorn", {}) or {}
        values["longhorn"] = lh
        lh["defaultSettings"] = {**(lh.get("defaultSettings") or {}), **defaults}
        return cur
    client.modify(api, "ManagedChart", "harvester", fn, "fleet-local")
    for setting, value in chosen.items():
        client.patch("longhorn.io/v1beta2", "Setting", setting, {"value": value},
                         "longhorn-system")


def _upgrade_chart(ctx: ProgramContext, name: str, version: str) -> Prog:
    api = "management.cattle.io/v3"
    mc = ctx.client.try_get(api, "ManagedChart", name, "fleet-local")
    if mc is None or not version:
        ctx.log(f"managedchart {name} not found; skipping")
        return 0
    prev_gen = int((mc.get("status") or {}).get("observedGeneration") or 0)
    ctx.log(f"upgrading managedchart {name} to {version}")

    def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
        spec = cur.setdefault("spec", {})
        if spec.get("version") == version and not spec.get("paused"):
            return None
        spec["version"] = version
        spec["paused"] = False
        return cur

    ctx.client.modify(api, "ManagedChart", name, fn, "fleet-local")
    while not _chart_ready(ctx, name, prev_gen):
        yield 2.0
    ctx.log(f"managedchart {name} is ready at {version}")
    return 0


def _env_required(ctx: ProgramContext, name: str, where: str) -> str:
    """``${NAME}`` under ``set -u``: an unset variable ends the script (exit 1)."""
    if name not in ctx.env:
        raise ScriptExit(1, f"{where}: {name}: unbound variable")
    return ctx.env[name]


def http_get(ctx: ProgramContext, url: str) -> tuple[int, bytes] | None:
    """``curl`` from a pod: ``http://<service>.<namespace>[.svc...]/<path>`` reaches a Ready
    pod selected by the Service (port 80). None: name not resolved / connection refused."""
    m = re.match(r"^http://([^/:]+)(?::(\d+))?(/.*)?$", url)
    if not m:
        return None
    host, port, path = m.group(1), int(m.group(2) or 80), m.group(3) or "/"
    parts = host.split(".")
    if len(parts) < 2 or not parts[0]:
        return None
    svc_name, ns = parts[0], parts[1]
    try:
        svc = ctx.client.try_get("v1", "Service", svc_name, ns)
    except Exception:  # noqa: BLE001 - an invalid name does not resolve
        return None
    if svc is None:
        return None
    sel = (svc.get("spec") or {}).get("selector") or {}
    target = port
    for sp in (svc.get("spec") or {}).get("ports") or []:
        if int(sp.get("port") or 0) == port:
            tp = sp.get("targetPort", port)
            target = int(tp) if isinstance(tp, int) or str(tp).isdigit() else port
    if not sel:
        return None
    for pod in ctx.client.list("v1", "Pod", ns, label_selector=sel):
        st = pod.get("status") or {}
        if pod["metadata"].get("deletionTimestamp") or not any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in st.get("conditions") or []):
            continue
        handler = ctx.world.proxies.pod_handler(ns, pod["metadata"]["name"], target)
        if handler is None:
            continue
        code, _hdrs, body = handler("GET", path, "", {}, b"")
        return int(code), bytes(body or b"")
    return None


SNAPSHOT_IMAGE_REPO = "starbops/harvester-upgrade-toolkit"


class Repo:
    """lib.sh's view of the upgrade repo of plan ``name``."""

    def __init__(self, ctx: ProgramContext, name: str) -> None:
        self.ctx = ctx
        # The pinned snapshot's own image (pkg/upgradeplan: starbops/harvester-upgrade-toolkit)
        # carries 5ac1bbe's lib.sh, UPGRADE_REPO_URL=http://<plan>-repo.<ns> (its DaemonSet
        # serves the ISO at the root); the released V2 image serves /harvester-iso.
        prefix = "" if image_repo(ctx.image) == SNAPSHOT_IMAGE_REPO else "/harvester-iso"
        self.url = f"http://{name}-repo.{UPGRADE_NS}{prefix}"
        self.release: dict[str, Any] = {}

    def get(self, rel: str) -> bytes | None:
        got = http_get(self.ctx, f"{self.url}/{rel}")
        if got is None or got[0] >= 400:  # curl -f
            return None
        return got[1]

    def wait(self) -> Prog:
        """``wait_repo``: until curl of the release file succeeds (no deadline)."""
        while self.get("harvester-release.yaml") is None:
            self.ctx.log("Wait for upgrade repo ready...")
            yield POLL_S
        return 0

    def detect(self) -> dict[str, Any]:
        """``detect_repo``: read the release file; ``yq -e`` on a missing key exits 1."""
        raw = self.get("harvester-release.yaml")
        if raw is None:
            raise ScriptExit(1, f"curl: (22) {self.url}/harvester-release.yaml")
        try:
            rel = yaml.safe_load(raw) or {}
        except yaml.YAMLError as exc:
            raise ScriptExit(1, f"Error: bad file harvester-release.yaml: {exc}") from exc
        if not isinstance(rel, dict):
            raise ScriptExit(1, "Error: harvester-release.yaml is not a mapping")
        for key in RELEASE_KEYS:
            cur: Any = rel
            for part in key.split("."):
                cur = cur.get(part) if isinstance(cur, dict) else None
            if cur is None or cur == "":
                raise ScriptExit(1, f"Error: no matches found (.{key})")
        if not str(rel["os"]).removeprefix("Harvester "):
            raise ScriptExit(1, "[ERROR] Fail to get OS version from upgrade repo.")
        self.release = rel
        return rel


def _plan_name(ctx: ProgramContext, strict: bool) -> str:
    """``$HARVESTER_UPGRADEPLAN_NAME`` as lib.sh's first lines expand it."""
    if strict:
        return _env_required(ctx, "HARVESTER_UPGRADEPLAN_NAME", f"{LIB_SH}: line 2")
    return ctx.env.get("HARVESTER_UPGRADEPLAN_NAME", "")


def _detect_upgrade(ctx: ProgramContext, name: str) -> dict[str, Any]:
    """``detect_upgrade``: ``kubectl get upgradeplans <name> -o yaml`` (set -e: a failure
    ends the script)."""
    try:
        plan = ctx.client.try_get(PLAN_API, "UpgradePlan", name)
    except Exception as exc:  # noqa: BLE001 - CRD not served
        raise ScriptExit(1, f"error: the server doesn't have a resource type "
                            f"\"upgradeplans\": {exc}") from exc
    if plan is None:
        raise ScriptExit(1, f'Error from server (NotFound): upgradeplans.management.'
                            f'harvesterhci.io "{name}" not found')
    return plan  # type: ignore[no-any-return]


def _node(ctx: ProgramContext, name: str) -> dict[str, Any] | None:
    return ctx.client.try_get("v1", "Node", name)  # type: ignore[no-any-return]


def _kubectl_node(ctx: ProgramContext, name: str) -> dict[str, Any]:
    n = _node(ctx, name)
    if n is None:
        raise ScriptExit(1, f'Error from server (NotFound): nodes "{name}" not found')
    return n


def _node_info(node: dict[str, Any] | None) -> dict[str, Any]:
    return dict(((node or {}).get("status") or {}).get("nodeInfo") or {})


def _strip_rc(v: str) -> str:
    """``sed 's/-rc[[:digit:]]*//g'``: ``v1.33.0-rc2+rke2r1`` -> ``v1.33.0+rke2r1``."""
    return re.sub(r"-rc\d*", "", v)


def _is_rke2_upgraded(ctx: ProgramContext, node: str, rke2: str) -> bool:
    return str(_node_info(_node(ctx, node)).get("kubeletVersion") or "") == _strip_rc(rke2)


def _wait_rke2_upgrade(ctx: ProgramContext, node: str, rke2: str) -> Prog:
    while not _is_rke2_upgraded(ctx, node, rke2):
        ctx.log("Waiting for RKE2 to be upgraded...")
        yield POLL_S
    return 0


def _set_drain_taint(ctx: ProgramContext, node: str, present: bool) -> None:
    """``kubectl taint node <n> --overwrite kubevirt.io/drain=draining:NoSchedule`` /
    ``kubectl taint node <n> kubevirt.io/drain- || true``."""
    def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
        spec = cur.setdefault("spec", {})
        taints = [t for t in spec.get("taints") or [] if t.get("key") != DRAIN_TAINT]
        if present:
            taints.append({"key": DRAIN_TAINT, "value": "draining", "effect": "NoSchedule"})
        if taints == (spec.get("taints") or []):
            return None
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)
        return cur

    try:
        ctx.client.modify("v1", "Node", node, fn)
    except Exception as exc:  # noqa: BLE001 - kubectl's error
        if present:
            raise ScriptExit(1, f"Error from server: {exc}") from exc


def _vmis_labelled(ctx: ProgramContext, node: str) -> list[dict[str, Any]] | None:
    try:
        return ctx.client.list("kubevirt.io/v1", "VirtualMachineInstance",  # type: ignore
                               label_selector={"kubevirt.io/nodeName": node})
    except Exception:  # noqa: BLE001 - KubeVirt not served: kubectl fails
        return None


def _wait_vms_out(ctx: ProgramContext, node: str) -> Prog:
    """``wait_vms_out_or_shutdown``: until no VMI on the node has a phase other than
    Succeeded (``failed to get`` when kubectl fails: keeps waiting)."""
    while True:
        vmis = _vmis_labelled(ctx, node)
        left = None if vmis is None else [
            f"{v['metadata']['namespace']}/{v['metadata']['name']}" for v in vmis
            if (v.get("status") or {}).get("phase") != "Succeeded"]
        if left == []:
            ctx.log(f"all VMs on node {node} have been live-migrated or shutdown")
            return 0
        ctx.log("Waiting for VM live-migration or shutdown...(count: "
                f"{'failed to get' if left is None else len(left)})")
        yield POLL_S


def _wait_evacuation_pdb_gone(ctx: ProgramContext) -> Prog:
    while True:
        try:
            pdbs = ctx.client.list("policy/v1", "PodDisruptionBudget")
        except Exception:  # noqa: BLE001 - grep finds nothing in kubectl's error
            return 0
        if not any("kubevirt-migration-pdb-kubevirt-evacuation-" in p["metadata"]["name"]
                   for p in pdbs):
            return 0
        ctx.log("Waiting for evacuation PDB gone...")
        yield POLL_S


def _non_migratable(vmi: dict[str, Any], node: str, nodes: list[dict[str, Any]]) -> bool:
    """The detector's rules (reference §D.1)."""
    others = [n for n in nodes if "node-role.harvesterhci.io/witness"
              not in (n["metadata"].get("labels") or {})]
    if len(others) == 1:
        return True
    spec = vmi.get("spec") or {}
    if spec.get("nodeSelector") is not None:
        return True
    if ((spec.get("domain") or {}).get("devices") or {}).get("hostDevices"):
        return True
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
             .get("nodeSelectorTerms") or [])
    for n in others:
        if n["metadata"]["name"] == node or (n.get("spec") or {}).get("unschedulable"):
            continue
        if not terms or any(node_term_matches(t, n) for t in terms):
            return False
    return True


def _detector(ctx: ProgramContext, node: str, plan: str) -> None:
    """``vm-live-migrate-detector <node> --shutdown --upgrade <plan>`` (harvester v1.6.0
    pkg/upgradehelper/vmlivemigratedetector, V2 ConfigMap owner = the UpgradePlan):
    ConfigMap ``<plan>-restore-vm`` key ``<node>`` := non-migratable VMIs on the node
    (paused and repo VMs left out), then ``Stop`` each of them. Events not modelled."""
    vmis = _vmis_labelled(ctx, node)
    if vmis is None:
        raise ScriptExit(1, "vm-live-migrate-detector: failed to list VMIs")
    nodes = ctx.client.list_refs("v1", "Node")   # read-only: the detector only reads them
    names = [v for v in vmis if _non_migratable(v, node, nodes)]
    keys = [f"{v['metadata']['namespace']}/{v['metadata']['name']}" for v in names]
    restore = [f"{v['metadata']['namespace']}/{v['metadata']['name']}" for v in names
               if not (v["metadata"].get("labels") or {}).get("harvesterhci.io/upgrade")
               and not any(c.get("type") == "Paused" and c.get("status") == "True"
                           for c in (v.get("status") or {}).get("conditions") or [])]
    up = ctx.client.try_get(PLAN_API, "UpgradePlan", plan)
    if up is None:
        raise ScriptExit(1, f"failed to get UpgradePlan {plan}")
    cm_name = f"{plan}-restore-vm"
    value = ",".join(restore)
    cm = ctx.client.try_get("v1", "ConfigMap", cm_name, UPGRADE_NS)
    if cm is None:
        ctx.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": cm_name, "namespace": UPGRADE_NS,
                                        "ownerReferences": [{
                                            "apiVersion": PLAN_API, "kind": "UpgradePlan",
                                            "name": plan, "uid": up["metadata"]["uid"]}]},
                           "data": {node: value}})
    else:
        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            data = cur.setdefault("data", {})
            if data.get(node) == value:
                return None
            data[node] = value
            return cur

        ctx.client.modify("v1", "ConfigMap", cm_name, fn, UPGRADE_NS)
    for key in keys:
        ns, name = key.split("/", 1)

        def stop(cur: dict[str, Any]) -> dict[str, Any] | None:
            spec = cur.setdefault("spec", {})
            if "running" in spec and "runStrategy" not in spec:
                if spec["running"] is False:
                    return None
                spec["running"] = False
            elif spec.get("runStrategy") == "Halted":
                return None
            else:
                spec["runStrategy"] = "Halted"
            return cur

        try:
            ctx.client.modify("kubevirt.io/v1", "VirtualMachine", name, stop, ns)
        except Exception as exc:  # noqa: BLE001 - VMShutdownFailed: counted, not fatal
            ctx.log(f"failed to stop VM {key}: {exc}")
    ctx.log(f"Shutdown completed for {len(keys)} VM(s) on node {node}")


def _wait_longhorn_engines(ctx: ProgramContext, node: str, rke2: str) -> Prog:
    if _is_rke2_upgraded(ctx, node, rke2):
        ctx.log("RKE2 already upgraded. Skip waiting Longhorn engines.")
        return 0
    # read-only throughout (the stored objects, not copies: the script only reads what
    # kubectl prints; at 100 nodes copying every Node's image list and 3,000 Engines per
    # node cost a fifth of the runtime's CPU)
    nodes = [n for n in ctx.client.list_refs("v1", "Node", label_selector={
        "harvesterhci.io/managed": "true"})
        if (n["metadata"].get("labels") or {}).get("node-role.harvesterhci.io/witness")
        != "true"]
    if len(nodes) == 1:
        ctx.log("Skip waiting Longhorn engines for single-node cluster.")
        return 0
    try:
        engines = ctx.client.list_refs("longhorn.io/v1beta2", "Engine", "longhorn-system")
    except Exception as exc:  # noqa: BLE001 - pipefail: kubectl's failure ends the script
        raise ScriptExit(1, f"error: engines.longhorn.io: {exc}") from exc
    # one `kubectl get volumes.longhorn.io/<volume>` per running engine: while no simulated
    # time passes (no wait yet) those reads see what one read of all volumes saw; after a
    # wait each volume is read as it is then
    volumes: dict[str, dict[str, Any]] | None = {
        v["metadata"]["name"]: v for v in ctx.client.list_refs(
            "longhorn.io/v1beta2", "Volume", "longhorn-system")}
    for eng in engines:
        if (eng.get("status") or {}).get("currentState") != "running":
            continue
        vol = (eng["metadata"].get("labels") or {}).get("longhornvolume", "")
        while True:
            v = (volumes.get(vol) if volumes is not None else ctx.client.peek(
                "longhorn.io/v1beta2", "Volume", vol, "longhorn-system")) or {}
            if len(nodes) > 2:
                if (v.get("status") or {}).get("robustness") == "healthy":
                    break
            else:
                want = 1 if int((v.get("spec") or {}).get("numberOfReplicas") or 0) == 1 \
                    else 2
                cur = ctx.client.peek("longhorn.io/v1beta2", "Engine",
                                      eng["metadata"]["name"], "longhorn-system") or {}
                rw = sum(1 for m in ((cur.get("status") or {}).get("replicaModeMap")
                                     or {}).values() if m == "RW")
                if rw >= want:
                    break
            if pod_file_exists(ctx, f"/tmp/skip-{vol}"):
                ctx.log(f"Skip {vol}.")
                break
            ctx.log(f"Waiting for volume {vol} to be healthy...")
            yield 10.0
            volumes = None
    return 0


def _recover_rancher_system_agent(ctx: ProgramContext) -> None:
    """v1.6.0: ``chroot /host rm -rf <drop-in dir> && systemctl daemon-reload && systemctl
    restart rancher-system-agent``."""
    files = ctx.host_files()
    for path in [p for p in files if p == AGENT_DROPIN_DIR or
                 p.startswith(AGENT_DROPIN_DIR + "/")]:
        del files[path]
    ctx.restart_agent()
    ctx.world.timeline.record("agent_dropin_removed", node=ctx.node)


def _canal_and_charts(ctx: ProgramContext) -> None:
    """``remove_rke2_canal_config`` + ``disable_rke2_charts``."""
    files = ctx.host_files()
    files.pop(CANAL_CONFIG, None)
    files[DISABLE_CHARTS] = ("disable:\n- rke2-snapshot-controller\n"
                             "- rke2-snapshot-controller-crd\n"
                             "- rke2-snapshot-validation-webhook\n")


def _kubelet_configs(ctx: ProgramContext) -> None:
    """``set_max_pods``, ``set_reserved_resource``, ``set_rke2_device_permissions``,
    ``set_oem_cleanup_kubelet``."""
    files = ctx.host_files()
    for path, text in KUBELET_CONFIGS.items():
        if path.endswith("91-harvester-cdi.yaml") and path in files:
            continue
        files[path] = text
    files.setdefault(RESERVED_CONFIG, 'kubelet-arg+:\n- "system-reserved=cpu=..."\n')


def _clean_rke2_archives(ctx: ProgramContext) -> None:
    files = ctx.host_files()
    for path in [p for p in files if p.startswith(RKE2_IMAGES_DIR + "/")]:
        del files[path]


def _upgrade_os(ctx: ProgramContext, os_image: str) -> Prog:
    """``upgrade_os``: 1 when the OS was installed (reboot service started), 0 if skipped.
    The current OS is the host's ``/etc/os-release`` PRETTY_NAME (= the Node's osImage)."""
    if _node_info(_node(ctx, ctx.node)).get("osImage") == os_image:
        ctx.log(f'Skip upgrading OS. The OS version is already "{os_image}".')
        return 0
    ctx.log(f"installing {os_image} (elemental upgrade)")
    t0 = ctx.world.clock.now()
    yield ctx.world.timings.os_install_s
    _span(ctx, "os_install", t0)
    ctx.world.timeline.record("os_installed", node=ctx.node, os=os_image)
    pod_name = _env_required(ctx, "HARVESTER_UPGRADE_POD_NAME", f"{NODE_SCRIPT}: line 378")
    _reboot_after_exit(ctx, pod_name, os_image)
    ctx.log("reboot scheduled after this container exits")
    return 1


def _reboot_after_exit(ctx: ProgramContext, pod_name: str, os_image: str) -> None:
    """The transient ``upgrade-reboot.service`` (v1.6.0): every 10 s, ``crictl`` looks for
    pod ``$HARVESTER_UPGRADE_POD_NAME`` in ``harvester-system`` and its container ``apply``
    (the 5ac1bbe snapshot image: ``cattle-system`` and ``upgrade``, its SUC Job);
    once that exited 0 the host reboots (into the installed OS). Forever otherwise."""
    world = ctx.world
    node = ctx.node
    client = world.client_for("upgrade-reboot")
    # the snapshot's own image (5ac1bbe reboot_if_job_succeed) runs under SUC: it looks for
    # the pod in cattle-system and its container `upgrade`
    snapshot = image_repo(ctx.image) == SNAPSHOT_IMAGE_REPO
    pod_ns, container = ("cattle-system", "upgrade") if snapshot else (UPGRADE_NS, "apply")

    def exited_ok() -> bool | None:
        pod = client.try_get("v1", "Pod", pod_name, pod_ns)
        if pod is None:
            return None
        st = pod.get("status") or {}
        for cs in st.get("containerStatuses") or []:
            if cs.get("name") == container:
                term = (cs.get("state") or {}).get("terminated")
                if term is not None:
                    return int(term.get("exitCode", 1)) == 0
        return False

    def poll() -> None:
        ok = exited_ok()
        if ok is None:
            # the service would retry forever finding nothing: no reboot either way
            world.timeline.record("reboot_cancelled", node=node, reason="job pod gone")
            return
        if not ok:
            world.runtime.after(REBOOT_POLL_S, poll)
            return
        world.timeline.record("reboot_triggered", node=node, os=os_image)
        kubelet = world.controllers.get("kubelet")
        if kubelet is not None and hasattr(kubelet, "reboot"):
            kubelet.reboot(node, new_os_image=os_image)
            return

        # no simulated kubelet (unit tests): the reboot as a plain status change
        def up() -> None:
            def fn(cur: dict[str, Any]) -> dict[str, Any]:
                cur.setdefault("status", {}).setdefault("nodeInfo", {})["osImage"] = os_image
                return cur

            client.modify("v1", "Node", node, fn, subresource="status")

        world.runtime.after(world.timings.reboot_s, up)

    world.runtime.after(1.0, poll)


# ------------------------------------------------------------------------ upgrade_node.sh
def prepare(ctx: ProgramContext, repo: Repo, plan: str) -> Prog:
    up = _detect_upgrade(ctx, plan)
    ann = (up.get("metadata") or {}).get("annotations") or {}
    if ann.get("harvesterhci.io/skip-version-check") == "true":
        ctx.log("Skip minimum upgradable version check.")
    version = str(repo.release["harvester"])
    wanted = release_images(ctx.world, version)
    missing = [(ref, size) for ref, size in wanted if not _node_has_image(ctx, ref)]
    total = sum(s for _, s in missing)
    ctx.log(f"preloading {len(missing)} of {len(wanted)} images ({total // MiB} MiB) "
            f"of {version} on {ctx.node}")
    rate = max(1.0, ctx.world.timings.image_pull_mib_s) * MiB
    t0 = ctx.world.clock.now()
    batches = max(1, min(10, len(missing)))
    per = (len(missing) + batches - 1) // batches if missing else 0
    for b in range(batches):
        chunk = missing[b * per:(b + 1) * per]
        if not chunk:
            continue
        yield sum(s for _, s in chunk) / rate
        _add_images(ctx, chunk)
    # download_image_archives_from_repo rke2: the archives RKE2 imports when it restarts
    ctx.host_files()[f"{RKE2_IMAGES_DIR}/rke2-images.linux-amd64.tar.zst"] = version
    _span(ctx, "image_pull", t0, images=len(missing), bytes=total)
    ctx.world.timeline.record("preload_done", node=ctx.node, images=len(missing), bytes=total)
    return 0


def pre_drain(ctx: ProgramContext, repo: Repo, plan: str) -> Prog:
    rke2 = str(repo.release["kubernetes"])
    _recover_rancher_system_agent(ctx)
    # get_node_rke2_version runs in $(...): an unset node name fails that subshell only,
    # the comparison is false and the engines are waited for
    node = ctx.env.get("HARVESTER_UPGRADE_NODE_NAME", "")
    yield from _wait_longhorn_engines(ctx, node, rke2)
    node = _env_required(ctx, "HARVESTER_UPGRADE_NODE_NAME", f"{NODE_SCRIPT}: line 581")
    _detector(ctx, node, plan)
    _set_drain_taint(ctx, node, True)
    yield from _wait_vms_out(ctx, node)
    yield from _wait_evacuation_pdb_gone(ctx)
    _canal_and_charts(ctx)
    ctx.world.timeline.record("pre_drain_done", node=ctx.node)
    return 0


def post_drain(ctx: ProgramContext, repo: Repo, plan: str) -> Prog:
    _kubelet_configs(ctx)
    node = _env_required(ctx, "HARVESTER_UPGRADE_NODE_NAME", f"{NODE_SCRIPT}: line 291")
    _kubectl_node(ctx, node)
    yield from _wait_rke2_upgrade(ctx, node, str(repo.release["kubernetes"]))
    _clean_rke2_archives(ctx)
    _set_drain_taint(ctx, node, False)
    yield from _upgrade_os(ctx, str(repo.release["os"]))
    return 0


def _wait_fleet_bundles(ctx: ProgramContext, loops: int = 18) -> Prog:
    """lib.sh ``wait_for_fleet_bundles``: 10 s, then up to ``loops`` x 10 s; never fails."""
    yield 10.0
    for _ in range(loops):
        try:
            bundles = ctx.client.list("fleet.cattle.io/v1alpha1", "Bundle")
        except Exception:  # noqa: BLE001 - "get bundle status fail, try again"
            bundles = None
        if bundles is not None and not any(
                c.get("type") == "Ready" and c.get("status") == "False"
                for b in bundles for c in (b.get("status") or {}).get("conditions") or []):
            return 0
        yield 10.0
    return 0


def single_node_upgrade(ctx: ProgramContext, repo: Repo, plan: str) -> Prog:
    """harvester v1.6.0 ``command_single_node_upgrade`` (not defined at the pinned commit)."""
    _recover_rancher_system_agent(ctx)
    _canal_and_charts(ctx)
    node = _env_required(ctx, "HARVESTER_UPGRADE_NODE_NAME", f"{NODE_SCRIPT}: line 748")
    _detector(ctx, node, plan)
    yield from _wait_vms_out(ctx, node)
    yield from _wait_fleet_bundles(ctx)
    _kubelet_configs(ctx)
    rke2 = str(repo.release["kubernetes"])
    try:
        ctx.client.patch("provisioning.cattle.io/v1", "Cluster", "local",
                         {"spec": {"kubernetesVersion": rke2, "rkeConfig": {}}},
                         "fleet-local")
    except Exception as exc:  # noqa: BLE001 - kubectl patch failed: set -e
        raise ScriptExit(1, f"Error from server: {exc}") from exc
    ctx.world.timeline.record("kubernetes_version_set", version=rke2)
    yield from _wait_rke2_upgrade(ctx, node, rke2)
    _clean_rke2_archives(ctx)
    yield from _upgrade_os(ctx, str(repo.release["os"]))
    return 0


NODE_COMMANDS = {"prepare": prepare, "pre-drain": pre_drain, "post-drain": post_drain,
                 "single-node-upgrade": single_node_upgrade}


def upgrade_node(ctx: ProgramContext, argv: list[str]) -> Prog:
    sub = argv[1] if len(argv) > 1 else ""
    plan = _plan_name(ctx, strict=True)
    if sub not in NODE_COMMANDS:
        ctx.log(USAGE)
        return 1
    if sub != "prepare":
        # the fault engine's event (e.g. a replica lost while the pre-drain Job runs)
        ctx.world.faults.notify("node_job_started", node=ctx.node, program=sub)
        fault = _fault(ctx, sub, "node_job_fail", "node_job_hang")
        if fault == "node_job_fail":
            ctx.log(f"{sub}: injected failure")
            return 1
        if fault == "node_job_hang":
            yield from _hang(ctx, sub)
    repo = Repo(ctx, plan)
    yield from repo.wait()
    repo.detect()
    return (yield from NODE_COMMANDS[sub](ctx, repo, plan))


# ------------------------------------------------------------------------ manifests
def skip_restart_plan(plan: str, version: str) -> dict[str, Any]:
    """The Plan ``skip_restart_rancher_system_agent`` creates (upgrade_manifests.sh)."""
    from .host_scripts import SKIP_RESTART_SCRIPT

    return {"apiVersion": SUC_API, "kind": "Plan",
            "metadata": {"name": f"{plan}-skip-restart-rancher-system-agent",
                         "namespace": "cattle-system"},
            "spec": {"concurrency": 10,
                     "nodeSelector": {"matchLabels": {"harvesterhci.io/managed": "true"}},
                     "serviceAccountName": "system-upgrade-controller",
                     "tolerations": [{"operator": "Exists"}],
                     "upgrade": {"image": SKIP_RESTART_IMAGE, "command": ["chroot", "/host"],
                                 "args": ["sh", "-c", SKIP_RESTART_SCRIPT]},
                     "version": version}}


def _skip_restart_rancher_system_agent(ctx: ProgramContext, plan: str) -> Prog:
    name = f"{plan}-skip-restart-rancher-system-agent"
    version = secrets.token_hex(4)
    try:
        ctx.client.create(skip_restart_plan(plan, version))
    except Exception as exc:  # noqa: BLE001 - kubectl create failed (exists...): set -e
        raise ScriptExit(1, f"Error from server: {exc}") from exc
    ctx.log(f"Creating plan {name} to make rancher-system-agent temporarily skip restarting "
            "RKE2 server...")
    while True:
        p = ctx.client.try_get(SUC_API, "Plan", name, "cattle-system") or {}
        st = p.get("status") or {}
        if st.get("latestVersion") == version:
            hsh = st.get("latestHash", "")
            nodes = ctx.client.list("v1", "Node")
            done = [n for n in nodes if (n["metadata"].get("labels") or {}).get(
                f"plan.upgrade.cattle.io/{name}") == hsh]
            if len(done) == len(nodes):
                ctx.log(f"Plan {name} completes.")
                break
        ctx.log(f"Waiting for plan {name} to complete...")
        yield 10.0
    ctx.client.delete(SUC_API, "Plan", name, "cattle-system")
    return 0


def _disable_cluster_version_management(ctx: ProgramContext) -> None:
    try:
        ctx.client.patch("management.cattle.io/v3", "Cluster", "local", {"metadata": {
            "annotations": {"rancher.io/imported-cluster-version-management": "false"}}})
    except Exception as exc:  # noqa: BLE001 - kubectl annotate failed: set -e
        raise ScriptExit(1, f"Error from server: {exc}") from exc


def upgrade_manifests(ctx: ProgramContext, argv: list[str]) -> Prog:
    plan = _plan_name(ctx, strict=False)  # set -e only: an unset name is empty
    repo = Repo(ctx, plan)
    yield from repo.wait()
    meta = repo.detect()
    _detect_upgrade(ctx, plan)
    t0 = ctx.world.clock.now()
    ctx.world.timeline.record("cluster_upgrade_started", version=meta["harvester"])
    _disable_cluster_version_management(ctx)
    yield from _skip_restart_rancher_system_agent(ctx, plan)
    yield from _upgrade_rancher(ctx, str(meta.get("rancher", "")))
    for chart in ("harvester-crd", "harvester"):
        if chart == "harvester":
            patch_longhorn_settings(ctx.client, ctx.log)
        yield from _upgrade_chart(ctx, chart, str(meta.get("harvesterChart", "")))
    yield from _wait_kubevirt(ctx, meta.get("kubevirt") or _repo_kubevirt(ctx, meta["harvester"]))
    for chart in ("rancher-monitoring-crd", "rancher-monitoring"):
        if ctx.client.try_get("management.cattle.io/v3", "ManagedChart", chart,
                              "fleet-local") is not None:
            yield from _upgrade_chart(ctx, chart, str(meta.get("monitoringChart", "")))
    ctx.world.timeline.record("span", what="cluster_upgrade", node="", start=t0,
                              end=ctx.world.clock.now(), **_job_pod(ctx))
    ctx.world.timeline.record("cluster_upgrade_done", version=meta["harvester"])
    return 0


def _repo_kubevirt(ctx: ProgramContext, version: str) -> str:
    """``kubevirt`` of the repo's harvester-release.yaml (lib.sh ``detect_repo``; the plan's
    releaseMetadata does not carry it)."""
    from ..controllers._upgrade_util import release_for

    rel = release_for(ctx.world, version)
    return str(getattr(rel, "kubevirt", "") or "")


def _kubevirt_reached(observed: str, want: str) -> bool:
    from ..releases.catalog import kubevirt_semver

    if observed == want:
        return True
    # a scenario's bare version (``v1.4.1``) is shipped as a generated SUSE build tag
    return "-" not in want.lstrip("v") and kubevirt_semver(observed) is not None and \
        kubevirt_semver(observed) == kubevirt_semver(want)


def _wait_kubevirt(ctx: ProgramContext, version: str) -> Prog:
    """``wait_kubevirt harvester-system kubevirt $REPO_KUBEVIRT_VERSION``: every 5 s until the
    KubeVirt CR's ``status.observedKubeVirtVersion`` is the release's and its phase
    ``Deployed``. (A world without the CR skips the wait; the real script would loop.)"""
    if not version:
        return 0
    ctx.log(f"Waiting for KubeVirt to upgrade to {version}...")
    while True:
        try:
            kv = ctx.client.try_get("kubevirt.io/v1", "KubeVirt", "kubevirt", "harvester-system")
        except Exception:  # noqa: BLE001 - KubeVirt not served in this world
            kv = None
        if kv is None:
            ctx.log("no KubeVirt CR harvester-system/kubevirt: not waiting")
            return 0
        st = kv.get("status") or {}
        observed = str(st.get("observedKubeVirtVersion") or "")
        if _kubevirt_reached(observed, version) and st.get("phase") == "Deployed":
            return 0
        ctx.log(f"KubeVirt current version: {observed}, target version: {version}")
        yield 5.0


# ------------------------------------------------------------------------ dispatch
def _script_argv(argv: list[str]) -> list[str]:
    """``sh -c 'upgrade_node.sh prepare'`` runs the same as the plain command."""
    if argv and posixpath.basename(argv[0]) in ("sh", "bash") and "-c" in argv:
        return " ".join(argv[argv.index("-c") + 1:]).split()
    return argv


def toolkit(ctx: ProgramContext) -> Prog:
    argv = _argv(ctx)
    script = _script_argv(argv)
    prog = posixpath.basename(script[0]) if script else ""
    try:
        if prog == "upgrade_node.sh":
            return (yield from upgrade_node(ctx, script))
        if prog == "upgrade_manifests.sh":
            return (yield from upgrade_manifests(ctx, script))
        from .host_scripts import run_shell_script

        found = run_shell_script(ctx, argv)
        if found is not None:
            return (yield from found)
    except ScriptExit as exc:
        if exc.message:
            ctx.log(exc.message)
        return exc.code
    what = argv[0] if argv else "(image entrypoint upgrade-toolkit)"
    ctx.log(f'exec: "{what}": not modelled by the simulator (command {argv!r})')
    return 127


def register() -> None:
    # Every container of the image not claimed by a more specific program (the repo
    # DaemonSet's scripts in upgrade_repo.py) runs here.
    REGISTRY.register("harvester-upgrade-toolkit", _toolkit_image, toolkit, fallback=True)


register()
