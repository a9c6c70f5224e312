#!/usr/bin/python
# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Ansible module harvester.upgrade.upgrade_plan: create, adopt, read and move an UpgradePlan."""

from __future__ import annotations

DOCUMENTATION = r"""
module: upgrade_plan
short_description: Create, adopt, read and update the UpgradePlan of a Harvester upgrade
version_added: 0.1.0
description:
  - C(action=ensure) first checks the cluster is a Harvester cluster (Setting
    C(server-version) served and set) and, for a new plan, validates the request (O(version)
    exists and is newer than the running release and allowed by its
    C(minUpgradableVersion) unless O(force); not both O(version) and O(image); O(image)
    exists; O(pause_nodes) are valid names of existing nodes); a bad request fails naming
    the field and writes nothing (no CRD installed, no plan created).
  - C(action=ensure) adopts the active UpgradePlan (C(Progressing=True)) or creates one
    (C(generateName hvst-upgrade-) unless O(name)), installing the UpgradePlan CRD when the
    cluster does not serve it. A second plan is refused with the active one's name. Without
    O(version)/O(image) the target is the newest C(Version) in C(harvester-system) newer
    than Setting C(server-version); if there is none the cluster is reported up to date.
    A new plan enters C(Initializing) at once (Progressing, Degraded, Available conditions).
  - C(action=ensure) continues a plan that failed mid-roll (see O(resume_failed)). When the
    newest plan ended C(Failed) (not C(Aborted)) in C(NodeUpgrading), it is taken back to
    C(NodeUpgrading) (C(Progressing=True), Event C(UpgradeResumed)); each failed node goes back
    to the state before the step that failed (C(PreDrainFailed) to C(ImagePreloaded) when
    Rancher never asked to drain it, else C(PreDraining); C(PostDrainFailed) to
    C(PreDrained), or C(PostDrained) when only Rancher's uncordon was awaited) and its node
    Jobs that did not complete are deleted so they run again.
    Nodes already upgraded are left as they are. A request for another O(version) or O(name)
    is refused, naming the failed plan.
  - C(action=ensure) never reports a part-way upgraded cluster as up to date. With no newer
    Version it fails, changing nothing, when the newest plan to the running release did not
    succeed, a node's OS or kubelet is not that release's, or Rancher's cluster
    C(fleet-local/local) is not C(Updated).
  - C(action=ensure) also finishes the deletion of plans deleted with C(kubectl delete) (held
    C(Terminating) by the finalizer C(harvester-upgrade.harvesterhci.io/cleanup)) - it cleans up as
    upgrade-toolkit's finalizer does (the upgrade resources, the VMs the collection shut down
    started again, its drain taint removed), removes the finalizer (the garbage collector
    deletes what the plan owns) and reports them in RV(deleted). A plan deleted mid-upgrade
    (ClusterUpgrading/NodeUpgrading) stops the run naming it, as the toolkit refuses it.
  - A new plan records the cluster it belongs to (annotation
    C(harvester-upgrade.harvesterhci.io/cluster-uid), the uid of Namespace C(kube-system));
    every action on a plan recorded on another cluster fails, naming both, and writes nothing.
  - C(action=read) returns a plan (O(name) or the active one) and where it stands.
  - C(action=transition) enters (O(to=active)) or completes (O(to=completed)) a phase,
    with the toolkit's Events; C(action=fail) sets the plan C(Failed) with O(condition_message);
    C(action=set_fields) sets top-level status fields and per-node states (forward-only).
  - Status writes are conflict-safe (re-read and re-apply on 409).
options:
  action:
    description: What to do.
    type: str
    choices: [ensure, read, transition, fail, set_fields]
    default: ensure
  name:
    description:
      - Plan name. For C(ensure), the name of a new plan (default C(generateName)); an
        active plan with another name is refused. For the other actions, default is the
        active plan.
    type: str
  version:
    description: Target Version (name of a Version object). Default is the newest one.
    type: str
  image:
    description: Pre-uploaded VirtualMachineImage (C(name) or C(namespace/name)) to use as ISO.
    type: str
  toolkit_tag:
    description: C(spec.upgrade), the upgrade-toolkit image tag (default the release's).
    type: str
  image_preload_concurrency:
    description:
      - C(spec.imagePreloadOption.concurrency); 0 or unset preloads all nodes at once,
        negative skips image preload.
    type: int
  pause_nodes:
    description: C(spec.nodeUpgradeOption.pauseNodes).
    type: list
    elements: str
    default: []
  restore_vm:
    description: C(spec.restoreVM), restart VMs shut down for a node's upgrade afterwards.
    type: bool
    default: false
  force:
    description:
      - C(spec.force), lift the version eligibility rules except two, which each have their
        own switch - a downgrade (O(allow_downgrade)) and a target whose
        C(minUpgradableVersion) is above the running release (O(allow_version_skip)).
    type: bool
    default: false
  allow_downgrade:
    description:
      - Allow a target older than the running release. Recorded on the new plan as annotation
        C(harvester-upgrade.harvesterhci.io/allow-downgrade), which the pre-flight check and
        ImagePreload's check read.
    type: bool
    default: false
  allow_version_skip:
    description:
      - Allow a target whose C(minUpgradableVersion) is above the running release (skipping a
        release the upgrade path requires). Recorded as annotation
        C(harvester-upgrade.harvesterhci.io/allow-version-skip).
    type: bool
    default: false
  allow_unverified_iso:
    description:
      - Allow a Version whose ISO cannot be verified (no SHA-512 C(isoChecksum)); without it
        such a request is refused. Recorded as annotation
        C(harvester-upgrade.harvesterhci.io/allow-unverified-iso), which the pre-flight check
        and ISODownload read.
    type: bool
    default: false
  annotations:
    description: Annotations of a new plan (skip/override annotations of the toolkit).
    type: dict
    default: {}
  resume_failed:
    description:
      - For C(ensure), continue the newest plan when it ended C(Failed) in C(NodeUpgrading)
        (after the operator fixed the cause). C(false) stops instead, naming the plan and
        its failure, and changes nothing.
    type: bool
    default: true
  install_crd:
    description: Install the UpgradePlan CRD when the cluster does not serve it.
    type: bool
    default: true
  phase:
    description: For C(transition), the phase (Event name like C(ISODownload) or tag).
    type: str
  to:
    description: For C(transition), enter the phase or mark it completed.
    type: str
    choices: [active, completed]
    default: active
  condition_message:
    description:
      - For C(fail), the failure message; for C(transition), the message of the Progressing
        condition.
    type: str
    default: ""
  fields:
    description: For C(set_fields), top-level status fields to set (null removes).
    type: dict
    default: {}
  node_states:
    description:
      - For C(set_fields), a mapping of node name to a state name, or to a dict with keys
        C(state), C(reason), C(message); a node never moves back to an earlier state.
    type: dict
    default: {}
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
attributes:
  check_mode:
    description: Can run in check mode; nothing in the cluster is changed and the result
      reports what would be done.
    support: full
author:
  - harvester-upgrade developers (@harvester-upgrade)
"""

