"""End-to-end: the cluster-level phases (issue 6) against the simulator.

One simulated ``three-node`` cluster carries the main journey (``journey`` fixture, run
once for the module):

1. ``--check`` on the fresh cluster (node loop skipped: its own tests cover its check mode):
   exit 0, every phase says what it would do, no write;
2. ``--tags preflight`` (what-if): every check runs and is reported, no write;
3. ``--tags preflight,iso_download,repo_create``: a real plan, stopped at ``RepoCreated``;
4. ``--tags image_preload`` on that plan: out of order, a warning naming the next tag, skipped;
5. ``--skip-tags node_upgrade``: continues from ``RepoCreated`` (earlier phases verified, not
   redone) to ``ClusterUpgraded``;
6. the whole playbook: from ``ClusterUpgraded`` through the node loop, ImageCleanup and
   Finalize to ``Succeeded`` (nodes ``ImageCleaned``, reference §F.3 cleanup).

The plan is then compared field for field with upgrade-toolkit's example in seed 001
(``EXPECTED_*`` below). Each pre-flight failure gets its own small simulator
(``test_preflight_failure_stops_in_initialize``) and the checksum fault another.

Writes are counted with the API server's request statistics (``sim.stats()``: external
clients only), objects with ``sim.world.store``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit import (
    PLAN_API,
    PLAN_LABEL,
    PlaybookResult,
    delta,
    kubectl,
    plans,
    run_playbook,
    writes,
)

harvester_sim = pytest.importorskip("harvester_sim")

pytestmark = [pytest.mark.timeout(900)]

SPEED = 200
TOOLKIT_TAG = "main-head"          # seed 001's spec.upgrade

# --- upgrade-toolkit's example (seed 001), up to ClusterUpgraded --------------------------------
EXPECTED_PHASES = [
    "Initializing", "Initialized", "ISODownloading", "ISODownloaded", "RepoCreating",
    "RepoCreated", "MetadataPopulating", "MetadataPopulated", "ImagePreloading",
    "ImagePreloaded", "ClusterUpgrading", "ClusterUpgraded"]
SEED_STATUS_KEYS = {"conditions", "currentPhase", "isoImageID", "nodeUpgradeStatuses",
                    "phaseTransitionTimestamps", "previousVersion", "provisionGeneration",
                    "releaseMetadata", "version"}
SEED_RELEASE_KEYS = {"harvester", "harvesterChart", "kubernetes", "minUpgradableVersion",
                     "monitoringChart", "os", "rancher"}
# The toolkit's VersionSpec (reference §A.1): seed 001's Version had only isoURL/isoChecksum
VERSION_SPEC_KEYS = {"isoURL", "isoChecksum", "releaseDate", "tags"}
EXPECTED_SPEC = {"imagePreloadOption": {"concurrency": 100}, "nodeUpgradeOption": {},
                 "restoreVM": True, "upgrade": TOOLKIT_TAG, "version": "v1.6.0"}
EXPECTED_CONDITIONS_MIDWAY = [  # (type, status, reason, message), in the seed's order
    ("Progressing", "True", "ClusterUpgraded", ""),
    ("Degraded", "False", "ReconcileSuccess", ""),
    ("Available", "True", "Executable", "")]
CLUSTER_PHASES = ["ISODownload", "RepoCreate", "MetadataPopulate", "ImagePreload",
                  "ClusterUpgrade"]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def plan_events(sim: Any, plan: str) -> list[dict[str, Any]]:
    evs = [e for e in sim.world.client.list("v1", "Event")
           if (e.get("involvedObject") or {}).get("kind") == "UpgradePlan"
           and e["involvedObject"].get("name") == plan]
    return sorted(evs, key=lambda e: int(e["metadata"].get("resourceVersion") or 0))


def upgrade_objects(sim: Any) -> list[str]:
    """What an upgrade creates (VMImages, repo, SUC Plans, Jobs, labelled objects)."""
    c = sim.world.client
    found: list[str] = []
    for api, kind, ns in (("harvesterhci.io/v1beta1", "VirtualMachineImage", None),
                          ("upgrade.cattle.io/v1", "Plan", None),
                          ("batch/v1", "Job", "harvester-system"),
                          ("batch/v1", "Job", "cattle-system")):
        found += [f"{kind} {o['metadata'].get('namespace')}/{o['metadata']['name']}"
                  for o in c.list(api, kind, ns)]
    for api, kind in (("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "ConfigMap")):
        found += [f"{kind} {o['metadata'].get('namespace')}/{o['metadata']['name']}"
                  for o in c.list(api, kind, "harvester-system")
                  if PLAN_LABEL in (o["metadata"].get("labels") or {})
                  or o["metadata"]["name"].startswith("hvst-upgrade-")]
    return found


def release_metadata(sim: Any, version: str) -> dict[str, str]:
    rel = sim.world.extras["releases"].get(version)
    return {k: str(v) for k, v in rel.release_metadata().items() if k in SEED_RELEASE_KEYS}


def scenario_file(tmp: Path, name: str, body: dict[str, Any]) -> str:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **body}, sort_keys=False))
    return str(path)


def cond(plan: dict[str, Any], ctype: str) -> dict[str, Any]:
    for c in (plan.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return {}


# ---------------------------------------------------------------------------------------------
# the journey on three-node (shared by several tests)
# ---------------------------------------------------------------------------------------------

@dataclass
class Step:
    result: PlaybookResult
    writes: dict[str, int]
    seconds: float
    plans: list[dict[str, Any]]
    objects: list[str]
    events: list[dict[str, Any]]


@dataclass
class Journey:
    sim: Any
    steps: dict[str, Step] = field(default_factory=dict)
    uids_after_repo: dict[str, str] = field(default_factory=dict)
    uids_at_end: dict[str, str] = field(default_factory=dict)
    kubectl_table: str = ""
    replenish_before: str | None = None
    replenish_written: list[str] = field(default_factory=list)   # every change of the value
    progressing_messages: list[str] = field(default_factory=list)   # as written, in order
    cluster_at_cluster_upgraded: dict[str, Any] = field(default_factory=dict)
    finish_audit: list[dict[str, Any]] = field(default_factory=list)   # the last run's requests

    @property
    def plan(self) -> dict[str, Any]:
        """The plan as ``--skip-tags node_upgrade`` left it (ClusterUpgraded)."""
        return self._only("rest")

    @property
    def final_plan(self) -> dict[str, Any]:
        """The plan after the whole playbook ran on it (Succeeded)."""
        return self._only("finish")

    def _only(self, key: str) -> dict[str, Any]:
        assert key in self.steps, f"the journey stopped before step {key!r}"
        found = self.steps[key].plans
        assert len(found) == 1, [p["metadata"]["name"] for p in found]
        return found[0]


def _uids(sim: Any, plan: str) -> dict[str, str]:
    c = sim.world.client
    out = {}
    for api, kind, name in (("harvesterhci.io/v1beta1", "VirtualMachineImage", f"{plan}-iso"),
                            ("apps/v1", "Deployment", f"{plan}-repo"),
                            ("v1", "Service", f"{plan}-repo")):
        obj = c.try_get(api, kind, name, "harvester-system")
        if obj is not None:
            out[kind] = obj["metadata"]["uid"]
    return out


def _replenish(sim: Any) -> str | None:
    obj = sim.world.client.try_get("longhorn.io/v1beta2", "Setting",
                                   "replica-replenishment-wait-interval", "longhorn-system")
    return None if obj is None else str(obj.get("value"))


def _await_replenish(sim: Any, timeout: float = 60.0) -> str:
    """The setting's value once simulated Longhorn has created its defaults (after the world
    starts: on a loaded machine later than the scenario's first watch); the baseline the
    Finalize check compares with."""
    from harvester_sim import testing

    return testing.wait_for(lambda: _replenish(sim), timeout,
                            "Longhorn's replica-replenishment-wait-interval setting")


@pytest.fixture(scope="module")
def journey() -> Iterator[Journey]:
    from harvester_sim import testing

    with testing.running("three-node", speed=SPEED) as sim:
        j = Journey(sim)
        j.replenish_before = _await_replenish(sim)

        def seen(ev: Any) -> None:   # every committed write, under the store's lock
            # changes of the value only: Longhorn's own create and status writes of its
            # default setting may land after this subscription on a loaded machine
            if ev.obj.get("kind") == "Setting" and ev.obj["metadata"].get("name") == \
                    "replica-replenishment-wait-interval" and ev.old is not None and \
                    ev.old.get("value") != ev.obj.get("value"):
                j.replenish_written.append(str(ev.obj.get("value")))
            if ev.obj.get("kind") != "UpgradePlan":
                return
            msg = cond(ev.obj, "Progressing").get("message")
            if msg is not None and (not j.progressing_messages
                                    or j.progressing_messages[-1] != msg):
                j.progressing_messages.append(msg)

        sim.world.store.subscribe(seen)

        def step(key: str, **kw: Any) -> Step:
            before, t = writes(sim), time.time()
            res = run_playbook(sim, "upgrade.yml", **kw)
            found = plans(sim)
            s = Step(res, delta(before, writes(sim)), time.time() - t, found,
                     upgrade_objects(sim),
                     plan_events(sim, found[0]["metadata"]["name"]) if found else [])
            j.steps[key] = s
            return s

        # (the node loop's own --check is tested in test_node_upgrade.py)
        step("check", check=True, skip_tags="node_upgrade",
             extra_vars={"upgrade_toolkit_tag": TOOLKIT_TAG})
        step("what_if", tags="preflight")
        first = step("first", tags="preflight,iso_download,repo_create",
                     extra_vars={"upgrade_toolkit_tag": TOOLKIT_TAG})
        if first.plans:
            name = first.plans[0]["metadata"]["name"]
            j.uids_after_repo = _uids(sim, name)
            step("out_of_order", tags="image_preload")
            step("rest", skip_tags="node_upgrade",
                 extra_vars={"upgrade_toolkit_tag": TOOLKIT_TAG})
            j.uids_at_end = _uids(sim, name)
            j.cluster_at_cluster_upgraded = sim.world.client.get(
                "provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")["spec"]
            j.kubectl_table = kubectl(sim, "get", "upgradeplans").stdout
            # and the rest of the upgrade: node loop, ImageCleanup, Finalize (audited: who
            # released the lock)
            sim.server.audit = []
            step("finish")
            j.finish_audit, sim.server.audit = list(sim.server.audit), None
        yield j


# --- 5. --check on a fresh cluster ---------------------------------------------------------------

def test_check_mode_changes_nothing_and_says_what_each_phase_would_do(journey: Journey) -> None:
    s = journey.steps["check"]
    assert s.result.rc == 0, str(s.result)
    assert s.writes == {}, f"--check wrote to the cluster: {s.writes}"
    assert s.plans == [] and s.objects == []
    out = s.result.output
    assert "would create an UpgradePlan to v1.6.0" in out, str(s.result)
    for phase in CLUSTER_PHASES + ["ImageCleanup"]:
        assert f"{phase} would " in out, f"{phase}: no 'would' line\n{s.result}"
    assert "all 21 pre-flight checks passed" in out or "pre-flight checks passed" in out


# --- 3. --tags preflight: what-if ---------------------------------------------------------------

def test_tags_preflight_is_a_what_if_check(journey: Journey) -> None:
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
        preflight_checks,
    )

    s = journey.steps["what_if"]
    assert s.result.rc == 0, str(s.result)
    assert s.writes == {}, f"what-if wrote to the cluster: {s.writes}"
    assert s.plans == [] and s.objects == []
    for name in preflight_checks.CHECKS:
        assert f"| {name} |" in s.result.output, f"check {name} not reported\n{s.result}"
    assert "what-if" in s.result.output
    # nothing but the run's own plays ran
    assert "ISODownload: started" not in s.result.output


# --- 6. re-running continues from currentPhase -------------------------------------------------

def test_first_phases_only_then_out_of_order_tag_is_skipped(journey: Journey) -> None:
    first = journey.steps["first"]
    assert first.result.rc == 0, str(first.result)
    assert len(first.plans) == 1, str(first.result)
    assert first.plans[0]["status"]["currentPhase"] == "RepoCreated"
    assert set(journey.uids_after_repo) == {"VirtualMachineImage", "Deployment", "Service"}

    ooo = journey.steps["out_of_order"]
    assert ooo.result.rc == 0, str(ooo.result)
    assert "next: MetadataPopulate, tag metadata_populate" in ooo.result.output, str(ooo.result)
    assert ooo.plans[0]["status"]["currentPhase"] == "RepoCreated"
    # nothing but the run's lock (a Lease taken and released)
    assert {k for k in ooo.writes if not k.endswith(" leases")} <= {"create events"}, \
        ooo.writes


def test_rerun_continues_from_current_phase(journey: Journey) -> None:
    rest = journey.steps["rest"]
    assert rest.result.rc == 0, str(rest.result)
    plan = journey.plan
    assert plan["status"]["currentPhase"] == "ClusterUpgraded"
    # finished phases verified, not redone: same objects, no second creation, one entry each
    assert journey.uids_at_end == journey.uids_after_repo
    created = {k: v for k, v in rest.writes.items() if k.startswith("create ")}
    assert not any("virtualmachineimages" in k for k in created), created
    assert not any(k.endswith(" deployments") or k.endswith(" services") for k in created), \
        created
    out = rest.result.output
    assert "ISODownload already completed" in out and "RepoCreate already completed" in out
    entering = [e["message"] for e in rest.events if e["reason"] == "PhaseTransition"]
    assert entering == [f"Entering phase {p}" for p in CLUSTER_PHASES], entering


# --- 1. the plan at ClusterUpgraded, field for field --------------------------------------------

def test_plan_matches_the_toolkit_example(journey: Journey) -> None:
    sim, plan = journey.sim, journey.plan
    meta, spec, st = plan["metadata"], plan["spec"], plan["status"]
    assert meta.get("generateName") == "hvst-upgrade-" and meta["name"].startswith(
        "hvst-upgrade-")
    assert spec == EXPECTED_SPEC
    # provisionGeneration is recorded when NodeUpgrade hands the roll to Rancher
    assert set(st) == SEED_STATUS_KEYS - {"provisionGeneration"}, sorted(st)
    assert st["currentPhase"] == "ClusterUpgraded"
    got = [(c["type"], c["status"], c["reason"], c["message"]) for c in st["conditions"]]
    assert got == EXPECTED_CONDITIONS_MIDWAY
    for c in st["conditions"]:
        assert c["observedGeneration"] == meta["generation"] and c["lastTransitionTime"]
    assert [p["phase"] for p in st["phaseTransitionTimestamps"]] == EXPECTED_PHASES
    stamps = [p["phaseTransitionTimestamp"] for p in st["phaseTransitionTimestamps"]]
    assert stamps == sorted(stamps) and all(s.endswith("Z") for s in stamps)
    assert st["previousVersion"] == "v1.5.1"
    assert st["releaseMetadata"] == release_metadata(sim, "v1.6.0")
    assert set(st["releaseMetadata"]) == SEED_RELEASE_KEYS
    version = sim.world.client.get("harvesterhci.io/v1beta1", "Version", "v1.6.0",
                                   "harvester-system")["spec"]
    assert set(st["version"]) <= VERSION_SPEC_KEYS
    assert {"isoURL", "isoChecksum"} <= set(st["version"])
    assert st["version"] == {k: v for k, v in version.items() if k in VERSION_SPEC_KEYS}
    assert len(st["version"]["isoChecksum"]) == 128
    assert st["isoImageID"] == f"{meta['name']}-iso"
    nodes = [n["metadata"]["name"] for n in sim.world.client.list("v1", "Node")]
    assert st["nodeUpgradeStatuses"] == {n: {"state": "ImagePreloaded"} for n in nodes}
    # ClusterUpgrade leaves the Rancher cluster alone: neither upgrade_manifests.sh nor the
    # collection sets the Kubernetes version before NodeUpgrade (seed 000 upgradeKubernetes)
    cluster = journey.cluster_at_cluster_upgraded
    assert cluster and cluster.get("kubernetesVersion") != st["releaseMetadata"]["kubernetes"]
    strategy = (cluster.get("rkeConfig") or {}).get("upgradeStrategy") or {}
    assert not (strategy.get("controlPlaneDrainOptions") or {}).get("preDrainHooks"), strategy
    assert "provisionGeneration" not in (cluster.get("rkeConfig") or {}), cluster


def test_progressing_message_says_what_a_phase_waits_for(journey: Journey) -> None:
    name = journey.plan["metadata"]["name"]
    msgs = journey.progressing_messages
    for awaited in (f"VirtualMachineImage harvester-system/{name}-iso to be Imported",
                    f"Deployment harvester-system/{name}-repo to be available",
                    f"SUC Plan cattle-system/{name}-image-preload to complete",
                    f"Job harvester-system/{name}-cluster-upgrade to complete"):
        assert any(m.startswith(f"waiting for {awaited}") for m in msgs), msgs
    assert cond(journey.plan, "Progressing")["message"] == ""   # cleared on completion


def test_plan_events_are_the_toolkits(journey: Journey) -> None:
    plan, evs = journey.plan, journey.steps["rest"].events
    seq = [(e["type"], e["reason"], e["message"]) for e in evs
           if e["reason"] in ("PhaseTransition", "PhaseCompleted")]
    want = []
    for p in CLUSTER_PHASES:
        want += [("Normal", "PhaseTransition", f"Entering phase {p}"),
                 ("Normal", "PhaseCompleted", f"Completed phase {p}")]
    assert seq == want
    for e in evs:
        assert (e.get("source") or {}).get("component") == "upgradeplan-controller"
        assert e["involvedObject"]["apiVersion"] == PLAN_API
        assert e["involvedObject"]["uid"] == plan["metadata"]["uid"]
    assert not [e for e in evs if e["reason"] in ("UpgradeFailed", "ReconcileError")]


def test_kubectl_get_upgradeplans_printer_columns(journey: Journey) -> None:
    lines = journey.kubectl_table.strip().splitlines()
    assert len(lines) == 2, journey.kubectl_table
    assert lines[0].split() == ["NAME", "VERSION", "CURRENTPHASE", "AVAILABLE", "PROGRESSING",
                                "DEGRADED", "AGE"]
    row = lines[1].split()
    assert row[:6] == [journey.plan["metadata"]["name"], "v1.6.0", "ClusterUpgraded", "True",
                       "True", "False"]


# --- the whole upgrade: NodeUpgrade, ImageCleanup and Finalize -----------------------------------

EXPECTED_PHASES_ALL = EXPECTED_PHASES + ["NodeUpgrading", "NodeUpgraded", "CleaningUp",
                                         "CleanedUp", "Succeeded"]
EXPECTED_CONDITIONS_END = [
    ("Progressing", "False", "Succeeded", "UpgradePlan has completed"),
    ("Degraded", "False", "ReconcileSuccess", ""),
    ("Available", "False", "Executed", "Entered one of the terminal phases")]


def test_whole_upgrade_succeeds_like_the_toolkit_example(journey: Journey) -> None:
    fin = journey.steps["finish"]
    assert fin.result.rc == 0, str(fin.result)
    sim, plan = journey.sim, journey.final_plan
    st = plan["status"]
    assert st["currentPhase"] == "Succeeded", str(fin.result)
    assert plan["spec"] == EXPECTED_SPEC
    assert set(st) == SEED_STATUS_KEYS, sorted(st)
    got = [(c["type"], c["status"], c["reason"], c["message"]) for c in st["conditions"]]
    assert got == EXPECTED_CONDITIONS_END
    assert [p["phase"] for p in st["phaseTransitionTimestamps"]] == EXPECTED_PHASES_ALL
    nodes = [n["metadata"]["name"] for n in sim.world.client.list("v1", "Node")]
    assert st["nodeUpgradeStatuses"] == {n: {"state": "ImageCleaned"} for n in nodes}
    assert st["provisionGeneration"] == 1
    # the earlier phases were verified, not redone
    out = fin.result.output
    assert "ClusterUpgrade already completed" in out
    assert "<== ImageCleanup: completed" in out and "<== Finalize: completed" in out
    evs = [(e["type"], e["reason"], e["message"]) for e in fin.events
           if e.get("source", {}).get("component") == "upgradeplan-controller"]
    phases = CLUSTER_PHASES + ["NodeUpgrade", "ImageCleanup"]
    want = []
    for p in phases:
        want += [("Normal", "PhaseTransition", f"Entering phase {p}"),
                 ("Normal", "PhaseCompleted", f"Completed phase {p}")]
    assert [e for e in evs if e[1] in ("PhaseTransition", "PhaseCompleted")] == want
    assert evs[-1] == ("Normal", "UpgradeSucceeded", "Upgrade completed successfully"), evs
    lines = kubectl(sim, "get", "upgradeplans").stdout.strip().splitlines()
    assert lines[1].split()[1:6] == ["v1.6.0", "Succeeded", "False", "False", "False"]
    # every node whose VMs were shut down had them restored, the last node's while
    # ImageCleanup ran (awaited by Finalize): an event per node, no VM left marked
    restores = [e["message"] for e in plan_events(sim, plan["metadata"]["name"])
                if e["reason"] == "RestoreVMCompleted"]
    stopped = [e for e in sim.world.timeline.snapshot() if e.get("event") == "vm_stopped"]
    shut = {e.get("node") for e in stopped}
    assert shut and all(any(f"for node {n}" in m for m in restores) for n in shut), restores
    assert f"shut down {len(stopped)}, restored {len(stopped)}, restore failed 0" in out, out
    for vm in sim.world.client.list("kubevirt.io/v1", "VirtualMachine"):
        assert "harvester-upgrade.harvesterhci.io/restoring-for-node" not in (
            vm["metadata"].get("annotations") or {}), vm["metadata"]["name"]


def test_finalize_releases_the_lock_once_the_plan_succeeded(journey: Journey) -> None:
    """Nothing of the run writes after Finalize: it deletes the Lease itself, and the
    playbook's last play (upgrade_lock state=released) has nothing left to do."""
    lease = [(e["verb"], e["userAgent"]) for e in journey.finish_audit
             if e["objectRef"].get("resource") == "leases"]
    assert ("delete", "harvester-upgrade/finalize") in [
        (v, ua.split(" ")[0]) for v, ua in lease], lease
    assert not [ua for _, ua in lease if ua.startswith("harvester-upgrade/upgrade_lock")], lease
    assert journey.sim.world.client.try_get("coordination.k8s.io/v1", "Lease",
                                            "harvester-upgrade-lock", "harvester-system") is None


