"""kubernetes.core's on-disk API discovery cache: written once per process, and never thrown
away for one kind it lacks.

kubernetes.core's discoverer keeps discovery on disk (per API host and user) and rewrites the
whole file — JSON of every resource discovered so far — each time a lookup discovers another
group version, several times in one module call. :func:`defer_discovery_writes`
holds those writes back and :func:`flush_discovery_cache` makes one (at exit, or when the
in-process runner ends the module). A process killed before that leaves the previous file;
the next module discovers again what it lacks.

The discoverer answers a kind it has not cached (a kind the cluster does not serve, a CRD
installed since) by invalidating the whole cache: the API groups and every group version's
resources are read again, by this module and, once the emptied cache is written, by every later
module of the run (each ``/apis/<group>/<version>`` read twice in one run). :func:`prepare`
reads again only what can answer the question: the kind's group version (a CRD added to a
group already served), or the group list when the group version is not in it (a new group);
a kind still absent then is not served, and the rest of the cache is kept. A core kind
(``v1``) is looked up in the core group only (:func:`lookup`): for a version without a group
the discoverer searches every group, and reads each group's ``v1`` (a dozen groups) to find a
Namespace.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Callable
from typing import Any

_DISCOVERY_FLUSHES: list[Callable[[], None]] = []


class Unserved(Exception):
    """The cluster does not serve the kind (its group version read just now says so)."""


def _group_versions(disc: Any, prefix: str, group: str) -> dict[str, Any] | None:
    cache = getattr(disc, "_cache", None)
    resources = cache.get("resources") if isinstance(cache, dict) else None
    if not isinstance(resources, dict):
        return None
    return dict(resources.get(prefix, {}).get(group) or {})


# a group list read this recently answers again (one module asks for a kind of a group not
# served several times in a row: an UpgradePlan before its CRD is installed)
GROUPS_FRESH_SECONDS = 1.0


def _reread_groups(disc: Any) -> None:
    """The group list again (``GET /apis``), keeping the resources cached of every group
    version still listed; the core group (``/api/v1``) is kept as it was. Not again within
    :data:`GROUPS_FRESH_SECONDS`."""
    read_at = getattr(disc, "_groups_read_at", None)
    if read_at is not None and time.monotonic() - read_at < GROUPS_FRESH_SECONDS:
        return
    core = disc._cache["resources"].get("api")  # noqa: SLF001 - the discoverer's own cache
    disc.parse_api_groups(request_resources=False, update=True)
    if core is not None:
        disc._cache["resources"]["api"] = core  # noqa: SLF001
    disc._groups_read_at = time.monotonic()


def groups_read_now(dyn: Any) -> None:
    """The discoverer of ``dyn`` has just read the group list (its whole cache thrown away
    and read again): it answers as :func:`_reread_groups` would for
    :data:`GROUPS_FRESH_SECONDS`."""
    if forgettable(dyn):
        dyn.resources._groups_read_at = time.monotonic()


def forget_groups(dyn: Any) -> None:
    """The group list read last is not fresh any more (a CRD was installed)."""
    disc = getattr(dyn, "resources", None)
    if disc is not None and getattr(disc, "_groups_read_at", None) is not None:
        disc._groups_read_at = None


def nothing_discovered(dyn: Any) -> bool:
    """kubernetes.core's discoverer of ``dyn`` holds the group list only (no group version
    read yet): invalidating it would only read the server version and the group list again,
    and :func:`prepare` already reads again whatever that list does not answer."""
    if not forgettable(dyn):
        return False
    for prefix, groups in dyn.resources._cache["resources"].items():  # noqa: SLF001
        for group, versions in groups.items():
            for rg in versions.values():
                if (prefix, group) != ("apis", "") and getattr(rg, "resources", None):
                    return False
    return True


def prepare(dyn: Any, api_version: str, kind: str) -> None:
    """Make sure the discoverer of ``dyn`` has the group version of ``api_version`` read with
    ``kind`` in it, reading only that group version (or, for a group version it does not
    list, the group list) again; :class:`Unserved` when the cluster does not serve ``kind``.
    A discoverer of another shape (a test double) is left to itself."""
    disc: Any = getattr(dyn, "resources", None)
    group, _sep, version = api_version.rpartition("/")
    prefix = "apis" if group else "api"
    versions = _group_versions(disc, prefix, group)
    if versions is None or not hasattr(disc, "get_resources_for_api_version"):
        return
    rg = versions.get(version)
    if rg is not None and kind in (getattr(rg, "resources", None) or {}):
        return
    from kubernetes.dynamic.exceptions import NotFoundError
    if rg is None:
        if prefix == "api":
            return    # the core group is always listed; leave it to the discoverer
        _reread_groups(disc)
        rg = (_group_versions(disc, prefix, group) or {}).get(version)
        if rg is None:
            raise Unserved(f"{kind}.{api_version} is not served")
        if kind in (rg.resources or {}):
            return
    try:
        rg.resources = disc.get_resources_for_api_version(prefix, group, version,
                                                          rg.preferred)
    except NotFoundError:   # the group version is gone since the group list was read
        rg.resources = {}
        _reread_groups(disc)
        raise Unserved(f"{kind}.{api_version} is not served") from None
    disc._cache["resources"][prefix][group][version] = rg  # noqa: SLF001
    write = getattr(disc, "_write_cache", None)
    if write is not None:
        write()
    if kind not in rg.resources:
        raise Unserved(f"{kind}.{api_version} is not served")


def lookup(dyn: Any, api_version: str, kind: str) -> Any:
    """The discoverer's resource for ``kind`` of ``api_version`` (:func:`prepare` first). A
    core kind (``v1``) is looked up in the core group only: the discoverer searches a
    version without a group in every group, and reads every group's ``v1`` for it."""
    disc = dyn.resources
    if not forgettable(dyn):
        return disc.get(api_version=api_version, kind=kind)
    prepare(dyn, api_version, kind)
    if "/" not in api_version:
        return disc.get(prefix="api", api_version=api_version, kind=kind)
    return disc.get(api_version=api_version, kind=kind)


