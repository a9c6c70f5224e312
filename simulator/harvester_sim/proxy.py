"""Registry of HTTP handlers behind the API server's proxy subresources.

Simulated programs register a handler when they start serving (the nginx ISO server behind
a Service, a kubelet's ``/stats/summary``); the API server's ``services/<name>:<port>/proxy``
and ``nodes/<name>/proxy`` paths forward to them. A Service proxy only reaches handlers of
pods that are Ready and selected by the Service (the API server checks that).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

# handler(method, path, query, headers, body) -> (status, headers, body)
ProxyHandler = Callable[[str, str, str, dict[str, str], bytes],
                        tuple[int, dict[str, str], bytes]]


@dataclass(frozen=True)
class PodEndpoint:
    namespace: str
    pod: str
    port: int


class ProxyRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[PodEndpoint, ProxyHandler] = {}
        self._tls: dict[PodEndpoint, bytes] = {}
        self._nodes: dict[str, ProxyHandler] = {}

    def register_pod(self, namespace: str, pod: str, port: int, handler: ProxyHandler,
                     tls_ca: bytes | None = None) -> None:
        """``tls_ca``: the port speaks HTTPS with a certificate signed by this CA (PEM)."""
        with self._lock:
            ep = PodEndpoint(namespace, pod, port)
            self._pods[ep] = handler
            if tls_ca is not None:
                self._tls[ep] = tls_ca
            else:
                self._tls.pop(ep, None)

    def unregister_pod(self, namespace: str, pod: str) -> None:
        with self._lock:
            for k in [k for k in self._pods if k.namespace == namespace and k.pod == pod]:
                del self._pods[k]
                self._tls.pop(k, None)

    def pod_tls_ca(self, namespace: str, pod: str, port: int) -> bytes | None:
        with self._lock:
            return self._tls.get(PodEndpoint(namespace, pod, port))

    def pod_handler(self, namespace: str, pod: str, port: int) -> ProxyHandler | None:
        with self._lock:
            return self._pods.get(PodEndpoint(namespace, pod, port))

    def register_node(self, node: str, handler: ProxyHandler) -> None:
        with self._lock:
            self._nodes[node] = handler

    def unregister_node(self, node: str) -> None:
        with self._lock:
            self._nodes.pop(node, None)

    def node_handler(self, node: str) -> ProxyHandler | None:
        with self._lock:
            return self._nodes.get(node)
