"""Harvester releases known to the simulator: component versions and image lists.

A :class:`Release` carries what a Harvester ISO's ``harvester-release.yaml`` says about the
release (harvester, harvesterChart, os, kubernetes, rancher, charts, kubevirt,
minUpgradableVersion, rancherDependencies) plus what the upgrade checker's ``Version``
object says (releaseDate, tags), and a deterministic list of the container images the
release bundles (several hundred, with sizes).

Image lists are generated, not copied: every image repository has a base tag, and at each
minor line and each patch release a seeded RNG decides whether it is bumped. Images tied to
a component version (Harvester, RKE2, Rancher, KubeVirt, Longhorn) follow that version.
So consecutive patch releases share almost all images, minor releases replace a larger
part, and the same version always yields the same list.

Scenarios declare releases as strings (a known version) or dicts (a known or new version
with fields overridden), see :func:`release_from_dict` and :class:`ReleaseSet`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MiB = 1024 * 1024

# --------------------------------------------------------------------------- versions

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")


def parse_version(version: str) -> tuple[int, int, int, str]:
    """``"v1.6.0-rc1"`` -> ``(1, 6, 0, "rc1")``; raises ``ValueError`` if not semver-like."""
    m = _VERSION_RE.match(version.strip())
    if not m:
        raise ValueError(f"not a release version: {version!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or ""


def version_key(version: str) -> tuple[int, int, int, int, str]:
    """Sort key: ``v1.6.0-rc1 < v1.6.0 < v1.6.1``."""
    major, minor, patch, pre = parse_version(version)
    return major, minor, patch, 0 if pre else 1, pre


def _line(major: int, minor: int) -> int:
    """Ordinal of a minor line (v1.3 -> 3, v2.0 -> 20)."""
    return (major - 1) * 20 + minor


# --------------------------------------------------------------------------- release

@dataclass(frozen=True)
class Image:
    """One container image of a release's bundle."""

    name: str        # full reference, e.g. docker.io/rancher/harvester:v1.5.1
    size: int        # bytes, as reported in node.status.images[].sizeBytes
    bundle: str      # bundle list it ships in: harvester | rancher | rke2 | agent

    @property
    def repository(self) -> str:
        return self.name.rsplit(":", 1)[0]

    @property
    def tag(self) -> str:
        return self.name.rsplit(":", 1)[1]


@dataclass(frozen=True)
class Release:
    """One Harvester release (what its ISO and its ``Version`` object describe)."""

    version: str                      # harvester, e.g. v1.5.1
    harvester_chart: str              # harvesterChart, e.g. 1.5.1
    os: str                           # os, e.g. "Harvester v1.5.1" (Node osImage)
    kubernetes: str                   # e.g. v1.32.7+rke2r1
    rancher: str                      # e.g. v2.11.3
    monitoring_chart: str
    logging_chart: str
    kubevirt: str                     # virt-operator image tag, e.g. 1.4.0-150600.5.15.1
    longhorn: str                     # e.g. v1.8.2 (image tags only; not a release-file key)
    min_upgradable_version: str = ""  # may be empty
    release_date: str = ""            # YYYY-MM-DD
    tags: tuple[str, ...] = ()
    event_router_chart: str = ""      # loggingChartHarvesterEventRouter (v1.6.0+; "" = absent)
    fleet: str = ""                   # fleet app version, e.g. 0.12.4
    fleet_chart: str = ""
    webhook: str = ""                 # rancher-webhook app version
    webhook_chart: str = ""
    previous: str | None = None       # previous release (its image list is archived in the ISO)
    archive_versions: tuple[str, ...] | None = None  # image lists archived besides own
    ga: bool = True                   # non-GA ISOs have no images-lists-archive
    iso_size: int = 0                 # nominal size of the real ISO (download-time model)
    extra_images: tuple[tuple[str, int], ...] = ()   # (name, size) added to the harvester list
    removed_images: tuple[str, ...] = ()             # repositories or names dropped

    # ------------------------------------------------------------------ derived views

    @property
    def iso_name(self) -> str:
        return f"harvester-{self.version}-amd64.iso"

    @property
    def toolkit_image(self) -> str:
        return f"rancher/harvester-upgrade-toolkit:{self.version}"

    def release_yaml(self) -> dict[str, Any]:
        """Content of ``harvester-release.yaml`` (key order as upstream writes it)."""
        out: dict[str, Any] = {
            "harvester": self.version,
            "harvesterChart": self.harvester_chart,
            "os": self.os,
            "kubernetes": self.kubernetes,
            "rancher": self.rancher,
            "monitoringChart": self.monitoring_chart,
            "loggingChart": self.logging_chart,
            "loggingChartHarvesterEventRouter": self.event_router_chart,
            "kubevirt": self.kubevirt,
            "minUpgradableVersion": self.min_upgradable_version,
            "rancherDependencies": {
                "fleet": {"chart": self.fleet_chart, "app": self.fleet},
                "fleet-crd": {"chart": self.fleet_chart, "app": self.fleet},
                "rancher-webhook": {"chart": self.webhook_chart, "app": self.webhook},
            },
        }
        if not self.event_router_chart:   # installers before v1.6.0 do not write the key
            del out["loggingChartHarvesterEventRouter"]
        return out

    def release_metadata(self) -> dict[str, str]:
        """The fields upgrade-toolkit parses into ``status.releaseMetadata``."""
        y = self.release_yaml()
        return {k: y[k] for k in ("harvester", "harvesterChart", "os", "kubernetes", "rancher",
                                  "monitoringChart", "minUpgradableVersion")} | {
            "kubevirt": self.kubevirt}

    def version_spec(self, iso_url: str, iso_checksum: str) -> dict[str, Any]:
        """``spec`` of the ``harvesterhci.io/v1beta1`` Version object for this release."""
        spec: dict[str, Any] = {"isoURL": iso_url, "isoChecksum": iso_checksum,
                                "releaseDate": self.release_date,
                                "minUpgradableVersion": self.min_upgradable_version}
        if self.tags:
            spec["tags"] = list(self.tags)
        return spec

    def version_object(self, iso_url: str, iso_checksum: str,
                       namespace: str = "harvester-system") -> dict[str, Any]:
        """A complete ``Version`` object, ready to create through the API."""
        return {"apiVersion": "harvesterhci.io/v1beta1", "kind": "Version",
                "metadata": {"name": self.version, "namespace": namespace},
                "spec": self.version_spec(iso_url, iso_checksum)}

    def images(self) -> list[Image]:
        """The release's bundled images, sorted by name (deterministic)."""
        return list(_images_cached(self))

    def image_names(self) -> list[str]:
        return [i.name for i in _images_cached(self)]

    def image_sizes(self) -> dict[str, int]:
        return {i.name: i.size for i in _images_cached(self)}

    def bundle_lists(self) -> dict[str, list[Image]]:
        """Images per bundle list (``harvester``, ``rancher``, ``rke2``, ``agent``)."""
        out: dict[str, list[Image]] = {"harvester": [], "rancher": [], "rke2": [], "agent": []}
        for img in _images_cached(self):
            out[img.bundle].append(img)
        return out

    def fingerprint(self) -> str:
        """Stable hash of every field (cache key for built ISOs)."""
        raw = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["tags"] = list(self.tags)
        return d


