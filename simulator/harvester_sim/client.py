"""The in-process API client used by simulated controllers, programs and scenario loading.

It goes through the same :class:`~harvester_sim.api.store.Store` as HTTP clients (same
validation, resourceVersions, conflicts, admission, watch events); there is no side door.
Objects are addressed by ``apiVersion`` + ``kind`` like in manifests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .api import errors
from .api.patches import merge_patch
from .api.resources import Registry, ResourceType
from .api.selectors import LabelSelector, from_label_selector_dict, from_match_labels
from .api.store import Obj, Store

ApiError = errors.ApiError


class Client:
    """Typed-by-convention access to the store for in-process actors."""

    def __init__(self, store: Store, user_agent: str = "harvester-sim") -> None:
        self.store = store
        self.registry: Registry = store.registry
        self.user_agent = user_agent
        self.requests: dict[str, int] = {}

    def with_agent(self, user_agent: str) -> Client:
        return Client(self.store, user_agent)

    def rt(self, api_version: str, kind: str) -> ResourceType:
        rt = self.registry.by_kind(api_version, kind)
        if rt is None:
            raise errors.ApiError(404, "NotFound",
                                  f'the server doesn\'t have a resource type "{kind}" '
                                  f'in "{api_version}"')
        return rt

    def _count(self, verb: str) -> None:
        self.requests[verb] = self.requests.get(verb, 0) + 1

    # reads ------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        self._count("get")
        return self.store.get(self.rt(api_version, kind), namespace, name)

    def try_get(self, api_version: str, kind: str, name: str,
                namespace: str | None = None) -> Obj | None:
        try:
            return self.get(api_version, kind, name, namespace)
        except errors.ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def try_list(self, api_version: str, kind: str,
                 namespace: str | None = None) -> list[Obj]:
        """``list``, empty when the kind is not served (404: its CRD not installed yet);
        any other error is raised."""
        try:
            return self.list(api_version, kind, namespace)
        except errors.ApiError as exc:
            if exc.code == 404:
                return []
            raise

    def peek(self, api_version: str, kind: str, name: str,
             namespace: str | None = None) -> Obj | None:
        """``try_get`` without the copy: the stored object itself, which must be treated as
        read-only (like the objects handlers get with events). Counts as a get."""
        self._count("get")
        rt = self.rt(api_version, kind)
        with self.store.lock:
            return self.store.get_ref(rt, namespace, name)

    def list_refs(self, api_version: str, kind: str, namespace: str | None = None,
                  label_selector: str | dict[str, Any] | LabelSelector | None = None,
                  field_selector: str | None = None) -> list[Obj]:
        """``list`` without the copies: the stored objects, read-only (for informers)."""
        return self.list(api_version, kind, namespace, label_selector, field_selector,
                         _copy=False)

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | dict[str, Any] | LabelSelector | None = None,
             field_selector: str | None = None, _copy: bool = True) -> list[Obj]:
        """``label_selector`` may be a query string, a metav1.LabelSelector dict, or
        a plain ``{key: value}`` dict of labels."""
        self._count("list")
        sel: str | LabelSelector | None
        if isinstance(label_selector, dict):
            if "matchLabels" in label_selector or "matchExpressions" in label_selector:
                sel = from_label_selector_dict(label_selector)
            else:
                sel = from_match_labels(label_selector)
        else:
            sel = label_selector
        items, _, _, _ = self.store.list(self.rt(api_version, kind), namespace, sel,
                                         field_selector, copy_items=_copy)
        return items

    # writes -----------------------------------------------------------------
    def create(self, obj: Obj, namespace: str | None = None, copy_result: bool = True) -> Obj:
        """Create; if ``obj`` carries a status and the kind has a status subresource, the
        status is written right after (as a controller would). With ``copy_result=False``
        the result is the stored object (read-only)."""
        self._count("create")
        rt = self.rt(obj["apiVersion"], obj["kind"])
        status = obj.get("status")
        # create + status write as one step: no other writer between
        return self.store.create_with_status(rt, obj, namespace, status, copy_result)

    def update(self, obj: Obj) -> Obj:
        self._count("update")
        return self.store.update(self.rt(obj["apiVersion"], obj["kind"]), obj)

    def update_status(self, obj: Obj) -> Obj:
        self._count("update")
        return self.store.update(self.rt(obj["apiVersion"], obj["kind"]), obj,
                                 subresource="status")

    def modify(self, api_version: str, kind: str, name: str, fn: Callable[[Obj], Obj | None],
               namespace: str | None = None, subresource: str | None = None,
               copy_result: bool = True) -> Obj:
        """Atomic read-modify-write; ``fn`` edits (and returns) the object or returns None.
        With ``copy_result=False`` the result is the stored object (read-only)."""
        self._count("patch")

        def apply(cur: Obj) -> Obj | None:
            cur["metadata"].pop("resourceVersion", None)
            return fn(cur)

        return self.store.modify(self.rt(api_version, kind), namespace, name, apply, subresource,
                                 copy_result=copy_result)

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None, subresource: str | None = None) -> Obj:
        """JSON merge patch."""
        def apply(cur: Obj) -> Obj:
            return merge_patch(cur, patch)  # type: ignore[no-any-return]

        return self.modify(api_version, kind, name, apply, namespace, subresource)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               propagation: str | None = None, grace_period: int | None = None) -> Obj | None:
        self._count("delete")
        try:
            return self.store.delete(self.rt(api_version, kind), namespace, name,
                                     propagation=propagation, grace_period=grace_period)
        except errors.ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def evict(self, name: str, namespace: str) -> Obj:
        self._count("create")
        return self.store.evict(self.rt("v1", "Pod"), namespace, name)
