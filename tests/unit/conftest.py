"""Unit tests import the collection as ``ansible_collections.harvester.upgrade`` through the
repository-root link ``ansible_collections/harvester/upgrade -> ../..`` (``make venv``)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
