"""object_memo.ObjectMemo: computed once per object version (uid + resourceVersion); a new
version, another object, or an object without both is computed again; past its limit it
starts again. And the capacity plan's node view sums the pods as they are now."""

from __future__ import annotations

from typing import Any

import pytest

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
om = pytest.importorskip(f"{_MU}.object_memo")
ev = pytest.importorskip(f"{_MU}.evacuation")


def obj(uid: str | None, rv: str | None, value: int) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "x"}
    if uid:
        md["uid"] = uid
    if rv:
        md["resourceVersion"] = rv
    return {"metadata": md, "value": value}


def test_once_per_version_again_for_a_new_one() -> None:
    calls: list[int] = []

    def fn(o: dict[str, Any]) -> int:
        calls.append(o["value"])
        return int(o["value"]) * 10

    memo = om.ObjectMemo(fn)
    assert memo(obj("a", "1", 1)) == 10
    assert memo(obj("a", "1", 1)) == 10          # the same version, another parse of it
    assert memo(obj("a", "2", 2)) == 20          # the object changed
    assert memo(obj("b", "2", 3)) == 30          # another object
    assert calls == [1, 2, 3]


@pytest.mark.parametrize("uid,rv", [(None, "1"), ("a", None), (None, None)])
def test_an_object_without_uid_and_version_is_looked_at_every_time(uid: Any, rv: Any) -> None:
    calls: list[int] = []
    memo = om.ObjectMemo(lambda o: calls.append(1) or len(calls))
    memo(obj(uid, rv, 1))
    memo(obj(uid, rv, 1))
    assert calls == [1, 1]


def test_past_its_limit_it_starts_again() -> None:
    calls: list[str] = []
    memo = om.ObjectMemo(lambda o: calls.append(o["metadata"]["uid"]) or 0, limit=2)
    for uid in ("a", "b", "c", "a"):
        memo(obj(uid, "1", 0))
    assert calls == ["a", "b", "c", "a"]   # "a" was dropped when "c" came


def pod(uid: str, rv: str, node: str, phase: str = "Running", cpu: str = "2") -> dict[str, Any]:
    return {"metadata": {"name": uid, "uid": uid, "resourceVersion": rv},
            "spec": {"nodeName": node, "containers": [{"resources": {"requests": {
                "cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": phase}}


def test_the_node_view_counts_each_pod_as_its_version_says() -> None:
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}}
    pods = [pod("p1", "1", "n1"), pod("p2", "1", "n1"), pod("p3", "1", "n2")]
    assert ev.node_view(node, pods).req_cpu_m == 4000
    # p2 finished, p1 got another request in a new version, p3 moved here
    pods = [pod("p1", "2", "n1", cpu="3"), pod("p2", "2", "n1", phase="Succeeded"),
            pod("p3", "2", "n1")]
    view = ev.node_view(node, pods)
    assert view.req_cpu_m == 5000 and view.req_mem == 2 * 1024 ** 3


def test_pods_looked_at_beforehand_are_not_looked_at_again_unless_changed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}}
    pods = [pod(f"w{i}", "1", "n1") for i in range(5)]
    assert ev.node_view(node, pods).req_cpu_m == 5 * 2000
    seen: list[str] = []
    real = ev.pod_requests
    monkeypatch.setattr(ev, "pod_requests",
                        lambda p: seen.append(p["metadata"]["uid"]) or real(p))
    changed = [*pods[:4], pod("w4", "2", "n1", cpu="1")]
    assert ev.node_view(node, changed).req_cpu_m == 4 * 2000 + 1000
    assert seen == ["w4"]
