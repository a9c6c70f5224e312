"""Node-scoped reads (docs/performance.md "Node-scoped reads"): a node's steps read the VMIs
labelled ``kubevirt.io/nodeName=<node>`` instead of every VMI in the cluster, and decide as
the whole-cluster read did — a VMI on another node does not matter, a migrating VMI is judged
by its ``status.nodeName`` while it is in the node's set and is moved once it left it — and
CycleKube follows such a set with an informer of its own."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    cycle_kube,
    node_evacuation,
    node_facts,
    node_migrations,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    evacuation as ev,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.informer import (
    label_filter,
)

VMI_KIND = "VirtualMachineInstance"
LABEL = node_facts.VMI_NODE_LABEL


def vmi(name: str, label: str | None, node: str | None, phase: str = "Running",
        rv: int = 1) -> dict[str, Any]:
    """A VMI as KubeVirt writes it: ``label`` is its ``kubevirt.io/nodeName``, ``node`` its
    ``status.nodeName`` (KubeVirt changes both in one update; the simulator in two)."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "resourceVersion": str(rv),
                            "labels": {LABEL: label} if label else {}}
    st: dict[str, Any] = {"phase": phase}
    if node:
        st["nodeName"] = node
    return {"apiVersion": "kubevirt.io/v1", "kind": VMI_KIND, "metadata": meta, "status": st}


def selected(objs: list[dict[str, Any]], label_selector: str | None) -> list[dict[str, Any]]:
    match = label_filter(label_selector)
    assert match is not None, label_selector
    return [o for o in objs if match(o)]


def test_on_node_is_kubevirts_label() -> None:
    assert node_facts.on_node("node-1") == "kubevirt.io/nodeName=node-1"
    f = label_filter(node_facts.on_node("node-1"))
    assert f is not None and f(vmi("a", "node-1", "node-1")) and not f(vmi("b", "node-2", None))
    assert label_filter("a in (b)") is None and label_filter("a!=b") is None
    assert label_filter("a") is None


# -- the evacuation's plan -------------------------------------------------------------------
class _ClusterKube:
    """``list`` of a cluster's objects, honouring label selectors as the API server does;
    records every VMI read's selector."""

    check_mode = False

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects
        self.vmi_reads: list[str | None] = []

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None
             ) -> list[dict[str, Any]]:
        if kind == VMI_KIND:
            self.vmi_reads.append(label_selector)
        return selected(self.objects.get(kind, []), label_selector)


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


CLUSTER_VMIS = [
    vmi("on-1", "node-1", "node-1"),            # runs on node-1: planned
    vmi("on-2", "node-2", "node-2"),            # another node's: must not matter
    vmi("moving", "node-1", "node-2"),          # migration acknowledged, label not yet moved
    vmi("moved", "node-2", "node-2"),           # migrated off node-1 earlier
    vmi("scheduling", "node-1", None, "Scheduling"),   # label written before status (sim.)
    vmi("done", "node-1", "node-1", "Succeeded"),      # stopped: not active
]


def test_the_plan_reads_the_nodes_vmis_only_and_plans_what_the_cluster_read_planned() -> None:
    kube = _ClusterKube({"Node": [_node("node-1"), _node("node-2")], "Pod": [],
                         VMI_KIND: CLUSTER_VMIS})
    facts = [{"name": "node-1", "upgraded": False, "order": 0},
             {"name": "node-2", "upgraded": True, "order": 1}]
    _nodes, vms = node_evacuation.evacuation_views(kube, None, facts,  # type: ignore[arg-type]
                                                   only_node="node-1")
    assert kube.vmi_reads == ["kubevirt.io/nodeName=node-1"], "no cluster-wide VMI read"
    # what the cluster-wide read decided: active VMIs whose status.nodeName is node-1
    wide = sorted(f"default/{v['metadata']['name']}" for v in CLUSTER_VMIS
                  if node_facts.active_vmi(v)
                  and (v.get("status") or {}).get("nodeName") == "node-1")
    assert sorted(v.key for v in vms) == wide == ["default/on-1"]
    # the whole roll's plan (--check) still reads every VMI
    node_evacuation.evacuation_views(kube, None, facts)  # type: ignore[arg-type]
    assert kube.vmi_reads[-1] is None


