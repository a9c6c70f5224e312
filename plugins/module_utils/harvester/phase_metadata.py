"""MetadataPopulate: the release file of the ISO, read from the upgrade repository into
``status.releaseMetadata``.
"""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.phase_common import (
    fetch_repo_file,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.pipeline import (
    Context,
    Step,
)

RELEASE_KEYS = ("harvester", "harvesterChart", "os", "kubernetes", "rancher",
                "monitoringChart", "minUpgradableVersion")


def metadata_populate(ctx: Context) -> Step:
    import yaml

    if ctx.check_mode:
        ctx.did(f"read {c.RELEASE_FILE} into status.releaseMetadata")
        return Step("done")
    status, body = fetch_repo_file(ctx, c.RELEASE_FILE, f"{c.RELEASE_FILE} from the repository")
    if status != 200:
        raise ApiError(status, "RepoError",
                       f"GET {c.RELEASE_FILE} from the upgrade repository: HTTP {status}")
    try:
        data = yaml.load(body,  # a safe loader: libyaml's when PyYAML has it
                         Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError as exc:
        raise ApiError(0, "BadMetadata", f"{c.RELEASE_FILE} is not YAML: {exc}") from exc
    meta = {k: str(data[k]) for k in RELEASE_KEYS if data.get(k) not in (None, "")}
    if "harvester" not in meta:
        raise ApiError(0, "BadMetadata", f"{c.RELEASE_FILE} has no 'harvester' key")
    ctx.writer.set_fields({"releaseMetadata": meta}, hold=True)   # with the completion
    return Step("done", f"release {meta['harvester']} (kubernetes {meta.get('kubernetes')}, "
                f"OS {meta.get('os')})", {"release_metadata": meta})


def verify_metadata(ctx: Context) -> str:
    meta = ctx.status.get("releaseMetadata") or {}
    return f"release {meta.get('harvester')}" if meta else "warning: releaseMetadata missing"
