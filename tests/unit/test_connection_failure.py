"""A module that cannot connect says in one line what it could not reach, from which
configuration, and why (not urllib3's retry chain)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, SSLError

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    client,
    connection,
)
from testkit import closed_port


@pytest.fixture(autouse=True)
def fresh_client_state(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """kubernetes.core keeps clients per configuration digest and the kubernetes client a
    default configuration per process: each test starts without them. Its discovery cache
    (``$TMPDIR/k8srcp-<sha of host+user>.json``) goes to the test's own directory: a file a
    simulator left in /tmp for the same address (its port reused here) would answer the
    version and discovery without a connection, and connecting would succeed."""
    import kubernetes
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as kc
    kc._pool.clear()
    kubernetes.client.Configuration.set_default(None)
    yield
    kc._pool.clear()
    kubernetes.client.Configuration.set_default(None)


@pytest.fixture
def port() -> Iterator[int]:
    """A port nothing listens on, held for the whole test (:func:`testkit.closed_port`)."""
    with closed_port() as p:
        yield p


def test_refused_connection_names_the_address_the_source_and_the_cause(port: int) -> None:
    pool = urllib3.HTTPSConnectionPool("127.0.0.1", port, retries=False)
    with pytest.raises(urllib3.exceptions.NewConnectionError) as raw:
        pool.urlopen("GET", "/version", retries=False)
    exc = MaxRetryError(pool, "/version", raw.value)
    msg = connection.connection_failure(exc, {"kubeconfig": "/etc/harvester.yaml",
                                          "context": "prod"})
    assert msg == (f"cannot reach the Kubernetes API at https://127.0.0.1:{port} "
                   "(kubeconfig /etc/harvester.yaml, context prod): connection refused")
    assert "\n" not in msg


def test_tls_failure_points_at_the_ca() -> None:
    pool = urllib3.HTTPSConnectionPool("10.0.0.10", 6443)
    exc = MaxRetryError(pool, "/version", SSLError("certificate verify failed: self-signed"))
    msg = connection.connection_failure(exc, {"host": "https://10.0.0.10:6443"})
    assert msg.startswith("cannot reach the Kubernetes API at https://10.0.0.10:6443 "
                          "(host option / K8S_AUTH_HOST): TLS failed (certificate verify")
    assert "validate_certs" in msg


def test_refused_credentials_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/home/op/.kube/config")
    monkeypatch.delenv("K8S_AUTH_KUBECONFIG", raising=False)
    monkeypatch.delenv("K8S_AUTH_CONTEXT", raising=False)
    msg = connection.connection_failure(ApiException(status=401, reason="Unauthorized"), {})
    assert msg == ("the Kubernetes API refused the credentials of kubeconfig "
                   "/home/op/.kube/config: 401 Unauthorized")


class Failed(Exception):
    pass


class FakeModule:
    def __init__(self, params: dict[str, Any]) -> None:
        self.params, self.check_mode, self.msgs = params, False, []

    def fail_json(self, **kw: Any) -> None:
        self.msgs.append(kw["msg"])
        raise Failed(kw["msg"])

    def warn(self, _msg: str) -> None:
        pass


def test_from_module_fails_the_module_with_the_one_line(tmp_path: Any, port: int) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    mod = FakeModule({"kubeconfig": str(kc)})
    with pytest.raises(Failed):
        client.Kube.from_module(mod)
    assert mod.msgs == [f"cannot reach the Kubernetes API at https://127.0.0.1:{port} "
                        f"(kubeconfig {kc}): connection refused"]


def test_node_modules_and_the_inventory_connect_the_same_way(port: int) -> None:
    """Connecting without a module (node modules, the nodes inventory plugin) raises the same
    one line as an ApiError."""
    with pytest.raises(client.ApiError) as err:
        client.Kube.from_options(host=f"https://127.0.0.1:{port}", api_key="t")
    assert err.value.message == (f"cannot reach the Kubernetes API at https://127.0.0.1:{port}"
                                 " (host option / K8S_AUTH_HOST): connection refused")
