"""What each cluster-level phase does: ``act`` (get-or-create, then wait) and ``verify``.

Called through :func:`pipeline.run_phase` by the phase modules. Every ``act`` is idempotent:
it looks at the cluster first and only creates what is missing, so a re-run resumes a phase
where it stopped. In check mode nothing is created or awaited; the actions that would be
taken are recorded with :meth:`pipeline.Context.did`. Object shapes are in
:mod:`manifests`; the protocol is docs/protocol.md.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    manifests,
    node_settings,
    plan_status,
    preflight_checks,
    versions,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
    NotServed,
    selector,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.pipeline import (
    Context,
    Step,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
    list_plans,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Snapshot,
    Source,
    Verdict,
    WaitTimeout,
    only,
)

GiB = 1024**3
RELEASE_KEYS = ("harvester", "harvesterChart", "os", "kubernetes", "rancher",
                "monitoringChart", "minUpgradableVersion")
VERSION_KEYS = ("isoURL", "isoChecksum", "releaseDate", "tags")


def _size(n: float) -> str:
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / 1024**2:.0f} MiB"


def managed_nodes(kube: Kube) -> list[dict[str, Any]]:
    return kube.list(*c.NODE, label_selector=f"{c.LABEL_MANAGED}=true")


def server_version(kube: Kube) -> str | None:
    setting = kube.get(*c.SETTING, c.SERVER_VERSION_SETTING)
    if setting is None:
        return None
    return str(setting.get("value") or setting.get("default") or "") or None


def get_version(kube: Kube, name: str) -> dict[str, Any] | None:
    """The Version CR: Harvester's namespaced one, else the management-group variant."""
    obj = None
    try:
        obj = kube.get(*c.VERSION, name, c.UPGRADE_NS)
    except NotServed:
        pass
    if obj is None:
        try:
            obj = kube.get(*c.VERSION_MGMT, name)
        except NotServed:
            pass
    return obj


def list_versions(kube: Kube) -> list[dict[str, Any]]:
    try:
        return kube.list(*c.VERSION, namespace=c.UPGRADE_NS)
    except NotServed:
        return kube.list_if_served(*c.VERSION_MGMT) or []


def split_image_ref(ref: str) -> tuple[str, str]:
    """``ns/name`` or a bare name (in ``harvester-system``)."""
    if "/" in ref:
        ns, name = ref.split("/", 1)
        return ns, name
    return c.UPGRADE_NS, ref


def _job_states(jobs: dict[str, dict[str, Any]], running: str, ok: str, failed: str
                ) -> dict[str, Any]:
    """Per-node states from SUC Jobs (node from label ``upgrade.cattle.io/node``)."""
    states: dict[str, Any] = {}
    for job in sorted(jobs.values(), key=lambda j: j["metadata"].get("creationTimestamp", "")):
        node = ((job.get("metadata") or {}).get("labels") or {}).get(c.LABEL_SUC_NODE)
        if not node:
            continue
        done = manifests.job_condition(job)
        if done is None:
            states[node] = running
        elif done[0] == "Complete":
            states[node] = ok
        else:
            states[node] = (failed, done[1], done[2])
    return states


def fetch_repo_file(ctx: Context, path: str, what: str) -> tuple[int, bytes]:
    """GET a file of the upgrade repository through the service proxy.

    Retries (with backoff, until the deadline) while the repository answers 5xx or not at
    all; returns ``(status, body)`` for 2xx and 4xx answers.
    """
    api_path = manifests.repo_proxy_path(ctx.name, path)
    delay, last = 0.5, ""
    start = time.time()
    while True:
        try:
            status, body = ctx.kube.raw_get(api_path, timeout=30)
        except ApiError as exc:
            status, body = 0, str(exc).encode()
        if 200 <= status < 500:
            return status, body
        last = f"HTTP {status}: {body[:200].decode(errors='replace')}"
        if ctx.remaining() <= 0:
            raise WaitTimeout(what, time.time() - start, last)
        time.sleep(min(delay, max(0.0, ctx.remaining())))
        delay = min(8.0, delay * 2)


# ----------------------------------------------------------------------------- Initialize

