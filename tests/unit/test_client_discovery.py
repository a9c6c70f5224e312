"""Kube and a stale discovery cache: kubernetes.core caches discovery on disk per API host and
user, so a kind cached as served can answer 404 for its path (the CRD was deleted since, or a
new cluster listens where an earlier one did: `make test` once failed the what-if pre-flight
on a fresh simulator this way). Discovery is then read again once, and the kind is not served
or the call is made again; a 404 for a missing object stays what it was."""

from __future__ import annotations

from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path
client = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client")
discovery_cache = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.discovery_cache")
errors = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors")

PATH_404 = client.ApiError(404, "NotFound", errors.PATH_NOT_FOUND)


class Resource:
    def __init__(self, answers: list[Any]) -> None:
        self.answers, self.calls = answers, 0

    def get(self, **kw: Any) -> dict[str, Any]:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)


class Discovery:
    """``resources`` of a dynamic client: serves ``served`` until invalidated, then
    ``after`` (None: the kind is gone)."""

    def __init__(self, served: Resource, after: Resource | None) -> None:
        self.current: Resource | None = served
        self.after, self.invalidated = after, 0
        self.resources = self

    def get(self, api_version: str, kind: str) -> Resource:
        if self.current is None:
            from kubernetes.dynamic.exceptions import ResourceNotFoundError
            raise ResourceNotFoundError(f"{kind} not found")
        return self.current

    def invalidate_cache(self) -> None:
        self.invalidated += 1
        self.current = self.after


def test_a_kind_gone_since_discovery_is_not_served() -> None:
    dyn = Discovery(Resource([PATH_404]), after=None)
    kube = client.Kube(dyn)
    assert kube.list_if_served("example.io/v1", "Thing") is None
    assert dyn.invalidated == 1
    with pytest.raises(client.NotServed):
        kube.get("example.io/v1", "Thing", "x")


def test_a_kind_served_again_after_rediscovery_is_read() -> None:
    fresh = Resource([{"items": [{"metadata": {"name": "a"}}], "metadata": {}}])
    dyn = Discovery(Resource([PATH_404]), after=fresh)
    kube = client.Kube(dyn)
    assert [i["metadata"]["name"] for i in kube.list("example.io/v1", "Thing")] == ["a"]
    assert dyn.invalidated == 1 and fresh.calls == 1


def test_a_missing_object_is_none_without_rediscovery() -> None:
    gone = client.ApiError(404, "NotFound", 'things.example.io "x" not found')
    dyn = Discovery(Resource([gone]), after=None)
    kube = client.Kube(dyn)
    assert kube.get("example.io/v1", "Thing", "x") is None
    assert dyn.invalidated == 0


class _Discoverer:
    """Stands for kubernetes' LazyDiscoverer: it calls ``self._write_cache()`` whenever a
    lookup discovered something."""

    def __init__(self) -> None:
        self.writes = 0

    def _write_cache(self) -> None:
        self.writes += 1

    def search(self) -> None:
        self._write_cache()


def test_discovery_cache_is_written_once_when_flushed() -> None:
    disc = _Discoverer()
    dyn = type("Dyn", (), {"resources": disc})()
    discovery_cache.defer_discovery_writes(dyn)
    for _lookup in range(7):
        disc.search()
    assert disc.writes == 0
    discovery_cache.flush_discovery_cache()
    assert disc.writes == 1
    discovery_cache.flush_discovery_cache()   # nothing new: no second write
    assert disc.writes == 1


def test_nothing_discovered_writes_nothing() -> None:
    disc = _Discoverer()
    discovery_cache.defer_discovery_writes(type("Dyn", (), {"resources": disc})())
    discovery_cache.flush_discovery_cache()
    assert disc.writes == 0


def test_discovery_cache_written_as_kubernetes_writes_it(tmp_path: Any) -> None:
    """The held-back write of a kubernetes Discoverer (its cache file and ``_cache``) gives
    the file its own ``_write_cache`` gives (``json.dump`` with ``CacheEncoder``), without
    calling it."""
    import io
    import json

    from kubernetes.dynamic.discovery import CacheEncoder

    disc = _Discoverer()
    path = tmp_path / "k8srcp-x.json"
    cache = {"library_version": "1", "resources": {"api": {"": {"v1": {"a": [1, "é"]}}}}}
    setattr(disc, "_Discoverer__cache_file", str(path))   # as kubernetes' name mangling has it
    disc._cache = cache  # type: ignore[attr-defined]  # noqa: SLF001
    discovery_cache.defer_discovery_writes(type("Dyn", (), {"resources": disc})())
    disc.search()
    discovery_cache.flush_discovery_cache()
    own = io.StringIO()
    json.dump(cache, own, cls=CacheEncoder)
    assert path.read_text() == own.getvalue()
    assert disc.writes == 0


