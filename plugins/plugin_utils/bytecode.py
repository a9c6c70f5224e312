"""Cached bytecode for the Python files of this collection (and kubernetes.core) that
ansible-playbook imports with ``import`` statements.

ansible-core imports a collection's Python package by package with its own loader
(``ansible/utils/collection_loader/_collection_finder.py``): it reads each ``.py`` file and
compiles it from source on every import (``get_code``), and never reads or writes a
``__pycache__``. Its plugin loader loads a plugin file (an action plugin, a filter) with
CPython's own ``SourceFileLoader`` instead (``importlib.util.spec_from_file_location`` in
``PluginLoader._load_module_source``), which uses a ``__pycache__``. What our action plugins
import (``module_utils``, the modules ``in_process`` preloads) therefore went through the
first: some ninety files compiled on every run, on the run's critical path before its first
request (docs/performance.md, "Ansible's fixed costs").

:class:`CachedSourceFinder`, put in front of ansible-core's finder, asks that finder for the
module as before and keeps its answer for everything but a plain module file: a package
(ansible-core's synthetic packages need no ``__init__.py``), a redirected module
(``meta/runtime.yml``), anything without a ``.py`` file of its own. For a plain ``.py``
module it returns the spec ``spec_from_file_location`` gives, as ansible-core's plugin loader
does, so CPython's ``SourceFileLoader`` loads it: it reads ``__pycache__/<name>.cpython-XY.pyc``
only when the header matches the source's modification time and size (or its hash, for a
hash-based ``.pyc``) and else compiles the source; it writes the cache only where Python may
(not under ``PYTHONDONTWRITEBYTECODE`` or ``-B``, not in a read-only directory: then it
compiles every time, as before). The module gets the same name, file and code; only its
``__loader__``/``__cached__`` differ. A module run the usual way (AnsiballZ) is built from
the source files by ansible-core and never imports through this finder.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, SourceFileLoader
from types import ModuleType

from ansible.utils.collection_loader import AnsibleCollectionConfig

# the collections whose modules in_process preloads (ours and the kubernetes.core
# module_utils our module_utils import)
PREFIXES = ("ansible_collections.harvester.upgrade.", "ansible_collections.kubernetes.core.")


def _source_file(spec: ModuleSpec) -> str | None:
    """The ``.py`` file of a plain module, as its loader names it; None for anything else."""
    if spec.loader is None or spec.submodule_search_locations is not None:
        return None
    get_filename = getattr(spec.loader, "get_filename", None)
    if get_filename is None:
        return None
    try:
        filename = get_filename(spec.name)
    except (ImportError, ValueError):
        return None
    if not isinstance(filename, str) or not filename.endswith(".py"):
        return None
    return filename if os.path.isfile(filename) else None


def cached_spec(spec: ModuleSpec | None) -> ModuleSpec | None:
    """``spec`` with CPython's ``SourceFileLoader`` for a plain ``.py`` module (see the
    module doc); ``spec`` itself for anything else."""
    if spec is None:
        return None
    filename = _source_file(spec)
    if filename is None:
        return spec
    cached = importlib.util.spec_from_file_location(
        spec.name, filename, loader=SourceFileLoader(spec.name, filename))
    return cached if cached is not None else spec


class CachedSourceFinder(MetaPathFinder):
    """A ``sys.meta_path`` finder in front of ansible-core's collection finder: the modules
    of :data:`PREFIXES` as that finder finds them, plain ``.py`` modules loaded by
    ``SourceFileLoader`` (see the module doc)."""

    def __init__(self, prefixes: Sequence[str] = PREFIXES) -> None:
        self.prefixes = tuple(prefixes)

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith(self.prefixes):
            return None
        finder = AnsibleCollectionConfig.collection_finder
        if finder is None or finder is self:
            return None
        return cached_spec(finder.find_spec(fullname, path, target))


def install() -> None:
    """Put a :class:`CachedSourceFinder` just in front of ansible-core's collection finder in
    ``sys.meta_path``, once per process; nothing when that finder is not installed (then
    ansible-core does not load the collection). Not necessarily first: what is in front of
    ansible-core's finder stays there (ansible-test's import check puts its own first)."""
    if any(isinstance(f, CachedSourceFinder) for f in sys.meta_path):
        return
    collection_finder = AnsibleCollectionConfig.collection_finder
    if collection_finder is None:
        return
    for index, finder in enumerate(sys.meta_path):
        if finder is collection_finder:
            sys.meta_path.insert(index, CachedSourceFinder())
            return
