"""``harvester-sim``: serve a simulated Harvester cluster, or print a run report.

``harvester-sim serve --scenario NAME|FILE --kubeconfig PATH [--port N] [--speed X]
[--report FILE] [--seed N] [--sa-token NS/NAME[=PATH]]...`` builds the world, starts the API
server on 127.0.0.1, writes the kubeconfig only once the server answers, runs until
SIGTERM/SIGINT, then writes the JSON report, prints how long the simulated clock was held
(the runtime stalled; ``harvester_sim/clock.py``) and exits 0. ``--sa-token`` creates the
ServiceAccount when missing and writes a kubeconfig with a bound token for it (default path:
``<kubeconfig>-<ns>-<name>``); what it may do is up to the cluster's RBAC objects.
``harvester-sim report FILE`` renders a report written by ``serve``.
``harvester-sim export --output FILE [--kubeconfig PATH] [--context NAME] [--name NAME]``
reads a live cluster (get/list only) and writes it as a scenario (``harvester_sim.export``);
exit 2 and no file when the cluster cannot be read.
"""

from __future__ import annotations

import argparse
import errno
import gc
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from .world import CONTROLLER_NAMES, _optional, check_without


def _report(world: Any, server: Any) -> dict[str, Any]:
    mod = _optional("harvester_sim.report")
    base: dict[str, Any] = {}
    if mod is not None and hasattr(mod, "build"):
        try:
            base = dict(mod.build(world))
        except Exception as exc:  # noqa: BLE001
            logging.getLogger("harvester_sim.cli").exception("report.build failed")
            base = {"report_error": str(exc)}
    base.setdefault("api_requests", server.stats())
    base["controllers_left_out"] = list(world.without)
    return base


# Young-generation size of the cyclic garbage collector in ``serve`` (Python's default: 700),
# and how many young and middle collections come before an old-generation one is considered.
GC_THRESHOLDS = (50_000, 10, 100)


