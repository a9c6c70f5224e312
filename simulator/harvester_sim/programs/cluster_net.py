"""In-cluster HTTP for programs: what a container's ``curl http://<service>...`` reaches.

A host name resolves the way cluster DNS (CoreDNS ``kubernetes`` plugin, search path
``<ns>.svc.cluster.local svc.cluster.local cluster.local``) resolves it: ``<svc>``,
``<svc>.<ns>``, ``<svc>.<ns>.svc`` and ``<svc>.<ns>.svc.cluster.local`` name the Service
``<ns>/<svc>`` (the bare name in the caller's namespace). The Service port's ``targetPort``
(number or container-port name) and the ready endpoints of its EndpointSlices (label
``kubernetes.io/service-name``) give the pod; kube-proxy picks one: here the first by name.
The request goes to the HTTP handler the pod's program registered for that port
(``world.proxies.register_pod``).

Failures are what curl reports: an unknown name ``Could not resolve host`` (exit 6), no
ready endpoint or no listener ``Failed to connect ... Connection refused`` (exit 7), an
HTTPS port whose certificate is not signed by the CA given with ``--cacert`` ``SSL
certificate problem: unable to get local issuer certificate`` (exit 60), and with ``-f`` an
HTTP status >= 400 ``The requested URL returned error: <code>`` (exit 22).

Upstream: cluster DNS as coredns/coredns ``plugin/kubernetes`` names Services (the search
path RKE2's kubelet writes); curl's exit codes and messages as curl/curl
``docs/libcurl/libcurl-errors.md`` / the ``curl`` tool (6, 7, 22, 60); Service routing as
kube-proxy picks a ready endpoint of the Service's EndpointSlices.
Not modelled: pod DNS records and headless per-pod names, ExternalName Services, session
affinity, IPv6, timeouts (not checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..controllers import podutil as pu

SERVICE_NAME = "kubernetes.io/service-name"
CLUSTER_DOMAIN = "cluster.local"


class CurlError(Exception):
    """A failed transfer: ``code`` is curl's exit code, ``str()`` its message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


def resolve(host: str, from_ns: str) -> tuple[str, str] | None:
    """``(namespace, service)`` a cluster DNS name stands for (None for other names)."""
    h = host.rstrip(".").lower()
    for suffix in (f".svc.{CLUSTER_DOMAIN}", ".svc"):
        if h.endswith(suffix):
            h = h[: -len(suffix)]
            break
    parts = h.split(".")
    if len(parts) == 1 and parts[0]:
        return from_ns, parts[0]
    if len(parts) == 2 and all(parts):
        return parts[1], parts[0]
    return None


def _target_port(svc: dict[str, Any], port: int, pod: dict[str, Any] | None) -> int | None:
    for sp in (svc.get("spec") or {}).get("ports") or []:
        if int(sp.get("port") or 0) != port:
            continue
        tp = sp.get("targetPort", port)
        if isinstance(tp, int) or (isinstance(tp, str) and tp.isdigit()):
            return int(tp)
        for c in ((pod or {}).get("spec") or {}).get("containers") or []:
            for cp in c.get("ports") or []:
                if cp.get("name") == tp:
                    return int(cp.get("containerPort") or 0)
        return None
    return None


def request(world: Any, url: str, from_ns: str, method: str = "GET",
            headers: dict[str, str] | None = None, ca_pem: str | bytes | None = None,
            fail: bool = True) -> Response:
    """Send one request to a Service URL the way curl in a pod of ``from_ns`` would."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    scheme = parts.scheme or "http"
    port = parts.port or (443 if scheme == "https" else 80)
    target = resolve(host, from_ns)
    svc = None
    if target is not None:
        svc = pu.informer(world, "v1", "Service").get(*target)
    if svc is None:
        raise CurlError(6, f"curl: (6) Could not resolve host: {host}")
    slices = pu.informer(world, "discovery.k8s.io/v1", "EndpointSlice")
    pods = pu.informer(world, "v1", "Pod")
    candidates: list[tuple[str, str]] = []
    for sl in slices.in_namespace(target[0]):
        if (sl["metadata"].get("labels") or {}).get(SERVICE_NAME) != target[1]:
            continue
        for ep in sl.get("endpoints") or []:
            ref = ep.get("targetRef") or {}
            if (ep.get("conditions") or {}).get("ready") and ref.get("kind") == "Pod":
                candidates.append((ref.get("namespace") or target[0], str(ref.get("name"))))
    refused = CurlError(7, f"curl: (7) Failed to connect to {host} port {port} after 0 ms: "
                           "Couldn't connect to server")
    for ns, name in sorted(candidates):
        pod = pods.get(ns, name)
        tport = _target_port(svc, port, pod)
        if tport is None:
            continue
        handler = world.proxies.pod_handler(ns, name, tport)
        if handler is None:
            continue
        tls_ca = world.proxies.pod_tls_ca(ns, name, tport)
        if scheme == "https":
            if tls_ca is None:
                raise CurlError(35, "curl: (35) OpenSSL/3.1.4: error:0A00010B:SSL routines::"
                                    "wrong version number")
            given = ca_pem.encode() if isinstance(ca_pem, str) else ca_pem
            if given is None or given.strip() != tls_ca.strip():
                raise CurlError(60, "curl: (60) SSL certificate problem: unable to get local "
                                    "issuer certificate")
        elif tls_ca is not None:
            raise CurlError(52, "curl: (52) Empty reply from server")
        path = parts.path or "/"
        status, hdrs, body = handler(method, path, parts.query, dict(headers or {}), b"")
        if fail and status >= 400:
            raise CurlError(22, f"curl: (22) The requested URL returned error: {status}")
        return Response(status, hdrs, body)
    raise refused
