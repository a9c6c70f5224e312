"""The built collection tarball holds the collection and nothing else (no simulator, venv,
test output or run artifacts)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_PREFIXES = ("simulator/", ".venv/", "tests/output/", "out/", "ansible_collections/",
                      "build/", ".git/", "benchmarks/", "scripts/", ".pytest_cache/")


def test_galaxy_build_excludes_simulator_and_artifacts(tmp_path: Path) -> None:
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    res = subprocess.run([str(galaxy), "collection", "build", "--force", "--output-path",
                          str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300,
                         check=False)
    assert res.returncode == 0, res.stderr
    tarballs = list(tmp_path.glob("harvester-upgrade-*.tar.gz"))
    assert len(tarballs) == 1
    with tarfile.open(tarballs[0]) as tf:
        names = tf.getnames()
    assert "MANIFEST.json" in names and "FILES.json" in names
    assert any(n.startswith("plugins/modules/") for n in names)
    assert any(n.startswith("roles/") for n in names)
    bad = [n for n in names if n.startswith(FORBIDDEN_PREFIXES) or "__pycache__" in n
           or n.endswith((".pyc", ".tar.gz"))]
    assert bad == [], f"unexpected files in the collection tarball: {bad[:20]}"
