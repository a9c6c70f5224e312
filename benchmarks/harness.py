"""One measured upgrade run against the simulator (used by ``run_all.py``; not a test).

``run_upgrade(scenario, speed, out_dir, extra_vars)`` starts ``harvester-sim serve``, records
which VMs are live-migratable on which node, runs ``ansible-playbook upgrade.yml`` exactly as
``make upgrade`` does (with the operator's overrides of ``scripts/scenario_overrides.py`` for
a scenario whose pre-flight refuses on purpose) while sampling (psutil, every ``SAMPLE_S``)
the CPU time and RSS of the ansible-playbook process tree and the RSS of the simulator,
stops the simulator (which writes its report) and returns a :class:`Run` with everything
the figures need.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import scenario_overrides  # noqa: E402
from upgrade_on_simulator import BENCH_AGENT, wait_vms_running  # noqa: E402

BIN = ROOT / ".venv" / "bin"
SAMPLE_S = 0.2
PLAN_API = ("management.harvesterhci.io", "v1beta1", "upgradeplans")


@dataclass
class Run:
    scenario: str
    speed: float
    extra_vars: dict[str, Any]
    rc: int = 1
    plan_phase: str = ""
    wall_s: float = 0.0                     # ansible-playbook, start to exit
    cpu_s: float = 0.0                      # user+sys of the ansible-playbook process tree
    peak_rss_mb: float = 0.0                # of the ansible-playbook process tree (sum)
    sim_peak_rss_mb: float = 0.0
    sim_cpu_s: float = 0.0
    boot_s: float = 0.0                     # simulator start to kubeconfig written
    nodes: int = 0
    migratable_by_node: dict[str, list[str]] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    out: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.plan_phase == "Succeeded"


class _Sampler(threading.Thread):
    """CPU and RSS of a process tree (CPU of exited children is kept from their last
    sample; children reaped by their parent also show in its ``children_*`` times)."""

    def __init__(self, root_pid: int, sim_pid: int) -> None:
        super().__init__(daemon=True)
        self.root_pid = root_pid
        self.sim_pid = sim_pid
        self.stop_ev = threading.Event()
        self.cpu: dict[int, float] = {}
        self.peak_rss = 0
        self.sim_peak_rss = 0
        self.sim_cpu = 0.0

    def _sample(self) -> None:
        try:
            root = psutil.Process(self.root_pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            procs = []
        rss = 0
        for p in procs:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
                    rss += p.memory_info().rss
            except psutil.Error:
                continue
        self.peak_rss = max(self.peak_rss, rss)
        try:
            sp = psutil.Process(self.sim_pid)
            self.sim_peak_rss = max(self.sim_peak_rss, sp.memory_info().rss)
            t = sp.cpu_times()
            self.sim_cpu = t.user + t.system
        except psutil.Error:
            pass

    def run(self) -> None:
        while not self.stop_ev.wait(SAMPLE_S):
            self._sample()

    def stop(self) -> None:
        self.stop_ev.set()
        self.join(5)

    def cpu_total(self) -> float:
        """Sum of the last sample of every process seen in the tree (a lower bound: work
        done after a process's last sample is missed)."""
        return sum(self.cpu.values())


def _migratable(kubeconfig: Path) -> dict[str, list[str]]:
    """node -> live-migratable running VMs (``ns/name``) at the start."""
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))
    api.user_agent = BENCH_AGENT
    co = client.CustomObjectsApi(api)
    out: dict[str, list[str]] = {}
    for vmi in co.list_cluster_custom_object("kubevirt.io", "v1",
                                             "virtualmachineinstances").get("items", []):
        st = vmi.get("status") or {}
        conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
        if st.get("phase") == "Running" and conds.get("LiveMigratable") == "True" and \
                not _pinned(vmi):
            md = vmi["metadata"]
            out.setdefault(st.get("nodeName") or "", []).append(f"{md['namespace']}/{md['name']}")
    return out


def _pinned(vmi: dict[str, Any]) -> bool:
    """Pinned to one node (nodeSelector or required affinity on the hostname): KubeVirt calls
    it live-migratable, but there is nowhere to go, so an upgrade shuts it down."""
    spec = vmi.get("spec") or {}
    if "kubernetes.io/hostname" in (spec.get("nodeSelector") or {}):
        return True
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for t in terms:
        for e in t.get("matchExpressions") or []:
            if e.get("key") == "kubernetes.io/hostname" and e.get("operator") == "In" and \
                    len(e.get("values") or []) == 1:
                return True
    return False


