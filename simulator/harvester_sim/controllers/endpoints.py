"""The endpoints and endpointslice controllers, plus the ``kubernetes`` Service.

For every Service with a selector: an ``Endpoints`` object of the same name (one subset:
``addresses`` of Ready pods, ``notReadyAddresses`` of the others, ports resolved from
numeric or named ``targetPort``) and one ``EndpointSlice`` ``<svc>-<hash>`` (labels
``kubernetes.io/service-name`` and ``endpointslice.kubernetes.io/managed-by``, conditions
ready/serving/terminating, owned by the Service). Pods without an IP are left out; terminal
pods are dropped. ``publishNotReadyAddresses`` makes every pod ready.

``default/kubernetes`` (ClusterIP 10.53.0.1:443) points at ``127.0.0.1:<api port>`` once the
API server has put its port in ``world.extras['api_port']``.

Upstream: kubernetes/kubernetes ``v1.32.4`` (RKE2 ``v1.32.4+rke2r1``, Harvester
v1.5.1) and ``v1.33.3`` (RKE2 ``v1.33.3+rke2r1``, Harvester v1.6.0),
``pkg/controller/endpoint/endpoints_controller.go`` and
``pkg/controller/endpointslice/`` (with ``staging/src/k8s.io/endpointslice/``); the
``default/kubernetes`` Endpoints follow the API server's ``pkg/controlplane/reconcilers/``.
Not modelled: the EndpointSliceMirroring controller (selector-less Services), slices split
at 100 endpoints and Endpoints truncated at 1000, topology hints / ``trafficDistribution``,
dual-stack, the ``endpoints.kubernetes.io/last-change-trigger-time`` annotation, the pod's
``hostname`` in its address (upstream sets it when the pod's ``subdomain`` is the Service).
"""

from __future__ import annotations

from typing import Any

from ..api import errors
from ..api.selectors import LabelSelector, from_match_labels
from . import podutil as pu

MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SLICE_CONTROLLER = "endpointslice-controller.k8s.io"
SERVICE_NAME = "kubernetes.io/service-name"
API_POLL_WALL_S = 2.0