def gather_facts(kube: Kube, plan: dict[str, Any] | None, params: dict[str, Any]
                 ) -> preflight_checks.Facts:
    """Read everything the pre-flight checks need (read-only)."""
    import concurrent.futures

    spec = (plan or {}).get("spec") or {}
    meta = (plan or {}).get("metadata") or {}
    f = preflight_checks.Facts()
    f.plan_name = meta.get("name")
    f.plan_annotations = dict(meta.get("annotations") or {})
    f.plan_annotations.update(params.get("annotations") or {})
    f.plans = list_plans(kube)
    f.current_version = server_version(kube)
    f.image = spec.get("image") or params.get("image")
    f.version_name = spec.get("version") or params.get("version")
    if not f.version_name and not f.image and f.current_version:
        f.version_name = versions.newest_target(
            [v["metadata"]["name"] for v in list_versions(kube)], f.current_version)
    if f.version_name:
        f.version_obj = get_version(kube, f.version_name)
    if f.image:
        ns, name = split_image_ref(f.image)
        f.image_obj = kube.get(*c.VM_IMAGE, name, ns)
    f.force = bool(spec.get("force") or params.get("force"))
    # a plan's switches are the ones recorded on it (every phase of every run reads the same);
    # a what-if takes them from the options
    recorded = f.plan_annotations if plan is not None else {}
    for attr, ann in (("allow_downgrade", c.ANN_ALLOW_DOWNGRADE),
                      ("allow_version_skip", c.ANN_ALLOW_VERSION_SKIP),
                      ("allow_unverified_iso", c.ANN_ALLOW_UNVERIFIED_ISO)):
        setattr(f, attr, preflight_checks.annotation_true(recorded, ann)
                or (plan is None and bool(params.get(attr))))
    f.restore_vm = bool(spec.get("restoreVM", params.get("restore_vm")))
    f.pause_nodes = list((spec.get("nodeUpgradeOption") or {}).get("pauseNodes")
                         or params.get("pause_nodes") or [])
    f.nodes = kube.list(*c.NODE)
    def served(fact: str, kind: tuple[str, str], namespace: str | None = None
               ) -> list[dict[str, Any]]:
        found = kube.list_if_served(*kind, namespace=namespace)
        if found is None:
            f.unserved[fact] = f"{kind[1]}.{kind[0]}"
        return found or []

    f.machines = served("machines", c.CAPI_MACHINE, c.FLEET_NS)
    try:
        f.cluster = kube.get(*c.RANCHER_CLUSTER, c.RANCHER_CLUSTER_NAME, c.FLEET_NS)
    except NotServed:
        f.cluster = None
    f.volumes = served("volumes", c.LH_VOLUME, c.LONGHORN_NS)
    f.backups = served("backups", c.VM_BACKUP)
    f.schedules = served("schedules", c.VM_BACKUP_SCHEDULE)
    f.charts = served("charts", c.MANAGED_CHART, c.FLEET_NS)
    f.bundles = served("bundles", c.FLEET_BUNDLE, c.FLEET_NS)
    f.addons = served("addons", c.ADDON)
    f.legacy_upgrades = served("legacy_upgrades", c.V1_UPGRADE, c.UPGRADE_NS)
    f.deployments = kube.list(*c.DEPLOYMENT, namespace=c.UPGRADE_NS,
                              label_selector=f"{c.LABEL_APP_NAME}={c.UPGRADE_MANAGER_ADDON}")
    f.vmis = served("vmis", c.VMI)
    f.migrations = served("migrations", c.VMIM)
    names = [n["metadata"]["name"] for n in f.nodes]
    if "disk_space" in (params.get("skip_checks") or ()) or \
            preflight_checks.annotation_true(f.plan_annotations, c.ANN_SKIP_GC_THRESHOLD):
        f.disks = {}   # skipped: no kubelet reads (nodes/proxy may be withheld, docs/rbac.md)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            f.disks = dict(zip(names, pool.map(lambda n: node_disk(kube, n), names),
                               strict=True))
    f.cert_expiry = api_cert_expiry(kube)
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        migration_target,
    )
    f.migration = migration_target.detect(kube)
    f.target_kubevirt = str((((plan or {}).get("status") or {}).get("releaseMetadata") or {})
                            .get("kubevirt") or "")
    return f


