"""Scenarios: load, validate and normalize a YAML scenario, then populate a World with it.

* ``load(name_or_path) -> dict``: a built-in scenario by name (``scenarios/<name>.yaml`` in
  this package) or a YAML file; validated against ``schema.json`` plus a few cross-field
  checks; errors are ``ValueError("scenario <file>: <field path>: <problem>")``. The result
  is the scenario with defaults filled in and ``nodes``/``vms`` expanded (one entry per node /
  VM, VMs placed on nodes): see :func:`normalize`.
* ``populate(world)``: creates, through ``world.client``, everything a Harvester cluster has
  before an upgrade (docs/protocol.md). Kinds whose CRD is not served are skipped with one
  log line each, so the loader works while parts of the simulator are missing.
* ``after_start(world)``: called by ``World.start()`` once the controllers run.

The format is documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import copy
import importlib
import json
import logging
from pathlib import Path
from typing import Any

import yaml

from ..api import errors
from ..controllers.podutil import expr_matches
from . import objects

log = logging.getLogger("harvester_sim.scenarios")

HERE = Path(__file__).resolve().parent
SCHEMA_PATH = HERE / "schema.json"

BASE_NAMESPACES = [
    "default", "kube-system", "kube-public", "kube-node-lease", "harvester-system",
    "harvester-public", "longhorn-system", "cattle-system", "cattle-fleet-system",
    "cattle-fleet-local-system", "cattle-fleet-clusters-system", "fleet-local",
    "fleet-default", "cattle-monitoring-system", "cattle-provisioning-capi-system",
]

DEFAULT_INSTALLED = "v1.5.1"
_NORMALIZED = "_normalized"

# Fallback release facts, used only while ``harvester_sim.releases.catalog`` is missing.
_FALLBACK_RELEASES: dict[str, dict[str, str]] = {
    "v1.4.2": {"kubernetes": "v1.31.7+rke2r1", "rancher": "v2.10.1", "chart": "1.4.2"},
    "v1.4.3": {"kubernetes": "v1.31.7+rke2r1", "rancher": "v2.10.1", "chart": "1.4.3"},
    "v1.5.0": {"kubernetes": "v1.32.3+rke2r1", "rancher": "v2.11.1", "chart": "1.5.0"},
    "v1.5.1": {"kubernetes": "v1.32.4+rke2r1", "rancher": "v2.11.2", "chart": "1.5.1"},
    "v1.5.2": {"kubernetes": "v1.32.7+rke2r1", "rancher": "v2.11.3", "chart": "1.5.2"},
    "v1.6.0": {"kubernetes": "v1.33.3+rke2r1", "rancher": "v2.12.0", "chart": "1.6.0"},
}


# =============================================================================== loading
_SCHEMA: dict[str, Any] | None = None


def schema() -> dict[str, Any]:
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = json.loads(SCHEMA_PATH.read_text())
    return _SCHEMA


def builtin_names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.yaml"))


def resolve(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise ValueError(f"scenario {p}: file not found")
        return p
    cand = HERE / f"{name_or_path}.yaml"
    if not cand.exists():
        raise ValueError(f"unknown scenario {str(name_or_path)!r}: not a file and not a built-in "
                         f"({', '.join(builtin_names())})")
    return cand


def load(name_or_path: str | Path) -> dict[str, Any]:
    """Read, validate and normalize a scenario (built-in name or YAML file)."""
    path = resolve(name_or_path)
    data = _read(path, [])
    data.setdefault("name", path.stem)
    return normalize(data, path.name)


def _read(path: Path, chain: list[Path]) -> dict[str, Any]:
    """The scenario mapping of ``path`` with its ``extends`` chain merged in."""
    label = path.name
    if path.resolve() in chain:
        raise ValueError(f"scenario {label}: extends: cycle "
                         f"({' -> '.join(p.name for p in [*chain, path])})")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"scenario {label}: not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"scenario {label}: the top level must be a mapping, "  # noqa: TRY004
                         f"not {type(data).__name__}")
    base_ref = data.pop("extends", None)
    if base_ref is None:
        return data
    if not isinstance(base_ref, str):
        raise ValueError(f"scenario {label}: extends: must be a scenario name or file")
    ref = Path(base_ref)
    base_path = path.parent / ref if ref.suffix in (".yaml", ".yml") and \
        not ref.is_absolute() else None
    try:
        base_path = base_path if base_path is not None and base_path.exists() else \
            resolve(base_ref)
    except ValueError as exc:
        raise ValueError(f"scenario {label}: extends: {exc}") from exc
    base = _read(base_path, [*chain, path.resolve()])
    base.pop("name", None)
    base.pop("description", None)
    return merge(base, data)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge for ``extends``: mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out or "(top level)"


def validate(data: dict[str, Any], label: str = "<dict>") -> None:
    """Schema validation; raises ValueError naming every bad field (up to 10)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    errs = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)),
                                                              e.message))
    if not errs:
        return
    lines = []
    for e in errs[:10]:
        where = _path(e.absolute_path)
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            allowed = sorted((e.schema.get("properties") or {}).keys())
            extra = sorted(set(e.instance) - set(allowed))
            for k in extra:
                sub = f"{where}.{k}" if e.absolute_path else k
                msg = f"unknown field (allowed: {', '.join(allowed)})" if allowed else \
                    "unknown field"
                lines.append(f"{sub}: {msg}")
            continue
        if e.validator == "anyOf" and e.context:
            # a branch of the right type says more than "not of type" from the others
            best = min(e.context, key=lambda c: (c.validator == "type",
                                                 len(list(c.absolute_path))))
            lines.append(f"{where}: {best.message}")
            continue
        lines.append(f"{where}: {e.message}")
    more = f" (and {len(errs) - 10} more)" if len(errs) > 10 else ""
    if len(lines) == 1:
        raise ValueError(f"scenario {label}: {lines[0]}{more}")
    raise ValueError(f"scenario {label}: " + "; ".join(lines) + more)


