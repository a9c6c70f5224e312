"""The built collection tarball holds the collection and nothing else (no simulator, venv,
test output or run artifacts)."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import yaml

from testkit import BIN, ROOT

FORBIDDEN_PREFIXES = ("simulator/", ".venv/", "tests/output/", "out/", "ansible_collections/",
                      "build/", ".git/", "benchmarks/", "scripts/", ".pytest_cache/",
                      ".mypy_cache/", ".config/")


def test_galaxy_build_excludes_simulator_and_artifacts(tmp_path: Path) -> None:
    galaxy = BIN / "ansible-galaxy"
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
    # what a user of the collection needs, and nothing of the developer's
    assert "LICENSE" in names
    assert "tests/sanity/ignore-2.19.txt" in names
    dev = [n for n in names if n.startswith(("tests/unit/", "tests/integration/", "molecule/"))
           or n in ("Makefile", "requirements-dev.txt", "ruff.toml", "mypy.ini",
                    "mypy-baseline.txt", "tests/conftest.py", "tests/testkit.py")]
    assert dev == [], f"developer files in the collection tarball: {dev[:20]}"


def test_license_matches_galaxy_metadata() -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert galaxy["license"] == ["Apache-2.0"]
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0" in text


def test_dependency_bounds_agree_with_the_execution_environment() -> None:
    """galaxy.yml, the EE definition and the AWX project's collections/requirements.yml name
    the same kubernetes.core bounds and the same version of this collection."""
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    ee = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    reqs = yaml.safe_load((ROOT / "collections" / "requirements.yml").read_text())
    ee_colls = {c["name"]: c for c in ee["dependencies"]["galaxy"]["collections"]}
    req_colls = {c["name"]: c for c in reqs["collections"]}
    bounds = galaxy["dependencies"]["kubernetes.core"]
    assert ee_colls["kubernetes.core"]["version"] == bounds
    assert req_colls["kubernetes.core"]["version"] == bounds
    tarball = f"build/harvester-upgrade-{galaxy['version']}.tar.gz"
    assert tarball in ee_colls, f"the EE installs {sorted(ee_colls)}, not {tarball}"
    ours = [c for c in reqs["collections"] if "harvester-upgrade" in c["name"]]
    assert len(ours) == 1 and str(ours[0]["version"]) == galaxy["version"]
