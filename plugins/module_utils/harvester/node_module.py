"""Module boilerplate shared by the node-loop modules: the argument spec (kubernetes.core's
auth options + ``plan``) and a runner mapping node-loop errors to ``fail_json``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    args,
    lock,
    module_factory,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    Kube,
    warn_insecure,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    NoActivePlan,
    PlanWriter,
    find_plan,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    WaitTimeout,
)


def argument_spec(**extra: Any) -> dict[str, Any]:
    return args.spec({"plan": {"type": "str"}}, **extra)


def new_module(spec: dict[str, Any], **kw: Any) -> AnsibleModule:
    return module_factory.new_module(spec, supports_check_mode=True, **kw)


def kube_for(module: AnsibleModule, client: type[Kube] = Kube) -> Kube:
    auth = {k: module.params.get(k) for k in args.AUTH_ARG_SPEC
            if module.params.get(k) is not None}
    warn_insecure(module, auth)
    try:
        kube = client.from_options(**auth)
    except ApiError as exc:
        module.fail_json(msg=exc.message)
        raise  # fail_json does not return; a test double's might
    kube.check_mode = module.check_mode
    kube.identify(module)
    return kube


NO_PLAN_FIELDS: dict[str, Any] = {"todo": [], "done": [], "paused": False, "phase": "",
                                  "single_node": False, "pending": [], "passed": False}


def run(module: AnsibleModule, step: Callable[[Kube, PlanWriter], dict[str, Any]],
        *, need_plan: bool = True, skip_without_plan: bool = False,
        client: type[Kube] = Kube,
        extra: Callable[[Kube | None, PlanWriter | None], dict[str, Any]] | None = None,
        no_plan_fields: dict[str, Any] | None = None) -> None:
    """Run ``step`` with the plan's writer; errors become ``fail_json``.

    ``skip_without_plan``: when no plan is named and none is active (nothing to upgrade, e.g.
    the cluster is already on the newest release), exit unchanged with ``status: no_plan``
    instead of failing, as the cluster phases do (``no_plan_fields`` are the module's result
    fields for that exit). ``client``: the client class (a subclass of Kube). ``extra``: fields
    added to every exit, success or failure (called with the client and writer built so far);
    without it, a success reports ``plan`` and ``events``."""
    kube: Kube | None = None
    writer: PlanWriter | None = None

    def more() -> dict[str, Any]:
        return extra(kube, writer) if extra is not None else {}

    try:
        kube = kube_for(module, client)
        if need_plan:
            try:
                writer = PlanWriter(kube, find_plan(kube, module.params.get("plan")))
                lock.hold(kube, module)   # fails at once if another run holds the lock
            except NodeLoopError as exc:
                no_plan = isinstance(exc, NoActivePlan)
                if not (module.check_mode or (no_plan and skip_without_plan)):
                    raise
                msg = (f"{exc}: NodeUpgrade has nothing to do" if no_plan
                       else f"check mode: {exc}")
                fields = dict(NO_PLAN_FIELDS if no_plan_fields is None else no_plan_fields)
                fields.update(more())
                module.exit_json(changed=False, skipped=True, status="no_plan", msg=msg,
                                 **fields)
        result = step(kube, writer)  # type: ignore[arg-type]
    except WaitTimeout as exc:
        module.fail_json(msg=str(exc), awaited=exc.what, last_seen=exc.last_seen, **more())
    except NodeLoopError as exc:
        module.fail_json(msg=str(exc), **more())
    except Exception as exc:  # noqa: BLE001 - API/transport errors, shown to the operator
        body = getattr(exc, "body", None) or getattr(exc, "summary", lambda: "")()
        module.fail_json(msg=f"{type(exc).__name__}: {exc}", error=str(body)[:2000], **more())
    result.setdefault("changed", False)
    if extra is not None:
        result.update(more())
    elif writer is not None:
        result["plan"] = writer.name
        result["events"] = writer.events
    module.exit_json(**result)