# ============================================================================ normalizing
def _yaml11_on_keys(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each fault trigger's key ``True`` renamed back to ``on``.

    YAML 1.1 (PyYAML) reads an unquoted ``on:`` key as the boolean ``True``, so a trigger
    written ``{on: {event: ...}}`` as in docs/scenarios.md would otherwise fail validation.
    Returns ``data`` itself when nothing needed renaming, else a copy (the input is unchanged).
    """
    faults = data.get("faults")
    if not isinstance(faults, list) or not any(
            isinstance(f, dict) and isinstance(f.get("trigger"), dict) and True in f["trigger"]
            for f in faults):
        return data
    fixed = []
    for f in faults:
        trig = f.get("trigger") if isinstance(f, dict) else None
        if isinstance(trig, dict) and True in trig and "on" not in trig:
            f = {**f, "trigger": {("on" if k is True else k): v for k, v in trig.items()}}
        fixed.append(f)
    return {**data, "faults": fixed}


def normalize(data: dict[str, Any], label: str = "<dict>") -> dict[str, Any]:
    """Validate and fill defaults. Idempotent (a normalized scenario is returned as is).

    Output keys: every input key, plus ``nodes`` (one dict per node, all fields set:
    name, roles, witness, management, cpu, memory, pods, disk{capacity,used}, labels,
    annotations, taints, machine, ip, podCIDR, devices, unschedulable), ``vms`` (one dict per
    VM: name, fleet, namespace, cpu, memory, runStrategy, evictionStrategy, nodeSelector,
    affinity, pinned, initialNode, devices, volumes[...], containerDisk, cdrom, labels,
    annotations), ``workloads`` and ``volumes`` with defaults, and ``harvester.available`` as
    a list of dicts.
    """
    if data.get(_NORMALIZED):
        return data
    data = _yaml11_on_keys(data)
    validate(data, label)
    scn = copy.deepcopy(data)
    seed = int(scn.setdefault("seed", 1))
    scn.setdefault("speed", 1.0)
    scn.setdefault("description", "")
    h = scn.setdefault("harvester", {})
    h.setdefault("installed", DEFAULT_INSTALLED)
    if isinstance(h["installed"], dict):
        h["installed_release"] = h["installed"]
        h["installed"] = h["installed"]["version"]
    h["available"] = [a if isinstance(a, dict) else {"version": a}
                      for a in h.get("available") or []]
    inv = scn.setdefault("invariants", {})
    inv.setdefault("max_cordoned", 1)
    inv.setdefault("dual_running_grace_s", 60.0)
    inv.setdefault("max_unavailable", inv["max_cordoned"])
    inv.setdefault("migration_completion_timeout_per_gib_s", 150.0)
    scn["nodes"] = _expand_nodes(scn.get("nodes") or [], seed, scn.get("cluster") or {}, label)
    scn["workloads"] = [_workload(w) for w in scn.get("workloads") or []]
    scn["vms"] = _expand_vms(scn.get("vms") or [], scn["nodes"], label)
    names = {n["name"] for n in scn["nodes"]}
    vols = []
    for i, v in enumerate(scn.get("volumes") or []):
        v = {"size": "10Gi", "replicas": 3, "robustness": "healthy", "state": "detached", **v}
        for key in ("node",):
            if v.get(key) and v[key] not in names:
                raise ValueError(f"scenario {label}: volumes[{i}].{key}: unknown node "
                                 f"{v[key]!r}")
        for j, rn in enumerate(v.get("replicaNodes") or []):
            if rn not in names:
                raise ValueError(f"scenario {label}: volumes[{i}].replicaNodes[{j}]: unknown "
                                 f"node {rn!r}")
        if v["state"] == "attached" and not v.get("node"):
            raise ValueError(f"scenario {label}: volumes[{i}].node: required when state is "
                             "attached")
        vols.append(v)
    scn["volumes"] = vols
    settings = scn.setdefault("settings", {})
    settings["harvester"] = {k: v if isinstance(v, dict) else {"value": v}
                             for k, v in (settings.get("harvester") or {}).items()}
    settings["longhorn"] = dict(settings.get("longhorn") or {})
    seen_addons: set[tuple[str, str]] = set()
    for i, a in enumerate(scn.setdefault("addons", [])):
        key = (a["namespace"], a["name"])
        if key in seen_addons:
            raise ValueError(f"scenario {label}: addons[{i}].name: duplicate Addon "
                             f"{key[0]}/{key[1]}")
        seen_addons.add(key)
    _check_fault_targets(scn.get("faults") or [], names, label)
    from ..timings import Timings

    try:
        Timings.from_scenario(scn)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"scenario {label}: timings: {exc}") from exc
    scn[_NORMALIZED] = True
    return scn


def _check_fault_targets(faults: list[dict[str, Any]], nodes: set[str], label: str) -> None:
    """Reject targets that could never match: a key the fault's call site does not pass, or
    (when the scenario has nodes) a node name it does not have."""
    from ..faults import CONTEXT_KEYS

    for i, f in enumerate(faults):
        keys = CONTEXT_KEYS.get(f["kind"], ())
        for key, want in (f.get("target") or {}).items():
            where = f"faults[{i}].target.{key}"
            if key not in keys:
                raise ValueError(f"scenario {label}: {where}: {f['kind']} faults have no "
                                 f"{key!r} to match (target keys: {', '.join(keys)})")
            if key not in ("node", "source", "target") or not nodes:
                continue  # node-valued keys are checked against the scenario's nodes
            for n in want if isinstance(want, list) else [want]:
                if n != "*" and str(n) not in nodes:
                    raise ValueError(f"scenario {label}: {where}: unknown node {n!r}")
        for j, n in enumerate(f.get("nodes") or []):
            if nodes and n not in nodes:
                raise ValueError(f"scenario {label}: faults[{i}].nodes[{j}]: unknown node "
                                 f"{n!r}")


def _expand_nodes(entries: list[dict[str, Any]], seed: int, cluster: dict[str, Any],
                  label: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    ip_prefix = cluster.get("nodeIPPrefix", "10.52.0")
    for i, e in enumerate(entries):
        count = int(e.get("count", 1))
        first = int(e.get("first", 1))
        width = len(str(first + count - 1))
        for k in range(count):
            if count == 1 and "count" not in e:
                name = e["name"]
            elif "{n}" in e["name"] or "{n:" in e["name"]:
                name = e["name"].format(n=first + k)
            else:
                name = f"{e['name']}-{first + k:0{width}d}"
            if name in seen:
                raise ValueError(f"scenario {label}: nodes[{i}].name: duplicate node name "
                                 f"{name!r}")
            seen.add(name)
            idx = len(out)
            witness = bool(e.get("witness", False))
            roles = list(e.get("roles") or (["etcd"] if witness else ["worker"]))
            if witness and ("worker" in roles or "control-plane" in roles):
                raise ValueError(f"scenario {label}: nodes[{i}].roles: a witness node has only "
                                 f"the etcd role, not {roles}")
            if count > 1 and e.get("machine"):
                raise ValueError(f"scenario {label}: nodes[{i}].machine: cannot be set when "
                                 "count > 1")
            if count > 1 and e.get("ip"):
                raise ValueError(f"scenario {label}: nodes[{i}].ip: cannot be set when "
                                 "count > 1")
            disk = {"capacity": "500Gi", "used": "60Gi", **(e.get("disk") or {})}
            if objects.parse_quantity(disk["used"]) > objects.parse_quantity(disk["capacity"]):
                raise ValueError(f"scenario {label}: nodes[{i}].disk.used: larger than "
                                 "disk.capacity")
            ip = e.get("ip") or (f"{ip_prefix}.{10 + idx}" if idx < 240 else
                                 f"10.53.{idx // 250}.{idx % 250 + 1}")
            out.append({
                "name": name,
                "roles": roles,
                "witness": witness,
                "management": bool(e.get("management", "control-plane" in roles)),
                "cpu": e.get("cpu", 4 if witness else 32),
                "memory": e.get("memory", "16Gi" if witness else "128Gi"),
                "pods": int(e.get("pods", 200)),
                "disk": disk,
                "labels": dict(e.get("labels") or {}),
                "annotations": dict(e.get("annotations") or {}),
                "taints": [dict(t) for t in e.get("taints") or []],
                "devices": dict(e.get("devices") or {}),
                "machine": e.get("machine") or objects.machine_name(seed, name),
                "ip": ip,
                "podCIDR": f"10.42.{idx}.0/24",
                "unschedulable": bool(e.get("unschedulable", False)),
            })
    return out


def _workload(w: dict[str, Any]) -> dict[str, Any]:
    out = {"namespace": "default", "replicas": 2, "image": "registry.suse.com/suse/nginx:1.21",
           "cpu": "100m", "memory": "128Mi", "nodeSelector": {}, **w}
    out["labels"] = dict(w.get("labels") or {"app": w["name"]})
    out["pdb"] = dict(w["pdb"]) if w.get("pdb") else None
    if out["pdb"] is not None and not out["pdb"]:
        out["pdb"] = {"minAvailable": max(0, out["replicas"] - 1)}
    return out


# ---------------------------------------------------------------------------- placement
def _taint_blocks(node: dict[str, Any]) -> bool:
    return any(t["effect"] in ("NoSchedule", "NoExecute") for t in node["taints"])


def affinity_matches(affinity: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Required node affinity (terms ORed, expressions ANDed)."""
    if not affinity:
        return True
    req = ((affinity.get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = req.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(all(expr_matches(x, labels) for x in t.get("matchExpressions") or [])
               for t in terms)


def _expand_vms(fleets: list[dict[str, Any]], nodes: list[dict[str, Any]],
                label: str) -> list[dict[str, Any]]:
    by_name = {n["name"]: n for n in nodes}
    node_labels = {n["name"]: objects.node_labels(n) for n in nodes}
    mem_cap = {n["name"]: max(1.0, objects.parse_quantity(n["memory"]) - 2 * 2**30)
               for n in nodes}
    mem_used = {n["name"]: 0.0 for n in nodes}
    dev_left = {n["name"]: dict(n["devices"]) for n in nodes}
    rr = 0
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    claims_seen: set[tuple[str, str]] = set()
    for i, f in enumerate(fleets):
        count = int(f.get("count", 1))
        placement = dict(f.get("placement") or {})
        pinned = placement.get("node")
        if pinned and pinned not in by_name:
            raise ValueError(f"scenario {label}: vms[{i}].placement.node: unknown node "
                             f"{pinned!r}")
        initial = placement.get("initialNode")
        if initial and initial not in by_name:
            raise ValueError(f"scenario {label}: vms[{i}].placement.initialNode: unknown node "
                             f"{initial!r}")
        if initial and count > 1:
            raise ValueError(f"scenario {label}: vms[{i}].placement.initialNode: cannot be set "
                             "when count > 1")
        devices = {"hostDevices": list((f.get("devices") or {}).get("hostDevices") or []),
                   "gpus": list((f.get("devices") or {}).get("gpus") or [])}
        wanted_devs = [d["deviceName"] for d in devices["hostDevices"] + devices["gpus"]]
        width = max(2, len(str(count)))
        node_sel = dict(placement.get("nodeSelector") or {})
        if pinned:
            node_sel["kubernetes.io/hostname"] = pinned
        spread = placement.get("spread", "even")
        base = [n["name"] for n in nodes
                if not n["witness"] and not n["unschedulable"] and not _taint_blocks(n)
                and all(node_labels[n["name"]].get(kk) == vv for kk, vv in node_sel.items())
                and affinity_matches(placement.get("affinity"), node_labels[n["name"]])]
        for k in range(count):
            name = f["name"] if count == 1 else f"{f['name']}-{k + 1:0{width}d}"
            ns = f.get("namespace", "default")
            if (ns, name) in seen:
                raise ValueError(f"scenario {label}: vms[{i}].name: duplicate VM {ns}/{name}")
            seen.add((ns, name))
            mem = f.get("memory", "4Gi")
            mem_b = objects.parse_quantity(mem)
            cands = [c for c in base if all(dev_left[c].get(d, 0) > 0 for d in wanted_devs)] \
                if wanted_devs else base
            node: str | None = None
            if initial:
                # where the VM runs today (an exported cluster): kept as it is, even where
                # the loader's own placement would not have put it
                node = initial
                mem_used[node] += mem_b
                for d in wanted_devs:
                    dev_left[node][d] = dev_left[node].get(d, 0) - 1
            elif cands:
                fits = [c for c in cands if mem_used[c] + mem_b <= mem_cap[c]] or cands
                if spread == "pack":
                    node = fits[0]
                elif spread == "round-robin":
                    node = fits[rr % len(fits)]
                    rr += 1
                else:
                    best = -1.0
                    for c in fits:
                        frac = mem_used[c] / mem_cap[c]
                        if node is None or frac < best:
                            node, best = c, frac
                assert node is not None
                mem_used[node] += mem_b
                for d in wanted_devs:
                    dev_left[node][d] = dev_left[node].get(d, 0) - 1
            elif pinned or node_sel or wanted_devs:
                log.info("scenario %s: no node fits VM %s/%s; it will stay unscheduled",
                         label, ns, name)
            vols = []
            for j, v in enumerate(f.get("volumes") or [{"size": "10Gi"}]):
                claim = v.get("name") or f"{name}-disk-{j}"
                if v.get("name") and count > 1:
                    raise ValueError(f"scenario {label}: vms[{i}].volumes[{j}].name: cannot be "
                                     "set when count > 1")
                if (ns, claim) in claims_seen:
                    raise ValueError(f"scenario {label}: vms[{i}].volumes[{j}].name: duplicate "
                                     f"claim {ns}/{claim}")
                claims_seen.add((ns, claim))
                for r, rn in enumerate(v.get("replicaNodes") or []):
                    if rn not in by_name:
                        raise ValueError(f"scenario {label}: vms[{i}].volumes[{j}]."
                                         f"replicaNodes[{r}]: unknown node {rn!r}")
                cdrom = bool(v.get("cdrom", False))
                vols.append({"name": claim, "size": v.get("size", "10Gi"),
                             "replicas": int(v.get("replicas", 3)),
                             "accessMode": v.get("accessMode", "ReadWriteMany"),
                             "storageClass": v.get("storageClass", "harvester-longhorn"),
                             "volumeMode": v.get("volumeMode", "Block"),
                             "robustness": v.get("robustness", "healthy"),
                             "bus": v.get("bus", "sata" if cdrom else "virtio"),
                             "cdrom": cdrom,
                             "replicaNodes": list(v.get("replicaNodes") or [])})
            out.append({
                "name": name, "fleet": f["name"], "namespace": ns,
                "cpu": int(f.get("cpu", 2)), "memory": mem,
                "runStrategy": f.get("runStrategy", "Always"),
                "evictionStrategy": f.get("evictionStrategy", "LiveMigrate"),
                "nodeSelector": dict(node_sel), "affinity": placement.get("affinity"),
                "pinned": pinned, "initialNode": node, "devices": devices, "volumes": vols,
                "containerDisk": f.get("containerDisk"), "cdrom": bool(f.get("cdrom", False)),
                "labels": dict(f.get("labels") or {}),
                "annotations": dict(f.get("annotations") or {}),
            })
    return out


# ============================================================================== releases
VERSION_OBJECT_KEYS = ("isoURL", "isoChecksum", "createVersion")
MiB = 1024 * 1024


def release_specs(scn: dict[str, Any]) -> dict[str, Any]:
    """The scenario's releases in the catalog's ``ReleaseSet.from_scenario`` form (the
    top-level ``rke2``/``rancher`` keys override the installed release)."""
    h = scn.get("harvester") or {}
    inst = h.get("installed_release") or h.get("installed", DEFAULT_INSTALLED)
    inst = dict(inst) if isinstance(inst, dict) else {"version": inst}
    if scn.get("rke2"):
        inst["kubernetes"] = scn["rke2"]
    if scn.get("rancher"):
        inst["rancher"] = scn["rancher"]
    avail = []
    for a in h.get("available") or []:
        a = dict(a) if isinstance(a, dict) else {"version": a}
        avail.append({k: v for k, v in a.items() if k not in VERSION_OBJECT_KEYS})
    return {"installed": inst, "available": avail}


def release_set(scn: dict[str, Any]) -> Any:
    """``harvester_sim.releases.catalog.ReleaseSet`` of the scenario, or None if the catalog
    is missing."""
    cat = _optional("harvester_sim.releases.catalog")
    if cat is None:
        return None
    return cat.ReleaseSet.from_scenario(release_specs(scn))


def release_info(version: str, releases: Any = None) -> dict[str, Any]:
    """What a node running Harvester ``version`` shows: {harvester, kubernetes, os, rancher,
    harvesterChart, images: [{names: [...], sizeBytes}]} from ``releases`` (a ReleaseSet) or
    the catalog; a small built-in table (and no images) if the catalog is missing."""
    fb = _FALLBACK_RELEASES.get(version, _FALLBACK_RELEASES[DEFAULT_INSTALLED])
    info: dict[str, Any] = {"harvester": version, "os": f"Harvester {version}", "images": [],
                            "kubernetes": fb["kubernetes"], "rancher": fb["rancher"],
                            "harvesterChart": fb["chart"]}
    rel: Any = None
    if releases is not None:
        rel = releases.get(version)
    else:
        cat = _optional("harvester_sim.releases.catalog")
        if cat is not None:
            rel = cat.get_release(version)
    if rel is not None:
        info.update({"kubernetes": rel.kubernetes, "os": rel.os, "rancher": rel.rancher,
                     "harvesterChart": rel.harvester_chart})
        info["images"] = [{"names": [i.name], "sizeBytes": int(i.size)} for i in rel.images()]
    return info


class DownloadFaults:
    """The release server's fault source: maps the scenario kinds ``image_download_{corrupt,
    slow,404,cut}`` onto its ``release_download`` faults (``{fault: corrupt|slow|404|cut}``).
    Checksum-file requests only ever match a 404 fault with ``files: all``, so one-shot faults
    are kept for the ISO itself."""

    KINDS = {"image_download_404": "404", "image_download_corrupt": "corrupt",
             "image_download_cut": "cut", "image_download_slow": "slow"}
    checksum_aware = True  # the release server asks for ``file="sha512"`` requests too

    def __init__(self, faults: Any) -> None:
        self.faults = faults

    def match(self, kind: str, **ctx: Any) -> dict[str, Any] | None:
        if kind != "release_download":
            return self.faults.match(kind, **ctx)  # type: ignore[no-any-return]
        for fkind, mode in self.KINDS.items():
            if ctx.get("file") == "sha512" and (
                    mode != "404" or not any(s.get("files") == "all"
                                             for s in self.faults.active(fkind))):
                continue
            spec = self.faults.match(fkind, **ctx)
            if spec is None:
                continue
            out: dict[str, Any] = {"fault": mode}
            if mode == "slow":
                if spec.get("rate_mib_s"):
                    out["rate_bytes_per_s"] = float(spec["rate_mib_s"]) * MiB
                else:
                    out["duration_s"] = float(spec.get("seconds") or 3600.0)
            elif mode == "cut":
                out["percent"] = float(spec.get("percent", 50.0))
            elif mode == "404":
                out["files"] = str(spec.get("files", "iso"))
            return out
        return None


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            return None
        raise


# ============================================================================== populate
class _Populator:
    def __init__(self, world: Any, scn: dict[str, Any]) -> None:
        self.world = world
        self.client = world.client
        self.scn = scn
        self.seed = int(scn["seed"])
        self.skipped: dict[str, int] = {}
        self.created: dict[str, int] = {}

    def create(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        kind = f"{obj['kind']}.{obj['apiVersion']}"
        try:
            out = self.client.create(obj, copy_result=False)  # read-only: nobody edits it
        except errors.ApiError as exc:
            if exc.code == 404 and self.client.registry.by_kind(obj["apiVersion"],
                                                                obj["kind"]) is None:
                if kind not in self.skipped:
                    log.info("scenario: %s is not served (no CRD yet); skipping those objects",
                             kind)
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return None
            if exc.code == 409:
                return None
            raise
        self.created[obj["kind"]] = self.created.get(obj["kind"], 0) + 1
        return out  # type: ignore[no-any-return]

    def set_status(self, api_version: str, kind: str, name: str, namespace: str | None,
                   status: dict[str, Any]) -> None:
        """Write a status the API dropped on create (the cluster's history put it there)."""
        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            cur["status"] = dict(status)
            return cur
        self.client.modify(api_version, kind, name, fn, namespace, "status")

    def served(self, api_version: str, kind: str) -> bool:
        return self.client.registry.by_kind(api_version, kind) is not None

    # ---------------------------------------------------------------------------------
    def run(self) -> None:
        scn = self.scn
        installed = scn["harvester"]["installed"]
        releases = self.world.extras.get("releases") or release_set(scn)
        if releases is not None:
            self.world.extras["releases"] = releases
        rel = release_info(installed, releases)
        if releases is None:
            rel["kubernetes"] = scn.get("rke2") or rel["kubernetes"]
            rel["rancher"] = scn.get("rancher") or rel["rancher"]
        extra_ns = {v["namespace"] for v in scn["vms"]} | \
            {w["namespace"] for w in scn["workloads"]} | \
            {a["namespace"] for a in scn.get("addons") or []}
        for ns in BASE_NAMESPACES + sorted(extra_ns - set(BASE_NAMESPACES)):
            self.create(objects.namespace(ns))
        self.crds(installed)
        for sc in objects.storage_classes():
            self.create(sc)
        self.create(objects.setting("server-version", installed))
        self.create(objects.serving_ca_secret())
        self.settings()
        self.nodes(rel)
        self.rancher(rel)
        self.versions()
        self.standalone_volumes()
        self.vms()
        self.workloads()
        self.world.timeline.record("scenario_loaded", scenario=scn.get("name", ""),
                                   nodes=len(scn["nodes"]), vms=len(scn["vms"]),
                                   created=dict(self.created), skipped=dict(self.skipped))

    def crds(self, installed: str) -> None:
        """Serve the upstream CRDs of the installed release (``harvester_sim.crds``)."""
        from .. import crds
        from ..controllers._upgrade_util import release_for

        rel = release_for(self.world, installed)
        if rel is None:
            return
        self.world.extras["crd_release"] = rel
        self.world.extras["crd_components"] = crds.component_files(rel)
        for doc in crds.crds_for(rel):
            self.create(doc)

    def settings(self) -> None:
        """The scenario's Harvester and Longhorn settings and Addons (created before the
        controllers start, so Longhorn's defaults do not replace them)."""
        settings = self.scn.get("settings") or {}
        for name, s in (settings.get("harvester") or {}).items():
            if name == "server-version":
                continue  # harvester.installed
            self.create(objects.setting(name, s.get("value", ""), s.get("default", "")))
        for name, value in (settings.get("longhorn") or {}).items():
            self.create(objects.longhorn_setting(name, value))
        for a in self.scn.get("addons") or []:
            out = self.create(objects.addon(a))
            if out is not None and a.get("status"):
                self.set_status("harvesterhci.io/v1beta1", "Addon", a["name"], a["namespace"],
                                {"status": a["status"]})

    def nodes(self, rel: dict[str, Any]) -> None:
        for n in self.scn["nodes"]:
            self.create(objects.node_object(n, rel))

    def rancher(self, rel: dict[str, Any]) -> None:
        nodes = self.scn["nodes"]
        cps = [n for n in nodes if "control-plane" in n["roles"]]
        init = cps[0]["name"] if cps else (nodes[0]["name"] if nodes else None)
        k8s = rel["kubernetes"]
        self.create(objects.rancher_cluster(k8s))
        for n in nodes:
            is_init = n["name"] == init
            node = self.client.try_get("v1", "Node", n["name"]) or {}
            info = (node.get("status") or {}).get("nodeInfo") or {}
            self.create(objects.capi_machine(n, is_init, k8s, info))
            self.create(objects.custom_machine(n))
            self.create(objects.machine_plan_secret(n, is_init))
        if self.served("management.cattle.io/v3", "ManagedChart"):
            chart = rel["harvesterChart"]
            for name in ("harvester-crd", "harvester"):
                if self.client.try_get("management.cattle.io/v3", "ManagedChart", name,
                                       "fleet-local") is None:
                    self.create(objects.managed_chart(name, chart, "harvester-system"))

    def versions(self) -> None:
        installed = self.scn["harvester"]["installed"]
        server = self.release_server()
        releases = self.world.extras.get("releases")
        for a in self.scn["harvester"]["available"]:
            if a.get("createVersion") is False:
                continue
            v = a["version"]
            rel = releases.get(v) if releases is not None else None
            url = a.get("isoURL") or _server_call(server, "url_for", v) or \
                f"http://releases.harvester-sim.invalid/{v}/harvester-{v}-amd64.iso"
            checksum = a.get("isoChecksum") or _server_call(server, "checksum", v) or ""
            self.create(objects.version(
                v, url, checksum,
                a.get("releaseDate") or getattr(rel, "release_date", "") or "",
                a.get("minUpgradableVersion") or
                getattr(rel, "min_upgradable_version", "") or installed,
                list(a.get("tags") or getattr(rel, "tags", ()) or [v])))

    def release_server(self) -> Any:
        """Start the release server (``harvester_sim.releases.server``) once per world."""
        if "release_server" in self.world.extras:
            return self.world.extras["release_server"]
        releases = self.world.extras.get("releases")
        if not self.scn["harvester"]["available"] or releases is None:
            return None
        mod = _optional("harvester_sim.releases.server")
        if mod is None:
            log.info("scenario: no release server (harvester_sim.releases.server missing)")
            return None
        server = mod.ReleaseServer(releases, speed=self.world.clock.speed,
                                   faults=DownloadFaults(self.world.faults)).start()
        self.world.extras["release_server"] = server
        return server

    def _volume(self, name: str, pvc: str | None, ns: str | None, size: str, replicas: int,
                access: str, robustness: str, node: str | None, workload: str | None,
                replica_nodes: list[str] | None = None) -> None:
        size_b = int(objects.parse_quantity(size))
        self.create(objects.longhorn_volume(name, size_b, replicas, access, robustness, node,
                                            pvc, ns, workload))
        if not self.served("longhorn.io/v1beta2", "Replica"):
            return
        pool = [n["name"] for n in self.scn["nodes"] if not n["witness"]]
        if not pool:
            return
        if replica_nodes:
            placed = list(replica_nodes)
        else:
            start = pool.index(node) if node in pool else \
                int(objects.digest(self.seed, "rep", name, n=6), 16) % len(pool)
            placed = [pool[(start + k) % len(pool)] for k in range(min(replicas, len(pool)))]
        healthy = len(placed)
        if robustness == "degraded":
            healthy = max(1, len(placed) - 1) if len(placed) > 1 else 0
            if healthy == len(placed):
                healthy -= 1
        elif robustness == "faulted":
            healthy = 0
        for k, rn in enumerate(placed):
            self.create(objects.longhorn_replica(self.seed, name, rn, k < healthy, k))

    def standalone_volumes(self) -> None:
        for v in self.scn["volumes"]:
            node = v.get("node") if v["state"] == "attached" else None
            self._volume(v["name"], None, None, v["size"], int(v["replicas"]), "ReadWriteOnce",
                         v["robustness"], node, None, v.get("replicaNodes"))

    def vms(self) -> None:
        for vm in self.scn["vms"]:
            claims = []
            running = vm["runStrategy"] in ("Always", "RerunOnFailure", "Once")
            for vol in vm["volumes"]:
                uid = objects.claim_uid(self.seed, vm["namespace"], vol["name"])
                pv = objects.pv_name(self.seed, vm["namespace"], vol["name"])
                pvc_obj = objects.pvc_object(vol["name"], vm["namespace"], vol["size"],
                                             vol["accessMode"], vol["storageClass"],
                                             vol["volumeMode"], pv, vm["name"], uid)
                pv_obj = objects.pv_object(pv, vol["name"], vm["namespace"], vol["size"],
                                           vol["accessMode"], vol["storageClass"],
                                           vol["volumeMode"], vol["replicas"], uid)
                if self.create(pvc_obj) is not None:
                    self.set_status("v1", "PersistentVolumeClaim", vol["name"],
                                    vm["namespace"], pvc_obj["status"])
                if self.create(pv_obj) is not None:
                    self.set_status("v1", "PersistentVolume", pv, None, pv_obj["status"])
                self._volume(pv, vol["name"], vm["namespace"], vol["size"], vol["replicas"],
                             vol["accessMode"], vol["robustness"],
                             vm["initialNode"] if running else None, vm["name"],
                             vol.get("replicaNodes"))
                claims.append(vol)
            self.create(objects.virtual_machine(vm, claims))

    def workloads(self) -> None:
        for w in self.scn["workloads"]:
            self.create(objects.deployment(w))
            if w["pdb"] is not None:
                self.create(objects.pdb(w))


def _server_call(server: Any, method: str, version: str) -> str | None:
    fn = getattr(server, method, None) if server is not None else None
    if not callable(fn):
        return None
    try:
        out = fn(version)
    except (KeyError, ValueError, LookupError):
        return None
    return str(out) if out else None


def populate(world: Any) -> None:
    """Create the scenario's cluster in ``world`` (normalizing ``world.scenario`` in place)."""
    scn = normalize(world.scenario or {"name": "empty"}, world.scenario.get("name", "<dict>")
                    if world.scenario else "<dict>")
    world.scenario = scn
    _Populator(world, scn).run()


def after_start(world: Any) -> None:
    """Tell the fault engine and the timeline that the cluster is up."""
    world.timeline.record("started", scenario=world.scenario.get("name", ""))
    world.faults.notify("started")
