"""ImagePreload's eligibility check (phase_image_preload.eligibility_error): ``force``
(spec.force, the phase's force option, the toolkit's skip-version-check annotation) lifts the
soft rules only; a downgrade and a version skip need the switch recorded on the plan for
each."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    phase_image_preload,
)

DOWN = "harvester-upgrade.harvesterhci.io/allow-downgrade"
SKIP = "harvester-upgrade.harvesterhci.io/allow-version-skip"


def ctx(current: str, target: str, minimum: str = "", *, force: bool = False,
        param_force: bool = False, annotations: dict[str, str] | None = None) -> Any:
    return SimpleNamespace(
        plan={"spec": {"force": force}}, params={"force": param_force},
        writer=SimpleNamespace(annotations=annotations or {}),
        status={"previousVersion": current,
                "releaseMetadata": {"harvester": target, "minUpgradableVersion": minimum}})


@pytest.mark.parametrize("how", [{"force": True}, {"param_force": True},
                                 {"annotations": {"harvesterhci.io/skip-version-check": "true"}}])
def test_force_does_not_lift_downgrade_or_version_skip(how: dict[str, Any]) -> None:
    err = phase_image_preload.eligibility_error(ctx("v1.6.0", "v1.5.1", **how))
    assert err and "downgrade" in err and DOWN in err
    err = phase_image_preload.eligibility_error(ctx("v1.4.3", "v1.6.0", "v1.5.0", **how))
    assert err and "minimum upgradable" in err and SKIP in err
    # the soft rules it still lifts: a prerelease current version on another line
    assert phase_image_preload.eligibility_error(ctx("v1.5.1-rc1", "v1.6.0", **how)) is None


def test_each_switch_lifts_its_own_rule_only() -> None:
    assert phase_image_preload.eligibility_error(
        ctx("v1.6.0", "v1.5.1", annotations={DOWN: "true"})) is None
    assert phase_image_preload.eligibility_error(
        ctx("v1.6.0", "v1.5.1", annotations={SKIP: "true"}))
    assert phase_image_preload.eligibility_error(
        ctx("v1.4.3", "v1.6.0", "v1.5.0", annotations={SKIP: "true"})) is None
    assert phase_image_preload.eligibility_error(
        ctx("v1.4.3", "v1.6.0", "v1.5.0", annotations={DOWN: "true"}))
    assert phase_image_preload.eligibility_error(ctx("v1.5.1", "v1.6.0", "v1.5.0")) is None
