"""Programs of the upgrade image ``rancher/harvester-upgrade-toolkit:<tag>``.

Matched by image repository (``*/harvester-upgrade-toolkit``) and the script in
``command``/``args``:

* ``upgrade_node.sh prepare`` — image preload (SUC plan ``<P>-image-preload``)
* ``upgrade_node.sh cleanup`` — image cleanup (SUC plan ``<P>-image-cleanup``, env ``IMAGES``)
* ``upgrade_node.sh pre-drain`` / ``post-drain`` / ``single-node-upgrade`` — node jobs
* ``upgrade_manifests.sh`` — the cluster-upgrade job

Each reads the UpgradePlan named by ``HARVESTER_UPGRADEPLAN_NAME``
(``management.harvesterhci.io/v1beta1``, cluster-scoped) and its
``status.releaseMetadata``. Faults: ``pod_fail``/``job_fail``/``job_hang`` are applied by the
kubelet to every Job container before its program runs (target keys ``node``, ``job``,
``pod``, ``namespace``, ``image``...), so they cover prepare, cleanup and
upgrade_manifests; the node jobs (pre-drain, post-drain, single-node-upgrade) also honour
``node_job_fail`` (exit 1) and ``node_job_hang`` (never ends), target keys ``node``,
``job``, ``pod``, ``plan``, ``program``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Generator
from typing import Any

from ..controllers._upgrade_util import (
    image_repository,
    k8s_version,
    normalize_image,
    release_images,
)
from .base import REGISTRY, ProgramContext, image_repo

PLAN_API = "management.harvesterhci.io/v1beta1"
MiB = 1024 * 1024
DRAIN_TAINT = "kubevirt.io/drain"
POLL_S = 5.0
REBOOT_POLL_S = 10.0
HANG_S = 3600.0

Prog = Generator[float, None, int]


# ------------------------------------------------------------------------ helpers
def _argv(ctx: ProgramContext) -> list[str]:
    return ctx.command + ctx.args


def _script_matcher(script: str, sub: str | None) -> Any:
    def match(image: str, command: list[str], args: list[str]) -> bool:
        if not image_repo(image).endswith("harvester-upgrade-toolkit"):
            return False
        argv = list(command) + list(args)
        # tolerate "sh -c 'upgrade_node.sh prepare'" style commands
        if argv and posixpath.basename(argv[0]) in ("sh", "bash") and "-c" in argv:
            argv = " ".join(argv[argv.index("-c") + 1:]).split()
        if not argv or posixpath.basename(argv[0]) != script:
            return False
        return sub is None or (len(argv) > 1 and argv[1] == sub)

    return match


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


def _plan(ctx: ProgramContext) -> dict[str, Any] | None:
    name = ctx.env.get("HARVESTER_UPGRADEPLAN_NAME", "")
    if not name:
        ctx.log("HARVESTER_UPGRADEPLAN_NAME is not set")
        return None
    try:
        plan = ctx.client.try_get(PLAN_API, "UpgradePlan", name)
    except Exception as exc:  # noqa: BLE001 - CRD missing etc.: the script fails
        ctx.log(f"cannot read upgradeplan {name}: {exc}")
        return None
    if plan is None:
        ctx.log(f"upgradeplan {name} not found")
    return plan  # type: ignore[no-any-return]


def _meta(plan: dict[str, Any]) -> dict[str, str]:
    return dict((plan.get("status") or {}).get("releaseMetadata") or {})


def _node(ctx: ProgramContext, name: str | None = None) -> dict[str, Any] | None:
    return ctx.client.try_get("v1", "Node", name or ctx.node)  # type: ignore[no-any-return]


def _node_info(node: dict[str, Any] | None) -> dict[str, Any]:
    return dict(((node or {}).get("status") or {}).get("nodeInfo") or {})


def _strip_rc(v: str) -> str:
    """``v1.33.0-rc2+rke2r1`` -> ``v1.33.0+rke2r1`` (wait_rke2_upgrade compares without it)."""
    import re

    return re.sub(r"-rc\d+", "", v)


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


def _set_drain_taint(ctx: ProgramContext, present: bool) -> None:
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

    ctx.client.modify("v1", "Node", ctx.node, fn)


def _vmis_on_node(ctx: ProgramContext, node: str) -> list[str]:
    try:
        vmis = ctx.client.list("kubevirt.io/v1", "VirtualMachineInstance")
    except Exception:  # noqa: BLE001 - KubeVirt not served: nothing to wait for
        return []
    out = []
    for v in vmis:
        st = v.get("status") or {}
        on = st.get("nodeName") or (v["metadata"].get("labels") or {}).get("kubevirt.io/nodeName")
        if on == node and st.get("phase") not in ("Succeeded", "Failed"):
            out.append(f"{v['metadata']['namespace']}/{v['metadata']['name']}")
    return out


def _wait_kubelet(ctx: ProgramContext, want: str) -> Prog:
    want_v = k8s_version(_strip_rc(want))
    while True:
        have = k8s_version(_node_info(_node(ctx)).get("kubeletVersion"))
        if have == want_v:
            ctx.log(f"kubelet on {ctx.node} is {have}")
            return 0
        ctx.log(f"waiting for kubelet {want_v} on {ctx.node} (now {have})")
        yield POLL_S


def _os_install(ctx: ProgramContext, os_image: str) -> Prog:
    """``upgrade_os``: returns 1 when the OS was installed (reboot needed), 0 if skipped."""
    if _node_info(_node(ctx)).get("osImage") == os_image:
        ctx.log(f"OS is already {os_image}; skip upgrading OS")
        return 0
    ctx.log(f"installing {os_image} (elemental upgrade)")
    t0 = ctx.world.clock.now()
    yield ctx.world.timings.os_install_s
    _span(ctx, "os_install", t0)
    ctx.world.timeline.record("os_installed", node=ctx.node, os=os_image)
    return 1


def _reboot_after_exit(ctx: ProgramContext, os_image: str, k8s: str = "") -> None:
    """The transient ``upgrade-reboot.service``: polls for the job container to exit 0,
    then reboots the node into ``os_image``."""
    world = ctx.world
    ns = (ctx.pod.get("metadata") or {}).get("namespace", "")
    pod_name = (ctx.pod.get("metadata") or {}).get("name", "")
    cname = ctx.container.get("name", "")
    node = ctx.node
    client = world.client_for("upgrade-reboot")

    def exited_ok() -> bool | None:
        pod = client.try_get("v1", "Pod", pod_name, ns)
        if pod is None:
            return None
        st = pod.get("status") or {}
        for cs in st.get("containerStatuses") or []:
            if cs.get("name") == cname:
                term = (cs.get("state") or {}).get("terminated")
                if term is not None:
                    return int(term.get("exitCode", 1)) == 0
        if st.get("phase") == "Succeeded":
            return True
        if st.get("phase") == "Failed":
            return False
        return False

    def poll() -> None:
        ok = exited_ok()
        if ok is None:
            world.timeline.record("reboot_cancelled", node=node, reason="job pod gone")
            return
        if not ok:
            world.runtime.after(REBOOT_POLL_S, poll)
            return
        world.timeline.record("reboot_triggered", node=node, os=os_image)
        kubelet = world.controllers.get("kubelet")
        if kubelet is not None and hasattr(kubelet, "reboot"):
            kwargs: dict[str, Any] = {"new_os_image": os_image}
            if k8s:
                kwargs["new_kubelet_version"] = k8s
            kubelet.reboot(node, **kwargs)
            return

        # no simulated kubelet (unit tests): the reboot as a plain status change
        def up() -> None:
            def fn(cur: dict[str, Any]) -> dict[str, Any]:
                cur.setdefault("status", {}).setdefault("nodeInfo", {})["osImage"] = os_image
                return cur

            client.modify("v1", "Node", node, fn, subresource="status")

        world.runtime.after(world.timings.reboot_s, up)

    world.runtime.after(1.0, poll)


# ------------------------------------------------------------------------ prepare
def prepare(ctx: ProgramContext) -> Prog:
    plan = _plan(ctx)
    if plan is None:
        return 1
    version = _meta(plan).get("harvester", "")
    if not version:
        ctx.log("releaseMetadata.harvester is empty")
        return 1
    wanted = release_images(ctx.world, version)
    node = _node(ctx)
    have = {normalize_image(n) for i in ((node or {}).get("status") or {}).get("images") or []
            for n in i.get("names") or []}
    missing = [(ref, size) for ref, size in wanted if normalize_image(ref) not in have]
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
    _span(ctx, "image_pull", t0, images=len(missing), bytes=total)
    ctx.world.timeline.record("preload_done", node=ctx.node, images=len(missing), bytes=total)
    return 0


def _add_images(ctx: ProgramContext, chunk: list[tuple[str, int]]) -> None:
    kubelet = ctx.world.controllers.get("kubelet")
    if kubelet is not None and hasattr(kubelet, "add_images"):
        kubelet.add_images(ctx.node, chunk)
        return

    def fn(cur: dict[str, Any]) -> dict[str, Any]:
        st = cur.setdefault("status", {})
        imgs = st.setdefault("images", [])
        known = {normalize_image(n) for i in imgs for n in i.get("names") or []}
        for ref, size in chunk:
            if normalize_image(ref) not in known:
                imgs.append({"names": [ref], "sizeBytes": int(size)})
        return cur

    ctx.client.modify("v1", "Node", ctx.node, fn, subresource="status")


# ------------------------------------------------------------------------ cleanup
def cleanup(ctx: ProgramContext) -> Prog:
    images = [i.strip() for i in ctx.env.get("IMAGES", "").splitlines() if i.strip()]
    pods = ctx.client.list("v1", "Pod", field_selector=f"spec.nodeName={ctx.node}")
    in_use = set()
    for p in pods:
        if (p.get("status") or {}).get("phase") in ("Running", "Pending"):
            for c in ((p.get("spec") or {}).get("containers") or []) + \
                    ((p.get("spec") or {}).get("initContainers") or []):
                in_use.add(normalize_image(str(c.get("image", ""))))
    remove: set[str] = set()
    for img in images:
        n = normalize_image(img)
        if n in in_use:
            ctx.log(f"image {img} is in use by a running container; not removed")
            continue
        remove.add(n)
    yield 0.1 * max(1, len(images))

    removed: list[str] = []
    kubelet = ctx.world.controllers.get("kubelet")
    if kubelet is not None and hasattr(kubelet, "remove_images"):
        removed = list(kubelet.remove_images(ctx.node, [i for i in images
                                                         if normalize_image(i) in remove]))
        ctx.log(f"removed {len(removed)} image(s) from {ctx.node}")
        ctx.world.timeline.record("images_cleaned", node=ctx.node, removed=len(removed))
        return 0

    def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
        st = cur.setdefault("status", {})
        before = st.get("images") or []
        keep = []
        for i in before:
            names = [normalize_image(x) for x in i.get("names") or []]
            if any(n in remove for n in names):
                removed.extend(i.get("names") or [])
                continue
            keep.append(i)
        if len(keep) == len(before):
            return None
        st["images"] = keep
        return cur

    ctx.client.modify("v1", "Node", ctx.node, fn, subresource="status")
    ctx.log(f"removed {len(removed)} image(s) from {ctx.node}")
    ctx.world.timeline.record("images_cleaned", node=ctx.node, removed=len(removed))
    return 0


# ------------------------------------------------------------------------ manifests
def _deployment_rolled(ctx: ProgramContext, ns: str, name: str) -> bool:
    d = ctx.client.try_get("apps/v1", "Deployment", name, ns)
    if d is None:
        return True
    if "deployments" not in ctx.world.controllers:
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
    ctx.world.timeline.record("span", what="rancher_upgrade", node="", start=t0,
                              end=ctx.world.clock.now())
    ctx.world.timeline.record("rancher_upgraded", version=version)
    return 0


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


def upgrade_manifests(ctx: ProgramContext) -> Prog:
    plan = _plan(ctx)
    if plan is None:
        return 1
    meta = _meta(plan)
    if not meta.get("harvester"):
        ctx.log("releaseMetadata is empty")
        return 1
    t0 = ctx.world.clock.now()
    ctx.world.timeline.record("cluster_upgrade_started", version=meta["harvester"])
    yield from _upgrade_rancher(ctx, meta.get("rancher", ""))
    for chart in ("harvester-crd", "harvester"):
        yield from _upgrade_chart(ctx, chart, meta.get("harvesterChart", ""))
    yield from _wait_kubevirt(ctx, meta.get("kubevirt") or _repo_kubevirt(ctx, meta["harvester"]))
    for chart in ("rancher-monitoring-crd", "rancher-monitoring"):
        if ctx.client.try_get("management.cattle.io/v3", "ManagedChart", chart,
                              "fleet-local") is not None:
            yield from _upgrade_chart(ctx, chart, meta.get("monitoringChart", ""))
    try:
        ctx.client.patch("harvesterhci.io/v1beta1", "Setting", "server-version",
                         {"value": meta["harvester"]})
    except Exception as exc:  # noqa: BLE001 - Setting not served: log and go on
        ctx.log(f"cannot update setting server-version: {exc}")
    yield from _set_kubernetes_version(ctx, meta.get("kubernetes", ""), bump=True)
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


def _set_kubernetes_version(ctx: ProgramContext, k8s: str, bump: bool) -> Prog:
    if not k8s:
        return 0
    api = "provisioning.cattle.io/v1"

    def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
        spec = cur.setdefault("spec", {})
        if k8s_version(spec.get("kubernetesVersion")) == k8s_version(k8s):
            return None
        spec["kubernetesVersion"] = k8s
        rke = spec.get("rkeConfig")
        if not isinstance(rke, dict):
            rke = spec["rkeConfig"] = {}
        if bump:
            rke["provisionGeneration"] = int(rke.get("provisionGeneration") or 0) + 1
        return cur

    ctx.client.modify(api, "Cluster", "local", fn, "fleet-local")
    ctx.log(f"kubernetesVersion of fleet-local/local is {k8s}")
    ctx.world.timeline.record("kubernetes_version_set", version=k8s)
    return 0
    yield  # pragma: no cover - makes this a generator


# ------------------------------------------------------------------------ node jobs
def pre_drain(ctx: ProgramContext) -> Prog:
    fault = _fault(ctx, "pre-drain", "node_job_fail", "node_job_hang")
    if fault == "node_job_fail":
        ctx.log("pre-drain: injected failure")
        return 1
    if fault == "node_job_hang":
        yield from _hang(ctx, "pre-drain")
    _set_drain_taint(ctx, True)
    ctx.log(f"tainted {ctx.node} {DRAIN_TAINT}=draining:NoSchedule; waiting for VMs to leave")
    while True:
        left = _vmis_on_node(ctx, ctx.node)
        if not left:
            break
        ctx.log(f"waiting for VMs to leave {ctx.node}: {', '.join(left)}")
        yield POLL_S
    return 0


def post_drain(ctx: ProgramContext) -> Prog:
    fault = _fault(ctx, "post-drain", "node_job_fail", "node_job_hang")
    if fault == "node_job_fail":
        ctx.log("post-drain: injected failure")
        return 1
    if fault == "node_job_hang":
        yield from _hang(ctx, "post-drain")
    plan = _plan(ctx)
    if plan is None:
        return 1
    meta = _meta(plan)
    yield from _wait_kubelet(ctx, meta.get("kubernetes", ""))
    _set_drain_taint(ctx, False)
    installed = yield from _os_install(ctx, meta.get("os", ""))
    if installed:
        _reboot_after_exit(ctx, meta.get("os", ""))
        ctx.log("reboot scheduled after this container exits")
    return 0


def single_node_upgrade(ctx: ProgramContext) -> Prog:
    fault = _fault(ctx, "single-node-upgrade", "node_job_fail", "node_job_hang")
    if fault == "node_job_fail":
        ctx.log("single-node-upgrade: injected failure")
        return 1
    if fault == "node_job_hang":
        yield from _hang(ctx, "single-node-upgrade")
    plan = _plan(ctx)
    if plan is None:
        return 1
    meta = _meta(plan)
    while True:
        left = _vmis_on_node(ctx, ctx.node)
        if not left:
            break
        ctx.log(f"waiting for VMs to shut down: {', '.join(left)}")
        yield POLL_S
    yield from _set_kubernetes_version(ctx, meta.get("kubernetes", ""), bump=False)
    yield from _wait_kubelet(ctx, meta.get("kubernetes", ""))
    _set_drain_taint(ctx, False)
    installed = yield from _os_install(ctx, meta.get("os", ""))
    if installed:
        _reboot_after_exit(ctx, meta.get("os", ""))
        ctx.log("reboot scheduled after this container exits")
    return 0


def register() -> None:
    REGISTRY.register("toolkit-prepare", _script_matcher("upgrade_node.sh", "prepare"), prepare)
    REGISTRY.register("toolkit-cleanup", _script_matcher("upgrade_node.sh", "cleanup"), cleanup)
    REGISTRY.register("toolkit-pre-drain", _script_matcher("upgrade_node.sh", "pre-drain"),
                      pre_drain)
    REGISTRY.register("toolkit-post-drain", _script_matcher("upgrade_node.sh", "post-drain"),
                      post_drain)
    REGISTRY.register("toolkit-single-node-upgrade",
                      _script_matcher("upgrade_node.sh", "single-node-upgrade"),
                      single_node_upgrade)
    REGISTRY.register("toolkit-upgrade-manifests", _script_matcher("upgrade_manifests.sh", None),
                      upgrade_manifests)


register()