def test_finalize_cleans_up_like_the_toolkit(journey: Journey) -> None:
    """Reference §F.3: what CleanupUpgradeResources deletes and restores."""
    sim, plan = journey.sim, journey.final_plan
    name = plan["metadata"]["name"]
    c = sim.world.client
    labelled: list[str] = []
    for api, kind, ns in (("harvesterhci.io/v1beta1", "VirtualMachineImage", None),
                          ("apps/v1", "Deployment", None), ("v1", "Service", None),
                          ("upgrade.cattle.io/v1", "Plan", None), ("batch/v1", "Job", None)):
        labelled += [f"{kind} {o['metadata'].get('namespace')}/{o['metadata']['name']}"
                     for o in c.list(api, kind, ns)
                     if (o["metadata"].get("labels") or {}).get(PLAN_LABEL) == name]
    assert labelled == [], f"left behind by Finalize: {labelled}"
    for node in c.list("v1", "Node"):
        assert "management.harvesterhci.io/pendingOSImage" not in (
            node["metadata"].get("annotations") or {})
    cluster = c.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")
    assert "upgradeStrategy" not in ((cluster.get("spec") or {}).get("rkeConfig") or {})
    assert cluster["spec"]["kubernetesVersion"] == release_metadata(sim, "v1.6.0")[
        "kubernetes"]   # left as upgraded
    # NodeUpgrade's PreRun held it at 1800 for the roll; Finalize put the original back
    assert journey.replenish_written[:1] == ["1800"], journey.replenish_written
    assert _replenish(sim) == journey.replenish_before
    assert "management.harvesterhci.io/replica-replenishment-wait-interval" not in (
        plan["metadata"].get("annotations") or {})
    # left behind on purpose, as the toolkit does: the restore-vm ConfigMap (owned by the plan)
    cm = c.try_get("v1", "ConfigMap", f"{name}-restore-vm", "harvester-system")
    assert cm is not None and cm["metadata"]["ownerReferences"][0]["uid"] == \
        plan["metadata"]["uid"]