EXAMPLES = r"""
- name: Create or adopt the plan for the newest available release
  harvester.upgrade.upgrade_plan:
    action: ensure
    restore_vm: true
  register: up

- name: Upgrade to a given release with a dev toolkit image
  harvester.upgrade.upgrade_plan:
    version: v1.6.0
    toolkit_tag: main-head

- name: Where does the active plan stand?
  harvester.upgrade.upgrade_plan:
    action: read

- name: Record node states (node loop)
  harvester.upgrade.upgrade_plan:
    action: set_fields
    node_states:
      node-1: PreDraining
"""

RETURN = r"""
plan:
  description: Name of the plan (null when none).
  returned: always
  type: str
  sample: hvst-upgrade-864fh
upgradeplan:
  description: The UpgradePlan object.
  returned: when a plan exists
  type: dict
created:
  description: Whether C(ensure) created the plan.
  returned: I(action=ensure)
  type: bool
up_to_date:
  description: C(ensure) found no newer Version and created nothing, or finished the
    deletion of plans deleted with C(kubectl delete) (see RV(deleted)); either way nothing
    else is to be done in this run.
  returned: I(action=ensure)
  type: bool
resumed:
  description: C(ensure) took a plan that had failed in C(NodeUpgrading) back to that phase.
  returned: I(action=ensure)
  type: bool
retried_nodes:
  description: Failed nodes set back for a retry, with the state each starts from.
  returned: when a plan was resumed
  type: dict
deleted_jobs:
  description: Node Jobs of the failed nodes that had not completed, deleted to run again.
  returned: when a plan was resumed
  type: list
  elements: str
deleted:
  description: Plans that had been deleted (C(Terminating), held by the collection's finalizer
    C(harvester-upgrade.harvesterhci.io/cleanup)) and that C(ensure) cleaned up as
    upgrade-toolkit's finalizer does, then let go.
  returned: when a deleted plan was found
  type: list
  elements: str
version:
  description: Target version of the plan.
  returned: when known
  type: str
current_phase:
  description: C(status.currentPhase).
  returned: when a plan exists
  type: str
next_phase:
  description: Tag of the phase the plan runs next (null when all are done).
  returned: when a plan exists
  type: str
active:
  description: Whether the plan is the active one (C(Progressing=True)).
  returned: when a plan exists
  type: bool
events:
  description: Events recorded.
  returned: always
  type: list
  elements: dict
"""

