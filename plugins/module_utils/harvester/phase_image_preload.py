"""ImagePreload: the toolkit's eligibility check, then the system-upgrade-controller Plan
that pulls the new release's images on every node, awaited until Complete.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    manifests,
    plan_status,
    preflight_result,
    versions,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.phase_common import (
    managed_nodes,
    suc_awaits,
    suc_wait,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.pipeline import (
    Context,
    Step,
)


def eligibility_error(ctx: Context) -> str | None:
    """The toolkit's eligibility check (§E.3). ``spec.force``, the phase's ``force`` and the
    toolkit's skip-version-check annotation lift its rules except two: a downgrade and a
    target whose minUpgradableVersion is above the running release need the switch recorded
    on the plan for each (upgrade_allow_downgrade, upgrade_allow_version_skip)."""
    spec = ctx.plan.get("spec") or {}
    ann = ctx.writer.annotations
    force = bool(spec.get("force") or ctx.params.get("force")
                 or preflight_result.annotation_true(ann, c.ANN_SKIP_VERSION_CHECK))
    meta = ctx.status.get("releaseMetadata") or {}
    current, target = ctx.status.get("previousVersion") or "", meta.get("harvester") or ""
    if not current or not target:
        return None
    refused = versions.refusal(
        current, target, meta.get("minUpgradableVersion") or "", force=force,
        allow_downgrade=preflight_result.annotation_true(ann, c.ANN_ALLOW_DOWNGRADE),
        allow_version_skip=preflight_result.annotation_true(ann, c.ANN_ALLOW_VERSION_SKIP))
    if refused is None:
        return None
    why, rule = refused
    return (f"upgrade eligibility check failed: {why} (annotation "
            f"{_SWITCH_ANNOTATIONS[rule]}: \"true\" on the plan, "
            f"{versions.SWITCHES[rule]}=true for a new one, allows it)")


_SWITCH_ANNOTATIONS = {versions.DOWNGRADE: c.ANN_ALLOW_DOWNGRADE[0],
                       versions.VERSION_SKIP: c.ANN_ALLOW_VERSION_SKIP[0],
                       versions.OTHER: "spec.force / " + c.ANN_SKIP_VERSION_CHECK[0]}


def entry(ctx: Context) -> str | None:
    """What :func:`image_preload` waits for (pipeline.run_phase's ``entry``): nothing when
    the plan skips the preload."""
    conc = ((ctx.plan.get("spec") or {}).get("imagePreloadOption") or {}).get("concurrency")
    if conc is not None and int(conc) < 0:
        return None
    return suc_awaits(ctx, c.COMPONENT_IMAGE_PRELOAD)


def image_preload(ctx: Context) -> Step:
    err = eligibility_error(ctx)
    if err:
        return Step("failed", err)
    nodes = [n["metadata"]["name"] for n in managed_nodes(ctx.kube)]
    conc = (((ctx.plan.get("spec") or {}).get("imagePreloadOption") or {}).get("concurrency"))
    if conc is not None and int(conc) < 0:
        if not ctx.check_mode:
            ctx.writer.set_node_states({n: "ImagePreloaded" for n in nodes}, hold=True)
        return Step("done", "image preload skipped (concurrency < 0)")
    conc = len(nodes) if not conc else min(int(conc), len(nodes))
    deadline = int(ctx.params.get("job_deadline_seconds") or 0)
    ctx.ensure(manifests.suc_plan(ctx.plan, c.COMPONENT_IMAGE_PRELOAD, ["prepare"],
                                  max(1, conc), deadline_seconds=deadline))
    if ctx.check_mode:
        return Step("done", f"would preload images on {len(nodes)} nodes, {conc} at a time")
    waited = suc_wait(ctx, c.COMPONENT_IMAGE_PRELOAD,
                      ("ImagePreloading", "ImagePreloaded", "ImagePreloadFailed"), len(nodes),
                      "image-preload plan job(s) failed", "preloaded")
    if waited.state == "failed":
        return waited
    ctx.writer.set_node_states({n: "ImagePreloaded" for n in nodes}, hold=True)
    return Step("done", f"images preloaded on {len(nodes)} nodes")


def verify_suc(component: str) -> Any:
    def verify(ctx: Context) -> str:
        name = f"{ctx.name}-{component}"
        plan = ctx.kube.get(*c.SUC_PLAN, name, c.SUC_NS)
        if plan is None:
            return f"SUC Plan {name} not present"
        ok = plan_status.condition_true(plan.get("status"), "Complete")
        return f"SUC Plan {name} {'Complete' if ok else 'not Complete'}"
    return verify
