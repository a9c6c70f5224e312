"""ISODownload: the VirtualMachineImage of the target's ISO (from the Version's ``isoURL``,
refused unverified unless the plan allows it; or the pre-uploaded ``spec.image``), awaited
until Imported.
"""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    manifests,
    plan_status,
    preflight_result,
    preflight_version,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.phase_common import (
    get_version,
    split_image_ref,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.pipeline import (
    Context,
    Step,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Snapshot,
    Source,
    Verdict,
    only,
)

GiB = 1024**3


def _size(n: float) -> str:
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / 1024**2:.0f} MiB"


def iso_ref(ctx: Context) -> tuple[str, str, str]:
    """``(namespace, name, isoImageID)`` of the ISO image this plan uses."""
    image = (ctx.plan.get("spec") or {}).get("image")
    if image:
        ns, name = split_image_ref(image)
        return ns, name, image
    name = f"{ctx.name}-iso"
    return c.UPGRADE_NS, name, name


def iso_download(ctx: Context) -> Step:
    ns, name, image_id = iso_ref(ctx)
    if not (ctx.plan.get("spec") or {}).get("image"):
        snap = ctx.status.get("version") or {}
        if not snap.get("isoURL"):
            version = get_version(ctx.kube, (ctx.plan.get("spec") or {}).get("version", ""))
            snap = (version or {}).get("spec") or {}
        if not snap.get("isoURL"):
            return Step("failed", "ISO image download failed: the Version has no isoURL")
        unverified = preflight_version.iso_unverified(
            (ctx.plan.get("spec") or {}).get("version"), {"spec": snap})
        if unverified and not preflight_result.annotation_true(ctx.writer.annotations,
                                                               c.ANN_ALLOW_UNVERIFIED_ISO):
            return Step("failed", f"ISO image download refused: {unverified} (annotation "
                        f"{c.ANN_ALLOW_UNVERIFIED_ISO[0]}: \"true\" allows it)")
        ctx.ensure(manifests.iso_image(ctx.plan, snap["isoURL"], snap.get("isoChecksum", "")))
    if ctx.status.get("isoImageID") != image_id:   # entered without it (an older run)
        ctx.writer.set_fields({"isoImageID": image_id}, hold=True)   # with the wait's message
    if ctx.check_mode:
        return Step("done", f"would wait for VirtualMachineImage {ns}/{name} to be Imported")

    def imported(snapshot: Snapshot) -> Verdict:
        img = only(snapshot, "image")
        if img is None:
            return Verdict(progress=f"VirtualMachineImage {ns}/{name} not found")
        cond = plan_status.find_condition(img.get("status") or {}, "Imported") or {}
        if cond.get("status") == "True":
            return Verdict(done=True)
        st = img.get("status") or {}
        if cond.get("status") == "False":
            why = ": ".join(x for x in (cond.get("reason"), cond.get("message")) if x)
            return Verdict(failed="ISO image download failed" + (f": {why}" if why else ""))
        pct, size = int(st.get("progress") or 0), int(st.get("size") or 0)
        got = f" ({_size(size * pct / 100)} of {_size(size)})" if size else ""
        return Verdict(progress=f"ISO download {pct}%{got}")

    verdict = ctx.wait([Source.named(*c.VM_IMAGE, name, ns, key="image")], imported,
                       awaited(ctx))
    if verdict.failed:
        return Step("failed", verdict.failed)
    return Step("done", f"VirtualMachineImage {ns}/{name} imported",
                {"iso_image_id": image_id})


def entry(ctx: Context) -> str:
    """ISODownload's entry (pipeline.run_phase's ``entry``): ``isoImageID`` written with it,
    as the toolkit does; returns what :func:`iso_download` waits for."""
    _ns, _name, image_id = iso_ref(ctx)
    if ctx.status.get("isoImageID") != image_id:
        ctx.writer.set_fields({"isoImageID": image_id}, hold=True)
    return awaited(ctx)


def awaited(ctx: Context) -> str:
    ns, name, _image = iso_ref(ctx)
    return f"VirtualMachineImage {ns}/{name} to be Imported"


def verify_iso(ctx: Context) -> str:
    ns, name, _image = iso_ref(ctx)
    img = ctx.kube.get(*c.VM_IMAGE, name, ns)
    if img is None:
        return f"warning: VirtualMachineImage {ns}/{name} is gone"
    ok = plan_status.condition_true(img.get("status"), "Imported")
    return f"VirtualMachineImage {ns}/{name} {'Imported' if ok else 'not Imported'}"
