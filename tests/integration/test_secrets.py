"""No secret value in Ansible output, plan status or Events; TLS verification on by default.

A ``-vvv`` run of the Initialize phase (which creates the plan, writes its status and Events)
is made three ways: kubeconfig file (``K8S_AUTH_KUBECONFIG``), host + bearer token as
variables (module option ``api_key``), and the kubeconfig *content* as a variable (module
option ``kubeconfig`` as a dict). The token, the kubeconfig's CA blob and the kubeconfig text
must appear nowhere: not in the output, the UpgradePlan or any Event.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml

pytest.importorskip("harvester_sim")

PLAN_API = "management.harvesterhci.io/v1beta1"
PREFLIGHT = {"upgrade_what_if": False}  # create the plan: status + Events to inspect

pytestmark = [pytest.mark.timeout(600)]


def _cluster_text(sim: Any) -> str:
    """Every UpgradePlan and every Event, as JSON."""
    client = sim.world.client
    objs: list[Any] = []
    try:
        objs += client.list(PLAN_API, "UpgradePlan")
    except Exception:  # noqa: BLE001 - the CRD may not exist
        pass
    objs += client.list("v1", "Event")
    objs += client.list("events.k8s.io/v1", "Event")
    return json.dumps(objs)


def _secrets(sim: Any) -> dict[str, str]:
    kc = yaml.safe_load(sim.kubeconfig.read_text())
    ca_b64 = kc["clusters"][0]["cluster"]["certificate-authority-data"]
    return {"token": sim.token, "kubeconfig CA blob": ca_b64,
            "kubeconfig CA blob (middle)": ca_b64[100:160],
            "token (base64)": base64.b64encode(sim.token.encode()).decode()}


def _assert_clean(where: str, text: str, secrets: dict[str, str]) -> None:
    for what, value in secrets.items():
        assert value not in text, f"{what} appears in {where}"


def test_verbose_runs_leak_no_secret(simulator: Any, playbook: Any, tmp_path: Any) -> None:
    sim = simulator("three-node", speed=200)
    secrets = _secrets(sim)
    kc = yaml.safe_load(sim.kubeconfig.read_text())
    ca = tmp_path / "ca.crt"
    ca.write_bytes(sim.server.ca_pem)
    runs = {
        "kubeconfig file": playbook(sim, "upgrade.yml", "-vvv", tags="preflight",
                                    extra_vars=PREFLIGHT, timeout=300),
        "host + api_key": playbook(
            sim, "upgrade.yml", "-vvv", tags="preflight", timeout=300,
            extra_vars={**PREFLIGHT, "upgrade_host": sim.url, "upgrade_api_key": sim.token,
                        "upgrade_ca_cert": str(ca)},
            env={"K8S_AUTH_KUBECONFIG": "", "KUBECONFIG": str(tmp_path / "none")}),
        "kubeconfig file, modules in processes of their own": playbook(
            sim, "upgrade.yml", "-vvv", tags="preflight", timeout=300,
            extra_vars={**PREFLIGHT, "harvester_upgrade_in_process": False}),
        "kubeconfig content": playbook(
            sim, "upgrade.yml", "-vvv", tags="preflight", timeout=300,
            extra_vars={**PREFLIGHT, "upgrade_kubeconfig": kc},
            env={"K8S_AUTH_KUBECONFIG": "", "KUBECONFIG": str(tmp_path / "none")}),
    }
    for name, res in runs.items():
        assert res.rc == 0, f"{name}: {res}"
        # -vvv took effect: the modules' invocations are printed (run in the task's worker,
        # plugin_utils/in_process.py) or the local connection's commands
        assert any(s in res.output for s in ("module_args", "<127.0.0.1>",
                                             "ESTABLISH LOCAL CONNECTION")), name
        _assert_clean(f"the -vvv output ({name})", res.output, secrets)
    # the switch works: AnsiballZ modules over the local connection
    assert "AnsiballZ_preflight" in runs["kubeconfig file, modules in processes of their own"
                                         ].output
    assert "AnsiballZ_preflight" not in runs["kubeconfig file"].output
    text = _cluster_text(sim)
    assert '"UpgradePlan"' in text or "upgradeplan" in text.lower()
    _assert_clean("the UpgradePlan or an Event", text, secrets)


def test_tls_verification_is_on_by_default(simulator: Any, playbook: Any,
                                           tmp_path: Any) -> None:
    """Without the CA the run fails on the certificate; validate_certs=false is an explicit
    choice that works and prints a warning."""
    sim = simulator("empty:1")
    kc = yaml.safe_load(sim.kubeconfig.read_text())
    del kc["clusters"][0]["cluster"]["certificate-authority-data"]
    no_ca = tmp_path / "kubeconfig-no-ca"
    no_ca.write_text(yaml.safe_dump(kc))
    env = dict(sim.env_for(no_ca))
    res = playbook(sim, "upgrade.yml", tags="preflight", env=env, timeout=300)
    assert res.rc != 0, res
    assert "CERTIFICATE_VERIFY_FAILED" in res.output or "certificate verify failed" in \
        res.output, res
    off = playbook(sim, "upgrade.yml", tags="preflight", env=env, timeout=300,
                   extra_vars={"upgrade_validate_certs": False})
    # empty:1 is no Harvester cluster: the run may fail later, but not on TLS, and it warns
    assert "CERTIFICATE_VERIFY_FAILED" not in off.output, off
    assert "[WARNING]" in off.output and "validate_certs" in off.output, off
    env_off = playbook(sim, "upgrade.yml", tags="preflight", timeout=300,
                       env={**env, "K8S_AUTH_VERIFY_SSL": "no"})
    assert "CERTIFICATE_VERIFY_FAILED" not in env_off.output, env_off
    assert "TLS certificate verification is OFF" in env_off.output, env_off
