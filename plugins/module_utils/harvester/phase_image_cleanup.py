"""ImageCleanup: the previous release's images that the new one no longer lists and no pod
runs, removed from every node by a system-upgrade-controller Plan.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    manifests,
    plan_status,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.phase_common import (
    fetch_repo_file,
    managed_nodes,
    suc_wait,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.pipeline import (
    Context,
    Step,
)


def _image_repo_name(image: str) -> str:
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def images_to_purge(previous: list[str], current: list[str]) -> list[str]:
    """Images of the previous release that the new one no longer lists, minus the retained
    ones (toolkit list)."""
    keep = set(current)
    return sorted({i for i in previous if i and i not in keep
                   and not any(r in _image_repo_name(i) for r in c.RETAINED_IMAGE_NAMES)})


def _norm_image(ref: str) -> str:
    """``docker.io/library/nginx:1`` == ``nginx:1``; no tag means ``:latest``."""
    r = ref.strip()
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if r.startswith(prefix):
            r = r[len(prefix):]
            break
    if r.startswith("library/"):
        r = r[len("library/"):]
    name = r.split("@", 1)[0]
    if ":" not in name.rsplit("/", 1)[-1] and "@" not in r:
        r += ":latest"
    return r


def images_in_use(kube: Any, nodes: list[str]) -> set[str]:
    """Images of the containers of every pod on the managed nodes that is not finished.
    ``crictl rmi`` on containerd removes an image even while a container runs from it (the
    container then cannot restart without a pull), so the cleanup list leaves them out; one
    list serves every node, hence the union over the nodes."""
    wanted = set(nodes)
    used: set[str] = set()
    for pod in kube.list(*c.POD):
        spec = pod.get("spec") or {}
        if spec.get("nodeName") not in wanted or \
                (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for ctr in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            if ctr.get("image"):
                used.add(_norm_image(str(ctr["image"])))
        for cs in ((pod.get("status") or {}).get("containerStatuses") or []):
            if cs.get("image"):
                used.add(_norm_image(str(cs["image"])))
    return used


def _image_list(ctx: Context, version: str) -> list[str] | None:
    path = f"bundle/harvester/images-lists-archive/{version}/image_list_all.txt"
    status, body = fetch_repo_file(ctx, path, f"image list of {version}")
    if status == 404:
        return None
    if status != 200:
        raise ApiError(status, "RepoError", f"GET {path}: HTTP {status}")
    return [ln.strip() for ln in body.decode(errors="replace").splitlines()
            if ln.strip() and not ln.startswith("#")]


def planned_images(suc_plan: dict[str, Any]) -> list[str]:
    """The images a cleanup Plan removes (its ``IMAGES``, :func:`manifests.
    image_cleanup_plan`)."""
    envs = ((suc_plan.get("spec") or {}).get("upgrade") or {}).get("envs") or []
    value = next((str(e.get("value") or "") for e in envs if e.get("name") == "IMAGES"), "")
    return value.split()


def image_cleanup(ctx: Context) -> Step:
    nodes = [n["metadata"]["name"] for n in managed_nodes(ctx.kube)]
    previous = ctx.status.get("previousVersion") or ""
    current = (ctx.status.get("releaseMetadata") or {}).get("harvester") or ""
    if ctx.check_mode:
        ctx.did(f"remove images of {previous} not used by {current} (SUC Plan "
                f"{ctx.name}-{c.COMPONENT_IMAGE_CLEANUP})")
        return Step("done")
    # a resumed phase whose Plan is there: the images it removes are the ones chosen when
    # it was created (the image lists and the pods are not read again)
    there = ctx.existing(*c.SUC_PLAN, f"{ctx.name}-{c.COMPONENT_IMAGE_CLEANUP}", c.SUC_NS)
    if there is not None:
        purge = planned_images(there)
    else:
        old, new = _image_list(ctx, previous), _image_list(ctx, current)
        if old is None or new is None:
            ctx.writer.recorder.emit(plan_status.EventSpec(
                "Warning", c.REASON_IMAGE_CLEANUP_SKIPPED,
                "Image list not available in upgrade repository; skipping stale image "
                "cleanup", c.UPGRADE_NS))
            ctx.writer.set_node_states({n: "ImageCleaned" for n in nodes}, hold=True)
            return Step("done", "image lists not in the ISO; cleanup skipped")
        in_use = images_in_use(ctx.kube, nodes)
        purge = [i for i in images_to_purge(old, new) if _norm_image(i) not in in_use]
        if not purge:
            ctx.writer.set_node_states({n: "ImageCleaned" for n in nodes}, hold=True)
            return Step("done", "no stale images to remove")
        ctx.ensure(manifests.image_cleanup_plan(ctx.plan, purge))
    waited = suc_wait(ctx, c.COMPONENT_IMAGE_CLEANUP, ("ImageCleaning", "ImageCleaned",
                                                       "ImageCleanFailed"), len(nodes),
                      "image-cleanup plan job(s) failed", "cleaned")
    if waited.state == "failed":
        return waited
    ctx.writer.set_node_states({n: "ImageCleaned" for n in nodes}, hold=True)
    return Step("done", f"{len(purge)} stale images removed from {len(nodes)} nodes",
                {"images_removed": len(purge)})
