"""Boot a scenario in-process, let it idle, print boot time and the simulator's RSS.

    .venv/bin/python benchmarks/sim_scale.py                  # the two targets below
    .venv/bin/python benchmarks/sim_scale.py --scenario hundred-node [--speed 60] [--idle 5]

Without ``--scenario`` it checks the simulator's two scale targets, each in a fresh
process: ``three-node`` at speed 1000 must boot in < 2 s (``testing.running`` returned, the
HTTPS API answers and every node is Ready) and ``hundred-node`` must load and idle with
< 1.5 GB RSS; it prints each figure with its target (``ok`` / ``MISS``). Nothing asserts:
benchmarks measure, tests do not time.

With ``--scenario`` it prints one line per figure and, with ``--json``, a JSON object
(``load_s``, ``boot_s`` = World + API server started, ``ready_s`` = first HTTPS answer with
every node Ready, ``ready_cpu_s`` = the process's CPU seconds until then (what the boot
costs whatever else the machine runs; after imports), ``idle_s``, ``rss_mb``,
``peak_rss_mb``, ``objects``, ``controller_errors``) for ``make bench``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import resource
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulator"))

import psutil  # noqa: E402

from harvester_sim import testing  # noqa: E402
from harvester_sim.scenarios import loader  # noqa: E402

# the simulator's scale targets: (scenario, speed, idle s, figure, limit, unit)
TARGETS = [("three-node", 1000.0, 1.0, "ready_s", 2.0, "s"),
           ("hundred-node", 60.0, 5.0, "rss_mb", 1536.0, "MB")]


def _nodes_ready(sim: testing.Running, want: int) -> bool:
    """GET /api/v1/nodes over HTTPS: ``want`` nodes, all Ready."""
    with tempfile.NamedTemporaryFile("wb", suffix=".crt") as f:
        f.write(sim.server.ca_pem)
        f.flush()
        ctx = ssl.create_default_context(cafile=f.name)
    conn = http.client.HTTPSConnection("127.0.0.1", sim.server.port, context=ctx, timeout=30)
    try:
        conn.request("GET", "/api/v1/nodes", headers={"Authorization": f"Bearer {sim.token}"})
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    if resp.status != 200:
        return False
    items = json.loads(body)["items"]
    return len(items) == want and all(
        any(c["type"] == "Ready" and c["status"] == "True"
            for c in (n.get("status") or {}).get("conditions") or []) for n in items)


def measure(scenario: str, speed: float, idle: float) -> dict[str, Any]:
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    cpu0 = sum(proc.cpu_times()[:2])
    t0 = time.monotonic()
    scn = loader.load(scenario)
    t_load = time.monotonic() - t0
    with testing.running(scn, speed=speed) as sim:
        boot = time.monotonic() - t0
        while not _nodes_ready(sim, len(scn["nodes"])):
            time.sleep(0.01)
        ready = time.monotonic() - t0
        ready_cpu = sum(proc.cpu_times()[:2]) - cpu0
        time.sleep(idle)
        rss = proc.memory_info().rss
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
        world = sim.world
        objects = sum(len(b) for b in world.store._data.values())
        errors = len(world.runtime.errors)
    return {"scenario": scenario, "speed": speed, "nodes": len(scn["nodes"]),
            "vms": len(scn["vms"]), "load_s": round(t_load, 2), "boot_s": round(boot, 2),
            "ready_s": round(ready, 2), "ready_cpu_s": round(ready_cpu, 2), "idle_s": idle,
            "rss_mb": round(rss / 2**20, 1),
            "rss_growth_mb": round((rss - rss0) / 2**20, 1),
            "peak_rss_mb": round(peak / 2**20, 1), "objects": objects,
            "controller_errors": errors}


def issue_figures() -> int:
    """Each target in a fresh process (RSS is per process); prints figure vs target."""
    for scenario, speed, idle, key, limit, unit in TARGETS:
        out = subprocess.run([sys.executable, __file__, "--scenario", scenario, "--speed",
                              str(speed), "--idle", str(idle), "--json"],
                             capture_output=True, text=True, check=False)
        try:
            res = json.loads(out.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            print(f"{scenario}: failed\n{out.stderr[-2000:]}")
            continue
        what = "boot to API + all nodes Ready" if key == "ready_s" else \
            f"RSS after {idle:g} s idle"
        verdict = "ok" if res[key] < limit else "MISS"
        print(f"{scenario} (speed {speed:g}, {res['nodes']} nodes, {res['vms']} VMs): "
              f"{what} {res[key]:.2f} {unit} (target < {limit:g} {unit}: {verdict}); "
              f"load {res['load_s']:.2f} s, running() {res['boot_s']:.2f} s, "
              f"ready {res['ready_s']:.2f} s ({res['ready_cpu_s']:.2f} CPU-s), "
              f"RSS {res['rss_mb']:.0f} MB "
              f"(peak {res['peak_rss_mb']:.0f} MB), {res['objects']} objects, "
              f"controller errors {res['controller_errors']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--scenario", help="one scenario (default: the issue's figures)")
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--idle", type=float, default=5.0, help="wall seconds to idle after boot")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.scenario is None:
        return issue_figures()
    out = measure(args.scenario, args.speed, args.idle)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"scenario {out['scenario']}: {out['nodes']} nodes, {out['vms']} VMs, "
              f"speed {out['speed']}")
        print(f"  load + validate   {out['load_s']:8.2f} s")
        print(f"  boot (populate + controllers + API server) {out['boot_s']:8.2f} s")
        print(f"  API answers, all nodes Ready {out['ready_s']:8.2f} s "
              f"({out['ready_cpu_s']:.2f} CPU-s)")
        print(f"  RSS after {args.idle:g} s idle  {out['rss_mb']:8.1f} MB "
              f"(peak {out['peak_rss_mb']} MB)")
        print(f"  objects in store  {out['objects']:8d}")
        print(f"  controller errors {out['controller_errors']:8d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
