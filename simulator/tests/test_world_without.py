"""``World(without=...)`` / ``harvester-sim serve --without NAME``: a simulated controller left
out so that a real one run beside the simulator does its work."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harvester_sim.world import CONTROLLER_NAMES, World, check_without

SPEED = 400.0


def _plan() -> dict:
    # A Plan that matches every managed node; the simulated SUC makes a Job per node.
    return {"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
            "metadata": {"name": "p-probe", "namespace": "cattle-system"},
            "spec": {"concurrency": 3, "version": "v1.6.0",
                     "nodeSelector": {"matchLabels": {"harvesterhci.io/managed": "true"}},
                     "serviceAccountName": "system-upgrade-controller",
                     "upgrade": {"image": "rancher/harvester-upgrade-toolkit",
                                 "command": ["upgrade_node.sh"], "args": ["prepare"]}}}


def _jobs_after(without: tuple[str, ...], sim_seconds: float | None) -> list[dict]:
    """The Jobs in cattle-system once the simulator ran ``sim_seconds`` after the Plan was
    created (``None``: as soon as there is one, however loaded the machine is)."""
    from harvester_sim.scenarios import loader

    w = World(loader.load("three-node"), speed=SPEED, without=without)
    w.start()
    try:
        w.client.create(_plan())
        deadline = time.monotonic() + 60.0
        start = w.clock.now()
        while time.monotonic() < deadline:
            jobs = w.client.list("batch/v1", "Job", "cattle-system")
            if jobs or (sim_seconds is not None and w.clock.now() - start >= sim_seconds):
                return jobs
            time.sleep(0.02)
        return w.client.list("batch/v1", "Job", "cattle-system")
    finally:
        w.stop()


def test_unknown_controller_is_refused_with_the_names_it_takes() -> None:
    with pytest.raises(ValueError, match="unknown controller.*bogus.*suc"):
        check_without(["suc", "bogus"])
    assert "invariants" not in CONTROLLER_NAMES
    assert {"suc", "kubevirt", "rancher", "kubelet"} <= set(CONTROLLER_NAMES)


def test_serve_refuses_an_unknown_name_before_serving(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    res = subprocess.run([sys.executable, "-m", "harvester_sim.cli", "serve", "--scenario",
                          "empty:1", "--kubeconfig", str(kc), "--without", "suc,nope"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "--without: unknown controller(s) nope" in res.stderr
    assert not kc.exists()


def test_without_suc_leaves_plans_to_a_real_controller() -> None:
    # Control: the simulated SUC turns the Plan into Jobs.
    assert _jobs_after((), None), "simulated SUC made no Job for a matching Plan"
    # Without it nothing in the simulator acts on Plans.
    assert _jobs_after(("suc",), 60.0) == []


def test_programs_are_registered_without_the_simulated_suc() -> None:
    # A Job a real SUC creates runs the toolkit's programs, so the kubelet must find them
    # when the simulated SUC (which used to register them) is never imported. A fresh
    # interpreter, since this process has imported the SUC controller already.
    code = ("import sys, harvester_sim.controllers.kubelet\n"
            "from harvester_sim.programs.base import REGISTRY\n"
            "assert 'harvester_sim.controllers.suc' not in sys.modules\n"
            "f = REGISTRY.find('rancher/harvester-upgrade-toolkit:v1.6.0', "
            "['upgrade_node.sh'], ['prepare'])\n"
            "print(f[0] if f else 'NONE')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() not in ("", "NONE"), res.stdout


def test_a_specific_program_wins_over_its_images_fallback_in_any_import_order() -> None:
    # The toolkit image's fallback program claims every container of the image; the repo
    # DaemonSet's iso-downloader script has a program of its own, which must run instead,
    # whichever module registered first.
    from harvester_sim.programs.base import ProgramRegistry

    script = ["sh", "-c", "curl .../harvesterhci.io.virtualmachineimages/ns/n/download "
              "-o harvester.iso.gz"]
    image = "starbops/harvester-upgrade-toolkit:v1.6.0"
    for order in (("fallback", "specific"), ("specific", "fallback")):
        reg = ProgramRegistry()
        for which in order:
            if which == "fallback":
                reg.register("image", lambda i, c, a: "harvester-upgrade-toolkit" in i,
                             lambda ctx: iter(()), fallback=True)
            else:
                reg.register("downloader", lambda i, c, a: "harvester.iso.gz" in " ".join(c),
                             lambda ctx: iter(()))
        found = reg.find(image, script, [])
        assert found is not None and found[0] == "downloader", order
        other = reg.find(image, ["upgrade_node.sh"], ["prepare"])
        assert other is not None and other[0] == "image", order
