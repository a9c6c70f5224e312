"""The operator's overrides for simulated scenarios whose pre-flight checks refuse on purpose.

Some scenarios carry something the collection's pre-flight checks refuse by design, so that
the checks are exercised; an operator who has looked at it passes the documented override.
Every harness that upgrades such a scenario end to end takes them from here (``make chaos``:
``scripts/chaos.py``; ``make toolkit-peer``: ``scripts/toolkit_peer.py`` through
``upgrade_on_simulator.py --scenario-overrides``; ``make bench``: ``benchmarks/harness.py``),
and prints which ones a run used (:func:`describe`).

Keyed by the scenario's name: a built-in name as given, a scenario file by its ``name:`` field
(else its file name without ``.yaml``). A scenario with no entry of its own gets the entry of
the scenario it ``extends:``, if any.

- ``five-node-mixed`` (and ``five-node-mixed-rwo-off``, the same cluster with its RWO VM shut
  off, tests/integration/scenarios/): a degraded Longhorn volume (the node loop's volume-safety
  wait handles it: ``upgrade_skip_checks: [volumes_healthy]``) and a detached single-replica
  volume (the plan annotation Harvester's own upgrade honours,
  ``management.harvesterhci.io/skip-single-replica-detached-vol``).
- ``three-node``, ``twenty-node``, ``hundred-node``: none. hundred-node's 3,000 VMs have three
  replicas each, no degraded or detached volume, no pinned or non-migratable VM: its
  pre-flight passes as it is (every ``make bench`` run of it starts without overrides).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "simulator" / "harvester_sim" / "scenarios"

_FIVE_NODE_MIXED: dict[str, Any] = {
    "upgrade_skip_checks": ["volumes_healthy"],
    "upgrade_annotations": {
        "management.harvesterhci.io/skip-single-replica-detached-vol": "true"},
}

SCENARIO_VARS: dict[str, dict[str, Any]] = {
    "five-node-mixed": _FIVE_NODE_MIXED,
    "five-node-mixed-rwo-off": _FIVE_NODE_MIXED,
}


def _path(scenario: str, base: Path | None = None) -> Path | None:
    """The scenario file of a built-in name or a file path (relative to the repository root,
    or to ``base`` for an ``extends:`` reference); None when there is none."""
    p = Path(scenario)
    if p.suffix in (".yaml", ".yml") or p.exists():
        for cand in ([base / p] if base is not None and not p.is_absolute() else []) + \
                [p if p.is_absolute() else ROOT / p, p]:
            if cand.is_file():
                return cand
        return None
    cand = BUILTIN / f"{scenario}.yaml"
    return cand if cand.is_file() else None


def lineage(scenario: str) -> list[str]:
    """The scenario's name, then the names of the scenarios it extends, nearest first."""
    names: list[str] = []
    ref, base = scenario, None
    while ref and len(names) < 10:
        path = _path(ref, base)
        if path is None:
            names.append(Path(ref).stem if ref.endswith((".yaml", ".yml")) else ref)
            break
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError):
            data = {}
        data = data if isinstance(data, dict) else {}
        names.append(str(data.get("name") or path.stem))
        nxt = data.get("extends")
        ref, base = (nxt, path.parent) if isinstance(nxt, str) else ("", None)
    return names


def scenario_name(scenario: str) -> str:
    """The name overrides are keyed by (see the module docstring)."""
    return lineage(scenario)[0]


def overrides_for(scenario: str) -> dict[str, Any]:
    """The extra variables an operator passes for ``scenario`` (a copy; empty when none)."""
    for name in lineage(scenario):
        if name in SCENARIO_VARS:
            return json.loads(json.dumps(SCENARIO_VARS[name]))  # type: ignore[no-any-return]
    return {}


def describe(scenario: str, evars: dict[str, Any] | None = None) -> str:
    """One line naming the overrides a run of ``scenario`` used (``evars``, default: its
    entry here)."""
    used = overrides_for(scenario) if evars is None else evars
    if not used:
        return f"scenario overrides for {scenario_name(scenario)}: none"
    return (f"scenario overrides for {scenario_name(scenario)} (scripts/scenario_overrides.py): "
            + json.dumps(used, sort_keys=True))
