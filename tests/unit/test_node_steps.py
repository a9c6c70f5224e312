"""Pure parts of the node steps: forward-only states, safety gates, job shape, phase checks."""

from __future__ import annotations

from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path

_MU = "ansible_collections.harvester.upgrade.plugins.module_utils.harvester"
node_job = pytest.importorskip(f"{_MU}.node_job")
node_migrations = pytest.importorskip(f"{_MU}.node_migrations")
node_phase = pytest.importorskip(f"{_MU}.node_phase")
node_safety = pytest.importorskip(f"{_MU}.node_safety")
errors = pytest.importorskip(f"{_MU}.errors")
plan_writer = pytest.importorskip(f"{_MU}.plan_writer")
waiting = pytest.importorskip(f"{_MU}.waiting")


def vol(name: str, robustness: str, state: str = "attached") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"robustness": robustness, "state": state}}


def rep(vol_name: str, node: str, running: bool = True) -> dict[str, Any]:
    return {"spec": {"volumeName": vol_name, "nodeID": node, "failedAt": "",
                     "healthyAt": "2026-01-01T00:00:00Z"},
            "status": {"currentState": "running" if running else "stopped"}}


def rebuilding(vol_name: str, node: str) -> dict[str, Any]:
    """A replica Longhorn reused (or created) for a rebuild: its instance runs (WO in the
    engine), ``failedAt`` and ``healthyAt`` cleared until it is rebuilt."""
    r = rep(vol_name, node)
    r["spec"]["healthyAt"] = ""
    return r


def test_volume_safety() -> None:
    assert node_safety.volume_at_risk(vol("a", "healthy"), "n1", [rep("a", "n2")]) is None
    assert node_safety.volume_at_risk(vol("a", "degraded", "detached"), "n1", []) is None
    # no replica information: any attached volume holds the node, healthy or not
    assert "no healthy replica off node n1" in node_safety.volume_at_risk(vol("a", "degraded"),
                                                                          "n1", [])
    assert node_safety.volume_at_risk(vol("a", "healthy"), "n1", []) is not None
    # a healthy replica survives elsewhere: safe
    assert node_safety.volume_at_risk(vol("a", "degraded"), "n1",
                                      [rep("a", "n1"), rep("a", "n2")]) is None
    # the only healthy replica is on this node: unsafe
    assert node_safety.volume_at_risk(vol("a", "degraded"), "n1",
                                      [rep("a", "n1"), rep("a", "n2", running=False)]) is not None


def test_a_replica_being_rebuilt_elsewhere_does_not_make_the_node_safe() -> None:
    # the volume's only RW replica is on n1; the one on n2 is still being rebuilt from it
    vols = [vol("a", "degraded")]
    reps = [rep("a", "n1"), rebuilding("a", "n2"), rep("a", "n3", running=False)]
    why = node_safety.volume_at_risk(vols[0], "n1", reps)
    assert why is not None and "only healthy replica" in why
    assert node_safety.volumes_at_risk(vols, "n1", reps) == [why]
    # rebuilt: healthyAt set, the node is safe to drain
    reps[1]["spec"]["healthyAt"] = "2026-01-01T00:01:00Z"
    assert node_safety.volume_at_risk(vols[0], "n1", reps) is None
    assert node_safety.volumes_at_risk(vols, "n1", reps) == []


def test_healthy_volume_with_every_healthy_replica_on_the_node_is_at_risk() -> None:
    # robustness says healthy (its full count of healthy replicas), but all of them sit on
    # the node being drained: draining it takes the volume's data path away
    why = node_safety.volume_at_risk(vol("a", "healthy"), "n1", [rep("a", "n1"), rep("a", "n1")])
    assert why is not None and "only healthy replica" in why and "n1" in why
    failed = rep("a", "n2")
    failed["spec"]["failedAt"] = "2026-01-01T00:00:00Z"
    assert node_safety.volume_at_risk(vol("a", "healthy"), "n1", [rep("a", "n1"), failed])


def test_volumes_at_risk_reads_each_volumes_own_replicas() -> None:
    # grouped by volume once: the same answers as volume_at_risk over the whole list
    vols = [vol("a", "healthy"), vol("b", "degraded"), vol("c", "degraded"),
            vol("d", "healthy"), vol("e", "degraded", "detached")]
    failed = rep("d", "n2")
    failed["spec"]["failedAt"] = "2026-01-01T00:00:00Z"
    reps = [rep("a", "n1"), rep("a", "n2"), rep("b", "n1"), rep("b", "n2", running=False),
            rep("c", "n2"), rep("d", "n1"), failed, rep("e", "n1")]
    want = [w for v in vols if (w := node_safety.volume_at_risk(v, "n1", reps))]
    got = node_safety.volumes_at_risk(vols, "n1", reps)
    assert got == want
    assert [w.split()[1] for w in got] == ["b", "d"]
    assert node_safety.replicas_by_volume(reps)["a"] == reps[:2]
    # an attached volume without any replica information still holds the node
    assert node_safety.volumes_at_risk([vol("z", "healthy")], "n1", reps) == [
        node_safety.volume_at_risk(vol("z", "healthy"), "n1", [])]


