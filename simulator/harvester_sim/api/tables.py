"""Server-side ``Table`` rendering for ``kubectl get`` (meta.k8s.io/v1 Table).

kubectl has no per-kind printers: every column comes from the server. The columns here are
those of the real printers (kubernetes pkg/printers/internalversion) for the kinds the
upgrade shows, CRD ``additionalPrinterColumns`` evaluated with a small JSONPath subset, and
Name + Age for everything else.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Callable
from typing import Any

from ..clock import Clock
from .resources import ResourceType

Obj = dict[str, Any]
Col = tuple[str, str, int]  # name, type, priority
RowFn = Callable[[Obj], list[Any]]


def human_duration(seconds: float) -> str:
    """apimachinery duration.HumanDuration (what the AGE column shows)."""
    if seconds < -1:
        return "<invalid>"
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = s // 3600
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if h < 24 * 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    y = d // 365
    if y < 8:
        return f"{y}y{d % 365}d" if d % 365 else f"{y}y"
    return f"{y}y"


def _parse_ts(ts: Any) -> _dt.datetime | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None


def age(ts: Any) -> str:
    t = _parse_ts(ts)
    if t is None:
        return "<unknown>"
    return human_duration((Clock.wall_now() - t).total_seconds())


def _md(o: Obj) -> Obj:
    return o.get("metadata") or {}


def _age_of(o: Obj) -> str:
    return age(_md(o).get("creationTimestamp"))


def _none(v: Any) -> Any:
    return "<none>" if v in (None, "", []) else v


def _containers(o: Obj, path: tuple[str, ...] = ("spec", "template", "spec")) -> list[Obj]:
    cur: Any = o
    for p in path:
        cur = (cur or {}).get(p) if isinstance(cur, dict) else None
    return list((cur or {}).get("containers") or []) if isinstance(cur, dict) else []


def _names_images(cs: list[Obj]) -> tuple[str, str]:
    return (",".join(c.get("name", "") for c in cs), ",".join(c.get("image", "") for c in cs))


def _selector_str(sel: Obj | None) -> str:
    if not sel:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or []:
        op = e.get("operator")
        vals = ",".join(e.get("values") or [])
        if op == "In":
            parts.append(f"{e['key']} in ({vals})")
        elif op == "NotIn":
            parts.append(f"{e['key']} notin ({vals})")
        elif op == "Exists":
            parts.append(e["key"])
        elif op == "DoesNotExist":
            parts.append(f"!{e['key']}")
    return ",".join(parts) or "<none>"


# ------------------------------------------------------------------ kinds
def _pod_status(o: Obj) -> str:
    st = o.get("status") or {}
    reason = st.get("reason") or st.get("phase") or "Unknown"
    init_statuses = st.get("initContainerStatuses") or []
    initializing = False
    n_init = len((o.get("spec") or {}).get("initContainers") or [])
    for i, cs in enumerate(init_statuses):
        state = cs.get("state") or {}
        term = state.get("terminated")
        if term and term.get("exitCode") == 0:
            continue
        if term:
            reason = "Init:" + (term.get("reason") or f"ExitCode:{term.get('exitCode')}")
        elif (state.get("waiting") or {}).get("reason") not in (None, "PodInitializing"):
            reason = "Init:" + state["waiting"]["reason"]
        else:
            reason = f"Init:{i}/{n_init}"
        initializing = True
        break
    if not initializing:
        has_running = False
        for cs in reversed(st.get("containerStatuses") or []):
            state = cs.get("state") or {}
            w, t = state.get("waiting"), state.get("terminated")
            if w and w.get("reason"):
                reason = w["reason"]
            elif t and t.get("reason"):
                reason = t["reason"]
            elif t:
                reason = (f"Signal:{t['signal']}" if t.get("signal")
                          else f"ExitCode:{t.get('exitCode', 0)}")
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
        if reason == "Completed" and has_running:
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in st.get("conditions") or [])
            reason = "Running" if ready else "NotReady"
    if _md(o).get("deletionTimestamp"):
        reason = "Unknown" if st.get("reason") == "NodeLost" else "Terminating"
    return str(reason)


def _pod_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    cstat = st.get("containerStatuses") or []
    total = len(spec.get("containers") or [])
    ready = sum(1 for c in cstat if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in cstat)
    gates = spec.get("readinessGates") or []
    gates_txt = "<none>"
    if gates:
        conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
        ok = sum(1 for g in gates if conds.get(g.get("conditionType")) == "True")
        gates_txt = f"{ok}/{len(gates)}"
    return [_md(o).get("name"), f"{ready}/{total}", _pod_status(o), str(restarts), _age_of(o),
            _none(st.get("podIP")), _none(spec.get("nodeName")),
            _none(st.get("nominatedNodeName")), gates_txt]


def _node_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    status = "Unknown"
    for c in st.get("conditions") or []:
        if c.get("type") == "Ready":
            status = {"True": "Ready", "False": "NotReady"}.get(c.get("status"), "Unknown")
    if spec.get("unschedulable"):
        status += ",SchedulingDisabled"
    labels = _md(o).get("labels") or {}
    roles = sorted({k.split("/", 1)[1] for k in labels
                    if k.startswith("node-role.kubernetes.io/") and "/" in k} |
                   ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()))
    info = st.get("nodeInfo") or {}
    addrs = {a.get("type"): a.get("address") for a in st.get("addresses") or []}
    return [_md(o).get("name"), status, ",".join(r for r in roles if r) or "<none>", _age_of(o),
            info.get("kubeletVersion", ""), _none(addrs.get("InternalIP")),
            _none(addrs.get("ExternalIP")), _none(info.get("osImage")),
            _none(info.get("kernelVersion")), _none(info.get("containerRuntimeVersion"))]


def _deploy_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    n, i = _names_images(_containers(o))
    want = spec.get("replicas", 1)
    return [_md(o).get("name"), f"{st.get('readyReplicas', 0)}/{want}",
            st.get("updatedReplicas", 0), st.get("availableReplicas", 0), _age_of(o), n, i,
            _selector_str(spec.get("selector"))]


def _rs_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    n, i = _names_images(_containers(o))
    return [_md(o).get("name"), spec.get("replicas", 1), st.get("replicas", 0),
            st.get("readyReplicas", 0), _age_of(o), n, i, _selector_str(spec.get("selector"))]


def _ds_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    n, i = _names_images(_containers(o))
    ns = (spec.get("template") or {}).get("spec", {}).get("nodeSelector") or {}
    nsel = ",".join(f"{k}={v}" for k, v in sorted(ns.items())) or "<none>"
    return [_md(o).get("name"), st.get("desiredNumberScheduled", 0),
            st.get("currentNumberScheduled", 0), st.get("numberReady", 0),
            st.get("updatedNumberScheduled", 0), st.get("numberAvailable", 0), nsel,
            _age_of(o), n, i, _selector_str(spec.get("selector"))]


def _sts_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    n, i = _names_images(_containers(o))
    return [_md(o).get("name"), f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
            _age_of(o), n, i]


def _job_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    n, i = _names_images(_containers(o))
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    if conds.get("Complete") == "True":
        status = "Complete"
    elif conds.get("Failed") == "True":
        status = "Failed"
    elif _md(o).get("deletionTimestamp"):
        status = "Terminating"
    elif conds.get("SuccessCriteriaMet") == "True":
        status = "SuccessCriteriaMet"
    elif conds.get("FailureTarget") == "True":
        status = "FailureTarget"
    elif conds.get("Suspended") == "True":
        status = "Suspended"
    else:
        status = "Running"
    comp = spec.get("completions")
    if comp is not None:
        completions = f"{st.get('succeeded', 0)}/{comp}"
    else:
        par = spec.get("parallelism", 1)
        completions = f"{st.get('succeeded', 0)}/1 of {par}" if par > 1 else \
            f"{st.get('succeeded', 0)}/1"
    start, end = _parse_ts(st.get("startTime")), _parse_ts(st.get("completionTime"))
    if start is None:
        duration = ""
    else:
        stop = end or Clock.wall_now()
        duration = human_duration((stop - start).total_seconds())
    return [_md(o).get("name"), status, completions, duration, _age_of(o), n, i,
            _selector_str(spec.get("selector"))]


def _svc_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    typ = spec.get("type", "ClusterIP")
    ext = [i.get("ip") or i.get("hostname") for i in (st.get("loadBalancer") or {}).get(
        "ingress") or []] + list(spec.get("externalIPs") or [])
    if typ == "ExternalName":
        ext_txt = spec.get("externalName", "<none>")
    elif ext:
        ext_txt = ",".join(str(e) for e in ext)
    else:
        ext_txt = "<pending>" if typ == "LoadBalancer" else "<none>"
    ports = []
    for p in spec.get("ports") or []:
        txt = f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        if p.get("nodePort"):
            txt = f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}"
        ports.append(txt)
    sel = spec.get("selector") or {}
    return [_md(o).get("name"), typ, spec.get("clusterIP") or "<none>", ext_txt,
            ",".join(ports) or "<none>", _age_of(o),
            ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>"]


def _event_row(o: Obj) -> list[Any]:
    inv = o.get("involvedObject") or o.get("regarding") or {}
    last = (o.get("series") or {}).get("lastObservedTime") or o.get("lastTimestamp") or \
        o.get("eventTime") or o.get("deprecatedLastTimestamp")
    first = o.get("firstTimestamp") or o.get("eventTime") or o.get("deprecatedFirstTimestamp")
    src = o.get("source") or {}
    source = src.get("component") or o.get("reportingComponent") or \
        o.get("reportingController") or ""
    if src.get("host"):
        source += f", {src['host']}"
    obj_txt = f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}"
    count = (o.get("series") or {}).get("count") or o.get("count") or o.get("deprecatedCount") \
        or 1
    return [age(last), o.get("type", ""), o.get("reason", ""), obj_txt,
            inv.get("fieldPath", ""), source, o.get("message") or o.get("note") or "",
            age(first), count, _md(o).get("name")]


def _ns_row(o: Obj) -> list[Any]:
    return [_md(o).get("name"), (o.get("status") or {}).get("phase", ""), _age_of(o)]


def _cm_row(o: Obj) -> list[Any]:
    return [_md(o).get("name"), len(o.get("data") or {}) + len(o.get("binaryData") or {}),
            _age_of(o)]


def _secret_row(o: Obj) -> list[Any]:
    return [_md(o).get("name"), o.get("type", "Opaque"),
            len(o.get("data") or {}) + len(o.get("stringData") or {}), _age_of(o)]


def _sa_row(o: Obj) -> list[Any]:
    return [_md(o).get("name"), len(o.get("secrets") or []), _age_of(o)]


def _pdb_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return [_md(o).get("name"), str(spec.get("minAvailable", "N/A")),
            str(spec.get("maxUnavailable", "N/A")), st.get("disruptionsAllowed", 0), _age_of(o)]


def _lease_row(o: Obj) -> list[Any]:
    return [_md(o).get("name"), (o.get("spec") or {}).get("holderIdentity", ""), _age_of(o)]


def _crd_row(o: Obj) -> list[Any]:
    return [_md(o).get("name"), _md(o).get("creationTimestamp")]


def _ep_row(o: Obj) -> list[Any]:
    eps = []
    for s in o.get("subsets") or []:
        ports = [p.get("port") for p in s.get("ports") or []] or [None]
        for a in s.get("addresses") or []:
            for p in ports:
                eps.append(f"{a.get('ip')}:{p}" if p else str(a.get("ip")))
    txt = ",".join(eps[:3]) + (f" + {len(eps) - 3} more..." if len(eps) > 3 else "")
    return [_md(o).get("name"), txt or "<none>", _age_of(o)]


def _pvc_row(o: Obj) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    cap = (st.get("capacity") or {}).get("storage", "")
    modes = ",".join({"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                      "ReadWriteOncePod": "RWOP"}.get(m, m) for m in st.get("accessModes") or [])
    return [_md(o).get("name"), st.get("phase", ""), spec.get("volumeName", ""), cap, modes,
            spec.get("storageClassName") or "<unset>", "<unset>", _age_of(o),
            spec.get("volumeMode", "Filesystem")]


_S, _I = "string", "integer"
KIND_TABLES: dict[str, tuple[list[Col], RowFn]] = {
    "Pod": ([("Name", _S, 0), ("Ready", _S, 0), ("Status", _S, 0), ("Restarts", _S, 0),
             ("Age", _S, 0), ("IP", _S, 1), ("Node", _S, 1), ("Nominated Node", _S, 1),
             ("Readiness Gates", _S, 1)], _pod_row),
    "Node": ([("Name", _S, 0), ("Status", _S, 0), ("Roles", _S, 0), ("Age", _S, 0),
              ("Version", _S, 0), ("Internal-IP", _S, 1), ("External-IP", _S, 1),
              ("OS-Image", _S, 1), ("Kernel-Version", _S, 1), ("Container-Runtime", _S, 1)],
             _node_row),
    "Deployment": ([("Name", _S, 0), ("Ready", _S, 0), ("Up-to-date", _I, 0),
                    ("Available", _I, 0), ("Age", _S, 0), ("Containers", _S, 1),
                    ("Images", _S, 1), ("Selector", _S, 1)], _deploy_row),
    "ReplicaSet": ([("Name", _S, 0), ("Desired", _I, 0), ("Current", _I, 0), ("Ready", _I, 0),
                    ("Age", _S, 0), ("Containers", _S, 1), ("Images", _S, 1),
                    ("Selector", _S, 1)], _rs_row),
    "DaemonSet": ([("Name", _S, 0), ("Desired", _I, 0), ("Current", _I, 0), ("Ready", _I, 0),
                   ("Up-to-date", _I, 0), ("Available", _I, 0), ("Node Selector", _S, 0),
                   ("Age", _S, 0), ("Containers", _S, 1), ("Images", _S, 1),
                   ("Selector", _S, 1)], _ds_row),
    "StatefulSet": ([("Name", _S, 0), ("Ready", _S, 0), ("Age", _S, 0), ("Containers", _S, 1),
                     ("Images", _S, 1)], _sts_row),
    "Job": ([("Name", _S, 0), ("Status", _S, 0), ("Completions", _S, 0), ("Duration", _S, 0),
             ("Age", _S, 0), ("Containers", _S, 1), ("Images", _S, 1), ("Selector", _S, 1)],
            _job_row),
    "Service": ([("Name", _S, 0), ("Type", _S, 0), ("Cluster-IP", _S, 0),
                 ("External-IP", _S, 0), ("Port(s)", _S, 0), ("Age", _S, 0),
                 ("Selector", _S, 1)], _svc_row),
    "Event": ([("Last Seen", _S, 0), ("Type", _S, 0), ("Reason", _S, 0), ("Object", _S, 0),
               ("Subobject", _S, 1), ("Source", _S, 1), ("Message", _S, 0),
               ("First Seen", _S, 1), ("Count", _S, 1), ("Name", _S, 1)], _event_row),
    "Namespace": ([("Name", _S, 0), ("Status", _S, 0), ("Age", _S, 0)], _ns_row),
    "ConfigMap": ([("Name", _S, 0), ("Data", _S, 0), ("Age", _S, 0)], _cm_row),
    "Secret": ([("Name", _S, 0), ("Type", _S, 0), ("Data", _S, 0), ("Age", _S, 0)],
               _secret_row),
    "ServiceAccount": ([("Name", _S, 0), ("Secrets", _S, 0), ("Age", _S, 0)], _sa_row),
    "PodDisruptionBudget": ([("Name", _S, 0), ("Min Available", _S, 0),
                             ("Max Unavailable", _S, 0), ("Allowed Disruptions", _I, 0),
                             ("Age", _S, 0)], _pdb_row),
    "Lease": ([("Name", _S, 0), ("Holder", _S, 0), ("Age", _S, 0)], _lease_row),
    "CustomResourceDefinition": ([("Name", _S, 0), ("Created At", "date", 0)], _crd_row),
    "Endpoints": ([("Name", _S, 0), ("Endpoints", _S, 0), ("Age", _S, 0)], _ep_row),
    "PersistentVolumeClaim": ([("Name", _S, 0), ("Status", _S, 0), ("Volume", _S, 0),
                               ("Capacity", _S, 0), ("Access Modes", _S, 0),
                               ("StorageClass", _S, 0), ("VolumeAttributesClass", _S, 0),
                               ("Age", _S, 0), ("VolumeMode", _S, 1)], _pvc_row),
}


# ------------------------------------------------------------------ JSONPath subset
_TOKEN = re.compile(r"\.([A-Za-z0-9_\-/$]+)|\['([^']*)'\]|\[(\*|-?\d+)\]|\[\?\(@\.([^=!<>]+?)\s*"
                    r"(==|!=)\s*(?:\"([^\"]*)\"|'([^']*)'|([^\)]*))\)\]")


def jsonpath(obj: Any, expr: str) -> list[Any]:
    """Evaluate ``.a.b``, ``.a[0]``, ``.a[*].b``, ``.a[?(@.k=="v")].b`` (kubectl's subset)."""
    expr = expr.strip()
    if expr.startswith("{") and expr.endswith("}"):
        expr = expr[1:-1]
    if expr.startswith("$"):
        expr = expr[1:]
    cur = [obj]
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            return []
        pos = m.end()
        nxt: list[Any] = []
        key = m.group(1) if m.group(1) is not None else m.group(2)
        for v in cur:
            if key is not None:
                if isinstance(v, dict) and key in v:
                    nxt.append(v[key])
            elif m.group(3) is not None:
                if not isinstance(v, list):
                    continue
                if m.group(3) == "*":
                    nxt.extend(v)
                else:
                    i = int(m.group(3))
                    if -len(v) <= i < len(v):
                        nxt.append(v[i])
            else:
                fld, op = m.group(4), m.group(5)
                want = next((g for g in (m.group(6), m.group(7), m.group(8)) if g is not None),
                            "")
                items = v if isinstance(v, list) else [v]
                for it in items:
                    got = jsonpath(it, "." + fld.strip())
                    val = got[0] if got else None
                    sval = json.dumps(val) if isinstance(val, bool) else (
                        "" if val is None else str(val))
                    if (sval == want.strip()) == (op == "=="):
                        nxt.append(it)
        cur = nxt
    return cur


def _cell(values: list[Any], typ: str) -> Any:
    if not values:
        return None
    if typ == "date":
        return age(values[0])
    if len(values) == 1:
        v = values[0]
        if isinstance(v, (dict, list)):
            return json.dumps(v, separators=(",", ":"))
        return v
    return ",".join(json.dumps(v) if isinstance(v, (dict, list)) else str(v) for v in values)


def table_spec(rt: ResourceType) -> tuple[list[dict[str, Any]], RowFn]:
    """Column definitions and the row function for a resource type."""
    if rt.custom:
        cols = [{"name": "Name", "type": "string", "format": "name",
                 "description": "Name must be unique within a namespace.", "priority": 0}]
        pcs = rt.printer_columns
        if not pcs:
            pcs = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
        for pc in pcs:
            cols.append({"name": pc.get("name", ""), "type": pc.get("type", "string"),
                         "format": pc.get("format", ""),
                         "description": pc.get("description", ""),
                         "priority": int(pc.get("priority", 0))})

        def crow(o: Obj) -> list[Any]:
            return [_md(o).get("name")] + [
                _cell(jsonpath(o, pc.get("jsonPath", "")), pc.get("type", "string"))
                for pc in pcs]
        return cols, crow
    spec = KIND_TABLES.get(rt.kind)
    if spec is None:
        spec = ([("Name", _S, 0), ("Age", _S, 0)], lambda o: [_md(o).get("name"), _age_of(o)])
    colspecs, fn = spec
    cols = []
    for i, (name, typ, prio) in enumerate(colspecs):
        cols.append({"name": name, "type": "string" if typ == "date" else typ,
                     "format": "name" if name == "Name" and i == 0 else "",
                     "description": "", "priority": prio})
    return cols, fn


def row_object(o: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return o
    md = dict(_md(o))
    md.pop("managedFields", None)
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": md}


def table(rt: ResourceType, items: list[Obj], include: str = "Metadata",
          list_meta: Obj | None = None, headers: bool = True) -> Obj:
    cols, fn = table_spec(rt)
    rows = []
    for o in items:
        row: Obj = {"cells": fn(o)}
        ro = row_object(o, include)
        if ro is not None:
            row["object"] = ro
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta or {},
            "columnDefinitions": cols if headers else None, "rows": rows}
