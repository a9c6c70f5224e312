"""Initialize: the facts the pre-flight checks read (:func:`gather_facts`, read-only: the
kubelet's disk stats, the API server certificates, every object the checks look at) and the
status fields the phase records (:func:`initialize_fields`). The checks are
:mod:`preflight_checks`.
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    preflight_checks,
    preflight_controller,
    preflight_result,
    versions,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
    NotServed,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.phase_common import (
    get_version,
    list_versions,
    managed,
    server_version,
    split_image_ref,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    list_plans,
)

VERSION_KEYS = ("isoURL", "isoChecksum", "releaseDate", "tags")


def gather_facts(kube: Kube, plan: dict[str, Any] | None, params: dict[str, Any],
                 seen: dict[str, Any] | None = None) -> preflight_checks.Facts:
    """Read everything the pre-flight checks need (read-only). ``seen``: what
    :func:`initialize_fields` read moments ago in this module (not read again)."""
    import concurrent.futures

    seen = seen or {}

    spec = (plan or {}).get("spec") or {}
    meta = (plan or {}).get("metadata") or {}
    f = preflight_checks.Facts()
    f.plan_name = meta.get("name")
    f.plan_annotations = dict(meta.get("annotations") or {})
    f.plan_annotations.update(params.get("annotations") or {})
    f.plans = list_plans(kube)
    f.current_version = seen["current_version"] if "current_version" in seen else \
        server_version(kube)
    f.image = spec.get("image") or params.get("image")
    f.version_name = spec.get("version") or params.get("version")
    if not f.version_name and not f.image and f.current_version:
        f.version_name = versions.newest_target(
            [v["metadata"]["name"] for v in list_versions(kube)], f.current_version)
    if f.version_name:
        f.version_obj = seen["version"] if seen.get("version_name") == f.version_name \
            else get_version(kube, f.version_name)
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
        setattr(f, attr, preflight_result.annotation_true(recorded, ann)
                or (plan is None and bool(params.get(attr))))
    f.restore_vm = bool(spec.get("restoreVM", params.get("restore_vm")))
    f.pause_nodes = list((spec.get("nodeUpgradeOption") or {}).get("pauseNodes")
                         or params.get("pause_nodes") or [])
    f.nodes = seen["nodes"] if "nodes" in seen else kube.list(*c.NODE)
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
            preflight_result.annotation_true(f.plan_annotations, c.ANN_SKIP_GC_THRESHOLD):
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


def node_disk(kube: Kube, node: str) -> preflight_controller.NodeDisk | str:
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
        disk = preflight_controller.NodeDisk(int(fs.get("usedBytes") or 0),
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

    # nothing is verified (only the expiry is read), so no trust store is loaded
    # (create_default_context() reads the system's whole CA bundle)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
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


def initialize_fields(kube: Kube, plan: dict[str, Any], seen: dict[str, Any] | None = None
                      ) -> dict[str, Any]:
    """Status fields Initialize records: ``version``, ``previousVersion``, ``singleNode``.
    ``seen`` (a dict) receives what was read, for :func:`gather_facts` right after."""
    seen = {} if seen is None else seen
    spec = plan.get("spec") or {}
    fields: dict[str, Any] = {}
    if not spec.get("image") and spec.get("version"):
        version = get_version(kube, spec["version"])
        seen.update(version_name=spec["version"], version=version)
        if version is not None:
            vs = version.get("spec") or {}
            fields["version"] = {k: vs[k] for k in VERSION_KEYS if vs.get(k)}
    current = seen["current_version"] = server_version(kube)
    if current:
        fields["previousVersion"] = current
    # every node (the facts want them all), of which the managed ones count here
    seen["nodes"] = kube.list(*c.NODE)
    nodes = managed(seen["nodes"])
    fields["singleNode"] = nodes[0]["metadata"]["name"] if len(nodes) == 1 else None
    return fields
