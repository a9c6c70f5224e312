"""informer.Informer: one list + one watch, read-your-writes by resourceVersion, replay for a
wait that subscribes after its snapshot, relist on 410, and going to the server when broken."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    cycle_kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.informer import (
    Informer,
    field_filter,
)

END = object()


def obj(name: str, rv: int, node: str = "n1", ns: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv)}
    if ns:
        meta["namespace"] = ns
    return {"metadata": meta, "spec": {"nodeName": node}}


class FakeServer:
    """A list answer and a watch fed by the test (``END`` ends a stream, an exception cuts
    it)."""

    def __init__(self, items: list[dict[str, Any]], rv: int) -> None:
        self.items, self.rv = items, rv
        self.events: queue.Queue[Any] = queue.Queue()
        self.lists = 0
        self.watches: list[str] = []

    def lister(self) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        return list(self.items), str(self.rv)

    def streamer(self, rv: str, timeout: int) -> Any:
        self.watches.append(rv)
        while True:
            ev = self.events.get()
            if ev is END:
                return
            if isinstance(ev, Exception):
                raise ev
            yield ev

    def send(self, etype: str, o: dict[str, Any]) -> None:
        self.events.put({"type": etype, "raw_object": o})


def until(cond: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def started(srv: FakeServer) -> Informer:
    inf = Informer("v1", "Pod", None, srv.lister, srv.streamer)
    inf.start()
    until(lambda: srv.watches)
    return inf


def names(snap: Any) -> list[str]:
    return sorted(o["metadata"]["name"] for o in snap[0])


def test_reads_come_from_one_list_and_follow_the_watch() -> None:
    srv = FakeServer([obj("a", 5), obj("b", 6)], 10)
    inf = started(srv)
    assert srv.watches == ["10"], "the watch starts at the list's resourceVersion"
    assert names(inf.snapshot()) == ["a", "b"]
    srv.send("ADDED", obj("c", 11))
    srv.send("DELETED", obj("a", 12))
    # our own write at rv 12: a read waits until the informer has seen it
    snap = inf.snapshot(min_rv=12)
    assert snap is not None and names(snap) == ["b", "c"] and snap[1] == "12"
    assert srv.lists == 1
    inf.stop()


def test_a_read_waits_for_our_write_and_gives_up_to_the_server() -> None:
    srv = FakeServer([obj("a", 5)], 10)
    inf = started(srv)
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(inf.snapshot(min_rv=11, timeout=30)))
    t.start()
    time.sleep(0.1)
    assert not out, "the write's event has not arrived: the read must wait"
    srv.send("MODIFIED", obj("a", 11))
    t.join(30)
    assert out and out[0][0][0]["metadata"]["resourceVersion"] == "11"
    assert inf.snapshot(min_rv=99, timeout=0.05) is None, "never seen: ask the server"
    inf.stop()


def test_a_subscriber_gets_what_happened_after_its_snapshot_and_what_comes() -> None:
    srv = FakeServer([obj("a", 5, node="n1"), obj("b", 6, node="n2")], 10)
    inf = started(srv)
    rv = inf.snapshot()[1]
    srv.send("MODIFIED", obj("a", 11, node="n1"))
    srv.send("MODIFIED", obj("b", 12, node="n2"))
    until(lambda: inf.seen() == 12)
    q: queue.Queue[Any] = queue.Queue()
    match = field_filter("spec.nodeName=n1")
    assert match is not None
    sub = inf.subscribe(rv, q, 3, match)
    assert sub is not None
    assert q.get(timeout=5)[0:2] == (3, "MODIFIED") and q.empty(), "replayed, n1 only"
    srv.send("ADDED", obj("c", 13, node="n1"))
    idx, etype, o = q.get(timeout=30)
    assert (idx, etype, o["metadata"]["name"]) == (3, "ADDED", "c")
    inf.unsubscribe(sub)
    srv.send("ADDED", obj("d", 14, node="n1"))
    until(lambda: inf.seen() == 14)
    assert q.empty()
    inf.stop()


def test_410_relists_tells_subscribers_the_difference_and_drops_the_history() -> None:
    srv = FakeServer([obj("a", 5), obj("b", 6)], 10)
    inf = started(srv)
    q: queue.Queue[Any] = queue.Queue()
    assert inf.subscribe("10", q, 0, lambda o: True) is not None
    srv.items, srv.rv = [obj("b", 20), obj("c", 21)], 22
    srv.send("ERROR", {"code": 410, "kind": "Status"})
    until(lambda: srv.lists == 2 and len(srv.watches) == 2)
    assert srv.watches[-1] == "22"
    got = {(e[1], e[2]["metadata"]["name"]) for e in (q.get(timeout=5) for _i in range(3))}
    assert got == {("DELETED", "a"), ("MODIFIED", "b"), ("MODIFIED", "c")}
    assert names(inf.snapshot()) == ["b", "c"]
    assert inf.subscribe("10", queue.Queue(), 0, lambda o: True) is None, \
        "the history no longer covers rv 10: the wait must watch the server itself"
    inf.stop()


def test_a_broken_watch_sends_readers_to_the_server() -> None:
    srv = FakeServer([obj("a", 5)], 10)
    inf = started(srv)
    srv.events.put(ConnectionError("cut"))
    until(lambda: not inf.healthy)
    t0 = time.monotonic()
    assert inf.snapshot(timeout=30) is None
    assert inf.lookup("a", timeout=30) is None
    # at once, not after the timeout: a quiet set's new watch may say nothing for a minute
    assert time.monotonic() - t0 < 10, "an unhealthy informer must not hold readers"
    srv.send("MODIFIED", obj("a", 11))      # the next stream connects and delivers
    until(lambda: inf.healthy)
    assert inf.snapshot()[1] == "11"
    inf.stop()


def test_resource_versions_that_are_not_integers_disable_the_informer() -> None:
    srv = FakeServer([obj("a", 5)], 10)
    srv.rv = "opaque"   # type: ignore[assignment]
    inf = Informer("v1", "Pod", None, srv.lister, srv.streamer)
    inf.start()
    assert not inf.usable and inf.snapshot(timeout=0.05) is None and not srv.watches


def test_field_filter_knows_only_the_selectors_it_can_evaluate() -> None:
    f = field_filter("metadata.name=x,spec.nodeName=n1")
    assert f is not None
    assert f({"metadata": {"name": "x"}, "spec": {"nodeName": "n1"}})
    assert not f({"metadata": {"name": "x"}, "spec": {"nodeName": "n2"}})
    assert field_filter("status.phase=Running") is None
    assert field_filter("metadata.name!=x") is None


class FakeCycleKube(cycle_kube.CycleKube):
    """CycleKube over a FakeServer (no HTTP): lists and watches come from ``srv``."""

    def __init__(self, srv: FakeServer) -> None:
        super().__init__(dyn=None)
        self.srv = srv
        self.server_lists = 0

    def resource(self, api_version: str, kind: str) -> Any:
        return (api_version, kind)

    def stream(self, res: Any, **kw: Any) -> Any:
        return self.srv.streamer(kw.get("resource_version") or "", 60)

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None, subresource: str | None = None) -> dict[str, Any]:
        self.srv.rv += 1
        o = obj(name, self.srv.rv)
        return self._write(api_version, kind, lambda: o)  # type: ignore[no-any-return]


def test_cycle_kube_reads_nodes_from_the_informer_and_sees_its_own_write(monkeypatch: Any
                                                                         ) -> None:
    srv = FakeServer([obj("n1", 5), obj("n2", 6)], 10)
    kube = FakeCycleKube(srv)

    def server_list(self: Any, api_version: str, kind: str, namespace: str | None = None,
                    label_selector: str | None = None, field_selector: str | None = None
                    ) -> tuple[list[dict[str, Any]], str]:
        kube.server_lists += 1
        return srv.lister()
    monkeypatch.setattr(cycle_kube.Kube, "list_with_rv", server_list)
    kube.begin_step("gate")
    assert [n["metadata"]["name"] for n in kube.list("v1", "Node")] == ["n1", "n2"]
    kube.begin_step("evacuate")
    assert len(kube.list("v1", "Node")) == 2
    assert kube.server_lists == 1 and kube.stats["informed"] == 2
    one = kube.list_with_rv("v1", "Node", field_selector="metadata.name=n2")[0]
    assert [n["metadata"]["name"] for n in one] == ["n2"]
    kube.patch("v1", "Node", "n1", {})          # rv 11: the next read must include it
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(kube.list("v1", "Node")))
    t.start()
    time.sleep(0.1)
    assert not out
    srv.send("MODIFIED", obj("n1", 11))
    t.join(30)
    assert {n["metadata"]["resourceVersion"] for n in out[0]} == {"11", "6"}
    # a label selector goes to the server
    kube.list("v1", "Node", label_selector="a=b")
    assert kube.server_lists == 2
    kube.close()


def test_cycle_kube_gets_by_name_from_the_informer_after_its_own_write(monkeypatch: Any
                                                                       ) -> None:
    srv = FakeServer([obj("n1", 5), obj("n2", 6)], 10)
    kube = FakeCycleKube(srv)
    server_gets: list[str] = []

    def server_list(self: Any, *a: Any, **kw: Any) -> tuple[list[dict[str, Any]], str]:
        kube.server_lists += 1
        return srv.lister()

    def server_get(self: Any, api_version: str, kind: str, name: str,
                   namespace: str | None = None) -> dict[str, Any] | None:
        server_gets.append(name)
        return obj(name, 1)
    monkeypatch.setattr(cycle_kube.Kube, "list_with_rv", server_list)
    monkeypatch.setattr(cycle_kube.Kube, "get", server_get)
    kube.begin_step("gate")
    got = kube.get("v1", "Node", "n2")
    assert got is not None and got["metadata"]["resourceVersion"] == "6"
    assert kube.get("v1", "Node", "gone") is None, "absent from a healthy informer: absent"
    got["metadata"]["name"] = "changed"          # callers get a copy, never the store's object
    assert kube.get("v1", "Node", "n2")["metadata"]["name"] == "n2"  # type: ignore[index]
    assert server_gets == [] and kube.server_lists == 1
    kube.patch("v1", "Node", "n1", {})           # rv 11: a get must wait for its event
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(kube.get("v1", "Node", "n1")))
    t.start()
    time.sleep(0.1)
    assert not out
    srv.send("MODIFIED", obj("n1", 11))
    t.join(30)
    assert out[0]["metadata"]["resourceVersion"] == "11"
    # a kind without an informer goes to the server
    kube.get("v1", "ConfigMap", "x", "default")
    assert server_gets == ["x"]
    kube.close()


def test_an_error_event_backs_off_and_sends_readers_to_the_server() -> None:
    srv = FakeServer([obj("a", 5)], 10)

    def erroring(rv: str, timeout: int) -> Any:
        srv.watches.append(rv)
        yield {"type": "ERROR", "raw_object": {"code": 500, "message": "etcd is sad"}}
    srv.streamer = erroring  # type: ignore[method-assign]
    inf = Informer("v1", "Pod", None, srv.lister, srv.streamer)
    inf.start()
    until(lambda: srv.watches)
    time.sleep(0.5)
    assert len(srv.watches) <= 4, f"reconnects back off, not at once: {len(srv.watches)}"
    assert inf.snapshot(timeout=0.05) is None, "a failing watch: readers ask the server"
    assert srv.lists == 1, "an error other than 410 does not relist"
    inf.stop()


def test_a_read_of_one_nodes_objects_follows_binding_moves_and_deletes() -> None:
    srv = FakeServer([obj("a", 5, "n1"), obj("b", 6, "n2"), obj("u", 7, "")], 10)
    inf = started(srv)
    by = field_filter("spec.nodeName=n1")
    assert names(inf.snapshot(match=by, node="n1")) == ["a"]
    srv.send("MODIFIED", obj("u", 11, "n1"))      # bound
    srv.send("MODIFIED", obj("b", 12, "n1"))      # (as a relist would show a move)
    srv.send("MODIFIED", obj("a", 13, "n2"))
    srv.send("ADDED", obj("c", 14, "n1"))
    srv.send("DELETED", obj("c", 15, "n1"))
    until(lambda: inf.seen() == 15)
    assert names(inf.snapshot(match=by, node="n1")) == ["b", "u"]
    assert names(inf.snapshot(match=field_filter("spec.nodeName=n2"), node="n2")) == ["a"]
    assert names(inf.snapshot(node="n3")) == []
    # a relist (410) starts the index again from the list
    srv.items, srv.rv = [obj("a", 20, "n1")], 20
    srv.send("ERROR", {"code": 410})
    until(lambda: inf.seen() == 20)
    assert names(inf.snapshot(match=by, node="n1")) == ["a"]
    assert names(inf.snapshot(node="n2")) == []
    inf.stop()


def test_the_node_a_field_selector_names() -> None:
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.informer import (
        selected_node,
    )
    assert selected_node("spec.nodeName=n1") == "n1"
    assert selected_node("metadata.namespace=x,spec.nodeName=n1") == "n1"
    for sel in (None, "", "spec.nodeName=", "spec.nodeName!=n1", "metadata.name=n1",
                "spec.nodeName==n1"):
        assert selected_node(sel) is None, sel


def test_indexers_follow_events_and_start_again_on_a_relist() -> None:
    def color(o: dict[str, Any]) -> str | None:
        return (o.get("spec") or {}).get("color")

    def painted(name: str, rv: int, c: str | None) -> dict[str, Any]:
        o = obj(name, rv)
        o["spec"]["color"] = c
        return o
    srv = FakeServer([painted("a", 5, "red"), painted("b", 6, "blue"), painted("c", 7, None)],
                     10)
    inf = Informer("v1", "Pod", None, srv.lister, srv.streamer, indexers={"color": color})
    inf.start()
    until(lambda: srv.watches)
    assert inf.indexed("color") == {"red", "blue"}
    assert inf.indexed("nope") is None, "no such index: the caller reads the set"
    srv.send("MODIFIED", painted("b", 11, "red"))   # moves
    srv.send("MODIFIED", painted("c", 12, "green"))  # gets indexed
    srv.send("DELETED", painted("a", 13, "red"))
    until(lambda: inf.seen() == 13)
    assert inf.indexed("color") == {"red", "green"}, "an emptied value is gone"
    red = inf.indexed("color", "red")
    assert isinstance(red, list) and names((red, "")) == ["b"]
    assert inf.indexed("color", "blue") == []
    # a read waits for what it must see, as snapshot does
    assert inf.indexed("color", None, min_rv=99, timeout=0.05) is None
    # the node index is kept beside the caller's
    assert names(inf.snapshot(node="n1")) == ["b", "c"]
    srv.items, srv.rv = [painted("z", 20, "blue")], 20
    srv.send("ERROR", {"code": 410})
    until(lambda: inf.seen() == 20)
    assert inf.indexed("color") == {"blue"}
    inf.stop()


def test_cycle_kube_keeps_the_longhorn_indexes_on_the_replica_informer(monkeypatch: Any
                                                                       ) -> None:
    def replica(name: str, rv: int, node: str, volume: str, state: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "longhorn-system",
                             "resourceVersion": str(rv)},
                "spec": {"nodeID": node, "volumeName": volume,
                         "healthyAt": "2026-01-01T00:00:00Z"},
                "status": {"currentState": state}}
    srv = FakeServer([replica("r1", 5, "n1", "v1", "running"),
                      replica("r2", 6, "n2", "v1", "error"),
                      replica("r3", 7, "n2", "v2", "running")], 10)
    kube = FakeCycleKube(srv)
    monkeypatch.setattr(cycle_kube.Kube, "list_with_rv",
                        lambda self, *a, **k: srv.lister())
    lh = ("longhorn.io/v1beta2", "Replica", "longhorn-system")
    assert kube.by_index(*lh, "healthy") == {"v1", "v2"}
    on_n2 = kube.by_index(*lh, "spec.nodeID", "n2")
    assert isinstance(on_n2, list) and names((on_n2, "")) == ["r2", "r3"]
    srv.send("MODIFIED", replica("r3", 11, "n2", "v2", "error"))
    until(lambda: kube.by_index(*lh, "healthy") == {"v1"})
    assert kube.stats["lists"] == 1, "one list: the indexes are read from the informer"
    # a set without an informer: the caller reads it itself
    assert kube.by_index("v1", "ConfigMap", "x", "healthy") is None
    kube.close()


def test_totals_follow_events_and_start_again_on_a_relist() -> None:
    def weighed(name: str, rv: int, node: str, w: int) -> dict[str, Any]:
        o = obj(name, rv, node)
        o["spec"]["w"] = w
        return o

    def weight(o: dict[str, Any]) -> tuple[str, tuple[int, ...]] | None:
        node = o["spec"]["nodeName"]
        return (node, (o["spec"]["w"], 1)) if node else None
    srv = FakeServer([weighed("a", 5, "n1", 3), weighed("b", 6, "n1", 4),
                      weighed("c", 7, "", 9)], 10)
    inf = Informer("v1", "Pod", None, srv.lister, srv.streamer, totals={"w": weight})
    inf.start()
    until(lambda: srv.watches)
    assert inf.totalled("w") == {"n1": (7, 2)}
    assert inf.totalled("nope") is None
    srv.send("MODIFIED", weighed("b", 11, "n2", 5))     # moves, and weighs more
    srv.send("MODIFIED", weighed("c", 12, "n2", 1))     # bound
    srv.send("DELETED", weighed("a", 13, "n1", 3))
    until(lambda: inf.seen() == 13)
    assert inf.totalled("w") == {"n1": (0, 0), "n2": (6, 2)}
    srv.items, srv.rv = [weighed("z", 20, "n3", 2)], 20
    srv.send("ERROR", {"code": 410})
    until(lambda: inf.seen() == 20)
    assert inf.totalled("w") == {"n3": (2, 1)}
    inf.stop()
