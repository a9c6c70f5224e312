"""Small-N chaos in `make test`: SIGKILL ansible-playbook at random moments, re-run, and
check the upgrade still ends well (``scripts/chaos.py``: plan Succeeded, every node rebooted
exactly once, zero invariant violations, no leftovers). Fixed seed, so a failure replays
with ``scripts/chaos.py --runs 2 --max-kills 1 --scenarios three-node --speed 200
--seed 20260 --kill-min 1 --kill-max 8``. The kill window must close before a run ends:
the test asserts a kill landed, so a run that ends first fails it instead of passing
untested."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("harvester_sim")

from testkit import ROOT

pytestmark = [pytest.mark.timeout(900)]


def test_chaos_two_runs(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "chaos.py"), "--runs", "2",
         "--max-kills", "1", "--scenarios", "three-node", "--speed", "200", "--seed", "20260",
         "--kill-min", "1", "--kill-max", "8", "--out", str(tmp_path / "chaos")],
        cwd=ROOT, capture_output=True, text=True, timeout=840, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "2/2 runs passed" in proc.stdout, proc.stdout
    # a kill landed (a run that ends before its kill tests nothing): "kills=[4.2]"
    assert re.search(r"kills=\[\d", proc.stdout), proc.stdout