# --------------------------------------------------------------------------- catalog

def _rel(version: str, kubernetes: str, rancher: str, monitoring: str, logging: str,
         kubevirt: str, longhorn: str, min_up: str, date: str, tags: tuple[str, ...],
         fleet: str, fleet_chart: str, webhook: str, webhook_chart: str,
         event_router: str, iso_size: int) -> Release:
    return Release(version=version, harvester_chart=version.lstrip("v"),
                   os=f"Harvester {version}", kubernetes=kubernetes, rancher=rancher,
                   monitoring_chart=monitoring, logging_chart=logging, kubevirt=kubevirt,
                   longhorn=longhorn, min_upgradable_version=min_up, release_date=date,
                   tags=tags, fleet=fleet, fleet_chart=fleet_chart, webhook=webhook,
                   webhook_chart=webhook_chart, event_router_chart=event_router,
                   iso_size=iso_size)


# Every value below is what the release really ships, read at the release's tags:
#
# * harvester/harvester-installer ``scripts/package-harvester-os`` writes
#   ``harvester-release.yaml``: ``kubernetes`` = ``scripts/version-rke2`` RKE2_VERSION,
#   ``rancher`` = ``scripts/version-rancher`` RANCHER_VERSION, ``monitoringChart`` /
#   ``loggingChart`` = ``scripts/version-monitoring`` / ``version-logging`` up to v1.5.x and
#   harvester/addons ``version_info`` (RANCHER_MONITORING_CHART_VERSION,
#   RANCHER_LOGGING_CHART_VERSION; the installer clones the addons branch, the addons tag of
#   the same name carries the same values) from v1.6.0, ``loggingChartHarvesterEventRouter``
#   = addons ``HARVESTER_EVENTROUTER_FULL_TAG`` (a full image reference; the key only
#   exists from v1.6.0: empty here means absent), ``kubevirt`` = harvester/harvester
#   ``deploy/charts/harvester/values.yaml`` ``kubevirt-operator.containers.operator.image.tag``
#   (``scripts/version-harvester``), i.e. the SUSE build tag that virt-operator reports as
#   the KubeVirt CR's ``status.observedKubeVirtVersion`` (upgrade_manifests.sh
#   ``wait_kubevirt`` compares the two), ``minUpgradableVersion`` = harvester/harvester
#   ``package/upgrade-matrix.yaml``.
# * ``longhorn`` = harvester/harvester ``deploy/charts/harvester/Chart.yaml`` dependency
#   ``longhorn`` version (chart version = app version for Longhorn).
# * ``rancherDependencies`` (installer ``scripts/collect-deps.sh``): the newest fleet /
#   rancher-webhook chart in the Rancher image's bundled rancher-charts index that is at least
#   rancher/rancher ``build.yaml`` ``fleetVersion`` / ``webhookVersion`` at the Rancher tag.
#   The index is not in any repository; the values here are those build.yaml minimums.
# * ``release_date``, ``iso_size``: simulator figures (the date orders releases and drives
#   the image-tag model; the size drives the download-time model), not upstream facts.
_BUILTIN: list[Release] = [
    # installer v1.4.3: version-rke2, version-rancher, version-monitoring, version-logging;
    # harvester v1.4.3: values.yaml virt-operator tag, Chart.yaml longhorn, upgrade-matrix;
    # rancher v2.10.1 build.yaml
    _rel("v1.4.3", "v1.31.7+rke2r1", "v2.10.1", "103.1.1+up45.31.1", "103.1.0+up4.4.0",
         "1.3.1-150600.5.9.1", "v1.7.3", "v1.4.1", "2025-06-12", ("v1.4.3",),
         "0.11.2", "105.0.2+up0.11.2", "0.6.2", "105.0.1+up0.6.2", "", 6_284_113_920),
    # installer v1.5.0; harvester v1.5.0; rancher v2.11.0 build.yaml
    _rel("v1.5.0", "v1.32.3+rke2r1", "v2.11.0", "105.1.2+up61.3.2", "105.2.0+up4.10.0",
         "1.4.0-150600.5.15.1", "v1.8.1", "v1.4.2", "2025-04-23", ("v1.5.0",),
         "0.12.0", "106.0.0+up0.12.0", "0.7.0", "106.0.0+up0.7.0", "", 6_512_703_488),
    # installer v1.5.1; harvester v1.5.1; rancher v2.11.2 build.yaml
    _rel("v1.5.1", "v1.32.4+rke2r1", "v2.11.2", "105.1.2+up61.3.2", "105.2.0+up4.10.0",
         "1.4.0-150600.5.15.1", "v1.8.2", "v1.4.2", "2025-07-10", ("v1.5.1",),
         "0.12.3", "106.1.1+up0.12.3", "0.7.2", "106.0.2+up0.7.2", "", 6_557_270_016),
    # installer v1.6.0 (version-rke2, version-rancher); addons v1.6.0 version_info;
    # harvester v1.6.0; rancher v2.12.0 build.yaml
    _rel("v1.6.0", "v1.33.3+rke2r1", "v2.12.0", "105.1.2+up61.3.2", "105.2.0+up4.10.0",
         "1.5.2-150700.3.5.2", "v1.9.1", "v1.5.0", "2025-09-18", ("v1.6.0",),
         "0.13.0", "107.0.0+up0.13.0", "0.8.0", "107.0.0+up0.8.0",
         "rancher/harvester-eventrouter:v1.6.0", 6_891_218_944),
    # installer v1.6.1; addons v1.6.1; harvester v1.6.1; rancher v2.12.2 build.yaml
    _rel("v1.6.1", "v1.33.5+rke2r1", "v2.12.2", "105.1.2+up61.3.2", "105.2.0+up4.10.0",
         "1.5.2-150700.3.5.2", "v1.9.2", "v1.5.0", "2025-11-06", ("v1.6.1",),
         "0.13.2", "107.0.2+up0.13.2", "0.8.2", "107.0.2+up0.8.2",
         "rancher/harvester-eventrouter:v1.6.1", 6_918_836_224),
    # installer v1.7.0; addons v1.7.0; harvester v1.7.0; rancher v2.13.0 build.yaml
    _rel("v1.7.0", "v1.34.2+rke2r1", "v2.13.0", "107.1.0+up69.8.2-rancher.15",
         "107.0.1+up4.10.0-rancher.10", "1.6.3-150700.3.13.1", "v1.10.1", "v1.6.0",
         "2026-01-20", ("v1.7.0", "latest"),
         "0.14.0", "108.0.0+up0.14.0", "0.9.1", "108.0.1+up0.9.1",
         "rancher/harvester-eventrouter:v1.7.0", 7_214_489_600),
]

CATALOG: dict[str, Release] = {r.version: r for r in _BUILTIN}


def known_versions() -> list[str]:
    """Built-in release versions, oldest first."""
    return sorted(CATALOG, key=version_key)


def get_release(version: str) -> Release:
    """A built-in release, or one synthesised from the nearest built-in (see
    :func:`synthesize_release`) if ``version`` is not in the catalog."""
    v = _normalize(version)
    if v in CATALOG:
        return CATALOG[v]
    return synthesize_release(v)


