"""End-to-end: what a real Harvester needs beyond the happy path (issue 21, points 6-8).

* NodeUpgrade's PreRun/PostRun: the Longhorn ``replica-replenishment-wait-interval`` held at
  1800 s for the roll (its original saved on the plan first, kept across a resumed run) and
  restored by the abort; with nodes that stay away longer than Longhorn's default 600 s the
  simulated Longhorn (longhorn-manager's ``RequireNewReplica``) would otherwise rebuild their
  replicas on another node.
* Coexistence and identity: pre-flight refuses while Harvester's built-in Upgrade is in
  progress or the Upgrade Manager add-on is installed; the ISO image's displayName is
  ``<plan>-<version>`` (Harvester's image webhook refuses a name already used, e.g. by an ISO
  the operator uploaded); the certificate check dials the API server addresses the cluster
  publishes, not the kubeconfig's host (here a TLS relay with a certificate of its own).
* ``--check`` on a fresh cluster (no plan yet) shows the node plan.
"""

from __future__ import annotations

import base64
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

harvester_sim = pytest.importorskip("harvester_sim")

import node_setup as _nodes  # noqa: E402

from testkit import PLAN_API, plans, run_playbook, writes  # noqa: E402

HERE = Path(__file__).resolve().parent
SPEED = 1000
LH = ("longhorn.io/v1beta2", "Setting")
REPLENISH = "replica-replenishment-wait-interval"
ANN_SAVED = "management.harvesterhci.io/replica-replenishment-wait-interval"

pytestmark = [pytest.mark.timeout(900)]


def replenish(sim: Any) -> str:
    return str(sim.world.client.get(*LH, REPLENISH, "longhorn-system")["value"])


# ---------------------------------------------------------------------------------------------
# 6. NodeUpgrade PreRun / PostRun
# ---------------------------------------------------------------------------------------------

def test_node_roll_holds_the_replenishment_wait_and_abort_restores_it() -> None:
    """four-node-big-worker whose nodes stay away ~1100 simulated seconds (OS install and
    reboot of a real server): longer than Longhorn's default wait (600 s), shorter than the
    1800 s the roll holds. First run: stops at the paused second node; second run (resumed):
    the rest; then the abort restores the operator's value."""
    from harvester_sim import testing
    scn = yaml.safe_load((HERE / "scenarios" / "four-node-big-worker.yaml").read_text())
    scn["timings"] = {**(scn.get("timings") or {}), "os_install_s": 900}
    with testing.running(scn, speed=SPEED) as sim:
        c = sim.world.client
        _nodes.wait_settled(sim)
        assert replenish(sim) == "600"
        order = _nodes.order_of(sim)
        _nodes.at_cluster_upgraded(sim, pause=[order[1]])
        seen: list[str] = []

        def watch(ev: Any) -> None:   # every committed value of the setting
            if ev.obj.get("kind") == "Setting" and ev.obj["metadata"].get("name") == REPLENISH:
                seen.append(str(ev.obj.get("value")))
        sim.world.store.subscribe(watch)

        first = run_playbook(sim, "playbooks/node_upgrade.yml",
                             extra_vars={"node_upgrade_pause_timeout": 0})
        assert first.rc == 0, str(first)
        assert "NodeUpgrade PreRun: save" in first.output, str(first)
        plan = _nodes.get_plan(sim)
        assert plan["metadata"]["annotations"][ANN_SAVED] == "600"
        assert replenish(sim) == "1800"

        def unpause(cur: dict[str, Any]) -> dict[str, Any]:
            cur["spec"]["nodeUpgradeOption"]["pauseNodes"] = []
            return cur
        c.modify(PLAN_API, "UpgradePlan", _nodes.PLAN, unpause)
        second = run_playbook(sim, "playbooks/node_upgrade.yml")
        assert second.rc == 0, str(second)
        plan = _nodes.get_plan(sim)
        assert plan["status"]["currentPhase"] == "NodeUpgraded", str(second)
        # the resumed run kept the operator's value, not the raised one
        assert plan["metadata"]["annotations"][ANN_SAVED] == "600"
        assert seen and set(seen) == {"1800"}, seen
        # nodes were away longer than 600 s: without the raised wait Longhorn rebuilds the
        # down node's replicas elsewhere (simulator/tests/test_longhorn.py shows both cases)
        from harvester_sim import report as rep
        timeline = rep.build(sim.world).get("timeline") or []
        away = [e for e in timeline if e.get("event") == "replica_failed"]
        assert away, "no replica went down with its node"
        assert not [e for e in timeline if e.get("event") == "replica_replenished"]

        aborted = run_playbook(sim, "upgrade.yml", extra_vars={"upgrade_abort": True})
        assert aborted.rc == 0, str(aborted)
        assert replenish(sim) == "600"
        assert ANN_SAVED not in (_nodes.get_plan(sim)["metadata"].get("annotations") or {})


