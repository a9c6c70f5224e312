"""The run report: what happened in a simulated cluster, as JSON for tools and text for people.

``build(world) -> dict`` gathers the invariant verdicts, migrations, reboots, API traffic,
the timeline and the critical path (the limit: the longest chain of unavoidable simulated
work of an upgrade, parallel work counted once, from the timeline's ``span`` records);
``main(argv)`` implements
``harvester-sim report FILE [--plot PNG]``. Keys and span names are documented in
``docs/scenarios.md`` ("Report").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPORT_VERSION = 1

# Span names (``timeline.record("span", what=..., start=..., end=..., node=...)``).
SPAN_ISO = ("iso_download",)
SPAN_PRELOAD = ("image_preload", "image_pull")
SPAN_CLUSTER = ("cluster_upgrade",)
SPAN_NODE = ("migration", "vm_shutdown", "rke2_restart", "os_install", "reboot")
SPAN_CLEANUP = ("image_cleanup",)


# ===================================================================================== build
def build(world: Any) -> dict[str, Any]:
    """The report of ``world`` as a JSON-serializable dict."""
    timeline = world.timeline.snapshot()
    mon = _monitor(world)
    violations: list[dict[str, Any]] = []
    invariants: dict[str, Any] = {}
    if mon is not None:
        violations = list(mon.violations) + list(mon.check_end())
        invariants = mon.summary()
    scn = getattr(world, "scenario", None) or {}
    cp = critical_path(timeline, world_limits(world), world_replicas(world))
    faults = getattr(world, "faults", None)
    return {
        "report_version": REPORT_VERSION,
        "scenario": scn.get("name", ""),
        "speed": world.clock.speed,
        "seed": scn.get("seed"),
        "nodes": len(scn.get("nodes") or []),
        "vms": len(scn.get("vms") or []),
        "simulated_duration_s": round(world.clock.now(), 3),
        "wall_duration_s": round(world.clock.wall_elapsed(), 3),
        **clock_holds(world.clock),
        "invariant_violations": _jsonable(violations),
        "invariants": _jsonable(invariants),
        "vm_migrations": vm_migrations(world, timeline, mon),
        "node_reboots": node_reboots(timeline, mon),
        "api_requests": api_requests(world.extras.get("api_stats")),
        "critical_path_s": cp["total_s"],
        "critical_path_serial_sum_s": cp["serial_sum_s"],
        "critical_path": cp,
        "faults_fired": _jsonable(list(getattr(faults, "fired", []) or [])),
        "controller_errors": len(getattr(getattr(world, "runtime", None), "errors", []) or []),
        "unmodelled_programs": unmodelled_programs(world),
        "timeline": _jsonable(timeline),
    }


def clock_holds(clock: Any) -> dict[str, Any]:
    """``clock_held_s`` (wall seconds the clock stood still because the simulator's runtime
    stalled), ``clock_longest_hold_s`` and ``clock_holds`` (how many): the simulator's own
    lag (harvester_sim/clock.py)."""
    fn = getattr(clock, "hold_stats", None)
    return dict(fn()) if callable(fn) else {}


def unmodelled_programs(world: Any) -> list[dict[str, Any]]:
    """Containers that ran with no modelled program (the kubelet's list): image, command,
    ``kind`` (``short``: exited 0 at once; ``serving``: kept running), count, an example."""
    kubelet = (getattr(world, "controllers", None) or {}).get("kubelet")
    fn = getattr(kubelet, "unmodelled_programs", None)
    return _jsonable(fn()) if callable(fn) else []


def _monitor(world: Any) -> Any:
    return world.extras.get("invariants")


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))


def vm_migrations(world: Any, timeline: list[dict[str, Any]], mon: Any) -> dict[str, Any]:
    """``{"total", "per_vm", "source"}``: the KubeVirt controller's ``migrations_per_vm``,
    else the monitor's count of Succeeded migrations, else the timeline's migration spans."""
    per: dict[str, int] = {}
    source = "none"
    kv = getattr(world, "controllers", {}).get("kubevirt")
    counts = getattr(kv, "migrations_per_vm", None) if kv is not None else None
    if callable(counts):
        counts = counts()
    if counts:
        per = {str(k if isinstance(k, str) else "/".join(map(str, k))): int(v)
               for k, v in dict(counts).items()}
        source = "kubevirt"
    elif mon is not None and mon.migrations_per_vm:
        per = {k: int(v) for k, v in mon.migrations_per_vm.items()}
        source = "invariants"
    else:
        c: Counter[str] = Counter()
        for ev in timeline:
            if ev.get("event") == "span" and ev.get("what") == "migration" and \
                    ev.get("ok", True) is not False:
                vm = str(ev.get("vm", "?"))
                c[vm if "/" in vm else f"{ev.get('namespace', 'default')}/{vm}"] += 1
        if c:
            per, source = dict(c), "timeline"
    return {"total": sum(per.values()), "per_vm": dict(sorted(per.items())), "source": source}


def node_reboots(timeline: list[dict[str, Any]], mon: Any) -> dict[str, Any]:
    """``{"total", "per_node", "source"}`` from ``node_reboot`` events or ``reboot`` spans,
    else from the monitor's Ready -> NotReady transitions."""
    c: Counter[str] = Counter()
    for ev in timeline:
        if ev.get("event") in ("node_reboot", "node_rebooted") and ev.get("node"):
            c[str(ev["node"])] += 1
    source = "timeline"
    if not c:
        for ev in timeline:
            if ev.get("event") == "span" and ev.get("what") == "reboot" and ev.get("node"):
                c[str(ev["node"])] += 1
    if not c and mon is not None:
        c = Counter(dict(mon.node_reboots))
        source = "invariants"
    return {"total": sum(c.values()), "per_node": dict(sorted(c.items())),
            "source": source if c else "none"}


def api_requests(stats: Any) -> dict[str, Any]:
    """Normalize the API server's statistics (``world.extras['api_stats']``).

    Accepted shapes (or a callable returning one): a dict with ``by_verb``/``by_resource``/
    ``by_user_agent`` (passed through, ``total`` computed if missing); a dict keyed by
    ``(verb, resource, user_agent)`` tuples or ``"verb resource user_agent"`` strings with
    counts; or a list of ``{"verb", "resource", "user_agent", "count"}`` records.
    """
    if callable(stats):
        stats = stats()
    empty: dict[str, Any] = {"total": 0, "by_verb": {}, "by_resource": {},
                             "by_user_agent": {}, "by_user_agent_verb": {}}
    if not stats:
        return empty
    if isinstance(stats, dict) and any(k in stats for k in ("by_verb", "by_resource",
                                                             "by_user_agent")):
        out = dict(empty)
        out.update(_jsonable(stats))
        if not out.get("total"):
            out["total"] = sum(int(v) for v in (out.get("by_verb") or {}).values())
        return out
    records: Iterable[tuple[str, str, str, int]]
    if isinstance(stats, dict):
        records = [(*_split_key(k), int(v)) for k, v in stats.items()]
    else:
        records = [(str(r.get("verb", "")), str(r.get("resource", "")),
                    str(r.get("user_agent", r.get("userAgent", ""))), int(r.get("count", 1)))
                   for r in stats]
    by_verb: Counter[str] = Counter()
    by_res: Counter[str] = Counter()
    by_ua: Counter[str] = Counter()
    by_ua_verb: dict[str, Counter[str]] = defaultdict(Counter)
    for verb, res, ua, n in records:
        by_verb[verb] += n
        by_res[res] += n
        by_ua[ua] += n
        by_ua_verb[ua][verb] += n
    return {"total": sum(by_verb.values()), "by_verb": dict(by_verb.most_common()),
            "by_resource": dict(by_res.most_common()), "by_user_agent": dict(by_ua.most_common()),
            "by_user_agent_verb": {ua: dict(c.most_common()) for ua, c in by_ua_verb.items()}}


def _split_key(k: Any) -> tuple[str, str, str]:
    parts = list(k) if isinstance(k, (tuple, list)) else str(k).split(" ", 2)
    parts = [str(p) for p in parts] + ["", "", ""]
    return parts[0], parts[1], parts[2]


# ============================================================================ critical path
def _spans(timeline: list[dict[str, Any]], names: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for ev in timeline:
        if ev.get("event") != "span" or ev.get("what") not in names:
            continue
        if ev.get("ok", True) is False:
            continue
        try:
            d = float(ev["end"]) - float(ev["start"])
        except (KeyError, TypeError, ValueError):
            continue
        out.append({**ev, "duration": max(0.0, d)})
    return out


def _node_of(span: dict[str, Any]) -> str:
    return str(span.get("node") or span.get("source_node") or "")


def derived_spans(timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spans implied by events, for work no controller records as a span: migrations from
    ``vm_migration_succeeded`` (``source``, ``duration_s``), reboots from ``node_reboot``
    (from the node's ``os_installed`` before it, when there is one: the reboot service's
    wait for the install Job's container to exit) to the node's next ``node_ready``, and
    image cleanup from each ``*-image-cleanup`` SUC Job's ``suc_job_created`` to its
    ``suc_node_applied`` (the whole Job: pod start, the program, completion — the toolkit
    runs them one node at a time). Only kinds without any real span are derived."""
    have = {e.get("what") for e in timeline if e.get("event") == "span"}
    out: list[dict[str, Any]] = []
    if "migration" not in have:
        for e in timeline:
            if e.get("event") == "vm_migration_succeeded" and e.get("duration_s") is not None:
                t = float(e.get("t") or 0.0)
                out.append({"event": "span", "what": "migration", "derived": True,
                            "node": e.get("source") or e.get("node"), "vm": e.get("vm"),
                            "start": t - float(e["duration_s"]), "end": t, "t": t,
                            "scheduling_s": float(e.get("scheduling_s") or 0.0)})
    if "image_cleanup" not in have:
        started: dict[tuple[str, str], float] = {}
        for e in timeline:
            plan = str(e.get("plan") or "")
            if not plan.endswith("-image-cleanup"):
                continue
            key = (plan, str(e.get("node") or ""))
            t = float(e.get("t") or 0.0)
            if e.get("event") == "suc_job_created":
                started.setdefault(key, t)
            elif e.get("event") == "suc_node_applied" and key in started:
                out.append({"event": "span", "what": "image_cleanup", "derived": True,
                            "node": key[1], "start": started.pop(key), "end": t, "t": t})
    if "reboot" not in have:
        down: dict[str, float] = {}
        installed: dict[str, float] = {}
        for e in timeline:
            node = e.get("node")
            if e.get("event") == "os_installed" and node:
                installed[str(node)] = float(e.get("t") or 0.0)
            elif e.get("event") == "node_reboot" and node:
                # from the install's end: the reboot service notices the Job's container
                # exited (it polls every 10 s) and reboots; no orchestrator shortens that
                down[str(node)] = installed.pop(str(node), float(e.get("t") or 0.0))
            elif e.get("event") == "node_ready" and node and str(node) in down:
                start = down.pop(str(node))
                t = float(e.get("t") or 0.0)
                out.append({"event": "span", "what": "reboot", "derived": True, "node": node,
                            "start": start, "end": t, "t": t})
    return out


def whole_jobs(timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans a Job's program records, lengthened by its pod's start: ``job_pod`` names the
    pod, ``pod_started`` is when its container started, ``job_pod_created`` when the Job
    controller created it; the difference (scheduling, ``job_pod_overhead_s``,
    ``pod_start_s``) is part of the Job's run, as image cleanup's derived spans (from the SUC
    Job's creation) always counted. Only the pod's start is added, never the program's own
    steps before the span (which may wait on work counted elsewhere). Other events are
    returned as they are."""
    created = {str(e.get("pod")): float(e.get("t") or 0.0) for e in timeline
               if e.get("event") == "job_pod_created" and e.get("pod")}
    out = []
    for e in timeline:
        pod = e.get("job_pod") if e.get("event") == "span" else None
        if pod and str(pod) in created and e.get("pod_started") is not None:
            startup = float(e["pod_started"]) - created[str(pod)]
            if startup > 0:
                e = {**e, "start": float(e.get("start") or 0.0) - startup}
        out.append(e)
    return out


# KubeVirt's defaults (``pkg/virt-config``: ``ParallelOutboundMigrationsPerNodeDefault`` 2,
# ``ParallelMigrationsPerClusterDefault`` 5), used when a report does not say.
DEFAULT_LIMITS: dict[str, int | None] = {"parallel_outbound_migrations_per_node": 2,
                                         "parallel_migrations_per_cluster": 5}
SPAN_NODE_CHAIN = ("rke2_restart", "os_install", "reboot")


def world_limits(world: Any) -> dict[str, int | None]:
    """The concurrency limits of the simulated cluster that bound the limit: KubeVirt's
    migration limits as its controller applies them (the scenario's KubeVirt CR)."""
    kv = (getattr(world, "controllers", None) or {}).get("kubevirt")
    out = dict(DEFAULT_LIMITS)
    for key, attr in (("parallel_outbound_migrations_per_node", "parallel_outbound_per_node"),
                      ("parallel_migrations_per_cluster", "parallel_migrations_per_cluster")):
        v = getattr(kv, attr, None)
        if isinstance(v, int) and v > 0:
            out[key] = v
    return out


def _plan_concurrency(timeline: list[dict[str, Any]], suffix: str) -> int | None:
    """``spec.concurrency`` of the SUC Plan ``*<suffix>`` as SUC recorded it on its Jobs
    (``suc_job_created``), None when not recorded."""
    for e in timeline:
        if e.get("event") == "suc_job_created" and str(e.get("plan") or "").endswith(suffix) \
                and e.get("concurrency") is not None:
            return max(1, int(e["concurrency"]))
    return None


def _batched(durations: list[float], lanes: int | None) -> float:
    """Lower bound of running ``durations`` with at most ``lanes`` at a time (None: no
    limit): the longest one, or the total shared by the lanes, whichever is longer. With two
    lanes, the exact shortest schedule: the best split of the durations in two sets (each
    lane runs one set after the other), found over the sums the durations can make (in
    whole milliseconds, each rounded down, so it never exceeds the real optimum)."""
    if not durations:
        return 0.0
    longest = max(durations)
    if not lanes:
        return longest
    bound = max(longest, sum(durations) / lanes)
    if lanes != 2 or len(durations) <= 2:
        return bound
    ms = [int(d * 1000) for d in durations]
    total = sum(ms)
    sums = 1                       # bit i set: some subset of the durations sums to i ms
    for d in ms:
        sums |= sums << d
    half = sums & ((1 << (total // 2 + 1)) - 1)
    return max(bound, (total - (half.bit_length() - 1)) / 1000)


def _evacuation_windows(timeline: list[dict[str, Any]],
                        chain: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """When each node was being emptied: from Rancher's ``node_cordoned`` (or
    ``pre_drain_set``) of the node to the start of its next RKE2 restart / OS install / reboot
    span (the drain, and with it KubeVirt's own evacuation, ends before Rancher restarts
    RKE2). A node with chain spans but no such event: up to its first chain span."""
    starts: dict[str, list[float]] = defaultdict(list)
    for e in timeline:
        if e.get("event") in ("node_cordoned", "pre_drain_set") and e.get("node"):
            t = float(e.get("t") or 0.0)
            mine = starts[str(e["node"])]
            if not mine or not any(abs(t - x) < 1e-6 for x in mine):
                mine.append(t)
    chain_starts: dict[str, list[float]] = defaultdict(list)
    for s in chain:
        chain_starts[_node_of(s)].append(float(s["start"]))
    out: dict[str, list[tuple[float, float]]] = {}
    for node in set(starts) | set(chain_starts):
        later = sorted(chain_starts.get(node, []))
        opened = sorted(starts.get(node, [])) or [float("-inf")]
        wins: list[tuple[float, float]] = []
        for t0 in opened:
            t1 = next((x for x in later if x >= t0), float("inf"))
            if wins and wins[-1][1] == t1:
                continue    # the cordon and the pre-drain request open one window
            wins.append((t0, t1))
        out[node] = wins
    return out


def world_replicas(world: Any) -> dict[str, list[str]] | None:
    """Where each Longhorn volume's replicas are (volume -> nodes) at the end of the run, from
    the simulated Longhorn; None without it."""
    lh = (getattr(world, "controllers", None) or {}).get("longhorn")
    reps = getattr(lh, "reps", None)
    if not isinstance(reps, dict):
        return None
    out: dict[str, list[str]] = defaultdict(list)
    for r in reps.values():
        out[str(r.volume)].append(str(r.node))
    return dict(out)


def _longhorn_bound(raw: list[dict[str, Any]], chain: list[dict[str, Any]],
                    evac: dict[str, float], cordon: dict[str, float],
                    replicas: dict[str, list[str]] | None) -> tuple[float, dict[str, float]]:
    """The nodes' part of the limit, one node after the other, with Longhorn's rebuilds: a
    node goes down (Rancher's drain, then its RKE2 restart, OS install and reboot) only once
    every attached volume of the cluster is healthy — Harvester's pre-drain script
    (``upgrade_node.sh`` ``wait_longhorn_engines``) waits for that, and so do we: the
    replicas that failed with the nodes upgraded earlier are all rebuilt. Each of those
    replicas is rebuilt as long after its node's return as it was in the run (Longhorn's own
    delay: its instance manager's start, the node's queue of rebuilds under
    ``concurrent-replica-rebuild-per-node-limit``, the rebuild), counted from that node's
    return in this schedule, where every node returns as early as its spans allow; a replica
    Longhorn created elsewhere (past ``replica-replenishment-wait-interval``) as long after
    the start of the node whose upgrade first failed one of the volume's replicas. So: node
    i's evacuation starts when node i-1 is back (``B[i-1]``), its drain at
    ``max(B[i-1] + evacuation[i], every earlier node's rebuilds done)``, ``B[i]`` = that +
    its RKE2 restart, OS install and reboot. ``cordon``: when each node's upgrade began (its
    first evacuation window's start). Without ``replicas`` (volume -> nodes), or when no
    rebuild ends later than the evacuation, that is the plain sum. Returns the total and
    each node's wait for Longhorn (seconds, only those > 0)."""
    parts: dict[str, float] = defaultdict(float)
    first: dict[str, float] = {}
    back: dict[str, float] = {}
    for sp in chain:
        node = _node_of(sp)
        parts[node] += sp["duration"]
        first[node] = min(first.get(node, float("inf")), float(sp["start"]))
        back[node] = max(back.get(node, float("-inf")), float(sp["end"]))
    order = sorted(first, key=lambda n: first[n])
    plain = sum(parts.values()) + sum(evac.values())
    if not replicas or not order:
        return plain, {}
    failed: dict[tuple[str, str], list[float]] = defaultdict(list)
    rebuilt: dict[tuple[str, str], list[float]] = defaultdict(list)
    created: dict[tuple[str, str], float] = {}
    for e in raw:
        ev = e.get("event")
        if ev in ("replica_failed", "replica_rebuilt", "replica_replenished") \
                and e.get("volume") and e.get("node"):
            key = (str(e["volume"]), str(e["node"]))
            t = float(e.get("t") or 0.0)
            if ev == "replica_replenished":
                created.setdefault(key, t)
            else:
                (failed if ev == "replica_failed" else rebuilt)[key].append(t)
    rank = {n: i for i, n in enumerate(order)}
    ideal_start: dict[str, float] = {}

    def new_replica(volume: str, node: str, before: str) -> float | None:
        """When a replica Longhorn created during the run (``replica_replenished``, past
        ``replica-replenishment-wait-interval``) is rebuilt in the limit's schedule: as long
        after the drain of the node whose upgrade first failed a replica of the volume as it
        was in the run. None when that node is not one upgraded before ``before``."""
        done = [t for t in rebuilt.get((volume, node), ()) if t >= created[(volume, node)]]
        firsts = sorted((min(ts), n) for (v, n), ts in failed.items()
                        if v == volume and n in ideal_start and rank[n] < rank[before])
        if not firsts:
            return None
        cause = firsts[0][1]
        return ideal_start[cause] + (min(done) - first[cause]) if done else float("inf")

    def delay(volume: str, node: str) -> float | None:
        """How long after ``node``'s return its replica of ``volume`` was rebuilt, when that
        replica failed with the node's upgrade (None: it did not, so it stayed healthy)."""
        t0, t1 = cordon.get(node, float("-inf")), back[node]
        if not any(t0 <= t <= t1 for t in failed.get((volume, node), ())):
            return None
        done = [t for t in rebuilt.get((volume, node), ()) if t >= t1]
        if not done or any(t1 < t < min(done) for t in failed.get((volume, node), ())):
            # never rebuilt, or failed again first (its volume detached while it was being
            # rebuilt): the pre-drain wait, which counts running engines only, let it be
            return float("inf")
        return min(done) - t1

    # each node's replicas that failed with its upgrade and were rebuilt: (when in the run,
    # how long after the node's return); never rebuilt (its volume detached, or Longhorn
    # replaced it, below): not waited for
    heal: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for vol, node in failed:
        if node in rank:
            d = delay(vol, node)
            if d is not None and d != float("inf"):
                heal[node].append((back[node] + d, d))
    ideal_back: dict[str, float] = {}
    waits: dict[str, float] = {}
    t = 0.0
    for node in order:
        ready = t + evac.get(node, 0.0)
        rescue = ready
        # a rebuild the run had not finished when this node went down (its RKE2 restart)
        # was not waited for (a volume handed to the script's bypass): nor is it here
        for o, back_o in ideal_back.items():
            for done, d in heal.get(o, ()):
                if done <= first[node]:
                    rescue = max(rescue, back_o + d)
        for vol, o in created:
            when = new_replica(vol, o, node)
            if when is not None and when != float("inf"):
                rescue = max(rescue, when)
        if rescue > ready:
            waits[node] = round(rescue - ready, 3)
        ideal_start[node] = rescue
        ideal_back[node] = rescue + parts[node]
        t = ideal_back[node]
    rest = sum(v for n, v in evac.items() if n not in rank)
    return t + rest, waits


def critical_path(timeline: list[dict[str, Any]],
                  limits: dict[str, Any] | None = None,
                  replicas: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The limit of an upgrade: the longest chain of unavoidable simulated work, parallel work
    counted once, from the timeline's successful spans (docs/performance.md says why each part
    is unavoidable; ``limits`` are the cluster's concurrency limits, :data:`DEFAULT_LIMITS`
    when not given):

    ISO download (the last successful one)
    + image preload: the slowest node's, or all nodes' shared by the preload plan's SUC
      concurrency, whichever is longer
    + the cluster upgrade Job
    + for every node, one at a time (the next one is cordoned only once the previous one is
      back): its evacuation — KubeVirt runs at most min(parallelOutboundMigrationsPerNode,
      parallelMigrationsPerCluster) of its migrations at a time, so the longest one or their
      sum over that many lanes, whichever is longer (and no shorter than its longest VM
      shutdown) — or, when longer, the wait for Longhorn to rebuild the replicas that failed
      with the nodes before it, every attached volume healthy (:func:`_longhorn_bound`, with
      ``replicas``: volume -> nodes), then RKE2 restart, OS install Job, reboot to Ready
    + image cleanup: the longest Job, or all of them shared by the cleanup plan's SUC
      concurrency (1 when not recorded, as upstream's plan).

    The work a Job runs (image preload, cluster upgrade, OS install, image cleanup) counts
    from its pod's creation (:func:`whole_jobs`), and a migration from KubeVirt's admitting it
    (``scheduling_s`` of ``vm_migration_succeeded``: its target pod's scheduling and start,
    which hold one of the lanes; a migration queued behind the limits waits unadmitted).
    ``serial_sum_s`` keeps the earlier figure (every node's migrations and VM shutdowns one
    after the other, image cleanup in series), which is not a lower bound: parallel
    migrations were counted once each.
    """
    lim = {**DEFAULT_LIMITS, **{k: v for k, v in (limits or {}).items() if v}}
    raw = list(timeline)
    timeline = whole_jobs(raw) + derived_spans(raw)
    iso = _spans(timeline, SPAN_ISO)
    iso_s = iso[-1]["duration"] if iso else 0.0
    pre: dict[str, float] = defaultdict(float)
    for s in _spans(timeline, SPAN_PRELOAD):
        pre[_node_of(s)] += s["duration"]
    preload_conc = lim.get("image_preload_concurrency") or _plan_concurrency(
        raw, "-image-preload")
    preload_s = _batched(list(pre.values()), preload_conc)
    cl = _spans(timeline, SPAN_CLUSTER)
    cluster_s = cl[-1]["duration"] if cl else 0.0
    per_node: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    chain = _spans(timeline, SPAN_NODE_CHAIN)
    for s in chain:
        per_node[_node_of(s)][s["what"]] += s["duration"]
    nodes_s = sum(sum(parts.values()) for parts in per_node.values())
    # each node's evacuation: what left it while it was being emptied, KubeVirt running at
    # most ``lanes`` of its outbound migrations at a time
    lanes = min(int(lim["parallel_outbound_migrations_per_node"] or 1),
                int(lim["parallel_migrations_per_cluster"] or 1))
    migs = _spans(timeline, ("migration",))
    stops = _spans(timeline, ("vm_shutdown",))
    evacuations: dict[str, dict[str, Any]] = {}
    windows = _evacuation_windows(raw, chain)
    for node, wins in sorted(windows.items()):
        for t0, t1 in wins:
            def inside(sp: dict[str, Any], t0: float = t0, t1: float = t1) -> bool:
                return float(sp["start"]) >= t0 - 1e-6 and float(sp["end"]) <= t1 + 1e-6
            # a migration holds its lane from KubeVirt's admission (the target pod's
            # scheduling and start, then the transfer), as a Job counts from its pod's creation
            mig = [sp["duration"] + float(sp.get("scheduling_s") or 0.0)
                   for sp in migs if _node_of(sp) == node and inside(sp)]
            stop = [sp["duration"] for sp in stops if _node_of(sp) == node and inside(sp)]
            if not mig and not stop:
                continue
            ev = evacuations.setdefault(node, {"bound_s": 0.0, "migrations": 0,
                                               "migration_sum_s": 0.0,
                                               "longest_migration_s": 0.0, "vm_shutdowns": 0})
            ev["bound_s"] += max(_batched(mig, lanes), max(stop, default=0.0))
            ev["migrations"] += len(mig)
            ev["migration_sum_s"] += sum(mig)
            ev["longest_migration_s"] = max(ev["longest_migration_s"], max(mig, default=0.0))
            ev["vm_shutdowns"] += len(stop)
    evac_s = sum(ev["bound_s"] for ev in evacuations.values())
    node_phase_s, lh_waits = _longhorn_bound(
        raw, chain, {n: ev["bound_s"] for n, ev in evacuations.items()},
        {n: min(t0 for t0, _t1 in wins) for n, wins in windows.items() if wins}, replicas)
    lh_wait_s = max(0.0, node_phase_s - evac_s - nodes_s)
    cleanup = _spans(timeline, SPAN_CLEANUP)
    cleanup_conc = lim.get("image_cleanup_concurrency") or _plan_concurrency(
        raw, "-image-cleanup") or 1
    cleanup_s = _batched([s["duration"] for s in cleanup], cleanup_conc)
    total = iso_s + preload_s + cluster_s + evac_s + nodes_s + lh_wait_s + cleanup_s
    # the earlier figure, for comparison: every node's migrations and shutdowns in series
    serial_nodes: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in _spans(timeline, SPAN_NODE):
        serial_nodes[_node_of(s)][s["what"]] += s["duration"]
    serial_nodes_s = sum(sum(parts.values()) for parts in serial_nodes.values())
    serial_cleanup_s = sum(s["duration"] for s in cleanup)
    serial_pre_s = max(pre.values()) if pre else 0.0
    serial = iso_s + serial_pre_s + cluster_s + serial_nodes_s + serial_cleanup_s
    return {
        "total_s": round(total, 3),
        "iso_download_s": round(iso_s, 3),
        "image_preload_s": round(preload_s, 3),
        "cluster_upgrade_s": round(cluster_s, 3),
        "evacuations_s": round(evac_s, 3),
        "evacuations": {n: {k: round(v, 3) for k, v in ev.items()}
                        for n, ev in evacuations.items()},
        "migration_lanes": lanes,
        "longhorn_wait_s": round(lh_wait_s, 3),
        "longhorn_waits": lh_waits,
        "nodes_s": round(nodes_s, 3),
        "per_node": {n: {k: round(v, 3) for k, v in sorted(parts.items())}
                     for n, parts in sorted(per_node.items())},
        "image_cleanup_s": round(cleanup_s, 3),
        "limits": {**lim, "image_preload_concurrency": preload_conc,
                   "image_cleanup_concurrency": cleanup_conc},
        "serial_sum_s": round(serial, 3),
        "serial_sum": {"nodes_s": round(serial_nodes_s, 3),
                       "image_cleanup_s": round(serial_cleanup_s, 3),
                       "per_node": {n: {k: round(v, 3) for k, v in sorted(parts.items())}
                                    for n, parts in sorted(serial_nodes.items())}},
    }


# ================================================================================= printing
def _fmt_s(s: float) -> str:
    s = float(s)
    if s < 120:
        return f"{s:.1f}s"
    m, sec = divmod(int(round(s)), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s"


def format_text(rep: dict[str, Any], timeline_lines: int = 40) -> str:
    """A readable summary of a report dict."""
    out: list[str] = []
    w = out.append
    w(f"Scenario {rep.get('scenario', '?')} (speed {rep.get('speed')}, "
      f"{rep.get('nodes', '?')} nodes, {rep.get('vms', '?')} VMs)")
    sim = float(rep.get("simulated_duration_s") or 0)
    cp = float(rep.get("critical_path_s") or 0)
    w(f"  simulated {_fmt_s(sim)}, wall {_fmt_s(float(rep.get('wall_duration_s') or 0))}")
    if rep.get("clock_held_s") is not None:
        w(f"  clock held {float(rep['clock_held_s']):.2f}s of wall time "
          f"({int(rep.get('clock_holds') or 0)} holds, longest "
          f"{float(rep.get('clock_longest_hold_s') or 0):.2f}s): the simulator's runtime "
          "stalled")
    if cp:
        w(f"  critical path (limit) {_fmt_s(cp)}  (simulated / critical path = {sim / cp:.2f})")
        c = rep.get("critical_path") or {}
        w("    " + ", ".join(f"{k[:-2]} {_fmt_s(c[k])}" for k in
                            ("iso_download_s", "image_preload_s", "cluster_upgrade_s",
                             "evacuations_s", "longhorn_wait_s", "nodes_s",
                             "image_cleanup_s") if c.get(k)))
        serial = float(rep.get("critical_path_serial_sum_s") or c.get("serial_sum_s") or 0)
        if serial:
            w(f"  serial sum (the earlier figure, not a bound) {_fmt_s(serial)}")
    viol = rep.get("invariant_violations") or []
    w("")
    w(f"Invariant violations: {len(viol)}" + ("" if viol else "  (none)"))
    for v in viol:
        w(f"  [{_fmt_s(float(v.get('t') or 0)):>9}] {v.get('kind')}: {v.get('message')}")
    mig = rep.get("vm_migrations") or {}
    w("")
    w(f"VM migrations: {mig.get('total', 0)}")
    per = mig.get("per_vm") or {}
    if per:
        multi = {k: v for k, v in per.items() if v > 1}
        w(f"  {len(per)} VMs migrated" + ("; more than once: " + ", ".join(
            f"{k} x{v}" for k, v in sorted(multi.items())) if multi else ""))
    rb = rep.get("node_reboots") or {}
    w(f"Node reboots: {rb.get('total', 0)}" + (
        "  (" + ", ".join(f"{k} x{v}" for k, v in (rb.get("per_node") or {}).items()) + ")"
        if rb.get("per_node") else ""))
    api = rep.get("api_requests") or {}
    w(f"API requests: {api.get('total', 0)}")
    if api.get("by_verb"):
        w("  by verb: " + ", ".join(f"{k} {v}" for k, v in api["by_verb"].items()))
    for ua, n in list((api.get("by_user_agent") or {}).items())[:8]:
        verbs = (api.get("by_user_agent_verb") or {}).get(ua) or {}
        w(f"  {ua or '(no user agent)'}: {n}" + (
            "  (" + ", ".join(f"{k} {v}" for k, v in verbs.items()) + ")" if verbs else ""))
    unmodelled = rep.get("unmodelled_programs") or []
    w(f"Programs not modelled: {len(unmodelled)}" + ("" if unmodelled else "  (none)"))
    for u in unmodelled:
        w(f"  {u.get('image')} {u.get('command') or []} ({u.get('kind')}, "
          f"{u.get('containers')} containers, e.g. {u.get('example')})")
    faults = rep.get("faults_fired") or []
    if faults:
        w(f"Faults fired: {len(faults)}")
        for f in faults[:20]:
            w("  " + ", ".join(f"{k}={v}" for k, v in f.items()))
    tl = [e for e in rep.get("timeline") or [] if e.get("event") != "span"]
    if tl and timeline_lines:
        w("")
        w(f"Timeline ({len(tl)} events" + (f", last {timeline_lines}" if len(tl) >
                                            timeline_lines else "") + "):")
        for e in tl[-timeline_lines:]:
            rest = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("t", "wall", "event"))
            w(f"  [{_fmt_s(float(e.get('t') or 0)):>9}] {e.get('event')}  {rest}")
    return "\n".join(out)


# ==================================================================================== plot
def plot(rep: dict[str, Any], path: str | Path) -> None:
    """A Gantt-like picture: phases on top, one row per node with its spans, migration marks.
    Needs matplotlib (optional dependency)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = list(rep.get("timeline") or [])
    spans = [e for e in timeline + derived_spans(timeline) if e.get("event") == "span"
             and e.get("start") is not None and e.get("end") is not None]
    # per node: out of service (cordoned -> uncordoned) and the pre-drain evacuation
    # (Rancher's pre-drain set -> our answer), from the drain handler's events
    opened: dict[tuple[str, str], float] = {}
    for e in timeline:
        node, ev = str(e.get("node") or ""), e.get("event")
        t = float(e.get("t") or 0.0)
        if ev in ("node_cordoned", "pre_drain_set"):
            opened[(node, ev)] = t
        elif ev == "node_uncordoned" and (node, "node_cordoned") in opened:
            spans.append({"what": "cordoned", "node": node, "start": opened.pop(
                (node, "node_cordoned")), "end": t})
        elif ev == "hook_acked" and e.get("hook") == "pre-drain" and \
                (node, "pre_drain_set") in opened:
            spans.append({"what": "evacuation", "node": node, "start": opened.pop(
                (node, "pre_drain_set")), "end": t})
    rows: list[str] = []
    for s in spans:
        row = _node_of(s) or "cluster"
        if row not in rows:
            rows.append(row)
    rows.sort(key=lambda r: (r != "cluster", r))
    colors = {"iso_download": "#4e79a7", "image_preload": "#59a14f", "cluster_upgrade": "#9c755f",
              "migration": "#f28e2b", "vm_shutdown": "#e15759", "rke2_restart": "#76b7b2",
              "os_install": "#edc948", "reboot": "#b07aa1", "image_cleanup": "#bab0ac",
              "drain": "#ff9da7", "image_pull": "#59a14f", "rancher_upgrade": "#8cd17d",
              "chart_rollout": "#86bcb6", "evacuation": "#fabfd2", "cordoned": "#eeeeee"}
    layer = {"cordoned": (0.9, 0), "evacuation": (0.6, 1)}
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.35 * max(1, len(rows))))
    for s in sorted(spans, key=lambda s: layer.get(str(s.get("what")), (0.6, 2))[1]):
        y = rows.index(_node_of(s) or "cluster")
        start, end = float(s["start"]), float(s["end"])
        what = str(s.get("what"))
        if what == "migration":
            ax.plot([end], [y], marker="v", color=colors["migration"], markersize=6,
                    linestyle="none", label="migration (done)")
            continue
        ax.barh(y, max(end - start, 0.5), left=start, height=layer.get(what, (0.6, 2))[0],
                color=colors.get(what, "#999999"), label=what)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=False))
    if uniq:
        ax.legend(uniq.values(), uniq.keys(), loc="upper center", fontsize=7, ncol=7,
                  bbox_to_anchor=(0.5, -0.18 - 0.9 / max(4, len(rows))), frameon=False)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("simulated seconds")
    ax.set_title(f"{rep.get('scenario', '')}: {len(rep.get('invariant_violations') or [])} "
                 f"violations, {rep.get('vm_migrations', {}).get('total', 0)} migrations")
    fig.tight_layout()
    fig.savefig(str(path), dpi=110, bbox_inches="tight")
    plt.close(fig)


# ===================================================================================== CLI
def main(argv: list[str] | None = None) -> int:
    """``harvester-sim report FILE [--plot PNG] [--json] [--timeline N]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "report":
        args = args[1:]
    ap = argparse.ArgumentParser(prog="harvester-sim report",
                                 description="Print a simulator run report for people.")
    ap.add_argument("file", help="report JSON written by the simulator (--report FILE)")
    ap.add_argument("--plot", metavar="PNG", help="also draw a Gantt-like timeline (matplotlib)")
    ap.add_argument("--timeline", type=int, default=40, metavar="N",
                    help="show the last N timeline events (0: none)")
    ap.add_argument("--json", action="store_true", help="print the normalized JSON instead")
    ns = ap.parse_args(args)
    try:
        rep = json.loads(Path(ns.file).read_text())
    except (OSError, ValueError) as exc:
        print(f"harvester-sim report: cannot read {ns.file}: {exc}", file=sys.stderr)
        return 2
    if ns.json:
        print(json.dumps(rep, indent=2))
    else:
        print(format_text(rep, ns.timeline))
    if ns.plot:
        try:
            plot(rep, ns.plot)
        except ImportError:
            print("harvester-sim report: --plot needs matplotlib (pip install matplotlib)",
                  file=sys.stderr)
            return 3
        print(f"timeline picture written to {ns.plot}")
    return 1 if rep.get("invariant_violations") else 0


if __name__ == "__main__":
    raise SystemExit(main())
