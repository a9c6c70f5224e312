"""``make bench``: the real upgrade-toolkit beside the collection (issue 25, point 4).

When the manager binary the steering repo's tool builds is here
(``$PEERS_CACHE/bin/upgrade-toolkit`` at the pinned commit, as ``make toolkit-peer`` looks for
it), ``run_all.py`` runs it once on the scenario and speed of its three-node run, through
``scripts/toolkit_peer.py --no-collection --no-build`` (the same harness, shims and figures as
``make toolkit-peer``; it never builds), and puts the figures of the two runs side by side:
wall time (plan created -> terminal, the same definition for both), live migrations, VMs shut
down, API requests by the upgrader's own user agent. The collection's figures come from the
bench's own run (its ``report.json`` and ``upgradeplan.json``), not from a second run.
Without the binary, the tool script or the git clones it prints why and skips; results go to
``toolkit_side_by_side`` in the results JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import toolkit_peer  # noqa: E402

# the figures kept in the results JSON (toolkit_peer.report_figures' keys, "by_agent" left out)
KEYS = ("phase", "wall", "simulated_s", "migrations", "vms_shut_down", "vms_running_end",
        "vms_expected", "reboots", "violations", "violations_on_the_spot", "api_upgrader",
        "api_total")


def tool_path() -> Path:
    """The steering repo's ``upgrade-toolkit.sh``, as ``make toolkit-peer`` finds it."""
    p = Path(os.environ.get("UPGRADE_TOOLKIT_SH", "../shared/tools/upgrade-toolkit.sh"))
    return p if p.is_absolute() else (ROOT / p).resolve()


def mirror_root() -> Path:
    return Path(os.environ.get("MIRROR_ROOT", "/work/.mirror"))


def skip_reason() -> str | None:
    """Why the toolkit cannot run beside the bench here, or None when it can."""
    binary = toolkit_peer.toolkit_binary()
    if not binary.exists():
        return f"toolkit binary not found: skipped ({binary})"
    built = toolkit_peer.built_commit(binary)
    if built != toolkit_peer.PINNED_COMMIT:
        return (f"toolkit binary {binary} is {built[:12] or 'of an unknown commit'}, not "
                f"{toolkit_peer.PINNED_COMMIT[:12]}: skipped (make toolkit-peer builds it)")
    try:
        toolkit_peer.Tool(tool_path(), mirror_root(), Path("/nonexistent")).check()
    except SystemExit as exc:
        return f"{exc}: skipped"
    return None


def _pick(fig: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if fig is None else {k: fig.get(k) for k in KEYS}


def compare(run: dict[str, Any] | None, out: Path, timeout_s: float | None = None,
            ) -> dict[str, Any]:
    """Run the toolkit on ``run``'s scenario and speed (``run`` is a bench run summary:
    ``scenario``, ``speed``, ``out``, ``wall_s``) and return both sides' figures, or
    ``{"skipped": why}``."""
    why = skip_reason()
    if why is None and run is None:
        why = "no three-node run in this bench: skipped"
    if why is not None:
        return {"skipped": why}
    assert run is not None
    out.mkdir(parents=True, exist_ok=True)
    figures = out / "figures.json"
    figures.unlink(missing_ok=True)
    timeout = timeout_s if timeout_s is not None else max(900.0, 10 * float(run["wall_s"]))
    cmd = [sys.executable, str(ROOT / "scripts" / "toolkit_peer.py"),
           "--scenario", str(run["scenario"]), "--speed", str(run["speed"]),
           "--no-collection", "--no-build", "--timeout", str(timeout), "--out", str(out),
           "--figures-json", str(figures), "--tool", str(tool_path()),
           "--mirror-root", str(mirror_root())]
    log = out / "toolkit-peer.log"
    with open(log, "wb") as f:
        rc = subprocess.call(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    if not figures.exists():
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        return {"error": f"toolkit_peer.py exited {rc} without figures: {tail[0]}",
                "log": str(log)}
    tk = json.loads(figures.read_text())["toolkit"]
    ours = toolkit_peer.collection_figures(Path(run["out"]))
    return {"scenario": run["scenario"], "speed": run["speed"],
            "pinned_commit": toolkit_peer.PINNED_COMMIT, "toolkit": _pick(tk),
            "collection": {**(_pick(ours) or {}), "playbook_wall_s": run.get("wall_s")},
            "toolkit_exit": rc, "log": str(log)}


def lines(result: dict[str, Any]) -> list[str]:
    """What ``make bench`` prints for ``compare``'s result."""
    if "skipped" in result:
        return [f"toolkit side by side: {result['skipped']}"]
    if "error" in result:
        return [f"toolkit side by side: {result['error']} (log {result['log']})"]
    head = (f"toolkit side by side: upgrade-toolkit {result['pinned_commit'][:12]} (real) and "
            f"the collection on {result['scenario']}, speed {result['speed']:g}")
    return [head, *toolkit_peer.side_by_side(result["toolkit"], result["collection"]),
            f"(API requests by the upgrader: user agent {toolkit_peer.TOOLKIT_AGENT} / "
            f"{toolkit_peer.COLLECTION_AGENT}; toolkit log {result['log']})"]


def side_by_side(run: dict[str, Any] | None, out: Path) -> dict[str, Any]:
    """``compare`` then print ``lines``: the one call ``run_all.py`` makes."""
    print("== toolkit side by side (toolkit_side.py)", file=sys.stderr, flush=True)
    result = compare(run, out)
    print("\n".join(lines(result)), flush=True)
    return result
