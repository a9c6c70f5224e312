"""Releases: catalog, real ISO images (pycdlib), and the release HTTP server with faults."""

from __future__ import annotations

import hashlib
import http.client
import io
import threading
import types
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlsplit

import pycdlib
import pytest
import yaml

from harvester_sim.releases import (
    CATALOG,
    IsoReader,
    Release,
    ReleaseServer,
    ReleaseSet,
    build_iso,
    get_release,
    images_diff,
    iso_http_handler,
    known_versions,
    release_from_dict,
    sha512,
    version_key,
)
from harvester_sim.releases import server as server_module
from harvester_sim.releases.iso import build_iso_uncached


@pytest.fixture(scope="module")
def server() -> Iterator[ReleaseServer]:
    rs = ReleaseSet.from_scenario({"installed": "v1.5.1", "available": ["v1.6.0", "v1.6.1"]})
    srv = ReleaseServer(rs, speed=1000.0).start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def _no_faults(server: ReleaseServer) -> Iterator[None]:
    server.clear_fault()
    server.rate_bytes_per_s = None
    server.speed = 1000.0
    yield
    server.clear_fault()


class PacingClock:
    """The release server's wall clock for one test, advanced only by the server's own pacing
    waits: a paced body then takes exactly the wall time the model gives it, however long the
    (loaded) machine takes to move the bytes. Stands in for the server's stop Event too, whose
    ``wait`` is the pacing sleep."""

    def __init__(self, stop: threading.Event) -> None:
        self.t = 0.0
        self._stop = stop

    def monotonic(self) -> float:
        return self.t

    def wait(self, seconds: float) -> bool:
        if self._stop.is_set():
            return True
        self.t += seconds
        return False

    def is_set(self) -> bool:
        return self._stop.is_set()

    def set(self) -> None:
        self._stop.set()

    def clear(self) -> None:
        self._stop.clear()


