"""``kubectl cordon|uncordon|drain`` in the ``rancher/kubectl`` image (SUC's init containers).

Follows kubectl v1.33 (``k8s.io/kubectl`` v0.33.1 ``pkg/cmd/drain/drain.go`` and
``pkg/drain``: ``cordon.go``, ``filters.go``, ``drain.go``), which is what
``rancher/kubectl:v1.33.1`` — the image Rancher's system-upgrade-controller chart 107.0.0
gives the ``drain``/``cordon`` init containers — runs; ``rancher/kubectl:v1.30.3``, the default
of system-upgrade-controller v0.16.x, runs the same drain code but for the text of a
wait-for-delete timeout ("global timeout reached" where v1.33 says "context deadline
exceeded"). The image's entrypoint is ``kubectl``, so the subcommand is the first argument.

* ``cordon NODE`` / ``uncordon NODE``: sets ``spec.unschedulable`` ("already cordoned" when
  nothing changes); exit 1 when the node does not exist.
* ``drain NODE [--pod-selector S] [--ignore-daemonsets] [--delete-emptydir-data] [--force]
  [--timeout D] [--grace-period N] [--disable-eviction] [--skip-wait-for-delete-timeout N]``:
  cordons, lists the node's pods (field selector ``spec.nodeName``, label selector ``S``)
  and applies kubectl's filters in its order: pods deleted longer ago than
  ``--skip-wait-for-delete-timeout`` are skipped; DaemonSet pods (unless finished) are an
  error without ``--ignore-daemonsets`` (skipped with it; an orphan whose DaemonSet is gone
  is deleted with ``--force``); mirror pods are skipped; running pods with ``emptyDir`` need
  ``--delete-emptydir-data``; running pods without a controller need ``--force``. Any error
  ends the run with exit 1 before anything is evicted. Then every pod is evicted through
  the eviction API (deleted with ``--disable-eviction``): a 429 (a PodDisruptionBudget, or
  KubeVirt refusing to evict a live-migratable VM's launcher while it migrates it) is
  retried every 5 s, a 404 counts as done, any other error fails the drain. Each evicted
  pod is then waited for (1 s polls) until it is gone or replaced. ``--timeout`` (0 =
  forever) bounds the whole drain: each pod not yet evicted fails with "global timeout
  reached: <duration>", each evicted one not yet gone with "context deadline exceeded"
  (kubectl's aggregate of them), exit 1.

Timeline: ``kubectl_cordon`` (node, unschedulable), ``kubectl_drain_started``,
``kubectl_drain_done``, ``kubectl_drain_failed`` (node, error); span ``drain`` (node).
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any

from ..client import ApiError
from .base import REGISTRY, ProgramContext, image_repo

Prog = Generator[float, None, int]
EVICT_RETRY_S = 5.0
DELETE_POLL_S = 1.0
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def _matcher(image: str, command: list[str], args: list[str]) -> bool:
    if image_repo(image).rsplit("/", 1)[-1] != "kubectl":
        return False
    argv = [a for a in (list(command) + list(args)) if a != "kubectl"]
    return bool(argv) and argv[0] in ("cordon", "uncordon", "drain")


def _argv(ctx: ProgramContext) -> list[str]:
    return [a for a in ctx.command + ctx.args if a != "kubectl"]


def parse_duration(text: str) -> float:
    """Go ``time.ParseDuration`` for the forms kubectl users write (``90s``, ``1m30s``,
    ``2h``, ``500ms``, a bare ``0``)."""
    text = text.strip()
    if text in ("0", ""):
        return 0.0
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    total = 0.0
    pos = 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)", text):
        if m.start() != pos:
            raise ValueError(f"time: invalid duration {text!r}")
        total += float(m.group(1)) * units[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"time: invalid duration {text!r}")
    return total


def go_duration(seconds: float) -> str:
    """Go ``time.Duration.String()`` of whole or fractional seconds (``15m0s``, ``1h0m0s``)."""
    from ..api.protobuf import _go_duration

    return _go_duration(round(seconds * 1e9))


class DrainOptions:
    def __init__(self, argv: list[str]) -> None:
        self.node = ""
        self.selector = ""
        self.ignore_daemonsets = False
        self.delete_emptydir = False
        self.force = False
        self.timeout = 0.0
        self.grace = -1
        self.disable_eviction = False
        self.skip_wait_s = 0
        it = iter(argv)
        for a in it:
            key, _, val = a.partition("=")
            if key in ("--pod-selector", "--timeout", "--grace-period",
                       "--skip-wait-for-delete-timeout") and not val:
                val = next(it, "")
            if key == "--pod-selector":
                self.selector = val
            elif key == "--ignore-daemonsets":
                self.ignore_daemonsets = val != "false"
            elif key in ("--delete-emptydir-data", "--delete-local-data"):
                self.delete_emptydir = val != "false"
            elif key == "--force":
                self.force = val != "false"
            elif key == "--timeout":
                self.timeout = parse_duration(val)
            elif key == "--grace-period":
                self.grace = int(val)
            elif key == "--disable-eviction":
                self.disable_eviction = val != "false"
            elif key == "--skip-wait-for-delete-timeout":
                self.skip_wait_s = int(val)
            elif key.startswith("-"):
                raise ValueError(f"unknown flag: {key}")
            elif not self.node:
                self.node = a
            else:
                raise ValueError(f"unexpected argument {a!r}")
        if not self.node:
            raise ValueError("USAGE: kubectl drain NODE [flags]")


def _set_unschedulable(ctx: ProgramContext, node: str, value: bool) -> bool | None:
    """True if changed, False if already so, None if the node does not exist."""
    changed = []

    def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
        spec = cur.setdefault("spec", {})
        if bool(spec.get("unschedulable")) == value:
            return None
        if value:
            spec["unschedulable"] = True
        else:
            spec.pop("unschedulable", None)
        changed.append(True)
        return cur

    try:
        ctx.client.modify("v1", "Node", node, fn)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise
    if changed:
        ctx.world.timeline.record("kubectl_cordon", node=node, unschedulable=value)
    return bool(changed)


def cordon(ctx: ProgramContext) -> Prog:
    argv = _argv(ctx)
    value = argv[0] == "cordon"
    if len(argv) < 2:
        ctx.log(f"error: USAGE: kubectl {argv[0]} NODE")
        return 1
    node = argv[1]
    res = _set_unschedulable(ctx, node, value)
    if res is None:
        ctx.log(f'Error from server (NotFound): nodes "{node}" not found')
        return 1
    word = "cordoned" if value else "uncordoned"
    ctx.log(f"node/{node} {word}" if res else f"node/{node} already {word}")
    return 0
    yield  # pragma: no cover - makes this a generator


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    for o in pod["metadata"].get("ownerReferences") or []:
        if o.get("controller"):
            return o  # type: ignore[no-any-return]
    return None


def classify(ctx: ProgramContext, pods: list[dict[str, Any]], o: DrainOptions,
             ) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """kubectl's ``GetPodsForDeletion``: (pods to delete, errors, warnings)."""
    out: list[dict[str, Any]] = []
    errs: list[str] = []
    warns: list[str] = []
    now = ctx.world.clock.wall_now()
    for p in pods:
        md = p["metadata"]
        ref = f"{md['namespace']}/{md['name']}"
        phase = (p.get("status") or {}).get("phase")
        finished = phase in ("Succeeded", "Failed")
        if o.skip_wait_s > 0 and md.get("deletionTimestamp"):
            import datetime as dt

            ts = dt.datetime.strptime(md["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
            if (now.replace(tzinfo=None) - ts).total_seconds() > o.skip_wait_s:
                continue
        ctl = _controller(p)
        if ctl is not None and ctl.get("kind") == "DaemonSet" and not finished:
            ds = ctx.client.try_get("apps/v1", "DaemonSet", ctl.get("name", ""),
                                    md["namespace"])
            if ds is None:
                if o.force:
                    warns.append(f"deleting orphaned DaemonSet Pod {ref}")
                    out.append(p)
                else:
                    errs.append(f'daemonsets.apps "{ctl.get("name")}" not found: {ref}')
                continue
            if not o.ignore_daemonsets:
                errs.append(f"cannot delete DaemonSet-managed Pods (use --ignore-daemonsets "
                            f"to ignore): {ref}")
            else:
                warns.append(f"ignoring DaemonSet-managed Pods: {ref}")
            continue
        if MIRROR_ANNOTATION in (md.get("annotations") or {}):
            continue
        vols = (p.get("spec") or {}).get("volumes") or []
        if not finished and any("emptyDir" in v for v in vols):
            if not o.delete_emptydir:
                errs.append(f"cannot delete Pods with local storage (use "
                            f"--delete-emptydir-data to override): {ref}")
                continue
            warns.append(f"deleting Pods with local storage: {ref}")
        if not finished and ctl is None:
            if not o.force:
                errs.append(f"cannot delete Pods that declare no controller (use --force to "
                            f"override): {ref}")
                continue
            warns.append(f"deleting Pods that declare no controller: {ref}")
        out.append(p)
    return out, errs, warns


def drain(ctx: ProgramContext) -> Prog:
    try:
        o = DrainOptions(_argv(ctx)[1:])
    except ValueError as exc:
        ctx.log(f"error: {exc}")
        return 1
    clock = ctx.world.clock
    tl = ctx.world.timeline
    t0 = clock.now()
    res = _set_unschedulable(ctx, o.node, True)
    if res is None:
        ctx.log(f'Error from server (NotFound): nodes "{o.node}" not found')
        return 1
    ctx.log(f"node/{o.node} cordoned" if res else f"node/{o.node} already cordoned")
    tl.record("kubectl_drain_started", node=o.node, job_pod=ctx.pod["metadata"].get("name"))
    deadline = t0 + o.timeout if o.timeout > 0 else None

    def fail(msg: str) -> int:
        ctx.log(f"error: unable to drain node \"{o.node}\" due to error: {msg}, "
                "continuing command...")
        ctx.log("There are pending nodes to be drained:")
        ctx.log(f" {o.node}")
        tl.record("kubectl_drain_failed", node=o.node, error=msg)
        return 1

    pods = ctx.client.list("v1", "Pod", label_selector=o.selector or None,
                           field_selector=f"spec.nodeName={o.node}")
    todo, errs, warns = classify(ctx, pods, o)
    if errs:
        return fail("[" + ", ".join(errs) + "]")
    if warns:
        ctx.log("Warning: " + "; ".join(warns))
    pending = {(p["metadata"]["namespace"], p["metadata"]["name"]): p["metadata"].get("uid")
               for p in todo}
    evicted: set[tuple[str, str]] = set()
    while pending:
        if deadline is not None and clock.now() >= deadline:
            # evictPods' per-pod goroutines, aggregated: those never evicted and those
            # evicted but not yet gone
            dur = go_duration(o.timeout)
            errs = [f'error when evicting pods/"{n}" -n "{ns}": global timeout reached: {dur}'
                    if (ns, n) not in evicted else
                    f'error when waiting for pod "{n}" in namespace "{ns}" to terminate: '
                    "context deadline exceeded" for ns, n in sorted(pending)]
            return fail(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        retry = False
        for key, uid in sorted(pending.items()):
            if key in evicted:
                continue
            ns, name = key
            try:
                if o.disable_eviction:
                    ctx.client.delete("v1", "Pod", name, ns,
                                      grace_period=o.grace if o.grace >= 0 else None)
                else:
                    _evict(ctx, name, ns, o.grace)
                evicted.add(key)
                ctx.log(f"evicting pod {ns}/{name}")
            except ApiError as exc:
                if exc.code == 404:
                    evicted.add(key)
                elif exc.code == 429:
                    ctx.log(f'error when evicting pods/"{name}" -n "{ns}" (will retry after '
                            f'5s): {exc}')
                    retry = True
                else:
                    return fail(f'error when evicting pods/"{name}" -n "{ns}": {exc}')
        for key in sorted(evicted & set(pending)):
            cur = ctx.client.try_get("v1", "Pod", key[1], key[0])
            if cur is None or cur["metadata"].get("uid") != pending[key]:
                ctx.log(f"pod/{key[1]} evicted")
                del pending[key]
        if pending:
            yield EVICT_RETRY_S if retry and not (evicted & set(pending)) else DELETE_POLL_S
    ctx.log(f"node/{o.node} drained")
    tl.record("kubectl_drain_done", node=o.node)
    tl.record("span", what="drain", node=o.node, start=t0, end=clock.now())
    return 0


def _evict(ctx: ProgramContext, name: str, ns: str, grace: int) -> None:
    if grace >= 0:
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns},
                "deleteOptions": {"gracePeriodSeconds": grace}}
        ctx.client.store.evict(ctx.client.rt("v1", "Pod"), ns, name, body)
    else:
        ctx.client.evict(name, ns)


def run(ctx: ProgramContext) -> Prog:
    argv = _argv(ctx)
    if argv and argv[0] == "drain":
        return (yield from drain(ctx))
    return (yield from cordon(ctx))


REGISTRY.register("kubectl", _matcher, run)