def node_disk(kube: Kube, node: str) -> preflight_checks.NodeDisk | str:
    """Disk usage and image GC threshold of one node, through the node proxy."""
    status, body = kube.raw_get(f"/api/v1/nodes/{node}/proxy/stats/summary", timeout=15)
    if status == 403:
        return ("stats/summary answered HTTP 403: this identity may not get nodes/proxy "
                "(deploy/rbac.yaml grants it; see docs/rbac.md); grant it, or skip the "
                "check with preflight_skip_checks: [disk_space]")
    if status != 200:
        return f"stats/summary answered HTTP {status}"
    try:
        fs = (json.loads(body).get("node") or {}).get("fs") or {}
        disk = preflight_checks.NodeDisk(int(fs.get("usedBytes") or 0),
                                         int(fs.get("capacityBytes") or 0))
    except (ValueError, TypeError) as exc:
        return f"bad stats/summary: {exc}"
    status, body = kube.raw_get(f"/api/v1/nodes/{node}/proxy/configz", timeout=15)
    if status == 200:
        try:
            cfg = json.loads(body).get("kubeletconfig") or {}
            disk.gc_high_threshold = int(cfg.get("imageGCHighThresholdPercent")
                                         or c.DEFAULT_GC_HIGH_THRESHOLD)
        except (ValueError, TypeError):
            pass
    return disk


def api_endpoints(kube: Kube) -> list[tuple[str, int]]:
    """The API server addresses the cluster publishes: every ready endpoint of the
    EndpointSlices of Service ``default/kubernetes`` with its ``https`` port (what the
    toolkit's certificate check dials; Harvester V1 read the Endpoints object)."""
    try:
        slices = kube.list(*c.ENDPOINT_SLICE, namespace="default",
                           label_selector=f"{c.LABEL_SERVICE_NAME}=kubernetes")
    except NotServed:
        slices = []
    out: list[tuple[str, int]] = []
    for sl in slices:
        ports = [int(p["port"]) for p in sl.get("ports") or []
                 if p.get("port") and p.get("name", "https") == "https"] or [6443]
        for ep in sl.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready") is False:
                continue
            for addr in ep.get("addresses") or []:
                for port in ports:
                    if (addr, port) not in out:
                        out.append((addr, port))
    return out


def cert_not_after(host: str, port: int) -> Any:
    """NotAfter of the earliest-expiring certificate the endpoint presents, or the error."""
    import datetime as _dt
    import socket
    import ssl

    from cryptography import x509

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=5) as sock, \
                ctx.wrap_socket(sock, server_hostname=host) as tls:
            der = tls.getpeercert(binary_form=True)
        cert = x509.load_der_x509_certificate(der)
        return getattr(cert, "not_valid_after_utc", None) or \
            cert.not_valid_after.replace(tzinfo=_dt.timezone.utc)
    except (OSError, ValueError) as exc:
        return str(exc)


def api_cert_expiry(kube: Kube) -> dict[str, Any]:
    """NotAfter of the API server certificate at every address the cluster publishes
    (:func:`api_endpoints`), not at the kubeconfig's host: that may be a load balancer, a
    virtual IP or Rancher's proxy with a certificate of its own. A cluster publishing none
    (not a real one) falls back to the kubeconfig's host."""
    from urllib.parse import urlparse

    endpoints = api_endpoints(kube)
    if not endpoints:
        url = urlparse(kube.host)
        if url.scheme != "https" or not url.hostname:
            return {}
        endpoints = [(url.hostname, url.port or 443)]
    try:
        import cryptography  # noqa: F401
    except ImportError:   # unread is unchecked: the check fails, saying why
        return {(f"[{h}]:{p}" if ":" in h else f"{h}:{p}"):
                "the Python package cryptography (needed to read certificates) is not "
                "installed" for h, p in endpoints}
    out: dict[str, Any] = {}
    for host, port in endpoints:
        label = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        out[label] = cert_not_after(host, port)
    return out


def initialize_fields(kube: Kube, plan: dict[str, Any]) -> dict[str, Any]:
    """Status fields Initialize records: ``version``, ``previousVersion``, ``singleNode``."""
    spec = plan.get("spec") or {}
    fields: dict[str, Any] = {}
    if not spec.get("image") and spec.get("version"):
        version = get_version(kube, spec["version"])
        if version is not None:
            vs = version.get("spec") or {}
            fields["version"] = {k: vs[k] for k in VERSION_KEYS if vs.get(k)}
    current = server_version(kube)
    if current:
        fields["previousVersion"] = current
    nodes = managed_nodes(kube)
    fields["singleNode"] = nodes[0]["metadata"]["name"] if len(nodes) == 1 else None
    return fields