class FakeKube:
    """``list``/``resource`` of :class:`client.Kube`; ``errors`` maps a kind to the
    exception its list raises; ``harvester`` whether Setting is served."""

    check_mode = False

    def __init__(self, objects: dict[str, list[dict[str, Any]]],
                 errors: dict[str, Exception] | None = None, harvester: bool = True) -> None:
        self.objects, self.errors, self.harvester = objects, errors or {}, harvester

    def list(self, api: str, kind: str, ns: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        if kind in self.errors:
            raise self.errors[kind]
        return self.objects.get(kind, [])

    def resource(self, api: str, kind: str) -> object:
        if kind == "Setting" and not self.harvester:
            raise errors.NotServed(404, "NotServed", f"{kind}.{api} is not served")
        return object()


FORBIDDEN = errors.ApiError(403, "Forbidden", 'replicas.longhorn.io is forbidden: '
                           'User "x" cannot list resource "replicas"')
UNSERVED = errors.NotServed(404, "NotServed", "Volume.longhorn.io/v1beta2 is not served")


@pytest.mark.parametrize("kind", ["Volume", "Replica"])
def test_wait_volumes_safe_fails_when_longhorn_cannot_be_read(kind: str) -> None:
    kube = FakeKube({"Volume": [vol("a", "healthy")], "Replica": [rep("a", "n2")]},
                    {kind: FORBIDDEN})
    with pytest.raises(errors.NodeLoopError, match="Volumes and Replicas.*forbidden"):
        node_safety.wait_volumes_safe(kube, "n1", 0)


def test_wait_volumes_safe_fails_when_longhorn_crd_missing_on_harvester() -> None:
    kube = FakeKube({}, {"Volume": UNSERVED})
    with pytest.raises(errors.NodeLoopError, match="not served.*ships Longhorn"):
        node_safety.wait_volumes_safe(kube, "n1", 0)
    # a cluster without Harvester's CRDs has no Longhorn to protect either
    assert node_safety.wait_volumes_safe(FakeKube({}, {"Volume": UNSERVED}, harvester=False),
                                         "n1", 0)["waited"] is False


def test_engines_settled_and_volumes_to_skip_fail_closed() -> None:
    kube = FakeKube({"Volume": [vol("a", "healthy")]}, {"Engine": FORBIDDEN})
    with pytest.raises(errors.NodeLoopError, match="Engines and Volumes.*forbidden"):
        node_job._engines_settled(kube)
    with pytest.raises(errors.NodeLoopError, match="Engines, Volumes and Replicas"):
        node_job._volumes_to_skip(kube, "n1")
    kube = FakeKube({}, {"Engine": UNSERVED})
    with pytest.raises(errors.NodeLoopError, match="not served"):
        node_job._engines_settled(kube)
    assert node_job._engines_settled(FakeKube({}, {"Engine": UNSERVED}, harvester=False)) is None


def test_volumes_to_skip_only_those_longhorn_cannot_heal() -> None:
    def eng(volume: str, state: str = "running") -> dict[str, Any]:
        return {"metadata": {"name": f"{volume}-e-0", "labels": {"longhornvolume": volume}},
                "status": {"currentState": state}}
    # every running engine's volume healthy: the script waits for none, no Replica is read
    kube = FakeKube({"Engine": [eng("a"), eng("b", "stopped")],
                     "Volume": [vol("a", "healthy"), vol("b", "degraded", "detached")]},
                    {"Replica": FORBIDDEN})
    assert node_job._volumes_to_skip(kube, "n1") == []
    # a degraded one being rebuilt (Longhorn placed its replicas): the script waits for it,
    # as Harvester's does, whatever its replicas
    objects = {"Engine": [eng("a"), eng("c")],
               "Volume": [vol("a", "healthy"), vol("c", "degraded")],
               "Replica": [rep("c", "n2"), rep("c", "n1", running=False)]}
    assert node_job._volumes_to_skip(FakeKube(objects, {"Replica": FORBIDDEN}), "n1") == []
    # one Longhorn cannot heal (Scheduled=False): its replicas decide (a healthy one
    # elsewhere: skipped), and a Replica list that fails fails the step
    stuck = vol("c", "degraded")
    stuck["status"]["conditions"] = [{"type": "Scheduled", "status": "False",
                                      "reason": "ReplicaSchedulingFailure"}]
    objects["Volume"] = [vol("a", "healthy"), stuck]
    assert node_job._volumes_to_skip(FakeKube(objects), "n1") == ["c"]
    assert node_job._volumes_to_skip(
        FakeKube({**objects, "Replica": [rep("c", "n1")]}), "n1") == []
    with pytest.raises(errors.NodeLoopError, match="Engines, Volumes and Replicas"):
        node_job._volumes_to_skip(FakeKube(objects, {"Replica": FORBIDDEN}), "n1")


def test_a_pre_drain_timeout_names_the_volumes_the_script_waits_for() -> None:
    def eng(volume: str, state: str = "running") -> dict[str, Any]:
        return {"metadata": {"name": f"{volume}-e-0", "labels": {"longhornvolume": volume}},
                "status": {"currentState": state}}
    stuck = vol("c", "degraded")
    stuck["status"]["conditions"] = [{"type": "Scheduled", "status": "False"}]
    kube = FakeKube({"Engine": [eng("a"), eng("b"), eng("c"), eng("d", "stopped")],
                     "Volume": [vol("a", "healthy"), vol("b", "degraded"), stuck,
                                vol("d", "degraded", "detached")]})
    assert node_job._longhorn_hold(kube) == (
        "; upgrade_node.sh waits for every running Longhorn volume to be healthy, and 2 are "
        "not: b (degraded), c (degraded, Longhorn cannot place a replica)")
    many = FakeKube({"Engine": [eng(f"v{i:02}") for i in range(12)],
                     "Volume": [vol(f"v{i:02}", "degraded") for i in range(12)]})
    assert node_job._longhorn_hold(many).endswith("v09 (degraded) and 2 more")
    # nothing to name, or Longhorn unreadable now: the timeout's own message stands
    assert node_job._longhorn_hold(FakeKube({"Engine": [eng("a")],
                                             "Volume": [vol("a", "healthy")]})) == ""
    assert node_job._longhorn_hold(FakeKube({}, {"Engine": FORBIDDEN})) == ""


def test_pdb_blocking_ignores_launchers_and_daemonsets() -> None:
    pdb = {"metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}},
           "status": {"disruptionsAllowed": 0}}

    def pod(name: str, labels: dict[str, str], owner: str = "ReplicaSet") -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "default", "labels": labels,
                             "ownerReferences": [{"kind": owner}]},
                "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    pods = [pod("web-1", {"app": "web"}), pod("launcher", {"kubevirt.io": "virt-launcher"}),
            pod("ds", {"app": "web"}, owner="DaemonSet")]
    blocked = node_safety._pdb_blocking([pdb], pods, "n1")
    assert blocked == ["PodDisruptionBudget default/web allows no disruption of pod web-1"]
    pdb["status"]["disruptionsAllowed"] = 1
    assert node_safety._pdb_blocking([pdb], pods, "n1") == []