# ---------------------------------------------------------------------------------------------
# 7. coexistence and identity
# ---------------------------------------------------------------------------------------------

def test_preflight_refuses_next_to_a_builtin_upgrade_or_the_upgrade_manager(
        simulator: Any) -> None:
    sim = simulator("three-node", speed=200)
    c = sim.world.client
    c.create({"apiVersion": "harvesterhci.io/v1beta1", "kind": "Upgrade",
              "metadata": {"name": "hvst-upgrade-v1", "namespace": "harvester-system",
                           "labels": {"harvesterhci.io/upgradeState": "UpgradingNodes",
                                      "harvesterhci.io/latestUpgrade": "true"}},
              "spec": {"version": "v1.6.0"}})
    c.create({"apiVersion": "harvesterhci.io/v1beta1", "kind": "Addon",
              "metadata": {"name": "harvester-upgrade-manager",
                           "namespace": "harvester-system"},
              "spec": {"repo": "https://charts.harvesterhci.io",
                       "chart": "harvester-upgrade-manager", "version": "0.1.0",
                       "enabled": True, "valuesContent": ""}})
    before = writes(sim)
    res = run_playbook(sim, "upgrade.yml")
    assert res.rc != 0, str(res)
    assert "no_legacy_upgrade" in res.output and "built-in upgrade is in progress" in res.output
    assert "no_upgrade_manager" in res.output and "Upgrade Manager is installed" in res.output
    # refused in Initialize: the plan failed there, nothing of the upgrade was created
    found = plans(sim)
    assert len(found) == 1 and found[0]["status"]["currentPhase"] == "Failed", str(res)
    after = writes(sim)
    made = {k for k in after if k.startswith("create ") and after[k] != before.get(k, 0)}
    assert made <= {"create upgradeplans", "create events", "create customresourcedefinitions",
                    "create leases"}, made

    # once the built-in upgrade ended and the add-on is disabled the checks pass
    c.patch("harvesterhci.io/v1beta1", "Upgrade", "hvst-upgrade-v1", {"metadata": {
        "labels": {"harvesterhci.io/upgradeState": "Succeeded"}}}, "harvester-system")
    c.patch("harvesterhci.io/v1beta1", "Addon", "harvester-upgrade-manager",
            {"spec": {"enabled": False}}, "harvester-system")
    again = run_playbook(sim, "upgrade.yml", tags="preflight",
                         extra_vars={"preflight_what_if": True})
    assert again.rc == 0, str(again)
    assert "| no_legacy_upgrade |" in again.output


def test_iso_display_name_is_unique_per_plan(simulator: Any) -> None:
    """The operator uploaded the release ISO under its file name: the plan's own ISO image
    must not take that displayName (Harvester's image webhook refuses it)."""
    sim = simulator("three-node", speed=200)
    c = sim.world.client
    url = c.get("harvesterhci.io/v1beta1", "Version", "v1.6.0", "harvester-system")[
        "spec"]["isoURL"]
    c.create({"apiVersion": "harvesterhci.io/v1beta1", "kind": "VirtualMachineImage",
              "metadata": {"name": "uploaded-iso", "namespace": "harvester-system"},
              "spec": {"displayName": url.rsplit("/", 1)[-1], "sourceType": "download",
                       "url": url, "backend": "cdi", "retry": 3}})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "harvesterhci.io/imageDisplayName" not in (
            c.get("harvesterhci.io/v1beta1", "VirtualMachineImage", "uploaded-iso",
                  "harvester-system")["metadata"].get("labels") or {}):
        time.sleep(0.05)
    res = run_playbook(sim, "upgrade.yml", tags="preflight,iso_download")
    assert res.rc == 0, str(res)
    plan = plans(sim)[0]
    name = plan["metadata"]["name"]
    assert plan["status"]["currentPhase"] == "ISODownloaded", str(res)
    iso = c.get("harvesterhci.io/v1beta1", "VirtualMachineImage", f"{name}-iso",
                "harvester-system")
    assert iso["spec"]["displayName"] == f"{name}-v1.6.0"