# ----------------------------------------------------------------------------- ISODownload

def iso_ref(ctx: Context) -> tuple[str, str, str]:
    """``(namespace, name, isoImageID)`` of the ISO image this plan uses."""
    image = (ctx.plan.get("spec") or {}).get("image")
    if image:
        ns, name = split_image_ref(image)
        return ns, name, image
    name = f"{ctx.name}-iso"
    return c.UPGRADE_NS, name, name


def iso_download(ctx: Context) -> Step:
    ns, name, image_id = iso_ref(ctx)
    if not (ctx.plan.get("spec") or {}).get("image"):
        snap = ctx.status.get("version") or {}
        if not snap.get("isoURL"):
            version = get_version(ctx.kube, (ctx.plan.get("spec") or {}).get("version", ""))
            snap = (version or {}).get("spec") or {}
        if not snap.get("isoURL"):
            return Step("failed", "ISO image download failed: the Version has no isoURL")
        unverified = preflight_checks.iso_unverified(
            (ctx.plan.get("spec") or {}).get("version"), {"spec": snap})
        if unverified and not preflight_checks.annotation_true(ctx.writer.annotations,
                                                               c.ANN_ALLOW_UNVERIFIED_ISO):
            return Step("failed", f"ISO image download refused: {unverified} (annotation "
                        f"{c.ANN_ALLOW_UNVERIFIED_ISO[0]}: \"true\" allows it)")
        ctx.ensure(manifests.iso_image(ctx.plan, snap["isoURL"], snap.get("isoChecksum", "")))
    if ctx.status.get("isoImageID") != image_id:
        ctx.writer.set_fields({"isoImageID": image_id})
    if ctx.check_mode:
        return Step("done", f"would wait for VirtualMachineImage {ns}/{name} to be Imported")

    def imported(snapshot: Snapshot) -> Verdict:
        img = only(snapshot, "image")
        if img is None:
            return Verdict(progress=f"VirtualMachineImage {ns}/{name} not found")
        cond = plan_status.find_condition(img.get("status") or {}, "Imported") or {}
        if cond.get("status") == "True":
            return Verdict(done=True)
        st = img.get("status") or {}
        if cond.get("status") == "False":
            why = ": ".join(x for x in (cond.get("reason"), cond.get("message")) if x)
            return Verdict(failed="ISO image download failed" + (f": {why}" if why else ""))
        pct, size = int(st.get("progress") or 0), int(st.get("size") or 0)
        got = f" ({_size(size * pct / 100)} of {_size(size)})" if size else ""
        return Verdict(progress=f"ISO download {pct}%{got}")

    verdict = ctx.wait([Source.named(*c.VM_IMAGE, name, ns, key="image")], imported,
                       f"VirtualMachineImage {ns}/{name} to be Imported")
    if verdict.failed:
        return Step("failed", verdict.failed)
    return Step("done", f"VirtualMachineImage {ns}/{name} imported",
                {"iso_image_id": image_id})


def verify_iso(ctx: Context) -> str:
    ns, name, _image = iso_ref(ctx)
    img = ctx.kube.get(*c.VM_IMAGE, name, ns)
    if img is None:
        return f"warning: VirtualMachineImage {ns}/{name} is gone"
    ok = plan_status.condition_true(img.get("status"), "Imported")
    return f"VirtualMachineImage {ns}/{name} {'Imported' if ok else 'not Imported'}"


# ----------------------------------------------------------------------------- RepoCreate

def _ensure_repo(ctx: Context) -> None:
    _ns, iso_name, _image = iso_ref(ctx)
    nodes = managed_nodes(ctx.kube)
    workers = [n for n in nodes if not preflight_checks.is_witness(n)]
    replicas = 1 if len(workers) <= 1 else 2
    ctx.ensure(manifests.repo_deployment(ctx.plan, iso_name, replicas))
    ctx.ensure(manifests.repo_service(ctx.plan))


