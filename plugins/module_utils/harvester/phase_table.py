"""The phase actions of every pipeline phase, by phase name: what each phase module runs
(:func:`run`), and what the call of the phase before starts when the playbook asks for it
(the ``then`` option, :func:`pipeline.start_chain`; NodeUpgrade's entry follows
ClusterUpgrade's completion, ImageCleanup's NodeUpgrade's completion). One table, so a phase
started by the call before it is the same code as its own module's."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    cycle_kube,
    node_head_start,
    node_phase,
    phase_cluster_upgrade,
    phase_image_cleanup,
    phase_image_preload,
    phase_iso_download,
    phase_metadata,
    phase_repo,
    phases,
    pipeline,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
)

PhaseActions = pipeline.PhaseActions


def _enter_node_upgrade(ctx: pipeline.Context) -> pipeline.Step:
    """NodeUpgrade entered by the call before (ClusterUpgrade's, ``then``): PreRun (the
    settings held for the roll), NodeUpgrading, Rancher's upgrade started (node_phase.
    enter_phase, the same as node_gate ``step=enter``); the nodes are the node play's (its
    entry reads the inventory: not read here).

    With ``head_start`` (the playbook's condition for node_gate's, passed in the ``then``
    entry with ``head_start_wait``, ``head_start_finish`` and ``play``): then the first
    node's head start too (node_head_start.enter_with_head_start, as node_gate's), both
    through a :class:`cycle_kube.CycleKube` on the call's connection whose informers serve
    their reads as they would node_gate's (cycle_kube.informed_beside): those of the sets
    the entry reads start with its reads, and with them (a multi-node cluster, by the
    plan's ``singleNode``) the first node's VMIs and the KubeVirt CR are read ahead
    (node_head_start.prepare); the others once the phase is entered (listed beside the
    entry, they would delay Rancher's upgrade as much as they gain after it). The entry's
    record of Rancher's upgrade goes with the head start's first write, its Events after
    the first migrations (node_head_start.enter_with_head_start). node_gate ``step=enter``
    then finds the head start done in the plan's node states and returns at once. A run
    stopped in between: node_gate's head start does what is left, as on any resume."""
    p = ctx.params
    if not p.get("head_start"):
        res = node_phase.enter_phase(ctx.kube, ctx.writer, fresh=True, light=True)
        ctx.actions.extend(res.get("settings") or [])
        return pipeline.Step("pending", _NODES_GO_ON)
    with cycle_kube.informed_beside(ctx.kube, ctx.writer) as kube:
        if not ctx.writer.status.get("singleNode"):   # (Initialize recorded it)
            # its facts are the entry's own first reads (nodes, machines, Secrets)
            node_head_start.prepare(kube, ctx.writer, "", list(p.get("play") or []))
        res = node_head_start.enter_with_head_start(
            kube, ctx.writer, list(p.get("play") or []), float(p["head_start_wait"]),
            float(p["head_start_finish"]), entered=lambda: kube.prefetch(wait=False),
            fresh=True, light=True, hold_record=True)
    ctx.actions.extend(res.get("settings") or [])
    facts: dict[str, Any] = {}
    if "head_start" in res:
        facts["head_start"] = res["head_start"]
        ctx.did("head start: " + node_head_start.head_start_text(res["head_start"]))
    return pipeline.Step("pending", _NODES_GO_ON, facts)


_NODES_GO_ON = "NodeUpgrading: Rancher upgrades the nodes; the node play goes on"
# NodeUpgrade's then options: node_gate step=enter's of the same names and defaults
_HEAD_START_DEFAULTS = {k: v["default"] for k, v in node_head_start.HEAD_START_OPTIONS.items()}


def _node_upgrade_options(options: dict[str, Any]) -> dict[str, Any]:
    """NodeUpgrade's ``then`` options checked: ``timeout`` and the first node's head start
    (:data:`_HEAD_START_DEFAULTS`); anything else is refused (ValueError/TypeError)."""
    unknown = sorted(set(options) - {"timeout", *_HEAD_START_DEFAULTS})
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}")
    out = {**_HEAD_START_DEFAULTS, **options}
    out["head_start"] = boolean(out["head_start"], strict=True)
    for key in ("head_start_wait", "head_start_finish"):
        value = out[key]
        if isinstance(value, bool) or int(value) < 0 or int(value) != float(value):
            raise ValueError(f"{key} must be a whole number of seconds >= 0, not {value!r}")
        out[key] = int(value)
    play = out["play"]
    if not isinstance(play, (list, tuple)) or not all(isinstance(n, str) for n in play):
        raise ValueError(f"play must be a list of node names, not {play!r}")
    out["play"] = list(play)
    return out


TABLE: dict[str, PhaseActions] = {
    # verify_reads_only: the verification of a phase found done only reads (RepoCreate's
    # creates the repository again when it is gone)
    "ISODownload": PhaseActions(phase_iso_download.iso_download, phase_iso_download.verify_iso,
                                phase_iso_download.entry, verify_reads_only=True),
    "RepoCreate": PhaseActions(phase_repo.repo_create, phase_repo.verify_repo,
                               phase_repo.entry),
    "MetadataPopulate": PhaseActions(phase_metadata.metadata_populate,
                                     phase_metadata.verify_metadata, verify_reads_only=True),
    "ImagePreload": PhaseActions(phase_image_preload.image_preload,
                                 phase_image_preload.verify_suc(c.COMPONENT_IMAGE_PRELOAD),
                                 phase_image_preload.entry, verify_reads_only=True),
    "ClusterUpgrade": PhaseActions(phase_cluster_upgrade.cluster_upgrade,
                                   phase_cluster_upgrade.verify_cluster,
                                   phase_cluster_upgrade.entry, verify_reads_only=True),
    # NodeUpgrade's entry, as node_gate step=enter makes it (the node play's first task,
    # which then finds it entered and starts the first node's evacuation)
    "NodeUpgrade": PhaseActions(_enter_node_upgrade, enters=True,
                                options=_node_upgrade_options),
    # started by NodeUpgrade's completion (node_cycle on the play's last node, node_gate
    # step=finish) in a whole run
    "ImageCleanup": PhaseActions(phase_image_cleanup.image_cleanup),
}


def finish_node_upgrade(kube: Any, writer: Any, timeout: float,
                        chain: list[tuple[phases.Phase, dict[str, Any]]]) -> dict[str, Any]:
    """NodeUpgrade's completion (node_phase.finish_phase) and, once it is complete, the
    phases ``chain`` starts after it (pipeline.start_chain): for node_gate ``step=finish``
    and the play's last node's cycle. A chained phase that fails fails the plan."""
    res = node_phase.finish_phase(kube, writer, timeout)
    if res["phase"] == "NodeUpgraded" and chain and not kube.check_mode:
        try:
            res["started"] = pipeline.start_chain(kube, writer, {"timeout": timeout}, chain,
                                                  TABLE)
        except pipeline.PhaseFailed as exc:
            writer.fail(str(exc))
            raise NodeLoopError(str(exc)) from exc
    return res


def run(module: Any, name: str) -> None:
    """The body of phase module ``name`` (exits through ``exit_json``/``fail_json``)."""
    fns = TABLE[name]
    pipeline.run_phase(module, phases.get(name), fns.act, fns.verify, entry=fns.entry,
                       table=TABLE, verify_reads_only=fns.verify_reads_only)
