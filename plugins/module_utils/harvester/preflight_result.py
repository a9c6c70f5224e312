"""What a pre-flight check returns, and the object readers every check uses.

A check is a pure function over Kubernetes objects (dicts) returning a :class:`CheckResult`:
the check's name, whether it passed, a message a person can act on and the objects involved.
The checks themselves are grouped by where the rule comes from (:mod:`preflight_webhook`,
:mod:`preflight_version`, :mod:`preflight_coexistence`, :mod:`preflight_controller`); the
runner is :mod:`preflight_checks`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)


@dataclass
class CheckResult:
    """Outcome of one check. ``status`` is ``passed``, ``failed`` or ``skipped``."""

    name: str
    status: str
    message: str = ""
    objects: list[str] = field(default_factory=list)
    family: str = "webhook"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def passed(name: str, message: str = "", family: str = "webhook") -> CheckResult:
    return CheckResult(name, "passed", message, [], family)


def failed(name: str, message: str, objects: Iterable[str], family: str = "webhook"
           ) -> CheckResult:
    return CheckResult(name, "failed", message, sorted(set(objects)), family)


def skipped(name: str, message: str, family: str = "webhook") -> CheckResult:
    return CheckResult(name, "skipped", message, [], family)


def passed_unless(name: str, bad: list[str], what: str, ok: str = "") -> CheckResult:
    """Failed when ``bad`` names objects (``what`` followed by them, sorted), else passed
    with ``ok``: the shape of every check that lists what stands in the way."""
    if bad:
        return failed(name, what + ", ".join(sorted(bad)), bad)
    return passed(name, ok)


def annotation(annotations: dict[str, str] | None, keys: tuple[str, ...]) -> str | None:
    """Value of the first present annotation among the accepted spellings."""
    for key in keys:
        if annotations and key in annotations:
            return str(annotations[key])
    return None


def annotation_true(annotations: dict[str, str] | None, keys: tuple[str, ...]) -> bool:
    value = annotation(annotations, keys)
    return value is not None and value.strip().lower() in ("true", "1", "t", "yes")


def name_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def condition_of(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def is_witness(node: dict[str, Any]) -> bool:
    return c.LABEL_WITNESS in labels_of(node)


def node_ready(node: dict[str, Any]) -> bool:
    cond = condition_of(node, "Ready")
    return bool(cond) and cond.get("status") == "True"