def repo_create(ctx: Context) -> Step:
    _ensure_repo(ctx)
    name = f"{ctx.name}-repo"
    if ctx.check_mode:
        return Step("done", f"would wait for Deployment and Service {name} to serve the ISO")

    def ready(snapshot: Snapshot) -> Verdict:
        dep, svc = only(snapshot, "deployment"), only(snapshot, "service")
        if dep is None or int((dep.get("status") or {}).get("availableReplicas") or 0) < 1:
            return Verdict(progress="upgrade-repo deployment not ready")
        if svc is None or not (svc.get("spec") or {}).get("clusterIP"):
            return Verdict(progress="upgrade-repo svc/ep not ready")
        return Verdict(done=True)

    ctx.wait([Source.named(*c.DEPLOYMENT, name, c.UPGRADE_NS, key="deployment"),
              Source.named(*c.SERVICE, name, c.UPGRADE_NS, key="service")], ready,
             f"Deployment {c.UPGRADE_NS}/{name} to be available")
    status, _body = fetch_repo_file(ctx, c.RELEASE_FILE, f"the upgrade repository {name} to answer")
    if status != 200:
        return Step("failed", f"upgrade repository answered HTTP {status} for "
                    f"{c.RELEASE_FILE}; is {ctx.status.get('isoImageID')} a Harvester ISO?")
    return Step("done", f"upgrade repository {name} serves the ISO")


def verify_repo(ctx: Context) -> str:
    before = len(ctx.actions)
    _ensure_repo(ctx)
    return "upgrade repository re-created" if len(ctx.actions) > before else \
        "upgrade repository present"


# ----------------------------------------------------------------------------- MetadataPopulate

def metadata_populate(ctx: Context) -> Step:
    import yaml

    if ctx.check_mode:
        ctx.did(f"read {c.RELEASE_FILE} into status.releaseMetadata")
        return Step("done")
    status, body = fetch_repo_file(ctx, c.RELEASE_FILE, f"{c.RELEASE_FILE} from the repository")
    if status != 200:
        raise ApiError(status, "RepoError",
                       f"GET {c.RELEASE_FILE} from the upgrade repository: HTTP {status}")
    try:
        data = yaml.safe_load(body) or {}
    except yaml.YAMLError as exc:
        raise ApiError(0, "BadMetadata", f"{c.RELEASE_FILE} is not YAML: {exc}") from exc
    meta = {k: str(data[k]) for k in RELEASE_KEYS if data.get(k) not in (None, "")}
    if "harvester" not in meta:
        raise ApiError(0, "BadMetadata", f"{c.RELEASE_FILE} has no 'harvester' key")
    ctx.writer.set_fields({"releaseMetadata": meta})
    return Step("done", f"release {meta['harvester']} (kubernetes {meta.get('kubernetes')}, "
                f"OS {meta.get('os')})", {"release_metadata": meta})


def verify_metadata(ctx: Context) -> str:
    meta = ctx.status.get("releaseMetadata") or {}
    return f"release {meta.get('harvester')}" if meta else "warning: releaseMetadata missing"


# ----------------------------------------------------------------------------- ImagePreload

def eligibility_error(ctx: Context) -> str | None:
    """The toolkit's eligibility check (§E.3). ``spec.force``, the phase's ``force`` and the
    toolkit's skip-version-check annotation lift its rules except two: a downgrade and a
    target whose minUpgradableVersion is above the running release need the switch recorded
    on the plan for each (upgrade_allow_downgrade, upgrade_allow_version_skip)."""
    spec = ctx.plan.get("spec") or {}
    ann = ctx.writer.annotations
    force = bool(spec.get("force") or ctx.params.get("force")
                 or preflight_checks.annotation_true(ann, c.ANN_SKIP_VERSION_CHECK))
    meta = ctx.status.get("releaseMetadata") or {}
    current, target = ctx.status.get("previousVersion") or "", meta.get("harvester") or ""
    if not current or not target:
        return None
    refused = versions.refusal(
        current, target, meta.get("minUpgradableVersion") or "", force=force,
        allow_downgrade=preflight_checks.annotation_true(ann, c.ANN_ALLOW_DOWNGRADE),
        allow_version_skip=preflight_checks.annotation_true(ann, c.ANN_ALLOW_VERSION_SKIP))
    if refused is None:
        return None
    why, rule = refused
    return (f"upgrade eligibility check failed: {why} (annotation "
            f"{_SWITCH_ANNOTATIONS[rule]}: \"true\" on the plan, "
            f"{versions.SWITCHES[rule]}=true for a new one, allows it)")


