"""Simulated VirtualMachineImage imports against a loopback HTTP server."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from harvester_sim import crds
from harvester_sim.controllers import harvester_images, volumes
from harvester_sim.scenarios import objects
from harvester_sim.testing import wait_for
from harvester_sim.world import World

API = "harvesterhci.io/v1beta1"
ISO = bytes(range(256)) * 4096  # 1 MiB
NOMINAL = 6 * 1024 ** 3


class Handler(BaseHTTPRequestHandler):
    hits: dict[str, int] = {}

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        Handler.hits[self.path] = Handler.hits.get(self.path, 0) + 1
        if self.path.startswith("/missing"):
            self.send_error(404, "Not Found")
            return
        body = ISO
        if self.path.startswith("/flaky") and Handler.hits[self.path] == 1:
            body = bytes(len(ISO))  # corrupt once
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if self.path.startswith("/nominal"):
            self.send_header("X-Harvester-Sim-Nominal-Size", str(NOMINAL))
        self.end_headers()
        if self.path.startswith("/cut"):
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def world() -> Iterator[World]:
    w = World({"timings": {"download_mib_s": 100}}, speed=100.0, seed=1)
    for ns in ("default", "harvester-system"):
        w.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    crds.install(w.client, ("harvesterhci.io",))
    for sc in objects.storage_classes():
        w.client.create(sc)
    w.controllers["harvester_images"] = harvester_images.setup(w)
    w.controllers["volumes"] = volumes.setup(w)   # binds the cdi import claim
    w.runtime.start()
    yield w
    w.stop()
    assert not w.runtime.errors, w.runtime.errors[0]


def image(name: str, url: str, checksum: str = "", retry: int = 3) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "VirtualMachineImage",
            "metadata": {"name": name, "namespace": "harvester-system",
                         "annotations": {"harvesterhci.io/os-upgrade-image": "True"}},
            "spec": {"displayName": name, "sourceType": "download", "url": url,
                     "checksum": checksum, "retry": retry, "backend": "cdi",
                     "targetStorageClassName": "longhorn-static"}}


def conds(img: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (img.get("status") or {}).get("conditions") or []}


def imported(w: World, name: str) -> dict[str, Any] | None:
    img = w.client.get(API, "VirtualMachineImage", name, "harvester-system")
    c = conds(img).get("Imported")
    return img if c and c["status"] in ("True", "False") else None


def test_download_ok_with_checksum(world: World, server: str) -> None:
    sha = hashlib.sha512(ISO).hexdigest()
    world.client.create(image("p-iso", f"{server}/nominal/harvester.iso", sha))
    img = wait_for(lambda: imported(world, "p-iso"))
    st = img["status"]
    assert conds(img)["Imported"]["status"] == "True"
    assert conds(img)["Initialized"]["status"] == "True"
    assert st["progress"] == 100
    assert st["size"] == NOMINAL
    assert st["appliedUrl"].endswith("/nominal/harvester.iso")
    assert world.extras["image_blobs"][("harvester-system", "p-iso")] == ISO
    pvc = wait_for(lambda: (world.client.get("v1", "PersistentVolumeClaim", "p-iso",
                                             "harvester-system").get("status") or {})
                   .get("phase") == "Bound" and world.client.get(
                       "v1", "PersistentVolumeClaim", "p-iso", "harvester-system"))
    assert pvc["spec"]["storageClassName"] == "longhorn-static"
    spans = [e for e in world.timeline.snapshot() if e["event"] == "span"]
    assert spans and spans[0]["what"] == "iso_download"
    # deleting the image drops the bytes and (by ownerReference) the PVC
    world.client.delete(API, "VirtualMachineImage", "p-iso", "harvester-system")
    wait_for(lambda: ("harvester-system", "p-iso") not in world.extras["image_blobs"])
    assert world.client.try_get("v1", "PersistentVolumeClaim", "p-iso",
                                "harvester-system") is None


def test_download_is_paced_without_a_nominal_size(server: str) -> None:
    w = World({"timings": {"download_mib_s": 1}}, speed=10.0, seed=1)
    w.client.create({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": "harvester-system"}})
    crds.install(w.client, ("harvesterhci.io",))
    harvester_images.setup(w)
    w.runtime.start()
    try:
        w.client.create(image("slow", f"{server}/plain.iso"))
        seen: set[int] = set()

        def done() -> dict[str, Any] | None:
            img = w.client.get(API, "VirtualMachineImage", "slow", "harvester-system")
            seen.add(int((img.get("status") or {}).get("progress") or 0))
            return imported(w, "slow")
        wait_for(done)
        span = next(e for e in w.timeline.snapshot() if e["event"] == "span")
        assert span["end"] - span["start"] >= 0.9  # 1 MiB at 1 MiB/s simulated
        assert len(seen) >= 3  # progress was reported along the way
    finally:
        w.stop()


def test_checksum_mismatch_fails_after_retries(world: World, server: str) -> None:
    world.client.create(image("bad", f"{server}/nominal/x.iso", "ab" * 64, retry=1))
    img = wait_for(lambda: imported(world, "bad"))
    c = conds(img)
    assert c["Imported"]["status"] == "False"
    assert c["Imported"]["reason"] == "ImportFailed"
    assert "checksum mismatch" in c["Imported"]["message"]
    assert c["Imported"]["message"].startswith("retry attempted 1/1 failed due to error")
    assert c["RetryLimitExceeded"]["status"] == "True"
    assert img["status"]["failed"] == 2
    assert ("harvester-system", "bad") not in world.extras["image_blobs"]


def test_404_and_cut(world: World, server: str) -> None:
    world.client.create(image("gone", f"{server}/missing.iso", retry=0))
    world.client.create(image("cut", f"{server}/cut.iso", retry=0))
    img = wait_for(lambda: imported(world, "gone"))
    assert "HTTP 404" in conds(img)["Imported"]["message"]
    img = wait_for(lambda: imported(world, "cut"))
    assert conds(img)["Imported"]["status"] == "False"
    assert "connection closed" in conds(img)["Imported"]["message"]


def test_retry_recovers_from_a_corrupt_first_download(world: World, server: str) -> None:
    sha = hashlib.sha512(ISO).hexdigest()
    world.client.create(image("flaky", f"{server}/flaky.iso", sha, retry=3))
    img = wait_for(lambda: imported(world, "flaky"))
    assert conds(img)["Imported"]["status"] == "True"
    assert img["status"]["failed"] == 1
    assert conds(img)["RetryLimitExceeded"]["status"] == "False"
