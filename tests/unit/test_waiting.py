"""``waiting.wait``: waiting by watch until a predicate over the watched objects says done or
failed, against a simulated cluster's API server.

The changes a test waits for are made from ``on_change`` (called in the waiting thread after
the first list and after each batch of events), so every test is driven by the events
themselves and none depends on how fast anything runs; only the timeout and slice tests let
time pass. A slice that ends returns the predicate's last, falsy, result.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from phase_child import Module

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import waiting
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import Kube

Source, Verdict, WaitTimeout = waiting.Source, waiting.Verdict, waiting.WaitTimeout
NS = "default"


@pytest.fixture(scope="module")
def kube(sim: Any) -> Kube:
    return Kube.from_module(Module({"kubeconfig": str(sim.kubeconfig)}, check_mode=False))


@pytest.fixture
def configmap(sim: Any) -> Callable[..., str]:
    """``configmap(**data)``: a new ConfigMap in ``default``; its name."""
    def make(**data: str) -> str:
        name = f"w-{uuid.uuid4().hex[:8]}"
        sim.world.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": name, "namespace": NS,
                                              "labels": {"test": "waiting"}},
                                 "data": data})
        return name
    return make


def value(snapshot: waiting.Snapshot, key: str = "cm") -> str | None:
    obj = waiting.only(snapshot, key)
    return None if obj is None else str((obj.get("data") or {}).get("v"))


def test_a_change_seen_by_the_watch_ends_the_wait(kube: Kube, sim: Any,
                                                  configmap: Callable[..., str]) -> None:
    name = configmap(v="1")
    seen: list[str] = []

    def pred(snapshot: waiting.Snapshot) -> Verdict:
        v = value(snapshot)
        return Verdict(done=True, progress="v=2") if v == "2" else Verdict(progress=f"v={v}")

    def on_change(snapshot: waiting.Snapshot) -> None:
        v = f"v={value(snapshot)}"
        if seen[-1:] != [v]:
            seen.append(v)
        if v == "v=1" and len(seen) == 1:   # listed: now change it, the watch brings it
            sim.world.client.patch("v1", "ConfigMap", name, {"data": {"v": "2"}}, NS)

    verdict = waiting.wait(kube, [Source.named("v1", "ConfigMap", name, NS, key="cm")],
                           pred, what="v=2", timeout=60, on_change=on_change)
    assert verdict and verdict.done and verdict.failed is None
    assert seen[:1] == ["v=1"]


def test_a_deleted_object_leaves_the_snapshot(kube: Kube, sim: Any,
                                              configmap: Callable[..., str]) -> None:
    name = configmap(v="1")

    def pred(snapshot: waiting.Snapshot) -> Verdict:
        return Verdict(done=True) if value(snapshot) is None else Verdict(progress="present")

    deleted: list[bool] = []

    def on_change(snapshot: waiting.Snapshot) -> None:
        if not deleted:
            deleted.append(True)
            sim.world.client.delete("v1", "ConfigMap", name, NS)

    verdict = waiting.wait(kube, [Source.named("v1", "ConfigMap", name, NS, key="cm")],
                           pred, what="deletion", timeout=60, on_change=on_change)
    assert verdict and verdict.done


def test_a_failed_verdict_is_returned_not_raised(kube: Kube,
                                                 configmap: Callable[..., str]) -> None:
    name = configmap(v="broken")

    def pred(snapshot: waiting.Snapshot) -> Verdict:
        return Verdict(failed=f"v is {value(snapshot)}")

    verdict = waiting.wait(kube, [Source.named("v1", "ConfigMap", name, NS, key="cm")],
                           pred, what="anything", timeout=60)
    assert verdict and verdict.failed == "v is broken" and not verdict.done


def test_the_predicate_sees_every_source_listed_and_only_what_each_selects(
        kube: Kube, configmap: Callable[..., str]) -> None:
    """Several sources: the predicate runs once all are listed, over one snapshot keyed by
    source; a named source holds that object only, a label selector what it selects."""
    first, second = configmap(v="a"), configmap(v="b")
    calls: list[dict[str, set[str]]] = []

    def pred(snapshot: waiting.Snapshot) -> Verdict:
        calls.append({k: {key.rsplit("/", 1)[-1] for key in v} for k, v in snapshot.items()})
        return Verdict(done=True)

    waiting.wait(kube, [Source.named("v1", "ConfigMap", first, NS, key="first"),
                        Source("v1", "ConfigMap", NS, label_selector="test=waiting",
                               key="labelled"),
                        Source("v1", "Namespace", key="namespaces")],
                 pred, what="all listed", timeout=60)
    assert len(calls) == 1
    assert calls[0]["first"] == {first}
    assert {first, second} <= calls[0]["labelled"]
    assert "kube-system" in calls[0]["namespaces"]   # cluster-scoped: keyed by name


def test_the_deadline_raises_naming_what_was_awaited_and_the_last_state(
        kube: Kube, configmap: Callable[..., str]) -> None:
    name = configmap(v="1")

    def pred(snapshot: waiting.Snapshot) -> Verdict:
        return Verdict(progress=f"v is still {value(snapshot)}")

    with pytest.raises(WaitTimeout) as err:
        waiting.wait(kube, [Source.named("v1", "ConfigMap", name, NS, key="cm")], pred,
                     what="v to become 2", timeout=3)
    assert err.value.what == "v to become 2"
    assert err.value.last_seen == "v is still 1"
    assert str(err.value).startswith("timed out after ")
    assert "waiting for v to become 2; last seen: v is still 1" in str(err.value)


def test_a_slice_ends_the_wait_early_as_pending(kube: Kube,
                                                configmap: Callable[..., str]) -> None:
    name = configmap(v="1")

    def pred(snapshot: waiting.Snapshot) -> Verdict:
        return Verdict(progress=f"v is still {value(snapshot)}")

    verdict = waiting.wait(kube, [Source.named("v1", "ConfigMap", name, NS, key="cm")],
                           pred, what="v to become 2", timeout=600, slice_seconds=3)
    assert not verdict and not verdict.done and verdict.progress == "v is still 1"
