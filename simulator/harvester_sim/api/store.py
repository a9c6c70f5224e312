"""The generic store: every kind-agnostic API semantic, written once.

One in-memory map per resource (group + plural), one global resourceVersion counter (like
etcd's revision), optimistic concurrency (stale writes get 409), generateName, uid,
generation, the status reset rules of the main resource and the status subresource,
finalizers and deletionTimestamp, graceful pod deletion, ownerReference garbage collection
(Background/Foreground/Orphan), namespace deletion, eviction against PodDisruptionBudgets,
and watch fan-out with a bounded event history (older resourceVersions get 410 Gone).

Stored objects are never mutated in place: each write stores a new dict. Readers get deep
copies; watch events share the stored dict and must be treated as read-only.
"""

from __future__ import annotations

import base64
import bisect
import json
import queue
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from . import errors
from .jsoncopy import json_copy
from .resources import Registry, ResourceType
from .selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector

Obj = dict[str, Any]
# stored keys, (namespace, name); an alias because the class below defines ``list``
KeyList = list[tuple[str, str]]
AdmissionHook = Callable[[str, ResourceType, Obj, "Obj | None", "str | None"], None]

HISTORY_LIMIT = 100_000
_PODS = ("", "pods")
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_STATUS_ONLY_ON_CREATE_KEPT = {"Pod", "Namespace"}


class Event:
    """One committed change. ``obj`` is the new object (the last state for DELETED)."""

    __slots__ = ("type", "obj", "old", "rv", "rt", "_json")

    def __init__(self, type_: str, rt: ResourceType | None, obj: Obj, old: Obj | None, rv: int):
        self.type = type_
        self.rt = rt
        self.obj = obj
        self.old = old
        self.rv = rv
        self._json: bytes | None = None

    def as_json(self, type_: str | None = None) -> bytes:
        """The watch-event line, serialized once and shared by all watchers."""
        if type_ is None or type_ == self.type:
            if self._json is None:
                self._json = json.dumps({"type": self.type, "object": self.obj},
                                        separators=(",", ":")).encode() + b"\n"
            return self._json
        return json.dumps({"type": type_, "object": self.obj},
                          separators=(",", ":")).encode() + b"\n"


class Watcher:
    """A watch on one resource type, filtered by namespace and selectors."""

    def __init__(self, store: Store, rt: ResourceType, namespace: str | None,
                 label_sel: LabelSelector, field_sel: FieldSelector) -> None:
        self.store = store
        self.rt = rt
        self.namespace = namespace
        self.label_sel = label_sel
        self.field_sel = field_sel
        self.queue: queue.SimpleQueue[tuple[str, Event] | None] = queue.SimpleQueue()
        self.closed = False
        self.last_rv = 0

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        md = obj.get("metadata", {})
        if self.namespace is not None and md.get("namespace") != self.namespace:
            return False
        return self.label_sel.matches(md.get("labels")) and self.field_sel.matches(obj)

    def offer(self, ev: Event) -> None:
        if self.closed:
            return
        new_m = ev.type != "DELETED" and self.matches(ev.obj)
        if ev.type == "ADDED":
            if new_m:
                self._put("ADDED", ev)
            return
        old_m = self.matches(ev.old) if ev.old is not None else False
        if ev.type == "DELETED":
            if self.matches(ev.obj) or old_m:
                self._put("DELETED", ev)
            return
        if new_m and old_m:
            self._put("MODIFIED", ev)
        elif new_m:
            self._put("ADDED", ev)
        elif old_m:
            self._put("DELETED", ev)

    def _put(self, type_: str, ev: Event) -> None:
        self.last_rv = max(self.last_rv, ev.rv)
        self.queue.put((type_, ev))

    def next(self, timeout: float | None = None) -> tuple[str, Event] | None:
        """The next (type, event), or None on timeout/stop."""
        try:
            item = self.queue.get(timeout=timeout)
        except queue.Empty:
            return None
        return item

    def bookmark(self, initial_events_end: bool = False) -> None:
        self.store.bookmark(self, initial_events_end)

    def stop(self) -> None:
        if not self.closed:
            self.closed = True
            self.store._unwatch(self)
            self.queue.put(None)

    def __iter__(self) -> Iterator[tuple[str, Event]]:
        while True:
            item = self.next()
            if item is None:
                return
            yield item


def _meta(obj: Obj) -> Obj:
    md = obj.get("metadata")
    if not isinstance(md, dict):
        md = {}
        obj["metadata"] = md
    return md


def _spec_part(obj: Obj, rt: ResourceType) -> Obj:
    drop = {"metadata", "status"} if (rt.has_status or not rt.custom) else {"metadata"}
    return {k: v for k, v in obj.items() if k not in drop and k not in ("apiVersion", "kind")}


def _share_unchanged(new: Obj, old: Obj) -> None:
    """Point the parts of ``new`` (top-level fields, and the fields of ``status``) that equal
    ``old``'s at ``old``'s objects: stored objects are immutable, so versions may share, and
    the event history then holds one copy of what a write did not change (a node's image
    list, a VM's spec) instead of one per version."""
    for k, v in new.items():
        if k == "metadata" or type(v) not in (dict, list):
            continue
        ov = old.get(k)
        if ov is v or type(ov) is not type(v):
            continue
        if k == "status" and type(v) is dict:
            for sk, sv in v.items():
                if type(sv) in (dict, list):
                    osv = ov.get(sk)  # type: ignore[union-attr]
                    if osv is not sv and type(osv) is type(sv) and osv == sv:
                        v[sk] = osv
        elif ov == v:
            new[k] = ov


