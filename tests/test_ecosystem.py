"""The cheap ecosystem gates, run by ``make test``: ansible-doc for every plugin, the AWX
configuration's syntax, the execution environment's build context and collection metadata,
antsibull-changelog, ansible-lint (production profile) on roles and playbooks.

The slow gates (ansible-test sanity, galaxy-importer, molecule for every role) are scripts
under ``scripts/`` run by ``make lint``; see docs/quality-gates.md and the scripts' headers.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

from testkit import BIN, ROOT

MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py")
                 if p.stem != "__init__")
# the modules that run (main()): the others document an action plugin that runs on the
# controller alone (harvester.upgrade.check_variables, as ansible.builtin.assert) and take no
# connection options
RUNNING_MODULES = [m for m in MODULES
                   if "def main(" in (ROOT / "plugins" / "modules" / f"{m}.py").read_text()]


class _AnsibleYamlLoader(yaml.SafeLoader):
    """SafeLoader that reads Ansible's ``!unsafe`` tag as a plain string."""


_AnsibleYamlLoader.add_constructor(
    "!unsafe", lambda loader, node: loader.construct_scalar(node))  # type: ignore[arg-type]


def load_playbook(path: Path) -> object:
    return yaml.load(path.read_text(), Loader=_AnsibleYamlLoader)  # noqa: S506


def run(cmd: list[str], timeout: float = 300, **kw: object) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env.setdefault("ANSIBLE_NOCOLOR", "1")
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False, **kw)  # type: ignore[call-overload]


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed (make venv installs requirements-dev.txt)")
    return str(path)


@pytest.fixture(scope="module")
def module_docs() -> dict[str, Any]:
    """``ansible-doc --json`` of every module, keyed by FQCN."""
    assert MODULES, "no modules in plugins/modules"
    names = [f"harvester.upgrade.{m}" for m in MODULES]
    res = run([tool("ansible-doc"), "-t", "module", "--json", *names])
    assert res.returncode == 0, res.stderr[-3000:]
    docs: dict[str, Any] = json.loads(res.stdout)
    return docs


class _SpecCaptured(Exception):
    """Raised instead of building an AnsibleModule; carries its argument_spec."""


def module_argument_spec(module: str) -> dict[str, Any]:
    """The argument_spec module ``module``'s main() gives AnsibleModule (main() stops there)."""
    from ansible.module_utils import basic

    def capture(self: Any, argument_spec: dict[str, Any], *args: Any, **kw: Any) -> None:
        raise _SpecCaptured(argument_spec)

    code = importlib.import_module(
        f"ansible_collections.harvester.upgrade.plugins.modules.{module}")
    with mock.patch.object(basic.AnsibleModule, "__init__", capture):
        try:
            code.main()
        except _SpecCaptured as captured:
            spec: dict[str, Any] = captured.args[0]
            return spec
    raise AssertionError(f"{module}: main() returned without creating an AnsibleModule")


def option_differences(where: str, doc: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """What differs between documented options and an argument_spec, as validate-modules
    would see it: names, aliases, type, elements, choices, default, required, suboptions."""
    out = [f"{where}{name}: accepted, not documented" for name in sorted(set(spec) - set(doc))]
    out += [f"{where}{name}: documented, not accepted" for name in sorted(set(doc) - set(spec))]
    for name in sorted(set(doc) & set(spec)):
        d, s = doc[name], spec[name]
        facts = {
            "aliases": (sorted(d.get("aliases") or []), sorted(s.get("aliases") or [])),
            "type": (d.get("type", "str"), s.get("type", "str")),
            "elements": (d.get("elements"), s.get("elements")),
            "choices": (d.get("choices"), s.get("choices")),
            "default": (d.get("default"), s.get("default")),
            "required": (bool(d.get("required")), bool(s.get("required"))),
        }
        out += [f"{where}{name}: {fact} documented {dv!r}, accepted {sv!r}"
                for fact, (dv, sv) in facts.items() if dv != sv]
        if d.get("suboptions") or s.get("options"):
            out += option_differences(f"{where}{name}.", d.get("suboptions") or {},
                                      s.get("options") or {})
    return out


# kubernetes.core's connection options (AUTH_ARG_SPEC): what AWX credentials and K8S_AUTH_*
# set; every module accepts them and must list them in ansible-doc
AUTH_OPTIONS = {"kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert",
                "client_cert", "client_key", "proxy", "no_proxy", "proxy_headers",
                "persist_config", "impersonate_user", "impersonate_groups", "username",
                "password"}


@pytest.mark.parametrize("module", RUNNING_MODULES)
def test_ansible_doc_options_are_the_argument_spec(module: str,
                                                   module_docs: dict[str, Any]) -> None:
    """Every option a module accepts is in its ansible-doc, and nothing else is: the
    connection options too (a doc fragment nested in a fragment is not followed)."""
    doc = module_docs[f"harvester.upgrade.{module}"]["doc"]
    options = doc.get("options") or {}
    missing_auth = sorted(AUTH_OPTIONS - set(options))
    assert not missing_auth, f"{module}: connection options not in ansible-doc: {missing_auth}"
    differences = option_differences("", options, module_argument_spec(module))
    assert not differences, f"{module}:\n" + "\n".join(differences)


def test_ansible_doc_every_module(module_docs: dict[str, Any]) -> None:
    names = [f"harvester.upgrade.{m}" for m in MODULES]
    docs = module_docs
    for name in names:
        doc = docs[name]["doc"]
        assert doc.get("short_description"), f"{name}: no short_description"
        assert docs[name].get("examples"), f"{name}: no EXAMPLES"
        assert docs[name].get("return") is not None, f"{name}: no RETURN"


@pytest.mark.parametrize("plugin_type,name", [
    ("inventory", "harvester.upgrade.nodes"),
    ("callback", "harvester.upgrade.harvester_progress"),
    ("filter", "harvester.upgrade.role_argument_spec"),
])
def test_ansible_doc_plugins(plugin_type: str, name: str) -> None:
    res = run([tool("ansible-doc"), "-t", plugin_type, "--json", name])
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)[name]["doc"]["short_description"]