def _plan(kubeconfig: Path) -> dict[str, Any] | None:
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))
    api.user_agent = BENCH_AGENT
    try:
        items = client.CustomObjectsApi(api).list_cluster_custom_object(*PLAN_API).get(
            "items", [])
    except client.ApiException:
        return None
    if not items:
        return None
    items.sort(key=lambda o: o["metadata"].get("creationTimestamp", ""))
    return items[-1]  # type: ignore[no-any-return]


def run_upgrade(scenario: str, speed: float, out_dir: Path,
                extra_vars: dict[str, Any] | None = None, seed: int | None = None,
                timeout_s: float = 3600, quiet: bool = True) -> Run:
    out_dir.mkdir(parents=True, exist_ok=True)
    kubeconfig = out_dir / "kubeconfig"
    report_path = out_dir / "report.json"
    kubeconfig.unlink(missing_ok=True)
    report_path.unlink(missing_ok=True)
    # a scenario whose pre-flight refuses on purpose gets the operator's overrides
    overrides = scenario_overrides.overrides_for(scenario)
    run = Run(scenario, speed, {**overrides, **(extra_vars or {})}, out=str(out_dir))
    if overrides and not quiet:
        print(f"  {scenario_overrides.describe(scenario, overrides)}", file=sys.stderr)
    cmd = [str(BIN / "harvester-sim"), "serve", "--scenario", scenario, "--kubeconfig",
           str(kubeconfig), "--speed", str(speed), "--report", str(report_path)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    t0 = time.monotonic()
    with open(out_dir / "simulator.log", "wb") as log:
        sim = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        while not kubeconfig.exists():
            if sim.poll() is not None:
                raise RuntimeError(f"harvester-sim exited with {sim.returncode}: "
                                   + (out_dir / "simulator.log").read_text()[-2000:])
            if time.monotonic() - t0 > 600:
                raise RuntimeError("harvester-sim did not become ready within 600 s")
            time.sleep(0.05)
        run.boot_s = time.monotonic() - t0
        wait_vms_running(kubeconfig, 600)
        run.migratable_by_node = _migratable(kubeconfig)
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), K8S_AUTH_KUBECONFIG=str(kubeconfig),
                   ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), PATH=f"{BIN}:{os.environ['PATH']}")
        play = [str(BIN / "ansible-playbook"), "upgrade.yml"]
        if run.extra_vars:
            play += ["-e", json.dumps(run.extra_vars)]
        c0 = _children_cpu()
        with open(out_dir / "ansible.log", "wb") as alog:
            t1 = time.monotonic()
            proc = subprocess.Popen(play, cwd=ROOT, env=env, stdout=alog,
                                    stderr=subprocess.STDOUT)
            sampler = _Sampler(proc.pid, sim.pid)
            sampler.start()
            # a blocking wait, the deadline kept by a timer: Popen.wait(timeout=) polls with
            # sleeps of up to 50 ms, which the wall time would count after the exit
            deadline = threading.Timer(timeout_s, proc.kill)
            deadline.start()
            try:
                run.rc = proc.wait()
            finally:
                deadline.cancel()
            run.wall_s = time.monotonic() - t1
            sampler._sample()  # noqa: SLF001 - the last sample after the exit
            sampler.stop()
        # the playbook was reaped by us (and its workers/modules by it): the growth of our
        # children's times is the tree's CPU; sampling covers anything not waited for
        run.cpu_s = max(_children_cpu() - c0, sampler.cpu_total())
        run.peak_rss_mb = sampler.peak_rss / 2**20
        run.sim_peak_rss_mb = sampler.sim_peak_rss / 2**20
        run.sim_cpu_s = sampler.sim_cpu
        plan = _plan(kubeconfig)
        if plan is not None:
            run.plan_phase = str((plan.get("status") or {}).get("currentPhase") or "")
            (out_dir / "upgradeplan.json").write_text(json.dumps(plan, indent=2))
    finally:
        if sim.poll() is None:
            sim.send_signal(signal.SIGTERM)
            try:
                sim.wait(timeout=120)
            except subprocess.TimeoutExpired:
                sim.kill()
    if report_path.exists():
        run.report = json.loads(report_path.read_text())
    run.nodes = int(run.report.get("nodes") or 0)
    if not quiet:
        print(f"  {scenario} x{speed:g} {run.extra_vars or ''}: rc {run.rc}, plan "
              f"{run.plan_phase or '-'}, {run.wall_s:.0f} s", file=sys.stderr)
    return run


def _children_cpu() -> float:
    t = psutil.Process().cpu_times()
    return float(t.children_user + t.children_system)