_SWITCH_ANNOTATIONS = {versions.DOWNGRADE: c.ANN_ALLOW_DOWNGRADE[0],
                       versions.VERSION_SKIP: c.ANN_ALLOW_VERSION_SKIP[0],
                       versions.OTHER: "spec.force / " + c.ANN_SKIP_VERSION_CHECK[0]}


def _suc_wait(ctx: Context, component: str, states: tuple[str, str, str], total: int,
              fail_msg: str, verb: str) -> Step:
    name = f"{ctx.name}-{component}"
    running, ok, failed = states

    def complete(snapshot: Snapshot) -> Verdict:
        per_node = _job_states(snapshot.get("jobs", {}), running, ok, failed)
        if per_node and not ctx.check_mode:
            ctx.writer.set_node_states(per_node)
        plan = only(snapshot, "plan")
        cond = plan_status.find_condition((plan or {}).get("status") or {}, "Complete") or {}
        if cond.get("status") == "True":
            return Verdict(done=True)
        if cond.get("status") == "False" and cond.get("reason") == "JobFailed":
            return Verdict(failed=f"{fail_msg}: {cond.get('message') or 'JobFailed'}")
        done = sum(1 for v in per_node.values() if v == ok)
        return Verdict(progress=f"nodes {verb} {done}/{total}")

    verdict = ctx.wait([Source.named(*c.SUC_PLAN, name, c.SUC_NS, key="plan"),
                        Source(*c.JOB, c.SUC_NS, selector({c.LABEL_SUC_PLAN: name}),
                               key="jobs")],
                       complete, f"SUC Plan {c.SUC_NS}/{name} to complete")
    if verdict.failed:
        return Step("failed", verdict.failed)
    return Step("done")


def image_preload(ctx: Context) -> Step:
    err = eligibility_error(ctx)
    if err:
        return Step("failed", err)
    nodes = [n["metadata"]["name"] for n in managed_nodes(ctx.kube)]
    conc = (((ctx.plan.get("spec") or {}).get("imagePreloadOption") or {}).get("concurrency"))
    if conc is not None and int(conc) < 0:
        if not ctx.check_mode:
            ctx.writer.set_node_states({n: "ImagePreloaded" for n in nodes})
        return Step("done", "image preload skipped (concurrency < 0)")
    conc = len(nodes) if not conc else min(int(conc), len(nodes))
    deadline = int(ctx.params.get("job_deadline_seconds") or 0)
    ctx.ensure(manifests.suc_plan(ctx.plan, c.COMPONENT_IMAGE_PRELOAD, ["prepare"],
                                  max(1, conc), deadline_seconds=deadline))
    if ctx.check_mode:
        return Step("done", f"would preload images on {len(nodes)} nodes, {conc} at a time")
    waited = _suc_wait(ctx, c.COMPONENT_IMAGE_PRELOAD,
                       ("ImagePreloading", "ImagePreloaded", "ImagePreloadFailed"), len(nodes),
                       "image-preload plan job(s) failed", "preloaded")
    if waited.state == "failed":
        return waited
    ctx.writer.set_node_states({n: "ImagePreloaded" for n in nodes})
    return Step("done", f"images preloaded on {len(nodes)} nodes")


def verify_suc(component: str) -> Any:
    def verify(ctx: Context) -> str:
        name = f"{ctx.name}-{component}"
        plan = ctx.kube.get(*c.SUC_PLAN, name, c.SUC_NS)
        if plan is None:
            return f"SUC Plan {name} not present"
        ok = plan_status.condition_true(plan.get("status"), "Complete")
        return f"SUC Plan {name} {'Complete' if ok else 'not Complete'}"
    return verify


# ----------------------------------------------------------------------------- ClusterUpgrade

