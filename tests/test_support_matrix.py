"""docs/support-matrix.md states what is supported; these checks keep it true: the upgrade
paths come from the release catalog and the collection's own eligibility rule, and the
ansible-core bounds agree across meta/runtime.yml, the roles, the Makefile's oldest release
and the sanity ignore files."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from testkit import ROOT


def test_upgrade_paths_table_matches_the_catalog() -> None:
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "support_matrix.py"), "--check"],
                         capture_output=True, text=True, check=False, cwd=ROOT)
    assert res.returncode == 0, res.stderr


def test_ansible_core_bounds_agree() -> None:
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    m = re.fullmatch(r">=(\d+)\.(\d+)\.0", runtime["requires_ansible"])
    assert m, runtime["requires_ansible"]
    oldest = f"{m.group(1)}.{m.group(2)}"
    make = re.search(r"^OLDEST_ANSIBLE_CORE \?= (\d+\.\d+)\.\d+$",
                     (ROOT / "Makefile").read_text(), re.M)
    assert make and make.group(1) == oldest, "Makefile OLDEST_ANSIBLE_CORE"
    for meta in sorted((ROOT / "roles").glob("*/meta/main.yml")):
        info = yaml.safe_load(meta.read_text())["galaxy_info"]
        assert str(info["min_ansible_version"]) == oldest, meta
    from ansible.release import __version__ as newest
    newest_minor = ".".join(newest.split(".")[:2])
    for version in (oldest, newest_minor):
        assert (ROOT / "tests" / "sanity" / f"ignore-{version}.txt").is_file(), version
    doc = (ROOT / "docs" / "support-matrix.md").read_text()
    assert f'requires_ansible: ">={oldest}.0"' in doc
