"""Run the simulator in-process for tests: World + API server + a kubeconfig on disk.

```python
from harvester_sim import testing

with testing.running("three-node", speed=100) as sim:
    subprocess.run(["kubectl", "get", "nodes"], env={**os.environ, **sim.env})
    sim.world.client.get("v1", "Node", "node-1")
```

``running(..., service_accounts=["harvester-system/harvester-upgrade"])`` also creates those
ServiceAccounts when missing and writes one kubeconfig per ServiceAccount with a bound token
(``sim.sa_kubeconfigs["harvester-system/harvester-upgrade"]``, ``sim.sa_tokens[...]``); what
the ServiceAccount may do is up to the RBAC objects in the cluster (the admin kubeconfig is
``system:masters``). ``sim.service_account_kubeconfig("ns/name")`` makes one later.

Scenario: a built-in name or YAML path (``harvester_sim.scenarios.loader.load``), a dict, or
``"empty:N"`` (an empty cluster with N nodes).

``wait_for(check, timeout, what)`` polls until ``check()`` returns something truthy: the one
way tests wait for the simulated cluster to reach a state.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .api.server import ApiServer
from .world import World, _optional


@dataclass
class Running:
    world: World
    server: ApiServer
    kubeconfig: Path
    url: str
    token: str
    env: dict[str, str] = field(default_factory=dict)
    sa_kubeconfigs: dict[str, Path] = field(default_factory=dict)
    sa_tokens: dict[str, str] = field(default_factory=dict)

    def service_account_kubeconfig(self, sa: str, path: str | Path | None = None,
                                   expiration_seconds: int = 86400) -> Path:
        """Kubeconfig with a fresh bound token for ServiceAccount ``"ns/name"`` (created when
        missing), next to the admin kubeconfig unless ``path`` is given."""
        ns, _, name = sa.partition("/")
        if not ns or not name:
            raise ValueError(f"service account {sa!r}: expected NAMESPACE/NAME")
        token = self.server.service_account_token(ns, name, expiration_seconds)
        p = Path(path) if path is not None else self.kubeconfig.with_name(
            f"kubeconfig-{ns}-{name}")
        self.server.write_kubeconfig(p, f"system:serviceaccount:{ns}:{name}", token=token)
        self.sa_kubeconfigs[sa] = p
        self.sa_tokens[sa] = token
        return p

    def env_for(self, kubeconfig: str | Path) -> dict[str, str]:
        """``env`` with another kubeconfig (e.g. a ServiceAccount's)."""
        return {**self.env, "KUBECONFIG": str(kubeconfig), "K8S_AUTH_KUBECONFIG": str(kubeconfig)}

    @property
    def store(self) -> Any:
        return self.world.store

    def stats(self) -> dict[str, Any]:
        return self.server.stats()


def _empty_nodes(spec: str) -> int | None:
    if not spec.startswith("empty:"):
        return None
    n = spec.split(":", 1)[1]
    if not n.isdigit() or int(n) < 0:
        raise ValueError(f"scenario {spec!r}: expected empty:N with N >= 0")
    return int(n)


def resolve_scenario(scenario: str | dict[str, Any] | None) -> tuple[dict[str, Any], int | None]:
    """(scenario dict, nodes to create by hand) for a name, path, dict or ``empty:N``."""
    if scenario is None:
        return {}, 0
    if isinstance(scenario, dict):
        return scenario, None
    n = _empty_nodes(scenario)
    loader = _optional("harvester_sim.scenarios.loader")
    if n is not None:
        if loader is not None:
            return ({"name": "empty", "description": f"empty cluster with {n} nodes",
                     "nodes": [{"name": "node", "count": n}] if n else []}, None)
        return {"name": f"empty:{n}"}, n
    if loader is None:
        raise ValueError(f"unknown scenario {scenario!r} (no scenario loader available; "
                         "use empty:N)")
    return loader.load(scenario), None


def make_node(name: str) -> dict[str, Any]:
    """A minimal Ready node (used when no scenario loader builds the cluster)."""
    from .clock import Clock

    now = Clock.timestamp()
    return {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {"node-role.kubernetes.io/control-plane": "true"}},
        "spec": {}, "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": f"10.0.0.{10 + int(name[-1:] or 0)}"
                           if name[-1:].isdigit() else "10.0.0.10"},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.31.4+rke2r1", "osImage": "Harvester v1.5.1",
                         "kernelVersion": "5.14.21", "containerRuntimeVersion":
                         "containerd://1.7.23-k3s2", "architecture": "amd64",
                         "operatingSystem": "linux"}}}


def build_world(scenario: str | dict[str, Any] | None, speed: float | None = None,
                seed: int | None = None, without: Iterable[str] = ()) -> World:
    """A started World for ``scenario`` (see :func:`resolve_scenario`), without the
    controllers named in ``without`` (see :class:`World`)."""
    scn, n_nodes = resolve_scenario(scenario)
    world = World(scn, speed=speed, seed=seed, without=without)
    world.start()
    if n_nodes:
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            if world.client.try_get("v1", "Namespace", ns) is None:
                world.client.create({"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": ns}})
        for i in range(1, n_nodes + 1):
            if world.client.try_get("v1", "Node", f"node-{i}") is None:
                world.client.create(make_node(f"node-{i}"))
    elif world.client.try_get("v1", "Namespace", "default") is None:
        world.client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": "default"}})
    return world


@contextlib.contextmanager
def running(scenario: str | dict[str, Any] | None = "empty:3", speed: float | None = None,
            seed: int | None = None, port: int = 0, tokens: dict[str, str] | None = None,
            service_accounts: list[str] | tuple[str, ...] = (), **kw: Any) -> Iterator[Running]:
    """Start World + API server on a free port; stop both on exit."""
    world = build_world(scenario, speed=speed, seed=seed)
    server: ApiServer | None = None
    try:
        server = ApiServer(world, port=port, tokens=tokens, **kw).start()
        with tempfile.TemporaryDirectory(prefix="harvester-sim-") as d:
            kc = server.write_kubeconfig(Path(d) / "kubeconfig")
            env = {"KUBECONFIG": str(kc), "K8S_AUTH_KUBECONFIG": str(kc),
                   "KUBECACHEDIR": str(Path(d) / "kube-cache")}
            sim = Running(world, server, kc, server.url, server.token, env)
            for sa in service_accounts:
                sim.service_account_kubeconfig(sa)
            yield sim
    finally:
        if server is not None:
            server.stop()
        world.stop()


T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float = 60.0, what: str = "", *,
             ignore: tuple[type[Exception], ...] = (), poll: float = 0.02) -> T:
    """Call ``check`` every ``poll`` seconds until it returns something truthy, and return
    that. After ``timeout`` (real) seconds: ``AssertionError`` naming ``what`` and the last
    answer. An exception of a type in ``ignore`` counts as a falsy answer (e.g. ``ApiError``
    while the object does not exist yet); any other propagates at once."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
        except ignore as exc:   # an empty tuple catches nothing
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for "
                                 f"{what or getattr(check, '__name__', 'condition')} "
                                 f"(last: {last!r})")
        time.sleep(poll)