def previous_version(version: str, known: Iterable[str] | None = None) -> str | None:
    """Highest version in ``known`` (default: the catalog) that is older than ``version``
    and is a GA release."""
    vk = version_key(version)
    cands = [v for v in (known if known is not None else CATALOG)
             if version_key(v) < vk and not parse_version(v)[3]]
    return max(cands, key=version_key) if cands else None


def _normalize(version: str) -> str:
    version = version.strip()
    return version if version.startswith("v") else "v" + version


def _bump_patch(ver: str, by: int) -> str:
    """``v1.32.7+rke2r1`` bumped by 2 -> ``v1.32.9+rke2r1``."""
    m = re.match(r"^(v?\d+\.\d+\.)(\d+)(.*)$", ver)
    if not m or by <= 0:
        return ver
    return f"{m.group(1)}{int(m.group(2)) + by}{m.group(3)}"


def synthesize_release(version: str, **overrides: Any) -> Release:
    """A plausible release for a version not in the catalog.

    Based on the newest catalog release of the same minor line (else the newest older one,
    else the oldest), with the Harvester-tied fields rewritten and, for a later patch,
    Kubernetes/Rancher/Longhorn patch levels bumped so that ordering stays consistent.
    """
    version = _normalize(version)
    major, minor, patch, pre = parse_version(version)
    vk = version_key(version)
    same_line = [r for r in _BUILTIN if parse_version(r.version)[:2] == (major, minor)]
    older = [r for r in _BUILTIN if version_key(r.version) <= vk]
    if same_line:
        base = min(same_line, key=lambda r: abs(parse_version(r.version)[2] - patch))
    elif older:
        base = max(older, key=lambda r: version_key(r.version))
    else:
        base = min(_BUILTIN, key=lambda r: version_key(r.version))
    delta = patch - parse_version(base.version)[2] if same_line else 0
    newer_line = not same_line and older and (major, minor) > parse_version(base.version)[:2]
    kubernetes, rancher = base.kubernetes, base.rancher
    longhorn, kubevirt = base.longhorn, base.kubevirt
    if newer_line:
        lines = _line(major, minor) - _line(*parse_version(base.version)[:2])
        kubernetes = _bump_minor(kubernetes, lines)
        rancher = _bump_minor(rancher, lines)
        longhorn = _bump_minor(longhorn, lines)
        kubevirt = _bump_minor(kubevirt, lines)
    elif delta > 0:
        kubernetes = _bump_patch(kubernetes, 2 * delta)
        rancher = _bump_patch(rancher, delta)
        longhorn = _bump_patch(longhorn, delta)
    date = base.release_date
    if date and version != base.version:
        d0 = _dt.date.fromisoformat(date)
        shift = 50 * delta if delta > 0 else (120 * (_line(major, minor) - _line(
            *parse_version(base.version)[:2])) if newer_line else -14)
        date = (d0 + _dt.timedelta(days=shift)).isoformat()
    min_up = base.min_upgradable_version
    if newer_line:
        min_up = f"v{major}.{minor - 1}.0" if minor > 0 else base.version
    fields_ = dict(version=version, harvester_chart=version.lstrip("v"),
                   os=f"Harvester {version}", kubernetes=kubernetes, rancher=rancher,
                   longhorn=longhorn, kubevirt=kubevirt, release_date=date,
                   min_upgradable_version=min_up, tags=(version,), ga=not pre,
                   previous=None, archive_versions=None)
    rel = dataclasses.replace(base, **fields_)
    return dataclasses.replace(rel, **overrides) if overrides else rel


def _bump_minor(ver: str, by: int) -> str:
    m = re.match(r"^(v?\d+\.)(\d+)\.(\d+)(.*)$", ver)
    if not m or by <= 0:
        return ver
    return f"{m.group(1)}{int(m.group(2)) + by}.{1 + by}{m.group(4)}"


# Keys accepted by release_from_dict, in both the release-file spelling and snake_case.
_KEY_ALIASES = {
    "harvester": "version", "harvesterChart": "harvester_chart", "monitoringChart":
    "monitoring_chart", "loggingChart": "logging_chart", "minUpgradableVersion":
    "min_upgradable_version", "releaseDate": "release_date",
    "loggingChartHarvesterEventRouter": "event_router_chart", "archiveVersions":
    "archive_versions", "isoSize": "iso_size", "extraImages": "extra_images",
    "removedImages": "removed_images",
}
_FIELDS = {f.name for f in dataclasses.fields(Release)}


def release_from_dict(spec: Mapping[str, Any] | str,
                      known: Mapping[str, Release] | None = None) -> Release:
    """Build a release from a scenario entry.

    ``spec`` is a version string (``"v1.6.0"``) or a dict with ``version`` (or
    ``harvester``) and any fields to override, in release-file spelling (``kubernetes``,
    ``harvesterChart``, ``minUpgradableVersion``, ``releaseDate``, ``tags``...) or
    snake_case. ``base: <version>`` picks the release to start from (default: the same
    version if known, else a synthesised one). ``rancherDependencies`` in release-file
    form is accepted too. ``extraImages`` is a list of names or ``{name, size}`` dicts.
    """
    pool: dict[str, Release] = dict(CATALOG)
    if known:
        pool.update(known)
    if isinstance(spec, str):
        v = _normalize(spec)
        return pool[v] if v in pool else synthesize_release(v)
    raw = dict(spec)
    version_raw = raw.pop("version", None) or raw.pop("harvester", None)
    if not version_raw:
        raise ValueError(f"release entry without version: {spec!r}")
    version = _normalize(str(version_raw))
    raw.pop("harvester", None)
    base_name = raw.pop("base", None)
    if base_name:
        b = _normalize(str(base_name))
        base = pool[b] if b in pool else synthesize_release(b)
        base = dataclasses.replace(base, version=version, harvester_chart=version.lstrip("v"),
                                   os=f"Harvester {version}", tags=(version,),
                                   ga=not parse_version(version)[3], previous=None,
                                   archive_versions=None)
    else:
        base = pool[version] if version in pool else synthesize_release(version)
    deps = raw.pop("rancherDependencies", None) or raw.pop("rancher_dependencies", None)
    changes: dict[str, Any] = {}
    if deps:
        fleet = deps.get("fleet") or {}
        hook = deps.get("rancher-webhook") or {}
        if fleet.get("app"):
            changes["fleet"] = str(fleet["app"])
        if fleet.get("chart"):
            changes["fleet_chart"] = str(fleet["chart"])
        if hook.get("app"):
            changes["webhook"] = str(hook["app"])
        if hook.get("chart"):
            changes["webhook_chart"] = str(hook["chart"])
    for key, value in raw.items():
        name = _KEY_ALIASES.get(key, key)
        if name not in _FIELDS:
            raise ValueError(f"unknown release field {key!r} in {spec!r}")
        changes[name] = _coerce(name, value)
    return dataclasses.replace(base, **changes)