import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    args,
    crd,
    lock,
    manifests,
    module_factory,
    phases,
    plan_cleanup,
    plan_input,
    plan_resume,
    plan_status,
    plan_writer,
    versions,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
    NotServed,
)


def ensure_crd(kube: Kube, check_mode: bool) -> bool:
    """Install the UpgradePlan CRD if the cluster does not serve UpgradePlans."""
    if kube.served(c.PLAN_API_VERSION, c.PLAN_KIND):
        return False
    if check_mode:
        return True
    if kube.get(*c.CRD, c.PLAN_CRD_NAME) is None:
        kube.create(crd.definition())
    for _attempt in range(60):   # discovery catches up within seconds
        kube.invalidate(c.PLAN_API_VERSION)
        if kube.served(c.PLAN_API_VERSION, c.PLAN_KIND):
            return True
        time.sleep(0.5)
    raise ApiError(0, "CRDNotEstablished", f"CRD {c.PLAN_CRD_NAME} not served after 30s")


def describe(plan: dict[str, Any] | None) -> dict[str, Any]:
    if plan is None:
        return {"plan": None}
    current = (plan.get("status") or {}).get("currentPhase")
    nxt = phases.next_to_run(current) if current not in phases.TERMINAL else None
    return {"plan": plan["metadata"]["name"], "upgradeplan": plan, "current_phase": current,
            "next_phase": nxt.tag if nxt else None, "active": plan_status.is_active(plan),
            "version": (plan.get("spec") or {}).get("version")}


def uninitialized(plans: list[dict[str, Any]], version: str | None, image: str | None
                  ) -> dict[str, Any] | None:
    """The newest plan that has no phase yet (and asks for ``version``/``image`` if given)."""
    found = [x for x in plans
             if not (x.get("status") or {}).get("currentPhase")
             and not (x.get("metadata") or {}).get("deletionTimestamp")
             and (not version or (x.get("spec") or {}).get("version") == version)
             and (not image or (x.get("spec") or {}).get("image") == image)]
    found.sort(key=lambda x: str((x.get("metadata") or {}).get("creationTimestamp") or ""))
    return found[-1] if found else None


def finish_deleted(module: AnsibleModule, kube: Kube, deleted: list[dict[str, Any]],
                   result: dict[str, Any]) -> dict[str, Any]:
    """Plans deleted (``kubectl delete``) whose cleanup is owed: do what the toolkit's
    controller does on deletion (plan_cleanup), then stop this run; nothing new is created
    (a later run starts a new upgrade). A plan deleted mid cluster/node upgrade is refused as
    the toolkit refuses it."""
    for plan in deleted:
        refused = plan_cleanup.deletion_refused(plan)
        if refused:
            module.fail_json(msg=refused, plan=plan["metadata"]["name"])
    lock.hold(kube, module)
    actions: list[str] = []
    names = []
    for plan in deleted:
        names.append(plan["metadata"]["name"])
        actions += plan_cleanup.finish_deletion(kube, plan, check_mode=module.check_mode)
    return {**result, "plan": None, "up_to_date": True, "deleted": names, "changed": True,
            "actions": actions,
            "msg": (f"UpgradePlan {', '.join(names)} was deleted: cleaned up as upgrade-toolkit's "
                    f"finalizer does ({len(actions)} actions: {'; '.join(actions)}); nothing "
                    "else is done in this run, run again to start a new upgrade")}


