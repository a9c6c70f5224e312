#!/usr/bin/env python3
"""`make chaos`: kill the orchestrator at random moments and prove the upgrade still ends well.

Each run: start a scenario in ``harvester-sim``, start ``ansible-playbook upgrade.yml``,
SIGKILL it (the whole process group) after a random delay, re-run until a run ends by
itself, then assert: the plan ``Succeeded``; every node was rebooted exactly once; zero
invariant violations (which covers "every VM that ran at the start runs at the end"); no
leftover objects labelled with the plan, no finalizer left on it. The random seed is
printed; ``--seed`` replays.

``--scenario NAME[,NAME]`` (``make chaos CHAOS_SCENARIO=...``; runs alternate between them)
picks the scenarios. Each has a profile (``PROFILES``, docs/resilience.md): its default speed,
the length of one uninterrupted run at that speed on the development machine, and its default
kill mode. From the profile come, unless given: ``--speed``; the time mode's window (1 s to
three quarters of the expected run length at the run's speed, so that the kill lands before
the run ends); the per-run timeout (all attempts together: ten times the expected length,
at least 600 s; a run past it is killed and fails as "timed out"); and ``--mode auto``'s
choice: ``time`` for the small scenarios, ``milestone`` for hundred-node, whose kills should
land all along a run of minutes, not only in its first part.

A scenario whose cluster the pre-flight checks refuse on purpose gets the operator's
documented overrides (``scripts/scenario_overrides.py``, printed at the start):
five-node-mixed carries a degraded Longhorn volume (the node loop's volume-safety wait
handles it) and a detached single-replica volume. ``--extra-vars JSON`` adds variables for
every scenario. ``--mode milestone`` kills a few seconds after the plan reaches a random
phase or node state instead of after a random delay, so kills land all along the upgrade
whatever its length. Before the first attempt the run waits for the scenario's VMs to run
(as ``make bench`` does), so that the upgrade starts from a settled cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import scenario_overrides  # noqa: E402
from upgrade_on_simulator import (  # noqa: E402
    fetch_plan,
    start_simulator,
    stop_children_on_signals,
    stop_simulator,
    wait_vms_running,
)

PLAN_LABEL = "management.harvesterhci.io/upgrade-plan"


@dataclass(frozen=True)
class Profile:
    """How to put one scenario through chaos (docs/resilience.md, "Chaos at scale")."""

    speed: float        # default --speed (hundred-node: the bench's --hundred-speed)
    run_s: float        # wall s of one uninterrupted run at ``speed`` (development machine)
    mode: str           # kill mode of --mode auto

    def expected_s(self, speed: float) -> float:
        """The expected run length at ``speed``: simulated work scales with 1/speed (the
        collection's own time does not, so this errs long at high speed)."""
        return self.run_s * self.speed / speed

    def kill_window(self, speed: float, kill_min: float) -> tuple[float, float]:
        """Time mode: from ``kill_min`` to three quarters of the expected length."""
        return kill_min, max(kill_min, round(0.75 * self.expected_s(speed), 1))

    def run_timeout(self, speed: float) -> float:
        """Wall s for a whole run (every attempt): a hang detector, not a speed check."""
        return max(600.0, 10 * self.expected_s(speed))


# three-node and five-node-mixed: ~20 s at speed 100 (the 1-15 s window of docs/resilience.md);
# twenty-node ~250 s at speed 60 and hundred-node ~515 s at speed 300, the bench's speeds
# (benchmarks/results/20261129T051541Z.json: each node waits for the previous node's Longhorn
# rebuilds, as Harvester's pre-drain script does).
PROFILES: dict[str, Profile] = {
    "three-node": Profile(speed=100.0, run_s=20.0, mode="time"),
    "five-node-mixed": Profile(speed=100.0, run_s=20.0, mode="time"),
    "five-node-mixed-rwo-off": Profile(speed=100.0, run_s=20.0, mode="time"),
    "twenty-node": Profile(speed=60.0, run_s=250.0, mode="time"),
    "hundred-node": Profile(speed=300.0, run_s=515.0, mode="milestone"),
}
# any other scenario (a file, a fault variant): a small cluster's
DEFAULT_PROFILE = Profile(speed=100.0, run_s=30.0, mode="time")


def profile(scenario: str) -> Profile:
    """The scenario's profile: its own, else that of the scenario it extends, else the
    default."""
    return next((PROFILES[n] for n in scenario_overrides.lineage(scenario) if n in PROFILES),
                DEFAULT_PROFILE)


def leftovers(kubeconfig: Path, plan: str) -> list[str]:
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))
    sel = f"{PLAN_LABEL}={plan}"
    found = []
    apps = client.AppsV1Api(api)
    for d in apps.list_deployment_for_all_namespaces(label_selector=sel).items:
        found.append(f"deployment {d.metadata.namespace}/{d.metadata.name}")
    for s in client.CoreV1Api(api).list_service_for_all_namespaces(label_selector=sel).items:
        found.append(f"service {s.metadata.namespace}/{s.metadata.name}")
    co = client.CustomObjectsApi(api)
    for p in co.list_cluster_custom_object("upgrade.cattle.io", "v1", "plans",
                                           label_selector=sel).get("items", []):
        found.append(f"plan {p['metadata'].get('namespace')}/{p['metadata']['name']}")
    return found


