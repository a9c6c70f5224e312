"""Namespace basics the control plane provides: the system namespaces, ``status.phase``
(``Active``; ``Terminating`` while a namespace with finalizers is being deleted) and a
``default`` ServiceAccount in every namespace (what the serviceaccount controller does).

Deleting a namespace's content is done by the store when the namespace goes away (it
removes every namespaced object in it and emits their DELETED events).

Upstream: kubernetes/kubernetes ``v1.32.4`` (RKE2 ``v1.32.4+rke2r1``, Harvester
v1.5.1) and ``v1.33.3`` (RKE2 ``v1.33.3+rke2r1``, Harvester v1.6.0):
``pkg/controlplane/controller/systemnamespaces/`` (the system
namespaces), ``pkg/controller/namespace/deletion/namespaced_resources_deleter.go`` (content
deletion, ``Terminating``), ``pkg/controller/serviceaccount/serviceaccounts_controller.go``
(``default`` ServiceAccount).
Not modelled: the deleter's discovery-driven pass and its namespace conditions
(``NamespaceDeletionDiscoveryFailure``, ``NamespaceContentRemaining``,
``NamespaceFinalizersRemaining`` ...); whether the store's content removal waits for the
contained objects' finalizers as upstream does was not checked.
"""

from __future__ import annotations

from typing import Any

from ..api import errors
from . import podutil as pu

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Namespaces:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.client = world.client_for("namespace-controller")
        self.ns = pu.informer(world, "v1", "Namespace")
        self.sas = pu.informer(world, "v1", "ServiceAccount")
        for name in SYSTEM_NAMESPACES:
            if self.ns.get("", name) is None:
                try:
                    created = self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": name}})
                    self.ns._put(created)
                except errors.ApiError as exc:
                    if exc.code != 409:
                        raise
        self.ns.add_handler(self._on_ns)
        self.sas.add_handler(self._on_sa)
        world.runtime.call_soon(self._initial)

    def _initial(self) -> None:
        for obj in self.ns.all():
            self._sync(obj)

    def _on_ns(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ != "DELETED":
            self._sync(obj)

    def _on_sa(self, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ == "DELETED" and obj["metadata"]["name"] == "default":
            ns = self.ns.get("", obj["metadata"].get("namespace", ""))
            if ns is not None and not pu.is_deleting(ns):
                self._ensure_sa(ns["metadata"]["name"])

    def _sync(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        want = "Terminating" if pu.is_deleting(obj) else "Active"
        if (obj.get("status") or {}).get("phase") != want:
            def fn(cur: dict[str, Any]) -> dict[str, Any]:
                cur.setdefault("status", {})["phase"] = want
                return cur
            pu.ignore_missing(lambda: self.client.modify("v1", "Namespace", name, fn,
                                                         subresource="status"))
        if want == "Active":
            self._ensure_sa(name)

    def _ensure_sa(self, ns: str) -> None:
        if self.sas.get(ns, "default") is not None:
            return
        try:
            self.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                "metadata": {"name": "default", "namespace": ns}}, ns)
        except errors.ApiError as exc:
            if exc.code not in (404, 409, 403):
                raise


def setup(world: Any) -> Namespaces:
    return Namespaces(world)
