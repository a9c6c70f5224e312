"""Smoke test of the node loop's Ansible surface, without a cluster (no molecule needed):
the playbook parses, every node module and the inventory plugin document themselves, and the
role's argument spec rejects a bad knob before any task runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testkit import BIN, ROOT, ansible_env

NODE_MODULES = ["node_gate", "node_info", "drain_hook_ack", "vm_evacuate", "node_job",
                "vm_restore"]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / cmd[0]), *cmd[1:]], cwd=ROOT,
                          env=ansible_env(ANSIBLE_FORCE_COLOR="0"),
                          capture_output=True, text=True, timeout=300, check=False)


def test_playbook_syntax() -> None:
    res = _run("ansible-playbook", "--syntax-check", "playbooks/node_upgrade.yml")
    assert res.returncode == 0, res.stdout + res.stderr


def test_modules_and_inventory_plugin_are_documented() -> None:
    res = _run("ansible-doc", "--json", "-t", "module",
               *[f"harvester.upgrade.{m}" for m in NODE_MODULES])
    assert res.returncode == 0, res.stderr
    docs = json.loads(res.stdout)
    for m in NODE_MODULES:
        doc = docs[f"harvester.upgrade.{m}"]["doc"]
        assert doc["short_description"], m
        assert "kubeconfig" in doc["options"], m          # kubernetes.core auth options
    res = _run("ansible-doc", "--json", "-t", "inventory", "harvester.upgrade.nodes")
    assert res.returncode == 0, res.stderr
    assert "plan" in json.loads(res.stdout)["harvester.upgrade.nodes"]["doc"]["options"]


def test_node_modules_take_the_connection_defaults() -> None:
    import yaml
    groups = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["action_groups"]
    assert set(NODE_MODULES) <= set(groups["harvester"])


def test_role_rejects_a_bad_knob_before_acting(tmp_path: Path) -> None:
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: all\n  connection: local\n  gather_facts: false\n  roles:\n"
        "    - role: harvester.upgrade.node_upgrade\n")
    res = _run("ansible-playbook", "-i", "node-x,", str(play), "-e",
               "node_upgrade_migration_concurrency=many",
               "-e", f"ansible_python_interpreter={sys.executable}")
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "node_upgrade_migration_concurrency" in out, out
    assert "Check Rancher is asking" not in out   # failed in validation, no task ran
