"""What the collection reads narrows what a narrowed ServiceAccount must be granted
(deploy/rbac.yaml, docs/rbac.md): Secrets of fleet-local only of Rancher's machine-plan type,
kubelet stats only when the disk_space check runs, and a clear message when they are
refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

client = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client")
pa = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.phase_initialize")

PLAN_TYPE = "type=rke.cattle.io/machine-plan"


@pytest.mark.parametrize(("kind", "ns", "given", "sent"), [
    ("Secret", "fleet-local", None, PLAN_TYPE),
    ("Secret", "fleet-local", "", PLAN_TYPE),
    ("Secret", "fleet-local", "metadata.name=m-machine-plan",
     f"metadata.name=m-machine-plan,{PLAN_TYPE}"),
    ("Secret", "fleet-local", PLAN_TYPE, PLAN_TYPE),
    # other namespaces and kinds are asked for as given
    ("Secret", "default", None, None),
    ("Secret", None, None, None),
    ("ConfigMap", "fleet-local", None, None),
    ("Node", None, "metadata.name=n1", "metadata.name=n1"),
])
def test_secrets_of_fleet_local_are_read_only_of_the_machine_plan_type(
        kind: str, ns: str | None, given: str | None, sent: str | None) -> None:
    assert client.secret_selector(kind, ns, given) == sent


class _Res:
    kind = "Secret"

    def get(self, **kw: Any) -> Any:   # what the watcher calls; never reached here
        raise AssertionError(kw)


class _Recorder(client.Kube):
    """A Kube whose transport records the keyword arguments of each list and watch."""

    def __init__(self) -> None:   # no API client: the calls below are intercepted
        self.calls: list[dict[str, Any]] = []

    def on_resource(self, api_version: str, kind: str, fn: Any) -> Any:
        class R:
            @staticmethod
            def get(**kw: Any) -> Any:
                self.calls.append(kw)
                return {"items": [], "metadata": {"resourceVersion": "1"}}
        return fn(R)


def test_list_and_watch_send_the_type_selector(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = _Recorder()
    monkeypatch.setattr(client, "_raw", lambda fn, **kw: fn(**kw))
    kube.list("v1", "Secret", "fleet-local")
    assert kube.calls[-1]["field_selector"] == PLAN_TYPE

    seen: dict[str, Any] = {}

    class W:
        def stream(self, fn: Any, serialize: bool = False, **kw: Any) -> Any:
            seen.update(kw)
            return iter(())
    list(kube.stream(_Res(), namespace="fleet-local", watcher=W()))
    assert seen["field_selector"] == PLAN_TYPE


class _Proxy:
    """``raw_get`` on a node proxy answering ``status``."""

    def __init__(self, status: int, body: bytes = b"") -> None:
        self.status, self.body, self.paths = status, body, []

    def raw_get(self, path: str, timeout: float = 30.0) -> tuple[int, bytes]:
        self.paths.append(path)
        return self.status, self.body


def test_a_refused_node_proxy_names_the_grant_and_the_way_around() -> None:
    msg = pa.node_disk(_Proxy(403), "node-1")
    assert isinstance(msg, str)
    assert "HTTP 403" in msg and "nodes/proxy" in msg and "docs/rbac.md" in msg
    assert "preflight_skip_checks: [disk_space]" in msg
    assert pa.node_disk(_Proxy(500), "node-1") == "stats/summary answered HTTP 500"


def test_node_disk_reads_stats_then_configz() -> None:
    proxy = _Proxy(200, json.dumps({"node": {"fs": {"usedBytes": 10,
                                                    "capacityBytes": 100}}}).encode())
    disk = pa.node_disk(proxy, "node-1")
    assert not isinstance(disk, str) and disk.used_bytes == 10
    assert proxy.paths == ["/api/v1/nodes/node-1/proxy/stats/summary",
                           "/api/v1/nodes/node-1/proxy/configz"]
