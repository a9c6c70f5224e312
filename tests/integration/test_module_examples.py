"""The EXAMPLES of every module and of the inventory plugin run against the simulator.

Each module's ``EXAMPLES`` (read with ``ast``, never imported) is cut into its tasks; every
task runs as written, in a generated playbook (``hosts: localhost``, ``connection: local``;
the connection comes from ``K8S_AUTH_KUBECONFIG``, as the modules document), on a simulated
cluster at the point where the example makes sense:

* ``plan`` run (three-node): the variable check, the lock, the what-if pre-flight, every
  ``upgrade_plan`` example, Initialize (then with ``ensure_plan``), abort, and finalize's
  "clean up after a failed plan";
* ``cluster`` run (three-node): the cluster phases in order (each "active plan" example,
  then its "named plan, out of order" one, which verifies the completed phase), then the
  inventory plugin's examples (``ansible-inventory --list``) at ``ClusterUpgraded``;
* ``nodes`` run (three-node brought to ``ClusterUpgraded`` by hand, as
  test_node_upgrade.py does): ``node_info`` and its ``add_host``, then a serial play over the
  nodes running the step modules' examples in the order the node role runs them
  (``drain_hook_ack`` await, ``vm_evacuate``, answer, post-drain, ``node_job``, answer,
  released, ``vm_restore``) on the first node and ``node_cycle``'s on the others; then
  ImageCleanup and Finalize;
* ``single`` run (single-node at ``ClusterUpgraded``): ``node_cycle``'s single-node example.

The few tasks that are not examples (``GLUE``: the named plan the examples refer to,
``node_gate`` enter/finish, the post-drain hook) are what the roles do between them. After
every example task that calls a module of this collection an ``assert`` checks the result
has the keys RETURN documents as always returned (and those for the example's ``step``).
The plan placeholder of the examples, ``hvst-upgrade-abcde``, is the name of the runs' plan.

Runs are independent and run two at a time; each test waits for its own. The module's
teardown prints each run's duration and the RETURN keys documented as always returned that
a result lacked (not a failure). ``EXAMPLES_TEST_SPEED`` (default 1000) is the clock speed.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

harvester_sim = pytest.importorskip("harvester_sim")

from node_setup import at_cluster_upgraded  # noqa: E402

from testkit import BIN, PLAN_API, ROOT, ansible_env  # noqa: E402

MODULE_DIR = ROOT / "plugins" / "modules"
INVENTORY_PLUGIN = ROOT / "plugins" / "inventory" / "nodes.py"
PLAN = "hvst-upgrade-abcde"        # the examples' plan name; the runs create their plan so
SPEED = float(os.environ.get("EXAMPLES_TEST_SPEED", "1000"))
COLLECTION = "harvester.upgrade."

pytestmark = [pytest.mark.timeout(600)]


# ---------------------------------------------------------------------------------------------
# reading the plugins' documentation
# ---------------------------------------------------------------------------------------------

def doc_strings(path: Path) -> dict[str, str]:
    """DOCUMENTATION, EXAMPLES and RETURN of a plugin file, without importing it."""
    out: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            out[node.targets[0].id] = node.value.value
    return out


def module_names() -> list[str]:
    return sorted(p.stem for p in MODULE_DIR.glob("*.py") if p.stem != "__init__")


def examples(module: str) -> list[dict[str, Any]]:
    tasks = yaml.safe_load(doc_strings(MODULE_DIR / f"{module}.py").get("EXAMPLES", "")) or []
    assert isinstance(tasks, list) and all(isinstance(t, dict) for t in tasks), module
    return tasks


def return_keys(module: str, task_args: dict[str, Any]) -> list[str]:
    """Keys RETURN says are always there (or for this ``step``/on success)."""
    ret = yaml.safe_load(doc_strings(MODULE_DIR / f"{module}.py").get("RETURN", "")) or {}
    step = task_args.get("step")
    keys = []
    for key, spec in ret.items():
        returned = str((spec or {}).get("returned", ""))
        if returned in ("always", "success") or (step and returned == f"step={step}"):
            keys.append(key)
    return keys


def inventory_examples() -> list[dict[str, Any]]:
    text = doc_strings(INVENTORY_PLUGIN)["EXAMPLES"]
    return [d for d in yaml.safe_load_all(text) if d]


def module_of(task: dict[str, Any]) -> str | None:
    """The collection module a task calls (``None`` for other actions)."""
    for key in task:
        if key.startswith(COLLECTION):
            return key[len(COLLECTION):]
    return None


# ---------------------------------------------------------------------------------------------
# building playbooks from examples
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ex:
    """Example ``index`` of ``module``."""

    module: str
    index: int


USED: set[Ex] = set()      # every example some run uses (checked by test_every_example_is_placed)


def expand(items: list[Ex | dict[str, Any]]) -> list[dict[str, Any]]:
    """Example references → the example task (registered) + an assert on its RETURN keys;
    dicts (glue) as they are."""
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, dict):
            out.append(item)
            continue
        USED.add(item)
        task = dict(examples(item.module)[item.index])
        mod = module_of(task)
        if mod is None:           # e.g. node_info's add_host: runs as written
            out.append(task)
            continue
        reg = task.setdefault("register", f"example_{item.module}_{item.index}")
        args = task.get(COLLECTION + mod) or {}
        keys = return_keys(mod, args)
        # keys RETURN calls "always" that the result lacks are printed (RETURN-MISSING), not
        # fatal: RETURN is the module owner's to correct; at least one must be there
        check: dict[str, Any] = {
            "name": f"Example {item.module} #{item.index}: result has its RETURN keys",
            "ansible.builtin.assert": {
                "that": [f"{reg} is not failed",
                         f"{keys!r} | select('in', {reg}) | list | length > 0"],
                "fail_msg": f"{{{{ {reg} | to_json }}}}",
                "success_msg": f"RETURN-MISSING {item.module}#{item.index} "
                               f"{{{{ {keys!r} | reject('in', {reg}) | list | to_json }}}}"}}
        if task.get("run_once"):
            check["run_once"] = True
        out += [task, check]
    return out


def local_play(name: str, items: list[Ex | dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "hosts": "localhost", "connection": "local", "gather_facts": False,
            "tasks": expand(items)}


def glue(module: str, title: str, **args: Any) -> dict[str, Any]:
    return {"name": f"(not an example) {title}", COLLECTION + module: args or None}


def has_module(name: str) -> bool:
    return (MODULE_DIR / f"{name}.py").exists()


def plan_playbook() -> list[dict[str, Any]]:
    return [local_play("Plan, lock, Initialize, abort on a fresh cluster", [
        Ex("check_variables", 0),                 # reads variables only
        Ex("preflight", 0),                       # what-if: no plan yet
        Ex("upgrade_lock", 0), Ex("upgrade_lock", 1),
        glue("upgrade_plan", f"create the plan {PLAN} the examples name", name=PLAN,
             restore_vm=True),
        Ex("upgrade_plan", 0), Ex("upgrade_plan", 1), Ex("upgrade_plan", 2),
        Ex("upgrade_plan", 3),
        Ex("preflight", 1),                       # Initialize the active plan
        Ex("preflight", 2),                       # ensure_plan: adopts it, re-checks
        Ex("upgrade_abort", 0),
        Ex("finalize", 1),                        # clean up after a failed plan
    ])]


CLUSTER_PHASES = ["iso_download", "repo_create", "metadata_populate", "image_preload",
                  "cluster_upgrade"]


def cluster_playbook() -> list[dict[str, Any]]:
    items: list[Ex | dict[str, Any]] = [
        glue("upgrade_plan", f"create the plan {PLAN} the examples name", name=PLAN,
             restore_vm=True),
        glue("preflight", "Initialize the plan"),
    ]
    for phase in CLUSTER_PHASES:
        items += [Ex(phase, 0), Ex(phase, 1)]
    return [local_play("The cluster phases, then each again by plan name", items)]


def node_steps() -> list[Ex | dict[str, Any]]:
    """The step modules' examples in the node role's order (roles/node_upgrade)."""
    host = "{{ inventory_hostname }}"
    return [
        Ex("drain_hook_ack", 0),                   # await pre-drain
        Ex("vm_evacuate", 0), Ex("vm_evacuate", 1),
        Ex("drain_hook_ack", 1),                   # answer pre-drain
        glue("drain_hook_ack", "wait for post-drain", node=host, hook="post-drain",
             step="await", timeout=600),
        Ex("node_job", 0),
        glue("drain_hook_ack", "answer post-drain", node=host, hook="post-drain",
             step="answer"),
        Ex("drain_hook_ack", 2),                   # released
        Ex("vm_restore", 0),
    ]


def node_playbook() -> list[dict[str, Any]]:
    node_play: dict[str, Any] = {
        "name": "The nodes one at a time", "hosts": "harvester_nodes", "connection": "local",
        "gather_facts": False, "serial": 1, "order": "inventory",
        "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "tasks": expand([Ex("node_gate", 0)])}
    steps = {"block": expand(node_steps())}
    if has_module("node_cycle"):
        steps["when"] = "inventory_hostname == ansible_play_hosts_all[0]"
        cycle = {"block": expand([Ex("node_cycle", 0), Ex("node_cycle", 1)]),
                 "when": "inventory_hostname != ansible_play_hosts_all[0]"}
        node_play["tasks"] += [steps, cycle]
    else:
        node_play["tasks"].append(steps)
    return [
        local_play("Enter NodeUpgrade and read the nodes", [
            glue("node_gate", "enter NodeUpgrade", step="enter"),
            Ex("node_info", 0), Ex("node_info", 1)]),
        node_play,
        local_play("Finish NodeUpgrade, ImageCleanup, Finalize", [
            glue("node_gate", "finish NodeUpgrade", step="finish"),
            Ex("image_cleanup", 0), Ex("image_cleanup", 1),
            Ex("finalize", 0)]),
    ]


def single_playbook() -> list[dict[str, Any]]:
    return [local_play("The node of a single-node cluster", [
        glue("node_gate", "enter NodeUpgrade", step="enter"), Ex("node_cycle", 2)])]


# ---------------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------------

@dataclass
class Cmd:
    what: str
    rc: int
    output: str
    seconds: float

    def __str__(self) -> str:
        return f"{self.what}: rc={self.rc} in {self.seconds:.1f}s\n{self.output[-8000:]}"


@dataclass
class Run:
    name: str
    cmds: dict[str, Cmd] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0


def _env(sim: Any) -> dict[str, str]:
    env = ansible_env(sim, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env.pop("KUBECONFIG", None)       # K8S_AUTH_KUBECONFIG only, as the docs say
    return env


def _cmd(run: Run, key: str, argv: list[str], env: dict[str, str], cwd: Path) -> Cmd:
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=400, check=False)
    cmd = Cmd(key, proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0)
    run.cmds[key] = cmd
    return cmd


def _playbook(run: Run, key: str, plays: list[dict[str, Any]], sim: Any, tmp: Path) -> Cmd:
    path = tmp / f"{key}.yml"
    path.write_text(yaml.safe_dump(plays, sort_keys=False, width=1000))
    return _cmd(run, key, [str(BIN / "ansible-playbook"), str(path)], _env(sim), ROOT)


def _plan(sim: Any) -> dict[str, Any] | None:
    try:
        return sim.world.client.try_get(PLAN_API, "UpgradePlan", PLAN)  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001 - CRD not installed yet
        return None


def do_plan(run: Run, tmp: Path) -> None:
    from harvester_sim import testing
    with testing.running("three-node", speed=SPEED) as sim:
        _playbook(run, "plan", plan_playbook(), sim, tmp)
        run.facts["plan"] = _plan(sim)


def do_cluster(run: Run, tmp: Path) -> None:
    from harvester_sim import testing
    with testing.running("three-node", speed=SPEED) as sim:
        if _playbook(run, "cluster", cluster_playbook(), sim, tmp).rc != 0:
            return
        run.facts["plan"] = _plan(sim)
        env = _env(sim)
        for i, doc in enumerate(inventory_examples()):
            where = tmp / f"inventory-{i}"
            (where / "out").mkdir(parents=True)
            shutil.copy(sim.kubeconfig, where / "out" / "kubeconfig")   # doc 1's kubeconfig
            inv = where / "harvester.nodes.yml"
            inv.write_text(yaml.safe_dump(doc, sort_keys=False))
            _cmd(run, f"inventory-{i}", [str(BIN / "ansible-inventory"), "-i", str(inv),
                                         "--list"], env, where)


def do_nodes(run: Run, tmp: Path) -> None:
    from harvester_sim import testing
    with testing.running("three-node", speed=SPEED) as sim:
        at_cluster_upgraded(sim, plan=PLAN)
        _playbook(run, "nodes", node_playbook(), sim, tmp)
        run.facts["plan"] = _plan(sim)


def do_single(run: Run, tmp: Path) -> None:
    from harvester_sim import testing
    with testing.running("single-node", speed=SPEED) as sim:
        at_cluster_upgraded(sim, single=True, plan=PLAN)
        _playbook(run, "single", single_playbook(), sim, tmp)
        run.facts["plan"] = _plan(sim)


# longest first: two at a time
RUNS: dict[str, Callable[[Run, Path], None]] = {"nodes": do_nodes, "cluster": do_cluster,
                                                "plan": do_plan}
if has_module("node_cycle"):
    RUNS["single"] = do_single


class Pool:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.lock = threading.Lock()
        self.futures: dict[str, cf.Future[Run]] = {}
        self.ex = cf.ThreadPoolExecutor(max_workers=2)
        self.lines: list[str] = []

    def _do(self, name: str) -> Run:
        run = Run(name)
        tmp = self.base / name
        tmp.mkdir()
        t0 = time.monotonic()
        try:
            RUNS[name](run, tmp)
        except Exception as exc:  # noqa: BLE001 - reported by the test that needs the run
            run.error = f"{type(exc).__name__}: {exc}"
        run.seconds = time.monotonic() - t0
        timings = ", ".join(f"{k} {c.seconds:.0f}s" for k, c in run.cmds.items())
        missing = sorted({ln.split("RETURN-MISSING ", 1)[1].strip().strip("'\"")
                          for c in run.cmds.values() for ln in c.output.splitlines()
                          if "RETURN-MISSING" in ln and "[]" not in ln})
        self.lines.append(f"[examples] run {name}: {run.seconds:.0f}s ({timings})"
                          + (f"; RETURN keys not returned: {missing}" if missing else ""))
        return run

    def start_all(self) -> None:
        with self.lock:
            for name in RUNS:   # longest first
                if name not in self.futures:
                    self.futures[name] = self.ex.submit(self._do, name)

    def get(self, name: str) -> Run:
        self.start_all()
        run = self.futures[name].result()
        assert not run.error, run.error
        return run


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest) -> Iterator[Pool]:
    with tempfile.TemporaryDirectory(prefix="harvester-examples-") as base:
        pool = Pool(Path(base))
        yield pool
        pool.ex.shutdown(wait=True)
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        ctx = (capture.global_and_fixture_disabled() if capture is not None
               else contextlib.nullcontext())
        with ctx:               # durations, and RETURN keys documented but not returned
            print("\n" + "\n".join(pool.lines))


def plain(value: Any) -> Any:
    """ansible-inventory's JSON without the ``__ansible_unsafe`` wrappers."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def ok(cmd: Cmd | None) -> None:
    assert cmd is not None
    assert cmd.rc == 0, str(cmd)
    assert "failed=1" not in cmd.output, str(cmd)


