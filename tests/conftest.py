"""For every test under tests/: the repository root on ``sys.path`` (the collection is imported
as ``ansible_collections.harvester.upgrade`` through the link
``ansible_collections/harvester/upgrade -> ../..``, made here when missing) and this
directory too, for the shared helpers (``import testkit``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE.parent, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import testkit  # noqa: E402 - importable only once the path above is set

testkit.collection_link()