def test_pdb_blocking_leaves_longhorns_instance_manager_to_longhorn() -> None:
    """Longhorn keeps its instance manager's PDB (disruptionsAllowed 0) while any volume is
    attached on the node (longhorn-manager canDeleteInstanceManagerPDB): counted before the
    migrations it would never let the evacuation start."""
    im = {"metadata": {"name": "instance-manager-abc", "namespace": "longhorn-system",
                       "labels": {"longhorn.io/component": "instance-manager",
                                  "longhorn.io/node": "n1"},
                       "ownerReferences": [{"kind": "InstanceManager"}]},
          "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    pdb = {"metadata": {"name": "instance-manager-abc", "namespace": "longhorn-system"},
           "spec": {"selector": {"matchLabels": {"longhorn.io/component": "instance-manager",
                                                 "longhorn.io/node": "n1"}}},
           "status": {"disruptionsAllowed": 0}}
    assert node_safety._pdb_blocking([pdb], [im], "n1") == []
    # the same labels outside Longhorn's namespace are any workload's
    other = {**im, "metadata": {**im["metadata"], "namespace": "default"}}
    assert node_safety._pdb_blocking([{**pdb, "metadata": {**pdb["metadata"],
                                                           "namespace": "default"}}],
                                     [other], "n1") != []


def test_job_outcome() -> None:
    assert node_job._job_outcome(None)[0] == "absent"
    assert node_job._job_outcome({"status": {}})[0] == "running"
    assert node_job._job_outcome({"status": {"conditions": [
        {"type": "Complete", "status": "True"}]}})[0] == "complete"
    assert node_job._job_outcome({"status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
         "message": "Job has reached the specified backoff limit"}]}}) == (
        "failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")


