"""What the collection's tests share: running ``ansible-playbook`` and ``kubectl`` against a
simulated cluster as a user would, and reading what an upgrade left in it.

``import testkit`` works from any test under tests/ (tests/conftest.py puts this directory and
the repository root on ``sys.path``). Waiting for the simulated cluster is
``harvester_sim.testing.wait_for``; starting one is the ``simulator`` fixture
(tests/integration/conftest.py) or ``harvester_sim.testing.running``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PLAN_API = "management.harvesterhci.io/v1beta1"
PLAN_CRD = "upgradeplans.management.harvesterhci.io"
# the label upgrade-toolkit (and the collection) put on every object a plan creates
PLAN_LABEL = "management.harvesterhci.io/upgrade-plan"


def collection_link() -> None:
    """``ansible_collections/harvester/upgrade -> ../..``: ansible (ansible.cfg) and the tests
    find the collection through it (``make venv`` makes it; a fresh clone may lack it)."""
    link = ROOT / "ansible_collections" / "harvester" / "upgrade"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("..") / "..")


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 where nothing listens, for as long as the context lasts.

    The socket stays bound (never listening, no ``SO_REUSEADDR``): a connection to the port is
    refused, no other server (a simulator of the other test worker) can bind it meanwhile, and
    the kernel does not pick it as the source port of an outgoing connection (a connection to
    a free port of the ephemeral range can otherwise connect to itself). A port merely freed
    again after ``bind`` has none of these guarantees."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def ansible_env(sim: Any = None, *, kubeconfig: str | Path | None = None,
                **extra: str) -> dict[str, str]:
    """The environment to run ``ansible-playbook`` (or ``ansible-inventory``) from the repo
    root with: the venv first on PATH, the repo's ansible.cfg, the simulator's credentials
    (``kubeconfig`` instead of the admin one, e.g. a ServiceAccount's), then ``extra``.

    With a simulator, ``TMPDIR`` is a directory of its own: kubernetes.core keeps its
    discovery cache in ``$TMPDIR/k8srcp-<sha of host+user>.json``, so a simulator on a port an
    earlier one used would otherwise read that one's discovery (e.g. an UpgradePlan CRD it
    does not have yet)."""
    collection_link()
    env = dict(os.environ)
    if sim is not None:
        env.update(sim.env_for(kubeconfig) if kubeconfig is not None else sim.env)
        kc = Path(str(sim.env.get("KUBECONFIG", "")))
        if kc.parent.is_dir():
            tmp = kc.parent / "tmp"
            tmp.mkdir(exist_ok=True)
            env["TMPDIR"] = str(tmp)
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["PATH"] = f"{BIN}:{os.environ.get('PATH', '')}"
    env.setdefault("ANSIBLE_FORCE_COLOR", "0")
    env.update(extra)
    return env


@dataclass
class PlaybookResult:
    rc: int
    output: str

    def __str__(self) -> str:  # shown by pytest on assertion failures
        return f"rc={self.rc}\n{self.output[-6000:]}"


def run_playbook(sim: Any, playbook: str = "upgrade.yml", *args: str,
                 extra_vars: dict[str, Any] | None = None, tags: str | None = None,
                 skip_tags: str | None = None, check: bool = False, timeout: float = 900,
                 env: dict[str, str] | None = None) -> PlaybookResult:
    """``ansible-playbook PLAYBOOK ARGS...`` from the repo root against ``sim``, as a user
    runs it (only the kubeconfig differs); its exit code and output (stdout + stderr)."""
    cmd = [str(BIN / "ansible-playbook"), playbook, *args]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if tags:
        cmd += ["--tags", tags]
    if skip_tags:
        cmd += ["--skip-tags", skip_tags]
    if check:
        cmd.append("--check")
    full_env = ansible_env(sim, **(env or {}))
    proc = subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return PlaybookResult(proc.returncode, proc.stdout + proc.stderr)


def kubectl(sim: Any, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``kubectl ARGS...`` against ``sim`` (the venv's kubectl first); ``check``: assert it
    succeeded."""
    exe = shutil.which("kubectl", path=f"{BIN}:{os.environ.get('PATH', '')}")
    assert exe, "kubectl not on PATH"
    proc = subprocess.run([exe, *args], env={**os.environ, **sim.env}, capture_output=True,
                          text=True, timeout=60, check=False)
    if check:
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc


# ---------------------------------------------------------------------------------------------
# reading the simulated cluster
# ---------------------------------------------------------------------------------------------

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def writes(sim: Any) -> dict[str, int]:
    """Write requests of external clients so far, by ``verb resource`` (the API server's
    request statistics)."""
    return {k: v for k, v in sim.stats()["by_verb_resource"].items()
            if k.split(" ", 1)[0] in WRITE_VERBS}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What changed between two ``writes`` counts."""
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def plans(sim: Any) -> list[dict[str, Any]]:
    """Every UpgradePlan, oldest first; none while the CRD is not installed."""
    c = sim.world.client
    if c.try_get("apiextensions.k8s.io/v1", "CustomResourceDefinition", PLAN_CRD) is None:
        return []
    return sorted(c.list(PLAN_API, "UpgradePlan"),
                  key=lambda p: p["metadata"].get("creationTimestamp", ""))


def get_plan(sim: Any, name: str) -> dict[str, Any]:
    """The UpgradePlan ``name`` (asserts it exists)."""
    found = sim.world.client.try_get(PLAN_API, "UpgradePlan", name)
    assert found is not None, f"no UpgradePlan {name}"
    return dict(found)


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    """The object's status condition of type ``ctype`` ({} when it has none)."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == ctype), {})


def event_reasons(sim: Any, name: str) -> list[str]:
    """The reasons of the Events about the object called ``name``."""
    return [e.get("reason", "") for e in sim.world.client.list("v1", "Event")
            if (e.get("involvedObject") or {}).get("name") == name]


def only_plan(sim: Any) -> dict[str, Any]:
    """The one UpgradePlan (asserts there is exactly one)."""
    found = plans(sim)
    assert len(found) == 1, [p["metadata"]["name"] for p in found]
    return found[0]


# what a plan creates and its cleanup (abort, finalizer, Finalize) deletes
PLAN_OBJECTS = (("apps/v1", "Deployment", "harvester-system"),
                ("v1", "Service", "harvester-system"),
                ("harvesterhci.io/v1beta1", "VirtualMachineImage", "harvester-system"),
                ("upgrade.cattle.io/v1", "Plan", "cattle-system"),
                ("batch/v1", "Job", "harvester-system"))


def owned(sim: Any, plan: str) -> list[str]:
    """``Kind/name`` of every object labelled as the plan's (``PLAN_LABEL``)."""
    c = sim.world.client
    out = []
    for api_version, kind, ns in PLAN_OBJECTS:
        out += [f"{kind}/{o['metadata']['name']}" for o in c.list(api_version, kind, ns)
                if (o["metadata"].get("labels") or {}).get(PLAN_LABEL) == plan]
    return out


def install_plan_crd(sim: Any) -> None:
    """Install the collection's UpgradePlan CRD (as its preflight does) and wait until the
    kind is served."""
    from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import crd
    from harvester_sim.testing import wait_for

    c = sim.world.client
    if c.try_get("apiextensions.k8s.io/v1", "CustomResourceDefinition", PLAN_CRD) is None:
        c.create(crd.definition())

    def served() -> bool:
        c.list(PLAN_API, "UpgradePlan")
        return True

    wait_for(served, what="the UpgradePlan kind to be served", ignore=(Exception,))
