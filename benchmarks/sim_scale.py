"""Boot a big scenario in-process, let it idle, print boot time and the simulator's RSS.

    .venv/bin/python benchmarks/sim_scale.py [--scenario hundred-node] [--speed 60] [--idle 5]

Prints one line per figure and, with ``--json``, a JSON object (``boot_s``, ``idle_s``,
``rss_mb``, ``peak_rss_mb``, ``objects``, ``controller_errors``) for ``make bench``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulator"))

import psutil  # noqa: E402

from harvester_sim.scenarios import loader  # noqa: E402
from harvester_sim.world import World  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="hundred-node")
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--idle", type=float, default=5.0, help="wall seconds to idle after boot")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    t0 = time.monotonic()
    scn = loader.load(args.scenario)
    t_load = time.monotonic() - t0
    world = World(scn, speed=args.speed)
    world.start()
    boot = time.monotonic() - t0
    time.sleep(args.idle)
    rss = proc.memory_info().rss
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    objects = sum(len(b) for b in world.store._data.values())
    errors = len(world.runtime.errors)
    world.stop()
    out = {"scenario": args.scenario, "speed": args.speed, "nodes": len(scn["nodes"]),
           "vms": len(scn["vms"]), "load_s": round(t_load, 2), "boot_s": round(boot, 2),
           "idle_s": args.idle, "rss_mb": round(rss / 2**20, 1),
           "rss_growth_mb": round((rss - rss0) / 2**20, 1),
           "peak_rss_mb": round(peak / 2**20, 1), "objects": objects,
           "controller_errors": errors}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"scenario {out['scenario']}: {out['nodes']} nodes, {out['vms']} VMs, "
              f"speed {out['speed']}")
        print(f"  load + validate   {out['load_s']:8.2f} s")
        print(f"  boot (populate + controllers) {out['boot_s']:8.2f} s")
        print(f"  RSS after {args.idle:g} s idle  {out['rss_mb']:8.1f} MB "
              f"(peak {out['peak_rss_mb']} MB)")
        print(f"  objects in store  {out['objects']:8d}")
        print(f"  controller errors {errors:8d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