def test_the_final_check_finds_a_vmi_still_on_the_node_by_its_label() -> None:
    """The last check before the node is handed over reads the node's VMIs: a VMI still
    running there (label and status.nodeName the node) fails the step; one whose migration
    KubeVirt acknowledged (status.nodeName elsewhere) does not."""
    still = [v for v in selected(CLUSTER_VMIS, node_facts.on_node("node-1"))
             if node_facts.active_vmi(v) and v["status"].get("nodeName") == "node-1"]
    assert [v["metadata"]["name"] for v in still] == ["on-1"]
    kube = _ClusterKube({VMI_KIND: CLUSTER_VMIS})
    assert [v["metadata"]["name"] for v in node_facts.node_vmis(kube, "node-1")] == [  # type: ignore[arg-type]
        "on-1", "moving", "scheduling", "done"]
    assert kube.vmi_reads == ["kubevirt.io/nodeName=node-1"]


# -- the migrations' wait --------------------------------------------------------------------
class _ScopedMigrationKube:
    """Replays a cluster's VMIs step by step to ``migrate_all``'s wait as a watch with the
    wait's own label selector delivers them (a VMI whose label left the node is gone from the
    view); the migration is ``mig_phase`` with KubeVirt's ``migrationState.targetNode``."""

    check_mode = False

    def __init__(self, steps: list[tuple[list[dict[str, Any]], str | None]]) -> None:
        self.steps = steps
        self.created: list[dict[str, Any]] = []
        self.selectors: list[str | None] = []
        self.decided_at: int | None = None

    def create_in(self, api_version: str, kind: str, body: dict[str, Any],
                  namespace: str | None = None) -> dict[str, Any]:
        self.created.append(body)
        return body

    def wait(self, sources: Any, pred: Any, *, on_change: Any, timeout: float, what: str,
             describe: Any = None) -> Any:
        vmi_source = next(s for s in sources if s.kind == VMI_KIND)
        self.selectors.append(vmi_source.label_selector)
        for i, (cluster, mig_phase) in enumerate(self.steps):
            migs = {}
            if mig_phase and self.created:
                name = self.created[-1]["metadata"]["name"]
                migs[f"default/{name}"] = {
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"vmiName": "vm-1"},
                    "status": {"phase": mig_phase,
                               "migrationState": {"targetNode": "node-2"}}}
            view = {VMI_KIND: {f"default/{o['metadata']['name']}": o
                               for o in selected(cluster, vmi_source.label_selector)},
                    "VirtualMachineInstanceMigration": migs}
            on_change(view)
            if pred(view):
                self.decided_at = i
                return True
        raise AssertionError("the wait never ended")


class _Writer:
    def labels(self, component: str) -> dict[str, str]:
        return {}

    def event(self, *args: Any, **kwargs: Any) -> None:
        pass


def _plan() -> Any:
    one = vmi("vm-1", "node-1", "node-1")
    return ev.EvacuationPlan(node="node-1", migrate=[ev.Move(ev.vm_view(one), "node-2", "t")])


OTHER = vmi("other", "node-3", "node-3")       # another node's VMI: never in the view


@pytest.mark.parametrize("writes", ["kubevirt", "simulator"])
def test_a_migrating_vmi_is_moved_once_it_left_the_nodes_set_or_shows_another_node(
        writes: str) -> None:
    """KubeVirt's virt-handler acknowledges a migration with one update of the VMI (label
    and status.nodeName: the VMI leaves the node's labelled set); the simulator writes
    status.nodeName first, then the label (the VMI shows the target while still in the
    set). Either way the migration is done at the first view without the VMI on the node,
    and not before; the other node's VMI never matters."""
    running = [vmi("vm-1", "node-1", "node-1"), OTHER]
    if writes == "kubevirt":
        steps = [(running, None), (running, "Running"),
                 ([vmi("vm-1", "node-2", "node-2"), OTHER], "Succeeded")]
        decided = 2
    else:
        steps = [(running, None), (running, "Running"),
                 ([vmi("vm-1", "node-1", "node-2"), OTHER], "Running"),
                 ([vmi("vm-1", "node-2", "node-2"), OTHER], "Succeeded")]
        decided = 2
    kube = _ScopedMigrationKube(steps)
    result: dict[str, Any] = {"migrated": []}
    node_migrations.migrate_all(
        kube, _Writer(), "node-1", _plan(), [], result,  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=0, migration_timeout=900, timeout=60)
    assert kube.selectors == ["kubevirt.io/nodeName=node-1"]
    assert kube.decided_at == decided
    assert result["migrated"] == [{"vm": "default/vm-1", "to": "node-2", "attempts": 1}]


