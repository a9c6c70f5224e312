"""Entering and leaving the NodeUpgrade phase (toolkit ``phase_node_upgrade.go``: PreRun and
PostRun), and handing the node roll to Rancher.

:func:`check_phase` says whether the plan is ready for the node steps; :func:`enter_phase`
sets NodeUpgrading (nodes start at ImagePreloaded, the roll's settings are held) and patches
Rancher's cluster (:func:`start_rancher_upgrade`); :func:`finish_phase` waits for Rancher to
settle and completes the phase. The phase machine itself belongs to ``upgrade_plan``
(:mod:`phases`, :mod:`plan_status`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_order as no
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import node_settings
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.node_facts import (
    cluster_facts,
    inventory,
    is_single_node,
    release,
    secret_ann,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source,
    WaitTimeout,
)

BEFORE_NODES = ("Initializing", "Initialized", "ISODownloading", "ISODownloaded",
                "RepoCreating", "RepoCreated", "MetadataPopulating", "MetadataPopulated",
                "ImagePreloading", "ImagePreloaded", "ClusterUpgrading")
AFTER_NODES = ("NodeUpgraded", "CleaningUp", "CleanedUp", "Succeeded")


def check_phase(plan: dict[str, Any]) -> str:
    phase = (plan.get("status") or {}).get("currentPhase") or ""
    if phase in BEFORE_NODES or not phase:
        raise NodeLoopError(
            f"UpgradePlan {plan['metadata']['name']} is in phase {phase or '(none)'}; the node "
            "upgrade needs ClusterUpgraded (run the earlier phases first)")
    if phase == "Failed":
        msg = next((c.get("message") for c in (plan.get("status") or {}).get("conditions") or []
                    if c.get("type") == "Progressing"), "")
        raise NodeLoopError(f"UpgradePlan {plan['metadata']['name']} has Failed: {msg}")
    return phase


def all_nodes_done(kube: Kube, writer: PlanWriter, seen: dict[str, Any] | None = None
                   ) -> tuple[bool, list[str]]:
    """Whether every node is done by the plan as the writer holds it (the facts without
    the VMIs and the server version: neither decides it). ``seen``: as for
    :func:`cluster_facts`."""
    facts = cluster_facts(kube, writer.plan, light=True, seen=seen)
    pending = [f["name"] for f in facts if writer.node_state(f["name"]) not in no.DONE_STATES]
    return not pending, pending


def rancher_settled(secrets: Iterable[dict[str, Any]]) -> bool:
    """upgrade-toolkit's NodeUpgrade PostRun condition: no machine-plan secret still has
    post-drain."""
    return not any(no.POST_DRAIN in secret_ann(s) for s in secrets)


def wait_rancher_settled(kube: Kube, timeout: float) -> None:
    """Wait for :func:`rancher_settled`."""
    def pred(view: dict[str, dict[str, dict[str, Any]]]) -> bool:
        return rancher_settled(view["Secret"].values())
    kube.wait([Source("v1", "Secret", c.FLEET_NS)], pred, timeout=timeout,
              what="Rancher to complete node upgrades (no machine-plan secret with post-drain)",
              describe=lambda v: ", ".join(k for k, s in v["Secret"].items()
                                           if no.POST_DRAIN in secret_ann(s)))


def _phase(kube: Kube, writer: PlanWriter, completed: bool,
           statuses: dict[str, Any] | None = None, reread: bool = True) -> bool:
    """Enter/complete NodeUpgrade through upgrade_plan's transitions (plan_status)."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        phases,
        plan_status,
    )
    phase = phases.get("NodeUpgrade")
    gen = (writer.plan.get("metadata") or {}).get("generation")

    def mutate(st: dict[str, Any]) -> list[Any]:
        if statuses:
            merged = dict(st.get("nodeUpgradeStatuses") or {})
            for n, v in statuses.items():
                merged.setdefault(n, v)
            st["nodeUpgradeStatuses"] = merged
        if completed:
            return plan_status.complete_phase(st, phase, plan_status.now_iso(), gen)
        if st.get("currentPhase") == phase.active:
            return []
        return plan_status.start_phase(st, phase, plan_status.now_iso(), gen)

    return writer.update_status(mutate, reread=reread)


