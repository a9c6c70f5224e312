"""The import-layer check (scripts/import_layers.py, a `make lint` gate): the repository keeps
its layers, and each rule finds the import that breaks it, however it is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit import ROOT

SCRIPT = ROOT / "scripts" / "import_layers.py"
C = "ansible_collections.harvester.upgrade.plugins"


def layers(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                          text=True, timeout=60, check=False)


def test_the_repository_keeps_its_layers() -> None:
    res = layers(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 violation(s)" in res.stdout


@pytest.mark.parametrize("path, code, rule", [
    ("plugins/module_utils/harvester/x.py", f"from {C}.modules import node_cycle\n",
     "module_utils imports no other part of the collection"),
    ("plugins/module_utils/harvester/x.py",
     f"def f():\n    from {C}.plugin_utils import in_process\n",
     "module_utils imports no other part of the collection"),
    ("plugins/modules/x.py", f"import {C}.action.node_cycle\n",
     "modules import only module_utils from the collection"),
    ("plugins/action/x.py", "import harvester_sim.world\n",
     "the collection never imports the simulator"),
    ("plugins/modules/x.py", "import importlib\nimportlib.import_module('harvester_sim')\n",
     "the collection never imports the simulator"),
    ("simulator/harvester_sim/api/x.py",
     f"from {C}.module_utils.harvester import crd\n",
     "the simulator never imports the collection"),
])
def test_each_rule_finds_the_import_that_breaks_it(tmp_path: Path, path: str, code: str,
                                                   rule: str) -> None:
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text(code)
    res = layers(tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"{path}:" in res.stdout and f"({rule})" in res.stdout, res.stdout


def test_what_the_layers_allow_passes(tmp_path: Path) -> None:
    files = {
        "plugins/modules/x.py": f"from {C}.module_utils.harvester import pipeline\n"
                                "from ansible.module_utils.basic import AnsibleModule\n",
        "plugins/module_utils/harvester/x.py": f"from {C}.module_utils.harvester import lock\n",
        "plugins/action/x.py": f"from {C}.plugin_utils import phase_action\n",
        "simulator/harvester_sim/api/x.py": "from ..client import ApiError\n",
    }
    for path, code in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(code)
    res = layers(tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
