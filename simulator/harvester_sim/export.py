"""``harvester-sim export``: a scenario file from a live Harvester cluster, read read-only.

``harvester-sim export --output FILE [--kubeconfig PATH] [--context NAME] [--name NAME]``
reads the cluster through a kubeconfig (default: ``$KUBECONFIG``, else ``~/.kube/config``)
with the ``kubernetes`` client and writes a scenario (``scenarios/schema.json``) that
``harvester-sim serve --scenario FILE`` and ``make upgrade SCENARIO=FILE`` take.

Only ``get`` and ``list`` requests are made (user agent ``harvester-sim-export``), and never on
Secrets. What is read and how it maps onto the scenario is in ``docs/rehearsal.md``; what the
format cannot carry is written into the scenario's ``notes``. Nothing is written when the
cluster cannot be read (bad kubeconfig, unreachable, credentials refused, an API the export
needs not served): :class:`ExportError` names the cause, and the CLI exits 2.

Values never exported: Secret data (Secrets are not even listed), the kubeconfig's server,
credentials and certificates, VM annotations and cloud-init (user data may hold passwords,
``last-applied-configuration`` the whole spec), Addon ``valuesContent``, Harvester and
Longhorn settings outside :data:`HARVESTER_SETTINGS` / :data:`LONGHORN_SETTINGS`
(``ssl-certificates`` holds a private key, ``http-proxy`` may hold a password).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import yaml

from .clock import Clock
from .scenarios import loader, objects

Obj = dict[str, Any]

USER_AGENT = "harvester-sim-export/0.1.0"
TIMEOUT_S = 30.0

# Harvester settings that bear on an upgrade and hold no credential.
HARVESTER_SETTINGS = (
    "upgrade-config", "log-level", "vm-force-reset-policy", "overcommit-config",
    "default-vm-termination-grace-period-seconds", "additional-guest-memory-overhead-ratio",
    "auto-rotate-rke2-certs", "release-download-url", "upgrade-checker-enabled",
    "upgrade-checker-url", "harvester-csi-ccm-versions", "kubevirt-migration",
    "max-hotplug-ratio", "vm-migration-network", "storage-network",
)
# Longhorn settings that change how volumes behave while nodes drain and reboot.
LONGHORN_SETTINGS = (
    "replica-replenishment-wait-interval", "node-drain-policy",
    "auto-cleanup-system-generated-snapshot", "default-replica-count",
    "concurrent-replica-rebuild-per-node-limit", "storage-over-provisioning-percentage",
    "storage-minimal-available-percentage", "auto-delete-pod-when-volume-detached-unexpectedly",
    "replica-soft-anti-affinity", "replica-zone-soft-anti-affinity",
    "replica-auto-balance", "node-down-pod-deletion-policy",
    "detach-manually-attached-volumes-when-cordoned", "stale-replica-timeout",
    "disable-revision-counter", "offline-replica-rebuilding",
)

# Namespaces whose Deployments and PDBs belong to Harvester itself (the simulator runs its own).
SYSTEM_NAMESPACES = (frozenset(loader.BASE_NAMESPACES) | {"local"}) - {"default"}
SYSTEM_PREFIXES = ("cattle-", "fleet-", "kube-", "longhorn-")

# (group/version, resource, why): what the export cannot do without.
REQUIRED = (
    ("v1", "nodes", "nodes and their roles"),
    ("v1", "persistentvolumeclaims", "VM volumes"),
    ("v1", "persistentvolumes", "VM volumes"),
    ("apps/v1", "deployments", "workloads"),
    ("policy/v1", "poddisruptionbudgets", "PodDisruptionBudgets"),
    ("harvesterhci.io/v1beta1", "settings", "the installed Harvester version (server-version)"),
    ("harvesterhci.io/v1beta1", "versions", "the available Harvester versions"),
    ("kubevirt.io/v1", "virtualmachines", "VMs"),
    ("kubevirt.io/v1", "virtualmachineinstances", "where VMs run"),
    ("longhorn.io/v1beta2", "volumes", "Longhorn volumes"),
    ("longhorn.io/v1beta2", "replicas", "Longhorn replica placement"),
)

_STD_RESOURCES = {"cpu", "memory", "pods", "ephemeral-storage"}
_ROLE_LABELS = {"control-plane": ("node-role.kubernetes.io/control-plane",
                                  "node-role.kubernetes.io/master"),
                "etcd": ("node-role.kubernetes.io/etcd",),
                "worker": ("node-role.kubernetes.io/worker",)}
_MACHINE_ROLE = {"control-plane": "rke.cattle.io/control-plane-role",
                 "etcd": "rke.cattle.io/etcd-role", "worker": "rke.cattle.io/worker-role"}
_TRANSIENT_TAINTS = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
_KEPT_ANNOTATION = re.compile(r"^([a-z0-9.-]+\.)?harvesterhci\.io/")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_VERSION = re.compile(r"^v[0-9]+\.[0-9]+\.[0-9]+(-[A-Za-z0-9.]+)?$")
_RKE2 = re.compile(r"^v[0-9]+\.[0-9]+\.[0-9]+\+rke2r[0-9]+$")


class ExportError(Exception):
    """The cluster cannot be exported; the message says why, in one line."""


# ================================================================================ reading
class Reader:
    """GET-only access to the cluster's REST API through a kubeconfig."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        try:
            from kubernetes import client, config
            from kubernetes.config.config_exception import ConfigException
        except ImportError:
            raise ExportError("the export needs the kubernetes Python client "
                              "(pip install 'harvester-sim[export]' or kubernetes)") from None

        path = kubeconfig or os.environ.get("KUBECONFIG") or \
            str(Path("~/.kube/config").expanduser())
        files = [p for p in path.split(os.pathsep) if p]
        missing = [p for p in files if not Path(p).expanduser().is_file()]
        if not files or missing:
            raise ExportError(f"kubeconfig {', '.join(missing) or path!r}: no such file")
        cfg = client.Configuration()
        try:
            config.load_kube_config(config_file=path, context=context,
                                    client_configuration=cfg, persist_config=False)
        except ConfigException as exc:
            raise ExportError(f"kubeconfig {path}: {exc}") from None
        except (yaml.YAMLError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ExportError(f"kubeconfig {path}: not a valid kubeconfig "
                              f"({type(exc).__name__}: {exc})") from None
        cfg.retries = 0  # one clear error, not a minute of retries
        self.server = cfg.host
        self.context = context or _current_context(files[0])
        self.api = client.ApiClient(cfg)
        self.api.user_agent = USER_AGENT
        self.requests: list[tuple[str, str]] = []
        self._served: dict[str, set[str]] = {}

    def close(self) -> None:
        self.api.close()

    def get(self, path: str, query: dict[str, str] | None = None,
            missing_ok: bool = False) -> Obj | None:
        """GET ``path`` as JSON; None for a 404 when ``missing_ok``."""
        from kubernetes.client.exceptions import ApiException

        qs = f"?{urlencode(query)}" if query else ""
        self.requests.append(("GET", path + qs))
        try:
            method, url, headers, _body, _post = self.api.param_serialize(
                "GET", path + qs, header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"])
            resp = self.api.call_api(method, url, headers, _request_timeout=TIMEOUT_S)
            data = resp.read()
            status = resp.status
        except ApiException as exc:
            raise ExportError(f"cannot reach the API server {self.server} "
                              f"(context {self.context}): {_reason(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - urllib3/ssl/socket errors of every kind
            raise ExportError(f"cannot reach the API server {self.server} "
                              f"(context {self.context}): {_reason(exc)}") from None
        if status == 404 and missing_ok:
            return None
        if status in (401, 403):
            raise ExportError(f"the API server {self.server} refused GET {path} "
                              f"({status} {_message(data)}); the export needs get/list "
                              "on the resources listed in docs/rehearsal.md")
        if status >= 400:
            raise ExportError(f"GET {path}: {status} {_message(data)}")
        try:
            out = json.loads(data)
        except ValueError:
            raise ExportError(f"GET {path}: the answer is not JSON") from None
        if not isinstance(out, dict):
            raise ExportError(f"GET {path}: the answer is not a JSON object")
        return out

    def list(self, gv: str, resource: str, namespace: str | None = None,
             selector: str | None = None) -> list[Obj]:
        base = "/api/v1" if gv == "v1" else f"/apis/{gv}"
        path = f"{base}/namespaces/{quote(namespace)}/{resource}" if namespace else \
            f"{base}/{resource}"
        items: list[Obj] = []
        cont = ""
        while True:
            q = {"limit": "500"}
            if cont:
                q["continue"] = cont
            if selector:
                q["labelSelector"] = selector
            page = self.get(path, q) or {}
            items.extend(page.get("items") or [])
            cont = str((page.get("metadata") or {}).get("continue") or "")
            if not cont:
                return items

    def served(self, gv: str) -> set[str]:
        """Resources the server serves in ``gv`` (empty when the group version is not)."""
        if gv not in self._served:
            doc = self.get("/api/v1" if gv == "v1" else f"/apis/{gv}", missing_ok=True)
            self._served[gv] = {str(r.get("name")) for r in (doc or {}).get("resources") or []}
        return self._served[gv]


def _current_context(path: str) -> str:
    try:
        data = yaml.safe_load(Path(path).expanduser().read_text()) or {}
    except (OSError, yaml.YAMLError):
        return "?"
    return str(data.get("current-context") or "?") if isinstance(data, dict) else "?"


def _reason(exc: BaseException) -> str:
    """The innermost cause of a connection failure, in a few words."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    last = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        last = cur
        nxt = getattr(cur, "reason", None)
        cur = nxt if isinstance(nxt, BaseException) else (cur.__cause__ or cur.__context__)
    text = str(last)
    if "]" in text and text.startswith("<"):
        text = text.split(": ", 1)[-1]
    return (text or type(last).__name__).strip()[:300]


def _message(data: bytes) -> str:
    try:
        return str(json.loads(data).get("message") or "")[:300]
    except (ValueError, AttributeError):
        return data[:200].decode(errors="replace")


# ============================================================================== helpers
def _md(o: Obj) -> Obj:
    return o.get("metadata") or {}


def _labels(o: Obj) -> dict[str, str]:
    return dict(_md(o).get("labels") or {})


def _key(o: Obj) -> tuple[str, str]:
    return str(_md(o).get("namespace") or ""), str(_md(o).get("name") or "")


def _system_ns(ns: str) -> bool:
    return ns in SYSTEM_NAMESPACES or ns.startswith(SYSTEM_PREFIXES)


def qty(value: str | float | int) -> str | int:
    """A quantity in the largest binary unit it is a whole multiple of (``"134217728Ki"`` ->
    ``"128Gi"``); CPU-like plain numbers stay numbers."""
    b = objects.parse_quantity(value)
    if b != int(b):
        return str(value)
    n = int(b)
    if n == 0:
        return "0"
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def _selector_matches(sel: Obj, labels: dict[str, str]) -> bool:
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        key, op, vals = e.get("key", ""), e.get("operator", ""), e.get("values") or []
        ok = {"In": labels.get(key) in vals, "NotIn": labels.get(key) not in vals,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(op, False)
        if not ok:
            return False
    return True


# ============================================================================== export
class Exporter:
    def __init__(self, reader: Reader) -> None:
        self.r = reader
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def check_apis(self) -> dict[str, set[str]]:
        gvs = sorted({gv for gv, _, _ in REQUIRED} |
                     {"cluster.x-k8s.io/v1beta1", "management.cattle.io/v3"})
        served = {gv: self.r.served(gv) for gv in gvs}
        for gv, res, why in REQUIRED:
            if res not in served[gv]:
                what = f"{gv} {res}"
                raise ExportError(f"the cluster does not serve {what} (needed for {why}); "
                                  "is this a Harvester cluster?")
        return served

    # ------------------------------------------------------------------------------
    def run(self, name: str) -> Obj:
        served = self.check_apis()
        r = self.r
        settings = {_md(s).get("name"): s for s in r.list("harvesterhci.io/v1beta1", "settings")}
        installed = str((settings.get("server-version") or {}).get("value") or "")
        if not _VERSION.match(installed):
            raise ExportError(f"Setting server-version is {installed!r}, not a Harvester "
                              "release version (vX.Y.Z); cannot tell which release to simulate")
        nodes = r.list("v1", "nodes")
        if not nodes:
            raise ExportError("the cluster has no nodes")
        machines = {str(_md(m).get("name")): m
                    for m in r.list("cluster.x-k8s.io/v1beta1", "machines", "fleet-local")} \
            if "machines" in served["cluster.x-k8s.io/v1beta1"] else {}
        scn: Obj = {
            "name": name,
            "description": f"Exported by harvester-sim export from context {r.context} on "
                           f"{Clock.wall_now():%Y-%m-%d %H:%M} UTC: "
                           f"{len(nodes)} nodes, Harvester {installed}.",
            "seed": 1,
            "harvester": {"installed": installed,
                          "available": self.versions(installed)},
        }
        self.release_overrides(scn, installed, nodes, served)
        scn["nodes"] = [self.node(n, machines) for n in
                        sorted(nodes, key=lambda n: str(_md(n).get("name")))]
        node_names = {n["name"] for n in scn["nodes"]}
        vols = {str(_md(v).get("name")): v
                for v in r.list("longhorn.io/v1beta2", "volumes", "longhorn-system")}
        reps: dict[str, list[Obj]] = {}
        for rep in r.list("longhorn.io/v1beta2", "replicas", "longhorn-system"):
            vol = str((rep.get("spec") or {}).get("volumeName") or
                      _labels(rep).get("longhornvolume") or "")
            reps.setdefault(vol, []).append(rep)
        used: set[str] = set()
        scn["vms"] = self.vms(vols, reps, used, node_names)
        scn["workloads"] = self.workloads()
        scn["volumes"] = [self.standalone(v, reps.get(n, []), node_names)
                          for n, v in sorted(vols.items()) if n not in used]
        scn["settings"] = self.settings(settings)
        scn["addons"] = self.addons()
        for key in ("vms", "workloads", "volumes", "addons"):
            if not scn[key]:
                del scn[key]
        self.note("Not exported: timings (measure your migration bandwidth and reboot time and "
                  "set timings.migration_bandwidth_mib_s / reboot_s), faults, Secret data, "
                  "VM annotations and cloud-init, Addon valuesContent, settings outside the "
                  "export's list (docs/rehearsal.md).")
        scn["notes"] = list(self.notes)
        return scn

    # ------------------------------------------------------------------------ versions
    def versions(self, installed: str) -> list[Obj]:
        out = []
        for v in sorted(self.r.list("harvesterhci.io/v1beta1", "versions", "harvester-system"),
                        key=lambda v: str(_md(v).get("name"))):
            name = str(_md(v).get("name"))
            spec = v.get("spec") or {}
            if not _VERSION.match(name):
                self.note(f"Version {name}: not a release version (vX.Y.Z); left out.")
                continue
            entry: Obj = {"version": name}
            mu = str(spec.get("minUpgradableVersion") or "")
            if _VERSION.match(mu):
                entry["minUpgradableVersion"] = mu
            if spec.get("releaseDate"):
                entry["releaseDate"] = str(spec["releaseDate"])
            if spec.get("tags"):
                entry["tags"] = [str(t) for t in spec["tags"]]
            out.append(entry)
            if spec.get("isoURL"):
                self.note(f"Version {name}: isoURL {spec['isoURL']} not exported; the "
                          "simulator's release server serves its own ISO of that release.")
        known = _known_versions()
        for v in [installed, *(a["version"] for a in out)]:
            if known and v not in known:
                self.note(f"Harvester {v} is not in the simulator's release catalog; the "
                          "simulator synthesises it from the nearest known release.")
        return out

    def release_overrides(self, scn: Obj, installed: str, nodes: list[Obj],
                          served: dict[str, set[str]]) -> None:
        """``rke2``/``rancher`` when the cluster runs other versions than the catalog's
        release of ``installed``."""
        rel = _catalog_release(installed)
        kubelets = sorted({str(((n.get("status") or {}).get("nodeInfo") or {})
                               .get("kubeletVersion") or "") for n in nodes} - {""},
                          key=_semver)
        if len(kubelets) > 1:
            self.note(f"Nodes run different kubelets ({', '.join(kubelets)}): a rollout was "
                      "unfinished; the scenario starts every node on "
                      f"{kubelets[-1]}.")
        if kubelets and _RKE2.match(kubelets[-1]) and \
                (rel is None or rel.kubernetes != kubelets[-1]):
            scn["rke2"] = kubelets[-1]
        if "settings" in served["management.cattle.io/v3"]:
            rs = self.r.get("/apis/management.cattle.io/v3/settings/server-version",
                            missing_ok=True) or {}
            rv = str(rs.get("value") or "")
            if re.match(r"^v[0-9]+\.[0-9]+\.[0-9]+", rv) and (rel is None or rel.rancher != rv):
                scn["rancher"] = rv

    # ---------------------------------------------------------------------------- nodes
    def node(self, n: Obj, machines: dict[str, Obj]) -> Obj:
        md, spec, status = _md(n), n.get("spec") or {}, n.get("status") or {}
        name = str(md.get("name"))
        labels, ann = _labels(n), dict(md.get("annotations") or {})
        machine_name = str(ann.get("cluster.x-k8s.io/machine") or "")
        machine = machines.get(machine_name)
        if machine is not None:
            ml = _labels(machine)
            roles = [r for r, lab in _MACHINE_ROLE.items() if ml.get(lab) == "true"]
        else:
            roles = [r for r, labs in _ROLE_LABELS.items()
                     if any(labels.get(lab) == "true" for lab in labs)]
        witness = labels.get("node-role.harvesterhci.io/witness") == "true"
        if witness:
            roles = [r for r in roles if r == "etcd"] or ["etcd"]
        out: Obj = {"name": name, "roles": roles or ["worker"]}
        if witness:
            out["witness"] = True
        management = labels.get("node-role.harvesterhci.io/management") == "true" or (
            "node-role.harvesterhci.io/worker" not in labels and "control-plane" in roles)
        if not witness and management != ("control-plane" in roles):
            out["management"] = management
        cap = status.get("capacity") or {}
        if cap.get("cpu"):
            out["cpu"] = int(objects.parse_quantity(cap["cpu"]))
        if cap.get("memory"):
            out["memory"] = qty(cap["memory"])
        if cap.get("pods"):
            out["pods"] = int(objects.parse_quantity(cap["pods"]))
        disk: Obj = {}
        if ann.get(objects.DISK_CAPACITY_ANNOTATION):
            disk["capacity"] = qty(int(ann[objects.DISK_CAPACITY_ANNOTATION]))
        elif cap.get("ephemeral-storage"):
            disk["capacity"] = qty(cap["ephemeral-storage"])
        if ann.get(objects.DISK_USED_ANNOTATION):
            disk["used"] = qty(int(ann[objects.DISK_USED_ANNOTATION]))
        elif disk:
            disk["used"] = "0"
            self.note("Node disk usage is not readable through the API (the kubelet's stats "
                      "need nodes/proxy): disk.used is 0; set it by hand to rehearse a "
                      "nearly-full disk.")
        if disk:
            out["disk"] = disk
        devices = {k: int(objects.parse_quantity(v)) for k, v in cap.items()
                   if k not in _STD_RESOURCES and not k.startswith(("hugepages-",
                                                                     "devices.kubevirt.io/"))}
        if devices:
            out["devices"] = devices
        base = objects.node_labels({"name": name, "roles": out["roles"], "witness": witness,
                                    "management": management, "labels": {}})
        extra = {k: v for k, v in labels.items() if base.get(k) != v and
                 not k.startswith("sim.harvesterhci.io/") and
                 not (k.startswith("node-role.") and v == "true")}
        if extra:
            out["labels"] = dict(sorted(extra.items()))
        kept = {k: str(v) for k, v in ann.items() if _KEPT_ANNOTATION.match(k) and
                not k.startswith("sim.harvesterhci.io/")}
        if kept:
            out["annotations"] = dict(sorted(kept.items()))
        taints = []
        for t in spec.get("taints") or []:
            key = str(t.get("key") or "")
            if key.startswith(_TRANSIENT_TAINTS):
                continue  # the node controller's: cordon, not-ready, ...
            if witness and key == "node-role.kubernetes.io/etcd":
                continue  # the loader adds it to every witness
            taint = {"key": key, "effect": t.get("effect")}
            if t.get("value"):
                taint["value"] = str(t["value"])
            taints.append(taint)
        if taints:
            out["taints"] = taints
        if machine_name and re.match(r"^[a-z0-9][-a-z0-9]*$", machine_name):
            out["machine"] = machine_name
        for a in status.get("addresses") or []:
            if a.get("type") == "InternalIP" and re.match(r"^[0-9]+(\.[0-9]+){3}$",
                                                          str(a.get("address") or "")):
                out["ip"] = a["address"]
                break
        if spec.get("unschedulable"):
            out["unschedulable"] = True
            self.note(f"Node {name} is cordoned (spec.unschedulable); it starts cordoned.")
        return out

    # ------------------------------------------------------------------------------ VMs
    def vms(self, vols: dict[str, Obj], reps: dict[str, list[Obj]], used: set[str],
            node_names: set[str]) -> list[Obj]:
        r = self.r
        vms = r.list("kubevirt.io/v1", "virtualmachines")
        vmis = {_key(v): v for v in r.list("kubevirt.io/v1", "virtualmachineinstances")}
        pvcs = {_key(p): p for p in r.list("v1", "persistentvolumeclaims")}
        pvs = {str(_md(p).get("name")): p for p in r.list("v1", "persistentvolumes")}
        kv = {}
        if "kubevirts" in r.served("kubevirt.io/v1"):
            kv = (r.get("/apis/kubevirt.io/v1/namespaces/harvester-system/kubevirts/kubevirt",
                        missing_ok=True) or {})
        default_eviction = str(((kv.get("spec") or {}).get("configuration") or {})
                               .get("evictionStrategy") or "None")
        out = []
        for vm in sorted(vms, key=_key):
            ns, name = _key(vm)
            if not _DNS_LABEL.match(name) or not _DNS_LABEL.match(ns):
                self.note(f"VM {ns}/{name}: name not a DNS label; left out.")
                continue
            out.append(self.vm(vm, vmis.get((ns, name)), pvcs, pvs, vols, reps, used,
                               node_names, default_eviction))
        return out

    def vm(self, vm: Obj, vmi: Obj | None, pvcs: dict[tuple[str, str], Obj],
           pvs: dict[str, Obj], vols: dict[str, Obj], reps: dict[str, list[Obj]],
           used: set[str], node_names: set[str], default_eviction: str) -> Obj:
        ns, name = _key(vm)
        spec = vm.get("spec") or {}
        tspec = ((spec.get("template") or {}).get("spec") or {})
        domain = tspec.get("domain") or {}
        cpu = domain.get("cpu") or {}
        cores = int(cpu.get("cores") or 1) * int(cpu.get("sockets") or 1) * \
            int(cpu.get("threads") or 1)
        res = domain.get("resources") or {}
        mem = ((domain.get("memory") or {}).get("guest") or (res.get("limits") or {})
               .get("memory") or (res.get("requests") or {}).get("memory") or "4Gi")
        out: Obj = {"name": name, "namespace": ns, "cpu": max(1, cores), "memory": qty(mem)}
        rs = spec.get("runStrategy")
        if rs is None:
            rs = "Always" if spec.get("running") else "Halted"
        out["runStrategy"] = rs
        ev = tspec.get("evictionStrategy")
        if not ev:
            ev = default_eviction
            self.note(f"VM {ns}/{name} has no evictionStrategy; exported with the cluster's "
                      f"({ev}).")
        out["evictionStrategy"] = ev
        placement: Obj = {}
        sel = dict(tspec.get("nodeSelector") or {})
        host = sel.pop("kubernetes.io/hostname", None)
        if host and host in node_names:
            placement["node"] = host
        elif host:
            sel["kubernetes.io/hostname"] = host
        if sel:
            placement["nodeSelector"] = sel
        if tspec.get("affinity"):
            placement["affinity"] = tspec["affinity"]
        running_on = str(((vmi or {}).get("status") or {}).get("nodeName") or "")
        if not running_on and rs != "Halted":
            # a simulated cluster whose VM has not started yet: where it is about to
            running_on = str((_md(vm).get("annotations") or {})
                             .get(objects.INITIAL_NODE_ANNOTATION) or "")
        if running_on in node_names:
            placement["initialNode"] = running_on
        if tspec.get("tolerations"):
            self.note(f"VM {ns}/{name}: tolerations not exported (the scenario format has "
                      "none for VMs).")
        if placement:
            out["placement"] = placement
        devs = domain.get("devices") or {}
        devices = {k: [{"name": str(d.get("name") or ""), "deviceName": str(d["deviceName"])}
                       for d in devs.get(k) or [] if d.get("deviceName")]
                   for k in ("hostDevices", "gpus")}
        devices = {k: v for k, v in devices.items() if v}
        if devices:
            out["devices"] = devices
        disks = {str(d.get("name")): d for d in devs.get("disks") or []}
        volumes = []
        container = []
        for v in tspec.get("volumes") or []:
            disk = disks.get(str(v.get("name"))) or {}
            if v.get("persistentVolumeClaim") or v.get("dataVolume"):
                claim = str((v.get("persistentVolumeClaim") or {}).get("claimName") or
                            (v.get("dataVolume") or {}).get("name") or "")
                volumes.append(self.vm_volume(ns, name, claim, disk, pvcs, pvs, vols, reps,
                                              used))
            elif v.get("containerDisk"):
                container.append((str(v["containerDisk"].get("image") or ""), "cdrom" in disk))
        if volumes:
            out["volumes"] = volumes
        else:
            self.note(f"VM {ns}/{name} has no PVC volume; the simulator gives it a 10Gi disk.")
        if container:
            image, cdrom = container[0]
            out["containerDisk"] = image
            if cdrom:
                out["cdrom"] = True
            if len(container) > 1:
                self.note(f"VM {ns}/{name}: only its first containerDisk is exported.")
        labels = {k: v for k, v in _labels(vm).items()
                  if not k.startswith("sim.harvesterhci.io/") and
                  {"harvesterhci.io/creator": "harvester",
                   "harvesterhci.io/os": "linux"}.get(k) != v}
        if labels:
            out["labels"] = dict(sorted(labels.items()))
        return out

    def vm_volume(self, ns: str, vm: str, claim: str, disk: Obj,
                  pvcs: dict[tuple[str, str], Obj], pvs: dict[str, Obj],
                  vols: dict[str, Obj], reps: dict[str, list[Obj]], used: set[str]) -> Obj:
        out: Obj = {"name": claim}
        if "cdrom" in disk:
            out["cdrom"] = True
        bus = str(((disk.get("cdrom") or disk.get("disk") or disk.get("lun") or {})
                   .get("bus")) or "")
        if bus in ("virtio", "sata", "scsi"):
            out["bus"] = bus
        pvc = pvcs.get((ns, claim))
        if pvc is None:
            self.note(f"VM {ns}/{vm}: claim {claim} not found; exported as a 10Gi volume.")
            return out
        ps = pvc.get("spec") or {}
        size = ((pvc.get("status") or {}).get("capacity") or {}).get("storage") or \
            ((ps.get("resources") or {}).get("requests") or {}).get("storage")
        if size:
            out["size"] = qty(size)
        modes = ps.get("accessModes") or []
        if modes:
            out["accessMode"] = modes[0]
        if ps.get("storageClassName"):
            out["storageClass"] = ps["storageClassName"]
        out["volumeMode"] = ps.get("volumeMode") or "Filesystem"
        pv = pvs.get(str(ps.get("volumeName") or ""))
        csi = ((pv or {}).get("spec") or {}).get("csi") or {}
        if csi.get("driver") != "driver.longhorn.io":
            self.note(f"VM {ns}/{vm}: claim {claim} is not a Longhorn volume "
                      f"({csi.get('driver') or 'no CSI driver'}); simulated as one.")
            return out
        lh_name = str(csi.get("volumeHandle") or "")
        vol = vols.get(lh_name)
        if vol is None:
            self.note(f"VM {ns}/{vm}: Longhorn volume {lh_name} of claim {claim} not found.")
            return out
        used.add(lh_name)
        replicas, nodes, robustness = self.replicas(vol, reps.get(lh_name, []))
        out["replicas"] = replicas
        if nodes:
            out["replicaNodes"] = nodes
        if robustness in ("degraded", "faulted"):
            out["robustness"] = robustness
        return out

    def replicas(self, vol: Obj, reps: list[Obj]) -> tuple[int, list[str], str]:
        """(numberOfReplicas, replica nodes healthy first, robustness)."""
        name = str(_md(vol).get("name"))
        want = max(1, min(20, int((vol.get("spec") or {}).get("numberOfReplicas") or 3)))
        healthy, failed = [], []
        for rep in sorted(reps, key=lambda x: str(_md(x).get("name"))):
            rs = rep.get("spec") or {}
            node = str(rs.get("nodeID") or "")
            if not node:
                continue
            bad = bool(rs.get("failedAt")) or \
                (rep.get("status") or {}).get("currentState") == "error"
            (failed if bad else healthy).append(node)
        status = vol.get("status") or {}
        rob = str(status.get("robustness") or "unknown")
        if status.get("state") != "attached" or rob not in ("healthy", "degraded", "faulted"):
            # Longhorn reports no robustness for a detached volume: its replicas tell
            rob = "faulted" if not healthy and failed else \
                "degraded" if failed or (healthy and len(healthy) < want) else "healthy"
        if rob == "degraded" and len(failed) != 1:
            self.note(f"Longhorn volume {name}: {len(healthy)} healthy and {len(failed)} failed "
                      "replicas; a degraded scenario volume has exactly one failed replica.")
        return want, sorted(healthy) + sorted(failed), rob

    def standalone(self, vol: Obj, reps: list[Obj], node_names: set[str]) -> Obj:
        name = str(_md(vol).get("name"))
        replicas, nodes, rob = self.replicas(vol, reps)
        out: Obj = {"name": name,
                    "size": qty(int((vol.get("spec") or {}).get("size") or 0) or "10Gi"),
                    "replicas": replicas, "robustness": rob}
        status = vol.get("status") or {}
        node = str(status.get("currentNodeID") or "")
        if status.get("state") == "attached" and node in node_names:
            out["state"] = "attached"
            out["node"] = node
        else:
            out["state"] = "detached"
        known = [n for n in nodes if n in node_names]
        if known:
            out["replicaNodes"] = known
        ks = status.get("kubernetesStatus") or {}
        if ks.get("pvcName"):
            self.note(f"Longhorn volume {name} (claim {ks.get('namespace')}/{ks['pvcName']}) "
                      "is used by no exported VM: exported as a standalone volume, without "
                      "its PV and claim.")
        return out

    # ------------------------------------------------------------------------ workloads
    def workloads(self) -> list[Obj]:
        r = self.r
        deps = [d for d in r.list("apps/v1", "deployments") if not _system_ns(_key(d)[0])]
        sts = [s for s in r.list("apps/v1", "statefulsets") if not _system_ns(_key(s)[0])] \
            if "statefulsets" in r.served("apps/v1") else []
        pdbs = [p for p in r.list("policy/v1", "poddisruptionbudgets")
                if not _system_ns(_key(p)[0]) and not any(
                    o.get("kind") == "VirtualMachineInstance"
                    for o in _md(p).get("ownerReferences") or [])]
        out: list[Obj] = []
        by_key: dict[tuple[str, str], Obj] = {}
        for w in sorted(deps, key=_key) + sorted(sts, key=_key):
            ns, name = _key(w)
            if not _DNS_LABEL.match(name):
                self.note(f"{w.get('kind')} {ns}/{name}: name not a DNS label; left out.")
                continue
            if (ns, name) in by_key:
                self.note(f"StatefulSet {ns}/{name}: a Deployment has its name; left out.")
                continue
            entry = self.workload(w)
            by_key[(ns, name)] = entry
            out.append(entry)
        for p in sorted(pdbs, key=_key):
            ns, pname = _key(p)
            sel = (p.get("spec") or {}).get("selector") or {}
            match = [e for e in out if e["namespace"] == ns and sel and
                     _selector_matches(sel, e.get("labels") or {"app": e["name"]})]
            if not match:
                self.note(f"PodDisruptionBudget {ns}/{pname} selects no exported Deployment or "
                          "StatefulSet; left out.")
                continue
            w = match[0]
            if w.get("pdb"):
                self.note(f"PodDisruptionBudget {ns}/{pname}: {w['name']} already has one "
                          f"({w['pdb'].get('name', w['name'])}); left out.")
                continue
            spec = p.get("spec") or {}
            pdb: Obj = {}
            if pname != w["name"]:
                pdb["name"] = pname
            for k in ("minAvailable", "maxUnavailable"):
                if spec.get(k) is not None:
                    pdb[k] = spec[k]
            if sel != {"matchLabels": w.get("labels") or {"app": w["name"]}}:
                pdb["selector"] = sel
            w["pdb"] = pdb
            if len(match) > 1:
                self.note(f"PodDisruptionBudget {ns}/{pname} selects the pods of "
                          f"{len(match)} workloads; exported with {w['name']} only.")
        return out

    def workload(self, w: Obj) -> Obj:
        ns, name = _key(w)
        spec = w.get("spec") or {}
        pod = ((spec.get("template") or {}).get("spec") or {})
        labels = dict(((spec.get("template") or {}).get("metadata") or {}).get("labels") or {})
        ctrs = pod.get("containers") or [{}]
        req = (ctrs[0].get("resources") or {}).get("requests") or {}
        out: Obj = {"name": name, "namespace": ns,
                    "replicas": int(1 if spec.get("replicas") is None else spec["replicas"]),
                    "image": str(ctrs[0].get("image") or "registry.suse.com/suse/nginx:1.21"),
                    "cpu": qty(req["cpu"]) if req.get("cpu") and
                    objects.parse_quantity(req["cpu"]) >= 1 else str(req.get("cpu") or "0"),
                    "memory": qty(req.get("memory") or "0")}
        if pod.get("nodeSelector"):
            out["nodeSelector"] = dict(pod["nodeSelector"])
        if labels != {"app": name}:
            out["labels"] = labels
        if w.get("kind") == "StatefulSet":
            self.note(f"StatefulSet {ns}/{name} exported as a Deployment (same pods, "
                      "replicas and PDB; no ordered rollout, no volume claim templates).")
        if len(ctrs) > 1:
            self.note(f"{w.get('kind')} {ns}/{name}: only the first container is exported.")
        return out

    # ------------------------------------------------------------------------- settings
    def settings(self, harvester: dict[str, Obj]) -> Obj:
        out: Obj = {}
        hv: Obj = {}
        for name in HARVESTER_SETTINGS:
            s = harvester.get(name)
            if s is None:
                continue
            entry = {k: str(s[k]) for k in ("value", "default") if s.get(k)}
            if entry:
                hv[name] = entry
        if hv:
            out["harvester"] = hv
        lh: Obj = {}
        for s in self.r.list("longhorn.io/v1beta2", "settings", "longhorn-system"):
            name = str(_md(s).get("name"))
            if name in LONGHORN_SETTINGS and s.get("value") is not None:
                lh[name] = str(s["value"])
        if lh:
            out["longhorn"] = dict(sorted(lh.items()))
        return out

    def addons(self) -> list[Obj]:
        if "addons" not in self.r.served("harvesterhci.io/v1beta1"):
            return []
        out = []
        for a in sorted(self.r.list("harvesterhci.io/v1beta1", "addons"), key=_key):
            ns, name = _key(a)
            spec = a.get("spec") or {}
            entry: Obj = {"name": name, "namespace": ns, "enabled": bool(spec.get("enabled"))}
            for k in ("chart", "version", "repo"):
                if spec.get(k):
                    entry[k] = str(spec[k])
            st = (a.get("status") or {}).get("status")
            if st:
                entry["status"] = str(st)
            out.append(entry)
        return out


def _semver(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"[0-9]+", v)[:4])


def _known_versions() -> set[str]:
    cat = loader._optional("harvester_sim.releases.catalog")
    return set(cat.known_versions()) if cat is not None else set()


def _catalog_release(version: str) -> Any:
    cat = loader._optional("harvester_sim.releases.catalog")
    if cat is None or version not in set(cat.known_versions()):
        return None
    return cat.get_release(version)


# ============================================================================ entry points
def export(kubeconfig: str | None = None, context: str | None = None,
           name: str = "exported") -> Obj:
    """The scenario of the cluster behind ``kubeconfig``/``context``; validated."""
    if not re.match(r"^[a-z0-9][-a-z0-9_.]*$", name):
        raise ExportError(f"--name {name!r}: lower-case letters, digits, '-', '_', '.'")
    reader = Reader(kubeconfig, context)
    try:
        scn = Exporter(reader).run(name)
    finally:
        reader.close()
    try:
        loader.normalize(json.loads(json.dumps(scn)), name)
    except ValueError as exc:
        raise ExportError(f"the exported scenario does not load: {exc}") from None
    return scn


def dump(scn: Obj) -> str:
    head = ("# harvester-sim scenario written by `harvester-sim export` (docs/rehearsal.md).\n"
            "# Serve it: harvester-sim serve --scenario THIS_FILE --kubeconfig /tmp/sim/kc\n"
            "# Rehearse: make upgrade SCENARIO=THIS_FILE\n")
    return head + yaml.safe_dump(scn, sort_keys=False, default_flow_style=False, width=100)


def write(scn: Obj, output: str | Path) -> Path:
    """Write atomically: a failure leaves no partial file."""
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(dump(scn))
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