PHASE_MILESTONES = ("ISODownloading", "RepoCreating", "MetadataPopulating", "ImagePreloading",
                    "ClusterUpgrading", "NodeUpgrading", "NodeUpgraded", "CleaningUp")
NODE_MILESTONES = ("PreDraining", "PreDrained", "PostDraining", "WaitingReboot", "PostDrained")
# node states after PostDrained (the image cleanup): every node milestone is behind them, also
# when a slower poll (a big cluster's) never saw PostDrained itself
AFTER_NODE_MILESTONES = ("ImageCleaning", "ImageCleaned", "ImageCleanFailed")


def reached(plan: dict[str, Any] | None) -> set[str]:
    """Progress marks the plan shows: phases entered and ``node:state`` pairs."""
    st = (plan or {}).get("status") or {}
    marks = {p.get("phase", "") for p in st.get("phaseTransitionTimestamps") or []}
    marks.add(st.get("currentPhase") or "")
    for node, v in (st.get("nodeUpgradeStatuses") or {}).items():
        state = (v or {}).get("state") or ""
        if state in AFTER_NODE_MILESTONES:
            marks.update(f"{node}:{s}" for s in NODE_MILESTONES)
        elif state in NODE_MILESTONES:
            marks.update(f"{node}:{s}" for s in NODE_MILESTONES[:NODE_MILESTONES.index(state) + 1])
    return marks


def pick_milestone(kubeconfig: Path, rng: random.Random) -> str | None:
    """A progress mark the plan has not reached yet (random), so that kills land all along
    the upgrade, not only in its first minute."""
    from kubernetes import client, config
    api = config.new_client_from_config(str(kubeconfig))
    nodes = [n.metadata.name for n in client.CoreV1Api(api).list_node().items]
    done = reached(fetch_plan(kubeconfig))
    todo = [m for m in (*PHASE_MILESTONES, *(f"{n}:{s}" for n in nodes for s in NODE_MILESTONES))
            if m not in done]
    return rng.choice(todo) if todo else None


def wait_milestone(play: subprocess.Popen[bytes], kubeconfig: Path, mark: str,
                   delay: float, deadline: float = float("inf"), poll: float = 0.2) -> str:
    """``kill`` once ``mark`` was reached and ``delay`` more seconds passed with the run still
    going; ``ended`` when the run ended first; ``timeout`` at ``deadline`` (monotonic)."""
    while play.poll() is None:
        if time.monotonic() >= deadline:
            return "timeout"
        try:
            if mark in reached(fetch_plan(kubeconfig)):
                time.sleep(delay)
                return "kill" if play.poll() is None else "ended"
        except Exception:  # noqa: BLE001 - CRD not there yet, API busy: look again
            pass
        time.sleep(poll)
    return "ended"


