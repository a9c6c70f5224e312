"""Parsing response bodies: a large one (a list of a cluster-wide set) is parsed with the
cyclic garbage collector paused and what it parsed is frozen, and the collector is left as it
was found afterwards, also when the parse fails and when threads parse side by side."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path
client = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client")


def body(items: int) -> bytes:
    return json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "7"},
                       "items": [{"metadata": {"name": f"p{i}", "labels": {"a": "b"}}}
                                 for i in range(items)]}).encode()


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether the collector was enabled during each json.loads the client made."""
    states: list[bool] = []
    real = json.loads

    def loads(data: Any) -> Any:
        states.append(gc.isenabled())
        return real(data)
    monkeypatch.setattr(client.json, "loads", loads)
    was = gc.isenabled()
    gc.enable()
    yield states
    if not was:
        gc.disable()


def test_large_body_parsed_with_gc_paused_then_resumed(seen: list[bool]) -> None:
    data = body(5000)
    assert len(data) >= client.BIG_BODY
    parsed = client._to_dict(type("Response", (), {"data": data})())
    assert len(parsed["items"]) == 5000
    assert seen == [False]
    assert gc.isenabled()


def tracked(obj: Any) -> bool:
    """``obj`` is in one of the collector's generations (frozen objects are in none)."""
    return any(o is obj for o in gc.get_objects())


def test_a_large_body_is_left_out_of_later_collections(seen: list[bool]) -> None:
    """What a large body parsed to is frozen: the informers keep it for the whole call and
    the collector's later passes would walk it again (docs/performance.md)."""
    try:
        parsed = client.loads_body(body(5000))
        assert gc.isenabled()
        small = client.loads_body(body(3))
        assert len(parsed["items"]) == 5000 and len(small["items"]) == 3
        assert not tracked(parsed["items"]) and not tracked(parsed["items"][0])
        assert tracked(small["items"]), "a small body is not frozen"
    finally:
        gc.unfreeze()


def test_small_body_leaves_gc_alone(seen: list[bool]) -> None:
    assert client.loads_body(body(3))["metadata"]["resourceVersion"] == "7"
    assert seen == [True]
    assert gc.isenabled()


def test_gc_resumed_after_a_body_that_does_not_parse(seen: list[bool]) -> None:
    with pytest.raises(ValueError):
        client.loads_body(b"{" + b" " * client.BIG_BODY)
    assert gc.isenabled()


def test_gc_disabled_by_someone_else_stays_disabled(seen: list[bool]) -> None:
    gc.disable()
    try:
        client.loads_body(body(5000))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_threads_parsing_side_by_side_resume_gc_once_all_are_done(
        monkeypatch: pytest.MonkeyPatch, seen: list[bool]) -> None:
    # the first parse waits until the second one has started: the second one ends first, and
    # the collector must stay paused until the first one is done too
    first_in, second_done = threading.Event(), threading.Event()
    real = client.json.loads
    during_first: list[bool] = []

    def loads(data: Any) -> Any:
        if not first_in.is_set():
            first_in.set()
            assert second_done.wait(5)
            during_first.append(gc.isenabled())
        return real(data)
    monkeypatch.setattr(client.json, "loads", loads)
    data = body(5000)
    t = threading.Thread(target=client.loads_body, args=(data,))
    t.start()
    assert first_in.wait(5)
    client.loads_body(data)
    second_done.set()
    t.join(5)
    assert during_first == [False]
    assert gc.isenabled()


def test_a_seeded_list_answers_the_wait_on_what_was_just_created() -> None:
    """A wait on an object the caller just created starts its watch from the create's answer
    (its resourceVersion) instead of listing it: once, for exactly that object."""
    calls: list[dict[str, Any]] = []

    class Res:
        def get(self, **kw: Any) -> Any:
            calls.append(kw)
            return type("R", (), {"data": json.dumps({"metadata": {"resourceVersion": "9"},
                                                      "items": []}).encode()})()

    kube = client.Kube(type("Dyn", (), {})())
    kube._resources[("batch/v1", "Job")] = Res()
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ns", "resourceVersion": "5"}}
    kube.seed(job)
    assert kube.list_with_rv("batch/v1", "Job", "ns", field_selector="metadata.name=other") \
        == ([], "9")
    items, rv = kube.list_with_rv("batch/v1", "Job", "ns", field_selector="metadata.name=j")
    assert (items, rv) == ([job], "5") and len(calls) == 1
    assert kube.list_with_rv("batch/v1", "Job", "ns", field_selector="metadata.name=j") \
        == ([], "9")                                       # once: then the server answers
    kube.seed({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}})
    assert kube.list_with_rv("batch/v1", "Job", None, field_selector="metadata.name=j") \
        == ([], "9")                                       # no resourceVersion: not seeded


def test_json_copy_is_a_deep_copy_of_decoded_objects() -> None:
    obj = json.loads(body(3))
    obj["status"] = {"n": 1, "f": 1.5, "ok": True, "none": None, "list": [[1], {"x": "y"}]}
    cp = client.json_copy(obj)
    assert cp == obj
    cp["items"][0]["metadata"]["labels"]["a"] = "changed"
    cp["status"]["list"][0].append(2)
    cp["status"]["list"][1]["x"] = "z"
    assert obj["items"][0]["metadata"]["labels"] == {"a": "b"}
    assert obj["status"]["list"] == [[1], {"x": "y"}]


def test_json_copy_copies_other_types_as_deepcopy_does() -> None:
    inner = {1, 2}
    cp = client.json_copy({"set": inner, "tuple": ([1],)})
    assert cp == {"set": {1, 2}, "tuple": ([1],)}
    cp["set"].add(3)
    cp["tuple"][0].append(2)
    assert inner == {1, 2}
