"""The upstream CRDs the simulator serves, per Harvester release.

Data (written by ``simulator/scripts/import_crds.py`` from the upstream repositories, see
``simulator/docs/crds.md``): ``index.json`` maps

* a Harvester version to its ``harvester`` (harvesterhci.io) and ``kubevirt`` (kubevirt.io)
  files, the KubeVirt version its chart pins, and the Longhorn and Rancher versions,
* a Longhorn version to its ``longhorn`` (longhorn.io) file,
* a Rancher version to its ``rancher`` (provisioning.cattle.io, rke.cattle.io,
  fleet.cattle.io, cluster.x-k8s.io) file and the ``suc`` (upgrade.cattle.io) file of the
  system-upgrade-controller version Rancher pins.

``static/management.cattle.io.yaml`` holds the two management.cattle.io kinds Rancher
generates at run time from Go types (no file upstream). Every CRD carries the annotation
``harvester-sim.io/source`` naming repository, path and tag or commit.

A release's component versions come from the release catalog (``Release.longhorn``,
``Release.rancher``); a version the index does not know uses the nearest one it does (same
minor line, nearest patch; else the newest older; else the oldest). Parsed files are cached
for the life of the process; callers get copies.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import yaml

from ..api.jsoncopy import json_copy

HERE = Path(__file__).resolve().parent
SOURCE_ANNOTATION = "harvester-sim.io/source"

# Which component's CRDs each served group comes from.
GROUP_COMPONENT = {
    "harvesterhci.io": "harvester",
    "kubevirt.io": "kubevirt",
    "longhorn.io": "longhorn",
    "provisioning.cattle.io": "rancher",
    "rke.cattle.io": "rancher",
    "fleet.cattle.io": "rancher",
    "cluster.x-k8s.io": "rancher",
    "upgrade.cattle.io": "suc",
    "management.cattle.io": "static",
}
# What installs a component's CRDs in a real cluster, i.e. the upgrade step that replaces
# them: the harvester-crd chart, the harvester chart (its kubevirt-operator and longhorn
# subcharts; virt-operator creates the KubeVirt CRDs), Rancher's start-up (its own, CAPI,
# fleet bootstrap, and the system-upgrade-controller app it deploys).
CHART_COMPONENTS = {
    "harvester-crd": ("harvester",),
    "harvester": ("kubevirt", "longhorn"),
    "rancher": ("rancher", "suc", "static"),
}

_VER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


@functools.cache
def index() -> dict[str, Any]:
    return json.loads((HERE / "index.json").read_text())  # type: ignore[no-any-return]


@functools.cache
def _file(rel: str) -> tuple[dict[str, Any], ...]:
    path = HERE / rel
    if path.suffix == ".json":
        docs = json.loads(path.read_text())["crds"]
    else:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return tuple(docs)


def _vkey(v: str) -> tuple[int, int, int]:
    m = _VER.match(v.strip())
    if not m:
        raise ValueError(f"not a version: {v!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def nearest(version: str, known: list[str]) -> str:
    """``version`` if known, else the nearest known one (same minor line and nearest patch,
    else the newest older, else the oldest)."""
    if version in known:
        return version
    want = _vkey(version)
    same = [k for k in known if _vkey(k)[:2] == want[:2]]
    if same:
        return min(same, key=lambda k: (abs(_vkey(k)[2] - want[2]), -_vkey(k)[2]))
    older = [k for k in known if _vkey(k) < want]
    if older:
        return max(older, key=_vkey)
    return min(known, key=_vkey)


def component_files(release: Any) -> dict[str, str]:
    """Component -> data file of ``release`` (a catalog ``Release``)."""
    idx = index()
    h = idx["harvester"][nearest(release.version, list(idx["harvester"]))]
    lh = idx["longhorn"][nearest(release.longhorn or h["longhorn"], list(idx["longhorn"]))]
    r = idx["rancher"][nearest(release.rancher or h["rancher"], list(idx["rancher"]))]
    return {"harvester": h["harvester"], "kubevirt": h["kubevirt"], "longhorn": lh,
            "rancher": r["rancher"], "suc": r["suc"],
            "static": "static/management.cattle.io.yaml"}


def crds_for(release: Any, components: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Copies of the CRDs of ``release`` (all components, or those named)."""
    files = component_files(release)
    out: list[dict[str, Any]] = []
    for comp, rel in files.items():
        if components is None or comp in components:
            out.extend(json_copy(d) for d in _file(rel))
    return out


def crds_for_groups(release: Any, groups: tuple[str, ...]) -> list[dict[str, Any]]:
    comps = tuple({GROUP_COMPONENT[g] for g in groups})
    return [c for c in crds_for(release, comps) if c["spec"]["group"] in groups]


def toolkit_crds() -> list[dict[str, Any]]:
    """management.harvesterhci.io UpgradePlan and Version of the pinned upgrade-toolkit
    commit (not shipped by the catalog's releases; what the collection's own copy of the
    UpgradePlan CRD must agree with)."""
    return [json_copy(d) for rel in index()["upgrade-toolkit"].values() for d in _file(rel)]


def source_of(crd: dict[str, Any]) -> str:
    return str(((crd.get("metadata") or {}).get("annotations") or {}).get(SOURCE_ANNOTATION, ""))