def forgettable(dyn: Any) -> bool:
    """The discoverer of ``dyn`` is kubernetes.core's (:func:`prepare` and :func:`forget`
    work on it)."""
    disc = getattr(dyn, "resources", None)
    return _group_versions(disc, "api", "") is not None and \
        hasattr(disc, "get_resources_for_api_version")


def forget(dyn: Any, api_version: str) -> None:
    """Drop the cached resources of ``api_version``'s group version (a kind of it answered
    404 for its path: read it again on the next lookup)."""
    disc = getattr(dyn, "resources", None)
    group, _sep, version = api_version.rpartition("/")
    versions = _group_versions(disc, "apis" if group else "api", group)
    rg = (versions or {}).get(version)
    if rg is not None and hasattr(rg, "resources"):
        rg.resources = {}


def defer_discovery_writes(dyn: Any) -> None:
    """Hold back the discovery cache writes of ``dyn``'s discoverer until
    :func:`flush_discovery_cache`."""
    disc = getattr(dyn, "resources", None)
    write = getattr(disc, "_write_cache", None)
    if write is None:
        return
    dirty = [False]

    def later() -> None:
        dirty[0] = True

    def flush() -> None:
        if dirty[0]:
            dirty[0] = False
            if not _write_fast(disc):
                write()

    disc._write_cache = later  # noqa: SLF001 - the discoverer calls it on itself
    _DISCOVERY_FLUSHES.append(flush)


def _write_fast(disc: Any) -> bool:
    """The discoverer's own write (kubernetes.dynamic ``Discoverer._write_cache``: the same
    JSON, ``CacheEncoder``, to the same file), made with ``json.dumps``, which encodes in C:
    ``json.dump`` goes through the pure-Python encoder, on the path of every module call that
    discovered something. False when the discoverer is not the one known here (then its own
    write is used)."""
    import json

    path = getattr(disc, "_Discoverer__cache_file", None)
    cache = getattr(disc, "_cache", None)
    try:
        from kubernetes.dynamic.discovery import CacheEncoder
    except ImportError:
        return False
    if not isinstance(path, str) or not isinstance(cache, dict):
        return False
    try:
        text = json.dumps(cache, cls=CacheEncoder)
        with open(path, "w") as f:
            f.write(text)
    except Exception:  # noqa: BLE001 - as the discoverer's own: a cache not written is read again
        pass
    return True


def flush_discovery_cache() -> None:
    """Write the discovery caches :func:`defer_discovery_writes` held back."""
    while _DISCOVERY_FLUSHES:
        _DISCOVERY_FLUSHES.pop()()


atexit.register(flush_discovery_cache)
