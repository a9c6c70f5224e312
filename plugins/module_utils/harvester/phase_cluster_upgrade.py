"""ClusterUpgrade: the Job that upgrades the cluster's charts and manifests, awaited until
it completes.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    manifests,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.phase_common import (
    server_version,
    version_of,
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


def entry(ctx: Context) -> str:
    """What :func:`cluster_upgrade` waits for (pipeline.run_phase's ``entry``)."""
    return f"Job {c.UPGRADE_NS}/{ctx.name}-cluster-upgrade to complete"


def cluster_upgrade(ctx: Context) -> Step:
    """Job ``<plan>-cluster-upgrade`` (``upgrade_manifests.sh``). The Rancher cluster is not
    touched here: its kubernetesVersion, provisionGeneration and upgradeStrategy are written
    together when NodeUpgrade begins (node_phase.start_rancher_upgrade)."""
    name = f"{ctx.name}-cluster-upgrade"
    # the ServiceAccount only shapes a Job still to be created (a resumed phase has it)
    if ctx.existing(*c.JOB, name, c.UPGRADE_NS) is None:
        sa = ctx.kube.get(*c.SERVICE_ACCOUNT, "harvester", c.UPGRADE_NS)
        ctx.ensure(manifests.cluster_upgrade_job(ctx.plan, "harvester" if sa else None))
    if ctx.check_mode:
        return Step("done", f"would wait for Job {name} to complete")

    seen: dict[str, Any] = {}   # the server-version Setting as the wait last saw it

    def finished(snapshot: Snapshot) -> Verdict:
        job = only(snapshot, "job")
        setting = seen["setting"] = only(snapshot, "setting") or {}
        running = f"Harvester server-version {setting.get('value') or '?'}"
        if job is None:
            return Verdict(progress=f"Job {name} not found; {running}")
        done = manifests.job_condition(job)
        if done and done[0] == "Complete":
            return Verdict(done=True)
        if done:
            why = ": ".join(x for x in done[1:] if x)
            return Verdict(failed="cluster-upgrade job failed" + (f": {why}" if why else ""))
        active = int((job.get("status") or {}).get("active") or 0)
        failures = int((job.get("status") or {}).get("failed") or 0)
        return Verdict(progress=f"job {'running' if active else 'pending'}"
                       + (f" ({failures} failed pods)" if failures else "") + f"; {running}")

    verdict = ctx.wait([Source.named(*c.JOB, name, c.UPGRADE_NS, key="job"),
                        Source.named(*c.SETTING, c.SERVER_VERSION_SETTING, key="setting")],
                       finished, entry(ctx))
    if verdict.failed:
        return Step("failed", verdict.failed)
    running = version_of(seen.get("setting")) or server_version(ctx.kube)
    return Step("done", f"cluster upgraded to {running}")


def verify_cluster(ctx: Context) -> str:
    job = ctx.kube.get(*c.JOB, f"{ctx.name}-cluster-upgrade", c.UPGRADE_NS)
    if job is None:
        return "cluster-upgrade Job already cleaned up"
    done = manifests.job_condition(job)
    return f"cluster-upgrade Job {done[0] if done else 'unfinished'}"