RANCHER_CLUSTER_API = "provisioning.cattle.io/v1"


def _rke2_version(v: Any) -> str:
    """``v1.33.3-rke2r1`` and ``v1.33.3+rke2r1`` name the same release."""
    s = str(v or "").strip()
    return s.replace("-rke2", "+rke2", 1) if "+" not in s else s


def start_rancher_upgrade(kube: Kube, writer: PlanWriter, reread: bool = True,
                          hold: bool = False) -> dict[str, Any]:
    """Hand the node roll to Rancher (reference §C.1; seed 000 ``upgradeKubernetes``): one
    merge patch of ``clusters.provisioning.cattle.io fleet-local/local`` with
    ``spec.kubernetesVersion`` = ``releaseMetadata.kubernetes``,
    ``spec.rkeConfig.provisionGeneration`` + 1 and the ``upgradeStrategy`` with our drain
    hooks, recorded in ``status.provisionGeneration``. Once: a plan that recorded it, a
    single-node plan (its job patches the version itself) or a cluster that already carries
    both the version and our strategy (a run stopped between the patch and the status write)
    is not patched again. ``hold``: the status write goes with the writer's next one
    (:meth:`PlanWriter.hold`; the first node's head start: after its first migrations), the
    caller flushing it at the latest when it returns; a run stopped before finds the
    cluster patched and records it then, as above."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import manifests

    plan = writer.plan
    st = plan.get("status") or {}
    if st.get("singleNode") or st.get("provisionGeneration") is not None:
        return {"changed": False}
    target = release(plan)["kubernetes"]
    cluster = kube.get(RANCHER_CLUSTER_API, "Cluster", "local", c.FLEET_NS)
    if cluster is None:
        raise NodeLoopError(f"clusters.provisioning.cattle.io {c.FLEET_NS}/local not found")
    spec = cluster.get("spec") or {}
    rke = spec.get("rkeConfig") or {}
    generation = int(rke.get("provisionGeneration") or 0)
    strategy = manifests.upgrade_strategy()
    done = _rke2_version(spec.get("kubernetesVersion")) == _rke2_version(target) and \
        rke.get("upgradeStrategy") == strategy
    out = {"changed": True, "kubernetesVersion": target,
           "provisionGeneration": generation if done else generation + 1}
    if kube.check_mode:
        return out
    if not done:
        kube.patch(RANCHER_CLUSTER_API, "Cluster", "local",
                   {"spec": {"kubernetesVersion": target,
                             "rkeConfig": {"provisionGeneration": generation + 1,
                                           "upgradeStrategy": strategy}}}, c.FLEET_NS)
        writer.event("KubernetesUpgradeStarted",
                     f"Rancher cluster {c.FLEET_NS}/local: kubernetesVersion {target}, "
                     f"provisionGeneration {generation + 1}, drain hooks "
                     f"{no.DEFAULT_PRE_HOOK}/{no.DEFAULT_POST_HOOK}")

    def record(status: dict[str, Any]) -> list[Any]:
        status["provisionGeneration"] = out["provisionGeneration"]
        return []

    if hold:
        writer.hold(record)
    else:
        writer.update_status(record, reread=reread)
    return out


def enter_phase(kube: Kube, writer: PlanWriter, fresh: bool = False, held: bool = False,
                light: bool = False, hold_record: bool = False) -> dict[str, Any]:
    """Check the plan reached ClusterUpgraded (or is already in/after NodeUpgrading) and set
    NodeUpgrading; nodes without a state start at ImagePreloaded (toolkit's PreRun). Returns
    the nodes in Rancher's order too (:func:`inventory`), read before the write. ``fresh``:
    the writer holds the plan as this call has just written it (ClusterUpgrade's completion,
    phase_table) or read it (node_gate, finding the head start done): it is not read again
    (a conflict on the write re-reads it). ``held``: the
    run's previous call entered the phase moments ago (``then``); when the plan records that
    entry complete (:func:`_prerun_done`), the settings it held are not read again.
    ``light``: for a caller that does not use the inventory (the entry started by
    ClusterUpgrade's call): the facts without the VMIs and the ``server-version`` Setting
    (:func:`cluster_facts`), which the inventory alone shows. ``hold_record``: Rancher's
    upgrade recorded on the plan with the writer's next write (:func:`start_rancher_upgrade`
    ``hold``)."""
    plan = writer.plan if fresh else writer.refresh()
    phase = check_phase(plan)
    facts = cluster_facts(kube, plan, light=light)
    if phase in AFTER_NODES:
        return {"changed": False, "phase": phase, **inventory(facts)}
    statuses = dict((plan.get("status") or {}).get("nodeUpgradeStatuses") or {})
    missing = [f["name"] for f in facts if f["name"] not in statuses]
    for n in missing:
        statuses[n] = {"state": "ImagePreloaded"}
    # PreRun: Longhorn/descheduler settings held for the roll, their originals saved on the
    # plan before any change; again on a resumed run (idempotent: keeps the saved originals),
    # not right after the run's previous call made the whole entry
    if held and not missing and not kube.check_mode and _prerun_done(plan, facts):
        prerun: dict[str, Any] = {"changed": False, "actions": []}
    else:
        prerun = node_settings.hold(kube, plan, single_node=is_single_node(facts),
                                    check_mode=bool(kube.check_mode))
    if fresh and isinstance(prerun.get("plan"), dict):   # as patched: the next write is on it
        writer.plan = writer.recorder.plan = prerun["plan"]
    changed = prerun["changed"] and not kube.check_mode
    if phase != "NodeUpgrading" or missing:
        changed = _phase(kube, writer, False, statuses if missing else None,
                         reread=not fresh) or changed
    if not is_single_node(facts):
        rancher = start_rancher_upgrade(kube, writer, reread=not fresh, hold=hold_record)
        changed |= bool(rancher["changed"])
    return {"changed": changed, "phase": "NodeUpgrading", "settings": prerun["actions"],
            **inventory(facts)}


def _prerun_done(plan: dict[str, Any], facts: list[dict[str, Any]]) -> bool:
    """The plan records NodeUpgrade's whole entry: NodeUpgrading, written after the PreRun's
    settings were held (a failed hold raises before it), and Rancher's upgrade started after
    it (``provisionGeneration``), or a single node (no settings held, no Rancher patch)."""
    st = plan.get("status") or {}
    return st.get("currentPhase") == "NodeUpgrading" and (
        st.get("provisionGeneration") is not None or is_single_node(facts))


def finish_phase(kube: Kube, writer: PlanWriter, timeout: float) -> dict[str, Any]:
    """All nodes done: wait for Rancher to settle, then NodeUpgraded (PhaseCompleted). The
    plan is the one the module has just looked up (the writer's): the completion itself is
    written on the plan read again after the wait."""
    plan = writer.plan
    phase = check_phase(plan)
    if phase in AFTER_NODES:
        return {"changed": False, "phase": phase, "pending": []}
    seen: dict[str, Any] = {}
    done, pending = all_nodes_done(kube, writer, seen)
    if not done:
        return {"changed": False, "phase": phase, "pending": pending}
    if kube.check_mode:
        return {"changed": True, "phase": "NodeUpgraded", "pending": []}
    single = bool((plan.get("status") or {}).get("singleNode"))
    # the Secrets the facts have just read answer the wait when Rancher is settled already;
    # then the plan is as it was looked up moments ago too (a conflict re-reads it)
    waited = not single and not rancher_settled(seen.get("secrets") or [])
    if waited:
        try:
            wait_rancher_settled(kube, timeout)
        except WaitTimeout as exc:
            writer.fail_plan(str(exc))
            raise
    changed = _phase(kube, writer, True, reread=waited)
    return {"changed": changed, "phase": "NodeUpgraded", "pending": []}