def _tune_gc() -> None:
    """Keep the cyclic garbage collector off the loaded cluster.

    The cluster is a heap of millions of dicts and lists (3,000 VMs with their pods,
    volumes and replicas, and the store's event history), with almost no reference cycles:
    API objects are JSON trees, freed by reference counting. With Python's defaults a full
    collection walked all of them every 10-15 s at hundred-node (about 1 s each, collecting
    a few dozen objects), stalling every thread; the runtime's clock was held for each one
    (docs/performance.md, "Simulator CPU at hundred-node"). Once the scenario is loaded its
    objects are frozen (never scanned again; freed as usual when their last reference goes),
    and the thresholds make young collections rarer and full ones exceptional. Only the
    process's own memory management changes: nothing the API or a controller shows."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _serve(args: argparse.Namespace) -> int:
    from .api.server import ApiServer
    from .testing import build_world

    try:
        without = check_without(n for v in args.without or [] for n in v.split(","))
    except ValueError as exc:
        print(f"harvester-sim: --without: {exc}", file=sys.stderr)
        return 2
    try:
        world = build_world(args.scenario, speed=args.speed, seed=args.seed, without=without)
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"harvester-sim: bad scenario {args.scenario!r}: {exc}", file=sys.stderr)
        return 2
    try:
        server = ApiServer(world, port=args.port).start()
    except OSError as exc:
        world.stop()
        if exc.errno == errno.EADDRINUSE:
            print(f"harvester-sim: port {args.port} on 127.0.0.1 is already in use",
                  file=sys.stderr)
        else:
            print(f"harvester-sim: cannot listen on 127.0.0.1:{args.port}: {exc}",
                  file=sys.stderr)
        return 3
    done = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        _wait_ready(server)
        _tune_gc()
        for spec in args.sa_token or []:
            sa, _, where = spec.partition("=")
            ns, _, name = sa.partition("/")
            path = Path(where) if where else args.kubeconfig.with_name(
                f"{args.kubeconfig.name}-{ns}-{name}")
            server.write_service_account_kubeconfig(path, ns, name)
            print(f"harvester-sim: ServiceAccount {ns}/{name}: kubeconfig {path}",
                  file=sys.stderr, flush=True)
        server.write_kubeconfig(args.kubeconfig)
        print(f"harvester-sim: serving {server.url} (kubeconfig {args.kubeconfig})",
              file=sys.stderr, flush=True)
        while not done.wait(0.5):
            pass
    finally:
        report = _report(world, server)
        server.stop()
        world.stop()
        if "clock_held_s" in report:
            print(f"harvester-sim: stopped after {report.get('simulated_duration_s')} "
                  f"simulated s in {report.get('wall_duration_s')} wall s; clock held "
                  f"{report['clock_held_s']} s ({report.get('clock_holds')} holds, longest "
                  f"{report.get('clock_longest_hold_s')} s)", file=sys.stderr, flush=True)
        if args.report:
            Path(args.report).parent.mkdir(parents=True, exist_ok=True)
            Path(args.report).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return 0


def _wait_ready(server: Any) -> None:
    """Answer one real HTTPS request before announcing the server."""
    import ssl
    import tempfile
    import urllib.request

    with tempfile.NamedTemporaryFile("wb", suffix=".crt") as ca:
        ca.write(server.ca_pem)
        ca.flush()
        ctx = ssl.create_default_context(cafile=ca.name)
        req = urllib.request.Request(server.url + "/version",
                                     headers={"Authorization": f"Bearer {server.token}"})
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            resp.read()


def _report_cmd(args: argparse.Namespace) -> int:
    mod = _optional("harvester_sim.report")
    if mod is not None and hasattr(mod, "main"):
        extra = [*(["--plot", str(args.plot)] if getattr(args, "plot", None) else []),
                 *(["--timeline", str(args.timeline)] if getattr(args, "timeline", None)
                   is not None else []),
                 *(["--json"] if getattr(args, "json", False) else [])]
        return int(mod.main([args.file, *extra]) or 0)
    try:
        data = json.loads(Path(args.file).read_text())
    except (OSError, ValueError) as exc:
        print(f"harvester-sim: cannot read report {args.file}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(data, indent=2, sort_keys=True))
    return 0


def _export(args: argparse.Namespace) -> int:
    from . import export

    try:
        scn = export.export(args.kubeconfig, args.context, args.name)
        path = export.write(scn, args.output)
    except export.ExportError as exc:
        one_line = " ".join(str(exc).split())
        print(f"harvester-sim export: {one_line}; nothing written", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"harvester-sim export: cannot write {args.output}: {exc}", file=sys.stderr)
        return 2
    n_vms = len(scn.get("vms") or [])
    print(f"harvester-sim export: {path}: {len(scn['nodes'])} nodes, {n_vms} VMs, "
          f"{len(scn.get('volumes') or [])} standalone volumes, "
          f"{len(scn.get('workloads') or [])} workloads, Harvester "
          f"{scn['harvester']['installed']}; {len(scn.get('notes') or [])} notes in the file",
          file=sys.stderr)
    return 0


def _sa_spec(value: str) -> str:
    sa = value.partition("=")[0]
    ns, _, name = sa.partition("/")
    if not ns or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{value!r}: expected NAMESPACE/NAME[=PATH]")
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="harvester-sim",
                                description="A simulated Harvester cluster behind a real "
                                            "Kubernetes API.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve a scenario until SIGTERM/SIGINT")
    s.add_argument("--scenario", required=True, help="built-in name, YAML file, or empty:N")
    s.add_argument("--kubeconfig", required=True, type=Path,
                   help="where to write the kubeconfig once the server is ready")
    s.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free)")
    s.add_argument("--speed", type=float, default=None, help="simulated seconds per second")
    s.add_argument("--report", type=Path, default=None, help="JSON report written at exit")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--log-level", default="WARNING")
    s.add_argument("--without", action="append", metavar="NAME",
                   help="leave this simulated controller out (repeatable, or comma-separated) "
                        "so that a real one run beside the simulator does its work: "
                        + ", ".join(CONTROLLER_NAMES))
    s.add_argument("--sa-token", action="append", metavar="NS/NAME[=PATH]",
                   type=_sa_spec, help="also write a kubeconfig with a token for this "
                   "ServiceAccount (created when missing); repeatable")
    r = sub.add_parser("report", help="render a report written by serve --report")
    r.add_argument("file")
    r.add_argument("--plot", metavar="PNG", help="also draw the timeline (matplotlib)")
    r.add_argument("--timeline", type=int, default=None, metavar="N",
                   help="show the last N timeline events (0: none)")
    r.add_argument("--json", action="store_true", help="print the JSON instead")
    e = sub.add_parser("export", help="write a live cluster as a scenario file (read-only)")
    e.add_argument("--output", "-o", required=True, type=Path, help="scenario file to write")
    e.add_argument("--kubeconfig", default=None,
                   help="kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config)")
    e.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    e.add_argument("--name", default="exported", help="the scenario's name")
    args = p.parse_args(argv)
    if args.cmd == "export":
        return _export(args)
    if args.cmd == "serve":
        logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return _serve(args)
    return _report_cmd(args)


if __name__ == "__main__":
    sys.exit(main())
