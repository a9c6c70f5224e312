"""Version parsing, ordering, target choice and the §E.3 eligibility rules."""

from __future__ import annotations

import pytest

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import versions


@pytest.mark.parametrize("lower,higher", [
    ("v1.5.1", "v1.6.0"),
    ("v1.6.0-rc1", "v1.6.0"),
    ("v1.6.0-rc2", "v1.6.0-rc10"),
    ("v1.6.0", "v1.6.1"),
    ("v1.9.9", "v1.10.0"),
    ("v1.6.0-rc5", "v1.6.0-rc5.1"),
])
def test_ordering(lower: str, higher: str) -> None:
    assert versions.compare(lower, higher) == -1
    assert versions.compare(higher, lower) == 1


def test_parse() -> None:
    v = versions.parse("v1.8.0-rc1")
    assert v is not None and v.stable == (1, 8, 0) and v.prerelease == ("rc1",)
    assert str(v) == "v1.8.0-rc1"
    assert versions.parse("master-head") is None
    assert versions.parse("1.6.0") == versions.parse("v1.6.0")


@pytest.mark.parametrize("text,dev", [
    ("master-head", True), ("v1.5-head", True), ("v1.8.0-dev-20250101", True),
    ("v1.8.0-rc1", False), ("v1.6.0", False)])
def test_is_dev(text: str, dev: bool) -> None:
    assert versions.is_dev(text) is dev


def test_newest_target() -> None:
    names = ["v1.5.1", "v1.6.0", "v1.6.1-rc1", "master-head", "v1.5.0"]
    assert versions.newest_target(names, "v1.5.1") == "v1.6.1-rc1"
    assert versions.newest_target(["v1.5.0", "v1.5.1"], "v1.5.1") is None
    assert versions.newest_target(names, "master-head") == "v1.6.1-rc1"


@pytest.mark.parametrize("current,target,minimum,ok,fragment", [
    ("v1.5.1", "v1.6.0", "", True, "can be upgraded"),
    ("v1.5.1", "master-head", "", True, "development build"),
    ("master-head", "v1.6.0", "", False, "development build"),
    ("v1.6.0", "v1.6.0", "", True, "same version"),
    ("v1.6.0", "v1.5.1", "", False, "downgrade"),
    ("v1.4.0", "v1.6.0", "v1.5.0", False, "minimum upgradable"),
    ("v1.5.0", "v1.6.0", "v1.5.0", True, "can be upgraded"),
    ("v1.6.0-rc1", "v1.6.0", "", True, "can be upgraded"),
    ("v1.6.0-rc1", "v1.6.1", "", False, "prerelease"),
])
def test_eligibility(current: str, target: str, minimum: str, ok: bool, fragment: str
                     ) -> None:
    got, why = versions.eligibility(current, target, minimum)
    assert got is ok
    assert fragment in why