class _FakeKube:
    check_mode = True


def test_job_shape_follows_protocol() -> None:
    plan = {"apiVersion": "management.harvesterhci.io/v1beta1", "kind": "UpgradePlan",
            "metadata": {"name": "hvst-upgrade-x", "uid": "u1"},
            "spec": {"upgrade": "main-head"},
            "status": {"releaseMetadata": {"os": "Harvester v1.6.0",
                                           "kubernetes": "v1.32.7+rke2r1",
                                           "harvester": "v1.6.0"}}}
    w = plan_writer.PlanWriter(_FakeKube(), plan)  # type: ignore[arg-type]
    job = node_job.job_body(w, "post-drain", "node-1")
    assert job["metadata"]["name"] == "hvst-upgrade-x-node-upgrade-post-drain-node-1"
    assert job["metadata"]["namespace"] == "harvester-system"
    labels = job["metadata"]["labels"]
    assert labels["management.harvesterhci.io/upgrade-plan"] == "hvst-upgrade-x"
    assert labels["management.harvesterhci.io/upgrade-component"] == "node-upgrade"
    assert labels["management.harvesterhci.io/job-type"] == "post-drain"
    assert labels["management.harvesterhci.io/node"] == "node-1"
    assert job["metadata"]["ownerReferences"][0]["controller"] is True
    pod = job["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert pod["nodeName"] == "node-1" and pod["hostPID"] is True
    assert c["name"] == "apply" and c["image"] == "rancher/harvester-upgrade-toolkit:main-head"
    assert c["command"] == ["upgrade_node.sh"] and c["args"] == ["post-drain"]
    assert {t["key"] for t in pod["tolerations"]} >= {"kubevirt.io/drain"}
    assert len(node_job.job_name("p" * 50, "single-node-upgrade", "node-1")) <= 63


def test_pre_drain_bypass_files_come_from_a_downward_api_volume() -> None:
    """The volumes judged safe to drain past reach upgrade_node.sh's bypass as files
    /tmp/skip-<volume> that the kubelet writes before the container starts (one item of a
    downwardAPI volume each, mounted at its path with subPath): no init container, whose
    own start the Job's pod would wait for, and /tmp stays the container's own."""
    plan = {"metadata": {"name": "hvst-upgrade-x", "uid": "u1"}, "spec": {"upgrade": "v1"},
            "status": {}}
    w = plan_writer.PlanWriter(_FakeKube(), plan)  # type: ignore[arg-type]
    pod = node_job.job_body(w, "pre-drain", "node-1", ["pvc-b", "pvc-a", "pvc-b"])[
        "spec"]["template"]["spec"]
    assert "initContainers" not in pod
    vols = {v["name"]: v for v in pod["volumes"]}
    src = vols[node_job.SKIP_VOLUME]["downwardAPI"]
    assert [i["path"] for i in src["items"]] == ["skip-pvc-a", "skip-pvc-b"]
    assert all(i["fieldRef"] == {"fieldPath": "metadata.name"} for i in src["items"])
    assert not any("emptyDir" in v for v in vols.values())
    mounts = pod["containers"][0]["volumeMounts"]
    skip = [m for m in mounts if m["name"] == node_job.SKIP_VOLUME]
    assert [(m["mountPath"], m["subPath"]) for m in skip] == [
        ("/tmp/skip-pvc-a", "skip-pvc-a"), ("/tmp/skip-pvc-b", "skip-pvc-b")]
    assert all(m["readOnly"] for m in skip)
    assert not any(m["mountPath"] == "/tmp" for m in mounts)
    # nothing to skip: nothing added
    bare = node_job.job_body(w, "pre-drain", "node-1")["spec"]["template"]["spec"]
    assert [v["name"] for v in bare["volumes"]] == ["host-root"]
    assert [m["name"] for m in bare["containers"][0]["volumeMounts"]] == ["host-root"]


@pytest.mark.parametrize(("phase", "ok"), [
    ("ClusterUpgrading", False), ("ClusterUpgraded", True), ("NodeUpgrading", True),
    ("NodeUpgraded", True), ("Failed", False), ("", False)])
def test_phase_gate(phase: str, ok: bool) -> None:
    plan = {"metadata": {"name": "p"}, "status": {"currentPhase": phase}}
    if ok:
        assert node_phase.check_phase(plan) == phase
    else:
        with pytest.raises(errors.NodeLoopError):
            node_phase.check_phase(plan)


class _MigrationKube:
    """Replays ``views`` (VMI phase/node, migration phase by step) to ``_migrate_all``'s
    wait, as the watches of the VMIs and of the migrations would deliver them."""

    check_mode = False

    def __init__(self, steps_: list[tuple[str, str | None]]) -> None:
        self.steps = steps_
        self.created: list[dict[str, Any]] = []
        self.decided_at: int | None = None

    def create_in(self, api_version: str, kind: str, body: dict[str, Any],
                  namespace: str | None = None) -> dict[str, Any]:
        self.created.append(body)
        return body

    def _view(self, vmi_node: str, mig_phase: str | None) -> dict[str, Any]:
        vmi = {"metadata": {"name": "vm-1", "namespace": "default"},
               "status": {"phase": "Running", "nodeName": vmi_node}}
        migs = {}
        if mig_phase and self.created:
            name = self.created[-1]["metadata"]["name"]
            migs[f"default/{name}"] = {"metadata": {"name": name, "namespace": "default"},
                                       "spec": {"vmiName": "vm-1"},
                                       "status": {"phase": mig_phase}}
        return {"VirtualMachineInstance": {"default/vm-1": vmi},
                "VirtualMachineInstanceMigration": migs}

    def wait(self, sources: Any, pred: Any, *, on_change: Any, timeout: float, what: str,
             describe: Any = None) -> Any:
        for i, (node, phase) in enumerate(self.steps):
            view = self._view(node, phase)
            on_change(view)
            if pred(view):
                self.decided_at = i
                return True
        raise AssertionError("the wait never ended")


def _one_vm_to_node_2(ev: Any, why: str) -> Any:
    """node-1's evacuation plan: its one running VM, ``default/vm-1``, to node-2."""
    vmi = {"metadata": {"name": "vm-1", "namespace": "default"},
           "status": {"phase": "Running", "nodeName": "node-1"}}
    return ev.EvacuationPlan(node="node-1", migrate=[ev.Move(ev.vm_view(vmi), "node-2", why)])


class _Writer:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def labels(self, component: str) -> dict[str, str]:
        return {}

    def event(self, reason: str, message: str, **kwargs: Any) -> None:
        self.events.append((reason, message))


def test_a_migration_is_done_when_its_vmi_is_seen_off_the_node() -> None:
    """KubeVirt moves the VMI before it marks the migration Succeeded, but the two arrive on
    separate watches: a Succeeded migration whose VMI still shows the node is not done yet
    (ending there handed the node over with the VM on it, as the final check then said)."""
    ev = pytest.importorskip(
        "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.evacuation")
    plan = _one_vm_to_node_2(ev, "upgraded node with room")
    kube = _MigrationKube([("node-1", None), ("node-1", "Running"),
                           ("node-1", "Succeeded"), ("node-2", "Succeeded")])
    result: dict[str, Any] = {"migrated": []}
    node_migrations.migrate_all(
        kube, _Writer(), "node-1", plan, [], result,  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=0, migration_timeout=900, timeout=60)
    assert kube.decided_at == 3
    assert len(kube.created) == 1
    assert result["migrated"] == [{"vm": "default/vm-1", "to": "node-2", "attempts": 1}]


def test_only_a_retried_migration_gets_an_event() -> None:
    """A first attempt is its migration object (labelled with the plan and the node, its
    target in its spec): no Event repeats it. A retry, which the objects alone do not tell,
    gets one."""
    ev = pytest.importorskip(
        "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.evacuation")
    plan = _one_vm_to_node_2(ev, "upgraded node with room")
    writer = _Writer()
    kube = _MigrationKube([("node-1", None), ("node-1", "Running"), ("node-2", "Succeeded")])
    node_migrations.migrate_all(
        kube, writer, "node-1", plan, [], {"migrated": []},  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=1, migration_timeout=900, timeout=60)
    assert len(kube.created) == 1 and writer.events == []
    writer = _Writer()
    kube = _MigrationKube([("node-1", None), ("node-1", "Failed"), ("node-1", None),
                           ("node-1", "Running"), ("node-2", "Succeeded")])
    node_migrations.migrate_all(
        kube, writer, "node-1", plan, [], {"migrated": []},  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=1, migration_timeout=900, timeout=60)
    assert len(kube.created) == 2
    assert [r for r, _m in writer.events] == ["VMMigrationStarted"]
    assert "default/vm-1" in writer.events[0][1] and "attempt 2" in writer.events[0][1]


class _ActionKube:
    """Harvester's migrate action on KubeVirt 1.5: the POST makes Harvester create the
    migration (``generateName: <vm>-``, no label of ours), which the migrations' watch then
    brings; ``wait`` replays the VMI's node and that migration's phase by step. The VM was
    migrated once before (a finished migration of an earlier node)."""

    check_mode = False
    OLD = {"metadata": {"name": "vm-1-old00", "namespace": "default",
                        "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"vmiName": "vm-1"}, "status": {"phase": "Succeeded"}}

    def __init__(self, steps_: list[tuple[str, str | None]]) -> None:
        self.steps = steps_
        self.posts: list[str] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.migration_lists = 0

    def raw_post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        self.posts.append(body["nodeName"])
        return 204, b""

    def _migrations(self, phase: str | None) -> dict[str, dict[str, Any]]:
        migs = {"default/vm-1-old00": self.OLD}
        if self.posts and phase:
            migs["default/vm-1-x7k2p"] = {
                "metadata": {"name": "vm-1-x7k2p", "namespace": "default",
                             "creationTimestamp": "2026-01-02T00:00:00Z"},
                "spec": {"vmiName": "vm-1"}, "status": {"phase": phase}}
        return migs

    def _vmi(self, node: str) -> dict[str, Any]:
        return {"metadata": {"name": "vm-1", "namespace": "default"},
                "status": {"phase": "Running", "nodeName": node}}

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        if kind == "VirtualMachineInstance":
            return [self._vmi("node-1")]
        self.migration_lists += 1
        return list(self._migrations("Pending").values())

    def list_with_rv(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        return self.list(api_version, kind, namespace, label_selector), "1"

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None) -> dict[str, Any]:
        self.patches.append((name, patch))
        return {}

    def wait(self, sources: Any, pred: Any, *, on_change: Any, timeout: float, what: str,
             describe: Any = None) -> Any:
        for node, phase in self.steps:
            view = {"VirtualMachineInstance": {"default/vm-1": self._vmi(node)},
                    "VirtualMachineInstanceMigration": self._migrations(phase)}
            on_change(view)
            if pred(view):
                return True
        raise AssertionError("the wait never ended")


@pytest.mark.parametrize("start_only", [False, True])
def test_the_migration_harvesters_action_created_is_found_without_listing(
        start_only: bool) -> None:
    """The migration Harvester's action creates is the VM's one not in the view before the
    action: the evacuation's own watch brings it (no list of the VM's migrations before or
    after), and it is labelled ours once seen; the head start, without a watch, lists the
    VM's migrations once after the action."""
    ev = pytest.importorskip(
        "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.evacuation")
    mt = pytest.importorskip(
        "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.migration_target")
    plan = _one_vm_to_node_2(ev, "upgraded node")
    kube = _ActionKube([("node-1", None), ("node-1", "Running"), ("node-2", "Succeeded")])
    result: dict[str, Any] = {"migrated": []}
    node_migrations.migrate_all(
        kube, _Writer(), "node-1", plan, [], result,  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=0, migration_timeout=900, timeout=60,
        start_only=start_only, mechanism=mt.HARVESTER_ACTION)
    assert kube.posts == ["node-2"]
    assert [name for name, _patch in kube.patches] == ["vm-1-x7k2p"]
    meta = kube.patches[0][1]["metadata"]
    assert meta["labels"]["kubevirt.io/vmi-name"] == "vm-1"
    assert meta["annotations"]["harvester-upgrade.harvesterhci.io/target-node"] == "node-2"
    if start_only:   # the view's list, then the one after the action
        assert kube.migration_lists == 2 and result["started"] == ["default/vm-1"]
    else:
        assert kube.migration_lists == 0
        assert result["migrated"] == [{"vm": "default/vm-1", "to": "node-2", "attempts": 1}]


class _LanesKube:
    """KubeVirt behind Harvester's migrate action, a step at a time: each POST makes a
    Pending migration of the VM; each step of ``wait`` runs every Pending one and ends the
    oldest Running one (``fail`` names VMs whose migration fails instead of moving them)."""

    check_mode = False

    def __init__(self, vms: list[str], fail: tuple[str, ...] = ()) -> None:
        self.node = {vm: "node-1" for vm in vms}
        self.migs: dict[str, dict[str, Any]] = {}
        self.fail = fail
        self.posts: list[str] = []
        self.deleted: list[str] = []
        self.steps = 0
        self.vmi_selectors: list[str | None] = []

    def raw_post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        vm = path.split("/")[-1].split("?")[0]
        self.posts.append(vm)
        name = f"{vm}-{len(self.posts):05d}"
        self.migs[f"default/{name}"] = {
            "metadata": {"name": name, "namespace": "default",
                         "creationTimestamp": f"2026-01-01T00:00:{len(self.posts):02d}Z"},
            "spec": {"vmiName": vm}, "status": {"phase": "Pending"}}
        return 204, b""

    def patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None) -> dict[str, Any]:
        return {}

    def delete(self, api_version: str, kind: str, name: str,
               namespace: str | None = None) -> None:
        self.deleted.append(name)

    def view(self) -> dict[str, Any]:
        return {"VirtualMachineInstance": {
            f"default/{vm}": {"metadata": {"name": vm, "namespace": "default"},
                              "status": {"phase": "Running", "nodeName": n}}
            for vm, n in self.node.items()},
            "VirtualMachineInstanceMigration": {k: dict(m) for k, m in self.migs.items()}}

    def wait(self, sources: Any, pred: Any, *, on_change: Any, timeout: float, what: str,
             describe: Any = None) -> Any:
        self.vmi_selectors += [src.label_selector for src in sources
                               if src.kind == "VirtualMachineInstance"]
        for _ in range(50):
            self.steps += 1
            running = [m for m in self.migs.values() if m["status"]["phase"] == "Running"]
            if running:
                m = running[0]
                vm = m["spec"]["vmiName"]
                m["status"] = {"phase": "Failed" if vm in self.fail else "Succeeded"}
                if vm not in self.fail:
                    self.node[vm] = "node-2"
            for m in self.migs.values():
                if m["status"]["phase"] == "Pending":
                    m["status"] = {"phase": "Running"}
            view = self.view()
            on_change(view)
            if pred(view):
                return True
        raise waiting.WaitTimeout(what, timeout, "")


def _three_vms_to_node_2(ev: Any) -> Any:
    moves = [ev.Move(ev.vm_view({"metadata": {"name": vm, "namespace": "default"},
                                 "status": {"phase": "Running", "nodeName": "node-1"}}),
                     "node-2", "upgraded node") for vm in ("vm-a", "vm-b", "vm-c")]
    return ev.EvacuationPlan(node="node-1", migrate=moves)


def test_head_start_feeds_harvesters_action_one_lane_at_a_time() -> None:
    """Harvester's action pins only what KubeVirt runs at once: the head start starts two,
    then the third as soon as a lane frees, and returns once every one is started and seen
    (it does not wait for them to end: the finish or the node's own cycle does)."""
    ev = pytest.importorskip(
        "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.evacuation")
    mt = pytest.importorskip(
        "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.migration_target")
    kube = _LanesKube(["vm-a", "vm-b", "vm-c"])
    result: dict[str, Any] = {"migrated": []}
    node_migrations.migrate_all(
        kube, _Writer(), "node-1", _three_vms_to_node_2(ev), [], result,  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=0, migration_timeout=float("inf"),
        timeout=30, feed=True, mechanism=mt.HARVESTER_ACTION)
    assert kube.posts == ["vm-a", "vm-b", "vm-c"]
    assert result["started"] == ["default/vm-a", "default/vm-b", "default/vm-c"]
    assert "partial" not in result
    assert kube.node["vm-c"] == "node-1"     # started, not awaited
    assert kube.deleted == []
    assert kube.vmi_selectors == ["kubevirt.io/nodeName=node-1"]   # the node's VMIs only


def test_head_start_feed_leaves_a_failed_migration_to_the_nodes_cycle() -> None:
    ev = pytest.importorskip(
        "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.evacuation")
    mt = pytest.importorskip(
        "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.migration_target")
    kube = _LanesKube(["vm-a", "vm-b", "vm-c"], fail=("vm-a",))
    result: dict[str, Any] = {"migrated": []}
    node_migrations.migrate_all(
        kube, _Writer(), "node-1", _three_vms_to_node_2(ev), [], result,  # type: ignore[arg-type]
        target_aware=True, concurrency=2, retries=0, migration_timeout=float("inf"),
        timeout=30, feed=True, mechanism=mt.HARVESTER_ACTION)
    assert "vm-a" in result["partial"] and "own cycle retries it" in result["partial"]
    assert kube.posts.count("vm-a") == 1       # no retry here
    assert kube.deleted == []                  # nothing aborted


def _node(name: str, ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


class _NodesKube:
    """``list`` answers the nodes now; ``wait`` judges the nodes as they are ``later``."""

    check_mode = False

    def __init__(self, now: list[dict[str, Any]], later: list[dict[str, Any]]) -> None:
        self.now, self.later, self.waited = now, later, []

    def list(self, api_version: str, kind: str, namespace: str | None = None
             ) -> list[dict[str, Any]]:
        assert (api_version, kind) == ("v1", "Node")
        return self.now

    def wait(self, sources: Any, pred: Any, *, timeout: float, what: str,
             describe: Any = None) -> Any:
        view = {"Node": {n["metadata"]["name"]: n for n in self.later}}
        self.waited.append(what)
        done = pred(view)
        if done:
            return done
        raise waiting.WaitTimeout(what, timeout, describe(view))


def test_wait_nodes_ready_waits_for_the_other_nodes_only() -> None:
    kube = _NodesKube([_node("n1", "Unknown"), _node("n2")], [])
    assert node_safety.wait_nodes_ready(kube, "n1", 10) == {"waited": False}   # the node itself
    assert kube.waited == []
    kube = _NodesKube([_node("n1"), _node("n2"), _node("n3", "Unknown")],
                      [_node("n1"), _node("n2"), _node("n3")])
    assert node_safety.wait_nodes_ready(kube, "n2", 10) == {"waited": True}
    assert kube.waited == ["every other node to be Ready before node n2 goes down"]
    kube = _NodesKube([_node("n1"), _node("n3", "Unknown")], [_node("n1"), _node("n3", "False")])
    with pytest.raises(waiting.WaitTimeout, match="not Ready: n3"):
        node_safety.wait_nodes_ready(kube, "n1", 10)


class Indexed:
    """``by_index`` of :class:`cycle_kube.CycleKube` over plain lists (the Longhorn indexes)."""

    def __init__(self, **sets: list[dict[str, Any]]) -> None:
        li = pytest.importorskip(f"{_MU}.longhorn_index")
        indexers = {"Volume": li.VOLUME_INDEXERS, "Replica": li.REPLICA_INDEXERS,
                    "Engine": li.ENGINE_INDEXERS}
        self.sets = {kind: (objs, indexers[kind]) for kind, objs in sets.items()}

    def by_index(self, api: str, kind: str, ns: str, index: str,
                 value: str | None = None) -> Any:
        objs, indexers = self.sets[kind]
        under: dict[str, list[dict[str, Any]]] = {}
        for o in objs:
            if k := indexers[index](o):
                under.setdefault(k, []).append(o)
        return set(under) if value is None else under.get(value, [])


def test_the_indexed_longhorn_check_answers_as_the_pass_over_every_replica() -> None:
    # random clusters: node_safety.any_at_risk_indexed (the informers' indexes) says "at
    # risk" exactly when volumes_at_risk (every Replica and Volume) names a volume
    import random

    rnd = random.Random(25)
    nodes = ["n1", "n2", "n3", "n4"]
    seen = {True: 0, False: 0}
    for _ in range(400):
        vols, reps = [], []
        for i in range(rnd.randint(0, 6)):
            vols.append(vol(f"v{i}", "degraded", rnd.choice(["attached", "attaching",
                                                            "detached"])))
            for _r in range(rnd.randint(0, 3)):
                r = rep(f"v{i}", rnd.choice(nodes), running=rnd.random() < 0.7)
                if rnd.random() < 0.15:
                    r["spec"]["failedAt"] = "2026-01-01T00:00:00Z"
                reps.append(r)
        want = bool(node_safety.volumes_at_risk(vols, "n1", reps))
        assert node_safety.any_at_risk_indexed(Indexed(Volume=vols, Replica=reps),
                                               "n1") is want, (vols, reps)
        seen[want] += 1
    assert seen[True] > 50 and seen[False] > 50, seen
    # a client without indexes: the caller makes the pass
    assert node_safety.any_at_risk_indexed(object(), "n1") is None


def test_the_indexed_engine_checks_answer_as_the_pass_over_every_engine() -> None:
    # random clusters: node_job._engines_indexed gives (settled, some running engine's volume
    # not healthy) as _engines_settled and _volumes_to_skip's first look see them
    import random
    rnd = random.Random(26)
    seen = set()
    for _ in range(400):
        vols, engines = [], []
        for i in range(rnd.randint(0, 5)):
            if rnd.random() < 0.9:
                vols.append(vol(f"v{i}", rnd.choice(["healthy", "degraded", "unknown"]),
                                rnd.choice(["attached", "attaching", "detached", ""])))
            if rnd.random() < 0.8:
                engines.append({"metadata": {"name": f"v{i}-e-0",
                                             "labels": {"longhornvolume": f"v{i}"}},
                                "status": {"currentState": rnd.choice(["running",
                                                                       "stopped"])}})
        view = (engines, {v["metadata"]["name"]: v for v in vols})
        settled = node_job._engines_settled(None, view) is None
        unhealthy = any(v is not None and (v.get("status") or {}).get("robustness") !=
                        "healthy" for _n, v in node_job._running_engine_volumes(*view))
        got = node_job._engines_indexed(Indexed(Volume=vols, Engine=engines))
        assert got == (settled, unhealthy), (vols, engines)
        seen.add(got)
    assert len(seen) == 4, seen
    assert node_job._engines_indexed(object()) is None
