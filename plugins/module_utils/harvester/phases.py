"""The phase table of Harvester Upgrade V2 and where a plan stands in it (reference §B.2).

Every phase has an *active* value (``ISODownloading``) and a *completed* value
(``ISODownloaded``) for ``status.currentPhase``, an Event name (``ISODownload``) and the
role/tag that runs it (``iso_download``). :func:`relation` answers the one question each
phase module asks first: given the plan's ``currentPhase``, is my phase done, running, next
or not reached yet?

Pure functions; unit-tested in ``tests/unit/test_phases.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SUCCEEDED = "Succeeded"
FAILED = "Failed"
TERMINAL = (SUCCEEDED, FAILED)

Relation = Literal["done", "active", "next", "not_reached", "succeeded", "failed"]


@dataclass(frozen=True)
class Phase:
    """One row of the phase table."""

    name: str          # Event name: "Entering phase <name>" / "Completed phase <name>"
    active: str        # status.currentPhase while running
    completed: str     # status.currentPhase once done
    tag: str           # role and tag in playbooks/upgrade.yml
    can_fail: bool     # whether the toolkit ever sets Failed from this phase
    summary: str       # what the phase does, for check mode and docs

    @property
    def index(self) -> int:
        return PHASES.index(self)


PHASES: tuple[Phase, ...] = (
    Phase("Initialize", "Initializing", "Initialized", "preflight", True,
          "record the Version snapshot, previous version and single-node flag; run the "
          "pre-flight checks"),
    Phase("ISODownload", "ISODownloading", "ISODownloaded", "iso_download", True,
          "create VirtualMachineImage <plan>-iso from the Version's isoURL and wait until it "
          "is Imported"),
    Phase("RepoCreate", "RepoCreating", "RepoCreated", "repo_create", False,
          "deploy the upgrade repository (Deployment and Service <plan>-repo) serving the ISO"),
    Phase("MetadataPopulate", "MetadataPopulating", "MetadataPopulated", "metadata_populate",
          False, "read harvester-release.yaml from the repository into status.releaseMetadata"),
    Phase("ImagePreload", "ImagePreloading", "ImagePreloaded", "image_preload", True,
          "check upgrade eligibility, then pull the new release's images on every node "
          "(SUC Plan <plan>-image-preload)"),
    Phase("ClusterUpgrade", "ClusterUpgrading", "ClusterUpgraded", "cluster_upgrade", True,
          "set Rancher's upgrade strategy and run Job <plan>-cluster-upgrade "
          "(Rancher, Harvester charts, Kubernetes version)"),
    Phase("NodeUpgrade", "NodeUpgrading", "NodeUpgraded", "node_upgrade", True,
          "upgrade the nodes one by one through Rancher's drain hooks"),
    Phase("ImageCleanup", "CleaningUp", "CleanedUp", "image_cleanup", True,
          "remove the previous release's images no longer used (SUC Plan <plan>-image-cleanup)"),
)

FINALIZE_TAG = "finalize"
_BY_KEY: dict[str, Phase] = {}
for _p in PHASES:
    _BY_KEY[_p.name] = _BY_KEY[_p.tag] = _BY_KEY[_p.active] = _BY_KEY[_p.completed] = _p


def get(key: str) -> Phase:
    """Phase by Event name, tag, active or completed value (``KeyError`` if unknown)."""
    return _BY_KEY[key]


def position(current_phase: str | None) -> tuple[int, bool]:
    """``(index, completed)`` of a ``currentPhase`` value; ``(-1, True)`` for a new plan and
    ``(len(PHASES), True)`` for ``Succeeded``. ``Failed`` has no position (``ValueError``)."""
    if not current_phase:
        return -1, True
    if current_phase == SUCCEEDED:
        return len(PHASES), True
    if current_phase == FAILED:
        raise ValueError("a Failed plan has no position in the phase table")
    phase = _BY_KEY.get(current_phase)
    if phase is None:
        raise ValueError(f"unknown phase {current_phase!r}")
    return phase.index, current_phase == phase.completed


def relation(current_phase: str | None, phase: Phase) -> Relation:
    """Where ``phase`` stands for a plan whose ``status.currentPhase`` is ``current_phase``.

    ``done``: completed earlier; ``active``: entered and not completed (resume it);
    ``next``: the previous phase is completed (enter it); ``not_reached``: an earlier phase
    still has to run; ``succeeded``/``failed``: the plan is terminal.
    """
    if current_phase == SUCCEEDED:
        return "succeeded"
    if current_phase == FAILED:
        return "failed"
    idx, completed = position(current_phase)
    if idx > phase.index or (idx == phase.index and completed):
        return "done"
    if idx == phase.index:
        return "active"
    if idx == phase.index - 1 and completed:
        return "next"
    return "not_reached"


def previous(phase: Phase) -> Phase | None:
    return PHASES[phase.index - 1] if phase.index > 0 else None


def following(phase: Phase) -> Phase | None:
    return PHASES[phase.index + 1] if phase.index + 1 < len(PHASES) else None


def next_to_run(current_phase: str | None) -> Phase | None:
    """The phase a plan at ``current_phase`` runs next (``None`` when all are done)."""
    for phase in PHASES:
        if relation(current_phase, phase) in ("active", "next"):
            return phase
    return None


def finalize_relation(current_phase: str | None) -> Relation:
    """Finalize runs after ``CleanedUp`` (and, on request, on a ``Failed`` plan)."""
    if current_phase in TERMINAL:
        return "succeeded" if current_phase == SUCCEEDED else "failed"
    return "next" if current_phase == PHASES[-1].completed else "not_reached"