def test_awx_configuration_syntax() -> None:
    res = run([tool("ansible-playbook"), "--syntax-check", "awx/configure.yml"])
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


def test_awx_configuration_objects() -> None:
    """Job templates run upgrade.yml with the survey variables the roles read."""
    play = load_playbook(ROOT / "awx" / "configure.yml")[0]  # type: ignore[index]
    defaults = yaml.safe_load((ROOT / "roles" / "common" / "defaults" / "main.yml").read_text())
    survey_vars = {q["variable"] for q in play["vars"]["awx_upgrade_survey"]["spec"]}
    extra = play["vars"]["awx_job_extra_vars"]
    for var in survey_vars | set(extra):
        assert var in defaults or var == "upgrade_pause_nodes_text", var
    assert set(extra) <= set(defaults)
    assert (ROOT / "upgrade.yml").exists()
    templates = {t["name"]: t for t in play["vars"]["awx_job_templates"]}
    assert templates["Harvester upgrade pre-flight (what-if)"]["job_tags"] == "preflight"
    for template in templates.values():
        assert (ROOT / template.get("playbook", "upgrade.yml")).is_file()
    assert (ROOT / "inventories" / "harvester.nodes.yml").exists()
    types = play["vars"]["awx_credential_types"]
    envs = [set(t["injectors"]["env"]) for t in types]
    assert any("K8S_AUTH_KUBECONFIG" in e for e in envs)
    # an empty K8S_AUTH_HOST/API_KEY would override a kubeconfig: never in the same type
    assert not any("K8S_AUTH_KUBECONFIG" in e and "K8S_AUTH_HOST" in e for e in envs)


def test_execution_environment_build_context(tmp_path: Path) -> None:
    context = tmp_path / "context"
    res = run(["bash", str(ROOT / "scripts" / "ee_context.sh"), str(context)], timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install" in containerfile
    assert "harvester.upgrade.harvester_progress" in containerfile
    reqs = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    names = [c["name"] for c in reqs["collections"]]
    assert "kubernetes.core" in names
    tarballs = [n for n in names if n.endswith(".tar.gz")]
    assert tarballs and (context / "_build" / tarballs[0]).is_file()


def test_execution_environment_introspection(tmp_path: Path) -> None:
    """ansible-builder finds the collection's Python and system requirements once installed."""
    galaxy = tool("ansible-galaxy")
    res = run([galaxy, "collection", "build", "--force", "--output-path", str(tmp_path), "."])
    assert res.returncode == 0, res.stderr[-2000:]
    tarball = next(tmp_path.glob("harvester-upgrade-*.tar.gz"))
    dest = tmp_path / "collections"
    res = run([galaxy, "collection", "install", "--offline", "--no-deps", "--force",
               "-p", str(dest), str(tarball)])
    assert res.returncode == 0, res.stderr[-2000:]
    res = run([tool("ansible-builder"), "introspect", "--sanitize", str(dest)])
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    assert "kubernetes" in out and "harvester.upgrade" in out
    assert "python3" in out


def test_changelog_lint() -> None:
    res = run(["bash", str(ROOT / "scripts" / "changelog.sh"), "lint"])
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


def test_changelog_release_would_succeed() -> None:
    """The next ``antsibull-changelog release`` works (in a scratch copy: nothing changes)."""
    if not shutil.which("antsibull-changelog", path=str(BIN)):
        pytest.skip("antsibull-changelog is not installed")
    res = run(["bash", str(ROOT / "scripts" / "changelog.sh"), "check"], timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert (ROOT / "CHANGELOG.rst").is_file()


def test_ansible_lint_production_profile() -> None:
    """Roles, playbooks, AWX and molecule playbooks pass ansible-lint's production profile
    (.ansible-lint; known debt listed with reasons in .ansible-lint-ignore)."""
    if not (ROOT / "roles").is_dir() or not any((ROOT / "roles").iterdir()):
        pytest.skip("no roles yet")
    tool("ansible-lint")
    res = run(["bash", str(ROOT / "scripts" / "ansible_lint.sh")], timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_molecule_scenario_for_every_role() -> None:
    """`make molecule` (run by `make lint`) covers every role: molecule/<role>/ converges it
    against a simulated cluster and verifies through the API (docs/quality-gates.md)."""
    roles = {p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir()}
    # the settings every scenario shares: molecule's base config, merged under each molecule.yml
    base = yaml.safe_load((ROOT / ".config" / "molecule" / "config.yml").read_text())
    assert base["provisioner"]["playbooks"] == {"create": "../shared/create.yml",
                                                "destroy": "../shared/destroy.yml"}
    for role in sorted(roles):
        scenario = ROOT / "molecule" / role
        for name in ("molecule.yml", "converge.yml", "verify.yml"):
            assert (scenario / name).is_file(), f"molecule/{role}/{name} missing"
        own = yaml.safe_load((scenario / "molecule.yml").read_text()) or {}
        playbooks = (own.get("provisioner") or {}).get("playbooks") or {}
        assert "create" not in playbooks and "destroy" not in playbooks, role
        assert f"harvester.upgrade.{role}" in (scenario / "converge.yml").read_text() or (
            role == "node_upgrade" and "playbooks/node_upgrade.yml" in
            (scenario / "converge.yml").read_text()), role
