#!/usr/bin/env python3
"""`make chaos`: kill the orchestrator at random moments and prove the upgrade still ends well.

Each run: start a scenario in ``harvester-sim``, start ``ansible-playbook upgrade.yml``,
SIGKILL it (the whole process group) after a random delay, re-run until a run ends by
itself, then assert: the plan ``Succeeded``; every node was rebooted exactly once; zero
invariant violations (which covers "every VM that ran at the start runs at the end"); no
leftover objects labelled with the plan, no finalizer left on it. The random seed is
printed; ``--seed`` replays.

A scenario whose cluster the pre-flight checks refuse on purpose gets the operator's
documented overrides (``SCENARIO_VARS``): five-node-mixed carries a degraded Longhorn volume
(the node loop's volume-safety wait handles it) and a detached single-replica volume.
``--extra-vars JSON`` adds variables for every scenario. ``--mode milestone`` kills a few
seconds after the plan reaches a random phase or node state instead of after a random delay,
so kills land all along the upgrade whatever its length. The time mode's window (1-15 s by
default) must close before a run ends, or the kill comes after it and tests nothing: it is
sized to a run's length on the development machine (docs/resilience.md).
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from upgrade_on_simulator import fetch_plan, start_simulator, stop_simulator  # noqa: E402

PLAN_LABEL = "management.harvesterhci.io/upgrade-plan"

# Variables an operator would pass for a cluster the pre-flight checks refuse on purpose.
SCENARIO_VARS: dict[str, dict[str, Any]] = {
    "five-node-mixed": {
        "upgrade_skip_checks": ["volumes_healthy"],
        "upgrade_annotations": {
            "management.harvesterhci.io/skip-single-replica-detached-vol": "true"},
    },
}


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


def reached(plan: dict[str, Any] | None) -> set[str]:
    """Progress marks the plan shows: phases entered and ``node:state`` pairs."""
    st = (plan or {}).get("status") or {}
    marks = {p.get("phase", "") for p in st.get("phaseTransitionTimestamps") or []}
    marks.add(st.get("currentPhase") or "")
    for node, v in (st.get("nodeUpgradeStatuses") or {}).items():
        state = (v or {}).get("state") or ""
        if state in NODE_MILESTONES:
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
                   delay: float) -> bool:
    """True once ``mark`` was reached and ``delay`` more seconds passed with the run still
    going (then it is killed); False when the run ended first."""
    while play.poll() is None:
        try:
            if mark in reached(fetch_plan(kubeconfig)):
                time.sleep(delay)
                return play.poll() is None
        except Exception:  # noqa: BLE001 - CRD not there yet, API busy: look again
            pass
        time.sleep(0.2)
    return False


def one_run(scenario: str, speed: float, rng: random.Random, out: Path,
            max_attempts: int, kill_window: tuple[float, float],
            extra_vars: dict[str, Any] | None = None, mode: str = "time",
            max_kills: int = 3) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    proc, kubeconfig = start_simulator(scenario, speed, out, rng.randrange(1 << 30), [])
    result: dict[str, Any] = {"scenario": scenario, "kills": [], "attempts": 0}
    try:
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), K8S_AUTH_KUBECONFIG=str(kubeconfig),
                   ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
        cmd = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "upgrade.yml"]
        evars = {**SCENARIO_VARS.get(scenario, {}), **(extra_vars or {})}
        if evars:
            cmd += ["-e", json.dumps(evars)]
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
                if mark and wait_milestone(play, kubeconfig, mark, delay):
                    os.killpg(play.pid, signal.SIGKILL)
                    play.wait()
                    result["kills"].append(f"{mark}+{delay:.1f}s@{time.monotonic() - t0:.0f}s")
                    continue
                rc = play.wait()
                break
            kill_at = rng.uniform(*kill_window) if may_kill else None
            try:
                rc = play.wait(timeout=kill_at)
                break
            except subprocess.TimeoutExpired:
                os.killpg(play.pid, signal.SIGKILL)
                play.wait()
                result["kills"].append(round(kill_at or 0, 2))
        result["final_rc"] = rc
        plan = fetch_plan(kubeconfig)
        result["phase"] = (plan or {}).get("status", {}).get("currentPhase")
        result["leftovers"] = leftovers(kubeconfig, plan["metadata"]["name"]) if plan else []
        if plan and plan["metadata"].get("finalizers"):   # the cleanup ran: none may be left
            result["leftovers"].append(f"finalizers {plan['metadata']['finalizers']}")
    finally:
        stop_simulator(proc)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() \
        else {}
    reboots = (report.get("node_reboots") or {}).get("per_node", {})
    result["reboots"] = reboots
    result["violations"] = report.get("invariant_violations", [])
    problems = []
    if result["phase"] != "Succeeded":
        problems.append(f"plan phase {result['phase']}")
    if any(n != 1 for n in reboots.values()) or not reboots:
        problems.append(f"reboots per node {reboots}")
    if result["violations"]:
        problems.append(f"{len(result['violations'])} invariant violation(s)")
    if result["leftovers"]:
        problems.append(f"leftovers {result['leftovers']}")
    result["problems"] = problems
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--scenarios", default="three-node,five-node-mixed")
    ap.add_argument("--speed", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-attempts", type=int, default=6)
    ap.add_argument("--max-kills", type=int, default=3, help="kills per run at most")
    ap.add_argument("--kill-min", type=float, default=1.0)
    ap.add_argument("--kill-max", type=float, default=15.0)
    ap.add_argument("--out", default="out/chaos")
    ap.add_argument("--extra-vars", default="{}", help="JSON: variables for every run")
    ap.add_argument("--mode", choices=["time", "milestone"], default="time",
                    help="time: kill after a random delay in [kill-min, kill-max]; milestone: "
                    "kill 0-3 s after the plan reaches a random phase or node state not yet "
                    "reached (covers the whole upgrade, not only its first minute)")
    args = ap.parse_args(argv)
    extra_vars = json.loads(args.extra_vars)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print(f"chaos seed {seed} (replay with --seed {seed})", flush=True)
    rng = random.Random(seed)
    scenarios = args.scenarios.split(",")
    failures = 0
    t0 = time.monotonic()
    for i in range(args.runs):
        sc = scenarios[i % len(scenarios)]
        res = one_run(sc, args.speed, rng, ROOT / args.out / f"run-{i}", args.max_attempts,
                      (args.kill_min, args.kill_max), extra_vars, args.mode, args.max_kills)
        ok = not res["problems"]
        failures += 0 if ok else 1
        print(f"run {i + 1}/{args.runs} {sc}: {'ok' if ok else 'FAIL'} kills={res['kills']} "
              f"attempts={res['attempts']} {'; '.join(res['problems'])}", flush=True)
    print(f"{args.runs - failures}/{args.runs} runs passed in {time.monotonic() - t0:.0f} s "
          f"(seed {seed})")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
