"""Dict-in, dict-out access to the Kubernetes API for the collection's modules.

:class:`Kube` is built on kubernetes.core's ``get_api_client`` (so ``kubeconfig``,
``context``, ``host``, ``api_key``, ``ca_cert``, ``validate_certs``… and the
``K8S_AUTH_*``/``KUBECONFIG`` environment variables behave exactly as in kubernetes.core)
and its dynamic client. Every call is retried as :mod:`retry` says
(backoff on 429, 5xx and transport errors), fenced by the upgrade lock (:mod:`fencing`).
Objects go in and come out as plain dicts. Errors surface as :class:`errors.ApiError`
(``status``, ``reason``, ``message``); ``get`` returns ``None`` for 404.

``wait`` is :func:`waiting.wait` on this client (a caching layer, ``node_cycle.CycleKube``,
overrides it); ``watch``/``stream`` yield raw watch events; ``raw_get`` reaches non-resource
paths such as the service and node proxies. Connection failures and the insecure-TLS warning
are worded in :mod:`connection`; discovery's disk cache is written once
(:mod:`discovery_cache`).

Responses are parsed from the raw HTTP body (``serialize=False``), never through the dynamic
client's ``ResourceInstance``: wrapping every field of every listed object in a
``ResourceField`` and unwrapping it again with ``to_dict`` costs more CPU than the request
itself, most of all for the lists of VMIs and pods (docs/performance.md).

A large body (a list of a cluster-wide set) is parsed with Python's cyclic garbage collector
paused (:func:`loads_body`): parsing allocates millions of dicts and lists at once, and each
full collection this sets off walks every object the process already holds, costing more
than the parsing itself on a big cluster (docs/performance.md). What it parsed is then
frozen (``gc.freeze``): the informers keep those objects for the whole call, and every later
collection would walk them again, although parsed JSON never holds a reference cycle; frozen
objects are still freed by their reference counts.
"""

from __future__ import annotations