def _stopped_message(plan: dict[str, Any]) -> str:
    name = plan["metadata"]["name"]
    return (f"UpgradePlan {name} to {plan_resume.plan_version(plan) or '?'} failed in "
            f"{plan_resume.failed_in(plan)}: {plan_status.failure_message(plan)}")


def resume_failed(module: AnsibleModule, kube: Kube, plan: dict[str, Any],
                  result: dict[str, Any]) -> dict[str, Any]:
    """The newest plan failed mid-roll: continue it (the operator fixed the cause), or stop
    naming it. Never a new plan: the cluster is part-way to the failed plan's release."""
    p = module.params
    name = plan["metadata"]["name"]
    have = plan_resume.plan_version(plan)
    stopped = _stopped_message(plan)
    other_name = bool(p.get("name")) and p["name"] != name
    other_version = bool(p.get("version")) and bool(have) and p["version"] != have
    if other_name or other_version:
        module.fail_json(msg=f"{stopped}. The cluster is part-way upgraded: continue that plan "
                         "(run again without upgrade_version/upgrade_plan_name) or abort it "
                         "(playbooks/abort.yml -e upgrade_abort_force=true) before another "
                         "upgrade", plan=name)
    if not p["resume_failed"]:
        module.fail_json(msg=f"{stopped}. Fix the cause, then run again with "
                         "upgrade_resume_failed=true (the default) to continue it", plan=name)
    resets = plan_resume.node_resets(plan.get("status") or {})
    jobs = plan_resume.stale_node_jobs(
        kube.list("batch/v1", "Job", c.UPGRADE_NS,
                  label_selector=f"{c.LABEL_PLAN}={name},"
                                 f"{c.LABEL_COMPONENT}={c.COMPONENT_NODE_UPGRADE}"),
        list(resets))
    job_names = [j["metadata"]["name"] for j in jobs]
    out = {**result, "resumed": True, "retried_nodes": resets, "deleted_jobs": job_names,
           "changed": True}
    if module.check_mode:
        return {**out, **describe(plan),
                "msg": f"would resume UpgradePlan {name} in NodeUpgrading ({stopped}); would "
                       f"retry {resets or 'no node'}, deleting Jobs {job_names or 'none'}"}
    lock.hold(kube, module)
    plan_cleanup.add_finalizer(kube, plan, False)
    for job in job_names:   # a failed or hung Job of the failed step: its step runs it anew
        kube.delete("batch/v1", "Job", job, c.UPGRADE_NS)
    for job in job_names:   # the step creates a Job of the same name: wait until it is gone
        for _attempt in range(60):
            if kube.get("batch/v1", "Job", job, c.UPGRADE_NS) is None:
                break
            time.sleep(0.5)
        else:
            module.fail_json(msg=f"Job {c.UPGRADE_NS}/{job} still exists 30s after its "
                             "deletion; the plan was not resumed", plan=name)
    writer = plan_writer.PlanWriter(kube, plan_writer.resolve(kube, name) or plan)
    writer.update(lambda s: plan_resume.resume_status(s, resets, writer.now(),
                                                      writer.generation))
    return {**out, **describe(writer.plan), "events": writer.recorder.emitted,
            "msg": f"resumed UpgradePlan {name} in NodeUpgrading after its failure "
                   f"({plan_status.failure_message(plan)}); retrying "
                   + (", ".join(f"{n} from {st}" for n, st in resets.items()) or "no node")
                   + (f"; deleted Jobs {', '.join(job_names)}" if job_names else "")}


def _rancher_cluster(kube: Kube) -> dict[str, Any] | None:
    try:
        return kube.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")
    except NotServed:
        return None


