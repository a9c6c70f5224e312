"""The AWX credential types of awx/configure.yml, rendered as AWX renders them, connect.

AWX builds a job's environment from a custom credential type like this
(ansible/awx, awx/main/models/credential/__init__.py, ``CredentialType.inject_credential``;
the same in awx-plugins' ``inject_credential``):

- the template namespace holds each input of the credential whose value is a boolean or a
  non-empty string; a blank input is left out, so it renders as ``""`` (Jinja's Undefined);
- a boolean field missing from the credential's inputs is ``False`` (whatever its default);
- every ``file`` injector is rendered and written to a new file, even when it renders empty;
  ``tower.filename.<label>`` (``template.<label>``) or ``tower.filename`` (``template``) is
  its path;
- every ``env`` injector is rendered and exported, even when it renders empty;
- templates are rendered by ``jinja2.sandbox.ImmutableSandboxedEnvironment``.

``render`` below does that, then the job's environment (only what the credential injects)
runs ``kubernetes.core.k8s_info``, ``harvester.upgrade.node_info`` and the
``harvester.upgrade.nodes`` inventory plugin against the simulator, with every optional input
blank and with them set.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from testkit import BIN, ROOT


class _AnsibleYamlLoader(yaml.SafeLoader):
    """Reads Ansible's ``!unsafe`` as the plain string it is: AWX gets it unrendered."""


_AnsibleYamlLoader.add_constructor(
    "!unsafe", lambda loader, node: loader.construct_scalar(node))  # type: ignore[arg-type]


def credential_types() -> dict[str, dict[str, Any]]:
    play = yaml.load((ROOT / "awx" / "configure.yml").read_text(),  # noqa: S506
                     Loader=_AnsibleYamlLoader)[0]
    return {t["name"]: t for t in play["vars"]["awx_credential_types"]}


KUBECONFIG_TYPE = "Harvester cluster (kubeconfig)"
TOKEN_TYPE = "Harvester cluster (API token)"
NODES = 3


def render(cred_type: dict[str, Any], inputs: dict[str, Any], private_dir: Path) -> dict[str, str]:
    """The environment AWX gives a job with a credential of ``cred_type`` and ``inputs``."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    tower = SimpleNamespace()
    namespace: dict[str, Any] = {"tower": tower}
    for name, value in inputs.items():
        if isinstance(value, bool) or len(value):
            namespace[name] = value
    for field in cred_type["inputs"].get("fields", []):
        if field["type"] == "boolean" and field["id"] not in inputs:
            namespace[field["id"]] = False
    jinja = ImmutableSandboxedEnvironment()
    injectors = cred_type["injectors"]
    for label, template in injectors.get("file", {}).items():
        fd, path = tempfile.mkstemp(dir=private_dir)
        with os.fdopen(fd, "w") as f:
            f.write(jinja.from_string(template).render(**namespace))
        if "." not in label:
            tower.filename = path
        else:
            if not hasattr(tower, "filename"):
                tower.filename = SimpleNamespace()
            setattr(tower.filename, label.split(".", 1)[1], path)
    return {var: jinja.from_string(template).render(**namespace)
            for var, template in injectors.get("env", {}).items()}


CHECK_PLAYBOOK = """
- name: Connect with only what the AWX credential injected
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: kubernetes.core reads the nodes
      kubernetes.core.k8s_info:
        kind: Node
      register: k8s_nodes

    - name: harvester.upgrade reads the nodes
      harvester.upgrade.node_info:
      register: harvester_nodes

    - name: Both saw the cluster
      ansible.builtin.assert:
        that:
          - k8s_nodes.resources | length == {nodes}
          - harvester_nodes.nodes | length == {nodes}
"""


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    from harvester_sim import testing

    with testing.running(f"empty:{NODES}") as running:
        yield running


def job_env(injected: dict[str, str], home: Path) -> dict[str, str]:
    """The process environment minus any cluster connection, plus the injected variables
    (a job in an execution environment has nothing else; no ~/.kube/config either)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("K8S_AUTH_", "KUBECONFIG", "KUBECACHEDIR"))}
    env.update(injected)
    env["HOME"] = str(home)
    env["TMPDIR"] = str(home)   # kubernetes.core's discovery cache, per test
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    return env