import copy
import gc
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    discovery_cache,
    waiting,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.connection import (
    connection_failure,
    warn_insecure,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.discovery_cache import (
    defer_discovery_writes,
    flush_discovery_cache,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    ApiError,
    ConflictsExhausted,
    NotServed,
    message_of,
    unserved_path,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.fencing import (
    fence,
    set_fence,
    unfenced,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.retry import (
    CONFLICT,
    RETRIABLE,
    call_with_retry,
    retry_on_conflict,
)

# The client's surface: besides its own names, the errors, retries, fence and connection
# texts its callers use with it, defined in the modules named for them.
__all__ = ["ApiError", "ConflictsExhausted", "Kube", "NotServed", "call_with_retry",
           "connection_failure", "fence", "flush_discovery_cache", "loads_body",
           "retry_on_conflict", "secret_selector", "selector", "set_fence", "unfenced",
           "warn_insecure"]

T = TypeVar("T")


# bodies at least this large are parsed with the cyclic garbage collector paused
BIG_BODY = 256 * 1024
_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_paused_by_us = False


def _pause_gc() -> None:
    global _gc_pausers, _gc_paused_by_us
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_paused_by_us = gc.isenabled()
            gc.disable()
        _gc_pausers += 1


def _resume_gc() -> None:
    global _gc_pausers, _gc_paused_by_us
    with _gc_lock:
        _gc_pausers -= 1
        if _gc_pausers == 0 and _gc_paused_by_us:
            _gc_paused_by_us = False
            gc.enable()


def loads_body(data: bytes | bytearray | str) -> Any:
    """``json.loads`` a response body; one of :data:`BIG_BODY` or more with the cyclic garbage
    collector paused and its objects frozen (see the module doc). Parsed JSON holds no
    reference cycles, so nothing is left for the collector; it runs again once no thread
    parses a large body."""
    if len(data) < BIG_BODY:
        return json.loads(data)
    _pause_gc()
    try:
        parsed = json.loads(data)
        gc.freeze()
        return parsed
    finally:
        _resume_gc()


_SCALARS = (str, int, float, bool, type(None))


def json_copy(obj: Any) -> Any:
    """A deep copy of a decoded API object (dicts, lists, scalars), ~3x faster than
    ``copy.deepcopy``, which serves any type (memo, reductions): what a step reads from an
    informer or a remembered read is copied so that its changes stay its own. Any other type
    inside is copied by ``copy.deepcopy``."""
    t = type(obj)
    if t is dict:
        return {k: json_copy(v) for k, v in obj.items()}
    if t is list:
        return [json_copy(v) for v in obj]
    if t in _SCALARS:
        return obj
    return copy.deepcopy(obj)


def _to_dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    data = getattr(obj, "data", None)
    if isinstance(data, (bytes, bytearray)):   # a raw HTTP response (serialize=False)
        return dict(loads_body(data)) if data else {}
    return dict(obj.to_dict())


# Rancher's machine-plan Secrets (the drain hooks) are the only Secrets the collection reads,
# all in fleet-local; their names derive from the CAPI Machines, so RBAC must let it read every
# Secret there (docs/rbac.md). Every list and watch of Secrets in fleet-local asks the server
# for that type alone, so no other Secret there (the cluster's kubeconfig, registration
# tokens) ever reaches this process.
MACHINE_PLAN_FIELD_SELECTOR = "type=rke.cattle.io/machine-plan"


def secret_selector(kind: str, namespace: str | None, field_selector: str | None
                    ) -> str | None:
    """``field_selector`` for a list/watch of ``kind`` in ``namespace``, narrowed to Rancher's
    machine-plan Secrets when it reads Secrets of fleet-local."""
    if kind != "Secret" or namespace != c.FLEET_NS:
        return field_selector
    if not field_selector:
        return MACHINE_PLAN_FIELD_SELECTOR
    if MACHINE_PLAN_FIELD_SELECTOR in field_selector.split(","):
        return field_selector
    return f"{field_selector},{MACHINE_PLAN_FIELD_SELECTOR}"


def _raw(fn: Callable[..., Any], **kw: Any) -> dict[str, Any]:
    """``fn(**kw)`` on a dynamic-client resource, answered as a plain dict parsed from the
    response body (see the module doc)."""
    fence()
    return _to_dict(fn(serialize=False, **kw))


class Kube:
    """The cluster, as seen by one module run.

    ``dyn`` is a kubernetes dynamic client (``K8SDynamicClient``); tests pass a fake with the
    same methods or subclass :class:`Kube`. ``check_mode`` is informational: callers decide
    not to write.
    """

    def __init__(self, dyn: Any, check_mode: bool = False) -> None:
        self.dyn = dyn
        self.check_mode = check_mode
        self._resources: dict[tuple[str, str], Any] = {}
        self._seeds: dict[tuple[Any, ...], tuple[dict[str, Any], str]] = {}

    @classmethod
    def from_options(cls, check_mode: bool = False, **auth: Any) -> Kube:
        """Connect with kubernetes.core's auth options (``None`` values are left out); a
        failure to connect is an :class:`ApiError` (status 0) with one line saying why
        (:func:`connection.connection_failure`)."""
        from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import (
            get_api_client,
        )
        given = {k: v for k, v in auth.items() if v is not None}
        try:
            api = get_api_client(**given)
        except Exception as exc:  # noqa: BLE001 - every way of not connecting gets one line
            raise ApiError(0, "ConnectionFailed", connection_failure(exc, given)) from exc
        return cls(api.client, check_mode=check_mode)

    @classmethod
    def from_module(cls, module: Any) -> Kube:
        """Connect with the module's auth options (kubernetes.core semantics)."""
        from ansible_collections.kubernetes.core.plugins.module_utils.args_common import (
            AUTH_ARG_SPEC,
        )
        auth = {k: module.params[k] for k in AUTH_ARG_SPEC
                if module.params.get(k) is not None}
        warn_insecure(module, auth)
        try:
            kube = cls.from_options(check_mode=bool(module.check_mode), **auth)
        except ApiError as exc:
            module.fail_json(msg=exc.message)
            raise  # fail_json does not return; a test double's might
        defer_discovery_writes(kube.dyn)
        kube.identify(module)
        return kube

    def identify(self, module: Any) -> None:
        """Send ``User-Agent: harvester-upgrade/<module>``: the apiserver's audit log (and the
        simulator's report) then say which module made each request."""
        name = str(getattr(module, "_name", "") or "module").rsplit(".", 1)[-1]
        try:
            self.dyn.client.user_agent = f"harvester-upgrade/{name}"
        except AttributeError:   # a test double without an ApiClient
            pass

    @property
    def host(self) -> str:
        return str(self.dyn.client.configuration.host)

    # -- discovery ---------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str) -> Any:
        key = (api_version, kind)
        if key not in self._resources:
            from kubernetes.dynamic.exceptions import ResourceNotFoundError

            try:
                # only the kind's group version is read (again, when it lacks the kind), never
                # the whole discovery (discovery_cache)
                self._resources[key] = call_with_retry(
                    lambda: discovery_cache.lookup(self.dyn, api_version, kind))
            except ResourceNotFoundError as exc:
                raise NotServed(404, "NotServed", f"{kind}.{api_version} is not served") from exc
            except ApiError as exc:   # (the retry turns the exceptions it does not know here)
                if exc.reason in ("ResourceNotFoundError", discovery_cache.Unserved.__name__):
                    raise NotServed(404, "NotServed",
                                    f"{kind}.{api_version} is not served") from exc
                raise
        return self._resources[key]

    def on_resource(self, api_version: str, kind: str, call: Callable[[Any], T]) -> T:
        """``call(resource)``. Discovery is cached on disk by kubernetes.core, per API host
        and user, and a cached kind the server no longer serves answers 404 for its path (a
        CRD deleted since, or a new cluster at an address an earlier one used): then
        discovery is read again once, and the kind is :class:`NotServed` or the call is made
        again."""
        try:
            return call(self.resource(api_version, kind))
        except ApiError as exc:
            if not unserved_path(exc) or isinstance(exc, NotServed):
                raise
        self.invalidate(api_version)
        return call(self.resource(api_version, kind))

    def served(self, api_version: str, kind: str) -> bool:
        try:
            self.resource(api_version, kind)
            return True
        except NotServed:
            return False

    def invalidate(self, api_version: str | None = None) -> None:
        """Forget discovery: of ``api_version``'s group version (one of its kinds answered
        404 for its path, a CRD of it was installed), or everything (the disk cache may
        describe another cluster that was at this address)."""
        self._resources.clear()
        if api_version is not None and discovery_cache.forgettable(self.dyn):
            discovery_cache.forget(self.dyn, api_version)
            discovery_cache.forget_groups(self.dyn)
            return
        if discovery_cache.nothing_discovered(self.dyn):
            return   # only the group list, read as this client was made
        try:
            self.dyn.resources.invalidate_cache()
        except AttributeError:
            return
        # the group list was read again just now: a kind of a group it lacks (an UpgradePlan
        # before its CRD) is not served, without reading it once more at once
        discovery_cache.groups_read_now(self.dyn)

    # -- reads -------------------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.on_resource(api_version, kind, lambda res: call_with_retry(
                lambda: _raw(res.get, name=name, namespace=namespace)))
        except NotServed:
            raise
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list_with_rv(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None, field_selector: str | None = None
                     ) -> tuple[list[dict[str, Any]], str]:
        """Items and the list's resourceVersion (to start a watch from)."""
        field_selector = secret_selector(kind, namespace, field_selector)
        seeds = getattr(self, "_seeds", None)
        seeded = seeds.pop((api_version, kind, namespace, label_selector or None,
                            field_selector), None) if seeds else None
        if seeded is not None:
            return [dict(seeded[0])], seeded[1]
        kw: dict[str, Any] = {"namespace": namespace}
        if label_selector:
            kw["label_selector"] = label_selector
        if field_selector:
            kw["field_selector"] = field_selector
        out = self.on_resource(api_version, kind,
                               lambda res: call_with_retry(lambda: _raw(res.get, **kw)))
        items = [dict(i) for i in out.get("items") or []]
        for item in items:   # list items lack apiVersion/kind
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items, str((out.get("metadata") or {}).get("resourceVersion") or "")

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None
             ) -> list[dict[str, Any]]:
        return self.list_with_rv(api_version, kind, namespace, label_selector,
                                 field_selector)[0]

    def list_if_served(self, api_version: str, kind: str, namespace: str | None = None,
                       label_selector: str | None = None) -> list[dict[str, Any]] | None:
        """Like :meth:`list`, but ``None`` when the kind is not served."""
        try:
            return self.list(api_version, kind, namespace, label_selector)
        except NotServed:
            return None

    # -- writes ------------------------------------------------------------------------------
    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        ns = (obj.get("metadata") or {}).get("namespace")
        return self.on_resource(obj["apiVersion"], obj["kind"], lambda res: call_with_retry(
            lambda: _raw(res.create, body=obj, namespace=ns)))

    def seed(self, obj: dict[str, Any]) -> None:
        """Answer the next list of ``obj`` by name (its kind and namespace, field selector
        ``metadata.name=<name>``; once) with ``obj`` as this client just wrote it, at its
        resourceVersion, instead of a request: a wait on an object the caller created lists
        it to start its watch from that resourceVersion, and every change after it arrives
        as an event. Call it right before such a wait."""
        md = obj.get("metadata") or {}
        rv = str(md.get("resourceVersion") or "")
        if not rv or not md.get("name") or not obj.get("apiVersion") or not obj.get("kind"):
            return
        self._seeds[(obj["apiVersion"], obj["kind"], md.get("namespace"), None,
                     f"metadata.name={md['name']}")] = (dict(obj), rv)

    def create_in(self, api_version: str, kind: str, body: dict[str, Any],
                  namespace: str | None = None) -> dict[str, Any]:
        """Create ``body`` as ``api_version``/``kind`` in ``namespace``."""
        obj = dict(body)
        obj["apiVersion"], obj["kind"] = api_version, kind
        if namespace:
            obj["metadata"] = {**(obj.get("metadata") or {}), "namespace": namespace}
        return self.create(obj)

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None, subresource: str | None = None) -> dict[str, Any]:
        """JSON merge patch (``null`` deletes a key). Without a resourceVersion in the patch
        it is unconditional: a 409 Conflict (the server lost a race it normally retries
        itself) is retried like a 5xx — applying the same merge patch again is what the server
        would have done."""
        conditional = bool((patch.get("metadata") or {}).get("resourceVersion"))

        def send(res: Any) -> dict[str, Any]:
            target = getattr(res, subresource) if subresource else res
            return call_with_retry(lambda: _raw(
                target.patch, body=patch, name=name, namespace=namespace,
                content_type="application/merge-patch+json"),
                also=frozenset() if conditional else CONFLICT)

        return self.on_resource(api_version, kind, send)

    def evict(self, name: str, namespace: str, grace_period: int | None = None) -> None:
        """Create a ``policy/v1`` Eviction for pod ``namespace/name`` (the ``pods/eviction``
        subresource; ``grace_period``: its ``deleteOptions.gracePeriodSeconds``). Sent once:
        the API server answers 429 while a PodDisruptionBudget allows no disruption, and a
        retry here would be a wait on that budget; every refusal is raised as
        :class:`ApiError` for the caller to judge."""
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        if grace_period is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period}

        def send(res: Any) -> dict[str, Any]:
            return call_with_retry(lambda: _raw(res.eviction.create, body=body, name=name,
                                                namespace=namespace), attempts=1)

        self.on_resource("v1", "Pod", send)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT the whole object; its resourceVersion makes it conditional (409 when stale)."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        ns = (obj.get("metadata") or {}).get("namespace")
        return call_with_retry(lambda: _raw(res.replace, body=obj, namespace=ns))

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT the status subresource; the object's resourceVersion makes it conditional
        (a stale one raises :class:`ApiError` 409)."""
        res = self.resource(obj["apiVersion"], obj["kind"]).status
        ns = (obj.get("metadata") or {}).get("namespace")
        return call_with_retry(lambda: _raw(res.replace, body=obj, namespace=ns))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               propagation: str = "Background",
               preconditions: dict[str, str] | None = None) -> bool:
        """Delete one object; ``False`` if it was already gone. Without ``preconditions``
        (``uid``, ``resourceVersion``) a 409 is retried as for an unconditional :meth:`patch`;
        with them a 409 (the object is not the one described any more) is raised."""
        res = self.resource(api_version, kind)
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions",
                                "propagationPolicy": propagation}
        if preconditions:
            body["preconditions"] = dict(preconditions)

        def send() -> Any:
            fence()
            return res.delete(name=name, namespace=namespace, body=body)

        try:
            call_with_retry(send, also=frozenset() if preconditions else CONFLICT)
            return True
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise

    # -- waits, streams and raw paths -------------------------------------------------------
    def wait(self, sources: Iterable[waiting.Source],
             predicate: Callable[[waiting.Snapshot], Any], *, what: str, timeout: float,
             describe: Callable[[waiting.Snapshot], str] | None = None,
             on_change: Callable[[waiting.Snapshot], None] | None = None,
             slice_seconds: float | None = None) -> Any:
        """:func:`waiting.wait` on this client: until ``predicate`` returns something truthy,
        by watch, with a deadline (see there). A caching layer overrides this to bracket the
        wait and feed it from its informers."""
        return waiting.wait(self, sources, predicate, what=what, timeout=timeout,
                            describe=describe, on_change=on_change,
                            slice_seconds=slice_seconds)

    def watch(self, api_version: str, kind: str, namespace: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              resource_version: str | None = None, timeout: int = 60
              ) -> Iterator[dict[str, Any]]:
        """Raw watch events ``{"type", "object": dict}``; ends after ``timeout`` seconds.

        A 410 Gone raises :class:`ApiError` with status 410 (the caller relists).
        """
        res = self.resource(api_version, kind)
        try:
            for event in self.stream(res, namespace=namespace, label_selector=label_selector,
                                     field_selector=field_selector,
                                     resource_version=resource_version,
                                     timeout=max(1, int(timeout)), allow_watch_bookmarks=True):
                yield {"type": event.get("type"), "object": event.get("raw_object") or {}}
        except ApiError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to ApiError for the waiter
            status, reason, message = message_of(exc)
            raise ApiError(status, reason, message) from exc

    def stream(self, res: Any, *, namespace: str | None = None,
               label_selector: str | None = None, field_selector: str | None = None,
               resource_version: str | None = None, timeout: int = 60,
               allow_watch_bookmarks: bool | None = None, watcher: Any = None
               ) -> Iterator[dict[str, Any]]:
        """The dynamic client's watch without its per-event ``ResourceInstance``: events
        ``{"type", "raw_object": dict}`` as the ``kubernetes`` Watch parses them."""
        from kubernetes import watch as kwatch
        fence()
        field_selector = secret_selector(str(getattr(res, "kind", "")), namespace,
                                         field_selector)
        w = watcher or kwatch.Watch()
        kw: dict[str, Any] = {"namespace": namespace, "label_selector": label_selector,
                              "field_selector": field_selector,
                              "resource_version": resource_version or None,
                              "timeout_seconds": timeout}
        if allow_watch_bookmarks is not None:
            kw["allow_watch_bookmarks"] = allow_watch_bookmarks
        yield from w.stream(res.get, serialize=False, **kw)

    def raw_get(self, path: str, timeout: float = 30.0) -> tuple[int, bytes]:
        """GET a raw API path (service/node proxy); returns ``(status, body)``.

        Errors other than transport failures are returned, not raised, so callers can tell
        a 404 from a 503; 429/5xx are retried like every other call.
        """
        api = self.dyn.client

        def do() -> tuple[int, bytes]:
            fence()
            if hasattr(api, "param_serialize"):       # kubernetes >= 33 (generator v7)
                method, url, headers, body, post = api.param_serialize(
                    "GET", path, auth_settings=["BearerToken"])
                r = api.call_api(method, url, header_params=headers, body=body,
                                 post_params=post, _request_timeout=timeout)
                r.read()
            else:
                resp = api.call_api(path, "GET", auth_settings=["BearerToken"],
                                    _preload_content=False, _return_http_data_only=False,
                                    _request_timeout=timeout)
                r = resp[0] if isinstance(resp, tuple) else resp
            status = int(r.status)
            if status in RETRIABLE and status != 503:
                raise ApiError(status, "Retriable", bytes(r.data or b"")[:300].decode(
                    errors="replace"))
            return status, bytes(r.data or b"")

        try:
            return call_with_retry(do)
        except ApiError as exc:
            if exc.status:
                return exc.status, exc.message.encode()
            raise

    def raw_post(self, path: str, body: dict[str, Any], timeout: float = 30.0
                 ) -> tuple[int, bytes]:
        """POST JSON to a raw API path (e.g. a service proxy); returns ``(status, body)``.

        Sent once: the endpoints this is for (Harvester's actions) create objects and answer
        refusals with a 500, so neither a 5xx nor a lost connection is retried here; the
        caller decides. A transport failure is status 0.
        """
        fence()
        api = self.dyn.client
        data = body   # the client serializes a dict as JSON (a str would be sent as a string)
        headers = {"Content-Type": "application/json", "Accept": "*/*"}
        try:
            if hasattr(api, "param_serialize"):       # kubernetes >= 33 (generator v7)
                method, url, hdrs, payload, post = api.param_serialize(
                    "POST", path, header_params=headers, body=data,
                    auth_settings=["BearerToken"])
                r = api.call_api(method, url, header_params=hdrs, body=payload,
                                 post_params=post, _request_timeout=timeout)
                r.read()
            else:
                resp = api.call_api(path, "POST", header_params=headers, body=data,
                                    auth_settings=["BearerToken"], _preload_content=False,
                                    _return_http_data_only=False, _request_timeout=timeout)
                r = resp[0] if isinstance(resp, tuple) else resp
            return int(r.status), bytes(r.data or b"")
        except Exception as exc:  # noqa: BLE001 - an HTTP error status is an answer
            status = int(getattr(exc, "status", 0) or 0)
            raw = getattr(exc, "body", None) or getattr(exc, "reason", "") or str(exc)
            return status, raw if isinstance(raw, bytes) else str(raw).encode()


def selector(labels: dict[str, str]) -> str:
    """``{"a": "b"}`` → ``"a=b"`` (sorted)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