def not_up_to_date(module: AnsibleModule, kube: Kube, running: str,
                   plans: list[dict[str, Any]]) -> None:
    """No Version is newer than ``running``: fail (nothing written) unless the cluster is at
    that release, so a run after a failure mid-roll never ends "up to date" with exit 0."""
    problems = plan_resume.not_at_release(running, plans, kube.list("v1", "Node"),
                                          _rancher_cluster(kube))
    if not problems:
        return
    last = plan_resume.newest(plans)
    hint = ""
    if last is not None and plan_resume.aborted(last):
        hint = (f" UpgradePlan {last['metadata']['name']} was aborted part-way; Rancher keeps "
                "rolling the nodes it was asked to. See docs/recovery.md")
    else:
        hint = " See docs/recovery.md"
    module.fail_json(msg=f"no Version newer than {running} in {c.UPGRADE_NS}, but the cluster "
                     f"is not at {running}: " + "; ".join(problems) + ". Nothing was changed."
                     + hint, up_to_date=False, problems=problems)


def ensure(module: AnsibleModule, kube: Kube) -> dict[str, Any]:
    p = module.params
    result: dict[str, Any] = {"created": False, "up_to_date": False, "changed": False,
                              "resumed": False}
    # The first module of a run: re-read discovery. The client's discovery cache is a file
    # keyed by server address and OS user only, so it may describe another cluster that was
    # at this address before (a tunnel, a recreated cluster, a simulator on a reused port), or
    # this one before a CRD was removed: UpgradePlans would look served and creating one fail
    # with 404 (tests/integration/test_resume.py).
    kube.invalidate()
    try:   # validate before writing anything (no CRD install on a non-Harvester cluster)
        running = plan_input.harvester_cluster(kube)
    except plan_input.InputError as exc:
        module.fail_json(msg=str(exc))
    plans = plan_writer.list_plans(kube)
    deleted = [x for x in plans if plan_cleanup.being_deleted(x)]
    if deleted:   # kubectl delete upgradeplan: the toolkit's finalizer cleanup, then stop
        return finish_deleted(module, kube, deleted, result)
    active = plan_writer.find_active(kube, plans)
    if active is not None:
        name = active["metadata"]["name"]
        want = p.get("version")
        have = (active.get("spec") or {}).get("version")
        if (p.get("name") and p["name"] != name) or (want and have and want != have):
            module.fail_json(msg=f'another upgrade "{name}" is in progress'
                             + (f" (to {have})" if have else ""), plan=name)
        lock.hold(kube, module)   # a second run stops here, naming the holder
        changed = plan_cleanup.add_finalizer(kube, active, module.check_mode)
        return {**result, **describe(active), "changed": changed,
                "msg": f"adopted active UpgradePlan {name}"}
    failed = plan_resume.resumable(plans)
    if failed is not None:   # failed mid-roll: continue it, never start another one
        return resume_failed(module, kube, failed, result)
    try:
        available = plan_input.new_plan_request(kube, p, running)
    except plan_input.InputError as exc:
        module.fail_json(msg=str(exc))
        raise  # fail_json does not return; a test double's might
    existing = next((x for x in plans if p.get("name") and x["metadata"]["name"] == p["name"]),
                    None)
    if existing is None and not p.get("name"):
        # a plan created but never initialized (a run killed right after creating it, or one a
        # user created for the toolkit): adopt it rather than create a second one
        existing = uninitialized(plans, p.get("version"), p.get("image"))
    version = p.get("version")
    if not version and not p.get("image") and existing is None:
        # nothing asked: the newest Version newer than the running release, if any (of the
        # Versions the request's check has just read)
        version = versions.newest_target(available, running or "")
        if not version:   # up to date: nothing is written, not even the lock
            not_up_to_date(module, kube, running or "", plans)
            return {**result, "plan": None, "up_to_date": True,
                    "msg": f"no Version newer than {running} in {c.UPGRADE_NS}; the cluster "
                    "is up to date"}
    lock.hold(kube, module)   # after validation, before the first write
    if existing is not None:
        current = (existing.get("status") or {}).get("currentPhase")
        if current:
            module.fail_json(msg=f"UpgradePlan {p['name']} already ran and is {current}; "
                             "choose another name (or none) for a new plan")
        name = existing["metadata"]["name"]
        plan_cleanup.add_finalizer(kube, existing, module.check_mode)
        existing = plan_writer.resolve(kube, name) or existing
        writer = plan_writer.PlanWriter(kube, existing, module.check_mode)
        writer.update(lambda s: plan_status.initialize(s, writer.now(), writer.generation))
        return {**result, **describe(writer.plan), "changed": True,
                "msg": f"initialized UpgradePlan {name}"}
    spec = manifests.plan_spec(version, p.get("image"), p.get("toolkit_tag"),
                               p.get("image_preload_concurrency"), p["pause_nodes"],
                               p["restore_vm"], p["force"])
    obj = manifests.upgrade_plan(p.get("name"), spec, plan_input.plan_annotations(kube, p))
    if p["install_crd"]:
        result["changed"] = ensure_crd(kube, module.check_mode)
    if module.check_mode:
        return {**result, "plan": p.get("name"), "changed": True, "created": True,
                "version": version, "upgradeplan": obj,
                "msg": f"would create an UpgradePlan to {version or p.get('image')}"}
    created = kube.create(obj)
    writer = plan_writer.PlanWriter(kube, created)
    writer.update(lambda s: plan_status.initialize(s, writer.now(), writer.generation))
    return {**result, **describe(writer.plan), "changed": True, "created": True,
            "msg": f"created UpgradePlan {writer.name} to {version or p.get('image')}"}


