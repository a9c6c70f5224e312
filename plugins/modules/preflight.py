#!/usr/bin/python
# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Ansible module harvester.upgrade.preflight: phase Initialize and the pre-flight checks."""

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight
short_description: Pre-flight checks of a Harvester upgrade (phase Initialize)
version_added: 0.1.0
description:
  - Runs every pre-flight check of Harvester Upgrade V2 and reports each by name with the
    objects involved. Webhook checks - no concurrent upgrade, no cleanup in progress, Version
    exists, ISO image exists, nodes Ready and schedulable, Rancher cluster ready, machines
    Running, node/machine consistency, Longhorn volumes healthy, single-replica volumes,
    VM backups, backup schedules, non-migratable VMs, pending migrations, ManagedCharts,
    Fleet bundles, addons, pauseNodes. Controller checks - disk space after loading the new
    images vs the kubelet image GC threshold, API server certificate expiry. Version check -
    the target is newer and upgradable from the running release. Coexistence checks (never
    skipped by the skip-webhook annotation) - no Harvester built-in upgrade in progress, no
    Upgrade Manager installed, and on a single-node cluster no drain hooks declared in the
    Rancher cluster's C(upgradeStrategy) (Rancher would cordon the node and wait for them;
    nothing answers them on the single-node path).
  - Skip annotations are honoured in both spellings
    (C(management.harvesterhci.io/skip-webhook) or C(harvesterhci.io/skipWebhook),
    C(skip-single-replica-detached-vol), C(skip-garbage-collection-threshold-check),
    C(min-certs-expiration-in-day)).
  - Version check - O(force) (C(spec.force)) lifts its rules except a downgrade and a target
    whose C(minUpgradableVersion) is above the running release, which need the plan's
    annotations C(harvester-upgrade.harvesterhci.io/allow-downgrade) and
    C(harvester-upgrade.harvesterhci.io/allow-version-skip) (O(allow_downgrade),
    O(allow_version_skip) in a what-if). Check C(iso_verified) fails when the Version's ISO
    would be downloaded unverified (no SHA-512 C(isoChecksum)) unless annotation
    C(harvester-upgrade.harvesterhci.io/allow-unverified-iso) (O(allow_unverified_iso)).
  - A check that cannot read what it checks fails, naming the kind (for example Longhorn's
    C(Volume) CRD missing fails C(volumes_healthy)), never passes on no data.
  - With a plan in C(Initializing), records C(status.version), C(previousVersion),
    C(singleNode), then completes Initialize (C(Initialized)) or sets the plan C(Failed)
    with the failed checks. With a plan past Initialize, the checks are re-run and only
    reported.
  - Without any plan (what-if), the checks run against O(version)/O(image) and nothing is
    created; the task fails when a check fails.
  - With O(ensure_plan), the task first creates or adopts the UpgradePlan as
    M(harvester.upgrade.upgrade_plan) C(action=ensure) does (the collection's action plugin runs
    that module in the same task), then runs the checks on that plan. When ensure fails or
    finds the cluster up to date, no check runs.
  - With O(then) (C(iso_download) first), the call that completes Initialize enters the
    phases named and creates their first objects as their own modules would (ISODownload's
    C(VirtualMachineImage)), leaving their waits to their own tasks; RV(started) says what it
    started. Ignored in check mode, in a what-if and when Initialize was completed before.