def _coerce(name: str, value: Any) -> Any:
    if name in ("tags", "removed_images"):
        return tuple(str(v) for v in (value or ()))
    if name == "archive_versions":
        return None if value is None else tuple(_normalize(str(v)) for v in value)
    if name == "extra_images":
        out = []
        for item in value or ():
            if isinstance(item, str):
                out.append((item, _size_for(item, 80 * MiB)))
            else:
                out.append((str(item["name"]), int(item.get("size") or _size_for(
                    str(item["name"]), 80 * MiB))))
        return tuple(out)
    if name in ("iso_size",):
        return int(value)
    if name == "ga":
        return bool(value)
    if name in ("previous", "min_upgradable_version") and value:
        return _normalize(str(value))
    return "" if value is None else str(value)


class ReleaseSet:
    """The releases of one scenario: the installed one and those available to upgrade to.

    Scenario form (``releases:`` section)::

        installed: v1.5.1                      # or a dict, see release_from_dict
        available: [v1.6.0, {version: v1.6.1, kubernetes: v1.33.6+rke2r1}]

    Lookups of versions not declared fall back to the catalog (and synthesis), so the
    archived image list of any previous version can always be produced.
    """

    def __init__(self, installed: Release | None = None,
                 available: Iterable[Release] = ()) -> None:
        self.installed = installed
        self.available: list[Release] = list(available)
        self._by_version: dict[str, Release] = {}
        for r in ([installed] if installed else []) + self.available:
            self._by_version[r.version] = r

    @classmethod
    def from_scenario(cls, spec: Mapping[str, Any] | None) -> ReleaseSet:
        spec = spec or {}
        declared: dict[str, Release] = {}
        installed = None
        if spec.get("installed"):
            installed = release_from_dict(spec["installed"], declared)
            declared[installed.version] = installed
        avail = []
        for entry in spec.get("available") or ():
            r = release_from_dict(entry, declared)
            declared[r.version] = r
            avail.append(r)
        return cls(installed, avail)

    def add(self, release: Release) -> None:
        self._by_version[release.version] = release
        if release not in self.available and release != self.installed:
            self.available.append(release)

    def get(self, version: str) -> Release:
        v = _normalize(version)
        return self._by_version.get(v) or get_release(v)

    def __contains__(self, version: object) -> bool:
        return isinstance(version, str) and _normalize(version) in self._by_version

    def all(self) -> list[Release]:
        return sorted(self._by_version.values(), key=lambda r: version_key(r.version))

    def previous_of(self, release: Release) -> str | None:
        if release.previous:
            return release.previous
        return previous_version(release.version, set(CATALOG) | set(self._by_version))

    def archived_versions(self, release: Release) -> list[str]:
        """Versions whose ``image_list_all.txt`` the release's ISO carries: its own, the
        previous release and every known release it can be upgraded from."""
        return archived_versions(release, self)


def archived_versions(release: Release, releases: ReleaseSet | None = None) -> list[str]:
    if not release.ga:
        return []
    if release.archive_versions is not None:
        extra = list(release.archive_versions)
    else:
        known = set(CATALOG) | (set(releases._by_version) if releases else set())
        prev = releases.previous_of(release) if releases else (
            release.previous or previous_version(release.version, known))
        extra = [prev] if prev else []
        if release.min_upgradable_version:
            lo, hi = version_key(release.min_upgradable_version), version_key(release.version)
            extra += [v for v in known if lo <= version_key(v) < hi
                      and not parse_version(v)[3]]
    out = {release.version, *extra}
    return sorted(out, key=version_key)


# --------------------------------------------------------------------------- images

def _rng(*parts: object) -> random.Random:
    return random.Random(":".join(str(p) for p in parts))


def _size_for(name: str, median: int) -> int:
    """Deterministic size around ``median`` for an image name (+-35 %)."""
    r = _rng("size", name)
    return int(median * r.uniform(0.65, 1.35)) // 512 * 512


def _dash(k8s: str) -> str:
    return k8s.replace("+", "-")


def _build_tag(seed: str, date: str) -> str:
    """``build20250611`` a few days before ``date`` (deterministic)."""
    d = _dt.date.fromisoformat(date) if date else _dt.date(2025, 1, 1)
    d -= _dt.timedelta(days=_rng("build", seed).randint(7, 40))
    return f"build{d.strftime('%Y%m%d')}"


