#!/usr/bin/env python3
"""`make upgrade`: run the whole upgrade against a simulated cluster and summarise it.

1. starts ``harvester-sim serve`` for the scenario (kubeconfig and report under ``--out``),
2. runs ``ansible-playbook upgrade.yml`` against it, exactly as a user would against a
   real cluster (only KUBECONFIG points elsewhere),
3. saves the final UpgradePlan to ``<out>/upgradeplan.json``, stops the simulator (which
   writes ``<out>/report.json``) and prints a short summary.

``--without NAME`` leaves a simulated controller out (``harvester-sim serve --without``);
``--suc-bin PATH`` runs a real system-upgrade-controller binary beside the simulator, out of
cluster with the simulator's kubeconfig, in place of the simulated one (implies
``--without suc``); its log is ``<out>/system-upgrade-controller.log`` (docs/real-controllers.md).

Exits non-zero when the plan did not succeed or the simulator recorded an invariant
violation.

``--scenario-overrides`` adds the operator's documented overrides for a scenario whose
pre-flight checks refuse on purpose (``scripts/scenario_overrides.py``; ``make toolkit-peer``
uses it) and prints them. SIGTERM or SIGINT stops the playbook and the simulator before it
exits (:func:`stop_children_on_signals`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import scenario_overrides  # noqa: E402

PLAN_API = ("management.harvesterhci.io", "v1beta1", "upgradeplans")
ACTIVE_PHASES = ("Initializing", "ISODownloading", "RepoCreating", "MetadataPopulating",
                 "ImagePreloading", "ClusterUpgrading", "NodeUpgrading", "CleaningUp")


def start_simulator(scenario: str, speed: float, out: Path, seed: int | None,
                    extra: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = out / "kubeconfig"
    kubeconfig.unlink(missing_ok=True)
    (out / "report.json").unlink(missing_ok=True)
    cmd = [str(ROOT / ".venv" / "bin" / "harvester-sim"), "serve", "--scenario", scenario,
           "--kubeconfig", str(kubeconfig), "--speed", str(speed),
           "--report", str(out / "report.json")]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    cmd += extra
    log = open(out / "simulator.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 120
    try:
        while not kubeconfig.exists():
            if proc.poll() is not None:
                sys.stderr.write((out / "simulator.log").read_text())
                raise SystemExit(f"harvester-sim exited with {proc.returncode} before it was "
                                 "ready")
            if time.monotonic() > deadline:
                raise SystemExit("harvester-sim did not become ready within 120 s")
            time.sleep(0.1)
    except BaseException:   # not ready, or interrupted (SIGTERM): the caller never gets it
        stop_process(proc)
        raise
    return proc, kubeconfig


# The environment the Rancher system-upgrade-controller chart 107.0.0 (the one Rancher v2.12.0,
# hence Harvester v1.6.0, installs) gives the controller: its ConfigMap with the chart's
# defaults and values (kubectl image rancher/kubectl:v1.33.1), and the name and namespace the
# Deployment sets from its label and namespace (docs/real-controllers.md).
SUC_ENV = {"SYSTEM_UPGRADE_CONTROLLER_NAME": "system-upgrade-controller",
           "SYSTEM_UPGRADE_CONTROLLER_NAMESPACE": "cattle-system",
           "SYSTEM_UPGRADE_CONTROLLER_DEBUG": "false",
           "SYSTEM_UPGRADE_CONTROLLER_THREADS": "2",
           "SYSTEM_UPGRADE_JOB_ACTIVE_DEADLINE_SECONDS": "900",
           "SYSTEM_UPGRADE_JOB_BACKOFF_LIMIT": "99",
           "SYSTEM_UPGRADE_JOB_IMAGE_PULL_POLICY": "IfNotPresent",
           "SYSTEM_UPGRADE_JOB_KUBECTL_IMAGE": "rancher/kubectl:v1.33.1",
           "SYSTEM_UPGRADE_JOB_PRIVILEGED": "true",
           "SYSTEM_UPGRADE_JOB_TTL_SECONDS_AFTER_FINISH": "900",
           "SYSTEM_UPGRADE_PLAN_POLLING_INTERVAL": "15m"}


def start_suc(binary: Path, kubeconfig: Path, out: Path) -> subprocess.Popen[bytes]:
    """A real system-upgrade-controller, out of cluster, against the simulator."""
    env = dict(os.environ, **SUC_ENV)
    log = open(out / "system-upgrade-controller.log", "wb")  # noqa: SIM115 - process lifetime
    return subprocess.Popen([str(binary), "--kubeconfig", str(kubeconfig)], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)


@contextlib.contextmanager
def stop_children_on_signals() -> Iterator[None]:
    """SIGTERM and SIGINT end the main thread with ``SystemExit(128 + signal)`` so that every
    ``finally`` that stops a child (simulator, playbook, controller) runs; while that cleanup
    runs, further SIGTERM/SIGINT are ignored (a second Ctrl-C would otherwise leave the
    children behind). The previous handlers are restored on exit."""
    sigs = (signal.SIGTERM, signal.SIGINT)
    old = {s: signal.getsignal(s) for s in sigs}

    def on_signal(signum: int, _frame: Any) -> None:
        for s in sigs:
            signal.signal(s, signal.SIG_IGN)
        print(f"\n{signal.Signals(signum).name}: stopping the child processes", file=sys.stderr,
              flush=True)
        raise SystemExit(128 + signum)

    for s in sigs:
        signal.signal(s, on_signal)
    try:
        yield
    finally:
        for s in sigs:
            signal.signal(s, old[s])


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` s, of one child that may still run."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# the user agent of this script's and the benchmarks' own reads of the simulated cluster
BENCH_AGENT = "harvester-bench"


def wait_vms_running(kubeconfig: Path, timeout: float) -> None:
    """The scenario's VMs start right after the simulator boots: wait until as many VMIs run
    as VMs should run, so the upgrade starts from a settled cluster (returns at the timeout
    either way)."""
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))
    api.user_agent = BENCH_AGENT   # not the collection's requests (benchmarks count those)
    co = client.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = co.list_cluster_custom_object("kubevirt.io", "v1",
                                              "virtualmachineinstances").get("items", [])
        vms = co.list_cluster_custom_object("kubevirt.io", "v1",
                                            "virtualmachines").get("items", [])
        want = sum(1 for v in vms if (v.get("spec") or {}).get("runStrategy", "Always")
                   in ("Always", "RerunOnFailure") or (v.get("spec") or {}).get("running"))
        running = sum(1 for i in items if (i.get("status") or {}).get("phase") == "Running")
        if running >= want:
            return
        time.sleep(0.5)


def stop_simulator(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def fetch_plan(kubeconfig: Path) -> dict[str, Any] | None:
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))
    co = client.CustomObjectsApi(api)
    try:
        items = co.list_cluster_custom_object(*PLAN_API).get("items", [])
    except client.ApiException as exc:
        if exc.status == 404:  # the UpgradePlan CRD was never installed
            return None
        raise
    if not items:
        return None
    items.sort(key=lambda o: o["metadata"].get("creationTimestamp", ""))
    return items[-1]  # type: ignore[no-any-return]


def fetch_restore_map(kubeconfig: Path, plan: str) -> dict[str, list[str]]:
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))
    try:
        cm = client.CoreV1Api(api).read_namespaced_config_map(f"{plan}-restore-vm",
                                                              "harvester-system")
    except client.ApiException:
        return {}
    return {k: [v for v in (val or "").split(",") if v] for k, val in (cm.data or {}).items()}


def _ts(s: str) -> dt.datetime:
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")


def summarise(plan: dict[str, Any] | None, report: dict[str, Any],
              restore: dict[str, list[str]]) -> list[str]:
    lines = ["", "=== upgrade summary ==="]
    if plan is None:
        lines.append("no UpgradePlan was created")
        return lines
    st = plan.get("status", {})
    lines.append(f"plan {plan['metadata']['name']}: {st.get('previousVersion', '?')} -> "
                 f"{plan.get('spec', {}).get('version') or plan.get('spec', {}).get('image')}"
                 f"  phase {st.get('currentPhase')}")
    stamps = st.get("phaseTransitionTimestamps") or []
    for i, entry in enumerate(stamps):
        if entry["phase"] in ACTIVE_PHASES and i + 1 < len(stamps):
            dur = _ts(stamps[i + 1]["phaseTransitionTimestamp"]) - _ts(
                entry["phaseTransitionTimestamp"])
            lines.append(f"  {entry['phase']:<22} {int(dur.total_seconds()):>5} s (wall)")
    nodes = st.get("nodeUpgradeStatuses") or {}
    lines.append(f"nodes ({len(nodes)}): " + ", ".join(
        f"{n}={s.get('state')}" for n, s in sorted(nodes.items())))
    mig = report.get("vm_migrations", {})
    shut = sum(len(v) for v in restore.values())
    lines.append(f"VMs: migrated {mig.get('total', 0)} times, shut down {shut}, "
                 f"restored {shut if plan.get('spec', {}).get('restoreVM') else 0}")
    viol = report.get("invariant_violations", [])
    lines.append(f"invariants: {'OK' if not viol else f'{len(viol)} VIOLATION(S)'}")
    for v in viol[:10]:
        lines.append(f"  - {json.dumps(v)}")
    if "simulated_duration_s" in report:
        lines.append(f"simulated {report['simulated_duration_s']:.0f} s in "
                     f"{report.get('wall_duration_s', 0):.0f} s wall")
    return lines


def bundled_collections_parent() -> str:
    """The directory holding the ``ansible_collections`` of the project venv's ``ansible``
    package (kubernetes.core), for an ansible-core installed elsewhere."""
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c",
                          "import ansible_collections.kubernetes.core as k, pathlib; "
                          "print(pathlib.Path(k.__path__[0]).parents[2])"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scenario", default="three-node")
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--out", default="out")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--playbook", default="upgrade.yml")
    ap.add_argument("--without", action="append", default=[], metavar="NAME",
                    help="leave this simulated controller out (harvester-sim serve --without); "
                    "repeatable or comma-separated")
    ap.add_argument("--suc-bin", type=Path, default=None, metavar="PATH",
                    help="run this system-upgrade-controller binary beside the simulator in "
                    "place of the simulated one")
    ap.add_argument("--ansible-bin", type=Path, default=ROOT / ".venv" / "bin", metavar="DIR",
                    help="the directory of the ansible-playbook to run (another ansible-core "
                    "release, e.g. the oldest supported one; make upgrade ANSIBLE_BIN=DIR)")
    ap.add_argument("--scenario-overrides", action="store_true",
                    help="pass the operator's documented overrides for a scenario whose "
                    "pre-flight checks refuse on purpose (scripts/scenario_overrides.py)")
    ap.add_argument("ansible_args", nargs="*", help="extra ansible-playbook arguments")
    args = ap.parse_args(argv)
    with stop_children_on_signals():
        return run(args)


def run(args: argparse.Namespace) -> int:
    playbook_bin = args.ansible_bin / "ansible-playbook"
    if not (playbook_bin.is_file() and os.access(playbook_bin, os.X_OK)):
        raise SystemExit(f"--ansible-bin: no executable ansible-playbook in {args.ansible_bin}")
    without = [n.strip() for w in args.without for n in w.split(",") if n.strip()]
    if args.suc_bin is not None:
        if not (args.suc_bin.is_file() and os.access(args.suc_bin, os.X_OK)):
            raise SystemExit(f"--suc-bin: {args.suc_bin}: no such executable file")
        if "suc" not in without:
            without.append("suc")
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    extra = ["--without", ",".join(without)] if without else []
    proc, kubeconfig = start_simulator(args.scenario, args.speed, out, args.seed, extra)
    rc_play = 1
    plan: dict[str, Any] | None = None
    restore: dict[str, list[str]] = {}
    suc: subprocess.Popen[bytes] | None = None
    try:
        if args.suc_bin is not None:
            suc = start_suc(args.suc_bin.resolve(), kubeconfig, out)
            print(f"system-upgrade-controller {args.suc_bin} started (pid {suc.pid}, log "
                  f"{out / 'system-upgrade-controller.log'})", flush=True)
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), K8S_AUTH_KUBECONFIG=str(kubeconfig),
                   ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
        if args.ansible_bin.resolve() != (ROOT / ".venv" / "bin").resolve():
            # another ansible-core: kubernetes.core from the project venv's `ansible` package
            # (the collection itself is found through ./ansible_collections, ansible.cfg)
            env["ANSIBLE_COLLECTIONS_PATH"] = f"./:{bundled_collections_parent()}"
        overrides = scenario_overrides.overrides_for(args.scenario) \
            if args.scenario_overrides else {}
        if args.scenario_overrides:
            print(scenario_overrides.describe(args.scenario, overrides), flush=True)
        cmd = [str(playbook_bin), args.playbook,
               *(["-e", json.dumps(overrides)] if overrides else []), *args.ansible_args]
        print(f"$ {' '.join(cmd)}   (KUBECONFIG={kubeconfig})", flush=True)
        play = subprocess.Popen(cmd, cwd=ROOT, env=env)
        try:
            rc_play = play.wait()
        finally:
            stop_process(play)
        plan = fetch_plan(kubeconfig)
        if plan is not None:
            (out / "upgradeplan.json").write_text(json.dumps(plan, indent=2))
            restore = fetch_restore_map(kubeconfig, plan["metadata"]["name"])
    finally:
        if suc is not None:
            suc_rc = suc.poll()
            if suc_rc is not None:
                print(f"system-upgrade-controller exited early with {suc_rc}; see "
                      f"{out / 'system-upgrade-controller.log'}", flush=True)
            stop_simulator(suc)
        stop_simulator(proc)
    report: dict[str, Any] = {}
    if (out / "report.json").exists():
        report = json.loads((out / "report.json").read_text())
    print("\n".join(summarise(plan, report, restore)))
    print(f"report: {out / 'report.json'}  plan: {out / 'upgradeplan.json'}")
    ok = (rc_play == 0 and plan is not None
          and plan.get("status", {}).get("currentPhase") == "Succeeded"
          and not report.get("invariant_violations"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