def cluster_upgrade(ctx: Context) -> Step:
    """Job ``<plan>-cluster-upgrade`` (``upgrade_manifests.sh``). The Rancher cluster is not
    touched here: its kubernetesVersion, provisionGeneration and upgradeStrategy are written
    together when NodeUpgrade begins (node_phase.start_rancher_upgrade)."""
    sa = ctx.kube.get(*c.SERVICE_ACCOUNT, "harvester", c.UPGRADE_NS)
    ctx.ensure(manifests.cluster_upgrade_job(ctx.plan, "harvester" if sa else None))
    name = f"{ctx.name}-cluster-upgrade"
    if ctx.check_mode:
        return Step("done", f"would wait for Job {name} to complete")

    def finished(snapshot: Snapshot) -> Verdict:
        job = only(snapshot, "job")
        setting = only(snapshot, "setting") or {}
        running = f"Harvester server-version {setting.get('value') or '?'}"
        if job is None:
            return Verdict(progress=f"Job {name} not found; {running}")
        done = manifests.job_condition(job)
        if done and done[0] == "Complete":
            return Verdict(done=True)
        if done:
            why = ": ".join(x for x in done[1:] if x)
            return Verdict(failed="cluster-upgrade job failed" + (f": {why}" if why else ""))
        active = int((job.get("status") or {}).get("active") or 0)
        failures = int((job.get("status") or {}).get("failed") or 0)
        return Verdict(progress=f"job {'running' if active else 'pending'}"
                       + (f" ({failures} failed pods)" if failures else "") + f"; {running}")

    verdict = ctx.wait([Source.named(*c.JOB, name, c.UPGRADE_NS, key="job"),
                        Source.named(*c.SETTING, c.SERVER_VERSION_SETTING, key="setting")],
                       finished, f"Job {c.UPGRADE_NS}/{name} to complete")
    if verdict.failed:
        return Step("failed", verdict.failed)
    return Step("done", f"cluster upgraded to {server_version(ctx.kube)}")


def verify_cluster(ctx: Context) -> str:
    job = ctx.kube.get(*c.JOB, f"{ctx.name}-cluster-upgrade", c.UPGRADE_NS)
    if job is None:
        return "cluster-upgrade Job already cleaned up"
    done = manifests.job_condition(job)
    return f"cluster-upgrade Job {done[0] if done else 'unfinished'}"


# ----------------------------------------------------------------------------- ImageCleanup

def _image_repo_name(image: str) -> str:
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def images_to_purge(previous: list[str], current: list[str]) -> list[str]:
    """Images of the previous release that the new one no longer lists, minus the retained
    ones (toolkit list)."""
    keep = set(current)
    return sorted({i for i in previous if i and i not in keep
                   and not any(r in _image_repo_name(i) for r in c.RETAINED_IMAGE_NAMES)})


def _norm_image(ref: str) -> str:
    """``docker.io/library/nginx:1`` == ``nginx:1``; no tag means ``:latest``."""
    r = ref.strip()
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if r.startswith(prefix):
            r = r[len(prefix):]
            break
    if r.startswith("library/"):
        r = r[len("library/"):]
    name = r.split("@", 1)[0]
    if ":" not in name.rsplit("/", 1)[-1] and "@" not in r:
        r += ":latest"
    return r