def _encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        pad = "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(token + pad))
        return int(data["rv"]), str(data["start"])
    except Exception as exc:  # noqa: BLE001
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc


def _selects_something(selector: Obj | None) -> bool:
    """A PDB's selector that is not nil or empty (``metav1.LabelSelectorAsSelector``: nil is
    Nothing, ``{}`` is Everything, which the eviction subresource treats as matching nothing)."""
    if not selector:
        return False
    return bool(selector.get("matchLabels") or selector.get("matchExpressions"))


def _pod_ready(pod: Obj) -> bool:
    """``podutil.IsPodReady``: condition ``Ready`` is ``True``."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


class Store:
    """The in-memory API store. Thread-safe; one global re-entrant lock."""

    def __init__(self, registry: Registry, clock: Any) -> None:
        self.registry = registry
        self.clock = clock
        self.lock = threading.RLock()
        self._data: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self._rv = 1
        self._history: deque[Event] = deque(maxlen=HISTORY_LIMIT)
        self._watchers: dict[tuple[str, str], list[Watcher]] = {}
        self._subscribers: list[Callable[[Event], None]] = []
        # owner uid -> set of (rt key, ns, name) of dependents
        self._dependents: dict[str, set[tuple[tuple[str, str], str, str]]] = {}
        self._foreground_pending: set[str] = set()
        self._uids: dict[str, tuple[tuple[str, str], str, str]] = {}
        # kind -> (label key, value) -> keys of the stored objects that carry that label: a
        # list by an equality selector (a VM's migrations among 3,000, an instance manager's
        # pods) reads the smallest of its sets instead of every object of the kind
        self._labels: dict[tuple[str, str], dict[tuple[str, str], set[tuple[str, str]]]] = {}
        # node name -> keys of the pods bound to it: kube-apiserver's watch cache indexes pods
        # by ``spec.nodeName`` (kubernetes/kubernetes pkg/registry/core/pod/strategy.go
        # ``NodeNameIndexFunc``, the pod storage's ``Indexers``), so a list by
        # that field (a drain's) does not read every pod of the cluster
        self._pods_by_node: dict[str, set[tuple[str, str]]] = {}
        # kind -> its stored keys in list order, kept while no object of the kind is created
        # or removed (an update keeps the key): a list of a whole kind (18,000 Replicas) is
        # not sorted again on every read, as the watch cache's sorted store is not
        self._sorted_keys: dict[tuple[str, str], KeyList] = {}
        self.admission: list[AdmissionHook] = []
        self.validators: dict[tuple[str, str],
                              Callable[[Obj, Obj | None], list[dict[str, str]]]] = {}

    # ----------------------------------------------------------------- helpers
    def current_rv(self) -> int:
        return self._rv

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], Obj]:
        return self._data.setdefault(rt.key, {})

    def _ns_key(self, rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def subscribe(self, fn: Callable[[Event], None]) -> None:
        """In-process listeners (simulation runtime, invariant monitor); called under the lock."""
        with self.lock:
            self._subscribers.append(fn)

    def _emit(self, type_: str, rt: ResourceType, obj: Obj, old: Obj | None, rv: int) -> None:
        ev = Event(type_, rt, obj, old, rv)
        self._history.append(ev)
        for w in list(self._watchers.get(rt.key, ())):
            w.offer(ev)
        for fn in self._subscribers:
            fn(ev)

    def _index_labels(self, rkey: tuple[str, str], key: tuple[str, str], new: Obj | None,
                      old: Obj | None) -> None:
        """Keep ``_labels`` (and, for pods, ``_pods_by_node``) in step with one stored
        object replaced (``old`` -> ``new``; None for none). Called wherever a bucket entry is
        stored or dropped."""
        if rkey == _PODS:
            on = (old.get("spec") or {}).get("nodeName") if old is not None else None
            nn = (new.get("spec") or {}).get("nodeName") if new is not None else None
            if on != nn:
                if on:
                    s = self._pods_by_node.get(on)
                    if s is not None:
                        s.discard(key)
                        if not s:
                            del self._pods_by_node[on]
                if nn:
                    self._pods_by_node.setdefault(nn, set()).add(key)
        ol = (old["metadata"].get("labels") or {}) if old is not None else {}
        nl = (new["metadata"].get("labels") or {}) if new is not None else {}
        if ol is nl:
            return
        idx = self._labels.setdefault(rkey, {})
        for k, v in ol.items():
            if type(v) is str and nl.get(k) != v:
                s = idx.get((k, v))
                if s is not None:
                    s.discard(key)
                    if not s:
                        del idx[(k, v)]
        for k, v in nl.items():
            if type(v) is str and ol.get(k) != v:
                idx.setdefault((k, v), set()).add(key)

    def _index_owners(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        key = (rt.key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if old is not None:
            for ref in old["metadata"].get("ownerReferences") or []:
                s = self._dependents.get(ref.get("uid", ""))
                if s is not None:
                    s.discard(key)
        for ref in obj["metadata"].get("ownerReferences") or []:
            self._dependents.setdefault(ref.get("uid", ""), set()).add(key)

    def _unindex_owners(self, rt: ResourceType, obj: Obj) -> None:
        key = (rt.key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        for ref in obj["metadata"].get("ownerReferences") or []:
            s = self._dependents.get(ref.get("uid", ""))
            if s is not None:
                s.discard(key)
                if not s:
                    self._dependents.pop(ref.get("uid", ""), None)

    def _check_namespace(self, rt: ResourceType, namespace: str | None) -> str:
        if not rt.namespaced:
            return ""
        if not namespace:
            raise errors.bad_request("the server could not find the requested resource: "
                                     "namespace is required")
        ns_rt = self.registry.get("", "v1", "namespaces")
        assert ns_rt is not None
        ns_obj = self._bucket(ns_rt).get(("", namespace))
        if ns_obj is None:
            raise errors.not_found("namespaces", "", namespace)
        if ns_obj["metadata"].get("deletionTimestamp"):
            err = errors.forbidden_terminating(rt.plural, rt.group, namespace)
            raise err
        return namespace

    def _validate(self, rt: ResourceType, obj: Obj, old: Obj | None,
                  subresource: str | None = None) -> None:
        md = obj["metadata"]
        name = md.get("name", "")
        causes: list[dict[str, str]] = []
        if not name:
            causes.append(errors.field_required("metadata.name",
                                                "Required value: name or generateName is required"))
        elif old is None and (len(name) > 253 or not _NAME_RE.match(name)):
            causes.append(errors.field_invalid(
                "metadata.name", name,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character"))
        for k, v in (md.get("labels") or {}).items():
            if not isinstance(v, str) or len(v) > 63 or not re.fullmatch(
                    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", v):
                causes.append(errors.field_invalid(
                    "metadata.labels", v,
                    "a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character"))
        for k, v in (md.get("annotations") or {}).items():
            if not isinstance(v, str):
                causes.append(errors.field_invalid(f"metadata.annotations.{k}", v,
                                                   "annotation values must be strings"))
        extra = self.validators.get(rt.key)
        if extra is not None:
            causes.extend(extra(obj, old))
        strat = rt.strategy
        if strat is not None:
            if old is None and hasattr(strat, "validate"):
                causes.extend(strat.validate(obj))
            elif old is not None and hasattr(strat, "validate_update"):
                causes.extend(strat.validate_update(obj, old, subresource))
        if causes:
            raise errors.invalid(rt.kind, rt.group, name, causes)

    def _admit(self, op: str, rt: ResourceType, obj: Obj, old: Obj | None,
               subresource: str | None) -> None:
        for hook in list(self.admission):
            hook(op, rt, obj, old, subresource)

    # ------------------------------------------------------------------- reads
    def get_ref(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The stored object itself (read-only!) or None."""
        return self._data.get(rt.key, {}).get((self._ns_key(rt, namespace), name))

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        with self.lock:
            obj = self.get_ref(rt, namespace, name)
            if obj is None:
                raise errors.not_found(rt.plural, rt.group, name)
            return json_copy(obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        copy_items: bool = True,
    ) -> tuple[list[Obj], str, str | None, int | None]:
        """(items, resourceVersion, continue, remainingItemCount)."""
        lsel = label_selector if isinstance(label_selector, LabelSelector) else \
            parse_label_selector(label_selector)
        fsel = field_selector if isinstance(field_selector, FieldSelector) else \
            parse_field_selector(field_selector, rt.field_allowed)
        with self.lock:
            rv = self._rv
            start = ""
            if continue_token:
                rv_tok, start = _decode_continue(continue_token)
            bucket = self._data.get(rt.key, {})
            ns_filter = namespace if rt.namespaced and namespace else None
            # filter, then sort what matched: a selective list of a big kind (a VM's
            # migrations among 3,000) does not sort the whole kind; an equality selector
            # looks at the objects carrying one of its labels only (every filter below still
            # applies to them)
            items: Any = bucket.items()
            whole = True   # items are the whole kind, in no particular order
            exact = lsel.exact() if lsel.reqs else {}
            if exact:
                idx = self._labels.get(rt.key, {})
                fewest: set[tuple[str, str]] | None = None
                for kv in exact.items():
                    keys = idx.get(kv)
                    if keys is None:
                        fewest = set()
                        break
                    if fewest is None or len(keys) < len(fewest):
                        fewest = keys
                if fewest is not None and len(fewest) < len(bucket):
                    items = [(k, bucket[k]) for k in fewest]
                    whole = False
            node = fsel.value_of("spec.nodeName") if rt.key == _PODS else None
            if node:   # (not the unbound pods' "": those are not indexed)
                keys = self._pods_by_node.get(node, set())
                if not isinstance(items, list) or len(keys) < len(items):
                    items = [(k, bucket[k]) for k in keys]
                    whole = False
            by_labels = not lsel.empty
            by_fields = not fsel.empty
            matched: list[tuple[tuple[str, str], Obj]] = []
            if whole:   # already in order: no sort below
                ordered = self._keys_in_order(rt.key, bucket)
                if not (start or by_labels or by_fields):
                    # a whole kind, or one namespace of it (a range of the sorted keys):
                    # nothing to test object by object
                    if ns_filter is not None:
                        ordered = ordered[bisect.bisect_left(ordered, (ns_filter,)):
                                          bisect.bisect_left(ordered, (ns_filter + "\x00",))]
                    matched = [(k, bucket[k]) for k in ordered]
                    items = ()
                else:
                    items = ((k, bucket[k]) for k in ordered)
            for k, obj in items:
                if ns_filter is not None and k[0] != ns_filter:
                    continue
                if start and f"{k[0]}/{k[1]}" <= start:
                    continue
                if by_labels and not lsel.matches(obj["metadata"].get("labels")):
                    continue
                if by_fields and not fsel.matches(obj):
                    continue
                matched.append((k, obj))
            if not whole:
                matched.sort(key=lambda kv: kv[0])
            matched_total = len(matched)
            out: list[Obj] = [o for _, o in (matched[:limit] if limit else matched)]
            nxt: str | None = None
            remaining: int | None = None
            if limit and matched_total > len(out):
                last = out[-1]["metadata"]
                nxt = _encode_continue(rv, f"{last.get('namespace', '')}/{last['name']}")
                remaining = matched_total - len(out)
            if copy_items:
                out = json_copy(out)
            return out, str(rv), nxt, remaining

    def _keys_in_order(self, kind: tuple[str, str], bucket: dict[tuple[str, str], Obj]
                       ) -> KeyList:
        """The kind's keys sorted (namespace, name), as a list answers them; under the lock."""
        keys = self._sorted_keys.get(kind)
        if keys is None or len(keys) != len(bucket):
            keys = self._sorted_keys[kind] = sorted(bucket)
        return keys

    # ------------------------------------------------------------------ create
    def create(self, rt: ResourceType, obj: Obj, namespace: str | None = None,
               dry_run: bool = False) -> Obj:
        with self.lock:
            return json_copy(self._create(rt, obj, namespace, dry_run))

    def create_with_status(self, rt: ResourceType, obj: Obj, namespace: str | None = None,
                           status: Obj | None = None, copy_result: bool = True) -> Obj:
        """Create, then (when the kind has a status subresource and ``status`` differs from
        what the create stored) write ``status`` through the status subresource, as one step
        under the lock: the same two commits and events as ``create`` + ``update(status)``,
        without the intermediate copies."""
        with self.lock:
            stored = self._create(rt, obj, namespace, False)
            if status is not None and rt.has_status and stored.get("status") != status:
                md = stored["metadata"]
                self._commit_update(rt, stored, {"status": json_copy(status)}, "status", False,
                                    copy_result=False)
                stored = self.get_ref(rt, md.get("namespace"), md["name"]) or stored
            return json_copy(stored) if copy_result else stored

    def _create(self, rt: ResourceType, obj: Obj, namespace: str | None,
                dry_run: bool) -> Obj:
        """Create; returns the stored object itself (read-only) or, for a dry run, the
        object that would be stored."""
        with self.lock:
            obj = json_copy(obj)
            md = _meta(obj)
            body_ns = md.get("namespace")
            if rt.namespaced:
                if namespace and body_ns and body_ns != namespace:
                    raise errors.bad_request("the namespace of the provided object does not match "
                                             "the namespace sent on the request")
                namespace = namespace or body_ns
                self._check_namespace(rt, namespace)
                md["namespace"] = namespace
            else:
                md.pop("namespace", None)
            obj["apiVersion"] = rt.api_version
            obj["kind"] = rt.kind
            if not md.get("name") and md.get("generateName"):
                bucket = self._bucket(rt)
                prefix = md["generateName"][:58]
                import random

                for _ in range(8):
                    cand = prefix + "".join(random.choice(_GEN_ALPHABET) for _ in range(5))
                    if (self._ns_key(rt, namespace), cand) not in bucket:
                        md["name"] = cand
                        break
            for f in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "selfLink"):
                md.pop(f, None)
            if rt.has_status and rt.kind not in _STATUS_ONLY_ON_CREATE_KEPT:
                obj.pop("status", None)
            strat = rt.strategy
            if strat is not None and hasattr(strat, "prepare_for_create"):
                strat.prepare_for_create(obj)
            self._validate(rt, obj, None)
            self._admit("CREATE", rt, obj, None, None)
            key = (self._ns_key(rt, namespace), md["name"])
            if key in self._bucket(rt):
                raise errors.already_exists(rt.plural, rt.group, md["name"])
            md["uid"] = md.pop("_preassigned_uid", None) or str(uuid.uuid4())
            md["creationTimestamp"] = self.clock.timestamp()
            if rt.tracks_generation:
                md["generation"] = 1
            else:
                md.pop("generation", None)
            if dry_run:
                md["resourceVersion"] = ""
                return obj
            rv = self._next_rv()
            md["resourceVersion"] = str(rv)
            self._bucket(rt)[key] = obj
            self._sorted_keys.pop(rt.key, None)
            self._index_labels(rt.key, key, obj, None)
            self._uids[md["uid"]] = (rt.key, key[0], key[1])
            self._index_owners(rt, obj, None)
            if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
                self._crd_established(obj)
                obj = self._bucket(rt)[key]
                rv = int(obj["metadata"]["resourceVersion"])
            self._emit("ADDED", rt, obj, None, rv)
            return obj

    def _redecode_crs(self, crd: Obj, old_crd: Obj) -> None:
        """After a CRD's schemas change, stored custom resources read as the apiserver reads
        them from etcd: decoded (pruned, defaulted) with the new schema. The stored version
        changes, its resourceVersion does not (etcd holds the same bytes)."""
        def schemas(c: Obj) -> Any:
            return [(v.get("name"), v.get("schema")) for v in (c.get("spec") or {}).get(
                "versions") or []]

        if schemas(crd) == schemas(old_crd):
            return
        spec = crd.get("spec") or {}
        key = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
        bucket = self._data.get(key)
        if not bucket:
            return
        for k, obj in list(bucket.items()):
            rt = self.registry.by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
            strat = rt.strategy if rt is not None else None
            if strat is None or not hasattr(strat, "decode"):
                continue
            fresh = json_copy(obj)
            try:
                strat.decode(fresh)
            except errors.ApiError:
                continue
            if fresh != obj:
                bucket[k] = fresh
                self._index_labels(key, k, fresh, obj)

    def _crd_established(self, crd: Obj) -> None:
        """Serve a CRD at once and report it Established (what the CRD controller does)."""
        self.registry.add_crd(crd)
        now = self.clock.timestamp()
        names = crd.get("spec", {}).get("names", {})
        crd["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in crd["spec"].get("versions", [])
                               if v.get("storage")],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        }

    # ------------------------------------------------------------------ update
    def update(self, rt: ResourceType, obj: Obj, namespace: str | None = None,
               subresource: str | None = None, dry_run: bool = False) -> Obj:
        """PUT semantics: optimistic concurrency on metadata.resourceVersion."""
        with self.lock:
            new = json_copy(obj)
            md = _meta(new)
            name = md.get("name", "")
            if rt.namespaced:
                body_ns = md.get("namespace")
                if namespace and body_ns and body_ns != namespace:
                    raise errors.bad_request("the namespace of the provided object does not match "
                                             "the namespace sent on the request")
                namespace = namespace or body_ns
            old = self.get_ref(rt, namespace, name)
            if old is None:
                raise errors.not_found(rt.plural, rt.group, name)
            rv_given = md.get("resourceVersion")
            if not rv_given:
                if not rt.unconditional_update:
                    raise errors.invalid(rt.kind, rt.group, name, [errors.field_invalid(
                        "metadata.resourceVersion", 0, "must be specified for an update")])
            elif rv_given != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name)
            if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
                raise errors.conflict(rt.plural, rt.group, name,
                                      f"Precondition failed: UID in precondition: {md['uid']}, "
                                      f"UID in object meta: {old['metadata']['uid']}")
            return self._commit_update(rt, old, new, subresource, dry_run)

    def modify(self, rt: ResourceType, namespace: str | None, name: str,
               fn: Callable[[Obj], Obj | None], subresource: str | None = None,
               dry_run: bool = False, create_missing: bool = False,
               copy_result: bool = True) -> Obj:
        """Atomic read-modify-write: ``fn`` gets a copy of the current object (or None when
        ``create_missing``) and returns the desired object. Used by PATCH and in-process
        clients; the resourceVersion in the result of ``fn``, if changed, is a precondition.
        With ``copy_result=False`` the result is the stored object itself (read-only)."""
        with self.lock:
            old = self.get_ref(rt, namespace, name)
            if old is None:
                if not create_missing:
                    raise errors.not_found(rt.plural, rt.group, name)
                created = fn(None)  # type: ignore[arg-type]
                if created is None:
                    raise errors.not_found(rt.plural, rt.group, name)
                return self.create(rt, created, namespace, dry_run)
            cur = json_copy(old)
            new = fn(cur)
            if new is None:
                return json_copy(old) if copy_result else old
            md = _meta(new)
            rv_given = md.get("resourceVersion")
            if rv_given and rv_given != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name)
            if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
                raise errors.conflict(rt.plural, rt.group, name,
                                      f"Precondition failed: UID in precondition: {md['uid']}, "
                                      f"UID in object meta: {old['metadata']['uid']}")
            if md.get("name", name) != name:
                raise errors.bad_request(
                    "the name of the object does not match the name on the URL")
            return self._commit_update(rt, old, new, subresource, dry_run,
                                       copy_result=copy_result)

    def _commit_update(self, rt: ResourceType, old: Obj, new: Obj, subresource: str | None,
                       dry_run: bool, copy_result: bool = True) -> Obj:
        omd = old["metadata"]
        # ``new`` is the caller's private copy. Subtrees taken over from ``old`` are shared,
        # not copied (stored objects are immutable; strategies replace what they change).
        if subresource == "status":
            merged = dict(old)
            merged["metadata"] = json_copy(omd)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
        else:
            if rt.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            md = _meta(new)
            for f in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generateName"):
                if f in omd:
                    md[f] = omd[f]
                else:
                    md.pop(f, None)
            md["name"] = omd["name"]
            if rt.namespaced:
                md["namespace"] = omd["namespace"]
            else:
                md.pop("namespace", None)
            if omd.get("deletionTimestamp"):
                added = set(md.get("finalizers") or []) - set(omd.get("finalizers") or [])
                if added:
                    raise errors.invalid(rt.kind, rt.group, omd["name"], [errors.field_invalid(
                        "metadata.finalizers", sorted(added),
                        "no new finalizers can be added if the object is being deleted")])
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        strat = rt.strategy
        if strat is not None and hasattr(strat, "coerce_update"):
            # a custom resource is decoded (pruned, defaulted) before the update rules run
            strat.coerce_update(new, old, subresource)
        md = new["metadata"]
        md["resourceVersion"] = omd["resourceVersion"]
        if rt.tracks_generation:
            md["generation"] = omd.get("generation", 1)
            if _spec_part(new, rt) != _spec_part(old, rt):
                md["generation"] = omd.get("generation", 1) + 1
        else:
            md.pop("generation", None)
        strat = rt.strategy
        if strat is not None and hasattr(strat, "prepare_for_update"):
            strat.prepare_for_update(new, old, subresource)
        if not md.get("finalizers"):
            md.pop("finalizers", None)
        if new == old:  # no-op: no new resourceVersion, no event
            return json_copy(old) if copy_result else old
        self._validate(rt, new, old, subresource)
        self._admit("UPDATE", rt, new, old, subresource)
        if dry_run:
            return json_copy(new) if copy_result else new
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions") and subresource is None:
            self.registry.add_crd(new)
            self._redecode_crs(new, old)
        _share_unchanged(new, old)
        rv = self._next_rv()
        md["resourceVersion"] = str(rv)
        key = (omd.get("namespace", ""), omd["name"])
        self._bucket(rt)[key] = new
        self._index_labels(rt.key, key, new, old)
        self._index_owners(rt, new, old)
        self._emit("MODIFIED", rt, new, old, rv)
        if md.get("deletionTimestamp") and not md.get("finalizers") and not self._grace_pending(
                rt, new):
            self._remove(rt, new)
        result = self.get_ref(rt, omd.get("namespace"), omd["name"]) or new
        return json_copy(result) if copy_result else result

    # ------------------------------------------------------------------ delete
    def _grace_pending(self, rt: ResourceType, obj: Obj) -> bool:
        """A pod being deleted gracefully waits for its kubelet (deletionGracePeriodSeconds>0)."""
        return rt.graceful_delete and (obj["metadata"].get("deletionGracePeriodSeconds") or 0) > 0

    def delete(self, rt: ResourceType, namespace: str | None, name: str,
               propagation: str | None = None, grace_period: int | None = None,
               preconditions: dict[str, Any] | None = None, dry_run: bool = False,
               orphan_dependents: bool | None = None) -> Obj:
        with self.lock:
            old = self.get_ref(rt, namespace, name)
            if old is None:
                raise errors.not_found(rt.plural, rt.group, name)
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise errors.conflict(rt.plural, rt.group, name,
                                      f"Precondition failed: UID in precondition: {pre['uid']}, "
                                      f"UID in object meta: {old['metadata']['uid']}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"][
                    "resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name,
                                      "Precondition failed: ResourceVersion in precondition: "
                                      f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                      f"{old['metadata']['resourceVersion']}")
            if orphan_dependents is not None and propagation is None:
                propagation = "Orphan" if orphan_dependents else "Background"
            if propagation is None:
                propagation = rt.default_propagation
            if propagation not in ("Background", "Foreground", "Orphan"):
                raise errors.invalid(rt.kind, rt.group, name, [errors.field_invalid(
                    "propagationPolicy", propagation,
                    'supported values: "Orphan", "Background", "Foreground"')])
            self._admit("DELETE", rt, old, old, None)
            if dry_run:
                return json_copy(old)
            new = json_copy(old)
            md = new["metadata"]
            fins = list(md.get("finalizers") or [])
            if propagation == "Foreground" and "foregroundDeletion" not in fins and \
                    md.get("uid") in self._dependents:
                fins.append("foregroundDeletion")
            if propagation == "Orphan" and "orphan" not in fins and md.get("uid") in \
                    self._dependents:
                fins.append("orphan")
            graceful = False
            if rt.graceful_delete:
                spec = new.get("spec", {})
                phase = (new.get("status") or {}).get("phase")
                if grace_period is None:
                    grace_period = int(spec.get("terminationGracePeriodSeconds", 30))
                if spec.get("nodeName") and phase not in ("Succeeded", "Failed") and \
                        grace_period > 0:
                    cur = md.get("deletionGracePeriodSeconds")
                    if cur is None or grace_period < cur:
                        md["deletionGracePeriodSeconds"] = grace_period
                    graceful = True
                else:
                    md["deletionGracePeriodSeconds"] = 0
            if fins or graceful:
                if not md.get("deletionTimestamp"):
                    md["deletionTimestamp"] = self.clock.timestamp()
                    if rt.tracks_generation:
                        md["generation"] = md.get("generation", 1) + 1
                if not graceful and rt.graceful_delete:
                    md["deletionGracePeriodSeconds"] = 0
                md["finalizers"] = fins
                if new != old:
                    rv = self._next_rv()
                    md["resourceVersion"] = str(rv)
                    key = (md.get("namespace", ""), md["name"])
                    self._bucket(rt)[key] = new
                    self._index_labels(rt.key, key, new, old)
                    self._emit("MODIFIED", rt, new, old, rv)
                self._process_deleting(rt, new)
                cur_obj = self.get_ref(rt, namespace, name)
                return json_copy(cur_obj if cur_obj is not None else new)
            self._remove(rt, new, propagation)
            return json_copy(new)

    def _process_deleting(self, rt: ResourceType, obj: Obj) -> None:
        """Drive the GC finalizers (orphan / foregroundDeletion) of an object being deleted."""
        md = obj["metadata"]
        uid = md["uid"]
        fins = md.get("finalizers") or []
        if "orphan" in fins:
            self._orphan_dependents(uid)
            self._drop_finalizer(rt, obj, "orphan")
        elif "foregroundDeletion" in fins:
            self._foreground_pending.add(uid)
            for dkey in list(self._dependents.get(uid, ())):
                drt = self._rt_for_key(dkey[0])
                if drt is not None and self._data.get(dkey[0], {}).get((dkey[1], dkey[2])):
                    dep = self._data[dkey[0]][(dkey[1], dkey[2])]
                    if not dep["metadata"].get("deletionTimestamp"):
                        self.delete(drt, dkey[1] or None, dkey[2], propagation="Foreground")
            self._check_foreground(uid)

    def _check_foreground(self, uid: str) -> None:
        if uid not in self._foreground_pending:
            return
        deps = [d for d in self._dependents.get(uid, ())
                if self._data.get(d[0], {}).get((d[1], d[2])) is not None]
        if deps:
            return
        self._foreground_pending.discard(uid)
        loc = self._uids.get(uid)
        if loc is None:
            return
        obj = self._data.get(loc[0], {}).get((loc[1], loc[2]))
        rt = self._rt_for_key(loc[0])
        if obj is not None and rt is not None:
            self._drop_finalizer(rt, obj, "foregroundDeletion")

    def _drop_finalizer(self, rt: ResourceType, obj: Obj, fin: str) -> None:
        cur = self.get_ref(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if cur is None or fin not in (cur["metadata"].get("finalizers") or []):
            return
        new = json_copy(cur)
        new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != fin]
        self._commit_update(rt, cur, new, None, False, copy_result=False)

    def _rt_for_key(self, key: tuple[str, str]) -> ResourceType | None:
        for rt in self.registry.all():
            if rt.key == key:
                return rt
        return None

    def _orphan_dependents(self, uid: str) -> None:
        for dkey in list(self._dependents.get(uid, ())):
            drt = self._rt_for_key(dkey[0])
            dep = self._data.get(dkey[0], {}).get((dkey[1], dkey[2]))
            if drt is None or dep is None:
                continue
            new = json_copy(dep)
            new["metadata"]["ownerReferences"] = [
                r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
            if not new["metadata"]["ownerReferences"]:
                del new["metadata"]["ownerReferences"]
            self._commit_update(drt, dep, new, None, False, copy_result=False)

    def _remove(self, rt: ResourceType, obj: Obj, propagation: str = "Background") -> None:
        md = obj["metadata"]
        key = (md.get("namespace", ""), md["name"])
        bucket = self._bucket(rt)
        old = bucket.pop(key, None)
        if old is None:
            return
        self._sorted_keys.pop(rt.key, None)
        self._index_labels(rt.key, key, None, old)
        rv = self._next_rv()
        final = json_copy(obj)
        final["metadata"]["resourceVersion"] = str(rv)
        self._unindex_owners(rt, old)
        uid = md["uid"]
        self._uids.pop(uid, None)
        self._emit("DELETED", rt, final, old, rv)
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._drop_crd_objects(obj)
        if rt.key == ("", "namespaces"):
            self._drop_namespace_contents(md["name"])
        # garbage-collect dependents
        if propagation == "Orphan":
            self._orphan_dependents(uid)
        else:
            for dkey in list(self._dependents.get(uid, ())):
                drt = self._rt_for_key(dkey[0])
                dep = self._data.get(dkey[0], {}).get((dkey[1], dkey[2]))
                if drt is None or dep is None:
                    continue
                refs = [r for r in dep["metadata"].get("ownerReferences") or []
                        if r.get("uid") != uid]
                alive = [r for r in refs if self._uid_exists(r.get("uid", ""))]
                if alive:
                    new = json_copy(dep)
                    new["metadata"]["ownerReferences"] = refs
                    self._commit_update(drt, dep, new, None, False, copy_result=False)
                elif not dep["metadata"].get("deletionTimestamp"):
                    self.delete(drt, dkey[1] or None, dkey[2], propagation="Background")
            self._dependents.pop(uid, None)
        for ref in md.get("ownerReferences") or []:
            self._check_foreground(ref.get("uid", ""))

    def _uid_exists(self, uid: str) -> bool:
        return uid in self._uids

    def _drop_crd_objects(self, crd: Obj) -> None:
        spec = crd.get("spec", {})
        key = (spec.get("group", ""), spec.get("names", {}).get("plural", ""))
        rts = [rt for rt in self.registry.all() if rt.key == key]
        bucket = self._data.pop(key, {})
        self._labels.pop(key, None)
        self._sorted_keys.pop(key, None)
        if rts:
            for obj in bucket.values():
                self._uids.pop(obj["metadata"].get("uid", ""), None)
                rv = self._next_rv()
                self._emit("DELETED", rts[0], obj, obj, rv)
        self.registry.remove_crd(crd["metadata"]["name"])

    def _drop_namespace_contents(self, ns: str) -> None:
        for rt in self.registry.all():
            if not rt.namespaced:
                continue
            bucket = self._data.get(rt.key, {})
            for key in [k for k in bucket if k[0] == ns]:
                obj = bucket.get(key)
                if obj is not None:
                    self._remove(rt, obj)

    def finish_graceful_delete(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        """The kubelet's final delete (grace period 0) of a terminating pod."""
        with self.lock:
            cur = self.get_ref(rt, namespace, name)
            if cur is None:
                return
            new = json_copy(cur)
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if not new["metadata"].get("deletionTimestamp"):
                new["metadata"]["deletionTimestamp"] = self.clock.timestamp()
            if new["metadata"].get("finalizers"):
                self._commit_update(rt, cur, new, None, False, copy_result=False)
            else:
                self._remove(rt, new)

    # ------------------------------------------------------------------- watch
    def watch(self, rt: ResourceType, namespace: str | None = None,
              resource_version: str | None = None,
              label_selector: str | LabelSelector | None = None,
              field_selector: str | FieldSelector | None = None,
              send_initial_events: bool | None = None) -> Watcher:
        lsel = label_selector if isinstance(label_selector, LabelSelector) else \
            parse_label_selector(label_selector)
        fsel = field_selector if isinstance(field_selector, FieldSelector) else \
            parse_field_selector(field_selector, rt.field_allowed)
        w = Watcher(self, rt, namespace if rt.namespaced and namespace else None, lsel, fsel)
        with self.lock:
            initial = resource_version in (None, "", "0") or bool(send_initial_events)
            if initial:
                bucket = self._data.get(rt.key, {})
                for k in sorted(bucket):
                    obj = bucket[k]
                    if w.matches(obj):
                        w._put("ADDED", Event("ADDED", rt, obj, None,
                                              int(obj["metadata"]["resourceVersion"])))
                if send_initial_events:
                    self.bookmark(w, initial_events_end=True)
            else:
                try:
                    since = int(str(resource_version))
                except ValueError as exc:
                    raise errors.bad_request(
                        f"invalid resource version: {resource_version}") from exc
                oldest = self._history[0].rv if self._history else self._rv + 1
                if since < oldest - 1 and since < self._rv:
                    raise errors.gone(f"too old resource version: {since} ({oldest - 1})")
                # the history is in resourceVersion order (each event is appended with the
                # revision just taken) and a watch usually starts from a recent list: take
                # the events after ``since`` from the newest end instead of walking all
                # 100,000 on every watch
                newer: list[Event] = []
                for ev in reversed(self._history):
                    if ev.rv <= since:
                        break
                    newer.append(ev)
                key = rt.key
                for ev in reversed(newer):
                    if ev.rt is not None and ev.rt.key == key:
                        w.offer(ev)
            self._watchers.setdefault(rt.key, []).append(w)
        return w

    def bookmark(self, w: Watcher, initial_events_end: bool = False) -> None:
        with self.lock:
            md: Obj = {"resourceVersion": str(self._rv)}
            if initial_events_end:
                md["annotations"] = {"k8s.io/initial-events-end": "true"}
            obj = {"kind": w.rt.kind, "apiVersion": w.rt.api_version, "metadata": md}
            w.queue.put(("BOOKMARK", Event("BOOKMARK", w.rt, obj, None, self._rv)))

    def _unwatch(self, w: Watcher) -> None:
        with self.lock:
            lst = self._watchers.get(w.rt.key, [])
            if w in lst:
                lst.remove(w)

    def drop_watchers(self, fraction: float = 1.0) -> int:
        """Close watch streams (fault injection: watch streams cut)."""
        import random

        n = 0
        with self.lock:
            for lst in self._watchers.values():
                for w in list(lst):
                    if random.random() < fraction:
                        w.stop()
                        n += 1
        return n

    def watcher_count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self._watchers.values())

    # ---------------------------------------------------------------- eviction
    def evict(self, rt: ResourceType, namespace: str, name: str,
              body: Obj | None = None, dry_run: bool = False) -> Obj:
        """policy/v1 Eviction: checks PodDisruptionBudgets, then deletes the pod gracefully
        (kubernetes pkg/registry/core/pod/storage/eviction.go, v1.33: terminal, pending and
        terminating pods ignore the budget; an unready pod is evicted without taking from it
        under ``unhealthyPodEvictionPolicy: AlwaysAllow``, or under ``IfHealthyBudget`` (the
        default) while ``currentHealthy >= desiredHealthy > 0``; otherwise checkAndDecrement)."""
        with self.lock:
            pod = self.get_ref(rt, namespace, name)
            if pod is None:
                raise errors.not_found(rt.plural, rt.group, name)
            body = body or {}
            self._admit("CREATE", rt, body, pod, "eviction")
            phase = (pod.get("status") or {}).get("phase")
            opts = body.get("deleteOptions") or {}
            grace = opts.get("gracePeriodSeconds")
            if pod["metadata"].get("deletionTimestamp") or phase in ("Succeeded", "Failed",
                                                                     "Pending"):
                if not dry_run:
                    self.delete(rt, namespace, name, grace_period=grace)
                return {"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Success", "code": 201}
            pdb_rt = self.registry.get("policy", "v1", "poddisruptionbudgets")
            assert pdb_rt is not None
            from .selectors import from_label_selector_dict

            labels = pod["metadata"].get("labels") or {}
            # a nil or empty selector matches nothing (getPodDisruptionBudgets)
            pdbs = [p for p in self._data.get(pdb_rt.key, {}).values()
                    if p["metadata"].get("namespace") == namespace and
                    _selects_something((p.get("spec") or {}).get("selector")) and
                    from_label_selector_dict(p["spec"]["selector"]).matches(labels)]
            if len(pdbs) > 1:
                raise errors.ApiError(500, "InternalError",
                                      "This pod has more than one PodDisruptionBudget, which the "
                                      "eviction subresource does not support.")
            if pdbs:
                pdb = pdbs[0]
                st = pdb.get("status") or {}
                if not _pod_ready(pod):
                    # an unready pod does not count towards currentHealthy: evicted without
                    # taking from the budget under AlwaysAllow, or (IfHealthyBudget, the
                    # default) while the application is healthy
                    policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
                    desired = int(st.get("desiredHealthy", 0) or 0)
                    if policy == "AlwaysAllow" or (
                            int(st.get("currentHealthy", 0) or 0) >= desired and desired > 0):
                        if not dry_run:
                            self.delete(rt, namespace, name, grace_period=grace)
                        return {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Success", "code": 201}
                if (st.get("observedGeneration") or 0) < (pdb["metadata"].get("generation") or 0):
                    raise errors.too_many_requests(
                        "Cannot evict pod as it would violate the pod's disruption budget.")
                if int(st.get("disruptionsAllowed", 0)) <= 0:
                    err = errors.too_many_requests(
                        "Cannot evict pod as it would violate the pod's disruption budget.")
                    err.details = {"causes": [{
                        "reason": "DisruptionBudget",
                        "message": (f"The disruption budget {pdb['metadata']['name']} needs "
                                    f"{st.get('desiredHealthy', 0)} healthy pods and has "
                                    f"{st.get('currentHealthy', 0)} currently"),
                    }]}
                    raise err
                if not dry_run:
                    newp = json_copy(pdb)
                    nst = newp.setdefault("status", {})
                    nst["disruptionsAllowed"] = int(st.get("disruptionsAllowed", 0)) - 1
                    nst.setdefault("disruptedPods", {})[name] = self.clock.timestamp()
                    self._commit_update(pdb_rt, pdb, newp, "status", False, copy_result=False)
            if not dry_run:
                self.delete(rt, namespace, name, grace_period=grace)
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "code": 201}