options:
  version:
    description: Target Version for a what-if run (default the newest one).
    type: str
  image:
    description: Pre-uploaded ISO image for a what-if run.
    type: str
  restore_vm:
    description: What-if value of C(spec.restoreVM) (non-migratable VMs are then allowed).
    type: bool
    default: false
  pause_nodes:
    description: What-if value of C(spec.nodeUpgradeOption.pauseNodes).
    type: list
    elements: str
    default: []
  annotations:
    description: Extra skip/override annotations, as if set on the plan.
    type: dict
    default: {}
  allow_downgrade:
    description: What-if value of the plan's allow-downgrade switch (a plan's own is read
      from its annotations).
    type: bool
    default: false
  allow_version_skip:
    description: What-if value of the plan's allow-version-skip switch.
    type: bool
    default: false
  allow_unverified_iso:
    description: What-if value of the plan's allow-unverified-iso switch.
    type: bool
    default: false
  skip_checks:
    description: Names of checks to skip (see RV(checks)).
    type: list
    elements: str
    default: []
  ensure_plan:
    description:
      - Options of M(harvester.upgrade.upgrade_plan) (without C(action)) to create or adopt the
        UpgradePlan with before the checks, in this task (the connection options are this
        task's). Its result is RV(upgrade_plan); the checks run on the plan it names. Handled
        by the action plugin; omitted, the checks run on O(plan) or the active plan (or a
        what-if without one).
    type: dict
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
  - harvester.upgrade.phase
attributes:
  check_mode:
    description: Can run in check mode; nothing in the cluster is changed and the result
      reports what would be done.
    support: full
author:
  - harvester-upgrade developers (@harvester-upgrade)
"""

EXAMPLES = r"""
- name: What-if, would an upgrade to v1.6.0 pass its checks (VMs that cannot migrate restarted)?
  harvester.upgrade.preflight:
    version: v1.6.0
    restore_vm: true

- name: Initialize the active plan
  harvester.upgrade.preflight:
  register: checks

- name: Create or adopt the plan for v1.6.0, then initialize it (one task)
  harvester.upgrade.preflight:
    ensure_plan:
      version: v1.6.0
      restore_vm: true
    version: v1.6.0
    restore_vm: true
"""

RETURN = r"""
checks:
  description: One entry per check.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Check name.
      type: str
    status:
      description: C(passed), C(failed) or C(skipped).
      type: str
    message:
      description: What was found.
      type: str
    objects:
      description: Objects involved.
      type: list
      elements: str
    family:
      description: C(webhook), C(controller), C(version), C(coexistence), C(input) or
        C(info) (informational, never fails).
      type: str
failed_checks:
  description: Names of the failed checks.
  returned: always
  type: list
  elements: str
plan:
  description: Plan name (null for a what-if run).
  returned: always
  type: str
status:
  description: C(completed), C(verified), C(what_if) or C(terminal); with O(ensure_plan) also
    C(up_to_date) (no newer Version, nothing created, no check run).
  returned: always
  type: str
started:
  description: The phases this call started after Initialize (O(then)), each with C(phase),
    C(status) (C(started) or C(completed)) and C(actions).
  returned: when O(then) started a phase
  type: list
  elements: dict
upgrade_plan:
  description: The result of M(harvester.upgrade.upgrade_plan) C(action=ensure) (C(plan),
    C(created), C(up_to_date), C(resumed), C(version) in check mode, C(msg), ...).
  returned: with O(ensure_plan)
  type: dict
"""

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    args,
    lock,
    module_factory,
    phase_initialize,
    phase_table,
    phases,
    pipeline,
    plan_status,
    plan_writer,
    preflight_checks,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
)

INITIALIZE = phases.PHASES[0]


def main() -> None:
    module = module_factory.new_module(
        argument_spec=args.spec(
            args.PHASE, version={"type": "str"}, image={"type": "str"},
            restore_vm={"type": "bool", "default": False},
            pause_nodes={"type": "list", "elements": "str", "default": []},
            annotations={"type": "dict", "default": {}},
            allow_downgrade={"type": "bool", "default": False},
            allow_version_skip={"type": "bool", "default": False},
            allow_unverified_iso={"type": "bool", "default": False},
            skip_checks={"type": "list", "elements": "str", "default": []},
            ensure_plan={"type": "dict"}),
        supports_check_mode=True)
    p = module.params
    if p.get("ensure_plan") is not None:   # the action plugin runs it and never passes it
        module.fail_json(msg="ensure_plan is run by the action plugin harvester.upgrade."
                         "preflight; run this module through a task")
    out: dict[str, Any] = {"changed": False, "phase": INITIALIZE.name, "plan": None,
                           "checks": [], "failed_checks": [], "actions": [], "events": []}
    try:   # a bad then is refused before anything is read or written
        chain = pipeline.chain_items(p, INITIALIZE, phase_table.TABLE)
    except ValueError as exc:
        module.fail_json(msg=str(exc), **out)
    try:
        kube = Kube.from_module(module)
        plan = plan_writer.resolve(kube, p.get("plan"))
        if plan is None:
            facts = phase_initialize.gather_facts(kube, None, p)
            results = preflight_checks.run_all(facts, p["skip_checks"])
            out.update(checks=[r.as_dict() for r in results], status="what_if",
                       failed_checks=[r.name for r in results if r.failed],
                       version=facts.version_name)
            summary = preflight_checks.summary(results)
            if out["failed_checks"]:
                module.fail_json(msg=summary, **out)
            module.exit_json(msg=f"what-if ({facts.version_name}): {summary}", **out)
        writer = plan_writer.PlanWriter(kube, plan, module.check_mode)
        out["plan"] = writer.name
        rel = phases.relation(writer.status.get("currentPhase"), INITIALIZE)
        seen: dict[str, Any] = {}   # what the fields read: the facts do not read it again
        if rel in ("next", "active"):
            lock.hold(kube, module)   # fails at once if another run holds the lock
            if rel == "next":
                writer.update(lambda s: plan_status.initialize(s, writer.now(),
                                                               writer.generation))
            fields = phase_initialize.initialize_fields(kube, writer.plan, seen)
            # written with the outcome of the checks below (they only read)
            writer.set_fields(fields, hold=True)
        facts = phase_initialize.gather_facts(kube, writer.plan, p, seen)
        results = preflight_checks.run_all(facts, p["skip_checks"])
        summary = preflight_checks.summary(results)
        out.update(checks=[r.as_dict() for r in results],
                   failed_checks=[r.name for r in results if r.failed])
        if rel not in ("next", "active"):
            out.update(status="verified" if rel == "done" else "terminal",
                       current_phase=writer.status.get("currentPhase"), proceed=rel == "done")
            module.exit_json(msg=f"Initialize already completed; re-check: {summary}", **out)
        if out["failed_checks"]:
            writer.fail(summary)
            out.update(events=writer.recorder.emitted, changed=True,
                       current_phase=writer.status.get("currentPhase"))
            module.fail_json(msg=summary, **out)
        writer.update(lambda s: plan_status.complete_phase(s, INITIALIZE, writer.now(),
                                                           writer.generation))
        if chain and not module.check_mode:
            # ISODownload's image created by this call, as soon as the plan allows it
            # (pipeline.start_chain; its own task then resumes the phase)
            out["started"] = _start_chain(module, kube, writer, out, chain)
        out.update(changed=writer.changed, status="completed", proceed=True,
                   events=writer.recorder.emitted,
                   current_phase=writer.status.get("currentPhase"))
        module.exit_json(msg=summary, **out)
    except (ApiError, plan_writer.PlanError) as exc:
        module.fail_json(msg=f"Initialize: {exc}", **out)


def _start_chain(module: Any, kube: Kube, writer: plan_writer.PlanWriter,
                 out: dict[str, Any], chain: list[tuple[phases.Phase, dict[str, Any]]]
                 ) -> list[dict[str, Any]]:
    """The phases of ``then`` started after Initialize completed, as a phase module's call
    starts them (pipeline.run_phase): one that fails fails the plan; an API error leaves the
    plan in the phase it reached (its own task resumes it), marked degraded."""
    try:
        return pipeline.start_chain(kube, writer, module.params, chain, phase_table.TABLE)
    except pipeline.PhaseFailed as exc:
        writer.fail(str(exc))
        out.update(changed=True, events=writer.recorder.emitted,
                   current_phase=writer.status.get("currentPhase"))
        module.fail_json(msg=str(exc), **out)
    except (ApiError, plan_writer.PlanError) as exc:
        try:
            writer.degrade(str(exc))
        except (ApiError, plan_writer.PlanError):
            pass
        out.update(changed=True, events=writer.recorder.emitted,
                   current_phase=writer.status.get("currentPhase"))
        module.fail_json(msg=f"Initialize: {exc} (the plan keeps its phase; re-run to resume)",
                         **out)
    raise AssertionError("unreachable")   # fail_json does not return


if __name__ == "__main__":
    main()