@pytest.fixture
def paced(server: ReleaseServer, monkeypatch: pytest.MonkeyPatch) -> PacingClock:
    clock = PacingClock(server._stop)
    monkeypatch.setattr(server_module, "Clock", types.SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(server, "_stop", clock)
    return clock


def _get(url: str, headers: dict[str, str] | None = None,
         method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request(method, u.path, headers=headers or {})
        resp = conn.getresponse()
        try:
            body = resp.read()
        except http.client.IncompleteRead as exc:
            body = exc.partial
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


# --------------------------------------------------------------------------- catalog

def test_catalog_has_required_releases_with_consistent_ordering() -> None:
    for v in ("v1.4.3", "v1.5.0", "v1.5.1", "v1.6.0", "v1.6.1", "v1.7.0"):
        assert v in CATALOG
    vs = known_versions()
    rels = [CATALOG[v] for v in vs]
    for older, newer in zip(rels, rels[1:], strict=False):
        assert version_key(older.kubernetes.split("+")[0]) <= version_key(
            newer.kubernetes.split("+")[0])
        assert version_key(older.rancher) <= version_key(newer.rancher)
    r = CATALOG["v1.5.1"]
    assert (r.harvester_chart, r.os) == ("1.5.1", "Harvester v1.5.1")
    assert r.kubernetes.endswith("+rke2r1") and r.kubernetes.startswith("v1.32.")


def test_image_lists_realistic_and_deterministic() -> None:
    for v in known_versions():
        r = CATALOG[v]
        names = r.image_names()
        assert 300 <= len(names) <= 500, (v, len(names))
        assert len(set(names)) == len(names)
        assert f"docker.io/rancher/harvester:{v}" in names
        assert any("/longhorn-engine:" in n for n in names)
        assert any("/longhorn-instance-manager:" in n for n in names)
        assert any("/virt-launcher:" in n for n in names)
        assert any(n.startswith("docker.io/rancher/rke2-runtime:") for n in names)
        assert all(i.size > 0 for i in r.images())
        # fresh instance, same list
        assert release_from_dict({"version": v}).image_names() == names
    a, b = CATALOG["v1.6.0"], CATALOG["v1.6.1"]
    shared = set(a.image_names()) & set(b.image_names())
    assert len(shared) > 0.7 * len(a.image_names())      # a patch release shares most
    new, gone = images_diff(a, b)
    assert new and gone
    assert f"docker.io/rancher/harvester:{b.version}" in new


def test_release_from_dict_overrides_and_synthesis() -> None:
    r = release_from_dict({"version": "v1.6.0", "kubernetes": "v1.33.9+rke2r1",
                           "minUpgradableVersion": "v1.5.1", "tags": ["latest"]})
    assert r.kubernetes == "v1.33.9+rke2r1" and r.min_upgradable_version == "v1.5.1"
    assert r.tags == ("latest",) and r.rancher == CATALOG["v1.6.0"].rancher
    assert "docker.io/rancher/rke2-runtime:v1.33.9-rke2r1" in r.image_names()
    s = get_release("v1.6.2")
    assert s.os == "Harvester v1.6.2"
    assert version_key(s.kubernetes.split("+")[0]) > version_key(
        CATALOG["v1.6.1"].kubernetes.split("+")[0])
    rc = release_from_dict({"version": "v1.7.0-rc1", "base": "v1.7.0"})
    assert rc.os == "Harvester v1.7.0-rc1" and not rc.ga
    with pytest.raises(ValueError):
        release_from_dict({"version": "v1.6.0", "bogus": 1})
    rs = ReleaseSet.from_scenario({"installed": "v1.5.1",
                                   "available": [{"version": "v1.6.0", "rancher": "v2.12.1"}]})
    assert rs.installed is not None and rs.installed.version == "v1.5.1"
    assert rs.get("v1.6.0").rancher == "v2.12.1"


# --------------------------------------------------------------------------- ISO

def test_iso_is_real_and_carries_release_metadata() -> None:
    r = CATALOG["v1.6.0"]
    data = build_iso(r)
    assert len(data) < 2 * 1024 * 1024
    assert data == build_iso_uncached(r)  # deterministic
    assert build_iso(r) is data            # cached
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(data))
    try:
        assert iso.has_rock_ridge() and iso.has_joliet()
        out = io.BytesIO()
        iso.get_file_from_iso_fp(out, rr_path="/harvester-release.yaml")
        meta = yaml.safe_load(out.getvalue())
        out = io.BytesIO()
        iso.get_file_from_iso_fp(
            out, joliet_path="/bundle/harvester/images-lists-archive/v1.6.0/image_list_all.txt")
        assert out.getvalue().decode().splitlines() == r.image_names()
    finally:
        iso.close()
    assert meta["harvester"] == "v1.6.0" and meta["harvesterChart"] == "1.6.0"
    assert meta["os"] == "Harvester v1.6.0" and meta["kubernetes"] == r.kubernetes
    assert meta["rancher"] == r.rancher and meta["kubevirt"] == r.kubevirt
    assert meta["minUpgradableVersion"] == r.min_upgradable_version
    assert meta["rancherDependencies"]["fleet"]["app"] == r.fleet
    for key in ("monitoringChart", "loggingChart"):
        assert meta[key]


def test_iso_reader_lists_bundle_and_archives() -> None:
    r = CATALOG["v1.6.0"]
    rd = IsoReader(build_iso(r))
    files = rd.list()
    assert "harvester-release.yaml" in files and "rootfs.squashfs" in files
    assert rd.read("rootfs.squashfs").startswith(b"hsqs")
    assert rd.exists("bundle/harvester/images-lists-archive/v1.6.0/image_list_all.txt")
    assert rd.exists("bundle/harvester/images-lists-archive/v1.5.1/image_list_all.txt")
    prev = rd.read("bundle/harvester/images-lists-archive/v1.5.1/image_list_all.txt")
    assert prev.decode().splitlines() == CATALOG["v1.5.1"].image_names()
    meta = yaml.safe_load(rd.read("bundle/metadata.yaml"))
    listed: list[str] = []
    for kind in ("common", "rke2", "agent"):
        assert meta["images"][kind]
        for entry in meta["images"][kind]:
            assert rd.read("bundle/" + entry["archive"]).startswith(b"\x28\xb5\x2f\xfd")
            listed += rd.read("bundle/" + entry["list"]).decode().splitlines()
    assert sorted(listed) == r.image_names()
    assert rd.release_yaml()["harvester"] == "v1.6.0"
    with pytest.raises(KeyError):
        rd.read("nope.txt")


def test_iso_http_handler_serves_like_nginx() -> None:
    rd = IsoReader(build_iso(CATALOG["v1.5.1"]))
    h = iso_http_handler(rd)
    status, hdrs, body = h("GET", "/harvester-iso/harvester-release.yaml", "", {}, b"")
    assert status == 200 and yaml.safe_load(body)["harvester"] == "v1.5.1"
    assert h("GET", "/harvester-iso/missing", "", {}, b"")[0] == 404
    assert h("POST", "/harvester-iso/harvester-release.yaml", "", {}, b"")[0] == 405
    assert h("HEAD", "/harvester-iso/rootfs.squashfs", "", {}, b"")[2] == b""


def test_non_ga_iso_has_no_image_list_archive() -> None:
    rc = release_from_dict({"version": "v1.7.0-rc1", "base": "v1.7.0"})
    rd = IsoReader(build_iso(rc))
    assert not rd.list("bundle/harvester/images-lists-archive")


# --------------------------------------------------------------------------- server

def test_download_and_checksum_match(server: ReleaseServer) -> None:
    url = server.url_for("v1.6.0")
    assert url.startswith("http://127.0.0.1:") and url.endswith(
        "/releases/v1.6.0/harvester-v1.6.0-amd64.iso")
    with urllib.request.urlopen(url, timeout=30) as resp:
        data = resp.read()
    with urllib.request.urlopen(server.checksum_url_for("v1.6.0"), timeout=30) as resp:
        line = resp.read().decode()
    assert line.split()[1] == "harvester-v1.6.0-amd64.iso"
    assert hashlib.sha512(data).hexdigest() == line.split()[0] == server.checksum("v1.6.0")
    obj = server.version_object("v1.6.0")
    assert obj["spec"]["isoURL"] == url and obj["spec"]["isoChecksum"] == sha512(data)
    assert obj["spec"]["minUpgradableVersion"] == "v1.5.0"


def test_head_and_range(server: ReleaseServer) -> None:
    url = server.url_for("v1.5.1")
    full = server.iso_bytes("v1.5.1")
    status, hdrs, body = _get(url, method="HEAD")
    assert status == 200 and body == b"" and int(hdrs["content-length"]) == len(full)
    assert hdrs["accept-ranges"] == "bytes"
    status, hdrs, body = _get(url, {"Range": "bytes=100-199"})
    assert status == 206 and body == full[100:200]
    assert hdrs["content-range"] == f"bytes 100-199/{len(full)}"
    status, _, body = _get(url, {"Range": "bytes=1000-"})
    assert status == 206 and body == full[1000:]
    status, _, body = _get(url, {"Range": "bytes=-10"})
    assert status == 206 and body == full[-10:]
    status, hdrs, _ = _get(url, {"Range": f"bytes={len(full)}-"})
    assert status == 416 and hdrs["content-range"] == f"bytes */{len(full)}"
    # resume: two ranges make the whole file
    half = len(full) // 2
    a = _get(url, {"Range": f"bytes=0-{half - 1}"})[2]
    b = _get(url, {"Range": f"bytes={half}-"})[2]
    assert a + b == full


def test_unknown_release_404(server: ReleaseServer) -> None:
    assert _get(server.base_url + "/releases/v9.9.9/harvester-v9.9.9-amd64.iso")[0] == 404
    assert _get(server.base_url + "/nothing")[0] == 404


def test_fault_404(server: ReleaseServer) -> None:
    server.set_fault("v1.6.0", "404")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(server.url_for("v1.6.0"), timeout=30)
    assert exc.value.code == 404
    assert _get(server.checksum_url_for("v1.6.0"))[0] == 200   # checksum still there
    assert _get(server.url_for("v1.6.1"))[0] == 200            # other releases unaffected
    server.set_fault("v1.6.0", "404", files="all")
    assert _get(server.checksum_url_for("v1.6.0"))[0] == 404
    server.clear_fault("v1.6.0")
    assert _get(server.url_for("v1.6.0"))[0] == 200


def test_fault_corrupt(server: ReleaseServer) -> None:
    server.set_fault("v1.6.0", "corrupt")
    status, _, body = _get(server.url_for("v1.6.0"))
    assert status == 200 and len(body) == len(server.iso_bytes("v1.6.0"))
    assert sha512(body) != server.checksum("v1.6.0")
    assert _get(server.checksum_url_for("v1.6.0"))[2].split()[0].decode() == \
        server.checksum("v1.6.0")


def test_fault_cut_gives_short_read(server: ReleaseServer) -> None:
    server.set_fault("v1.6.0", "cut", percent=40)
    full = server.iso_bytes("v1.6.0")
    status, hdrs, body = _get(server.url_for("v1.6.0"))
    assert status == 200 and int(hdrs["content-length"]) == len(full)
    assert len(body) == int(len(full) * 0.4)
    assert body == full[:len(body)]
    with pytest.raises(http.client.IncompleteRead):
        with urllib.request.urlopen(server.url_for("v1.6.0"), timeout=30) as resp:
            resp.read()


def test_fault_times_limits_uses(server: ReleaseServer) -> None:
    server.set_fault("v1.6.1", "cut", percent=10, times=1)
    full = server.iso_bytes("v1.6.1")
    assert len(_get(server.url_for("v1.6.1"))[2]) < len(full)
    assert _get(server.url_for("v1.6.1"))[2] == full   # the retry succeeds
    assert server.fault_for("v1.6.1") is None


def test_fault_slow_takes_measurably_longer(server: ReleaseServer, paced: PacingClock) -> None:
    url = server.url_for("v1.5.1")
    _get(url)
    assert paced.t == 0                      # unthrottled: no pacing at all
    nominal = server.nominal_size("v1.5.1")
    # the whole (nominal ~6.5 GB) ISO in 500 simulated s = 0.5 wall s at speed 1000
    server.set_fault("v1.5.1", "slow", rate_bytes_per_s=nominal / 500)
    assert server.expected_seconds("v1.5.1") == pytest.approx(500)
    assert server.expected_wall_seconds("v1.5.1") == pytest.approx(0.5)
    status, _, body = _get(url)
    assert status == 200 and body == server.iso_bytes("v1.5.1")
    assert paced.t == pytest.approx(0.5)
    # the same fault at a higher speed is proportionally faster
    server.speed = 5000.0
    t0 = paced.t
    _get(url)
    assert paced.t - t0 == pytest.approx(0.1)


def test_base_rate_models_download_time(server: ReleaseServer, paced: PacingClock) -> None:
    server.rate_bytes_per_s = server.nominal_size("v1.6.1") / 200   # 200 simulated s
    server.speed = 1000.0
    half = len(server.iso_bytes("v1.6.1")) // 2
    status, _, body = _get(server.url_for("v1.6.1"), {"Range": f"bytes=0-{half - 1}"})
    assert status == 206 and len(body) == half
    assert paced.t == pytest.approx(0.1, rel=0.01)   # half the ISO: half of 0.2 wall s


class HeldRunClock(PacingClock):
    """A simulation clock held half the time (its runtime stalls): of each pacing wait, only
    half counts as run time (``Clock.run_elapsed``)."""

    def __init__(self, stop: threading.Event, speed: float) -> None:
        super().__init__(stop)
        self.speed = speed
        self.run = 0.0

    def run_elapsed(self) -> float:
        return self.run

    def wait(self, seconds: float) -> bool:
        if super().wait(seconds):
            return True
        self.run += seconds / 2
        return False


def test_a_held_clock_holds_the_download() -> None:
    rs = ReleaseSet.from_scenario({"installed": "v1.5.1", "available": ["v1.6.1"]})
    srv = ReleaseServer(rs, speed=1.0)
    clock = HeldRunClock(srv._stop, 1000.0)
    srv.clock = clock
    srv._stop = clock  # type: ignore[assignment]
    srv.rate_bytes_per_s = srv.nominal_size("v1.6.1") / 200    # 200 simulated s
    srv.start()
    try:
        assert srv.expected_wall_seconds("v1.6.1") == pytest.approx(0.2)
        status, _, body = _get(srv.url_for("v1.6.1"))
        assert status == 200 and body == srv.iso_bytes("v1.6.1")
    finally:
        srv.stop()
    # 200 simulated seconds of the clock's run time, which took twice the wall time
    assert clock.run == pytest.approx(0.2, rel=0.01)
    assert clock.t == pytest.approx(0.4, rel=0.01)


def test_release_type_is_hashable_value() -> None:
    a = release_from_dict("v1.6.0")
    assert isinstance(a, Release) and a == CATALOG["v1.6.0"] and hash(a) == hash(CATALOG["v1.6.0"])


def test_faults_from_the_fault_engine_and_world_wiring() -> None:
    from types import SimpleNamespace

    from harvester_sim.clock import Clock
    from harvester_sim.faults import Faults
    from harvester_sim.timings import Timings

    clock = Clock(2000.0)
    faults = Faults(clock, [{"kind": "release_download", "target": {"version": "v1.6.0"},
                             "fault": "cut", "percent": 25, "times": 1}])
    world = SimpleNamespace(
        scenario={"releases": {"installed": "v1.5.1", "available": ["v1.6.0"]}},
        clock=clock, faults=faults, timings=Timings())
    srv = ReleaseServer.for_world(world).start()
    try:
        assert srv.speed == 2000.0 and srv.rate_bytes_per_s == 100 * 1024 * 1024
        full = srv.iso_bytes("v1.6.0")
        assert _get(srv.url_for("v1.6.0"), method="HEAD")[0] == 200   # HEAD: not consumed
        assert len(_get(srv.url_for("v1.6.0"))[2]) == int(len(full) * 0.25)
        assert _get(srv.url_for("v1.6.0"))[2] == full                  # fired once
        assert [f["kind"] for f in faults.fired] == ["release_download"]
        # ~6.9 GB at 100 MiB/s = ~66 simulated s = ~33 ms at speed 2000
        assert 60 < srv.expected_seconds("v1.6.0") < 70
    finally:
        srv.stop()
