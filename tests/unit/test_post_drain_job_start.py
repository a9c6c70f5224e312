"""The head start's start of a node's OS upgrade (node_job.start_post_drain_job): the Job
first, then the ``PostDraining`` it means, as upstream's secret controller and job controller
do them; only for a ``PreDrained`` node not on the release's OS yet; a Job that exists
already is left to the node's own cycle; nothing read before the Job is sent."""

from __future__ import annotations

from typing import Any

import pytest

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
client = pytest.importorskip(f"{_MU}.client")
nj = pytest.importorskip(f"{_MU}.node_job")

PLAN = "hvst-upgrade-abcde"
NODE = "n2"
NEW_OS = "Harvester v1.6.0"


class Writer:
    name = PLAN

    def __init__(self, log: list[str], state: str) -> None:
        self.log = log
        self.state = state
        self.plan = {"apiVersion": "management.harvesterhci.io/v1beta1", "kind": "UpgradePlan",
                     "metadata": {"name": PLAN, "uid": "u-1"}, "spec": {"upgrade": "v1.6.0"},
                     "status": {"releaseMetadata": {"os": NEW_OS, "kubernetes": "v1.33.3"}}}

    def node_state(self, node: str) -> str:
        return self.state

    def set_node_state(self, node: str, state: str, *_a: Any, **_kw: Any) -> bool:
        self.log.append(f"state {node} {state}")
        self.state = state
        return True

    def labels(self, component: str) -> dict[str, str]:
        return {"management.harvesterhci.io/upgrade-plan": PLAN}

    def owner_reference(self) -> dict[str, Any]:
        return {"apiVersion": self.plan["apiVersion"], "kind": "UpgradePlan", "name": PLAN,
                "uid": "u-1"}

    def refresh(self) -> dict[str, Any]:
        raise AssertionError("decides on the plan the caller read")


class Kube:
    check_mode = False

    def __init__(self, log: list[str], os_image: str = "Harvester v1.5.1",
                 exists: bool = False) -> None:
        self.log = log
        self.os_image = os_image
        self.exists = exists

    def get(self, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> dict[str, Any] | None:
        assert kind == "Node", f"read {kind} before the Job"
        return {"metadata": {"name": name}, "status": {"nodeInfo": {"osImage": self.os_image}}}

    def create_in(self, api_version: str, kind: str, body: dict[str, Any],
                  namespace: str) -> dict[str, Any]:
        self.log.append(f"create {kind} {body['metadata']['name']}")
        if self.exists:
            raise client.ApiError(409, "AlreadyExists", "jobs.batch already exists")
        return body


def test_the_job_goes_out_before_the_state_it_means() -> None:
    log: list[str] = []
    out = nj.start_post_drain_job(Kube(log), Writer(log, "PreDrained"), NODE)
    job = nj.job_name(PLAN, "post-drain", NODE)
    assert log == [f"create Job {job}", f"state {NODE} PostDraining"]
    assert out == {"changed": True, "job": job, "started": True}


def test_a_job_there_already_is_left_to_the_node_and_the_state_still_recorded() -> None:
    log: list[str] = []
    out = nj.start_post_drain_job(Kube(log, exists=True), Writer(log, "PreDrained"), NODE)
    assert log[-1] == f"state {NODE} PostDraining"
    assert out["started"] is False and out["changed"] is True


@pytest.mark.parametrize("state", ["PreDraining", "PostDraining", "WaitingReboot", ""])
def test_nothing_unless_the_node_is_pre_drained(state: str) -> None:
    log: list[str] = []
    out = nj.start_post_drain_job(Kube(log), Writer(log, state), NODE)
    assert log == [] and out["started"] is False and out["changed"] is False


def test_nothing_for_a_node_on_the_release_os_already() -> None:
    log: list[str] = []
    out = nj.start_post_drain_job(Kube(log, os_image=NEW_OS), Writer(log, "PreDrained"), NODE)
    assert log == [] and out["started"] is False


def test_another_refusal_of_the_job_is_raised() -> None:
    class Refusing(Kube):
        def create_in(self, *a: Any, **kw: Any) -> dict[str, Any]:
            raise client.ApiError(403, "Forbidden", "jobs.batch is forbidden")

    log: list[str] = []
    with pytest.raises(client.ApiError):
        nj.start_post_drain_job(Refusing(log), Writer(log, "PreDrained"), NODE)
    assert log == []
