"""Simulated Rancher provisioning-v2: the RKE2 planner and the machine drain handler.

Objects (created at setup when the scenario did not provide them, from the Nodes):
``clusters.provisioning.cattle.io fleet-local/local``, ``clusters.management.cattle.io
local``, per node a CAPI ``machines.cluster.x-k8s.io`` (``status.nodeRef``, role labels,
``rke.cattle.io/init-node`` on the init node), an ``rke.cattle.io`` CustomMachine and the
``<machine>-machine-plan`` Secret (type ``rke.cattle.io/machine-plan``); Nodes get the
``cluster.x-k8s.io/machine`` annotation.

Planner: when ``spec.kubernetesVersion`` (``+``/``-`` forms are equal) differs from the version
of the plan a machine last applied (its Machine ``spec.version``; the node's ``kubeletVersion``
when that is empty) the nodes are upgraded tier by tier — the init node, the other
etcd/control-plane nodes (``controlPlaneConcurrency``), then worker-only nodes
(``workerConcurrency``), each tier by machine name; a tier starts when the previous one is
done. Per node (planner ``drain``/``undrain`` and the machinedrain handler, annotations on
the machine-plan Secret; ``O`` = the tier's drain options, ``D`` = ``O`` as Rancher encodes
it, sorted keys and empty ``omitempty`` fields left out, with ``enabled: false`` on a
single-machine cluster):

0. when ``O`` has no ``preDrainHooks`` and no ``postDrainHooks`` and either ``enabled`` is
   false or the cluster has a single machine: no annotation and no cordon, only step 3.
1. ``rke.cattle.io/drain-options: D``; cordon; when ``O`` declares pre-drain hooks
   ``rke.cattle.io/pre-drain: D`` and wait (forever) until every
   ``preDrainHooks[].annotation`` (those that name one) equals ``D``.
2. when ``D`` has ``enabled``: drain through the eviction API (kubectl-drain rules: mirror
   pods skipped, DaemonSet pods need ignoreDaemonSets, unmanaged pods need force, emptyDir
   needs deleteEmptyDirData); a 429 is retried every 5 s (a LiveMigrate virt-launcher is
   migrated by KubeVirt meanwhile); an attempt that passes ``timeout`` (0 ⇒ 600 s) or hits
   a non-retriable pod writes ``rke.cattle.io/drain-error`` and starts over; then
   ``rke.cattle.io/drain-done: D``.
3. the RKE2 plan: ``kubelet.restart_kubelet(node, version)``; wait for the new kubelet.
4. ``rke.cattle.io/uncordon: D``; when ``O`` declares post-drain hooks
   ``rke.cattle.io/post-drain: D`` and wait for every ``postDrainHooks[].annotation`` ==
   ``D``; uncordon; delete all those annotations and the hook answers.

A single-node cluster is the bootstrap tier with ``controlPlaneDrainOptions``: with hooks
configured its node is cordoned and waits for them (never drained), as upstream.

Progress: cluster ``status.conditions`` ``Updated`` (Unknown + message while rolling),
``Ready``/``status.ready`` (all nodes Ready); timeline events ``planner_started``,
``node_cordoned``, ``pre_drain_set``, ``hook_acked``, ``drain_error``, ``drain_done``,
``rke2_applied``, ``post_drain_set``, ``node_uncordoned``, ``planner_done``; spans ``drain``
and ``rke2_restart``. Fault ``planner_stuck`` (target ``node``/``machine`` optional): the
planner stops progressing from that moment on, until the fault is cleared (then it steps on).

Upstream: rancher/rancher ``v2.11.2`` (Harvester v1.5.1) and ``v2.12.0`` (Harvester
v1.6.0): ``pkg/capr/planner/planner.go`` (tiers, concurrency), ``pkg/capr/planner/drain.go``
(``drain``: the short-circuit, ``optionsToString``; ``undrain``: the uncordon annotation),
``pkg/controllers/capr/machinedrain/machinedrain.go`` (cordon, pre-drain/post-drain hooks
only when declared, kubectl drain with ``timeout`` 0 ⇒ 600 s, annotation cleanup). The two
tags differ here only in what marks a plan change as one to drain for (v2.11.2: the
install instruction's ``RESTART_STAMP``; v2.12.0: its ``DRAIN_HASH``, and no drain when the
old plan carries none); a Kubernetes version change changes both, so both drain alike.
Not modelled: rancher-system-agent plan delivery and probes, plan contents (a version
change always counts as a drain-worthy change; a v2.12.0 planner meeting a plan written by
v2.11.2, which has no ``DRAIN_HASH``, would apply it without the drain steps), etcd
snapshots, bootstrap/join, certificate and encryption-key rotation.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Generator
from typing import Any

from ..client import ApiError
from ._upgrade_util import (
    Step,
    TaskGen,
    TaskRunner,
    install_crds,
    k8s_version,
    now_ts,
    set_condition,
)

log = logging.getLogger("harvester_sim.rancher")

NS = "fleet-local"
PROV_API = "provisioning.cattle.io/v1"
CAPI = "cluster.x-k8s.io/v1beta1"
RKE_API = "rke.cattle.io/v1"
MGMT_API = "management.cattle.io/v3"
MACHINE_ANN = "cluster.x-k8s.io/machine"
INIT_LABEL = "rke.cattle.io/init-node"
A_DRAIN_OPTIONS = "rke.cattle.io/drain-options"
A_PRE_DRAIN = "rke.cattle.io/pre-drain"
A_DRAIN_DONE = "rke.cattle.io/drain-done"
A_UNCORDON = "rke.cattle.io/uncordon"
A_POST_DRAIN = "rke.cattle.io/post-drain"
A_DRAIN_ERROR = "rke.cattle.io/drain-error"
RANCHER_ANNS = (A_DRAIN_OPTIONS, A_PRE_DRAIN, A_DRAIN_DONE, A_UNCORDON, A_POST_DRAIN,
                A_DRAIN_ERROR)
EVICT_RETRY_S = 5.0
DEFAULT_DRAIN_TIMEOUT_S = 600.0


def machine_name_for(node: str) -> str:
    return "custom-" + hashlib.sha256(node.encode()).hexdigest()[:12]


def _is_true(v: Any) -> bool:
    return str(v).lower() == "true"


def _conc(value: Any, tier_size: int) -> int:
    s = str(value or "1").strip()
    if s.endswith("%"):
        try:
            return max(1, int(tier_size * float(s[:-1]) / 100))
        except ValueError:
            return 1
    try:
        return max(1, int(s))
    except ValueError:
        return 1


def drain_options_json(opts: dict[str, Any], disable: bool = False) -> str:
    """``D``: what Rancher writes into every drain annotation. drain.go ``optionsToString``
    encodes the ``rkev1.DrainOptions`` struct (its ``omitempty`` fields dropped when empty:
    ``ignoreDaemonSets`` when unset, ``ignoreErrors`` when false, the hook lists when empty)
    into a map and marshals that, so the keys come out sorted; ``disable`` (a single-machine
    cluster) forces ``enabled`` to false."""
    full: dict[str, Any] = {
        "enabled": bool(opts.get("enabled", False)) and not disable,
        "force": bool(opts.get("force", False)),
        "deleteEmptyDirData": bool(opts.get("deleteEmptyDirData", False)),
        "disableEviction": bool(opts.get("disableEviction", False)),
        "gracePeriod": int(opts.get("gracePeriod") or 0),
        "timeout": int(opts.get("timeout") or 0),
        "skipWaitForDeleteTimeoutSeconds": int(opts.get("skipWaitForDeleteTimeoutSeconds") or 0),
    }
    if opts.get("ignoreDaemonSets") is not None:
        full["ignoreDaemonSets"] = bool(opts["ignoreDaemonSets"])
    if opts.get("ignoreErrors"):
        full["ignoreErrors"] = True
    for key in ("preDrainHooks", "postDrainHooks"):
        hooks = opts.get(key) or []
        if hooks:
            full[key] = [{"annotation": str(h["annotation"])} if (h or {}).get("annotation")
                         else {} for h in hooks]
    out = json.dumps(full, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    # encoding/json's HTML-safe escaping
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        out = out.replace(ch, esc)
    return out


def _hook_annotations(opts: dict[str, Any], key: str) -> list[str]:
    """machinedrain.go ``checkHookAnnotations``: a hook without an annotation is skipped."""
    return [str(h["annotation"]) for h in opts.get(key) or [] if (h or {}).get("annotation")]


class Entry:
    __slots__ = ("applied", "cp", "etcd", "init", "machine", "node", "worker")

    def __init__(self, machine: str, node: str, etcd: bool, cp: bool, worker: bool,
                 init: bool, applied: str = "") -> None:
        self.machine, self.node = machine, node
        self.etcd, self.cp, self.worker, self.init = etcd, cp, worker, init
        self.applied = applied    # version of the last plan applied (Machine spec.version)


class RancherPlanner:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.client = world.client_for("rancher")
        self.tasks = TaskRunner(world, poll_s=2.0)
        self.stuck = False
        self.messages: dict[str, str] = {}      # machine -> progress message
        self.started_for = ""                     # desired version the roll was started for
        self.done_for = ""
        self._reconcile_pending = False
        install_crds(world, self.client, "provisioning.cattle.io", "cluster.x-k8s.io",
                     "rke.cattle.io", "management.cattle.io")
        self.ensure_objects()
        rt = world.runtime
        world.faults.on_clear(self._on_fault_cleared)
        rt.on("provisioning.cattle.io", "clusters", self._on_cluster)
        rt.on("", "secrets", self._on_secret)
        rt.on("", "nodes", self._on_node)
        rt.on("", "pods", self._on_pod)
        rt.call_soon(self.reconcile)

    def stop(self) -> None:
        self.tasks.stop()

    # ----------------------------------------------------------------- objects
    def ensure_objects(self) -> None:
        c = self.client
        if c.try_get("v1", "Namespace", NS) is None:
            try:
                c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            except ApiError as exc:
                if exc.code != 409:
                    raise
        nodes = sorted(c.list("v1", "Node"), key=lambda n: n["metadata"]["name"])
        versions = Counter(k8s_version(((n.get("status") or {}).get("nodeInfo") or {})
                                       .get("kubeletVersion")) for n in nodes)
        current = versions.most_common(1)[0][0] if versions else ""
        if c.try_get(PROV_API, "Cluster", "local", NS) is None:
            c.create({
                "apiVersion": PROV_API, "kind": "Cluster",
                "metadata": {"name": "local", "namespace": NS},
                "spec": {"kubernetesVersion": current, "localClusterAuthEndpoint": {},
                         "rkeConfig": {}},
                "status": {"clusterName": "local", "ready": True, "observedGeneration": 1,
                           "conditions": self._conds_ready(True, "")},
            })
        if c.try_get(MGMT_API, "Cluster", "local") is None:
            c.create({
                "apiVersion": MGMT_API, "kind": "Cluster",
                "metadata": {"name": "local", "labels": {"provider.cattle.io": "harvester"}},
                "spec": {"displayName": "local", "internal": True, "fleetWorkspaceName": NS},
                "status": {"version": {"gitVersion": current},
                           "conditions": [{"type": "Ready", "status": "True"},
                                          {"type": "Provisioned", "status": "True"}]},
            })
        have_init = any(_is_true((m["metadata"].get("labels") or {}).get(INIT_LABEL))
                        for m in c.list(CAPI, "Machine", NS))
        for n in nodes:
            init = False
            if not have_init and self._roles(n)[0]:
                init = have_init = True
            self.ensure_machine(n, init)

    @staticmethod
    def _roles(node: dict[str, Any]) -> tuple[bool, bool, bool]:
        lbl = node["metadata"].get("labels") or {}
        etcd = _is_true(lbl.get("node-role.kubernetes.io/etcd"))
        cp = _is_true(lbl.get("node-role.kubernetes.io/control-plane")) or \
            _is_true(lbl.get("node-role.kubernetes.io/master"))
        witness = "node-role.harvesterhci.io/witness" in lbl
        worker = not witness
        return etcd, cp, worker

    def ensure_machine(self, node: dict[str, Any], init: bool = False) -> None:
        c = self.client
        nname = node["metadata"]["name"]
        mname = (node["metadata"].get("annotations") or {}).get(MACHINE_ANN)
        if not mname:
            mname = machine_name_for(nname)

            def ann(cur: dict[str, Any]) -> dict[str, Any]:
                cur["metadata"].setdefault("annotations", {})[MACHINE_ANN] = mname
                return cur

            c.modify("v1", "Node", nname, ann)
        etcd, cp, worker = self._roles(node)
        labels = {"cluster.x-k8s.io/cluster-name": "local",
                  "rke.cattle.io/cluster-name": "local",
                  "rke.cattle.io/machine-name": mname}
        for role, on in (("etcd", etcd), ("control-plane", cp), ("worker", worker)):
            if on:
                labels[f"rke.cattle.io/{role}-role"] = "true"
        if init:
            labels[INIT_LABEL] = "true"
        version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
        if c.try_get(CAPI, "Machine", mname, NS) is None:
            c.create({
                "apiVersion": CAPI, "kind": "Machine",
                "metadata": {"name": mname, "namespace": NS, "labels": labels},
                "spec": {"clusterName": "local", "version": version,
                         "bootstrap": {"dataSecretName": f"{mname}-machine-bootstrap"},
                         "infrastructureRef": {"apiVersion": RKE_API, "kind": "CustomMachine",
                                               "name": mname, "namespace": NS}},
                "status": {"phase": "Running", "nodeRef": {"apiVersion": "v1", "kind": "Node",
                                                           "name": nname},
                           "bootstrapReady": True, "infrastructureReady": True},
            })
        if c.try_get(RKE_API, "CustomMachine", mname, NS) is None:
            c.create({"apiVersion": RKE_API, "kind": "CustomMachine",
                      "metadata": {"name": mname, "namespace": NS,
                                   "labels": {"cluster.x-k8s.io/cluster-name": "local"}},
                      "spec": {"providerID": f"rke2://{nname}"},
                      "status": {"ready": True, "addresses": []}})
        if c.try_get("v1", "Secret", f"{mname}-machine-plan", NS) is None:
            env = [f"INSTALL_RKE2_VERSION={version}"]
            plan = json.dumps({"files": [], "instructions": [{"name": "install", "env": env}]})
            c.create({"apiVersion": "v1", "kind": "Secret", "type": "rke.cattle.io/machine-plan",
                      "metadata": {"name": f"{mname}-machine-plan", "namespace": NS,
                                   "labels": {"rke.cattle.io/machine-name": mname}},
                      "data": {"plan": base64.b64encode(plan.encode()).decode(),
                               "applied-checksum": base64.b64encode(
                                   hashlib.sha256(plan.encode()).hexdigest().encode()).decode()}})

    # ------------------------------------------------------------------ events
    def _on_cluster(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if obj["metadata"].get("namespace") != NS or obj["metadata"]["name"] != "local":
            return
        if old is not None and obj.get("spec") == old.get("spec") and etype == "MODIFIED":
            return
        self.kick_reconcile()

    def _on_secret(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if obj["metadata"].get("namespace") == NS:
            self.tasks.kick()

    def _on_node(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        self.tasks.kick()
        if etype == "ADDED":
            self.world.runtime.call_soon(lambda: self.ensure_machine(obj))
        elif old is not None and ((obj.get("status") or {}).get("nodeInfo") !=
                                  (old.get("status") or {}).get("nodeInfo")):
            self.kick_reconcile()

    def _on_pod(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if self.tasks.tasks:
            self.tasks.kick()

    def kick_reconcile(self) -> None:
        if not self._reconcile_pending:
            self._reconcile_pending = True

            def run() -> None:
                self._reconcile_pending = False
                self.reconcile()

            self.world.runtime.call_soon(run)

    # ---------------------------------------------------------------- planner
    def _entries(self) -> list[Entry]:
        out = []
        for m in self.client.list_refs(CAPI, "Machine", NS):   # read only: no copies
            lbl = m["metadata"].get("labels") or {}
            node = (((m.get("status") or {}).get("nodeRef")) or {}).get("name")
            if not node or m["metadata"].get("deletionTimestamp"):
                continue
            out.append(Entry(m["metadata"]["name"], node,
                             _is_true(lbl.get("rke.cattle.io/etcd-role")),
                             _is_true(lbl.get("rke.cattle.io/control-plane-role")),
                             _is_true(lbl.get("rke.cattle.io/worker-role")),
                             _is_true(lbl.get(INIT_LABEL)),
                             k8s_version((m.get("spec") or {}).get("version"))))
        return sorted(out, key=lambda e: e.machine)

    def _node(self, name: str) -> dict[str, Any] | None:
        """The stored Node, read-only (the planner reads every machine's node on each
        reconcile: a copy of 100 Nodes and their image lists each time at 100 nodes)."""
        return self.client.peek("v1", "Node", name)

    def _kubelet(self, name: str) -> str:
        n = self._node(name)
        return k8s_version((((n or {}).get("status") or {}).get("nodeInfo") or {})
                           .get("kubeletVersion"))

    def _behind(self, e: Entry, desired: str) -> bool:
        """The planner acts on plans, not on observed versions: a machine is behind when the
        plan it last applied is for another version (rancher-system-agent re-applies a plan
        only when it changes, so an RKE2 binary replaced outside Rancher, e.g. by a SUC
        rke2-upgrade Plan, is left alone)."""
        return (e.applied or self._kubelet(e.node)) != desired

    @staticmethod
    def _ready(node: dict[str, Any] | None) -> bool:
        for c in ((node or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready":
                return c.get("status") == "True"
        return False

    def _check_stuck(self, **ctx: Any) -> bool:
        if not self.stuck and self.world.faults.match("planner_stuck", **ctx) is not None:
            self.stuck = True
            self.world.timeline.record("planner_stuck", **ctx)
        return self._still_stuck()

    def _on_fault_cleared(self, kind: str) -> None:
        if kind == "planner_stuck":
            self.world.runtime.call_soon(lambda: (self.kick_reconcile(), self.tasks.kick()))

    def _still_stuck(self) -> bool:
        """Stuck until the fault is cleared (``faults.clear("planner_stuck")``: the operator
        fixed what held the planner, e.g. restarted Rancher); then it steps on from where
        it stopped, as a restarted planner re-reads its plans and continues."""
        if self.stuck and not self.world.faults.present("planner_stuck"):
            self.stuck = False
            self.world.timeline.record("planner_unstuck")
        return self.stuck

    def reconcile(self) -> None:
        cluster = self.client.try_get(PROV_API, "Cluster", "local", NS)
        if cluster is None or cluster["metadata"].get("deletionTimestamp"):
            return
        spec = cluster.get("spec") or {}
        desired = k8s_version(spec.get("kubernetesVersion"))
        if not desired:
            return
        entries = self._entries()
        if not entries:
            return
        if self._check_stuck(cluster="local"):
            return
        strategy = ((spec.get("rkeConfig") or {}).get("upgradeStrategy")) or {}
        behind = [e for e in entries if self._behind(e, desired)]
        active = [e for e in entries if self.tasks.running(e.machine)]
        if (behind or active) and self.started_for != desired:
            self.started_for = desired
            self.done_for = ""
            self.world.timeline.record("planner_started", version=desired,
                                       nodes=[e.node for e in behind])
        if len(entries) == 1:
            # the lone machine is the init node: bootstrap tier, control-plane drain options,
            # drain.go disables the drain itself (``len(clusterPlan.Machines) == 1``)
            e = entries[0]
            if e in behind and not active:
                opts = dict(strategy.get("controlPlaneDrainOptions") or {})
                self.tasks.spawn(e.machine, self._node_task(e, "bootstrap", desired, opts,
                                                            single=True),
                                 on_done=lambda t: self.kick_reconcile())
            self._update_status(desired, entries)
            return
        init = [e for e in entries if e.init] or [next((e for e in entries if e.etcd),
                                                       entries[0])]
        cps = [e for e in entries if e not in init and (e.etcd or e.cp)]
        workers = [e for e in entries if e not in init and e not in cps]
        tiers = [("bootstrap", init, 1, "controlPlaneDrainOptions"),
                 ("etcd/control plane", cps, _conc(strategy.get("controlPlaneConcurrency"),
                                                   len(cps)), "controlPlaneDrainOptions"),
                 ("worker", workers, _conc(strategy.get("workerConcurrency"), len(workers)),
                  "workerDrainOptions")]
        behind_names = {e.machine for e in behind}
        for tier, members, conc, opts_key in tiers:
            running = [e for e in members if self.tasks.running(e.machine)]
            pending = [e for e in members if e.machine in behind_names
                       and not self.tasks.running(e.machine)]
            if not running and not pending:
                continue
            opts = dict(strategy.get(opts_key) or {})
            for e in pending:
                if len(running) >= conc:
                    break
                if self._check_stuck(node=e.node, machine=e.machine):
                    break
                self.tasks.spawn(e.machine, self._node_task(e, tier, desired, opts),
                                 on_done=lambda t: self.kick_reconcile())
                running.append(e)
            break
        self._update_status(desired, entries)

    # ------------------------------------------------------------------ status
    @staticmethod
    def _conds_ready(ready: bool, msg: str) -> list[dict[str, Any]]:
        return [{"type": "Ready", "status": "True" if ready else "False", "message": msg},
                {"type": "Provisioned", "status": "True"},
                {"type": "Updated", "status": "True"}]

    def _update_status(self, desired: str, entries: list[Entry]) -> None:
        active = [e for e in entries if self.tasks.running(e.machine)]
        behind = [e for e in entries if self._behind(e, desired)]
        msgs = [self.messages[e.machine] for e in active if self.messages.get(e.machine)]
        all_ready = all(self._ready(self._node(e.node)) for e in entries)
        done = not active and not behind
        if done and self.started_for == desired and self.done_for != desired:
            self.done_for = desired
            self.world.timeline.record("planner_done", version=desired)
        ts = now_ts(self.world)

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            before = json.dumps(cur.get("status"), sort_keys=True)
            st = cur.setdefault("status", {})
            st["ready"] = all_ready
            st["observedGeneration"] = cur["metadata"].get("generation", 1)
            if done:
                set_condition(cur, "Updated", "True", "", "", ts)
            else:
                set_condition(cur, "Updated", "Unknown", "Waiting",
                              ", ".join(msgs) or "waiting for the upgrade to start", ts)
            if all_ready:
                set_condition(cur, "Ready", "True", "", "", ts)
            else:
                nr = [e.machine for e in entries if not self._ready(self._node(e.node))]
                set_condition(cur, "Ready", "False", "Waiting",
                              f"waiting for node(s) {', '.join(nr)} to be ready", ts)
            set_condition(cur, "Provisioned", "True", "", "", ts)
            if json.dumps(cur.get("status"), sort_keys=True) == before:
                return None
            return cur

        try:
            self.client.modify(PROV_API, "Cluster", "local", fn, NS, subresource="status")
        except ApiError as exc:
            if exc.code != 404:
                raise

    def _progress(self, e: Entry, msg: str, desired: str) -> None:
        self.messages[e.machine] = msg
        self._update_status(desired, self._entries())

    # --------------------------------------------------------------- helpers
    def _secret_name(self, e: Entry) -> str:
        return f"{e.machine}-machine-plan"

    def _annotations(self, e: Entry) -> dict[str, str]:
        s = self.client.try_get("v1", "Secret", self._secret_name(e), NS)
        return dict(((s or {}).get("metadata") or {}).get("annotations") or {})

    def _annotate(self, e: Entry, set_: dict[str, str] | None = None,
                  remove: tuple[str, ...] | list[str] = ()) -> None:
        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            ann = cur["metadata"].setdefault("annotations", {})
            before = dict(ann)
            ann.update(set_ or {})
            for k in remove:
                ann.pop(k, None)
            return None if ann == before else cur

        try:
            self.client.modify("v1", "Secret", self._secret_name(e), fn, NS)
        except ApiError as exc:
            if exc.code != 404:
                raise

    def _set_unschedulable(self, node: str, value: bool) -> None:
        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            spec = cur.setdefault("spec", {})
            if bool(spec.get("unschedulable")) == value:
                return None
            if value:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)
            return cur

        self.client.modify("v1", "Node", node, fn)

    def _gate(self, e: Entry) -> TaskGen:
        """Wait forever once the planner is stuck (fault ``planner_stuck``)."""
        if self._check_stuck(node=e.node, machine=e.machine):
            yield lambda: not self._still_stuck()

    def _hooks_answered(self, e: Entry, hooks: list[str], value: str) -> bool:
        ann = self._annotations(e)
        return all(ann.get(h) == value for h in hooks)

    def _apply_rke2(self, e: Entry, desired: str) -> None:
        kubelet = self.world.controllers.get("kubelet")
        if kubelet is not None and hasattr(kubelet, "restart_kubelet"):
            kubelet.restart_kubelet(e.node, desired)
            return
        # no simulated kubelet (unit tests): the restart as a plain status change
        def done() -> None:
            def fn(cur: dict[str, Any]) -> dict[str, Any]:
                cur.setdefault("status", {}).setdefault("nodeInfo", {})["kubeletVersion"] = \
                    desired
                return cur

            self.client.modify("v1", "Node", e.node, fn, subresource="status")

        self.world.runtime.after(self.world.timings.rke2_restart_s, done)

    def _machine_applied(self, e: Entry, desired: str) -> None:
        """Machine ``spec.version`` / ``status.nodeInfo`` follow the applied plan."""
        def spec_fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            if cur.get("spec", {}).get("version") == desired:
                return None
            cur.setdefault("spec", {})["version"] = desired
            return cur

        def status_fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            info = cur.setdefault("status", {}).setdefault("nodeInfo", {})
            if info.get("kubeletVersion") == desired:
                return None
            info["kubeletVersion"] = desired
            return cur

        try:
            self.client.modify(CAPI, "Machine", e.machine, spec_fn, NS)
            self.client.modify(CAPI, "Machine", e.machine, status_fn, NS, subresource="status")
        except ApiError as exc:
            if exc.code != 404:
                raise

    def _plan_applied(self, e: Entry, desired: str) -> bool:
        n = self._node(e.node)
        return self._kubelet(e.node) == desired and self._ready(n)

    # ----------------------------------------------------------------- tasks
    def _apply_plan(self, e: Entry, tier: str, desired: str) -> TaskGen:
        self._progress(e, f"configuring {tier} node(s) {e.machine}: waiting for plan to be "
                          "applied", desired)
        t0 = self.world.clock.now()
        self._apply_rke2(e, desired)
        yield lambda: self._plan_applied(e, desired)
        self.world.timeline.record("span", what="rke2_restart", node=e.node, start=t0,
                                   end=self.world.clock.now())
        self._machine_applied(e, desired)
        self.world.timeline.record("rke2_applied", node=e.node, machine=e.machine,
                                   version=desired)

    def _node_task(self, e: Entry, tier: str, desired: str, opts: dict[str, Any],
                   single: bool = False) -> TaskGen:
        """One machine's major plan change: planner ``drain`` -> machinedrain ``drain`` ->
        plan -> planner ``undrain`` -> machinedrain ``unDrain``."""
        tl = self.world.timeline
        pre_declared = bool(opts.get("preDrainHooks"))
        post_declared = bool(opts.get("postDrainHooks"))
        pre_hooks = _hook_annotations(opts, "preDrainHooks")
        post_hooks = _hook_annotations(opts, "postDrainHooks")
        yield from self._gate(e)
        if (not opts.get("enabled") or single) and not pre_declared and not post_declared:
            # drain.go: nothing to do, no annotation is set and the node is not cordoned;
            # undrain then finds no drain-options and is done at once
            yield from self._apply_plan(e, tier, desired)
            self.messages.pop(e.machine, None)
            return
        d = drain_options_json(opts, disable=single)
        self._annotate(e, {A_DRAIN_OPTIONS: d})
        self._set_unschedulable(e.node, True)
        tl.record("node_cordoned", node=e.node, machine=e.machine, tier=tier)
        if pre_declared:
            self._annotate(e, {A_PRE_DRAIN: d})
            tl.record("pre_drain_set", node=e.node, machine=e.machine, value=d)
            self.world.faults.notify("pre_drain_set", node=e.node, machine=e.machine)
            self._progress(e, f"waiting for pre-drain hooks on {tier} node(s) {e.machine}",
                           desired)
            yield lambda: self._hooks_answered(e, pre_hooks, d)
            tl.record("hook_acked", node=e.node, machine=e.machine, hook="pre-drain",
                      annotations=pre_hooks)
            self.world.faults.notify("hook_acked", node=e.node, machine=e.machine,
                                     hook="pre-drain")
        yield from self._gate(e)
        if opts.get("enabled") and not single:
            self._progress(e, f"draining {tier} node(s) {e.machine}", desired)
            t0 = self.world.clock.now()
            yield from self._drain(e, opts)
            tl.record("span", what="drain", node=e.node, start=t0, end=self.world.clock.now())
        self._annotate(e, {A_DRAIN_DONE: d}, remove=[A_DRAIN_ERROR])
        tl.record("drain_done", node=e.node, machine=e.machine)
        yield from self._gate(e)
        yield from self._apply_plan(e, tier, desired)
        yield from self._gate(e)
        self._annotate(e, {A_UNCORDON: d})
        if post_declared:
            self._annotate(e, {A_POST_DRAIN: d})
            tl.record("post_drain_set", node=e.node, machine=e.machine, value=d)
            self._progress(e, f"waiting for post-drain hooks on {tier} node(s) {e.machine}",
                           desired)
            yield lambda: self._hooks_answered(e, post_hooks, d)
            tl.record("hook_acked", node=e.node, machine=e.machine, hook="post-drain",
                      annotations=post_hooks)
        yield from self._gate(e)
        self._set_unschedulable(e.node, False)
        tl.record("node_uncordoned", node=e.node, machine=e.machine)
        self._annotate(e, remove=list(RANCHER_ANNS) + pre_hooks + post_hooks)
        self.messages.pop(e.machine, None)

    # ----------------------------------------------------------------- drain
    def _classify(self, pods: list[dict[str, Any]], opts: dict[str, Any]
                  ) -> tuple[list[dict[str, Any]], list[str]]:
        """kubectl drain's filters: (pods to evict, reasons the drain cannot proceed)."""
        evict, errs = [], []
        for p in pods:
            md = p["metadata"]
            if "kubernetes.io/config.mirror" in (md.get("annotations") or {}):
                continue
            phase = (p.get("status") or {}).get("phase")
            owners = [o for o in md.get("ownerReferences") or [] if o.get("controller")]
            if phase in ("Succeeded", "Failed"):
                evict.append(p)
                continue
            if owners and owners[0].get("kind") == "DaemonSet":
                if opts.get("ignoreDaemonSets", True) is False:
                    errs.append(f"cannot delete DaemonSet-managed Pods: "
                                f"{md['namespace']}/{md['name']}")
                continue
            if not owners and not opts.get("force"):
                errs.append(f"cannot delete Pods that declare no controller (use --force to "
                            f"override): {md['namespace']}/{md['name']}")
                continue
            vols = (p.get("spec") or {}).get("volumes") or []
            if any("emptyDir" in v for v in vols) and not opts.get("deleteEmptyDirData"):
                errs.append(f"cannot delete Pods with local storage (use "
                            f"--delete-emptydir-data to override): "
                            f"{md['namespace']}/{md['name']}")
                continue
            evict.append(p)
        return evict, errs

    def _evict(self, pod: dict[str, Any], grace: int) -> None:
        md = pod["metadata"]
        if grace > 0:
            body = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": md["name"], "namespace": md["namespace"]},
                    "deleteOptions": {"gracePeriodSeconds": grace}}
            # Client.evict takes no body yet; this is the same store call the HTTP
            # eviction subresource makes.
            self.client.store.evict(self.client.rt("v1", "Pod"), md["namespace"], md["name"],
                                    body)
        else:
            self.client.evict(md["name"], md["namespace"])

    def _drain(self, e: Entry, opts: dict[str, Any]) -> TaskGen:
        """``performDrain``: k8s.io/kubectl ``drain.RunNodeDrain`` with the helper the drain
        options make; an error becomes ``drain-error`` and the handler tries again (the
        Secret's next change: here ``EVICT_RETRY_S`` later)."""
        timeout = float(opts.get("timeout") or 0) or DEFAULT_DRAIN_TIMEOUT_S
        grace = int(opts.get("gracePeriod") or -1)
        while True:
            error = yield from self._run_node_drain(e, opts, grace, timeout)
            if not error:
                return
            self._annotate(e, {A_DRAIN_ERROR: error})
            self.world.timeline.record("drain_error", node=e.node, machine=e.machine,
                                       error=error)
            yield EVICT_RETRY_S

    def _run_node_drain(self, e: Entry, opts: dict[str, Any], grace: int,
                        timeout: float) -> Generator[Step, None, str]:
        """``RunNodeDrain`` (kubernetes/kubectl ``pkg/drain/drain.go``, the ``k8s.io/kubectl``
        Rancher vendors; not pinned here: ``waitForDelete``'s ``PollImmediate`` is the same
        at v0.33.1, which ``programs/kubectl.py`` follows): the node's pods listed once
        (``GetPodsForDeletion``: :meth:`_classify`), each evicted (a 429, e.g. a PDB, tried
        again 5 s later), then ``waitForDelete``: ``wait.PollImmediate`` every 1 s until
        each evicted pod is gone (not found, or another pod of its name) — checked at once,
        so pods deleted at their eviction (terminal ones) cost no poll. Returns the error
        text, "" when drained."""
        clock = self.world.clock
        deadline = clock.now() + timeout
        pods = self.client.list("v1", "Pod", field_selector=f"spec.nodeName={e.node}")
        evict, errs = self._classify(pods, opts)
        if errs and not opts.get("ignoreErrors"):
            return "; ".join(errs)
        pending = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in evict}
        # a pod already terminating is not evicted again, only waited for
        evicted = {k for k, p in pending.items() if p["metadata"].get("deletionTimestamp")}
        last_evict_err = ""
        while pending:
            if clock.now() >= deadline:
                return (f"drain did not complete within {int(timeout)}s"
                        + (f": {last_evict_err}" if last_evict_err else ""))
            retry = False
            for key, p in sorted(pending.items()):
                if key in evicted:
                    continue
                try:
                    self._evict(p, grace)
                    evicted.add(key)
                except ApiError as exc:
                    if exc.code == 404:
                        evicted.add(key)
                    elif exc.code == 429:
                        last_evict_err = (f"error when evicting pods/\"{key[1]}\" -n "
                                          f"\"{key[0]}\": {exc}")
                        retry = True
                    else:
                        return (f"error when evicting pods/\"{key[1]}\" -n \"{key[0]}\": "
                                f"{exc}")
            for key in sorted(evicted & set(pending)):
                cur = self.client.try_get("v1", "Pod", key[1], key[0])
                if cur is None or cur["metadata"].get("uid") != \
                        pending[key]["metadata"].get("uid"):
                    del pending[key]
            if pending:
                step: Step = EVICT_RETRY_S if retry and not (evicted & set(pending)) else 1.0
                yield step
        return ""


def setup(world: Any) -> RancherPlanner:
    return RancherPlanner(world)
