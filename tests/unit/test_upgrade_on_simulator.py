"""scripts/upgrade_on_simulator.py: the arguments that put a real controller in place of a
simulated one (docs/real-controllers.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit import ROOT

SCRIPT = ROOT / "scripts" / "upgrade_on_simulator.py"


def test_missing_suc_binary_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, str(SCRIPT), "--suc-bin", str(tmp_path / "nope"),
                          "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert res.stderr.strip() == f"--suc-bin: {tmp_path / 'nope'}: no such executable file"
    assert not out.exists()


def test_suc_binary_must_be_executable(tmp_path: Path) -> None:
    plain = tmp_path / "suc"
    plain.write_text("not a program")
    res = subprocess.run([sys.executable, str(SCRIPT), "--suc-bin", str(plain),
                          "--out", str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1 and "no such executable file" in res.stderr

