"""TEST-ONLY: a minimal multi-node upgrader that drives the simulated machinery by hand.

It is not the collection. It proves the cluster side of docs/protocol.md end to end: ISO
download (VirtualMachineImage), repo (Deployment + Service, files read through the repo
pod's HTTP handler as the service proxy would), metadata, SUC preload plan, the
cluster-upgrade Job, then the node loop: answer Rancher's pre-drain (after shutting down
the VMs that cannot live-migrate, else the drain never ends: the pre-drain Job does that and
removes the rancher-system-agent drop-in the cluster upgrade left) and, after a
post-drain Job rebooted the node into the new OS, the post-drain. With ``ack_hooks=False`` it
answers nothing, and Rancher must stop at the first node's pre-drain; with
``skip_pre_drain_job=True`` it answers the pre-drain without the Job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import yaml

PLAN_API = "management.harvesterhci.io/v1beta1"
NS = "harvester-system"
PRE_HOOK = "management.harvesterhci.io/pre-hook"
POST_HOOK = "management.harvesterhci.io/post-hook"
HOOKS = {"enabled": True, "force": True, "ignoreDaemonSets": True, "deleteEmptyDirData": True,
         "preDrainHooks": [{"annotation": PRE_HOOK}],
         "postDrainHooks": [{"annotation": POST_HOOK}]}


@dataclass
class Result:
    planner_done: bool = False
    log: list[str] = field(default_factory=list)


class Timeout(AssertionError):
    pass


class MinimalUpgrader:
    def __init__(self, world: Any, plan: str, version: str, ack_hooks: bool = True,
                 timeout: float = 120.0, skip_pre_drain_job: bool = False) -> None:
        self.world = world
        self.skip_pre_drain_job = skip_pre_drain_job
        self.c = world.client_for("minimal-upgrader")
        self.plan = plan
        self.version = version
        self.ack_hooks = ack_hooks
        self.deadline = time.monotonic() + timeout
        self.result = Result()
        self.meta: dict[str, str] = {}

    # ------------------------------------------------------------------ helpers
    def log(self, msg: str) -> None:
        self.result.log.append(f"[{self.world.clock.now():9.1f}] {msg}")

    def wait(self, pred: Any, what: str, poll: float = 0.02) -> Any:
        while time.monotonic() < self.deadline:
            got = pred()
            if got:
                return got
            time.sleep(poll)
        raise Timeout(f"timed out waiting for {what}")

    @staticmethod
    def cond(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
        for c in ((obj or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == ctype:
                return dict(c)
        return {}

    def labels(self, component: str) -> dict[str, str]:
        return {"management.harvesterhci.io/upgrade-plan": self.plan,
                "management.harvesterhci.io/upgrade-component": component}

    @property
    def toolkit(self) -> str:
        return f"rancher/harvester-upgrade-toolkit:{self.meta.get('harvester', self.version)}"

    # --------------------------------------------------------------------- run
    def run(self) -> Result:
        try:
            self._run()
        except Timeout as exc:
            self.log(str(exc))
        return self.result

    def _run(self) -> None:
        self.ensure_crd()
        self.c.create({"apiVersion": PLAN_API, "kind": "UpgradePlan",
                       "metadata": {"name": self.plan}, "spec": {"version": self.version}})
        self.download_iso()
        self.create_repo()
        self.populate_metadata()
        self.preload()
        self.cluster_upgrade()
        self.start_node_upgrade()
        self.node_upgrade()

    def ensure_crd(self) -> None:
        if self.c.registry.by_kind(PLAN_API, "UpgradePlan") is not None:
            return
        self.c.create({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "upgradeplans.management.harvesterhci.io"},
            "spec": {"group": "management.harvesterhci.io", "scope": "Cluster",
                     "names": {"kind": "UpgradePlan", "plural": "upgradeplans",
                               "singular": "upgradeplan"},
                     "versions": [{"name": "v1beta1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}})

    def download_iso(self) -> None:
        ver = self.c.get("harvesterhci.io/v1beta1", "Version", self.version, NS)
        name = f"{self.plan}-iso"
        self.c.create({"apiVersion": "harvesterhci.io/v1beta1", "kind": "VirtualMachineImage",
                       "metadata": {"name": name, "namespace": NS, "labels": self.labels("iso"),
                                    "annotations": {"harvesterhci.io/os-upgrade-image": "True"}},
                       "spec": {"backend": "cdi", "sourceType": "download",
                                "url": ver["spec"]["isoURL"],
                                "checksum": ver["spec"].get("isoChecksum", ""), "retry": 3,
                                "targetStorageClassName": "longhorn-static",
                                "displayName": f"{self.plan}-iso"}})
        self.log("ISO download started")
        self.wait(lambda: self.cond(self.c.get("harvesterhci.io/v1beta1",
                                               "VirtualMachineImage", name, NS),
                                    "Imported").get("status") == "True", "ISO imported")
        self.log("ISO imported")

    def create_repo(self) -> None:
        name = f"{self.plan}-repo"
        sel = {"app": name, **self.labels("repo")}
        self.c.create({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "labels": self.labels("repo")},
            "spec": {"replicas": 1, "selector": {"matchLabels": sel},
                     "template": {"metadata": {"labels": sel}, "spec": {
                         "containers": [{
                             "name": "nginx-iso-server",
                             "image": "rancher/mirrored-library-nginx:1.24.0-alpine",
                             "ports": [{"containerPort": 80}],
                             "readinessProbe": {"httpGet": {
                                 "path": "/harvester-iso/harvester-release.yaml",
                                 "port": 80}}}],
                         "volumes": [{"name": "iso", "persistentVolumeClaim": {
                             "claimName": f"{self.plan}-iso"}}]}}}})
        self.c.create({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": name, "namespace": NS, "labels": self.labels("repo")},
                       "spec": {"selector": sel, "ports": [{"port": 80, "targetPort": 80}]}})
        self.wait(lambda: self.repo_get("harvester-release.yaml") is not None, "repo serving")
        self.log("repo serving")

    def repo_get(self, path: str) -> bytes | None:
        """What ``GET services/<plan>-repo:80/proxy/harvester-iso/<path>`` returns."""
        for p in self.c.list("v1", "Pod", NS, label_selector={"app": f"{self.plan}-repo"}):
            ready = self.cond(p, "Ready").get("status") == "True"
            h = self.world.proxies.pod_handler(NS, p["metadata"]["name"], 80)
            if ready and h is not None:
                code, _, body = h("GET", f"/harvester-iso/{path}", "", {}, b"")
                if code == 200:
                    return bytes(body)
        return None

    def populate_metadata(self) -> None:
        raw = self.repo_get("harvester-release.yaml")
        assert raw is not None
        y = yaml.safe_load(raw)
        self.meta = {k: str(y.get(k) or "") for k in (
            "harvester", "harvesterChart", "os", "kubernetes", "rancher", "monitoringChart",
            "minUpgradableVersion", "kubevirt")}

        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            cur.setdefault("status", {})["releaseMetadata"] = self.meta
            return cur

        self.c.modify(PLAN_API, "UpgradePlan", self.plan, fn, subresource="status")
        self.log(f"release metadata: {self.meta}")

    def preload(self) -> None:
        name = f"{self.plan}-image-preload"
        self.c.create({"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
                       "metadata": {"name": name, "namespace": "cattle-system",
                                    "labels": self.labels("image-preload")},
                       "spec": {"concurrency": 3, "version": self.meta["harvester"],
                                "serviceAccountName": "system-upgrade-controller",
                                "nodeSelector": {"matchLabels": {
                                    "harvesterhci.io/managed": "true"}},
                                "tolerations": [{"operator": "Exists"}],
                                "upgrade": {"image": "rancher/harvester-upgrade-toolkit",
                                            "command": ["upgrade_node.sh"],
                                            "args": ["prepare"],
                                            "envs": [{"name": "HARVESTER_UPGRADEPLAN_NAME",
                                                      "value": self.plan}]}}})
        self.wait(lambda: self.cond(self.c.get("upgrade.cattle.io/v1", "Plan", name,
                                               "cattle-system"),
                                    "Complete").get("status") == "True", "preload complete")
        self.log("images preloaded")

    def job(self, name: str, args: list[str], node: str | None = None,
            component: str = "node-upgrade") -> None:
        if self.c.try_get("batch/v1", "Job", name, NS) is not None:
            return
        env = [{"name": "HARVESTER_UPGRADEPLAN_NAME", "value": self.plan}]
        spec: dict[str, Any] = {"restartPolicy": "Never",
                                "tolerations": [{"operator": "Exists"}],
                                "containers": [{"name": "apply", "image": self.toolkit,
                                                "command": [args[0]], "args": args[1:],
                                                "env": env}]}
        if node:
            spec["nodeName"] = node
            env.append({"name": "HARVESTER_UPGRADE_NODE_NAME", "value": node})
            env.append({"name": "HARVESTER_UPGRADE_POD_NAME",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
        self.c.create({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": name, "namespace": NS,
                                    "labels": self.labels(component)},
                       "spec": {"backoffLimit": 6, "template": {
                           "metadata": {"labels": self.labels(component)}, "spec": spec}}})

    def job_done(self, name: str) -> bool:
        j = self.c.try_get("batch/v1", "Job", name, NS)
        if self.cond(j, "Failed").get("status") == "True":
            raise AssertionError(f"job {name} failed")
        return self.cond(j, "Complete").get("status") == "True"

    def start_node_upgrade(self) -> None:
        """What the upgrader does when NodeUpgrade begins (seed 000 ``upgradeKubernetes``):
        kubernetesVersion, provisionGeneration and upgradeStrategy in one write."""
        cl = self.c.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")
        gen = int(((cl.get("spec") or {}).get("rkeConfig") or {}).get("provisionGeneration")
                  or 0) + 1
        self.c.patch("provisioning.cattle.io/v1", "Cluster", "local",
                     {"spec": {"kubernetesVersion": self.meta["kubernetes"],
                               "rkeConfig": {"provisionGeneration": gen, "upgradeStrategy": {
                                   "controlPlaneConcurrency": "1", "workerConcurrency": "1",
                                   "controlPlaneDrainOptions": HOOKS,
                                   "workerDrainOptions": HOOKS}}}},
                     "fleet-local")

    def cluster_upgrade(self) -> None:
        name = f"{self.plan}-cluster-upgrade"
        self.job(name, ["upgrade_manifests.sh"], component="cluster-upgrade")
        self.wait(lambda: self.job_done(name), "cluster upgrade job")
        self.log("cluster upgraded")

    # --------------------------------------------------------------- node loop
    def machine_secrets(self) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for m in self.c.list("cluster.x-k8s.io/v1beta1", "Machine", "fleet-local"):
            node = ((m.get("status") or {}).get("nodeRef") or {}).get("name")
            s = self.c.try_get("v1", "Secret", f"{m['metadata']['name']}-machine-plan",
                               "fleet-local")
            if node and s is not None:
                out.append((node, s))
        return out

    def annotate(self, secret: dict[str, Any], key: str, value: str) -> None:
        self.c.patch("v1", "Secret", secret["metadata"]["name"],
                     {"metadata": {"annotations": {key: value}}}, "fleet-local")

    def stop_unmigratable_vms(self, node: str) -> None:
        for vmi in self.c.list("kubevirt.io/v1", "VirtualMachineInstance"):
            st = vmi.get("status") or {}
            if st.get("nodeName") != node or st.get("phase") in ("Succeeded", "Failed"):
                continue
            spec = vmi.get("spec") or {}
            dev = (spec.get("domain") or {}).get("devices") or {}
            pinned = bool(spec.get("nodeSelector")) or bool(dev.get("hostDevices")) or \
                bool(dev.get("gpus"))
            if not pinned and self.cond(vmi, "LiveMigratable").get("status") == "True" and \
                    spec.get("evictionStrategy", "LiveMigrate") in (
                        "LiveMigrate", "LiveMigrateIfPossible"):
                continue
            md = vmi["metadata"]
            self.c.patch("kubevirt.io/v1", "VirtualMachine", md["name"],
                         {"spec": {"runStrategy": "Halted"}}, md["namespace"])
            self.log(f"stopped non-migratable VM {md['namespace']}/{md['name']} on {node}")

    def done(self) -> bool:
        cl = self.c.get("provisioning.cattle.io/v1", "Cluster", "local", "fleet-local")
        if self.cond(cl, "Updated").get("status") != "True":
            return False
        for n in self.c.list("v1", "Node"):
            info = n["status"]["nodeInfo"]
            if info.get("kubeletVersion") != self.meta["kubernetes"] or \
                    info.get("osImage") != self.meta["os"]:
                return False
        return not any("rke.cattle.io/post-drain" in (s["metadata"].get("annotations") or {})
                       for _, s in self.machine_secrets())

    def node_upgrade(self) -> None:
        seen_pre: float | None = None
        while time.monotonic() < self.deadline:
            if not self.ack_hooks:
                # answer nothing; give Rancher 600 simulated seconds after its first
                # pre-drain to (wrongly) go on, then report
                if seen_pre is None and any(
                        "rke.cattle.io/pre-drain" in (s["metadata"].get("annotations") or {})
                        for _, s in self.machine_secrets()):
                    seen_pre = self.world.clock.now()
                    self.log("Rancher asks for the pre-drain hook; not answering")
                if seen_pre is not None and self.world.clock.now() - seen_pre > 600:
                    return
            if self.done():
                self.result.planner_done = True
                self.log("all nodes upgraded")
                return
            if self.ack_hooks:
                for node, s in self.machine_secrets():
                    self.step(node, s)
            time.sleep(0.02)
        raise Timeout("node upgrade")

    def step(self, node: str, s: dict[str, Any]) -> None:
        ann = s["metadata"].get("annotations") or {}
        pre, post = ann.get("rke.cattle.io/pre-drain"), ann.get("rke.cattle.io/post-drain")
        if pre and ann.get(PRE_HOOK) != pre and not post:
            job = f"{self.plan}-node-upgrade-pre-drain-{node}"
            if self.skip_pre_drain_job:
                self.stop_unmigratable_vms(node)
            else:
                # the job's detector stops the VMs that cannot live-migrate
                self.job(job, ["upgrade_node.sh", "pre-drain"], node=node)
            if self.skip_pre_drain_job or self.job_done(job):
                self.annotate(s, PRE_HOOK, pre)
                self.log(f"pre-hook acked on {node}")
        if post and ann.get(POST_HOOK) != post:
            job = f"{self.plan}-node-upgrade-post-drain-{node}"
            self.job(job, ["upgrade_node.sh", "post-drain"], node=node)
            n = self.c.get("v1", "Node", node)
            ready = self.cond(n, "Ready").get("status") == "True"
            if self.job_done(job) and ready and \
                    n["status"]["nodeInfo"].get("osImage") == self.meta["os"]:
                self.annotate(s, POST_HOOK, post)
                self.log(f"post-hook acked on {node}")