def test_a_succeeded_migration_whose_vmi_is_still_on_the_node_is_not_done() -> None:
    """The migration's Succeeded and the VMI's move come on two watches: while the VMI is in
    the node's set with status.nodeName the node, the VM is not off the node."""
    running = [vmi("vm-1", "node-1", "node-1"), OTHER]
    kube = _ScopedMigrationKube([(running, "Running"), (running, "Succeeded"),
                                 ([OTHER], "Succeeded")])
    result: dict[str, Any] = {"migrated": []}
    node_migrations.migrate_all(
        kube, _Writer(), "node-1", _plan(), [], result,  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=0, migration_timeout=900, timeout=60)
    assert kube.decided_at == 2


# -- CycleKube: an informer per node-scoped set ----------------------------------------------
class _Server:
    """VMIs listed (honouring label selectors) and watched through a stream fed by the test;
    the other informed kinds are empty and quiet."""

    def __init__(self, items: list[dict[str, Any]], rv: int) -> None:
        self.items, self.rv = items, rv
        self.lists: list[str | None] = []
        self.gets: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.closed = False
        self.cond = threading.Condition()

    def send(self, etype: str, o: dict[str, Any]) -> None:
        with self.cond:
            self.events.append({"type": etype, "raw_object": o})
            self.cond.notify_all()

    def stream(self, kind: str, label_selector: str | None) -> Any:
        """What a watch with ``label_selector`` delivers."""
        match = label_filter(label_selector)
        assert match is not None
        seen = 0
        while True:
            with self.cond:
                while seen >= len(self.events) and not self.closed:
                    self.cond.wait(0.05)
                if self.closed:
                    return
                ev_ = self.events[seen]
            seen += 1
            if kind == VMI_KIND:   # (outside the selector: DELETED, as the server sends
                # for an object that left it; for one never in it, a no-op for the informer)
                yield ev_ if match(ev_["raw_object"]) else {**ev_, "type": "DELETED"}

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class _Kube(cycle_kube.CycleKube):
    def __init__(self, srv: _Server) -> None:
        super().__init__(dyn=None)
        self.srv = srv

    def resource(self, api_version: str, kind: str) -> Any:
        return (api_version, kind)

    def stream(self, res: Any, **kw: Any) -> Any:
        return self.srv.stream(res[1], kw.get("label_selector"))

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None, subresource: str | None = None) -> dict[str, Any]:
        self.srv.rv += 1
        label = (patch.get("metadata") or {}).get("labels", {}).get(LABEL)
        o = vmi(name, label, label, rv=self.srv.rv)
        return self._write(api_version, kind, lambda: o)  # type: ignore[no-any-return]


@pytest.fixture
def scoped(monkeypatch: Any) -> Any:
    srv = _Server([vmi("a", "node-1", "node-1", rv=5), vmi("b", "node-2", "node-2", rv=6)],
                  10)
    kube = _Kube(srv)

    def server_list(self: Any, api_version: str, kind: str, namespace: str | None = None,
                    label_selector: str | None = None, field_selector: str | None = None
                    ) -> tuple[list[dict[str, Any]], str]:
        if kind != VMI_KIND:
            return [], str(srv.rv)
        srv.lists.append(label_selector)
        return selected(srv.items, label_selector), str(srv.rv)

    def server_get(self: Any, api_version: str, kind: str, name: str,
                   namespace: str | None = None) -> dict[str, Any] | None:
        srv.gets.append(name)
        return None
    monkeypatch.setattr(cycle_kube.Kube, "list_with_rv", server_list)
    monkeypatch.setattr(cycle_kube.Kube, "get", server_get)
    yield kube, srv
    kube.close()
    srv.close()


def _names(items: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in items)