class _Server:
    """What a discovery client reads of an API server: the groups and the kinds of each group
    version (``served``); ``paths`` lists every request."""

    def __init__(self, served: dict[str, list[str]]) -> None:
        self.served = served
        self.paths: list[str] = []
        self.configuration = type("Conf", (), {"host": "https://discovery.test:1"})()

    def request(self, method: str, path: str, serializer: Any = None, **_kw: Any) -> Any:
        from types import SimpleNamespace
        self.paths.append(path.lstrip("/"))
        path = path.lstrip("/")
        if path == "version":
            return {"major": "1", "minor": "31"}
        if path == "apis":
            groups: dict[str, list[str]] = {}
            for gv in self.served:
                if "/" in gv:
                    group, version = gv.split("/")
                    groups.setdefault(group, []).append(version)
            return SimpleNamespace(groups=[
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}
                                         for v in vs],
                 "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                for g, vs in groups.items()])
        gv = path.split("/", 1)[1]
        if gv not in self.served:
            from kubernetes.dynamic.exceptions import NotFoundError
            raise NotFoundError(type("E", (), {"status": 404, "reason": "NotFound",
                                               "body": "", "headers": {}})())
        return SimpleNamespace(resources=[
            {"name": kind.lower() + "s", "kind": kind, "namespaced": True, "verbs": ["get"]}
            for kind in self.served[gv]])


def test_a_kind_not_cached_rereads_its_group_version_only(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """kubernetes' discoverer answers a kind it has not cached by throwing the whole cache
    away (every group version read again, by every later module of the run): Kube reads
    again only the kind's group version, or the group list for a group version it does not
    know, and keeps the rest."""
    k8s_discovery = pytest.importorskip(
        "ansible_collections.kubernetes.core.plugins.module_utils.client.discovery")
    monkeypatch.setattr(discovery_cache, "GROUPS_FRESH_SECONDS", 0.0)
    server = _Server({"v1": ["Namespace"], "example.io/v1": ["Thing"],
                      "other.io/v1": ["Widget"]})
    disc = k8s_discovery.LazyDiscoverer(server, str(tmp_path / "cache.json"))
    kube = client.Kube(type("Dyn", (), {"resources": disc, "client": server})())
    assert server.paths == ["version", "apis"]
    for api, kind in (("v1", "Namespace"), ("example.io/v1", "Thing"),
                      ("other.io/v1", "Widget")):
        assert kube.served(api, kind)
    assert server.paths[2:] == ["api/v1", "apis/example.io/v1", "apis/other.io/v1"]

    del server.paths[:]
    assert not kube.served("example.io/v1", "Gadget")        # not served: its group version
    assert server.paths == ["apis/example.io/v1"]
    server.served["example.io/v1"].append("Gadget")          # a CRD installed since
    assert kube.served("example.io/v1", "Gadget")
    server.served["new.io/v1"] = ["Fresh"]                   # a new group
    assert kube.served("new.io/v1", "Fresh")
    assert not kube.served("absent.io/v1", "Nothing")        # a group nobody serves
    assert server.paths == ["apis/example.io/v1", "apis/example.io/v1", "apis",
                            "apis/new.io/v1", "apis"]
    del server.paths[:]
    fresh = client.Kube(type("Dyn", (), {"resources": disc, "client": server})())
    for api, kind in (("v1", "Namespace"), ("example.io/v1", "Thing"),
                      ("other.io/v1", "Widget"), ("new.io/v1", "Fresh")):
        assert fresh.served(api, kind)
    assert server.paths == []                                # everything else was kept

    del server.served["other.io/v1"]                         # a whole group removed
    assert not fresh.served("other.io/v1", "Gizmo")
    assert server.paths == ["apis/other.io/v1", "apis"]

    # asked again at once (an UpgradePlan before its CRD), the group list just read answers
    monkeypatch.setattr(discovery_cache, "GROUPS_FRESH_SECONDS", 60.0)
    discovery_cache.forget_groups(fresh.dyn)
    del server.paths[:]
    assert not fresh.served("plans.io/v1", "Plan")
    assert not fresh.served("plans.io/v1", "Plan")
    assert server.paths == ["apis"]
    fresh.invalidate("plans.io/v1")                          # its CRD installed
    server.served["plans.io/v1"] = ["Plan"]
    assert fresh.served("plans.io/v1", "Plan")
    assert server.paths == ["apis", "apis", "apis/plans.io/v1"]


def test_a_fresh_discoverer_is_not_invalidated_again(tmp_path: Any) -> None:
    """The first module of a run throws the disk cache away (it may describe another cluster
    that was at this address): a discoverer that holds nothing but the group list it has just
    read is left as it is."""
    k8s_discovery = pytest.importorskip(
        "ansible_collections.kubernetes.core.plugins.module_utils.client.discovery")
    server = _Server({"v1": ["Namespace"], "example.io/v1": ["Thing"]})
    disc = k8s_discovery.LazyDiscoverer(server, str(tmp_path / "cache.json"))
    kube = client.Kube(type("Dyn", (), {"resources": disc, "client": server})())
    kube.invalidate()
    assert server.paths == ["version", "apis"]
    assert kube.served("example.io/v1", "Thing")
    kube.invalidate()                                        # now it holds a group version
    assert server.paths == ["version", "apis", "apis/example.io/v1", "version", "apis"]
    # the group list it has just read answers for a group it lacks (an UpgradePlan before
    # its CRD), not read again at once; once a CRD is installed, it is
    del server.paths[:]
    assert not kube.served("plans.io/v1", "Plan")
    assert server.paths == []
    server.served["plans.io/v1"] = ["Plan"]
    kube.invalidate("plans.io/v1")
    assert kube.served("plans.io/v1", "Plan")
    assert server.paths == ["apis", "apis/plans.io/v1"]
