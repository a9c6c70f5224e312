"""Shared fixtures for the simulator's API tests: one in-process simulator per session.

``sim`` is a :class:`harvester_sim.testing.Running` (World + HTTPS API server + kubeconfig);
``ns`` a fresh namespace per test; ``kubectl(*args)`` runs the kubectl on PATH against it;
``raw(method, path, ...)`` speaks HTTP to it directly; ``api`` is a ``kubernetes`` ApiClient.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from harvester_sim import testing

KUBECTL = shutil.which("kubectl") or "kubectl"


@dataclass
class Raw:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@pytest.fixture(scope="session")
def sim() -> Iterator[testing.Running]:
    with testing.running("empty:2", speed=50, seed=7) as running:
        yield running


@pytest.fixture
def ns(sim: testing.Running) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    sim.world.client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": name}})
    yield name


@pytest.fixture(scope="session")
def kubectl(sim: testing.Running) -> Callable[..., subprocess.CompletedProcess[str]]:
    env = dict(os.environ)
    env.update(sim.env)

    def run(*args: str, check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess[str]:  # noqa: A002
        proc = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True,
                              timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    return run


@pytest.fixture(scope="session")
def raw(sim: testing.Running) -> Callable[..., Raw]:
    ctx = ssl.create_default_context()
    with tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False) as f:
        f.write(sim.server.ca_pem)
    ctx.load_verify_locations(f.name)

    def call(method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
             token: str | None = None, ctype: str = "application/json") -> Raw:
        conn = http.client.HTTPSConnection("127.0.0.1", sim.server.port, context=ctx,
                                           timeout=30)
        hdrs = {"Accept": "application/json"}
        if token != "":
            hdrs["Authorization"] = f"Bearer {token if token is not None else sim.token}"
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs["Content-Type"] = ctype
        hdrs.update(headers or {})
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        out = Raw(resp.status, {k: v for k, v in resp.getheaders()}, resp.read())
        conn.close()
        return out

    return call


@pytest.fixture(scope="session")
def api(sim: testing.Running) -> Any:
    from kubernetes import config

    return config.new_client_from_config(str(sim.kubeconfig))