def test_a_node_scoped_set_has_its_own_informer_and_no_cluster_wide_list(scoped: Any) -> None:
    kube, srv = scoped
    sel = node_facts.on_node("node-1")
    kube.prefetch(scoped=[(*cycle_kube.c.VMI, None, sel)])
    assert srv.lists == [sel], "the VMIs are listed by the node's label only"
    kube.begin_step("evacuate")
    assert _names(kube.list("kubevirt.io/v1", VMI_KIND, label_selector=sel)) == ["a"]
    kube.begin_step("answer pre-drain")
    assert _names(kube.list("kubevirt.io/v1", VMI_KIND, label_selector=sel)) == ["a"]
    assert srv.lists == [sel] and kube.stats["informed"] == 2
    # a read by name does not start a cluster-wide informer: the server answers it
    assert kube.get("kubevirt.io/v1", VMI_KIND, "b", "default") is None
    assert srv.gets == ["b"] and srv.lists == [sel]
    # the watch follows the node's set: a VMI whose label leaves it is gone from it
    srv.send("MODIFIED", vmi("a", "node-2", "node-2", rv=11))
    deadline = time.monotonic() + 30
    while _names(kube.list("kubevirt.io/v1", VMI_KIND, label_selector=sel)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # the restore's plain read of every VMI gets a cluster-wide informer of its own
    assert _names(kube.list("kubevirt.io/v1", VMI_KIND)) == ["a", "b"]
    assert srv.lists == [sel, None]


def test_our_write_is_awaited_only_by_the_informers_whose_set_holds_it(scoped: Any) -> None:
    kube, srv = scoped
    sel1, sel2 = node_facts.on_node("node-1"), node_facts.on_node("node-2")
    kube.prefetch(scoped=[(*cycle_kube.c.VMI, None, sel1), (*cycle_kube.c.VMI, None, sel2)])
    assert sorted(srv.lists) == sorted([sel1, sel2])
    # a write of a VMI labelled node-2 (rv 11): node-1's informer never sees it and must not
    # wait for it; node-2's does
    kube.patch("kubevirt.io/v1", VMI_KIND, "b", {"metadata": {"labels": {LABEL: "node-2"}}},
               "default")
    assert _names(kube.list("kubevirt.io/v1", VMI_KIND, label_selector=sel1)) == ["a"]
    # (had it waited for rv 11 it would have given up and asked the server)
    assert len(srv.lists) == 2, "node-1's set waited for a write it cannot see"
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(
        kube.list("kubevirt.io/v1", VMI_KIND, label_selector=sel2)))
    t.start()
    time.sleep(0.2)
    assert not out, "node-2's set answered before it saw our write"
    srv.send("MODIFIED", vmi("b", "node-2", "node-2", rv=11))
    t.join(30)
    assert [o["metadata"]["resourceVersion"] for o in out[0]] == ["11"]
    assert len(srv.lists) == 2, "both answered from their informers"


def test_the_plan_from_the_pod_informers_totals_equals_the_look_at_every_pod() -> None:
    """evacuation_views with what each node's pods request as the Pod informer sums it
    (``by_total``) gives the views and VMs of the look at every pod."""
    def pod(name: str, node: str, cpu: str, mem: str, phase: str = "Running",
            labels: dict[str, str] | None = None) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "default", "uid": f"totals-{name}",
                             "resourceVersion": "1", "labels": labels or {}},
                "spec": {"nodeName": node, "containers": [
                    {"resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
                "status": {"phase": phase}}
    pods = [pod("p1", "node-1", "1", "1Gi"), pod("p2", "node-2", "500m", "2Gi"),
            pod("p3", "node-2", "2", "1Gi", "Succeeded"), pod("p4", "", "1", "1Gi"),
            pod("virt-launcher-on-1", "node-1", "1", "4Gi",
                labels={"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": "on-1"})]

    class Totalled(_ClusterKube):
        def by_total(self, api: str, kind: str, ns: str | None, total: str) -> Any:
            out: dict[str, tuple[int, ...]] = {}
            for p in self.objects["Pod"]:
                got = ev.pod_requests_by_node(p)
                if got:
                    cur = out.get(got[0], (0, 0))
                    out[got[0]] = (cur[0] + got[1][0], cur[1] + got[1][1])
            return out

        def list(self, api_version: str, kind: str, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None
                 ) -> list[dict[str, Any]]:
            items = super().list(api_version, kind, namespace, label_selector)
            if field_selector:
                want = field_selector.split("=", 1)[1]
                items = [o for o in items if o["spec"].get("nodeName") == want]
            return items
    objects = {"Node": [_node("node-1"), _node("node-2")], "Pod": pods,
               VMI_KIND: CLUSTER_VMIS}
    facts = [{"name": "node-1", "upgraded": False, "order": 0},
             {"name": "node-2", "upgraded": True, "order": 1}]
    plain = node_evacuation.evacuation_views(_ClusterKube(objects), None, facts,  # type: ignore[arg-type]
                                             only_node="node-1")
    totalled = node_evacuation.evacuation_views(Totalled(objects), None, facts,  # type: ignore[arg-type]
                                                only_node="node-1")
    assert totalled == plain
    assert [(n.name, n.req_cpu_m, n.req_mem // 2**30) for n in plain[0]] == [
        ("node-1", 2000, 5), ("node-2", 500, 2)]
    assert plain[1][0].mem > 0, "the launcher's requests reach the VM's view"
