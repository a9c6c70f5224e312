"""Lay out the collection as ``<dest>/ansible_collections/harvester/upgrade`` for the gates.

ansible-test and galaxy-importer want the collection at its canonical path, as a real
directory (ansible-test refuses symlinked content roots and, inside a git work tree, only
sees tracked files). The tree is built from the collection tarball itself
(``ansible-galaxy collection build``), so the gates check exactly what would be published:
``build_ignore`` in galaxy.yml decides, not a second list kept here.

The collections the modules' documentation refers to (``kubernetes.core`` doc fragments) are
copied beside it from the ``ansible`` package installed in the venv, so validate-modules and
ansible-doc resolve them without any network access.

Usage: python scripts/collection_tree.py DEST [--tarball-dir DIR]
Prints the path of the collection root (DEST/ansible_collections/harvester/upgrade).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE, NAME = "harvester", "upgrade"
# Collections harvester.upgrade's docs and code refer to, copied from the venv's ansible package.
DEPENDENCIES = ("kubernetes/core",)


def build_tarball(out_dir: Path) -> Path:
    """Run ``ansible-galaxy collection build`` and return the tarball's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    subprocess.run([str(galaxy), "collection", "build", "--force", "--output-path", str(out_dir),
                    str(ROOT)], check=True, stdout=subprocess.DEVNULL)
    tarballs = sorted(out_dir.glob(f"{NAMESPACE}-{NAME}-*.tar.gz"),
                      key=lambda p: p.stat().st_mtime)
    if not tarballs:
        raise SystemExit(f"no {NAMESPACE}-{NAME}-*.tar.gz in {out_dir}")
    return tarballs[-1]


def bundled_collections_root() -> Path:
    """The ``ansible_collections`` directory of the installed ``ansible`` package."""
    spec = importlib.util.find_spec("ansible_collections")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the ansible package (bundled collections) is not installed")
    for location in spec.submodule_search_locations:
        if (Path(location) / "kubernetes" / "core").is_dir():
            return Path(location)
    raise SystemExit("kubernetes.core not found in the installed ansible package")


def lay_out(dest: Path, tarball: Path) -> Path:
    """Extract ``tarball`` to DEST/ansible_collections/harvester/upgrade; copy dependencies."""
    collections = dest / "ansible_collections"
    target = collections / NAMESPACE / NAME
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with tarfile.open(tarball) as tf:
        tf.extractall(target, filter="data")
    bundled = bundled_collections_root()
    for dep in DEPENDENCIES:
        dst = collections / dep
        if not dst.exists():
            shutil.copytree(bundled / dep, dst, symlinks=True,
                            ignore=shutil.ignore_patterns("tests", "__pycache__"))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--tarball-dir", type=Path, default=None,
                        help="where to build the tarball (default: DEST/dist)")
    args = parser.parse_args(argv)
    dest: Path = args.dest.resolve()
    tarball = build_tarball(args.tarball_dir or dest / "dist")
    print(lay_out(dest, tarball))
    return 0


if __name__ == "__main__":
    sys.exit(main())