# ---------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------

def test_every_example_is_placed() -> None:
    """Every example task of every module is in one of the runs' playbooks."""
    USED.clear()
    plan_playbook()
    cluster_playbook()
    node_playbook()
    if has_module("node_cycle"):
        single_playbook()
    every = {Ex(m, i) for m in module_names() for i in range(len(examples(m)))}
    assert every, "no EXAMPLES found"
    assert every - USED == set(), f"examples no run uses: {sorted(every - USED, key=str)}"
    assert all(examples(m) for m in module_names())


def test_plan_examples(runs: Pool) -> None:
    run = runs.get("plan")
    ok(run.cmds.get("plan"))
    plan = run.facts["plan"]
    assert plan is not None
    assert plan["spec"]["version"] == "v1.6.0"
    assert plan["spec"].get("restoreVM") is True
    status = plan["status"]
    assert status["currentPhase"] == "Failed", status          # upgrade_abort
    assert any(c.get("reason") == "Aborted" for c in status.get("conditions") or []), status
    assert "Aborted" in run.cmds["plan"].output or "maintenance window over" in json.dumps(plan)


def test_cluster_phase_examples(runs: Pool) -> None:
    run = runs.get("cluster")
    ok(run.cmds.get("cluster"))
    plan = run.facts["plan"]
    assert plan["status"]["currentPhase"] == "ClusterUpgraded", plan["status"]