def _kill(play: subprocess.Popen[bytes]) -> None:
    os.killpg(play.pid, signal.SIGKILL)
    play.wait()


def one_run(scenario: str, speed: float, rng: random.Random, out: Path,
            max_attempts: int, kill_window: tuple[float, float],
            extra_vars: dict[str, Any] | None = None, mode: str = "time",
            max_kills: int = 3, run_timeout: float = 3600.0) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    proc, kubeconfig = start_simulator(scenario, speed, out, rng.randrange(1 << 30), [])
    result: dict[str, Any] = {"scenario": scenario, "kills": [], "attempts": 0,
                              "timed_out": False}
    overrides = scenario_overrides.overrides_for(scenario)
    result["overrides"] = overrides
    play: subprocess.Popen[bytes] | None = None
    try:
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), K8S_AUTH_KUBECONFIG=str(kubeconfig),
                   ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
        cmd = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "upgrade.yml"]
        evars = {**overrides, **(extra_vars or {})}
        if evars:
            cmd += ["-e", json.dumps(evars)]
        t_start = time.monotonic()
        deadline = t_start + run_timeout
        wait_vms_running(kubeconfig, min(600.0, run_timeout / 2))
        poll = 0.2 if run_timeout <= 1200 else 1.0   # a big cluster's plan: read less often
        rc = None
        for attempt in range(max_attempts):
            result["attempts"] = attempt + 1
            log = open(out / f"attempt-{attempt}.log", "wb")  # noqa: SIM115
            play = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            may_kill = attempt < max_attempts - 1 and len(result["kills"]) < max_kills
            if mode == "milestone" and may_kill:
                t0 = time.monotonic()
                mark = pick_milestone(kubeconfig, rng)
                delay = rng.uniform(0.0, 3.0)
                got = wait_milestone(play, kubeconfig, mark, delay, deadline, poll) if mark \
                    else "ended"
                if got == "kill":
                    _kill(play)
                    result["kills"].append(f"{mark}+{delay:.1f}s@{time.monotonic() - t0:.0f}s")
                    continue
                kill_at = None
            else:
                kill_at = rng.uniform(*kill_window) if may_kill else None
            left = deadline - time.monotonic()
            try:
                rc = play.wait(timeout=max(0.0, min(left, kill_at if kill_at is not None
                                                     else left)))
                break
            except subprocess.TimeoutExpired:
                _kill(play)
                if kill_at is None or kill_at >= left:
                    result["timed_out"] = True
                    break
                result["kills"].append(round(kill_at, 2))
        result["final_rc"] = rc
        result["run_s"] = round(time.monotonic() - t_start, 1)
        plan = fetch_plan(kubeconfig)
        result["phase"] = (plan or {}).get("status", {}).get("currentPhase")
        result["leftovers"] = leftovers(kubeconfig, plan["metadata"]["name"]) if plan else []
        if plan and plan["metadata"].get("finalizers"):   # the cleanup ran: none may be left
            result["leftovers"].append(f"finalizers {plan['metadata']['finalizers']}")
    finally:
        if play is not None and play.poll() is None:   # interrupted (SIGTERM/SIGINT)
            _kill(play)
        stop_simulator(proc)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() \
        else {}
    reboots = (report.get("node_reboots") or {}).get("per_node", {})
    result["reboots"] = reboots
    result["violations"] = report.get("invariant_violations", [])
    result["problems"] = problems(result)
    return result


def problems(result: dict[str, Any]) -> list[str]:
    """What makes a run fail: not Succeeded, a node not rebooted exactly once, an invariant
    violation, a leftover, the run's timeout."""
    out = []
    if result.get("timed_out"):
        out.append(f"timed out after {result.get('run_s', 0):.0f} s")
    if result.get("phase") != "Succeeded":
        out.append(f"plan phase {result.get('phase')}")
    reboots = result.get("reboots") or {}
    if any(n != 1 for n in reboots.values()) or not reboots:
        out.append(f"reboots per node {reboots}")
    if result.get("violations"):
        out.append(f"{len(result['violations'])} invariant violation(s)")
    if result.get("leftovers"):
        out.append(f"leftovers {result['leftovers']}")
    return out