# ---------------------------------------------------------------------------------------------
# 2. pre-flight failures stop in Initialize
# ---------------------------------------------------------------------------------------------

NODES = [{"name": f"node-{i}", "roles": ["control-plane", "etcd", "worker"]} for i in (1, 2, 3)]
NODES[2]["devices"] = {"nvidia.com/GA102GL_A10": 1}   # three-node's gpu VM needs it


def _nodes(**node2: Any) -> list[dict[str, Any]]:
    out = [dict(n) for n in NODES]
    out[1].update(node2)
    return out


def _chart_not_ready(sim: Any) -> None:
    """ManagedChart ``harvester`` left paused (as an interrupted chart upgrade leaves it): the
    simulated Rancher reports it ``Ready=False``."""
    c = sim.world.client
    c.patch("management.cattle.io/v3", "ManagedChart", "harvester", {"spec": {"paused": True}},
            "fleet-local")
    for _attempt in range(100):
        mc = c.get("management.cattle.io/v3", "ManagedChart", "harvester", "fleet-local")
        if cond(mc, "Ready").get("status") == "False":
            return
        time.sleep(0.05)
    raise AssertionError(f"ManagedChart harvester still Ready: {mc.get('status')}")


def _degraded(sim: Any) -> None:
    """Waits for the scenario's volume_degraded fault to fail its volume's replica."""
    c = sim.world.client
    for _attempt in range(200):
        vol = c.try_get("longhorn.io/v1beta2", "Volume", "data-degraded", "longhorn-system")
        if ((vol or {}).get("status") or {}).get("robustness") == "degraded":
            return
        time.sleep(0.05)
    raise AssertionError(f"volume data-degraded not degraded: {(vol or {}).get('status')}")