@pytest.mark.parametrize("index", range(len(inventory_examples())))
def test_inventory_plugin_examples(runs: Pool, index: int) -> None:
    run = runs.get("cluster")
    cmd = run.cmds.get(f"inventory-{index}")
    ok(cmd)
    assert cmd is not None
    inv = plain(json.loads(cmd.output[cmd.output.index("{"):]))
    hosts = set(inv["_meta"]["hostvars"])
    assert hosts == {"node-1", "node-2", "node-3"}, inv
    assert set(inv["harvester_nodes"]["hosts"]) == hosts
    for name, hv in inv["_meta"]["hostvars"].items():
        assert hv["harvester_node_name"] == name
        assert hv["ansible_connection"] == "local"
    if inventory_examples()[index].get("keyed_groups"):
        tiers = [g for g in inv if g.startswith("tier_")]
        assert tiers, inv
        assert {h for g in tiers for h in inv[g].get("hosts", [])} == hosts


def test_node_loop_and_cleanup_examples(runs: Pool) -> None:
    run = runs.get("nodes")
    ok(run.cmds.get("nodes"))
    plan = run.facts["plan"]
    status = plan["status"]
    assert status["currentPhase"] == "Succeeded", status
    states = {n: s.get("state") for n, s in status["nodeUpgradeStatuses"].items()}
    assert states == {n: "ImageCleaned" for n in ("node-1", "node-2", "node-3")}, states
    out = run.cmds["nodes"].output
    assert "Example drain_hook_ack #2" in out and "Example vm_restore #0" in out


@pytest.mark.skipif(not has_module("node_cycle"), reason="no node_cycle module")
def test_single_node_example(runs: Pool) -> None:
    run = runs.get("single")
    ok(run.cmds.get("single"))
    plan = run.facts["plan"]
    assert plan is not None
    states = {n: s.get("state") for n, s in plan["status"]["nodeUpgradeStatuses"].items()}
    assert states == {"node-1": "SingleNodeUpgraded"}, states
