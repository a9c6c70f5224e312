"""Simulated Rancher ManagedCharts and their fleet Bundles (``fleet-local``).

* every ``managedcharts.management.cattle.io`` in ``fleet-local`` gets a Bundle
  ``mcc-<name>`` (``fleet.cattle.io/v1alpha1``) carrying ``spec.helm.{chart,version}``;
  chart and bundle report ``status.observedGeneration``, ``status.summary``
  (``desiredReady``/``ready``/``waitApplied``) and condition ``Ready``.
* when a chart's generation changes (e.g. ``spec.version``) and it is not ``paused``:
  ``Ready=False`` (``WaitApplied``) at once; the Bundle is updated; the ``harvester`` chart
  rolls the Harvester workloads in ``harvester-system`` (Deployments ``harvester``,
  ``harvester-webhook``, ``virt-operator``, DaemonSet ``harvester-node-manager``) to the new
  release's images (same repositories, tags from the release catalog; virt-operator moves
  from ``suse/sles/15.6`` to ``15.7`` with v1.6.0) and applies the KubeVirt CR's
  ``spec.configuration`` of the release's chart, and the workload controllers roll them;
  after ``timings.chart_rollout_s`` and once those workloads are rolled the chart is
  ``Ready=True`` with ``summary.ready=1``. Span ``chart_rollout`` per chart.
* the ``harvester-crd`` chart's rollout replaces the harvesterhci.io CRDs by those of the
  chart's release, the ``harvester`` chart's the kubevirt.io and longhorn.io ones
  (``_upgrade_util.switch_crds``), as the real chart upgrade does.
* fault ``chart_stuck`` (target ``chart``): the chart never becomes Ready again.

At setup, the Harvester system workloads (above, plus Deployment ``rancher`` in
``cattle-system``), the Service ``harvester`` (port 8443, Harvester's API) and the KubeVirt CR
``harvester-system/kubevirt`` are created from the installed release when the scenario has
none, and the ``harvester``/``harvester-crd`` charts when missing. Sources: harvester/harvester
``deploy/charts/harvester`` (``templates/service.yaml``, ``dependency_charts/kubevirt-operator``
Deployment: 1 replica, limits 500m / 512Mi; ``dependency_charts/kubevirt`` KubeVirt CR and
``values.yaml`` ``kubevirt.spec.configuration``: ``vmRolloutStrategy: LiveUpdate`` from
v1.6.0). The Rancher Deployment is upgraded by ``upgrade_manifests.sh`` (helm upgrade), not
by a chart.

Upstream: rancher/rancher ``v2.11.2`` / ``v2.12.0``
``pkg/controllers/provisioningv2/managedchart/managedchart.go`` (ManagedChart -> fleet
Bundle ``mcc-<name>``); the charts' content from harvester/harvester ``deploy/charts/``
at the target release tag (above).
Not modelled: Helm templating of the charts (only the four workloads, the KubeVirt CR
configuration and the CRDs change), fleet's BundleDeployments and agent, fleet's status
fields beyond those listed (fleet's own status code was not checked), chart errors and
rollbacks, charts other than ``harvester``/``harvester-crd`` rolling workloads.
"""

from __future__ import annotations

import logging
from typing import Any

from ..client import ApiError
from ..crds import CHART_COMPONENTS
from ._upgrade_util import (
    TaskGen,
    TaskRunner,
    image_repository,
    install_crds,
    now_ts,
    release_for,
    release_images,
    set_condition,
    switch_crds,
)

log = logging.getLogger("harvester_sim.charts")

NS = "fleet-local"
MC_API = "management.cattle.io/v3"
BUNDLE_API = "fleet.cattle.io/v1alpha1"
HARVESTER_NS = "harvester-system"
HARVESTER_DEPLOYMENTS = ("harvester", "harvester-webhook")
VIRT_OPERATOR = "virt-operator"
KUBEVIRT_API = "kubevirt.io/v1"
HARVESTER_API_PORT = 8443
HARVESTER_DAEMONSETS = ("harvester-node-manager",)
CHART_WORKLOADS: dict[str, list[tuple[str, str, str]]] = {
    "harvester": [("Deployment", HARVESTER_NS, n) for n in HARVESTER_DEPLOYMENTS]
    + [("Deployment", HARVESTER_NS, VIRT_OPERATOR)]
    + [("DaemonSet", HARVESTER_NS, n) for n in HARVESTER_DAEMONSETS],
}