def plan_runs(scenarios: list[str], speed: float | None, mode: str, kill_min: float,
              kill_max: float | None, run_timeout: float | None) -> list[dict[str, Any]]:
    """Per scenario: the speed, kill mode, time-mode window and run timeout it runs with (the
    options given, else its profile's)."""
    out = []
    for sc in scenarios:
        prof = profile(sc)
        sp = speed if speed is not None else prof.speed
        window = prof.kill_window(sp, kill_min)
        if kill_max is not None:
            window = (kill_min, kill_max)
        out.append({"scenario": sc, "speed": sp,
                    "mode": prof.mode if mode == "auto" else mode, "kill_window": window,
                    "run_timeout": run_timeout if run_timeout is not None
                    else prof.run_timeout(sp)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--scenario", "--scenarios", dest="scenarios",
                    default="three-node,five-node-mixed", metavar="NAME[,NAME]",
                    help="scenarios (built-in names or files), runs alternate between them")
    ap.add_argument("--speed", type=float, default=None,
                    help="simulator speed (default: the scenario's profile: 100, hundred-node 300)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-attempts", type=int, default=6)
    ap.add_argument("--max-kills", type=int, default=3, help="kills per run at most")
    ap.add_argument("--kill-min", type=float, default=1.0)
    ap.add_argument("--kill-max", type=float, default=None,
                    help="time mode's window end (default: 3/4 of the scenario's expected run "
                    "length at its speed: 15 s for three-node at 100)")
    ap.add_argument("--run-timeout", type=float, default=None,
                    help="wall s for one run, all attempts (default: 10x the scenario's "
                    "expected run length, at least 600)")
    ap.add_argument("--out", default="out/chaos")
    ap.add_argument("--extra-vars", default="{}", help="JSON: variables for every run")
    ap.add_argument("--mode", choices=["auto", "time", "milestone"], default="auto",
                    help="time: kill after a random delay in [kill-min, kill-max]; milestone: "
                    "kill 0-3 s after the plan reaches a random phase or node state not yet "
                    "reached (covers the whole upgrade, not only its first minute); auto: "
                    "the scenario's profile (time, hundred-node milestone)")
    args = ap.parse_args(argv)
    extra_vars = json.loads(args.extra_vars)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if not scenarios:
        ap.error("--scenario: no scenario named")
    plans = plan_runs(scenarios, args.speed, args.mode, args.kill_min, args.kill_max,
                      args.run_timeout)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print(f"chaos seed {seed} (replay with --seed {seed})", flush=True)
    for pl in plans:
        sc = pl["scenario"]
        window = (f", kills after {pl['kill_window'][0]:g}-{pl['kill_window'][1]:g} s"
                  if pl["mode"] == "time" else "")
        print(f"{sc}: speed {pl['speed']:g}, mode {pl['mode']}{window}, run timeout "
              f"{pl['run_timeout']:.0f} s; {scenario_overrides.describe(sc)}", flush=True)
    rng = random.Random(seed)
    failures = 0
    t0 = time.monotonic()
    with stop_children_on_signals():
        for i in range(args.runs):
            pl = plans[i % len(plans)]
            sc = pl["scenario"]
            res = one_run(sc, pl["speed"], rng, ROOT / args.out / f"run-{i}", args.max_attempts,
                          pl["kill_window"], extra_vars, pl["mode"], args.max_kills,
                          pl["run_timeout"])
            ok = not res["problems"]
            failures += 0 if ok else 1
            print(f"run {i + 1}/{args.runs} {sc}: {'ok' if ok else 'FAIL'} kills={res['kills']} "
                  f"attempts={res['attempts']} {res['run_s']:.0f} s "
                  f"{'; '.join(res['problems'])}", flush=True)
    print(f"{args.runs - failures}/{args.runs} runs passed in {time.monotonic() - t0:.0f} s "
          f"(seed {seed})")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
