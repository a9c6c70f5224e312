"""The HTTPS Kubernetes API server in front of the store.

One thread per connection (HTTP/1.1 keep-alive, chunked watch streams), bearer-token
authentication, an authorization hook, legacy discovery + a minimal OpenAPI v3, Tables for
``kubectl get``, the four patch types, the HTTP side of subresources (status and finalize
here; what scale, eviction, log, binding, token, reviews and the service and node proxy do is
:mod:`.subresources`) and fault injection for external clients.

``ApiServer(world).start()`` serves ``world.store``; ``server.url``, ``server.ca_pem``,
``server.token`` and ``server.write_kubeconfig(path)`` are what clients need.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import parse_qs, urlsplit

import yaml

from ..clock import Clock
from . import discovery, errors, openapi, protobuf, routing, subresources, tables, tls
from .apply import ManagedFields, server_side_apply
from .auth import Authenticator, Authorizer
from .patches import PatchError, json_patch, merge_patch, strategic_merge
from .rbac import RBACAuthorizer, UserInfo
from .rbac import Request as AuthzRequest
from .resources import ResourceType
from .selectors import parse_field_selector, parse_label_selector
from .store import Event, Obj, Store, Watcher

log = logging.getLogger("harvester_sim.api.server")

JSON = "application/json"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
CONFLICT_VERBS = ("update", "patch", "delete")
# kinds whose PUT creates a missing object (rest.Updater AllowCreateOnUpdate)
CREATE_ON_UPDATE = {("", "events"), ("events.k8s.io", "events"), ("", "endpoints"),
                    ("coordination.k8s.io", "leases"), ("rbac.authorization.k8s.io", "roles"),
                    ("rbac.authorization.k8s.io", "rolebindings"),
                    ("rbac.authorization.k8s.io", "clusterroles"),
                    ("rbac.authorization.k8s.io", "clusterrolebindings"),
                    ("discovery.k8s.io", "endpointslices")}
# kinds whose DELETE answers with the object even once it is gone (ReturnDeletedObject)
RETURNS_DELETED = {("", "pods"), ("", "serviceaccounts"), ("storage.k8s.io", "storageclasses")}
# create-only review kinds answered from the authenticator/authorizer, never stored
# media types a client may accept that the simulator never produces (it answers JSON)
_UNSERVED_MEDIA = frozenset({protobuf.MEDIA_TYPE, "application/cbor", "application/cbor-seq"})
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml",
               "application/apply-patch+cbor")


def _truthy(v: str | None) -> bool:
    """apimachinery query booleans: anything but '', '0' and 'false' is true."""
    return v is not None and v.lower() not in ("", "0", "false")


class Response(Exception):
    """A finished response raised from deep inside a handler."""

    def __init__(self, code: int, body: bytes, ctype: str = JSON,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.body = body
        self.ctype = ctype
        self.headers = headers or {}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr: tuple[str, int], handler: type, api: ApiServer) -> None:
        self.api = api
        super().__init__(addr, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = self.socket.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wrapped = self.api.ssl_ctx.wrap_socket(sock, server_side=True,
                                               do_handshake_on_connect=False)
        with self.api.conns_lock:
            self.api.conns.add(wrapped)
        return wrapped, addr

    def shutdown_request(self, request: Any) -> None:
        with self.api.conns_lock:
            self.api.conns.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection error from %s", client_address, exc_info=True)


def _serving_cert_days(world: Any) -> float:
    """Validity of the serving certificate: a year, or ``days`` (default 3) of an armed
    ``cert_near_expiry`` fault (what the API server certificate pre-flight check reads)."""
    faults = getattr(world, "faults", None)
    spec = faults.match("cert_near_expiry", endpoint="apiserver") if faults else None
    if spec is None:
        return 365.0
    return float(spec.get("days", (spec.get("params") or {}).get("days", 3)))


class ApiServer:
    """A Kubernetes API server over ``world.store`` on 127.0.0.1."""

    def __init__(self, world: Any, host: str = "127.0.0.1", port: int = 0,
                 tokens: dict[str, str] | None = None, authorizer: Authorizer | None = None,
                 bookmark_interval: float = 5.0) -> None:
        self.world = world
        self.store: Store = world.store
        self.registry = self.store.registry
        self.host = host
        self.port = port
        self.auth = Authenticator(tokens, sa_lookup=self._service_account_uid)
        # RBAC unless a legacy hook ``authorizer(user, verb, resource, ns, name)`` is given
        self.authorizer: Authorizer | None = authorizer
        self.rbac = RBACAuthorizer(self.store)
        self.bookmark_interval = bookmark_interval
        self.certs = tls.generate(serving_days=_serving_cert_days(world))
        self.ssl_ctx = self.certs.ssl_context()
        self.managed = ManagedFields()
        self.item_json = ItemJson()
        self._stats_lock = threading.Lock()
        self._by_verb: dict[str, int] = {}
        self._by_resource: dict[str, int] = {}
        self._by_verb_resource: dict[str, int] = {}
        self._by_agent: dict[str, int] = {}
        self._by_agent_request: dict[str, dict[str, int]] = {}
        self._by_code: dict[str, int] = {}
        self._total = 0
        self._faults_injected: dict[str, int] = {}
        # kube-apiserver's audit log (audit.k8s.io/v1 Events, level Metadata, stage
        # ResponseComplete) of external clients' resource requests, kept while this is a list
        # (off by default; tests switch it on with ``server.audit = []``)
        self.audit: list[dict[str, Any]] | None = None
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()
        # open client connections (an outage resets them) and the outage state
        self.conns: set[Any] = set()
        self.conns_lock = threading.Lock()
        self._serve_lock = threading.Lock()
        self.down = False
        # after an ``api_restart``: the resourceVersion the new watch cache starts from; a
        # watch resumed from an older one is answered 410 Expired
        self.watch_floor = 0
        self.outages: list[dict[str, Any]] = []
        self.openapi = openapi.OpenAPI(self.registry)
        self.openapi_v2 = openapi.OpenAPIV2(self.registry)

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> ApiServer:
        self._listen()
        threading.Thread(target=self._outage_loop, name="harvester-sim-api-outages",
                         daemon=True).start()
        extras = getattr(self.world, "extras", None)
        if isinstance(extras, dict):
            extras["api_server"] = self
            extras["api_stats"] = self.stats
            # kube-apiserver's endpoint reconciler publishes its address in the `kubernetes`
            # Service's Endpoints/EndpointSlice (controllers/endpoints.py writes them)
            extras["api_port"] = self.port
        return self

    def _listen(self) -> None:
        """Open the listening socket (on the same port after an outage) and serve."""
        for attempt in range(50):
            try:
                httpd = _HTTPServer((self.host, self.port), _Handler, self)
                break
            except OSError:
                if attempt == 49 or not self.port:
                    raise
                time.sleep(0.1)
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(target=httpd.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="harvester-sim-api", daemon=True)
        self._thread.start()

    def _close(self) -> None:
        """Stop listening (new connections are refused) and reset every open connection
        (a watch stream ends without its final chunk)."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        with self.conns_lock:
            conns = list(self.conns)
            self.conns.clear()
        for conn in conns:
            try:
                # the plain socket's shutdown: the TLS object stays for the thread using it
                socket.socket.shutdown(conn, socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.store.drop_watchers(1.0)
        with self._serve_lock:
            httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    # ------------------------------------------------------------------ outages
    def _outage_loop(self) -> None:
        """Ask for ``api_outage`` / ``api_restart`` faults (context ``endpoint=apiserver``)
        every 50 ms of wall time and carry out the one that fires."""
        faults = getattr(self.world, "faults", None)
        if faults is None:
            return
        ctx = {"endpoint": "apiserver"}
        while not self.stopping.wait(0.05):
            spec = self._fault("api_restart", ctx)
            if spec is not None:
                self.outage("api_restart", spec)
                continue
            spec = self._fault("api_outage", ctx)
            if spec is not None:
                self.outage("api_outage", spec)

    def outage(self, kind: str, spec: dict[str, Any]) -> None:
        """Go down for ``seconds`` simulated seconds, then serve again on the same port.

        ``api_outage`` (default 60 s): what clients of a control-plane node see while it
        reboots (or while kube-vip moves the VIP off it): connections refused, open ones
        reset. ``api_restart`` (default 0 s): kube-apiserver restarted; its new watch cache
        starts at the current resourceVersion, so a watch resumed from an older one gets a
        410 Expired ERROR event (``watch_cache.go`` ``getAllEventsSinceLocked``: "too old
        resource version") and the client must list again."""
        clock = self.store.clock
        default = 60.0 if kind == "api_outage" else 0.0
        seconds = float(spec.get("seconds", default))
        started = clock.now()
        with self._serve_lock:
            if self.stopping.is_set():
                return
            self.down = True
            self._close()
            if kind == "api_restart":
                with self.store.lock:
                    self.watch_floor = max(self.watch_floor, self.store.current_rv())
        timeline = getattr(self.world, "timeline", None)
        if timeline is not None:
            timeline.record(kind, seconds=seconds, watch_floor=self.watch_floor)
        # simulated seconds: a stall of the runtime (a held clock) does not shorten it
        clock.sleep_until(started + seconds, self.stopping)
        with self._serve_lock:
            if not self.stopping.is_set():
                self._listen()
            self.down = False
        self.outages.append({"kind": kind, "t": round(started, 3),
                             "seconds": round(clock.now() - started, 3)})
        if timeline is not None:
            timeline.record(f"{kind}_over", down_s=round(clock.now() - started, 3))

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        return self.certs.ca_pem

    @property
    def token(self) -> str:
        return self.auth.token_for("admin")

    def kubeconfig(self, user: str = "admin", context: str = "harvester-sim",
                   token: str | None = None) -> dict[str, Any]:
        """A kubeconfig for static user ``user``, or for ``token`` (named ``user``)."""
        import base64

        return {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": context, "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(self.ca_pem).decode()}}],
            "users": [{"name": user, "user": {
                "token": token if token is not None else self.auth.token_for(user)}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": user}}],
            "current-context": context,
        }

    def write_kubeconfig(self, path: str | Path, user: str = "admin",
                         context: str = "harvester-sim", token: str | None = None) -> Path:
        """Write atomically (a reader never sees a half-written kubeconfig)."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(yaml.safe_dump(self.kubeconfig(user, context, token), sort_keys=False))
        tmp.chmod(0o600)
        tmp.replace(p)
        return p

    # ----------------------------------------------------------------- identity
    def _service_account_uid(self, namespace: str, name: str) -> str | None:
        rt = self.registry.get("", "v1", "serviceaccounts")
        obj = self.store.get_ref(rt, namespace, name) if rt is not None else None
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return None
        return str(obj["metadata"].get("uid") or "")

    def service_account_token(self, namespace: str, name: str, expiration_seconds: int = 3600,
                              create: bool = True) -> str:
        """A bound token for ServiceAccount ``namespace/name`` (created, with its namespace,
        when missing and ``create``), as ``kubectl create token`` would get."""
        rt = self.registry.get("", "v1", "serviceaccounts")
        assert rt is not None
        uid = self._service_account_uid(namespace, name)
        if uid is None:
            if not create:
                raise errors.not_found("serviceaccounts", "", name)
            ns_rt = self.registry.get("", "v1", "namespaces")
            assert ns_rt is not None
            if self.store.get_ref(ns_rt, None, namespace) is None:
                self.store.create(ns_rt, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": namespace}})
            obj = self.store.create(rt, {"apiVersion": "v1", "kind": "ServiceAccount",
                                         "metadata": {"name": name, "namespace": namespace}},
                                    namespace)
            uid = str(obj["metadata"]["uid"])
        token, _ = self.auth.issue_service_account_token(namespace, name, uid,
                                                         expiration_seconds)
        return token

    def write_service_account_kubeconfig(self, path: str | Path, namespace: str, name: str,
                                         expiration_seconds: int = 86400) -> Path:
        token = self.service_account_token(namespace, name, expiration_seconds)
        return self.write_kubeconfig(path, f"system:serviceaccount:{namespace}:{name}",
                                     token=token)

    def authorize(self, user: UserInfo, req: AuthzRequest) -> tuple[bool, str]:
        """(allowed, reason): RBAC, or the legacy hook when one was given."""
        if self.authorizer is not None:
            res = req.full_resource if req.resource_request else req.path
            return bool(self.authorizer(user.name, req.verb, res, req.namespace or None,
                                        req.name or None)), ""
        return self.rbac.authorize(user, req)

    # -------------------------------------------------------------------- stats
    def count_request(self, agent: str, key: str) -> None:
        """Per user agent: ``verb group/resource`` (or ``verb /path``) -> requests."""
        with self._stats_lock:
            per = self._by_agent_request.setdefault(agent, {})
            per[key] = per.get(key, 0) + 1

    def count(self, verb: str, resource: str, agent: str) -> None:
        with self._stats_lock:
            self._total += 1
            self._by_verb[verb] = self._by_verb.get(verb, 0) + 1
            self._by_resource[resource] = self._by_resource.get(resource, 0) + 1
            vr = f"{verb} {resource}"
            self._by_verb_resource[vr] = self._by_verb_resource.get(vr, 0) + 1
            self._by_agent[agent] = self._by_agent.get(agent, 0) + 1

    def audit_event(self, ctx: dict[str, Any], code: int, received: float,
                    stage: str = "ResponseComplete") -> None:
        """Append one audit Event (the fields kube-apiserver writes at level Metadata); a
        watch is logged when its response starts (``ResponseStarted``, as for every
        long-running request)."""
        with self._stats_lock:
            if self.audit is None:
                return
            self.audit.append({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
                "auditID": str(uuid.uuid4()), "stage": stage,
                "verb": ctx.get("verb"), "user": {"username": ctx.get("user")},
                "userAgent": ctx.get("user_agent_full") or ctx.get("user_agent"),
                "objectRef": {"resource": ctx.get("resource"),
                              "namespace": ctx.get("namespace") or None,
                              "name": ctx.get("name") or None,
                              "apiGroup": ctx.get("group") or None},
                "responseStatus": {"code": code},
                "requestReceivedTimestamp": Clock.rfc3339_micro(received),
                "stageTimestamp": Clock.rfc3339_micro(Clock.wall_time())})

    def count_code(self, code: int) -> None:
        with self._stats_lock:
            k = str(code)
            self._by_code[k] = self._by_code.get(k, 0) + 1

    def stats(self) -> dict[str, Any]:
        """API request counts (external clients only) for the run report."""
        with self._stats_lock:
            return {"total": self._total,
                    "by_verb": dict(sorted(self._by_verb.items())),
                    "by_resource": dict(sorted(self._by_resource.items())),
                    "by_verb_resource": dict(sorted(self._by_verb_resource.items())),
                    "by_user_agent": dict(sorted(self._by_agent.items())),
                    "by_code": dict(sorted(self._by_code.items())),
                    "by_user_agent_request": {a: dict(sorted(v.items())) for a, v in
                                              sorted(self._by_agent_request.items())},
                    "faults_injected": dict(self._faults_injected),
                    "watchers": self.store.watcher_count()}

    # ------------------------------------------------------------------- faults
    def _fault(self, kind: str, ctx: dict[str, Any],
               when: Any = None) -> dict[str, Any] | None:
        """The scenario fault of ``kind`` that fires for this request, else None. The fault
        engine decides (target, trigger ``at``/``on``/``probability``, ``times``,
        ``fraction``) and records it in ``faults.fired``."""
        faults = getattr(self.world, "faults", None)
        spec = faults.match(kind, when=when, **ctx) if faults is not None else None
        if spec is not None:
            with self._stats_lock:
                self._faults_injected[kind] = self._faults_injected.get(kind, 0) + 1
        return spec  # type: ignore[no-any-return]

    def inject_faults(self, ctx: dict[str, Any]) -> None:
        """Latency, 5xx and write conflicts for external clients (scenario faults)."""
        spec = self._fault("api_latency", ctx)
        if spec is not None:
            time.sleep(float(spec.get("seconds", 0.5)))
        spec = self._fault("api_error", ctx)
        if spec is not None:
            code = int(spec.get("code", 500))
            reason = {500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
                      429: "TooManyRequests"}.get(code, "InternalError")
            msg = spec.get("message") or (
                "Internal error occurred: injected fault" if code == 500 else
                "the server is currently unable to handle the request")
            raise errors.ApiError(code, reason, msg)
        # a real apiserver's 409 Conflict ("the object has been modified") answers writes to
        # an existing object (update, patch, delete); a create collides only as AlreadyExists
        if ctx.get("verb") in CONFLICT_VERBS and self._fault("api_conflict", ctx) is not None:
            raise errors.conflict(ctx.get("resource", ""), ctx.get("group", ""),
                                  ctx.get("name") or "")

    def watch_cut(self, ctx: dict[str, Any], open_s: float = float("inf")) -> bool:
        """Cut a watch stream open for ``open_s`` simulated seconds? (``watch_cut``'s
        ``seconds``, default 0: at the stream's first idle second)."""
        return self._fault("watch_cut", ctx, lambda s: open_s >= float(s.get("seconds", 0)))\
            is not None


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class ItemJson:
    """The JSON of list items, kept per object while its resourceVersion stays.

    A list serialised every item again: at 100 nodes the upgrade lists 3,000 VMIs, 3,200 Pods,
    3,000 Longhorn Volumes and 9,000 Replicas once per node, and most of them have not changed
    since the previous node's list. Stored objects are never changed in place (a write stores
    a new object with a new resourceVersion), so the bytes of an object at a resourceVersion
    are those of any later list of it. One entry per object (a newer version replaces it);
    the whole map is dropped past ``limit`` entries (deleted objects' entries)."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._by_key: dict[tuple[Any, ...], tuple[str, bytes]] = {}

    def dumps(self, rt: Any, obj: dict[str, Any]) -> bytes:
        md = obj.get("metadata") or {}
        rv = md.get("resourceVersion")
        if not rv:
            return _dumps(obj)
        key = (rt.api_version, rt.kind, md.get("namespace"), md.get("name"))
        hit = self._by_key.get(key)
        if hit is not None and hit[0] == rv:
            return hit[1]
        data = _dumps(obj)
        if len(self._by_key) >= self.limit:
            self._by_key.clear()
        self._by_key[key] = (rv, data)
        return data

    def items(self, rt: Any, objs: list[dict[str, Any]]) -> bytes:
        """``_dumps(objs)``, byte for byte."""
        return b"[" + b",".join([self.dumps(rt, o) for o in objs]) + b"]"


def _status_body(err: errors.ApiError) -> bytes:
    return _dumps(err.status())


def _agent_family(ua: str) -> str:
    head = ua.split(" ", 1)[0] if ua else "unknown"
    return head.split("/", 1)[0] or "unknown"


class _Headers(dict[str, str]):
    """Request headers, case-insensitive on lookup (keys stored lower-case)."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "harvester-sim"
    sys_version = ""
    server: _HTTPServer

    # ------------------------------------------------------------ plumbing
    def setup(self) -> None:
        super().setup()
        try:
            self.connection.settimeout(30)
            self.connection.do_handshake()  # type: ignore[attr-defined]
            self.connection.settimeout(None)
        except (OSError, ssl.SSLError):
            self.close_connection = True
            raise

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:  # noqa: N802
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._serve("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self._serve("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._serve("DELETE")

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve("HEAD")

    def do_OPTIONS(self) -> None:  # noqa: N802
        self._serve("OPTIONS")

    @property
    def api(self) -> ApiServer:
        return self.server.api

    def _read_body(self) -> bytes:
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks = []
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return None

    def handle_one_request(self) -> None:
        """A lean HTTP/1.1 request reader (the stdlib one parses headers with the email
        package, which dominates the cost of a small GET)."""
        try:
            line = self.rfile.readline(65537)
        except (OSError, ssl.SSLError):
            self.close_connection = True
            return
        if not line:
            self.close_connection = True
            return
        if len(line) > 65536:
            self.close_connection = True
            self._send(414, b"request line too long", "text/plain")
            return
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            self.close_connection = True
            self.command = "GET"
            self._send(400, b"bad request line", "text/plain")
            return
        self.command, self.path, self.request_version = parts
        self.raw_requestline = line
        headers = _Headers()
        for _ in range(200):
            h = self.rfile.readline(65537)
            if h in (b"\r\n", b"\n", b""):
                break
            k, _, v = h.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        self.headers = headers  # type: ignore[assignment]
        conn = headers.get("connection", "").lower()
        self.close_connection = conn == "close" or (
            self.request_version == "HTTP/1.0" and conn != "keep-alive")
        method = getattr(self, "do_" + self.command, None)
        if method is None:
            self._send_error(errors.method_not_allowed(self.command, self.path))
            return
        method()
        self.wfile.flush()

    def _send(self, code: int, body: bytes, ctype: str = JSON,
              headers: dict[str, str] | None = None) -> None:
        """Status line, headers and body in one write (one TLS record for small bodies)."""
        phrase = errors.reason_phrase(code)
        lines = [f"HTTP/1.1 {code} {phrase}\r\nDate: {Clock.http_date()}\r\n"
                 f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                 f"Cache-Control: no-cache, private\r\n"]
        for k, v in (headers or {}).items():
            lines.append(f"{k}: {v}\r\n")
        if self.close_connection:
            lines.append("Connection: close\r\n")
        lines.append("\r\n")
        head = "".join(lines).encode("latin-1", "replace")
        self.wfile.write(head + body if self.command != "HEAD" else head)
        self.api.count_code(code)
        audit = getattr(self, "audit_ctx", None)
        if audit is not None and self.api.audit is not None:
            self.api.audit_event(audit, code, self.received)
            self.audit_ctx = None

    def _send_error(self, err: errors.ApiError) -> None:
        self._send(err.code, _status_body(err), JSON, err.headers)

    # ------------------------------------------------------------ dispatch
    def _serve(self, method: str) -> None:
        started = Clock.monotonic()
        self.received, self.audit_ctx = Clock.wall_time(), None
        try:
            split = urlsplit(self.path)
            self.q_multi = parse_qs(split.query, keep_blank_values=True) if split.query else {}
            self.q = {k: v[-1] for k, v in self.q_multi.items()}
            self.raw_query = split.query
            body = self._read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            info = routing.parse(method, split.path, _truthy(self.q.get("watch")))
            uinfo = self.api.auth.authenticate_user(self.headers.get("Authorization"))
            if uinfo is None:
                public = not info.is_resource and split.path in (
                    "/healthz", "/livez", "/readyz", "/version")
                if self.headers.get("Authorization") or not public:
                    raise errors.unauthorized()
                uinfo = UserInfo("system:anonymous", ("system:unauthenticated",))
            self.user_info = uinfo
            self.user = user = uinfo.name
            agent = _agent_family(self.headers.get("User-Agent") or "")
            self.agent_full = self.headers.get("User-Agent") or ""
            if not info.is_resource and (split.path == "/v1/harvester" or
                                         split.path.startswith("/v1/harvester/")):
                # Rancher's route on the VIP to Harvester's API (the harvester Service);
                # Rancher authenticates, Harvester's server treats the request as admin
                self.api.count_request(agent, f"{method.lower()} /v1/harvester")
                self._harvester_api(method, split.path, body)
                return
            if not info.is_resource:
                self.api.count("get", "nonresource", agent)
                verb = method.lower()
                self.api.count_request(agent, f"{verb} {split.path}")
                ok, why = self.api.authorize(uinfo, AuthzRequest(verb, False, path=split.path))
                if not ok:
                    raise errors.forbidden_path(user, verb, split.path, why)
                self._nonresource(method, split.path, info)
                return
            self.api.count(info.verb, info.full_resource, agent)
            self.api.count_request(agent, f"{info.verb} {info.group}/{info.full_resource}")
            name = routing.authz_name(info, self.q.get("fieldSelector"))
            ok, why = self.api.authorize(uinfo, AuthzRequest(
                info.verb, True, info.group, info.resource, info.subresource or "",
                info.namespace or "", name, split.path))
            if not ok:
                raise errors.forbidden(user, info.verb, info.full_resource, info.group,
                                       info.namespace, name or None, why)
            ctx = {"verb": info.verb, "resource": info.full_resource, "group": info.group,
                   "namespace": info.namespace or "", "name": info.name or "",
                   "user": user, "user_agent": agent}
            # the audit objectRef names what the authorizer saw (a list/watch of one name too)
            self.audit_ctx = {**ctx, "name": name, "user_agent_full": self.agent_full}
            self.api.inject_faults(ctx)
            self._resource(method, info, body, ctx)
        except Response as r:
            self._send(r.code, r.body, r.ctype, r.headers)
        except errors.ApiError as err:
            self._send_error(err)
        except PatchError as err:
            self._send_error(errors.ApiError(err.code, "BadRequest" if err.code == 400
                                             else "Invalid", str(err)))
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, TimeoutError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001
            log.exception("internal error serving %s %s", method, self.path)
            try:
                self._send_error(errors.internal(str(exc)))
            except OSError:
                self.close_connection = True
        finally:
            dt = Clock.monotonic() - started
            if dt > 1.0 and not _truthy(getattr(self, "q", {}).get("watch")):
                log.debug("slow request %s %s: %.2fs", method, self.path, dt)

    def _nonresource(self, method: str, path: str, info: routing.RequestInfo) -> None:
        api = self.api
        p = path.rstrip("/") or "/"
        if method not in ("GET", "HEAD"):
            raise errors.method_not_allowed(method, path)
        if p in ("/healthz", "/livez", "/readyz"):
            raise Response(200, b"ok", "text/plain; charset=utf-8")
        if p == "/version":
            raise Response(200, _dumps(discovery.version_doc()))
        if p == "/api":
            raise Response(200, _dumps(discovery.api_versions(f"{api.host}:{api.port}")))
        if p == "/apis":
            raise Response(200, _dumps(discovery.api_group_list(api.registry)))
        if p == "/openapi/v2":
            self._openapi_v2()
        if p == "/openapi/v3":
            raise Response(200, _dumps(api.openapi.index()))
        if p.startswith("/openapi/v3/"):
            doc = api.openapi.gv_doc(p[len("/openapi/v3/"):])
            if doc is not None:
                raise Response(200, doc, JSON, {"Cache-Control": "no-cache, private"})
        parts = info.parts
        if len(parts) == 2 and parts[0] == "api":
            rl = discovery.resource_list(api.registry, "", parts[1])
            if rl is not None:
                raise Response(200, _dumps(rl))
        if len(parts) == 2 and parts[0] == "apis":
            grp = discovery.api_group(api.registry, parts[1])
            if grp is not None:
                raise Response(200, _dumps(grp))
        if len(parts) == 3 and parts[0] == "apis":
            rl = discovery.resource_list(api.registry, parts[1], parts[2])
            if rl is not None:
                raise Response(200, _dumps(rl))
        raise errors.not_found_path()

    def _rt(self, info: routing.RequestInfo) -> ResourceType:
        rt = self.api.registry.get(info.group, info.version, info.resource)
        if rt is None:
            raise errors.not_found_path()
        if info.subresource and info.subresource not in rt.subresources:
            raise errors.not_found_path()
        if rt.namespaced and info.namespace is None and info.verb not in (
                "list", "watch", "deletecollection"):
            raise errors.not_found_path()
        if not rt.namespaced and info.resource != "namespaces" and info.namespace is not None:
            raise errors.not_found_path()
        return rt

    def _resource(self, method: str, info: routing.RequestInfo, body: bytes,
                  ctx: dict[str, Any]) -> None:
        rt = self._rt(info)
        ns = info.namespace if rt.namespaced else None
        sub = info.subresource
        verb = info.verb
        if sub is None and verb not in rt.verbs:
            raise errors.method_not_allowed(verb, rt.plural)
        dry_run = "All" in self.q_multi.get("dryRun", [])
        self._check_accept(rt, sub)
        if sub == "proxy":
            self._proxy(method, rt, info, body)
            return
        if verb == "watch":
            self._watch(rt, ns, info)
            return
        if verb == "list":
            self._list(rt, ns)
            return
        if verb == "get":
            self._get(rt, ns, info)
            return
        if verb == "create":
            self._create(rt, ns, info, body, dry_run)
            return
        if verb == "update":
            self._update(rt, ns, info, body, dry_run)
            return
        if verb == "patch":
            self._patch(rt, ns, info, body, dry_run)
            return
        if verb == "delete":
            self._delete(rt, ns, info, body, dry_run)
            return
        if verb == "deletecollection":
            self._delete_collection(rt, ns, body, dry_run)
            return
        raise errors.method_not_allowed(method, rt.plural)

    # ------------------------------------------------------------ reads
    def _wants_table(self) -> bool:
        accept = self.headers.get("Accept") or ""
        return "as=Table" in accept

    def _include(self) -> str:
        return self.q.get("includeObject") or "Metadata"

    def _render(self, rt: ResourceType, obj: Obj) -> bytes:
        if self._wants_table():
            return _dumps(tables.table(rt, [obj], self._include(),
                                       {"resourceVersion": obj["metadata"].get(
                                           "resourceVersion", "")}))
        return _dumps(obj)

    def _get(self, rt: ResourceType, ns: str | None, info: routing.RequestInfo) -> None:
        assert info.name is not None
        sub = info.subresource
        if sub == "log":
            self._pod_log(rt, ns, info.name)
            return
        obj = self.api.store.get_ref(rt, ns, info.name)
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, info.name)
        if sub == "scale":
            raise Response(200, _dumps(subresources.scale_of(rt, obj)))
        if sub in ("eviction", "binding"):
            raise errors.method_not_allowed("GET", f"{rt.plural}/{sub}")
        raise Response(200, self._render(rt, obj))

    def _list(self, rt: ResourceType, ns: str | None) -> None:
        q = self.q
        if _truthy(q.get("sendInitialEvents")):
            raise errors.invalid("ListOptions", "meta.k8s.io", "", [errors.field_invalid(
                "sendInitialEvents", True, "sendInitialEvents is forbidden for list")])
        limit = int(q["limit"]) if q.get("limit", "").isdigit() else None
        items, rv, cont, remaining = self.api.store.list(
            rt, ns, q.get("labelSelector"), q.get("fieldSelector"), limit or None,
            q.get("continue") or None, copy_items=False)
        meta: dict[str, Any] = {"resourceVersion": rv}
        if cont:
            meta["continue"] = cont
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        if self._wants_table():
            raise Response(200, _dumps(tables.table(rt, items, self._include(), meta)))
        body = b"".join([
            b'{"kind":', _dumps(rt.kind + "List"), b',"apiVersion":', _dumps(rt.api_version),
            b',"metadata":', _dumps(meta), b',"items":', self.api.item_json.items(rt, items),
            b"}"])
        raise Response(200, body)

    # ------------------------------------------------------------ writes
    def _parse(self, body: bytes, ctype: str | None = None, rt: ResourceType | None = None,
               default: tuple[str, str] | None = None) -> Any:
        """The request body as JSON-shaped data. ``rt`` (the resource written) enables
        protobuf for built-in kinds; ``default`` is the (apiVersion, kind) assumed when a
        protobuf envelope carries no type."""
        ctype = (ctype if ctype is not None else self.headers.get("Content-Type") or JSON)
        base = ctype.split(";", 1)[0].strip().lower()
        builtin = rt is not None and not rt.custom
        if base == protobuf.MEDIA_TYPE and builtin:
            assert rt is not None
            return self._parse_protobuf(rt, body, default or (rt.api_version, rt.kind))
        if base not in ("application/json", "application/yaml", "yaml", "*/*", "") and \
                not base.endswith(("+json", "+yaml")):
            raise errors.unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json, application/yaml" +
                (f", {protobuf.MEDIA_TYPE}" if builtin else ""))
        if not body.strip():
            raise errors.bad_request("the body of the request was empty")
        try:
            if "yaml" in ctype:
                return yaml.safe_load(body)
            return json.loads(body)
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"the object provided is unrecognized: {exc}") from exc

    def _parse_protobuf(self, rt: ResourceType, body: bytes, default: tuple[str, str]) -> Obj:
        """``application/vnd.kubernetes.protobuf`` (k8s envelope + runtime.Unknown) -> dict."""
        try:
            return protobuf.decode_object(body, *default)
        except protobuf.ProtobufError as exc:
            raise errors.bad_request(str(exc)) from exc
        except LookupError as exc:
            # a built-in kind the schema table lacks: a gap of the simulator, not of the client
            raise errors.unsupported_media_type(
                f"the simulator has no protobuf schema for this object ({exc}) - send it as "
                "application/json or application/yaml") from exc

    def _openapi_v2(self) -> None:
        """``/openapi/v2``: the protobuf form when Accept asks for it (client-go discovery
        does), else JSON; an ETag, and 304 for a matching If-None-Match."""
        accept = [r.split(";", 1)[0].strip().lower()
                  for r in (self.headers.get("Accept") or "").split(",") if r.strip()]
        pb_types = (openapi.V2_PROTO_ACCEPT, openapi.V2_PROTO_MEDIA)
        want_pb = any(r in pb_types for r in accept)
        if not want_pb and accept and not any(
                r in ("application/json", "*/*", "application/*") for r in accept):
            raise errors.not_acceptable(["application/json", openapi.V2_PROTO_MEDIA])
        body, etag = self.api.openapi_v2.render(want_pb)
        hdrs = {"ETag": etag, "Vary": "Accept", "Cache-Control": "no-cache, private"}
        if self.headers.get("If-None-Match") == etag:
            raise Response(304, b"", JSON, hdrs)
        raise Response(200, body, openapi.V2_PROTO_MEDIA if want_pb else JSON, hdrs)

    def _check_accept(self, rt: ResourceType, sub: str | None) -> None:
        """406 NotAcceptable when Accept lists only encodings the simulator never produces
        (protobuf, CBOR), as the apiserver's negotiation answers an Accept it cannot meet.
        Any JSON-compatible entry (``application/vnd.kubernetes.protobuf,application/json``,
        ``*/*``) gets JSON, the way a real apiserver serves a CRD to kubectl."""
        accept = self.headers.get("Accept") or ""
        if not accept or sub in ("log", "proxy", "exec", "attach", "portforward"):
            return
        ranges = [r.split(";", 1)[0].strip().lower() for r in accept.split(",")]
        ranges = [r for r in ranges if r]
        if ranges and all(r in _UNSERVED_MEDIA for r in ranges):
            raise errors.not_acceptable(["application/json", "application/yaml"])

    def _parse_object(self, rt: ResourceType, body: bytes, what: str | None = None) -> Obj:
        default = (rt.api_version if what is None else
                   "autoscaling/v1" if what == "Scale" else rt.api_version, what or rt.kind)
        obj = self._parse(body, rt=rt, default=default)
        if not isinstance(obj, dict):
            raise errors.bad_request("the object provided is unrecognized (must be a JSON "
                                     "object)")
        kind, av = obj.get("kind"), obj.get("apiVersion")
        want_kind = what or rt.kind
        if kind and kind != want_kind:
            raise errors.bad_request(
                f"the API version in the data ({av}) does not match the expected API version "
                f"({rt.api_version})" if av and av != rt.api_version else
                f"{kind} in version \"{rt.version}\" cannot be handled as a {want_kind}: no "
                f"kind \"{kind}\" is registered for version \"{av}\" in scheme")
        if what is None and av and av != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({av}) does not match the expected API version "
                f"({rt.api_version})")
        return obj

    def _field_manager(self, required: bool = False) -> str:
        fm = self.q.get("fieldManager")
        if fm:
            if len(fm) > 128:
                raise errors.invalid("PatchOptions", "meta.k8s.io", "", [errors.field_invalid(
                    "fieldManager", fm, "must be no more than 128 characters")])
            return fm
        if required:
            raise errors.invalid("PatchOptions", "meta.k8s.io", "", [errors.field_required(
                "fieldManager", "Required value: is required for apply patch")])
        ua = self.agent_full.split(" ", 1)[0]
        return ua.split("/", 1)[0] if ua else "unknown"

    def _validate_fields(self, rt: ResourceType, obj: Obj, patch: bool = False) -> list[str]:
        """fieldValidation: decode the body as the apiserver does (a custom resource: ObjectMeta,
        pruning, nulls, defaults; a built-in kind: the fields of its Go type); unknown fields
        are a 400 when Strict, warnings when Warn (the default), silently dropped when
        Ignore."""
        mode = self.q.get("fieldValidation") or "Warn"
        strat = rt.strategy
        if not rt.custom:
            msg = protobuf.message_for(rt.api_version, rt.kind)
            unknown = [] if msg is None else sorted(openapi.unknown_builtin_fields(obj, msg))
        elif hasattr(strat, "decode"):
            unknown = strat.decode(obj, track=mode != "Ignore")
        else:
            return []
        if unknown and mode == "Strict":
            text = "strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown)
            if not patch:  # handlers.transformDecodeError
                text = (f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                        f"{text}")
            raise errors.bad_request(text)
        if unknown and mode == "Warn":
            return [f'unknown field "{u}"' for u in unknown]
        return []

    def _reply(self, code: int, rt: ResourceType, obj: Obj, warnings: list[str]) -> None:
        hdrs = {}
        if warnings:
            # net.NewWarningHeader: the text quoted, '"' and '\\' escaped
            hdrs["Warning"] = ", ".join(
                '299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"'
                for w in warnings[:5])
        raise Response(code, self._render(rt, obj), JSON, hdrs)

    def _create(self, rt: ResourceType, ns: str | None, info: routing.RequestInfo, body: bytes,
                dry_run: bool) -> None:
        store = self.api.store
        sub = info.subresource
        if sub == "eviction":
            assert info.name is not None
            ev = self._parse(body, rt=rt, default=("policy/v1", "Eviction"))
            raise Response(201, _dumps(subresources.evict(store, rt, ns, info.name, ev,
                                                          dry_run)))
        if sub == "binding":
            assert info.name is not None
            binding = self._parse(body, rt=rt, default=("v1", "Binding"))
            raise Response(201, _dumps(subresources.bind(store, rt, ns, info.name, binding,
                                                         dry_run)))
        if sub == "token" and rt.key == ("", "serviceaccounts"):
            assert info.name is not None and ns is not None
            req = self._parse(body, rt=rt,
                              default=("authentication.k8s.io/v1", "TokenRequest"))
            raise Response(201, _dumps(subresources.token_request(
                self.api.auth, self.api._service_account_uid, ns, info.name, req, dry_run)))
        if sub is not None:
            raise errors.method_not_allowed("POST", f"{rt.plural}/{sub}")
        if info.name is not None:
            raise errors.method_not_allowed("POST", rt.plural)
        if rt.key in subresources.REVIEWS:
            raise Response(201, _dumps(subresources.review(
                rt, self.user_info, self._parse_object(rt, body), self.api.rbac,
                self.api.authorize)))
        obj = self._parse_object(rt, body)
        warnings = self._validate_fields(rt, obj)
        manager = self._field_manager()
        md = obj.setdefault("metadata", {}) if isinstance(obj.get("metadata"), dict) else None
        if md is None:
            obj["metadata"] = {}
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        obj["metadata"].pop("managedFields", None)
        self.api.managed.on_create(rt, obj, manager, "Update")
        created = store.create(rt, obj, ns, dry_run=dry_run)
        if rt.kind == "Job" and (self.q.get("propagationPolicy") is None):
            pass
        self._reply(201, rt, created, warnings)

    def _update(self, rt: ResourceType, ns: str | None, info: routing.RequestInfo, body: bytes,
                dry_run: bool) -> None:
        store = self.api.store
        assert info.name is not None
        sub = info.subresource
        if sub == "scale":
            scale = self._parse_object(rt, body, "Scale")
            self._write_scale(rt, ns, info.name, scale, dry_run)
        if sub not in (None, "status", "finalize"):
            raise errors.method_not_allowed("PUT", f"{rt.plural}/{sub}")
        obj = self._parse_object(rt, body)
        md = obj.get("metadata")
        if not isinstance(md, dict):
            md = obj["metadata"] = {}
        if md.get("name") and md["name"] != info.name:
            raise errors.bad_request(f"the name of the object ({md['name']}) does not match "
                                     f"the name on the URL ({info.name})")
        md["name"] = info.name
        if rt.namespaced:
            if md.get("namespace") and md["namespace"] != ns:
                raise errors.bad_request("the namespace of the provided object does not match "
                                         "the namespace sent on the request")
            md["namespace"] = ns
        warnings = self._validate_fields(rt, obj)
        manager = self._field_manager()
        old = store.get_ref(rt, ns, info.name)
        if old is None:
            if rt.key in CREATE_ON_UPDATE and sub is None:
                obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
                md.pop("resourceVersion", None)
                self.api.managed.on_create(rt, obj, manager, "Update")
                self._reply(201, rt, store.create(rt, obj, ns, dry_run=dry_run), warnings)
            raise errors.not_found(rt.plural, rt.group, info.name)
        rv_given = md.get("resourceVersion")
        if not rv_given and not rt.unconditional_update:
            raise errors.invalid(rt.kind, rt.group, info.name, [errors.field_invalid(
                "metadata.resourceVersion", 0, "must be specified for an update")])
        managed = self.api.managed
        status_sub = "status" if sub == "status" else None

        def fn(cur: Obj) -> Obj:
            new = obj
            new["apiVersion"], new["kind"] = rt.api_version, rt.kind
            new_md = new["metadata"]
            if not rv_given:
                new_md["resourceVersion"] = cur["metadata"]["resourceVersion"]
            new_md["managedFields"] = cur["metadata"].get("managedFields")
            if new_md["managedFields"] is None:
                new_md.pop("managedFields")
            if sub == "status":
                merged = dict(cur)
                merged["status"] = new.get("status")
                if merged["status"] is None:
                    merged.pop("status")
                merged["metadata"] = dict(cur["metadata"])
                # the object's resourceVersion stays the precondition (a stale status
                # update is a 409, as with the main resource)
                merged["metadata"]["resourceVersion"] = new_md["resourceVersion"]
                new = merged
            managed.on_update(rt, cur, new, manager, status_sub)
            return new

        res = store.modify(rt, ns, info.name, fn, subresource=status_sub, dry_run=dry_run)
        self._reply(200, rt, res, warnings)

    # ------------------------------------------------------------ patch
    def _patch(self, rt: ResourceType, ns: str | None, info: routing.RequestInfo, body: bytes,
               dry_run: bool) -> None:
        store = self.api.store
        assert info.name is not None
        name = info.name
        ctype = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if ctype not in PATCH_TYPES or ctype == "application/apply-patch+cbor":
            raise errors.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(PATCH_TYPES[:2] + (PATCH_TYPES[3],))}"
                if rt.custom else
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(PATCH_TYPES[:4])}")
        if ctype == "application/strategic-merge-patch+json" and rt.custom:
            raise errors.unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml")
        is_apply = ctype == "application/apply-patch+yaml"
        if "force" in self.q and not is_apply:
            raise errors.invalid("PatchOptions", "meta.k8s.io", "", [{
                "reason": "FieldValueForbidden", "field": "force",
                "message": "Forbidden: may not be specified for non-apply patch"}])
        sub = info.subresource
        if sub not in (None, "status", "scale"):
            raise errors.method_not_allowed("PATCH", f"{rt.plural}/{sub}")
        patch = self._parse(body, "yaml" if is_apply else JSON)
        if ctype == "application/json-patch+json":
            if not isinstance(patch, list):
                raise errors.bad_request("json: cannot unmarshal object into Go value of type "
                                         "jsonpatch.Patch")
        elif not isinstance(patch, dict):
            raise errors.bad_request("the body of the request was not a JSON object")
        manager = self._field_manager(required=is_apply)
        force = _truthy(self.q.get("force"))
        managed = self.api.managed

        if sub == "scale":
            cur = store.get_ref(rt, ns, name)
            if cur is None:
                raise errors.not_found(rt.plural, rt.group, name)
            scale = subresources.scale_of(rt, cur)
            new_scale = self._apply_patch_doc(ctype, scale, patch, "Scale")
            self._write_scale(rt, ns, name, new_scale, dry_run)

        warnings: list[str] = []
        status_sub = "status" if sub == "status" else None

        if is_apply:
            res, created = server_side_apply(store, managed, rt, ns, name, patch, manager,
                                             force, status_sub, dry_run,
                                             self.q.get("fieldValidation") or "Strict")
            self._reply(201 if created else 200, rt, res, warnings)

        def fn(cur: Obj) -> Obj:
            rv_before = cur["metadata"].get("resourceVersion")
            new = self._apply_patch_doc(ctype, cur, patch, rt.kind, rt)
            if not isinstance(new, dict):
                raise errors.bad_request("patch produced a non-object")
            nmd = new.get("metadata")
            if not isinstance(nmd, dict):
                nmd = new["metadata"] = {}
            # a resourceVersion in the patch is a precondition; keep it if it changed
            if nmd.get("resourceVersion") == rv_before:
                nmd.pop("resourceVersion", None)
            if nmd.get("name", name) != name:
                raise errors.bad_request(
                    f"the name of the object ({nmd['name']}) does not match the name on "
                    f"the URL ({name})")
            warnings.extend(self._validate_fields(rt, new, patch=True))
            managed.on_update(rt, cur, new, manager, status_sub)
            return new

        res = store.modify(rt, ns, name, fn, subresource=status_sub, dry_run=dry_run)
        self._reply(200, rt, res, warnings)

    def _apply_patch_doc(self, ctype: str, doc: Obj, patch: Any, kind: str,
                         rt: ResourceType | None = None) -> Obj:
        if ctype == "application/json-patch+json":
            try:
                out = json_patch(doc, patch)
            except PatchError as exc:
                if exc.code == 400:
                    raise errors.bad_request(str(exc)) from exc
                raise errors.ApiError(422, "Invalid", "the server rejected our request due to "
                                      "an error in our request", {}) from exc
            return out  # type: ignore[no-any-return]
        if ctype == "application/merge-patch+json":
            return merge_patch(doc, patch)  # type: ignore[no-any-return]
        return strategic_merge(doc, patch, kind)  # type: ignore[no-any-return]

    def _write_scale(self, rt: ResourceType, ns: str | None, name: str, scale: Obj,
                     dry_run: bool) -> NoReturn:
        raise Response(200, _dumps(subresources.write_scale(
            self.api.store, self.api.managed, rt, ns, name, scale, self._field_manager(),
            dry_run)))

    # ------------------------------------------------------------ delete
    def _delete_options(self, body: bytes) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        q = self.q
        if q.get("gracePeriodSeconds", "").lstrip("-").isdigit():
            opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
        if q.get("propagationPolicy"):
            opts["propagationPolicy"] = q["propagationPolicy"]
        if "orphanDependents" in q:
            opts["orphanDependents"] = _truthy(q["orphanDependents"])
        ctype = (self.headers.get("Content-Type") or JSON).split(";", 1)[0].strip().lower()
        if body.strip() and ctype == protobuf.MEDIA_TYPE:
            # client-go sends DeleteOptions as protobuf with its protobuf content type
            # (controller-runtime's typed clients of built-in kinds: upgrade-toolkit cleanup)
            try:
                _, kind, raw = protobuf.unwrap(body)
                if kind not in ("", "DeleteOptions"):
                    raise protobuf.ProtobufError(f"expected DeleteOptions, got {kind}")
                b = protobuf.decode_message(raw, "meta.v1.DeleteOptions", 0)
            except protobuf.ProtobufError as exc:
                raise errors.bad_request(str(exc)) from exc
            opts.update({k: v for k, v in b.items() if v is not None})
        elif body.strip():
            b = self._parse(body, JSON)
            if isinstance(b, dict):
                opts.update({k: v for k, v in b.items() if v is not None})
        return opts

    def _delete(self, rt: ResourceType, ns: str | None, info: routing.RequestInfo, body: bytes,
                dry_run: bool) -> None:
        assert info.name is not None
        if info.subresource is not None:
            raise errors.method_not_allowed("DELETE", f"{rt.plural}/{info.subresource}")
        opts = self._delete_options(body)
        dry_run = dry_run or "All" in (opts.get("dryRun") or [])
        res, gone = self._delete_one(rt, ns, info.name, opts, dry_run)
        raise Response(200, _dumps(res if (not gone or rt.key in RETURNS_DELETED)
                                    else _delete_status(rt, res)))

    def _delete_one(self, rt: ResourceType, ns: str | None, name: str, opts: dict[str, Any],
                    dry_run: bool) -> tuple[Obj, bool]:
        store = self.api.store
        grace = opts.get("gracePeriodSeconds")
        if grace is not None and not isinstance(grace, int):
            raise errors.bad_request("gracePeriodSeconds must be an integer")
        res = store.delete(rt, ns, name, propagation=opts.get("propagationPolicy"),
                           grace_period=grace, preconditions=opts.get("preconditions"),
                           dry_run=dry_run, orphan_dependents=opts.get("orphanDependents"))
        if dry_run:
            return res, False
        cur = store.get_ref(rt, ns, name)
        gone = cur is None or cur["metadata"].get("uid") != res["metadata"].get("uid")
        return res, gone

    def _delete_collection(self, rt: ResourceType, ns: str | None, body: bytes,
                           dry_run: bool) -> None:
        opts = self._delete_options(body)
        dry_run = dry_run or "All" in (opts.get("dryRun") or [])
        items, rv, _, _ = self.api.store.list(rt, ns, self.q.get("labelSelector"),
                                              self.q.get("fieldSelector"), copy_items=False)
        out = []
        for it in items:
            md = it["metadata"]
            try:
                res, _ = self._delete_one(rt, md.get("namespace"), md["name"], opts, dry_run)
                out.append(res)
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise
        raise Response(200, _dumps({"kind": rt.kind + "List", "apiVersion": rt.api_version,
                                    "metadata": {"resourceVersion": rv}, "items": out}))

    # ------------------------------------------------------------ watch
    def _watch(self, rt: ResourceType, ns: str | None, info: routing.RequestInfo) -> None:
        q = self.q
        fsel = q.get("fieldSelector") or ""
        if info.name:
            fsel = ",".join(x for x in (fsel, f"metadata.name={info.name}") if x)
        send_initial = q.get("sendInitialEvents")
        sie = _truthy(send_initial) if send_initial is not None else None
        rv = q.get("resourceVersion")
        if sie is not None:
            if q.get("resourceVersionMatch") != "NotOlderThan":
                raise errors.invalid("ListOptions", "meta.k8s.io", "", [errors.field_invalid(
                    "resourceVersionMatch", q.get("resourceVersionMatch", ""),
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")])
            if sie and not _truthy(q.get("allowWatchBookmarks")):
                raise errors.invalid("ListOptions", "meta.k8s.io", "", [errors.field_forbidden(
                    "allowWatchBookmarks", "allowWatchBookmarks must be set to true when "
                    "sendInitialEvents is specified")])
        lsel = parse_label_selector(q.get("labelSelector"))
        fs = parse_field_selector(fsel, rt.field_allowed)
        timeout = None
        if q.get("timeoutSeconds", "").isdigit():
            timeout = float(q["timeoutSeconds"])
        bookmarks = _truthy(q.get("allowWatchBookmarks"))
        table = self._wants_table()
        include = self._include()
        err: errors.ApiError | None = None
        w: Watcher | None = None
        floor = self.api.watch_floor
        try:
            if floor and rv not in (None, "", "0") and not sie and rv.isdigit() and \
                    int(rv) < floor:
                raise errors.gone(f"too old resource version: {rv} ({floor})")
            w = self.api.store.watch(rt, ns, rv, lsel, fs, send_initial_events=bool(sie))
        except errors.ApiError as exc:
            if exc.code != 410:
                raise
            err = exc
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.api.count_code(200)
        self.wfile.flush()
        audit = getattr(self, "audit_ctx", None)
        if audit is not None and self.api.audit is not None:
            self.api.audit_event(audit, 200, self.received, stage="ResponseStarted")
            self.audit_ctx = None
        if err is not None:
            self._chunk(_dumps({"type": "ERROR", "object": err.status()}) + b"\n")
            self._end_chunks()
            return
        assert w is not None
        self._stream(w, rt, timeout, bookmarks, table, include, info)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _peer_closed(self) -> bool:
        conn = self.connection
        try:
            r, _, _ = select.select([conn], [], [], 0)
        except (OSError, ValueError):
            return True
        if not r:
            return False
        try:
            conn.setblocking(False)
            try:
                data = conn.recv(1)
            finally:
                conn.setblocking(True)
        except ssl.SSLWantReadError:
            return False
        except (OSError, ssl.SSLError):
            return True
        return data == b""

    def _event_bytes(self, type_: str, ev: Event, rt: ResourceType, table: bool,
                     include: str, first: list[bool]) -> bytes:
        if not table:
            return ev.as_json(type_)
        if type_ == "BOOKMARK":
            obj: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                        "metadata": dict(ev.obj["metadata"]), "columnDefinitions": None,
                        "rows": []}
        else:
            obj = tables.table(rt, [ev.obj], include,
                               {"resourceVersion": ev.obj["metadata"].get("resourceVersion")},
                               headers=first[0])
            first[0] = False
        return _dumps({"type": type_, "object": obj}) + b"\n"

    def _stream(self, w: Watcher, rt: ResourceType, timeout: float | None, bookmarks: bool,
                table: bool, include: str, info: routing.RequestInfo) -> None:
        api = self.api
        clock = api.store.clock
        now = clock.monotonic()
        deadline = now + timeout if timeout else None
        next_bookmark = now + api.bookmark_interval
        next_check = now + 1.0
        first = [True]
        opened = api.store.clock.now()
        ctx = {"verb": "watch", "resource": info.full_resource, "group": info.group,
               "namespace": info.namespace or "", "user": self.user,
               "user_agent": _agent_family(self.agent_full)}
        try:
            while not api.stopping.is_set():
                now = clock.monotonic()
                wait = min(next_check, next_bookmark if bookmarks else next_check) - now
                if deadline is not None:
                    wait = min(wait, deadline - now)
                item = w.next(timeout=max(wait, 0.0))
                if item is not None:
                    buf = [self._event_bytes(item[0], item[1], rt, table, include, first)]
                    while len(buf) < 256:
                        more = w.next(timeout=0) if not w.queue.empty() else None
                        if more is None:
                            break
                        buf.append(self._event_bytes(more[0], more[1], rt, table, include,
                                                     first))
                    self._chunk(b"".join(buf))
                    self.wfile.flush()
                    continue
                if w.closed:
                    break
                now = clock.monotonic()
                if deadline is not None and now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    w.bookmark()
                    next_bookmark = now + api.bookmark_interval
                if now >= next_check:
                    next_check = now + 1.0
                    if self._peer_closed():
                        self.close_connection = True
                        return
                    if api.watch_cut(ctx, api.store.clock.now() - opened):
                        self.close_connection = True
                        return
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        finally:
            w.stop()

    # ------------------------------------------------------------ pods/log
    def _pod_log(self, rt: ResourceType, ns: str | None, name: str) -> None:
        pod = self.api.store.get_ref(rt, ns, name)
        if pod is None:
            raise errors.not_found(rt.plural, rt.group, name)
        container = subresources.log_container(pod, name, self.q.get("container"))
        provider = self.api.world.extras.get("pod_logs") if isinstance(
            getattr(self.api.world, "extras", None), dict) else None
        text = ""
        if callable(provider):
            text = provider(ns, name, container) or ""
        text = subresources.log_filters(text, self.q.get("tailLines"), self.q.get("limitBytes"))
        if not _truthy(self.q.get("follow")):
            raise Response(200, text.encode(), "text/plain")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = text
        if text:
            self._chunk(text.encode())
        self.wfile.flush()
        try:
            while not self.api.stopping.is_set():
                time.sleep(0.2)
                if self.api.store.get_ref(rt, ns, name) is None or self._peer_closed():
                    break
                cur = (provider(ns, name, container) or "") if callable(provider) else ""
                if len(cur) > len(sent) and cur.startswith(sent):
                    self._chunk(cur[len(sent):].encode())
                    self.wfile.flush()
                    sent = cur
                phase = ((self.api.store.get_ref(rt, ns, name) or {}).get("status") or {}).get(
                    "phase")
                if phase in ("Succeeded", "Failed"):
                    break
            self._end_chunks()
        except OSError:
            self.close_connection = True

    # ------------------------------------------------------------ proxy
    def _proxy(self, method: str, rt: ResourceType, info: routing.RequestInfo,
               body: bytes) -> None:
        assert info.name is not None
        proxies = getattr(self.api.world, "proxies", None)
        if rt.kind == "Node":
            handler = subresources.node_backend(self.api.store, proxies, rt, info.name)
        elif rt.kind == "Service":
            handler = subresources.service_backend(self.api.store, self.api.registry, proxies,
                                                   rt, info.namespace, info.name)
        else:
            raise errors.not_found_path()
        query = "&".join(p for p in self.raw_query.split("&") if p)
        self._forward(handler, method, info.rest or "/", query, body)

    def _harvester_api(self, method: str, path: str, body: bytes) -> None:
        svc_rt = self.api.registry.get("", "v1", "services")
        assert svc_rt is not None
        handler = subresources.service_backend(
            self.api.store, self.api.registry, getattr(self.api.world, "proxies", None), svc_rt,
            "harvester-system", "https:harvester:8443")
        self._forward(handler, method, path, self.raw_query, body)

    def _forward(self, handler: subresources.Backend, method: str, path: str, query: str,
                 body: bytes) -> NoReturn:
        """Send the request to a proxy backend and answer with what it answered."""
        fwd = {k: v for k, v in self.headers.items()
               if k.lower() not in ("authorization", "host", "connection", "content-length",
                                    "transfer-encoding")}
        status, hdrs, data = handler(method, path, query, fwd, body)
        out = {k: v for k, v in (hdrs or {}).items()
               if k.lower() not in ("content-length", "transfer-encoding", "connection")}
        ctype = out.pop("Content-Type", out.pop("content-type", "application/octet-stream"))
        raise Response(int(status), data or b"", ctype, out)


def _delete_status(rt: ResourceType, obj: Obj) -> Obj:
    det: dict[str, Any] = {"name": obj["metadata"]["name"], "kind": rt.plural,
                           "uid": obj["metadata"].get("uid", "")}
    if rt.group:
        det["group"] = rt.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": det}