def images_in_use(kube: Any, nodes: list[str]) -> set[str]:
    """Images of the containers of every pod on the managed nodes that is not finished.
    ``crictl rmi`` on containerd removes an image even while a container runs from it (the
    container then cannot restart without a pull), so the cleanup list leaves them out; one
    list serves every node, hence the union over the nodes."""
    wanted = set(nodes)
    used: set[str] = set()
    for pod in kube.list(*c.POD):
        spec = pod.get("spec") or {}
        if spec.get("nodeName") not in wanted or \
                (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for ctr in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            if ctr.get("image"):
                used.add(_norm_image(str(ctr["image"])))
        for cs in ((pod.get("status") or {}).get("containerStatuses") or []):
            if cs.get("image"):
                used.add(_norm_image(str(cs["image"])))
    return used


def _image_list(ctx: Context, version: str) -> list[str] | None:
    path = f"bundle/harvester/images-lists-archive/{version}/image_list_all.txt"
    status, body = fetch_repo_file(ctx, path, f"image list of {version}")
    if status == 404:
        return None
    if status != 200:
        raise ApiError(status, "RepoError", f"GET {path}: HTTP {status}")
    return [ln.strip() for ln in body.decode(errors="replace").splitlines()
            if ln.strip() and not ln.startswith("#")]


def image_cleanup(ctx: Context) -> Step:
    nodes = [n["metadata"]["name"] for n in managed_nodes(ctx.kube)]
    previous = ctx.status.get("previousVersion") or ""
    current = (ctx.status.get("releaseMetadata") or {}).get("harvester") or ""
    if ctx.check_mode:
        ctx.did(f"remove images of {previous} not used by {current} (SUC Plan "
                f"{ctx.name}-{c.COMPONENT_IMAGE_CLEANUP})")
        return Step("done")
    old, new = _image_list(ctx, previous), _image_list(ctx, current)
    if old is None or new is None:
        ctx.writer.recorder.emit(plan_status.EventSpec(
            "Warning", c.REASON_IMAGE_CLEANUP_SKIPPED,
            "Image list not available in upgrade repository; skipping stale image cleanup",
            c.UPGRADE_NS))
        ctx.writer.set_node_states({n: "ImageCleaned" for n in nodes})
        return Step("done", "image lists not in the ISO; cleanup skipped")
    in_use = images_in_use(ctx.kube, nodes)
    purge = [i for i in images_to_purge(old, new) if _norm_image(i) not in in_use]
    if not purge:
        ctx.writer.set_node_states({n: "ImageCleaned" for n in nodes})
        return Step("done", "no stale images to remove")
    ctx.ensure(manifests.image_cleanup_plan(ctx.plan, purge))
    waited = _suc_wait(ctx, c.COMPONENT_IMAGE_CLEANUP, ("ImageCleaning", "ImageCleaned",
                                                        "ImageCleanFailed"), len(nodes),
                       "image-cleanup plan job(s) failed", "cleaned")
    if waited.state == "failed":
        return waited
    ctx.writer.set_node_states({n: "ImageCleaned" for n in nodes})
    return Step("done", f"{len(purge)} stale images removed from {len(nodes)} nodes",
                {"images_removed": len(purge)})


# ----------------------------------------------------------------------------- Finalize

CLEANUP_TARGETS: tuple[tuple[tuple[str, str], str, str], ...] = (
    (c.VM_IMAGE, c.UPGRADE_NS, c.COMPONENT_ISO),
    (c.DEPLOYMENT, c.UPGRADE_NS, c.COMPONENT_REPO),
    (c.SERVICE, c.UPGRADE_NS, c.COMPONENT_REPO),
    (c.SUC_PLAN, c.SUC_NS, c.COMPONENT_IMAGE_PRELOAD),
    (c.SUC_PLAN, c.SUC_NS, c.COMPONENT_IMAGE_CLEANUP),
    (c.JOB, c.UPGRADE_NS, c.COMPONENT_CLUSTER_UPGRADE),
    (c.JOB, c.UPGRADE_NS, c.COMPONENT_NODE_UPGRADE),
)


def cleanup_resources(kube: Kube, writer: PlanWriter, check_mode: bool) -> list[str]:
    """The toolkit's ``CleanupUpgradeResources`` (reference §F.3); idempotent."""
    done: list[str] = []
    prefix = "would " if check_mode else ""
    for (api_version, kind), ns, component in CLEANUP_TARGETS:
        sel = selector({c.LABEL_PLAN: writer.name, c.LABEL_COMPONENT: component})
        try:
            items = kube.list(api_version, kind, namespace=ns, label_selector=sel)
        except NotServed:
            continue
        for item in items:
            name = item["metadata"]["name"]
            done.append(f"{prefix}delete {kind} {ns}/{name}")
            if not check_mode:
                kube.delete(api_version, kind, name, ns)
    for node in kube.list(*c.NODE):
        if c.ANN_PENDING_OS_IMAGE in ((node.get("metadata") or {}).get("annotations") or {}):
            done.append(f"{prefix}remove {c.ANN_PENDING_OS_IMAGE} from node "
                        f"{node['metadata']['name']}")
            if not check_mode:
                kube.patch(*c.NODE, node["metadata"]["name"],
                           {"metadata": {"annotations": {c.ANN_PENDING_OS_IMAGE: None}}})
    status = writer.status
    if status.get("provisionGeneration") is not None:
        cluster = kube.get(*c.RANCHER_CLUSTER, c.RANCHER_CLUSTER_NAME, c.FLEET_NS)
        if cluster and ((cluster.get("spec") or {}).get("rkeConfig") or {}).get(
                "upgradeStrategy"):
            done.append(f"{prefix}reset Rancher upgradeStrategy")
            if not check_mode:
                kube.patch(*c.RANCHER_CLUSTER, c.RANCHER_CLUSTER_NAME,
                           {"spec": {"rkeConfig": {"upgradeStrategy": None}}},
                           namespace=c.FLEET_NS)
    done += node_settings.restore(kube, writer, check_mode)
    return done
