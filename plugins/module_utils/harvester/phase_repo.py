"""RepoCreate: the upgrade repository (a Deployment serving the ISO and its Service), awaited
until it answers for the release file.
"""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    manifests,
    phase_iso_download,
    preflight_result,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.phase_common import (
    fetch_repo_file,
    managed_nodes,
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


def _ensure_repo(ctx: Context) -> None:
    _ns, iso_name, _image = phase_iso_download.iso_ref(ctx)
    # the nodes only size a Deployment still to be created (a resumed phase has it)
    if ctx.existing(*c.DEPLOYMENT, f"{ctx.name}-repo", c.UPGRADE_NS) is None:
        nodes = managed_nodes(ctx.kube)
        workers = [n for n in nodes if not preflight_result.is_witness(n)]
        replicas = 1 if len(workers) <= 1 else 2
        ctx.ensure(manifests.repo_deployment(ctx.plan, iso_name, replicas))
    ctx.ensure(manifests.repo_service(ctx.plan))


def entry(ctx: Context) -> str:
    """What :func:`repo_create` waits for first (pipeline.run_phase's ``entry``)."""
    return f"Deployment {c.UPGRADE_NS}/{ctx.name}-repo to be available"


def repo_create(ctx: Context) -> Step:
    _ensure_repo(ctx)
    name = f"{ctx.name}-repo"
    if ctx.check_mode:
        return Step("done", f"would wait for Deployment and Service {name} to serve the ISO")

    def ready(snapshot: Snapshot) -> Verdict:
        dep, svc = only(snapshot, "deployment"), only(snapshot, "service")
        if dep is None or int((dep.get("status") or {}).get("availableReplicas") or 0) < 1:
            return Verdict(progress="upgrade-repo deployment not ready")
        if svc is None or not (svc.get("spec") or {}).get("clusterIP"):
            return Verdict(progress="upgrade-repo svc/ep not ready")
        return Verdict(done=True)

    ctx.wait([Source.named(*c.DEPLOYMENT, name, c.UPGRADE_NS, key="deployment"),
              Source.named(*c.SERVICE, name, c.UPGRADE_NS, key="service")], ready,
             entry(ctx))
    status, _body = fetch_repo_file(ctx, c.RELEASE_FILE, f"the upgrade repository {name} to answer")
    if status != 200:
        return Step("failed", f"upgrade repository answered HTTP {status} for "
                    f"{c.RELEASE_FILE}; is {ctx.status.get('isoImageID')} a Harvester ISO?")
    return Step("done", f"upgrade repository {name} serves the ISO")


def verify_repo(ctx: Context) -> str:
    before = len(ctx.actions)
    _ensure_repo(ctx)
    return "upgrade repository re-created" if len(ctx.actions) > before else \
        "upgrade repository present"