# (repository, base tag at v1.3, median size MiB) for images not tied to a component
# version. Tags advance by the seeded bump model.
_GENERIC: dict[str, list[tuple[str, str, int]]] = {
    "harvester": [
        ("docker.io/rancher/harvester-network-controller", "v0.5.1", 42),
        ("docker.io/rancher/harvester-network-helper", "v0.5.1", 38),
        ("docker.io/rancher/harvester-network-webhook", "v0.5.1", 36),
        ("docker.io/rancher/harvester-node-manager", "v0.3.1", 60),
        ("docker.io/rancher/harvester-node-manager-webhook", "v0.3.1", 34),
        ("docker.io/rancher/harvester-node-disk-manager", "v0.7.1", 90),
        ("docker.io/rancher/harvester-node-disk-manager-webhook", "v0.7.1", 33),
        ("docker.io/rancher/harvester-load-balancer", "v0.4.0", 41),
        ("docker.io/rancher/harvester-load-balancer-webhook", "v0.4.0", 35),
        ("docker.io/rancher/harvester-vm-import-controller", "v0.4.0", 95),
        ("docker.io/rancher/harvester-pcidevices", "v0.4.0", 120),
        ("docker.io/rancher/harvester-seeder", "v0.3.0", 48),
        ("docker.io/rancher/harvester-eventrouter", "v0.3.0", 22),
        ("docker.io/rancher/harvester-vm-dhcp-controller", "v0.3.0", 40),
        ("docker.io/rancher/harvester-vm-dhcp-agent", "v0.3.0", 38),
        ("docker.io/rancher/harvester-vm-dhcp-webhook", "v0.3.0", 36),
        ("docker.io/rancher/harvester-csi-driver", "v0.1.7", 75),
        ("docker.io/rancher/harvester-cloud-provider", "v0.2.6", 60),
        ("docker.io/rancher/harvester-nvidia-driver-toolkit", "v1.4-20240815", 310),
        ("docker.io/rancher/harvester-node-disk-manager-utils", "v0.7.1", 110),
        ("docker.io/rancher/support-bundle-kit", "v0.0.42", 190),
        ("docker.io/rancher/mirrored-kube-vip-kube-vip-iptables", "v0.6.0", 40),
        ("docker.io/rancher/mirrored-loftsh-vcluster", "0.19.0", 85),
        ("docker.io/rancher/mirrored-descheduler-descheduler", "v0.30.1", 70),
        ("docker.io/rancher/mirrored-library-traefik", "2.11.2", 150),
        ("docker.io/rancher/mirrored-library-busybox", "1.36.1", 4),
        ("docker.io/rancher/harvester-qemu-guest-agent-installer", "v0.1.2", 30),
        ("docker.io/longhornio/csi-attacher", "v4.5.1", 68),
        ("docker.io/longhornio/csi-provisioner", "v4.0.1", 72),
        ("docker.io/longhornio/csi-resizer", "v1.10.1", 66),
        ("docker.io/longhornio/csi-snapshotter", "v7.0.2", 64),
        ("docker.io/longhornio/csi-node-driver-registrar", "v2.10.1", 22),
        ("docker.io/longhornio/livenessprobe", "v2.12.0", 20),
        ("docker.io/longhornio/openshift-origin-oauth-proxy", "4.15", 120),
        ("registry.suse.com/suse/sles/15.6/cdi-apiserver", "1.58.0-150600.3.3.1", 85),
        ("registry.suse.com/suse/sles/15.6/cdi-controller", "1.58.0-150600.3.3.1", 92),
        ("registry.suse.com/suse/sles/15.6/cdi-importer", "1.58.0-150600.3.3.1", 250),
        ("registry.suse.com/suse/sles/15.6/cdi-cloner", "1.58.0-150600.3.3.1", 180),
        ("registry.suse.com/suse/sles/15.6/cdi-operator", "1.58.0-150600.3.3.1", 80),
        ("registry.suse.com/suse/sles/15.6/cdi-uploadproxy", "1.58.0-150600.3.3.1", 75),
        ("registry.suse.com/suse/sles/15.6/cdi-uploadserver", "1.58.0-150600.3.3.1", 170),
        ("registry.suse.com/suse/sles/15.6/libguestfs-tools", "1.3.1-150600.5.9.1", 420),
        ("registry.suse.com/harvester-beta/vmdp", "2.5.4.3", 220),
    ],
    "rancher": [
        ("docker.io/rancher/shell", "v0.2.1", 180),
        ("docker.io/rancher/system-upgrade-controller", "v0.13.4", 40),
        ("docker.io/rancher/machine", "v0.15.0-rancher112", 80),
        ("docker.io/rancher/kube-api-auth", "v0.2.2", 25),
        ("docker.io/rancher/aks-operator", "v1.9.1", 70),
        ("docker.io/rancher/eks-operator", "v1.9.1", 72),
        ("docker.io/rancher/gke-operator", "v1.9.1", 71),
        ("docker.io/rancher/ali-operator", "v1.9.0", 66),
        ("docker.io/rancher/backup-restore-operator", "v5.0.1", 78),
        ("docker.io/rancher/rancher-csp-adapter", "v4.0.0", 30),
        ("docker.io/rancher/security-scan", "v0.3.1", 190),
        ("docker.io/rancher/cis-operator", "v1.0.13", 55),
        ("docker.io/rancher/mirrored-cluster-api-controller", "v1.7.3", 75),
        ("docker.io/rancher/rancher-turtles", "v0.11.0", 90),
        ("docker.io/rancher/pushprox-client", "v0.1.3-rancher2-client", 12),
        ("docker.io/rancher/pushprox-proxy", "v0.1.3-rancher2-proxy", 12),
        ("docker.io/rancher/prom-prometheus", "v2.45.0", 240),
        ("docker.io/rancher/fleet-gitjob", "v0.10.2", 95),
        ("docker.io/rancher/fleet-helmops", "v0.10.2", 90),
        ("docker.io/rancher/kubernetes-external-dns", "v0.7.3", 45),
        ("docker.io/rancher/wins", "v0.4.15", 40),
        ("docker.io/rancher/rke-tools", "v0.1.100", 210),
        ("docker.io/rancher/mirrored-prometheus-prometheus", "v2.50.1", 250),
        ("docker.io/rancher/mirrored-prometheus-alertmanager", "v0.27.0", 70),
        ("docker.io/rancher/mirrored-prometheus-operator-prometheus-operator", "v0.72.0", 45),
        ("docker.io/rancher/mirrored-prometheus-operator-prometheus-config-reloader",
         "v0.72.0", 14),
        ("docker.io/rancher/mirrored-prometheus-operator-admission-webhook", "v0.72.0", 25),
        ("docker.io/rancher/mirrored-prometheus-node-exporter", "v1.7.0", 24),
        ("docker.io/rancher/mirrored-prometheus-adapter-prometheus-adapter", "v0.10.0", 68),
        ("docker.io/rancher/mirrored-prometheus-windows-exporter", "0.25.1", 150),
        ("docker.io/rancher/mirrored-kube-state-metrics-kube-state-metrics", "v2.10.1", 43),
        ("docker.io/rancher/mirrored-grafana-grafana", "10.4.1", 410),
        ("docker.io/rancher/mirrored-grafana-grafana-image-renderer", "3.10.1", 780),
        ("docker.io/rancher/mirrored-kiwigrid-k8s-sidecar", "1.26.1", 95),
        ("docker.io/rancher/mirrored-ingress-nginx-kube-webhook-certgen", "v1.4.1", 55),
        ("docker.io/rancher/mirrored-thanos-thanos", "v0.34.1", 140),
        ("docker.io/rancher/mirrored-prometheus-pushgateway", "v1.7.0", 30),
        ("docker.io/rancher/mirrored-jimmidyson-configmap-reload", "v0.12.0", 12),
        ("docker.io/rancher/mirrored-brancz-kube-rbac-proxy", "v0.16.0", 50),
        ("docker.io/rancher/mirrored-kube-rbac-proxy", "v0.16.0", 50),
        ("docker.io/rancher/mirrored-kube-logging-logging-operator", "4.6.0", 75),
        ("docker.io/rancher/mirrored-kube-logging-config-reloader", "v0.0.5", 11),
        ("docker.io/rancher/mirrored-kube-logging-fluentd", "v1.16-4.6-full", 320),
        ("docker.io/rancher/mirrored-kube-logging-node-exporter", "v0.7.1", 14),
        ("docker.io/rancher/mirrored-kube-logging-syslog-ng-reloader", "v0.0.2", 11),
        ("docker.io/rancher/mirrored-axoflow-axosyslog", "4.7.1", 180),
        ("docker.io/rancher/mirrored-banzaicloud-fluentd", "v1.14.6-alpine-5", 140),
        ("docker.io/rancher/mirrored-fluent-fluent-bit", "2.2.0", 90),
        ("docker.io/rancher/mirrored-banzaicloud-config-reloader", "0.0.3", 11),
        ("docker.io/rancher/mirrored-banzaicloud-logging-operator", "3.17.10", 70),
        ("docker.io/rancher/fluent-bit-out-syslog", "v0.1.5", 60),
        ("docker.io/rancher/mirrored-elemental-operator", "1.5.2", 95),
        ("docker.io/rancher/mirrored-elemental-seedimage-builder", "1.5.2", 350),
        ("docker.io/rancher/mirrored-metrics-server", "v0.7.1", 68),
        ("docker.io/rancher/mirrored-cluster-proportional-autoscaler", "1.8.9", 40),
        ("docker.io/rancher/mirrored-k8s-dns-kube-dns", "1.23.0", 65),
        ("docker.io/rancher/mirrored-k8s-dns-dnsmasq-nanny", "1.23.0", 40),
        ("docker.io/rancher/mirrored-k8s-dns-sidecar", "1.23.0", 38),
        ("docker.io/rancher/mirrored-k8s-dns-node-cache", "1.23.0", 70),
        ("docker.io/rancher/mirrored-coredns-coredns", "1.11.1", 55),
        ("docker.io/rancher/mirrored-coreos-etcd", "v3.5.12", 60),
        ("docker.io/rancher/mirrored-coreos-flannel", "v0.24.2", 75),
        ("docker.io/rancher/mirrored-flannel-flannel", "v0.24.2", 75),
        ("docker.io/rancher/mirrored-flannel-flannel-cni-plugin", "v1.4.0-flannel1", 10),
        ("docker.io/rancher/mirrored-calico-cni", "v3.27.3", 205),
        ("docker.io/rancher/mirrored-calico-node", "v3.27.3", 340),
        ("docker.io/rancher/mirrored-calico-kube-controllers", "v3.27.3", 75),
        ("docker.io/rancher/mirrored-calico-typha", "v3.27.3", 70),
        ("docker.io/rancher/mirrored-calico-pod2daemon-flexvol", "v3.27.3", 13),
        ("docker.io/rancher/mirrored-calico-operator", "v1.32.7", 72),
        ("docker.io/rancher/mirrored-calico-apiserver", "v3.27.3", 95),
        ("docker.io/rancher/mirrored-calico-ctl", "v3.27.3", 62),
        ("docker.io/rancher/mirrored-cilium-cilium", "v1.15.5", 470),
        ("docker.io/rancher/mirrored-cilium-operator-generic", "v1.15.5", 95),
        ("docker.io/rancher/mirrored-cilium-operator-aws", "v1.15.5", 110),
        ("docker.io/rancher/mirrored-cilium-operator-azure", "v1.15.5", 105),
        ("docker.io/rancher/mirrored-cilium-hubble-relay", "v1.15.5", 60),
        ("docker.io/rancher/mirrored-cilium-hubble-ui", "v0.13.0", 28),
        ("docker.io/rancher/mirrored-cilium-hubble-ui-backend", "v0.13.0", 65),
        ("docker.io/rancher/mirrored-cilium-certgen", "v0.1.11", 35),
        ("docker.io/rancher/mirrored-cilium-clustermesh-apiserver", "v1.15.5", 80),
        ("docker.io/rancher/mirrored-cilium-cilium-envoy", "v1.28.3", 140),
        ("docker.io/rancher/mirrored-istio-pilot", "1.21.2", 75),
        ("docker.io/rancher/mirrored-istio-proxyv2", "1.21.2", 250),
        ("docker.io/rancher/mirrored-istio-install-cni", "1.21.2", 190),
        ("docker.io/rancher/mirrored-kiali-kiali", "v1.82.0", 240),
        ("docker.io/rancher/mirrored-jaegertracing-all-in-one", "1.57.0", 60),
        ("docker.io/rancher/mirrored-jaegertracing-jaeger-agent", "1.57.0", 30),
        ("docker.io/rancher/mirrored-jaegertracing-jaeger-collector", "1.57.0", 45),
        ("docker.io/rancher/mirrored-jaegertracing-jaeger-query", "1.57.0", 55),
        ("docker.io/rancher/mirrored-neuvector-controller", "5.3.3", 360),
        ("docker.io/rancher/mirrored-neuvector-enforcer", "5.3.3", 300),
        ("docker.io/rancher/mirrored-neuvector-manager", "5.3.3", 250),
        ("docker.io/rancher/mirrored-neuvector-scanner", "latest", 380),
        ("docker.io/rancher/mirrored-neuvector-updater", "latest", 20),
        ("docker.io/rancher/mirrored-neuvector-compliance-config", "1.0.0", 12),
        ("docker.io/rancher/mirrored-neuvector-registry-adapter", "0.1.1-s1", 40),
        ("docker.io/rancher/mirrored-open-policy-agent-gatekeeper", "v3.15.1", 95),
        ("docker.io/rancher/mirrored-open-policy-agent-gatekeeper-crds", "v3.15.1", 40),
        ("docker.io/rancher/mirrored-aquasec-kube-bench", "v0.7.1", 90),
        ("docker.io/rancher/mirrored-sonobuoy-sonobuoy", "v0.57.1", 55),
        ("docker.io/rancher/mirrored-rancher-opni", "v0.13.0", 180),
        ("docker.io/rancher/mirrored-library-registry", "2.8.3", 26),
        ("docker.io/rancher/mirrored-library-alpine", "3.19", 8),
        ("docker.io/rancher/mirrored-bitnami-kubectl", "1.30.1", 95),
        ("docker.io/rancher/mirrored-bitnami-redis", "7.2.4", 110),
        ("docker.io/rancher/mirrored-minio-minio", "RELEASE.2024-04-18T19-09-19Z", 160),
        ("docker.io/rancher/mirrored-minio-mc", "RELEASE.2024-04-18T16-45-29Z", 80),
        ("docker.io/rancher/mirrored-nginx-ingress-controller-defaultbackend", "1.5", 6),
        ("docker.io/rancher/mirrored-ingress-nginx-controller", "v1.10.1", 280),
        ("docker.io/rancher/mirrored-sig-storage-csi-attacher", "v4.5.1", 68),
        ("docker.io/rancher/mirrored-sig-storage-csi-provisioner", "v4.0.1", 72),
        ("docker.io/rancher/mirrored-sig-storage-csi-resizer", "v1.10.1", 66),
        ("docker.io/rancher/mirrored-sig-storage-csi-snapshotter", "v7.0.2", 64),
        ("docker.io/rancher/mirrored-sig-storage-csi-node-driver-registrar", "v2.10.1", 22),
        ("docker.io/rancher/mirrored-sig-storage-livenessprobe", "v2.12.0", 20),
        ("docker.io/rancher/mirrored-sig-storage-snapshot-controller", "v7.0.2", 60),
        ("docker.io/rancher/mirrored-longhornio-longhorn-engine", "v1.6.2", 330),
        ("docker.io/rancher/mirrored-longhornio-longhorn-instance-manager", "v1.6.2", 350),
        ("docker.io/rancher/mirrored-longhornio-longhorn-manager", "v1.6.2", 310),
        ("docker.io/rancher/mirrored-longhornio-longhorn-ui", "v1.6.2", 60),
        ("docker.io/rancher/mirrored-longhornio-longhorn-share-manager", "v1.6.2", 95),
        ("docker.io/rancher/mirrored-longhornio-backing-image-manager", "v1.6.2", 140),
        ("docker.io/rancher/mirrored-longhornio-support-bundle-kit", "v0.0.37", 190),
        ("docker.io/rancher/mirrored-epinio-epinio-server", "v1.11.0", 90),
        ("docker.io/rancher/mirrored-epinio-epinio-unpacker", "v1.11.0", 25),
        ("docker.io/rancher/mirrored-paketobuildpacks-builder-jammy-full", "0.3.290", 900),
        ("docker.io/rancher/mirrored-kubewarden-kubewarden-controller", "v1.12.0", 60),
        ("docker.io/rancher/mirrored-kubewarden-policy-server", "v1.12.0", 70),
        ("docker.io/rancher/mirrored-kubewarden-audit-scanner", "v1.12.0", 40),
        ("docker.io/rancher/mirrored-kubewarden-policy-reporter", "2.22.2", 45),
        ("docker.io/rancher/mirrored-kubewarden-policy-reporter-ui", "1.9.2", 30),
        ("docker.io/rancher/mirrored-rancher-kubernetes-dashboard", "v2.7.0", 75),
        ("docker.io/rancher/mirrored-kubernetesui-metrics-scraper", "v1.0.8", 40),
        ("docker.io/rancher/mirrored-cloud-provider-vsphere-cpi-release-manager",
         "v1.30.1", 70),
        ("docker.io/rancher/mirrored-cloud-provider-vsphere-csi-release-driver",
         "v3.3.0", 140),
        ("docker.io/rancher/mirrored-cloud-provider-vsphere-csi-release-syncer",
         "v3.3.0", 110),
        ("docker.io/rancher/mirrored-sig-storage-csi-external-health-monitor-controller",
         "v0.11.0", 50),
        ("docker.io/rancher/mirrored-openzipkin-zipkin", "3.3.0", 180),
        ("docker.io/rancher/mirrored-grafana-loki", "2.9.6", 90),
        ("docker.io/rancher/mirrored-grafana-promtail", "2.9.6", 200),
        ("docker.io/rancher/mirrored-fluxcd-helm-controller", "v0.37.4", 65),
        ("docker.io/rancher/mirrored-fluxcd-source-controller", "v1.2.5", 90),
        ("docker.io/rancher/mirrored-cert-manager-controller", "v1.14.5", 65),
        ("docker.io/rancher/mirrored-cert-manager-webhook", "v1.14.5", 50),
        ("docker.io/rancher/mirrored-cert-manager-cainjector", "v1.14.5", 45),
        ("docker.io/rancher/mirrored-cert-manager-startupapicheck", "v1.14.5", 40),
        ("docker.io/rancher/mirrored-sig-network-multus-cni", "v4.0.2", 110),
        ("docker.io/rancher/mirrored-k8snetworkplumbingwg-whereabouts", "v0.6.3", 60),
        ("docker.io/rancher/mirrored-k8snetworkplumbingwg-sriov-network-operator",
         "v1.2.0", 75),
        ("docker.io/rancher/mirrored-k8snetworkplumbingwg-sriov-cni", "v2.8.0", 40),
        ("docker.io/rancher/mirrored-nvidia-gpu-operator", "v23.9.2", 200),
        ("docker.io/rancher/mirrored-nvidia-k8s-device-plugin", "v0.15.0", 150),
        ("docker.io/rancher/mirrored-intel-sriov-network-device-plugin", "v3.6.2", 40),
        ("docker.io/rancher/mirrored-kubevirt-hostpath-provisioner", "v0.19.0", 25),
        ("docker.io/rancher/mirrored-velero-velero", "v1.13.2", 120),
        ("docker.io/rancher/mirrored-velero-velero-plugin-for-aws", "v1.9.2", 40),
        ("docker.io/rancher/mirrored-external-dns", "v0.14.1", 70),
        ("docker.io/rancher/mirrored-appscode-kubed", "v0.13.2", 35),
        ("docker.io/rancher/mirrored-rancher-webhook-certgen", "v0.1.0", 20),
    ],
    "rke2": [
        ("docker.io/rancher/hardened-etcd", "v3.5.13-k3s1", 60),
        ("docker.io/rancher/hardened-coredns", "v1.11.1", 60),
        ("docker.io/rancher/hardened-cluster-autoscaler", "v1.8.10", 40),
        ("docker.io/rancher/hardened-dns-node-cache", "1.22.28", 70),
        ("docker.io/rancher/hardened-k8s-metrics-server", "v0.7.1", 68),
        ("docker.io/rancher/hardened-addon-resizer", "1.8.20", 40),
        ("docker.io/rancher/hardened-calico", "v3.27.3", 420),
        ("docker.io/rancher/hardened-flannel", "v0.25.1", 80),
        ("docker.io/rancher/hardened-cni-plugins", "v1.4.1", 75),
        ("docker.io/rancher/hardened-multus-cni", "v4.0.2", 110),
        ("docker.io/rancher/hardened-whereabouts", "v0.7.0", 60),
        ("docker.io/rancher/hardened-sriov-network-operator", "v1.2.0", 75),
        ("docker.io/rancher/hardened-ib-sriov-cni", "v1.1.1", 40),
        ("docker.io/rancher/klipper-helm", "v0.8.3", 90),
        ("docker.io/rancher/klipper-lb", "v0.4.7", 9),
        ("docker.io/rancher/nginx-ingress-controller", "v1.10.1-hardened1", 280),
        ("docker.io/rancher/mirrored-sig-storage-snapshot-validation-webhook", "v7.0.2", 25),
        ("docker.io/rancher/rke2-cloud-provider", "v1.29.3-build20240412", 65),
        ("docker.io/rancher/mirrored-cilium-cilium-rke2", "v1.15.5", 470),
    ],
    "agent": [
        ("docker.io/rancher/system-agent", "v0.3.6-suc", 55),
        ("docker.io/rancher/rancher-agent-windows", "v0.1.0", 400),
    ],
}

