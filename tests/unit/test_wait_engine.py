"""waiting.wait, the one wait of the collection: what it returns (a predicate's truthy result,
or its last falsy one when a slice ends), what a timeout says, the watch resumed after a 410,
and a caching layer's feed taking the place of the server's watch."""

from __future__ import annotations

import queue
from typing import Any

import pytest

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    errors,
    waiting,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source,
    Verdict,
    WaitTimeout,
)


def pod(name: str, phase: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)},
            "status": {"phase": phase}}


class FakeKube:
    """``list_with_rv``, ``resource`` and ``stream`` of client.Kube: a list answer (changed
    by ``relist``) and watch streams fed from ``streams`` (one list of events per stream; a
    stream blocks once its events are delivered)."""

    def __init__(self, items: list[dict[str, Any]], streams: list[list[dict[str, Any]]]
                 ) -> None:
        self.items, self.streams = items, streams
        self.lists: list[tuple[Any, ...]] = []
        self.watched_from: list[str | None] = []
        self.relist: list[dict[str, Any]] | None = None

    def list_with_rv(self, *args: Any) -> tuple[list[dict[str, Any]], str]:
        self.lists.append(args)
        if len(self.lists) > 1 and self.relist is not None:
            return list(self.relist), "20"
        return list(self.items), "10"

    def resource(self, api_version: str, kind: str) -> Any:
        return (api_version, kind)

    def stream(self, res: Any, **kw: Any) -> Any:
        self.watched_from.append(kw.get("resource_version"))
        if self.streams:
            yield from self.streams.pop(0)
        blocked: queue.Queue[Any] = queue.Queue()
        blocked.get()   # a quiet stream; the wait ends without it


def running(snapshot: waiting.Snapshot) -> Any:
    return [k for k, p in snapshot["Pod"].items() if p["status"]["phase"] == "Running"]


PODS = Source("v1", "Pod", "ns")


def test_a_predicate_true_on_the_list_ends_the_wait_without_a_watch() -> None:
    kube = FakeKube([pod("a", "Running", 5)], [])
    assert waiting.wait(kube, [PODS], running, what="pods", timeout=60) == ["ns/a"]
    assert kube.lists == [("v1", "Pod", "ns", None, None)] and kube.watched_from == []


def test_events_after_the_list_are_applied_and_the_truthy_result_returned() -> None:
    kube = FakeKube([pod("a", "Pending", 5)],
                    [[{"type": "BOOKMARK", "raw_object": {"metadata": {"resourceVersion": "11"}}},
                      {"type": "ADDED", "raw_object": pod("b", "Pending", 12)},
                      {"type": "MODIFIED", "raw_object": pod("b", "Running", 13)}]])
    seen: list[int] = []
    result = waiting.wait(kube, [PODS], running, what="pods", timeout=60,
                          on_change=lambda snap: seen.append(len(snap["Pod"])))
    assert result == ["ns/b"]
    assert kube.watched_from == ["10"]       # from the list's resourceVersion
    assert seen[0] == 1 and seen[-1] == 2


def test_a_410_relists_and_the_difference_arrives_as_events() -> None:
    gone = {"type": "ERROR", "raw_object": {"code": 410, "message": "too old"}}
    kube = FakeKube([pod("a", "Pending", 5), pod("b", "Pending", 6)], [[gone]])
    kube.relist = [pod("a", "Pending", 15)]     # b was deleted while the watch was gone

    def b_gone(snapshot: waiting.Snapshot) -> Any:
        return "ns/b" not in snapshot["Pod"] and sorted(snapshot["Pod"])

    assert waiting.wait(kube, [PODS], b_gone, what="b gone", timeout=60) == ["ns/a"]
    assert len(kube.lists) == 2


def test_the_deadline_raises_wait_timeout_with_what_was_seen() -> None:
    kube = FakeKube([pod("a", "Pending", 5)], [])
    with pytest.raises(WaitTimeout) as exc:
        waiting.wait(kube, [PODS], running, what="pod a to run", timeout=0,
                     describe=lambda snap: f"{len(snap['Pod'])} pod(s) pending")
    assert exc.value.what == "pod a to run" and exc.value.last_seen == "1 pod(s) pending"
    assert str(exc.value) == ("timed out after 0s waiting for pod a to run; "
                              "last seen: 1 pod(s) pending")
    assert isinstance(exc.value, errors.NodeLoopError)   # a node step's error, too


def test_a_verdict_is_truthy_when_done_or_failed_and_its_progress_is_the_last_seen() -> None:
    assert not Verdict(progress="x") and Verdict(done=True) and Verdict(failed="why")
    kube = FakeKube([pod("a", "Pending", 5)], [])

    def verdict(snapshot: waiting.Snapshot) -> Verdict:
        return Verdict(progress=f"{len(snapshot['Pod'])} pending")

    with pytest.raises(WaitTimeout, match="last seen: 1 pending"):
        waiting.wait(kube, [PODS], verdict, what="pods", timeout=0)
    # a slice that ends first returns the last (falsy) verdict instead of raising
    out = waiting.wait(kube, [PODS], verdict, what="pods", timeout=3600, slice_seconds=0.01)
    assert isinstance(out, Verdict) and not out and out.progress == "1 pending"


def test_a_caching_layer_feeds_the_wait_instead_of_the_server() -> None:
    kube = FakeKube([pod("a", "Pending", 5)], [])
    subscribed: list[tuple[str, str, int]] = []
    unsubscribed: list[bool] = []

    def subscribe(source: Source, rv: str, out: queue.Queue[Any], idx: int) -> Any:
        subscribed.append((source.kind, rv, idx))
        out.put((idx, "MODIFIED", pod("a", "Running", 11)))
        return lambda: unsubscribed.append(True)

    assert waiting.wait(kube, [PODS], running, what="pods", timeout=60,
                        subscribe=subscribe) == ["ns/a"]
    assert subscribed == [("Pod", "10", 0)] and unsubscribed == [True]
    assert kube.watched_from == []