def _leftover_drain_hooks(sim: Any) -> None:
    """A drain-hook strategy left on a single-node cluster (an earlier multi-node upgrade that
    never cleaned up): the simulated Rancher, like rancher/rancher, would cordon the node and
    wait for the hooks once the single-node job sets the new Kubernetes version."""
    hooks = {"enabled": True, "force": True, "ignoreDaemonSets": True,
             "deleteEmptyDirData": True,
             "preDrainHooks": [{"annotation": "harvesterhci.io/pre-hook"}],
             "postDrainHooks": [{"annotation": "harvesterhci.io/post-hook"}]}
    sim.world.client.patch("provisioning.cattle.io/v1", "Cluster", "local",
                           {"spec": {"rkeConfig": {"upgradeStrategy": {
                               "controlPlaneDrainOptions": hooks,
                               "workerDrainOptions": hooks}}}}, "fleet-local")


@dataclass
class Failure:
    id: str
    scenario: dict[str, Any]
    check: str
    message: str
    extra_vars: dict[str, Any] = field(default_factory=dict)
    setup: Callable[[Any], None] | None = None
    refused_before_plan: bool = False   # bad input: refused before a plan is created


FAILURES = [
    Failure("cordoned-node", {"extends": "three-node", "nodes": _nodes(unschedulable=True)},
            "nodes_ready", "nodes must be Ready and schedulable: node/node-2 (cordoned)"),
    # a replica that stays unusable: a volume_degraded fault without healing (a scenario's
    # initially failed replica would be rebuilt by Longhorn; three-node has no spare node to
    # replace it on after the replenishment wait)
    Failure("degraded-volume", {"extends": "three-node", "volumes": [
        {"name": "data-degraded", "size": "10Gi", "replicas": 3, "state": "attached",
         "node": "node-1"}], "faults": [
        {"kind": "volume_degraded", "target": {"volume": "data-degraded"}, "times": 1}]},
        "volumes_healthy", "degraded Longhorn volumes: volume/data-degraded",
        setup=_degraded),
    Failure("single-replica-attached", {"extends": "three-node", "volumes": [
        {"name": "scratch", "size": "5Gi", "replicas": 1, "state": "attached",
         "node": "node-2"}]},
        "single_replica_volumes", "single-replica Longhorn volumes: volume/scratch"),
    Failure("disk-nearly-full", {"extends": "three-node", "faults": [
        {"kind": "disk_nearly_full", "target": {"node": "node-3"}, "percent": 84}]},
        "disk_space", 'node "node-3" will reach 86.'),
    Failure("cert-near-expiry", {"extends": "three-node", "faults": [
        {"kind": "cert_near_expiry", "days": 3}]},
        "certificates", "API server certificates expire within 7 days"),
    Failure("managed-chart-not-ready", {"extends": "three-node"}, "managed_charts",
            "ManagedCharts not Ready: fleet-local/harvester", setup=_chart_not_ready),
    # no VMs: their single-replica volumes would fail single_replica_volumes as well
    Failure("single-node-drain-hooks", {"extends": "single-node", "vms": []},
            "single_node_drain_hooks",
            "single-node cluster but clusters.provisioning.cattle.io/fleet-local/local "
            "declares drain hooks", setup=_leftover_drain_hooks),
    Failure("version-not-newer", {"extends": "three-node", "harvester": {
        "installed": "v1.6.0", "available": ["v1.5.1"]}},
        "upgrade_version", "downgrade from v1.6.0 to v1.5.1 is not supported",
        extra_vars={"upgrade_version": "v1.5.1"}, refused_before_plan=True),
    # the default target (the newest Version) is checked before a plan is made for it: only
    # upgrade_allow_version_skip lets it through (upgrade_force does not)
    Failure("below-min-upgradable", {"extends": "three-node", "harvester": {
        "installed": "v1.5.1", "available": [
            {"version": "v1.6.0", "minUpgradableVersion": "v1.5.2"}]}},
            "upgrade_allow_version_skip=true", "minimum upgradable version v1.5.2",
            extra_vars={"upgrade_force": True}, refused_before_plan=True),
]