def connect(sim: Any, injected: dict[str, str], tmp: Path) -> tuple[int, str]:
    """Run the check playbook, then the nodes inventory plugin, with the job's env."""
    home = tmp / "home"
    home.mkdir()
    env = job_env(injected, home)
    playbook = tmp / "check.yml"
    playbook.write_text(CHECK_PLAYBOOK.replace("{nodes}", str(NODES)))
    out = subprocess.run([str(BIN / "ansible-playbook"), str(playbook)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    if out.returncode != 0:
        return out.returncode, out.stdout + out.stderr
    inv = subprocess.run([str(BIN / "ansible-inventory"), "-i",
                          "inventories/harvester.nodes.yml", "--graph", "harvester_nodes"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    text = inv.stdout + inv.stderr
    if inv.returncode != 0 or "[WARNING]" in text or "node-" not in inv.stdout:
        return inv.returncode or 1, text
    return 0, out.stdout + text


def test_kubeconfig_type_has_no_optional_input_that_could_render_empty() -> None:
    """Every env variable of the kubeconfig type comes from its one required input: a
    K8S_AUTH_CONTEXT rendered from a blank context names a context "" (kubernetes.core then
    fails: no such context), so the type has no context input."""
    cred_type = credential_types()[KUBECONFIG_TYPE]
    fields = {f["id"] for f in cred_type["inputs"]["fields"]}
    assert fields == set(cred_type["inputs"]["required"]) == {"kubeconfig"}
    assert "K8S_AUTH_CONTEXT" not in cred_type["injectors"]["env"]


@pytest.mark.parametrize("inputs", [
    pytest.param({}, id="kubeconfig-only"),
])
def test_kubeconfig_credential_connects(sim: Any, tmp_path: Path,
                                        inputs: dict[str, Any]) -> None:
    injected = render(credential_types()[KUBECONFIG_TYPE],
                      {"kubeconfig": sim.kubeconfig.read_text(), **inputs}, tmp_path)
    assert Path(injected["K8S_AUTH_KUBECONFIG"]).read_text() == sim.kubeconfig.read_text()
    rc, output = connect(sim, injected, tmp_path)
    assert rc == 0, output[-4000:]


@pytest.mark.parametrize("optional", [
    pytest.param({"verify_ssl": False}, id="ca-absent-unverified"),
    pytest.param({"ca_cert": "", "verify_ssl": False}, id="ca-blank-unverified"),
    pytest.param({"ca_cert": "CA", "verify_ssl": True}, id="ca-verified"),
    pytest.param({"ca_cert": "CA"}, id="ca-verify-missing"),
])
def test_token_credential_connects(sim: Any, tmp_path: Path, optional: dict[str, Any]) -> None:
    inputs = {"host": sim.url, "token": sim.token, **optional}
    if inputs.get("ca_cert") == "CA":
        inputs["ca_cert"] = sim.server.ca_pem.decode()
    injected = render(credential_types()[TOKEN_TYPE], inputs, tmp_path)
    if not inputs.get("ca_cert"):
        # the CA file AWX writes anyway is empty: nothing may point at it
        assert injected["K8S_AUTH_SSL_CA_CERT"] == ""
    rc, output = connect(sim, injected, tmp_path)
    assert rc == 0, output[-4000:]


def test_token_credential_verifies_with_the_system_cas_when_ca_is_blank(
        sim: Any, tmp_path: Path) -> None:
    """Verification on and no CA: the server's certificate is checked against the CAs the
    environment trusts (the simulator's own CA is not one), not skipped and not read from
    the empty file."""
    injected = render(credential_types()[TOKEN_TYPE],
                      {"host": sim.url, "token": sim.token, "ca_cert": "",
                       "verify_ssl": True}, tmp_path)
    rc, output = connect(sim, injected, tmp_path)
    assert rc != 0
    assert "CERTIFICATE_VERIFY_FAILED" in output, output[-4000:]
    assert "NO_CERTIFICATE_OR_CRL_FOUND" not in output, output[-4000:]
