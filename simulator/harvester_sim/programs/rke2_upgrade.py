"""The ``rancher/rke2-upgrade`` image (``/bin/upgrade.sh``), as a SUC Plan's upgrade container.

Follows rancher/rke2-upgrade ``scripts/upgrade.sh`` and ``Dockerfile`` (commit ed2e59b9,
2024-10-02): the image carries the RKE2 binary of its tag (``v1.33.3-rke2r1`` holds
``v1.33.3+rke2r1``) at ``/opt/rke2``; ``ENTRYPOINT ["/bin/upgrade.sh"]``, ``CMD
["upgrade"]``, so a Plan without command/args runs ``upgrade``.

* ``upgrade``: finds the running ``rke2 server|agent`` process on the host (none: "rke2 is
  not running on this server", exit 1 — here: the node's kubelet is down); if the host's
  binary already is the image's ("Binary already been replaced") exits 0 without touching
  anything; otherwise copies the new binary over the old one, makes sure the systemd env
  files carry ``HOME``, and SIGTERMs rke2 and its containerd/kubelet children so that systemd
  restarts RKE2 with the new binary — here ``kubelet.restart_kubelet(node, version)``: a short
  NotReady blip after which the node reports the new ``kubeletVersion``; running pods keep
  running (their shims survive). The script exits 0 right after the kill; the restarted
  kubelet reports that exit, so the container ends here once the kubelet is back.
* ``prepare <plan>``: the agent plans' prepare step: waits (5 s polls) until the named SUC
  Plan in the pod's namespace has an empty ``status.applying``, then until every node
  labelled ``node-role.kubernetes.io/master`` runs the image's Kubernetes version.

Timeline: ``rke2_binary_replaced`` (node, version), span ``rke2_restart`` is recorded by the
kubelet restart (``kubelet_restart`` event).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ..controllers._upgrade_util import k8s_version
from .base import REGISTRY, ProgramContext, image_repo

Prog = Generator[float, None, int]
COPY_S = 2.0          # cp of a ~100 MB binary and the env-file edits
POLL_S = 5.0


def _matcher(image: str, command: list[str], args: list[str]) -> bool:
    return image_repo(image).endswith("rke2-upgrade")


def image_version(image: str) -> str:
    """``rancher/rke2-upgrade:v1.33.3-rke2r1`` -> ``v1.33.3+rke2r1``."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return k8s_version(tag)


def _argv(ctx: ProgramContext) -> list[str]:
    argv = ctx.command + ctx.args
    if argv and argv[0] in ("/bin/upgrade.sh", "upgrade.sh"):
        argv = argv[1:]
    return argv or ["upgrade"]


def _kubelet_version(ctx: ProgramContext, node: str) -> str:
    n = ctx.client.try_get("v1", "Node", node) or {}
    return k8s_version(((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion"))


def upgrade(ctx: ProgramContext) -> Prog:
    node = ctx.node
    kubelet = ctx.host
    if kubelet is not None and hasattr(kubelet, "is_up") and not kubelet.is_up(node):
        ctx.log("[ERROR]  rke2 is not running on this server")
        return 1
    want = image_version(ctx.image)
    if not want:
        ctx.log(f"[ERROR]  The new binary /opt/rke2 doesn't exist (image {ctx.image} has no tag)")
        return 1
    have = _kubelet_version(ctx, node)
    ctx.log(f"[INFO]  rke2 binary is running (version {have or 'unknown'})")
    ctx.log("[INFO]  Comparing old and new binaries")
    if have == want:
        ctx.log("[INFO]  Binary already been replaced")
        return 0
    yield COPY_S
    ctx.log("[INFO]  rke2 binary has been replaced successfully")
    ctx.log("[INFO]  Ensuring presence of HOME environment variable")
    ctx.world.timeline.record("rke2_binary_replaced", node=node, version=want, previous=have)
    restarted = False
    if kubelet is not None and hasattr(kubelet, "restart_kubelet"):
        restarted = bool(kubelet.restart_kubelet(node, want))
    else:
        # no simulated kubelet (unit tests): the restart as a plain status change
        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            info = cur.setdefault("status", {}).setdefault("nodeInfo", {})
            info["kubeletVersion"] = info["kubeProxyVersion"] = want
            return cur

        ctx.client.modify("v1", "Node", node, fn, subresource="status")
        restarted = True
    if not restarted:
        ctx.log("[ERROR]  rke2 is not running on this server")
        return 1
    ctx.log(f"[INFO]  Successfully Killed old rke2 process and containerd/kubelet processes "
            f"(restarting as {want})")
    # the script exits right after the kill, but the exit is reported by the restarted
    # kubelet: the Job completes only once RKE2 is back
    while kubelet is not None and hasattr(kubelet, "is_up") and not kubelet.is_up(node):
        yield 1.0
    return 0


def prepare(ctx: ProgramContext, master_plan: str) -> Prog:
    if not master_plan:
        ctx.log("[ERROR]  Master Plan name is not passed to the prepare step. Exiting")
        return 1
    ns = (ctx.pod.get("metadata") or {}).get("namespace", "")
    while True:
        plan = ctx.client.try_get("upgrade.cattle.io/v1", "Plan", master_plan, ns)
        if plan is None:
            ctx.log(f"[INFO]  master plan {master_plan} doesn't exist")
        elif not (plan.get("status") or {}).get("applying"):
            break
        else:
            ctx.log("[INFO]  Waiting for all master nodes to be upgraded")
        yield POLL_S
    want = image_version(ctx.env.get("SYSTEM_UPGRADE_PLAN_LATEST_VERSION", "")
                         and f"x:{ctx.env['SYSTEM_UPGRADE_PLAN_LATEST_VERSION']}"
                         or ctx.image)
    while True:
        masters = ctx.client.list("v1", "Node",
                                  label_selector="node-role.kubernetes.io/master")
        versions = {k8s_version(((n.get("status") or {}).get("nodeInfo") or {})
                                .get("kubeletVersion")) for n in masters}
        if versions == {want}:
            ctx.log(f"[INFO]  All master nodes has been upgraded to version to {want}")
            return 0
        ctx.log("[INFO]  Waiting for all master nodes to be upgraded to version")
        yield POLL_S


def run(ctx: ProgramContext) -> Prog:
    argv = _argv(ctx)
    if argv[0] == "upgrade":
        return (yield from upgrade(ctx))
    if argv[0] == "prepare":
        return (yield from prepare(ctx, argv[1] if len(argv) > 1 else ""))
    ctx.log(f"/bin/upgrade.sh: line 1: {argv[0]}: not found")
    return 127


REGISTRY.register("rke2-upgrade", _matcher, run)