class TlsRelay:
    """A TLS front (its own certificate, valid a year) relaying bytes to the API server, as a
    load balancer or virtual IP in front of the control plane does."""

    def __init__(self, target_port: int) -> None:
        from harvester_sim.api import tls
        self.certs = tls.generate(serving_days=365)
        self.ctx = self.certs.ssl_context()
        self.target = target_port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            front = self.ctx.wrap_socket(conn, server_side=True)
            up_ctx = ssl.create_default_context()
            up_ctx.check_hostname = False
            up_ctx.verify_mode = ssl.CERT_NONE
            back = up_ctx.wrap_socket(socket.create_connection(("127.0.0.1", self.target)))
        except (OSError, ssl.SSLError):
            conn.close()
            return

        # One thread per connection moves bytes both ways: an SSL socket must not be read and
        # written from two threads at once (OpenSSL's connection object is not thread-safe).
        import selectors
        sel = selectors.DefaultSelector()
        for a, b in ((front, back), (back, front)):
            a.setblocking(False)
            sel.register(a, selectors.EVENT_READ, b)
        try:
            while not self.stopped:
                for key, _ in sel.select(timeout=1.0):
                    src, dst = key.fileobj, key.data
                    while True:
                        try:
                            data = src.recv(65536)  # type: ignore[union-attr]
                        except ssl.SSLWantReadError:
                            break
                        if not data:
                            return
                        dst.setblocking(True)
                        dst.sendall(data)
                        dst.setblocking(False)
        except OSError:
            pass
        finally:
            sel.close()
            for sk in (front, back):
                try:
                    sk.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.stopped = True
        self.sock.close()


@pytest.fixture
def relay_sim(simulator: Any, tmp_path: Path) -> Iterator[tuple[Any, TlsRelay, Path]]:
    scn = tmp_path / "cert-near-expiry.yaml"   # ``extends`` is resolved for scenario files
    scn.write_text(yaml.safe_dump({"name": "cert-near-expiry", "extends": "three-node",
                                   "faults": [{"kind": "cert_near_expiry", "days": 3}]}))
    sim = simulator(str(scn), speed=200)
    port = int(sim.url.rsplit(":", 1)[1])
    # the endpointslice controller publishes the API server's address soon after start; the
    # check under test reads it (a cluster always has it), so wait for it as a cluster would
    deadline = time.monotonic() + 30
    while not any(p.get("port") == port
                  for sl in sim.world.client.list("discovery.k8s.io/v1", "EndpointSlice",
                                                  "default")
                  if (sl["metadata"].get("labels") or {}).get("kubernetes.io/service-name")
                  == "kubernetes" for p in sl.get("ports") or []):
        assert time.monotonic() < deadline, "no EndpointSlice for default/kubernetes"
        time.sleep(0.05)
    relay = TlsRelay(port)
    kc = yaml.safe_load(Path(sim.env["KUBECONFIG"]).read_text())
    kc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    kc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        relay.certs.ca_pem).decode()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kc))
    try:
        yield sim, relay, path
    finally:
        relay.close()


def test_certificate_check_reads_the_published_api_endpoints(
        relay_sim: tuple[Any, TlsRelay, Path]) -> None:
    """The kubeconfig points at a relay whose certificate is fine; the API server's own (at
    the address the ``kubernetes`` EndpointSlice publishes) expires in 3 days."""
    sim, relay, kubeconfig = relay_sim
    api_port = int(sim.url.rsplit(":", 1)[1])
    res = run_playbook(sim, "upgrade.yml", tags="preflight",
                       env={"KUBECONFIG": str(kubeconfig),
                            "K8S_AUTH_KUBECONFIG": str(kubeconfig)})
    assert res.rc != 0, str(res)
    assert "API server certificates expire within 7 days" in res.output, str(res)
    assert f"127.0.0.1:{api_port} expires" in res.output, str(res)
    assert f"127.0.0.1:{relay.port} expires" not in res.output


# ---------------------------------------------------------------------------------------------
# 8. --check before any plan exists
# ---------------------------------------------------------------------------------------------

def test_check_on_a_fresh_cluster_shows_the_node_plan(simulator: Any) -> None:
    sim = simulator("three-node", speed=200)
    before = writes(sim)
    res = run_playbook(sim, "upgrade.yml", check=True)
    assert res.rc == 0, str(res)
    assert writes(sim) == before, "--check wrote to the cluster"
    assert plans(sim) == []
    out = res.output
    assert "would create an UpgradePlan to v1.6.0" in out, str(res)
    assert "No UpgradePlan yet: the run would create one to v1.6.0" in out, str(res)
    assert "Node plan (3 nodes, Rancher's order), estimated" in out, str(res)
    order = _nodes.order_of(sim)
    pos = [out.index(f"{i + 1}. {n} (") for i, n in enumerate(order)]
    assert pos == sorted(pos), str(res)
    vms = [v for v in sim.world.client.list("kubevirt.io/v1", "VirtualMachineInstance")
           if (v.get("status") or {}).get("phase") == "Running"]
    assert vms and all(f"migrate {v['metadata']['namespace']}/{v['metadata']['name']}" in out
                       or f"shut down {v['metadata']['namespace']}/{v['metadata']['name']}"
                       in out for v in vms), str(res)
    assert " -> node-" in out, str(res)   # where each migrating VM goes