def main() -> None:
    module = module_factory.new_module(
        argument_spec=args.spec(
            action={"type": "str", "default": "ensure",
                    "choices": ["ensure", "read", "transition", "fail", "set_fields"]},
            name={"type": "str"}, version={"type": "str"}, image={"type": "str"},
            toolkit_tag={"type": "str"}, image_preload_concurrency={"type": "int"},
            pause_nodes={"type": "list", "elements": "str", "default": []},
            restore_vm={"type": "bool", "default": False},
            force={"type": "bool", "default": False},
            allow_downgrade={"type": "bool", "default": False},
            allow_version_skip={"type": "bool", "default": False},
            allow_unverified_iso={"type": "bool", "default": False},
            annotations={"type": "dict", "default": {}},
            install_crd={"type": "bool", "default": True},
            resume_failed={"type": "bool", "default": True},
            phase={"type": "str"},
            to={"type": "str", "choices": ["active", "completed"], "default": "active"},
            condition_message={"type": "str", "default": ""},
            fields={"type": "dict", "default": {}},
            node_states={"type": "dict", "default": {}},
        ),
        required_if=[("action", "transition", ["phase"]),
                     ("action", "fail", ["condition_message"])],
        supports_check_mode=True)
    p = module.params
    try:
        kube = Kube.from_module(module)
        if p["action"] == "ensure":
            module.exit_json(**{"events": [], **ensure(module, kube)})
        plan = plan_writer.resolve(kube, p.get("name"))
        if plan is None:
            if p["action"] == "read":
                module.exit_json(changed=False, plan=None, events=[],
                                 msg="no such UpgradePlan" if p.get("name")
                                 else "no active UpgradePlan")
            module.fail_json(msg=f"UpgradePlan {p.get('name') or '(active)'} not found")
        writer = plan_writer.PlanWriter(kube, plan, module.check_mode)
        if p["action"] == "transition":
            phase = phases.get(p["phase"])
            if p["to"] == "active":
                writer.update(lambda s: plan_status.start_phase(
                    s, phase, writer.now(), writer.generation, p["condition_message"]))
            else:
                writer.update(lambda s: plan_status.complete_phase(
                    s, phase, writer.now(), writer.generation))
        elif p["action"] == "fail":
            writer.fail(p["condition_message"])
        elif p["action"] == "set_fields":
            if p["fields"]:
                writer.set_fields(p["fields"])
            if p["node_states"]:
                states = {n: (v if isinstance(v, str) else (
                    v.get("state"), v.get("reason") or "", v.get("message") or ""))
                    for n, v in p["node_states"].items()}
                writer.set_node_states(states)
        module.exit_json(changed=writer.changed, events=writer.recorder.emitted,
                         **describe(writer.plan))
    except KeyError as exc:
        module.fail_json(msg=f"unknown phase or state: {exc}")
    except (ApiError, plan_writer.PlanError) as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