class Endpoints:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.clock = world.clock
        self.client = world.client_for("endpoint-controller")
        self.svcs = pu.informer(world, "v1", "Service")
        self.pods = pu.informer(world, "v1", "Pod")
        self.eps = pu.informer(world, "v1", "Endpoints")
        self.slices = pu.informer(world, "discovery.k8s.io/v1", "EndpointSlice")
        self.batch = pu.Batcher(world, self.sync)
        self._sel: dict[pu.Key, tuple[str, LabelSelector | None]] = {}
        self.api_port: int | None = None
        self.svcs.add_handler(self._on_svc)
        self.pods.add_handler(self._on_pod)
        for s in self.svcs.all():
            self.batch.add(pu.key_of(s))
        world.runtime.call_soon(self._api_service)

    # ------------------------------------------------------------------ events
    def _selector(self, svc: dict[str, Any]) -> LabelSelector | None:
        k = pu.key_of(svc)
        rv = svc["metadata"].get("resourceVersion", "")
        hit = self._sel.get(k)
        if hit is None or hit[0] != rv:
            sel = (svc.get("spec") or {}).get("selector")
            hit = (rv, from_match_labels(sel) if sel else None)
            self._sel[k] = hit
        return hit[1]

    def _on_svc(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = pu.key_of(obj)
        if type_ == "DELETED":
            self._sel.pop(key, None)
            if self._selector_of(obj) is not None:
                self.client.delete("v1", "Endpoints", key[1], key[0])
            return
        self.batch.add(key)

    @staticmethod
    def _selector_of(svc: dict[str, Any]) -> Any:
        return (svc.get("spec") or {}).get("selector")

    def _on_pod(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        ns = obj["metadata"].get("namespace", "")
        if not self.svcs.by_ns.get(ns):
            return
        if old is not None and type_ == "MODIFIED" and _pod_view(obj) == _pod_view(old):
            return
        labels = [obj["metadata"].get("labels") or {}]
        if old is not None:
            labels.append(old["metadata"].get("labels") or {})
        for svc in self.svcs.in_namespace(ns):
            sel = self._selector(svc)
            if sel is not None and any(sel.matches(lbl) for lbl in labels):
                self.batch.add(pu.key_of(svc))

    # ------------------------------------------------------------------ sync
    def sync(self, key: pu.Key) -> None:
        svc = self.svcs.get(*key)
        if svc is None or pu.is_deleting(svc):
            return
        sel = self._selector(svc)
        if sel is None:
            return
        spec = svc.get("spec") or {}
        publish_all = bool(spec.get("publishNotReadyAddresses"))
        pods = sorted((p for p in self.pods.in_namespace(key[0])
                       if sel.matches(p["metadata"].get("labels") or {}) and
                       not pu.is_terminal(p) and (p.get("status") or {}).get("podIP")),
                      key=lambda p: p["metadata"]["name"])
        ready, not_ready, slice_eps = [], [], []
        ports: list[dict[str, Any]] = []
        for p in pods:
            ok = publish_all or (pu.is_pod_ready(p) and not pu.is_deleting(p))
            addr = {"ip": p["status"]["podIP"], "nodeName": p["spec"].get("nodeName", ""),
                    "targetRef": {"kind": "Pod", "namespace": key[0],
                                  "name": p["metadata"]["name"],
                                  "uid": p["metadata"]["uid"]}}
            (ready if ok else not_ready).append(addr)
            slice_eps.append({
                "addresses": [addr["ip"]],
                "conditions": {"ready": ok, "serving": publish_all or pu.is_pod_ready(p),
                               "terminating": pu.is_deleting(p)},
                "nodeName": addr["nodeName"], "targetRef": addr["targetRef"]})
            if not ports:
                ports = _ports(svc, p)
        if not ports and pods:
            ports = _ports(svc, pods[0])
        if not pods:
            ports = _ports(svc, None)
        subset: dict[str, Any] = {}
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        labels = dict(svc["metadata"].get("labels") or {})
        ep = {"apiVersion": "v1", "kind": "Endpoints",
              "metadata": {"name": key[1], "namespace": key[0], "labels": labels}}
        if subset:
            subset["ports"] = ports
            ep["subsets"] = [subset]
        self._apply("v1", "Endpoints", key, ep, self.eps,
                    lambda cur: {k: cur.get(k) for k in ("subsets",)} | {
                        "labels": cur["metadata"].get("labels") or {}})
        sl_labels = {**labels, SERVICE_NAME: key[1], MANAGED_BY: SLICE_CONTROLLER}
        name = f"{key[1]}-{pu.safe_encode(int(svc['metadata']['uid'][:8], 16), 5)}"
        sl = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": name, "namespace": key[0], "labels": sl_labels,
                           "ownerReferences": [pu.owner_ref(svc)]},
              "addressType": "IPv4", "endpoints": slice_eps,
              "ports": [{k: v for k, v in p.items()} for p in ports]}
        self._apply("discovery.k8s.io/v1", "EndpointSlice", (key[0], name), sl, self.slices,
                    lambda cur: {k: cur.get(k) for k in ("endpoints", "ports", "addressType")}
                    | {"labels": cur["metadata"].get("labels") or {}})

    def _apply(self, api_version: str, kind: str, key: pu.Key, want: dict[str, Any],
               inf: pu.Informer, view: Any) -> None:
        cur = inf.get(*key)
        if cur is not None and view(cur) == view(want):
            return
        if cur is None:
            try:
                inf.observe(self.client.create(want, key[0]))
                return
            except errors.ApiError as exc:
                if exc.code != 409:
                    raise

        def fn(obj: dict[str, Any]) -> dict[str, Any]:
            for k, v in want.items():
                if k != "metadata":
                    obj[k] = v
            if "subsets" not in want:
                obj.pop("subsets", None)
            obj["metadata"]["labels"] = want["metadata"].get("labels") or {}
            return obj

        inf.observe(pu.ignore_missing(
            lambda: self.client.modify(api_version, kind, key[1], fn, key[0])))

    # ------------------------------------------------------------------ kubernetes service
    def _api_service(self) -> None:
        port = self.world.extras.get("api_port")
        if port and int(port) != self.api_port:
            self.api_port = int(port)
            self._write_kubernetes(int(port))
        self.world.runtime.after(self.clock.speed * API_POLL_WALL_S, self._api_service)

    def _write_kubernetes(self, port: int) -> None:
        labels = {"component": "apiserver", "provider": "kubernetes"}
        if self.svcs.get("default", "kubernetes") is None:
            svc = {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
                   "spec": {"type": "ClusterIP", "clusterIP": "10.53.0.1",
                            "clusterIPs": ["10.53.0.1"], "sessionAffinity": "None",
                            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                            "internalTrafficPolicy": "Cluster",
                            "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                       "targetPort": port}]}}
            try:
                self.svcs.observe(self.client.create(svc, "default"))
            except errors.ApiError as exc:
                if exc.code != 409:
                    raise
        ports = [{"name": "https", "port": port, "protocol": "TCP"}]
        ep = {"apiVersion": "v1", "kind": "Endpoints",
              "metadata": {"name": "kubernetes", "namespace": "default",
                           "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
              "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": ports}]}
        self._apply("v1", "Endpoints", ("default", "kubernetes"), ep, self.eps,
                    lambda cur: cur.get("subsets"))
        sl = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": "kubernetes", "namespace": "default",
                           "labels": {SERVICE_NAME: "kubernetes"}},
              "addressType": "IPv4",
              "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
              "ports": ports}
        self._apply("discovery.k8s.io/v1", "EndpointSlice", ("default", "kubernetes"), sl,
                    self.slices, lambda cur: (cur.get("endpoints"), cur.get("ports")))


def _pod_view(pod: dict[str, Any]) -> tuple[Any, ...]:
    st = pod.get("status") or {}
    return (pod["metadata"].get("labels"), st.get("podIP"), pu.is_pod_ready(pod),
            pu.is_deleting(pod), pu.phase(pod), (pod.get("spec") or {}).get("nodeName"))


def _ports(svc: dict[str, Any], pod: dict[str, Any] | None) -> list[dict[str, Any]]:
    out = []
    for sp in (svc.get("spec") or {}).get("ports") or []:
        tp = sp.get("targetPort", sp.get("port"))
        port: Any = tp
        if isinstance(tp, str) and not tp.isdigit():
            port = None
            for c in ((pod or {}).get("spec") or {}).get("containers") or []:
                for cp in c.get("ports") or []:
                    if cp.get("name") == tp:
                        port = cp.get("containerPort")
            if port is None:
                continue
        p = {"port": int(port), "protocol": sp.get("protocol", "TCP")}
        if sp.get("name"):
            p = {"name": sp["name"], **p}
        out.append(p)
    return out


def setup(world: Any) -> Endpoints:
    return Endpoints(world)
