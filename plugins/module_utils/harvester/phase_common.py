"""What several cluster phases read or wait for: the managed nodes, the running release,
the Version CR, a file of the upgrade repository, a system-upgrade-controller Plan's Jobs.

Each cluster phase is one module (``phase_<name>``) with its ``act`` (get-or-create, then
wait) and ``verify``, called through :func:`pipeline.run_phase` by the phase modules. Every
``act`` is idempotent: it looks at the cluster first and only creates what is missing, so a
re-run resumes a phase where it stopped. In check mode nothing is created or awaited; the
actions that would be taken are recorded with :meth:`pipeline.Context.did`. Object shapes
are in :mod:`manifests`; the protocol is docs/protocol.md.
"""

from __future__ import annotations

import time
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
    Kube,
    NotServed,
    selector,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.pipeline import (
    Context,
    Pending,
    Step,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Snapshot,
    Source,
    Verdict,
    WaitTimeout,
    only,
)


def managed_nodes(kube: Kube) -> list[dict[str, Any]]:
    return kube.list(*c.NODE, label_selector=f"{c.LABEL_MANAGED}=true")


def managed(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes of ``nodes`` that :func:`managed_nodes` would list (from a list read already)."""
    return [n for n in nodes
            if ((n.get("metadata") or {}).get("labels") or {}).get(c.LABEL_MANAGED) == "true"]


def version_of(setting: dict[str, Any] | None) -> str | None:
    """The version the ``server-version`` Setting says (its value, else its default)."""
    if setting is None:
        return None
    return str(setting.get("value") or setting.get("default") or "") or None


def server_version(kube: Kube) -> str | None:
    return version_of(kube.get(*c.SETTING, c.SERVER_VERSION_SETTING))


def get_version(kube: Kube, name: str) -> dict[str, Any] | None:
    """The Version CR: Harvester's namespaced one, else the management-group variant."""
    obj = None
    try:
        obj = kube.get(*c.VERSION, name, c.UPGRADE_NS)
    except NotServed:
        pass
    if obj is None:
        try:
            obj = kube.get(*c.VERSION_MGMT, name)
        except NotServed:
            pass
    return obj


def list_versions(kube: Kube) -> list[dict[str, Any]]:
    try:
        return kube.list(*c.VERSION, namespace=c.UPGRADE_NS)
    except NotServed:
        return kube.list_if_served(*c.VERSION_MGMT) or []


def split_image_ref(ref: str) -> tuple[str, str]:
    """``ns/name`` or a bare name (in ``harvester-system``)."""
    if "/" in ref:
        ns, name = ref.split("/", 1)
        return ns, name
    return c.UPGRADE_NS, ref


def _job_states(jobs: dict[str, dict[str, Any]], running: str, ok: str, failed: str
                ) -> dict[str, Any]:
    """Per-node states from SUC Jobs (node from label ``upgrade.cattle.io/node``)."""
    states: dict[str, Any] = {}
    for job in sorted(jobs.values(), key=lambda j: j["metadata"].get("creationTimestamp", "")):
        node = ((job.get("metadata") or {}).get("labels") or {}).get(c.LABEL_SUC_NODE)
        if not node:
            continue
        done = manifests.job_condition(job)
        if done is None:
            states[node] = running
        elif done[0] == "Complete":
            states[node] = ok
        else:
            states[node] = (failed, done[1], done[2])
    return states


def fetch_repo_file(ctx: Context, path: str, what: str) -> tuple[int, bytes]:
    """GET a file of the upgrade repository through the service proxy.

    Retries (with backoff, until the deadline) while the repository answers 5xx or not at
    all; returns ``(status, body)`` for 2xx and 4xx answers.
    """
    api_path = manifests.repo_proxy_path(ctx.name, path)
    delay, last = 0.5, ""
    start = time.time()
    while True:
        try:
            status, body = ctx.kube.raw_get(api_path, timeout=30)
        except ApiError as exc:
            status, body = 0, str(exc).encode()
        if 200 <= status < 500:
            return status, body
        last = f"HTTP {status}: {body[:200].decode(errors='replace')}"
        if ctx.start_only:   # the phase's own call retries (pipeline.start_chain)
            raise Pending(last)
        if ctx.remaining() <= 0:
            raise WaitTimeout(what, time.time() - start, last)
        time.sleep(min(delay, max(0.0, ctx.remaining())))
        delay = min(8.0, delay * 2)


def suc_awaits(ctx: Context, component: str) -> str:
    """What :func:`suc_wait` waits for."""
    return f"SUC Plan {c.SUC_NS}/{ctx.name}-{component} to complete"


def suc_wait(ctx: Context, component: str, states: tuple[str, str, str], total: int,
             fail_msg: str, verb: str) -> Step:
    name = f"{ctx.name}-{component}"
    running, ok, failed = states

    def complete(snapshot: Snapshot) -> Verdict:
        per_node = _job_states(snapshot.get("jobs", {}), running, ok, failed)
        if per_node and not ctx.check_mode:
            ctx.writer.set_node_states(per_node)
        plan = only(snapshot, "plan")
        cond = plan_status.find_condition((plan or {}).get("status") or {}, "Complete") or {}
        if cond.get("status") == "True":
            return Verdict(done=True)
        if cond.get("status") == "False" and cond.get("reason") == "JobFailed":
            return Verdict(failed=f"{fail_msg}: {cond.get('message') or 'JobFailed'}")
        done = sum(1 for v in per_node.values() if v == ok)
        return Verdict(progress=f"nodes {verb} {done}/{total}")

    verdict = ctx.wait([Source.named(*c.SUC_PLAN, name, c.SUC_NS, key="plan"),
                        Source(*c.JOB, c.SUC_NS, selector({c.LABEL_SUC_PLAN: name}),
                               key="jobs")],
                       complete, suc_awaits(ctx, component))
    if verdict.failed:
        return Step("failed", verdict.failed)
    return Step("done")