# Fixed images that every release carries unchanged (referenced by the protocol).
_FIXED: list[tuple[str, int, str]] = [
    ("docker.io/rancher/mirrored-library-nginx:1.24.0-alpine", 43 * MiB, "harvester"),
    ("docker.io/rancher/mirrored-pause:3.6", 700_000, "rke2"),
]

_FIRST_LINE = 3  # generic base tags are those of the v1.3 line


def _bump_events(version: str) -> list[tuple[int, int]]:
    """(line, patch) events between the base line and ``version``; patch 0 = new line."""
    major, minor, patch, _ = parse_version(version)
    line = _line(major, minor)
    events = [(ln, 0) for ln in range(_FIRST_LINE + 1, line + 1)]
    events += [(line, p) for p in range(1, patch + 1)]
    return events


_TAG_VERSION_RE = re.compile(r"^(v?)(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def _advance(tag: str, bumps: list[bool]) -> str:
    """Apply bumps (True = minor, False = patch) to the version prefix of a tag
    (``v0.5.1`` / ``1.24.0-alpine`` / ``v1.16-4.6-full``); tags without one never move."""
    m = _TAG_VERSION_RE.match(tag)
    if not m or not bumps:
        return tag
    nums = [int(g) for g in m.groups()[1:] if g is not None]
    for minor in bumps:
        if minor and len(nums) >= 2:
            nums[1] += 1
            if len(nums) == 3:
                nums[2] = 0
        else:
            nums[-1] += 1
    return m.group(1) + ".".join(str(n) for n in nums) + tag[m.end():]


def _generic_tag(repo: str, base: str, version: str) -> str | None:
    """Tag of a generic repository in ``version``, or None if it is not shipped."""
    major, minor, _, _ = parse_version(version)
    line = _line(major, minor)
    life = _rng("life", repo)
    introduced = _FIRST_LINE if life.random() < 0.85 else life.randint(4, 7)
    removed = life.randint(5, 9) if life.random() < 0.08 else 99
    if not introduced <= line < removed:
        return None
    bumps: list[bool] = []
    for ln, p in _bump_events(version):
        r = _rng("bump", repo, ln, p)
        if p == 0:
            if r.random() < 0.22:
                bumps.append(r.random() < 0.5)
        elif r.random() < 0.06:
            bumps.append(False)
    if base in ("latest",):
        return base
    return _advance(base, bumps)


def kubevirt_semver(kubevirt: str) -> tuple[int, int, int] | None:
    """Upstream KubeVirt version of a release-file ``kubevirt`` value or a KubeVirt CR's
    ``observedKubeVirtVersion``: ``1.4.0-150600.5.15.1`` (SUSE build of v1.4.0) or ``v1.6.0``
    -> ``(1, 4, 0)``; None if it is not a version."""
    try:
        major, minor, patch, _ = parse_version(kubevirt)
    except ValueError:
        return None
    return major, minor, patch


def _kubevirt_tag(kubevirt: str) -> tuple[str, str]:
    """(sles path, tag) of the SUSE-built KubeVirt images, e.g. ('15.6', '1.4.0-150600.5.15.1').

    A release's ``kubevirt`` is that tag already (SLE 15 SP6 builds carry ``-1506xx``, SP7
    ``-1507xx``); a bare version (a scenario's override) gets a generated build suffix."""
    m = re.match(r"^v?(\d+\.\d+\.\d+)-15(\d)(\d)\d\d\.", kubevirt)
    if m:
        return f"15.{int(m.group(3))}", kubevirt.lstrip("v")
    major, minor, patch, _ = parse_version(kubevirt)
    sles = "15.6" if (major, minor) < (1, 5) else "15.7"
    build = _rng("kubevirt-build", kubevirt).randint(5, 30)
    return sles, f"{major}.{minor}.{patch}-{sles.replace('.', '0')}00.5.{build}.1"


def _supported_k8s(kubernetes: str, date: str) -> list[str]:
    """Kubernetes versions Rancher ships installer images for: the current minor up to the
    release's patch and the three previous minors (the newest ten patches of each)."""
    major, minor, patch, _ = parse_version(kubernetes.split("+")[0])
    out = []
    for m in (minor - 3, minor - 2, minor - 1):
        top = _rng("k8s-top", major, m).randint(11, 16)
        out += [f"v{major}.{m}.{p}" for p in range(max(top - 9, 1), top + 1)]
    out += [f"v{major}.{minor}.{p}" for p in range(max(patch - 9, 1), patch + 1)]
    return out


def _images_for(release: Release) -> tuple[Image, ...]:
    v = release.version
    date = release.release_date
    imgs: dict[str, Image] = {}

    def add(name: str, median: int, bundle: str) -> None:
        imgs[name] = Image(name, _size_for(name, median), bundle)

    # Harvester-tied
    for repo, med in (("harvester", 360), ("harvester-webhook", 140),
                      ("harvester-upgrade", 170), ("harvester-upgrade-toolkit", 180),
                      ("harvester-cluster-repo", 150)):
        add(f"docker.io/rancher/{repo}:{v}", med * MiB, "harvester")
    # Longhorn-tied
    for repo, med in (("longhorn-engine", 330), ("longhorn-instance-manager", 350),
                      ("longhorn-manager", 310), ("longhorn-ui", 60),
                      ("longhorn-share-manager", 95), ("backing-image-manager", 140),
                      ("longhorn-cli", 45)):
        add(f"docker.io/longhornio/{repo}:{release.longhorn}", med * MiB, "harvester")
    # KubeVirt-tied
    sles, kv_tag = _kubevirt_tag(release.kubevirt)
    for comp, med in (("virt-api", 95), ("virt-controller", 100), ("virt-handler", 210),
                      ("virt-launcher", 480), ("virt-operator", 110),
                      ("virt-exportproxy", 90), ("virt-exportserver", 85)):
        add(f"registry.suse.com/suse/sles/{sles}/{comp}:{kv_tag}", med * MiB, "harvester")
    # RKE2-tied
    k8s = _dash(release.kubernetes)
    add(f"docker.io/rancher/rke2-runtime:{k8s}", 80 * MiB, "rke2")
    add(f"docker.io/rancher/hardened-kubernetes:{k8s}-{_build_tag(k8s, date)}",
        220 * MiB, "rke2")
    add(f"docker.io/rancher/system-agent-installer-rke2:{k8s}", 75 * MiB, "agent")
    # Rancher-tied
    add(f"docker.io/rancher/rancher:{release.rancher}", 780 * MiB, "rancher")
    add(f"docker.io/rancher/rancher-agent:{release.rancher}", 620 * MiB, "agent")
    add(f"docker.io/rancher/rancher-webhook:v{release.webhook.lstrip('v')}", 45 * MiB,
        "rancher")
    add(f"docker.io/rancher/fleet:v{release.fleet.lstrip('v')}", 110 * MiB, "rancher")
    add(f"docker.io/rancher/fleet-agent:v{release.fleet.lstrip('v')}", 95 * MiB, "rancher")
    # Rancher ships installers and node images for every Kubernetes version it supports.
    for kv in _supported_k8s(release.kubernetes, date):
        rke2 = f"{kv}-rke2r1"
        if rke2 != k8s:
            add(f"docker.io/rancher/system-agent-installer-rke2:{rke2}", 75 * MiB, "rancher")
            add(f"docker.io/rancher/hardened-kubernetes:{rke2}-{_build_tag(rke2, date)}",
                220 * MiB, "rancher")
        add(f"docker.io/rancher/system-agent-installer-k3s:{kv}-k3s1", 70 * MiB, "rancher")
    kmaj, kmin, kpatch, _ = parse_version(release.kubernetes.split("+")[0])
    for m in (kmin - 2, kmin - 1, kmin):
        p = kpatch if m == kmin else _rng("kubectl", kmaj, m).randint(8, 14)
        add(f"docker.io/rancher/kubectl:v{kmaj}.{m}.{p}", 60 * MiB, "rancher")
    # Generic repositories
    for bundle, repos in _GENERIC.items():
        for repo, base, med in repos:
            tag = _generic_tag(repo, base, v)
            if tag is not None:
                add(f"{repo}:{tag}", med * MiB, bundle)
    for name, size, bundle in _FIXED:
        imgs[name] = Image(name, size, bundle)
    for name, size in release.extra_images:
        imgs[name] = Image(name, size, "harvester")
    for gone in release.removed_images:
        for name in [n for n in imgs if n == gone or n.rsplit(":", 1)[0] == gone]:
            del imgs[name]
    return tuple(sorted(imgs.values(), key=lambda i: i.name))


_IMAGE_CACHE: dict[Release, tuple[Image, ...]] = {}


def _images_cached(release: Release) -> tuple[Image, ...]:
    got = _IMAGE_CACHE.get(release)
    if got is None:
        got = _images_for(release)
        if len(_IMAGE_CACHE) > 256:
            _IMAGE_CACHE.clear()
        _IMAGE_CACHE[release] = got
    return got


def images_diff(old: Release, new: Release) -> tuple[list[str], list[str]]:
    """(images only in ``new``, images only in ``old``): what a preload pulls and what a
    cleanup may remove."""
    a, b = set(old.image_names()), set(new.image_names())
    return sorted(b - a), sorted(a - b)


__all__ = [
    "CATALOG", "Image", "Release", "ReleaseSet", "archived_versions", "get_release",
    "images_diff", "known_versions", "kubevirt_semver", "parse_version", "previous_version",
    "release_from_dict",
    "synthesize_release", "version_key",
]