@pytest.mark.parametrize("case", FAILURES, ids=[f.id for f in FAILURES])
def test_preflight_failure_stops_in_initialize(case: Failure, simulator: Any,
                                               tmp_path: Path) -> None:
    sim = simulator(scenario_file(tmp_path, case.id, case.scenario), speed=SPEED)
    if case.setup:
        case.setup(sim)
    before = writes(sim)
    res = run_playbook(sim, "upgrade.yml", extra_vars=case.extra_vars)
    assert res.rc != 0, str(res)
    assert case.check in res.output and case.message in res.output, str(res)
    found = plans(sim)
    if case.refused_before_plan:
        assert found == [] and upgrade_objects(sim) == [], str(res)
        assert {k for k in delta(before, writes(sim)) if not k.endswith(" leases")} <= {
            "create customresourcedefinitions"}
        return
    assert len(found) == 1, str(res)
    st = found[0]["status"]
    assert st["currentPhase"] == "Failed"
    assert [p["phase"] for p in st["phaseTransitionTimestamps"]] == [
        "Initializing", "Failed"]
    progressing = cond(found[0], "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "Failed")
    assert case.check in progressing["message"] and case.message in progressing["message"]
    assert (cond(found[0], "Available")["status"], cond(found[0], "Available")["reason"]) == (
        "False", "Executed")
    assert upgrade_objects(sim) == [], "a failed pre-flight must create nothing else"
    # the plan (and its CRD), its Events, and the run's lock (a Lease, released at the end)
    made = {k for k, v in delta(before, writes(sim)).items() if k.startswith("create ")}
    assert made <= {"create upgradeplans", "create events", "create customresourcedefinitions",
                    "create leases"}, made
    failed_events = [e for e in plan_events(sim, found[0]["metadata"]["name"])
                     if e["reason"] == "UpgradeFailed"]
    assert failed_events and case.message in failed_events[0]["message"]
    assert not [e for e in plan_events(sim, found[0]["metadata"]["name"])
                if e["reason"] == "PhaseTransition"]


def test_up_to_date_cluster_is_left_alone(simulator: Any, tmp_path: Path) -> None:
    """No Version newer than the running release: no plan, nothing created, exit 0."""
    case = next(f for f in FAILURES if f.id == "version-not-newer")
    sim = simulator(scenario_file(tmp_path, "up-to-date", case.scenario), speed=SPEED)
    before = writes(sim)
    res = run_playbook(sim, "upgrade.yml")
    assert "no Version newer than v1.6.0" in res.output and "is up to date" in res.output, str(res)
    assert plans(sim) == [] and upgrade_objects(sim) == []
    assert set(delta(before, writes(sim))) <= {"create customresourcedefinitions"}
    assert res.rc == 0, str(res)


def test_what_if_on_a_failing_cluster_reports_and_creates_nothing(
        simulator: Any, tmp_path: Path) -> None:
    case = FAILURES[0]
    sim = simulator(scenario_file(tmp_path, "what-if-fail", case.scenario), speed=SPEED)
    before = writes(sim)
    res = run_playbook(sim, "upgrade.yml", tags="preflight")
    assert res.rc != 0, str(res)
    assert case.message in res.output, str(res)
    assert delta(before, writes(sim)) == {}
    assert plans(sim) == [] and upgrade_objects(sim) == []


# ---------------------------------------------------------------------------------------------
# 4. a checksum fault fails ISODownload
# ---------------------------------------------------------------------------------------------

def test_checksum_fault_fails_iso_download(simulator: Any, tmp_path: Path) -> None:
    # three-node-download-corrupt corrupts the first download only (the image controller
    # retries: spec.retry 3); every download corrupt exhausts the retries
    scn = scenario_file(tmp_path, "download-always-corrupt", {
        "extends": "three-node-download-corrupt",
        "faults": [{"kind": "image_download_corrupt", "target": {"version": "v1.6.0"}}]})
    sim = simulator(scn, speed=SPEED)
    res = run_playbook(sim, "upgrade.yml", skip_tags="node_upgrade")
    assert res.rc != 0, str(res)
    assert "ISODownload" in res.output and "checksum mismatch" in res.output, str(res)
    (plan,) = plans(sim)
    st = plan["status"]
    assert st["currentPhase"] == "Failed"
    assert [p["phase"] for p in st["phaseTransitionTimestamps"]][-3:] == [
        "Initialized", "ISODownloading", "Failed"]
    msg = cond(plan, "Progressing")["message"]
    assert msg.startswith("ISO image download failed") and "checksum mismatch" in msg, msg
    evs = [(e["reason"], e["message"]) for e in plan_events(sim, plan["metadata"]["name"])]
    assert ("PhaseTransition", "Entering phase ISODownload") in evs
    assert any(r == "UpgradeFailed" and "checksum mismatch" in m for r, m in evs), evs
    assert not any(r == "PhaseTransition" and "RepoCreate" in m for r, m in evs)
    assert not [o for o in upgrade_objects(sim) if "-repo" in o]


@pytest.mark.parametrize("selection", [{"tags": "image_preload"}, {"skip_tags": "preflight"},
                                       {}])
def test_variable_check_runs_whatever_the_tags(simulator: Any,
                                               selection: dict[str, str]) -> None:
    """The cross-phase variable check (role common, a dependency of every phase role) runs
    once per play with whichever phase --tags/--skip-tags leave: a bad value stops the run
    before anything is written."""
    sim = simulator("three-node", speed=SPEED)
    before = writes(sim)
    res = run_playbook(sim, "upgrade.yml", extra_vars={"iso_download_timeout": -5},
                       **selection)
    assert res.rc != 0, str(res)
    assert "Invalid variables" in res.output and "iso_download_timeout" in res.output, str(res)
    assert res.output.count("TASK [harvester.upgrade.common : Check the upgrade variables]") \
        == 1, str(res)
    assert delta(before, writes(sim)) == {} and plans(sim) == []
