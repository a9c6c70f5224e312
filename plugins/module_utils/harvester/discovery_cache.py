"""kubernetes.core's on-disk API discovery cache, written once per process.

kubernetes.core's discoverer keeps discovery on disk (per API host and user) and rewrites the
whole file — JSON of every resource discovered so far — each time a lookup discovers another
group version: seven times in one pre-flight run, ~10 ms each. :func:`defer_discovery_writes`
holds those writes back and :func:`flush_discovery_cache` makes one (at exit, or when the
in-process runner ends the module). A process killed before that leaves the previous file;
the next module discovers again what it lacks.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from typing import Any

_DISCOVERY_FLUSHES: list[Callable[[], None]] = []


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
            write()

    disc._write_cache = later  # noqa: SLF001 - the discoverer calls it on itself
    _DISCOVERY_FLUSHES.append(flush)


def flush_discovery_cache() -> None:
    """Write the discovery caches :func:`defer_discovery_writes` held back."""
    while _DISCOVERY_FLUSHES:
        _DISCOVERY_FLUSHES.pop()()


atexit.register(flush_discovery_cache)