def kubevirt_configuration(version: str) -> dict[str, Any]:
    """``spec.configuration`` of the KubeVirt CR in Harvester's chart at ``version`` (the parts
    the simulator acts on): ``vmRolloutStrategy: LiveUpdate`` and the VMLiveUpdateFeatures
    gate arrived in v1.6.0's values.yaml."""
    from ..releases.catalog import parse_version

    try:
        newer = parse_version(version)[:3] >= (1, 6, 0)
    except ValueError:
        newer = False
    gates = ["LiveMigration", "HotplugVolumes", "HostDevices", "GPU", "CPUManager",
             "VMPersistentState"] + (["VMLiveUpdateFeatures", "ExpandDisks"] if newer else [])
    conf: dict[str, Any] = {"developerConfiguration": {"featureGates": gates}}
    if newer:
        conf["vmRolloutStrategy"] = "LiveUpdate"
    return conf


def _app_version(chart_version: str) -> str:
    v = chart_version.strip()
    return v if v.startswith("v") else f"v{v}"


class ChartsController:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.client = world.client_for("fleet-agent")
        self.tasks = TaskRunner(world, poll_s=2.0)
        install_crds(world, self.client, "management.cattle.io", "fleet.cattle.io")
        self.ensure_objects()
        world.runtime.on("management.cattle.io", "managedcharts", self._on_chart)
        world.runtime.on("apps", "deployments", self._on_workload)
        world.runtime.on("apps", "daemonsets", self._on_workload)
        world.runtime.call_soon(self._resync)

    def stop(self) -> None:
        self.tasks.stop()

    # ---------------------------------------------------------------- objects
    def _installed(self) -> dict[str, Any]:
        """harvester / harvesterChart / rancher of the running release."""
        rel: dict[str, Any] = dict(self.world.extras.get("installed_release") or {})
        inst = getattr(self.world.extras.get("releases"), "installed", None)
        if not rel.get("harvester") and inst is not None:
            rel = {"harvester": inst.version, "harvesterChart": inst.harvester_chart,
                   "rancher": inst.rancher}
        if not rel.get("harvester"):
            s = self.client.try_get("harvesterhci.io/v1beta1", "Setting", "server-version") \
                if self.client.registry.by_kind("harvesterhci.io/v1beta1", "Setting") else None
            version = str((s or {}).get("value") or "")
            r = release_for(self.world, version)
            rel = {"harvester": version}
            if r is not None:
                rel.update({"harvesterChart": r.harvester_chart, "rancher": r.rancher})
        return rel

    def _image_for(self, version: str, repo_suffix: str, fallback_tag: str) -> str:
        for ref, _ in release_images(self.world, version):
            if image_repository(ref).endswith("/" + repo_suffix) or \
                    image_repository(ref) == repo_suffix:
                return ref
        return f"rancher/{repo_suffix}:{fallback_tag}"

    def ensure_objects(self) -> None:
        rel = self._installed()
        version = str(rel.get("harvester") or "")
        if not version:
            return
        c = self.client
        chart_version = str(rel.get("harvesterChart") or version.lstrip("v"))
        nodes = c.list("v1", "Node")
        replicas = max(1, min(3, len([n for n in nodes if "node-role.harvesterhci.io/witness"
                                      not in (n["metadata"].get("labels") or {})])))
        for name in ("harvester-crd", "harvester"):
            if c.try_get(MC_API, "ManagedChart", name, NS) is None and \
                    c.try_get("v1", "Namespace", NS) is not None:
                self._create(self._chart(name, chart_version))
        if c.try_get("v1", "Namespace", HARVESTER_NS) is not None:
            for name in HARVESTER_DEPLOYMENTS:
                img = self._image_for(version, f"rancher/{name}", version)
                self._create(self._deployment(HARVESTER_NS, name, img, replicas))
            for name in HARVESTER_DAEMONSETS:
                img = self._image_for(version, f"rancher/{name}", "v0.3.1")
                self._create(self._daemonset(HARVESTER_NS, name, img))
            img = self._image_for(version, VIRT_OPERATOR, "")
            if img.rsplit(":", 1)[-1]:
                dep = self._deployment(HARVESTER_NS, VIRT_OPERATOR, img, 1)
                ctr = dep["spec"]["template"]["spec"]["containers"][0]
                ctr["resources"] = {"limits": {"cpu": "500m", "memory": "512Mi"}}
                for d in (dep["metadata"]["labels"], dep["spec"]["selector"]["matchLabels"],
                          dep["spec"]["template"]["metadata"]["labels"]):
                    d["app.kubernetes.io/component"] = "operator"
                self._create(dep)
            self._create(self._harvester_service())
            if self.client.registry.by_kind(KUBEVIRT_API, "KubeVirt"):
                self._create({"apiVersion": KUBEVIRT_API, "kind": "KubeVirt",
                              "metadata": {"name": "kubevirt", "namespace": HARVESTER_NS},
                              "spec": {"configuration": kubevirt_configuration(version),
                                       "infra": {"nodePlacement": {}}}})
        rancher = str(rel.get("rancher") or "")
        if rancher and c.try_get("v1", "Namespace", "cattle-system") is not None:
            img = self._image_for(version, "rancher/rancher", rancher)
            self._create(self._deployment("cattle-system", "rancher", img, replicas))

    def _create(self, obj: dict[str, Any]) -> None:
        try:
            self.client.create(obj)
        except ApiError as exc:
            if exc.code not in (409, 404):
                raise

    @staticmethod
    def _chart(name: str, version: str) -> dict[str, Any]:
        return {"apiVersion": MC_API, "kind": "ManagedChart",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"chart": name, "releaseName": name, "version": version,
                         "defaultNamespace": HARVESTER_NS, "repoName": "harvester-charts",
                         "timeoutSeconds": 600, "targets": [{"clusterName": "local"}],
                         "values": {}},
                "status": {"observedGeneration": 1,
                           "conditions": [{"type": "Ready", "status": "True"}],
                           "summary": {"desiredReady": 1, "ready": 1}}}

    @staticmethod
    def _pod_template(name: str, image: str) -> dict[str, Any]:
        container: dict[str, Any] = {"name": name, "image": image,
                                     "resources": {"requests": {"cpu": "100m",
                                                                "memory": "128Mi"}}}
        if name == "harvester":
            # deploy/charts/harvester/templates/deployment.yaml (httpsPort 8443)
            container["ports"] = [{"containerPort": 8443, "name": "https", "protocol": "TCP"}]
        return {"metadata": {"labels": {"app.kubernetes.io/name": name,
                                        "app.kubernetes.io/component": "apiserver"
                                        if name == "harvester" else name}},
                "spec": {"containers": [container],
                         "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}]}}

    @staticmethod
    def _harvester_service() -> dict[str, Any]:
        """Service ``harvester`` of deploy/charts/harvester/templates/service.yaml (v1.6.0;
        values: ClusterIP, sessionAffinity ClientIP, httpsPort 8443, httpPort 0)."""
        labels = {"app.kubernetes.io/name": "harvester",
                  "app.kubernetes.io/component": "apiserver"}
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "harvester", "namespace": HARVESTER_NS,
                             "labels": {**labels, "app.kubernetes.io/managed-by": "Helm",
                                        "kubernetes.io/cluster-service": "true"}},
                "spec": {"type": "ClusterIP", "sessionAffinity": "ClientIP", "selector": labels,
                         "ports": [{"name": "https", "port": 8443, "protocol": "TCP",
                                    "targetPort": "https"}]}}

    def _deployment(self, ns: str, name: str, image: str, replicas: int) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns,
                             "labels": {"app.kubernetes.io/name": name,
                                        "app.kubernetes.io/managed-by": "Helm"}},
                "spec": {"replicas": replicas,
                         "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                         "strategy": {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}},
                         "template": self._pod_template(name, image)}}

    def _daemonset(self, ns: str, name: str, image: str) -> dict[str, Any]:
        tpl = self._pod_template(name, image)
        tpl["spec"]["tolerations"] = [{"operator": "Exists"}]
        return {"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": name, "namespace": ns,
                             "labels": {"app.kubernetes.io/name": name,
                                        "app.kubernetes.io/managed-by": "Helm"}},
                "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                         "updateStrategy": {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxUnavailable": 1}},
                         "template": tpl}}

    # ----------------------------------------------------------------- events
    def _resync(self) -> None:
        for mc in self.client.list(MC_API, "ManagedChart", NS):
            self._reconcile(mc)

    def _on_chart(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if obj["metadata"].get("namespace") != NS:
            return
        if etype == "DELETED":
            self.tasks.cancel(obj["metadata"]["name"])
            self.client.delete(BUNDLE_API, "Bundle", f"mcc-{obj['metadata']['name']}", NS)
            return
        if old is not None and obj.get("spec") == old.get("spec"):
            return
        self._reconcile(obj)

    def _on_workload(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if self.tasks.tasks:
            self.tasks.kick()

    # -------------------------------------------------------------- reconcile
    def _reconcile(self, mc: dict[str, Any]) -> None:
        name = mc["metadata"]["name"]
        gen = int(mc["metadata"].get("generation") or 1)
        st = mc.get("status") or {}
        self._ensure_bundle(mc, ready=self._is_ready(mc))
        if not st.get("conditions"):
            self._write(name, gen, ready=True, msg="")
            return
        if int(st.get("observedGeneration") or 0) >= gen and self._is_ready(mc):
            return
        if self.tasks.running(name):
            self.tasks.cancel(name)
        self.tasks.spawn(name, self._rollout(name, gen))

    @staticmethod
    def _is_ready(mc: dict[str, Any]) -> bool:
        for c in (mc.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready":
                return c.get("status") == "True"
        return False

    def _ensure_bundle(self, mc: dict[str, Any], ready: bool) -> None:
        name = mc["metadata"]["name"]
        spec = mc.get("spec") or {}
        bname = f"mcc-{name}"
        helm = {"chart": spec.get("chart", name), "version": spec.get("version", ""),
                "releaseName": spec.get("releaseName", name), "repo": "",
                "values": spec.get("values") or {}}
        bundle_spec = {"helm": helm, "defaultNamespace": spec.get("defaultNamespace", ""),
                       "paused": bool(spec.get("paused")),
                       "targets": [{"clusterName": "local"}]}
        cur = self.client.try_get(BUNDLE_API, "Bundle", bname, NS)
        if cur is None:
            self._create({"apiVersion": BUNDLE_API, "kind": "Bundle",
                          "metadata": {"name": bname, "namespace": NS,
                                       "labels": {"objectset.rio.cattle.io/owner-name": name,
                                                  "objectset.rio.cattle.io/owner-namespace": NS}},
                          "spec": bundle_spec,
                          "status": self._bundle_status(ready, 1)})
        elif cur.get("spec") != bundle_spec:
            def fn(o: dict[str, Any]) -> dict[str, Any]:
                o["spec"] = bundle_spec
                return o

            self.client.modify(BUNDLE_API, "Bundle", bname, fn, NS)

    @staticmethod
    def _bundle_status(ready: bool, gen: int, msg: str = "") -> dict[str, Any]:
        return {"observedGeneration": gen,
                "summary": {"desiredReady": 1, "ready": 1 if ready else 0,
                            **({} if ready else {"waitApplied": 1})},
                "display": {"readyClusters": "1/1" if ready else "0/1"},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                "message": msg}]}

    def _write(self, name: str, gen: int, ready: bool, msg: str) -> None:
        ts = now_ts(self.world)

        def fn(cur: dict[str, Any]) -> dict[str, Any]:
            st = cur.setdefault("status", {})
            st["observedGeneration"] = gen
            st["summary"] = {"desiredReady": 1, "ready": 1 if ready else 0,
                             **({} if ready else {"waitApplied": 1})}
            st["display"] = {"readyClusters": "1/1" if ready else "0/1",
                             "state": "" if ready else "WaitApplied"}
            set_condition(cur, "Ready", "True" if ready else "False",
                          "" if ready else "WaitApplied", msg, ts)
            set_condition(cur, "Processed", "True", "", "", ts)
            set_condition(cur, "Defined", "True", "", "", ts)
            return cur

        try:
            self.client.modify(MC_API, "ManagedChart", name, fn, NS, subresource="status")
            bname = f"mcc-{name}"
            bstatus = self._bundle_status(ready, gen, msg)

            def bfn(cur: dict[str, Any]) -> dict[str, Any]:
                cur["status"] = bstatus
                return cur

            if self.client.try_get(BUNDLE_API, "Bundle", bname, NS) is not None:
                self.client.modify(BUNDLE_API, "Bundle", bname, bfn, NS, subresource="status")
        except ApiError as exc:
            if exc.code != 404:
                raise

    # ---------------------------------------------------------------- rollout
    def _set_images(self, kind: str, ns: str, name: str, version: str) -> bool:
        """Point the workload's containers at the release's image of the same repository."""
        refs = [ref for ref, _ in release_images(self.world, version)]
        images = {image_repository(ref): ref for ref in refs}
        by_base: dict[str, list[str]] = {}
        for ref in refs:
            by_base.setdefault(image_repository(ref).rsplit("/", 1)[-1], []).append(ref)
        obj = self.client.try_get("apps/v1", kind, name, ns)
        if obj is None:
            return False

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            changed = False
            for c in cur["spec"]["template"]["spec"].get("containers") or []:
                repo = image_repository(str(c.get("image", "")))
                new = images.get(repo)
                base = by_base.get(repo.rsplit("/", 1)[-1]) or []
                if new is None and len(base) == 1:   # moved, e.g. suse/sles/15.6 -> 15.7
                    new = base[0]
                if new is None and repo.rsplit("/", 1)[-1] in ("harvester", "harvester-webhook"):
                    new = f"{repo}:{version}"
                if new is not None and new != c.get("image"):
                    c["image"] = new
                    changed = True
            return cur if changed else None

        self.client.modify("apps/v1", kind, name, fn, ns)
        return True

    def _rolled(self, kind: str, ns: str, name: str) -> bool:
        obj = self.client.try_get("apps/v1", kind, name, ns)
        if obj is None:
            return True
        ctrl = "deployments" if kind == "Deployment" else "daemonsets"
        if not self.world.simulates(ctrl):
            return True  # nobody rolls this kind in this world
        st = obj.get("status") or {}
        if int(st.get("observedGeneration") or 0) < int(obj["metadata"].get("generation") or 0):
            return False
        if kind == "Deployment":
            want = int(obj["spec"].get("replicas", 1))
            return (int(st.get("updatedReplicas") or 0) >= want
                    and int(st.get("availableReplicas") or 0) >= want
                    and int(st.get("replicas") or 0) <= want)
        want = int(st.get("desiredNumberScheduled") or 0)
        return (int(st.get("updatedNumberScheduled") or 0) >= want
                and int(st.get("numberAvailable") or 0) >= want)

    def _rollout(self, name: str, gen: int) -> TaskGen:
        mc = self.client.try_get(MC_API, "ManagedChart", name, NS)
        if mc is None:
            return
        spec = mc.get("spec") or {}
        version = str(spec.get("version") or "")
        msg = f"WaitApplied(1) [Cluster {NS}/local]"
        self._write(name, gen, ready=False, msg=msg)
        if spec.get("paused"):
            self._write(name, gen, ready=False, msg="Paused")
            return
        t0 = self.world.clock.now()
        self.world.timeline.record("chart_rollout_started", chart=name, version=version)
        if self.world.faults.match("chart_stuck", chart=name) is not None:
            self.world.timeline.record("chart_stuck", chart=name)
            self._write(name, gen, ready=False,
                        msg=f"ErrApplied(1) [Cluster {NS}/local: helm upgrade timed out]")
            yield lambda: False
        workloads = CHART_WORKLOADS.get(name, [])
        app = _app_version(version)
        self._apply_crds(name, app)
        for kind, ns, wname in workloads:
            self._set_images(kind, ns, wname, app)
        if name == "harvester":
            self._apply_kubevirt_configuration(app)
        yield self.world.timings.chart_rollout_s
        yield lambda: all(self._rolled(k, ns, w) for k, ns, w in workloads)
        self._write(name, gen, ready=True, msg="")
        if name == "harvester":
            self._server_version(app)
        self.world.timeline.record("span", what="chart_rollout", node="", chart=name,
                                   start=t0, end=self.world.clock.now())
        self.world.timeline.record("chart_ready", chart=name, version=version)


    def _apply_crds(self, chart: str, version: str) -> None:
        """The chart's CRDs at ``version``: the harvester-crd chart carries the
        harvesterhci.io ones; the harvester chart's kubevirt-operator and longhorn subcharts
        bring KubeVirt's (virt-operator creates them) and Longhorn's."""
        if chart not in CHART_COMPONENTS:
            return
        rel = release_for(self.world, version)
        if rel is None:
            log.warning("chart %s %s: release unknown, CRDs left as they are", chart, version)
            return
        switch_crds(self.world, self.client, rel, chart)

    def _server_version(self, version: str) -> None:
        """The new Harvester pods' settings syncer records the running version in Setting
        ``server-version`` (harvester pkg/settings: ``server-version`` defaults to the
        build's version); upgrade_manifests.sh itself never writes it."""
        if not self.client.registry.by_kind("harvesterhci.io/v1beta1", "Setting"):
            return
        try:
            self.client.patch("harvesterhci.io/v1beta1", "Setting", "server-version",
                              {"value": version})
        except Exception as exc:  # noqa: BLE001 - no such Setting in this world
            log.debug("server-version not updated: %s", exc)

    def _apply_kubevirt_configuration(self, version: str) -> None:
        conf = kubevirt_configuration(version)

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            spec = cur.setdefault("spec", {})
            merged = {**(spec.get("configuration") or {}), **conf}
            if not conf.get("vmRolloutStrategy"):
                merged.pop("vmRolloutStrategy", None)
            if merged == spec.get("configuration"):
                return None
            spec["configuration"] = merged
            return cur

        try:
            self.client.modify(KUBEVIRT_API, "KubeVirt", "kubevirt", fn, HARVESTER_NS)
        except ApiError as exc:
            if exc.code != 404:
                raise


def setup(world: Any) -> ChartsController:
    return ChartsController(world)
