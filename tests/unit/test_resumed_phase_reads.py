"""A phase started by the call before (``then``) is resumed by its own task, which finds the
objects that call created: what it reads again is only what it decides on (docs/performance.md
"API requests, round three"). The object it reads answers the wait on it (no list before
the watch); what only shapes an object still to be created (the nodes for the repository's
replicas, the ServiceAccount of the cluster-upgrade Job, the image lists and pods behind the
cleanup Plan's images) is not read when the object is there."""

from __future__ import annotations

import time
from typing import Any

import pytest

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
c = pytest.importorskip(f"{_MU}.constants")
pipeline = pytest.importorskip(f"{_MU}.pipeline")
waiting = pytest.importorskip(f"{_MU}.waiting")
phase_repo = pytest.importorskip(f"{_MU}.phase_repo")
phase_cluster_upgrade = pytest.importorskip(f"{_MU}.phase_cluster_upgrade")
phase_image_cleanup = pytest.importorskip(f"{_MU}.phase_image_cleanup")

PLAN = "hvst-upgrade-abcde"


class Kube:
    """Answers reads from ``objects`` (keyed by kind and name) and records every request."""

    check_mode = False

    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.requests: list[tuple[str, ...]] = []
        self.seeded: list[str] = []
        self.waited: list[list[str]] = []

    def get(self, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> dict[str, Any] | None:
        self.requests.append(("get", kind, name))
        return self.objects.get((kind, name))

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        self.requests.append(("list", kind))
        return [o for (k, _n), o in self.objects.items() if k == kind]

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(("create", obj["kind"], obj["metadata"]["name"]))
        made = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "7"}}
        self.objects[(obj["kind"], obj["metadata"]["name"])] = made
        return made

    def seed(self, obj: dict[str, Any]) -> None:
        self.seeded.append(f"{obj['kind']}/{obj['metadata']['name']}")

    def raw_get(self, path: str, timeout: float = 30.0) -> tuple[int, bytes]:
        self.requests.append(("proxy", path))
        return 200, b"harvester: v1.6.0\n"

    def wait(self, sources: list[Any], predicate: Any, **_kw: Any) -> Any:
        self.waited.append([s.kind for s in sources])
        return waiting.Verdict(done=True)


class Writer:
    def __init__(self, status: dict[str, Any]) -> None:
        self.plan = {"apiVersion": c.PLAN_API_VERSION, "kind": c.PLAN_KIND,
                     "metadata": {"name": PLAN, "uid": "u1", "generation": 1},
                     "spec": {"version": "v1.6.0"}, "status": status}
        self.name, self.generation, self.annotations = PLAN, 1, {}
        self.states: dict[str, Any] = {}

    @property
    def status(self) -> dict[str, Any]:
        return self.plan["status"]

    def now(self) -> str:
        return "2026-11-27T00:00:00Z"

    def update(self, _mutate: Any) -> bool:
        return False

    def set_node_states(self, states: dict[str, Any], *, hold: bool = False) -> bool:
        self.states.update(states)
        return True


def obj(kind: str, name: str, **extra: Any) -> dict[str, Any]:
    api = {"Deployment": "apps/v1", "Service": "v1", "Job": "batch/v1",
           "Plan": "upgrade.cattle.io/v1", "Node": "v1"}[kind]
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "resourceVersion": "5",
                                                          "labels": {c.LABEL_MANAGED: "true"}},
            **extra}


def context(kube: Kube, *, entered: bool, status: dict[str, Any] | None = None
            ) -> pipeline.Context:
    ctx = pipeline.Context(kube, Writer(status or {}), {}, False,  # type: ignore[arg-type]
                           time.time() + 60, None)
    ctx.entered = entered
    return ctx


def test_a_resumed_repo_reads_its_objects_once_and_not_the_nodes() -> None:
    kube = Kube({("Deployment", f"{PLAN}-repo"): obj("Deployment", f"{PLAN}-repo"),
                 ("Service", f"{PLAN}-repo"): obj("Service", f"{PLAN}-repo"),
                 ("Node", "n1"): obj("Node", "n1")})
    step = phase_repo.repo_create(context(kube, entered=False))
    assert step.state == "done", step
    assert ("list", "Node") not in kube.requests, kube.requests
    assert [r for r in kube.requests if r[0] == "get"] == [
        ("get", "Deployment", f"{PLAN}-repo"), ("get", "Service", f"{PLAN}-repo")]
    # what was read answers the wait on it
    assert kube.seeded == [f"Deployment/{PLAN}-repo", f"Service/{PLAN}-repo"]


def test_an_entered_repo_creates_first_and_a_missing_one_is_created_after_one_read() -> None:
    kube = Kube({("Node", "n1"): obj("Node", "n1"), ("Node", "n2"): obj("Node", "n2")})
    ctx = context(kube, entered=True)
    ctx.start_only = True
    with pytest.raises(pipeline.Pending):
        phase_repo.repo_create(ctx)
    assert kube.requests == [("list", "Node"), ("create", "Deployment", f"{PLAN}-repo"),
                             ("create", "Service", f"{PLAN}-repo")], kube.requests
    # resumed, but the Deployment is gone (a run killed between the entry and the create)
    del kube.objects[("Deployment", f"{PLAN}-repo")]
    kube.requests.clear()
    phase_repo.repo_create(context(kube, entered=False))
    assert kube.requests[:4] == [("get", "Deployment", f"{PLAN}-repo"), ("list", "Node"),
                                 ("create", "Deployment", f"{PLAN}-repo"),
                                 ("get", "Service", f"{PLAN}-repo")], kube.requests


def test_a_resumed_cluster_upgrade_does_not_read_the_service_account() -> None:
    name = f"{PLAN}-cluster-upgrade"
    kube = Kube({("Job", name): obj("Job", name)})
    step = phase_cluster_upgrade.cluster_upgrade(context(kube, entered=False))
    assert step.state == "done", step
    assert ("get", "ServiceAccount", "harvester") not in kube.requests, kube.requests
    assert kube.seeded == [f"Job/{name}"]


def test_a_resumed_image_cleanup_removes_what_its_plan_names_without_reading_the_lists() -> None:
    name = f"{PLAN}-{c.COMPONENT_IMAGE_CLEANUP}"
    plan = obj("Plan", name, spec={"upgrade": {"envs": [
        {"name": "HARVESTER_UPGRADEPLAN_NAME", "value": PLAN},
        {"name": "IMAGES", "value": "old/a:1 old/b:2"}]}})
    kube = Kube({("Plan", name): plan, ("Node", "n1"): obj("Node", "n1")})
    step = phase_image_cleanup.image_cleanup(context(
        kube, entered=False, status={"previousVersion": "v1.5.2",
                                     "releaseMetadata": {"harvester": "v1.6.0"}}))
    assert step.state == "done" and step.facts == {"images_removed": 2}, step
    assert not [r for r in kube.requests if r[0] == "proxy"], kube.requests
    assert ("list", "Pod") not in kube.requests, kube.requests
    assert kube.seeded == [f"Plan/{name}"]
    assert phase_image_cleanup.planned_images(plan) == ["old/a:1", "old/b:2"]
