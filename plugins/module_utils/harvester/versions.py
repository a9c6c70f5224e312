"""Harvester version strings: parsing, ordering, target selection and upgrade eligibility.

Versions look like ``v1.6.0``, ``v1.6.0-rc1``, ``v1.8.0-dev-20250101``; anything else
(``master-head``, ``v1.5-head``) is a *development build*. Ordering is semver's, except that
prerelease identifiers compare naturally (``rc2 < rc10``). :func:`eligibility` is the
toolkit's strict upgrade check (reference §E.3).

Pure functions; unit-tested in ``tests/unit/test_versions.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering
from typing import Any

_SEMVER = re.compile(
    r"^v?(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z.-]+))?(?:\+(?P<build>[0-9A-Za-z.-]+))?$")
_DEV_MARKERS = ("dev", "head")


def _natural(identifier: str) -> tuple[tuple[int, int | str], ...]:
    parts = re.findall(r"\d+|\D+", identifier)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts)


@total_ordering
@dataclass(frozen=True)
class Version:
    """A parsed release version; compare with ``<``/``==``."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    text: str = ""

    @property
    def stable(self) -> tuple[int, int, int]:
        return self.major, self.minor, self.patch

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    @property
    def is_dev(self) -> bool:
        return any(m in p.lower() for p in self.prerelease for m in _DEV_MARKERS)

    def _key(self) -> tuple[Any, ...]:
        pre: tuple[Any, ...] = (1,) if not self.prerelease else (
            0, tuple(_natural(p) for p in self.prerelease))
        return (self.stable, pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: Version) -> bool:
        return self._key() < other._key()

    def __str__(self) -> str:
        return self.text or (f"v{self.major}.{self.minor}.{self.patch}"
                             + (f"-{'.'.join(self.prerelease)}" if self.prerelease else ""))


def parse(text: str) -> Version | None:
    """Parse a release version; ``None`` for anything that is not semver-like."""
    m = _SEMVER.match((text or "").strip())
    if not m:
        return None
    pre = tuple(m.group("pre").split(".")) if m.group("pre") else ()
    return Version(int(m.group("major")), int(m.group("minor")), int(m.group("patch")), pre,
                   text.strip())


def is_dev(text: str) -> bool:
    """A development build: not a release version, or a ``-dev``/``-head`` prerelease."""
    v = parse(text)
    return v is None or v.is_dev


def compare(a: str, b: str) -> int:
    """-1/0/1 for two release versions (``ValueError`` if either does not parse)."""
    va, vb = parse(a), parse(b)
    if va is None or vb is None:
        raise ValueError(f"cannot compare {a!r} and {b!r}")
    return (va > vb) - (va < vb)


def newest_target(version_names: list[str], current: str) -> str | None:
    """The newest release in ``version_names`` strictly newer than ``current``.

    Names that do not parse are ignored; if ``current`` does not parse (a dev build), the
    newest parseable name is returned.
    """
    cur = parse(current)
    best: Version | None = None
    for name in version_names:
        v = parse(name)
        if v is None or (cur is not None and v <= cur):
            continue
        if best is None or v > best:
            best = v
    return str(best) if best else None


# which refusal of :func:`classify` lifts with which switch (variable names, as the operator
# sets them): a downgrade and skipping past minUpgradableVersion each need their own switch;
# upgrade_force (spec.force) lifts only the remaining rules
DOWNGRADE, VERSION_SKIP, OTHER = "downgrade", "version_skip", "other"
SWITCHES = {DOWNGRADE: "upgrade_allow_downgrade", VERSION_SKIP: "upgrade_allow_version_skip",
            OTHER: "upgrade_force"}


def classify(current: str, target: str, min_upgradable: str = "") -> tuple[bool, str, str]:
    """:func:`eligibility` plus which rule refused: ``(ok, reason, rule)``, ``rule`` one of
    :data:`DOWNGRADE`, :data:`VERSION_SKIP`, :data:`OTHER` (``""`` when allowed)."""
    if is_dev(target):
        return True, f"target {target} is a development build", ""
    if is_dev(current):
        return False, (f"current version {current} is a development build; upgrading from it "
                       "to a release is not supported"), OTHER
    cur, tgt = parse(current), parse(target)
    if cur is None or tgt is None:  # not reached: is_dev() is true for what does not parse
        raise ValueError(f"cannot compare {current!r} and {target!r}")
    if cur == tgt:
        return True, f"same version {target}", ""
    if tgt < cur:
        return False, f"downgrade from {current} to {target} is not supported", DOWNGRADE
    if min_upgradable:
        minimum = parse(min_upgradable)
        if minimum is not None and cur < minimum:
            return False, (f"current version {current} is older than the minimum upgradable "
                           f"version {min_upgradable} of {target}"), VERSION_SKIP
    if cur.is_prerelease and cur.stable != tgt.stable:
        return False, (f"current version {current} is a prerelease; it can only be upgraded "
                       f"to a build of {cur.major}.{cur.minor}.{cur.patch}"), OTHER
    return True, f"{current} can be upgraded to {target}", ""


def eligibility(current: str, target: str, min_upgradable: str = "") -> tuple[bool, str]:
    """Whether ``current`` may be upgraded to ``target`` (toolkit rules, strict mode).

    Returns ``(ok, reason)``; ``reason`` explains a refusal (or why it is allowed).
    """
    ok, why, _rule = classify(current, target, min_upgradable)
    return ok, why


def refusal(current: str, target: str, min_upgradable: str = "", *, force: bool = False,
            allow_downgrade: bool = False, allow_version_skip: bool = False,
            refuse_same: bool = False) -> tuple[str, str] | None:
    """Why upgrading ``current`` to ``target`` is refused with these switches, as
    ``(reason, rule)``, else ``None``. ``refuse_same``: the same release again is refused
    too (lifted by ``force``), as a new plan and the pre-flight check refuse it."""
    ok, why, rule = classify(current, target, min_upgradable)
    if ok and refuse_same and not is_dev(target) and not is_dev(current) \
            and compare(current, target) == 0:
        ok, why, rule = False, f"the cluster already runs {target}", OTHER
    if ok:
        return None
    lifted = {DOWNGRADE: allow_downgrade, VERSION_SKIP: allow_version_skip}.get(rule, force)
    return None if lifted else (why, rule)
