"""Pre-flight checks of the target release (reference §E.3) and of how its ISO is fetched:
families ``version`` and ``input``, which the skip-webhook annotation does not skip.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    versions,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.preflight_result import (
    CheckResult,
    failed,
    passed,
    skipped,
)


def version_eligible(current: str | None, target: str | None, min_upgradable: str,
                     force: bool, allow_downgrade: bool = False,
                     allow_version_skip: bool = False) -> CheckResult:
    """Target must be newer than the running release and allowed by the §E.3 rules. A
    downgrade and a target whose minUpgradableVersion is above the running release each need
    their own switch; ``force`` lifts only the other rules."""
    name = "version_eligible"
    if not target:
        return skipped(name, "target version unknown until the ISO is read", "version")
    if not current:
        return failed(name, f"Setting {c.SERVER_VERSION_SETTING} has no value", [
            f"setting/{c.SERVER_VERSION_SETTING}"], "version")
    refused = versions.refusal(current, target, min_upgradable, force=force,
                               allow_downgrade=allow_downgrade,
                               allow_version_skip=allow_version_skip, refuse_same=True)
    if refused is None:
        strict = versions.refusal(current, target, min_upgradable, refuse_same=True)
        if strict is None:
            return passed(name, versions.eligibility(current, target, min_upgradable)[1],
                          "version")
        return skipped(name, f"allowed by {versions.SWITCHES[strict[1]]}: {strict[0]}",
                       "version")
    why, rule = refused
    return failed(name, f"{why} ({versions.SWITCHES[rule]}=true allows it)",
                  [f"version/{target}"], "version")


ISO_CHECKSUM_HEX = 128   # SHA-512, what Harvester's image download verifies


def iso_unverified(version_name: str | None, version_obj: dict[str, Any] | None
                   ) -> str | None:
    """Why the Version's ISO would be downloaded unverified, else ``None``: no
    ``spec.isoChecksum`` (Harvester then imports whatever the URL answers, over ``http://``
    whatever any host on the path answers) or one that is not a SHA-512 digest. An
    ``http://`` URL with a SHA-512 is verified: the digest comes from the Version, read over
    the authenticated API, and the download is checked against it."""
    if version_obj is None:
        return None
    spec = version_obj.get("spec") or {}
    url, checksum = str(spec.get("isoURL") or ""), str(spec.get("isoChecksum") or "").strip()
    insecure = " over plain http://" if url.lower().startswith("http://") else ""
    if not checksum:
        return (f"Version {version_name} has no spec.isoChecksum: its ISO ({url}) would be "
                f"downloaded unverified{insecure}")
    hex_digits = set("0123456789abcdefABCDEF")
    if len(checksum) != ISO_CHECKSUM_HEX or not set(checksum) <= hex_digits:
        return (f"Version {version_name} spec.isoChecksum is not a SHA-512 digest "
                f"({len(checksum)} characters, 128 hex digits expected): its ISO ({url}) "
                f"cannot be verified{insecure}")
    return None


def iso_verified(version_name: str | None, version_obj: dict[str, Any] | None,
                 image: str | None, allow_unverified: bool) -> CheckResult:
    name = "iso_verified"
    if image:
        return skipped(name, "pre-uploaded image (spec.image): nothing is downloaded", "input")
    why = iso_unverified(version_name, version_obj)
    if why is None:
        return passed(name, "the ISO download is checked against the Version's SHA-512"
                      if version_obj is not None else "no Version to download", "input")
    if allow_unverified:
        return skipped(name, f"allowed by upgrade_allow_unverified_iso: {why}", "input")
    return failed(name, f"{why}; give the Version an isoChecksum, or set "
                  "upgrade_allow_unverified_iso=true to download it anyway",
                  [f"version/{version_name}"], "input")
