"""The release server: where simulated ``Version`` objects point their ``isoURL``.

A stdlib ``ThreadingHTTPServer`` on loopback, in a daemon thread, serving::

    GET|HEAD /releases/<version>/harvester-<version>-amd64.iso          (Range supported)
    GET|HEAD /releases/<version>/harvester-<version>-amd64.iso.sha512   ("<hex>  <name>")

Download-time model. The ISO served is small (a few hundred KiB) but stands for a real one
of ``Release.iso_size`` bytes (~6.5 GB). Rates (the server's ``rate_bytes_per_s`` and a
``slow`` fault's) are in bytes per *simulated* second of that nominal ISO, so a download
lasts ``iso_size / rate`` simulated seconds, i.e. ``iso_size / rate / speed`` wall seconds,
whatever the served size (with a simulation clock, paced on its run time: while the clock
is held, because the simulator's runtime stalls, the transfer waits too).
``rate_bytes_per_s=None`` (default) means unthrottled.

Faults, per release, switchable at runtime with :meth:`ReleaseServer.set_fault` (or from the
scenario's fault engine, kind ``release_download``):

* ``slow``: ``rate_bytes_per_s`` (nominal bytes per simulated second) or ``duration_s``
  (simulated seconds for the whole ISO);
* ``corrupt``: the served bytes differ from the published checksum (same length);
* ``404``: the ISO (``files: all`` also the checksum) answers 404;
* ``cut``: the connection is closed after ``percent`` % of the body (Content-Length
  announces the full length, so clients see a short read).

``times`` limits a fault to that many GET requests (then it is removed); ``None`` = always.
HEAD requests see switched-on faults without consuming them.

From a scenario, the same faults come through :class:`harvester_sim.faults.Faults`, kind
``release_download``, context ``version`` and ``file`` (``iso``; ``sha512`` too when the
source has ``checksum_aware = True``, as the scenario loader's ``DownloadFaults`` has, so
that ``image_download_404`` with ``files: all`` also hides the checksum file), e.g.::

    - {kind: release_download, target: {version: v1.6.0}, fault: cut, percent: 30, times: 1}

(the engine's ``times``/``trigger`` decide when it fires; each firing affects one GET).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import email.utils
import re
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from ..clock import Clock
from .catalog import CATALOG, Release, ReleaseSet
from .iso import build_iso, checksum_file, sha512

FAULT_KINDS = ("slow", "corrupt", "404", "cut")
_FAULT_ALIASES = {"not_found": "404", "notfound": "404", "missing": "404", "truncate": "cut",
                  "cut_connection": "cut", "checksum_mismatch": "corrupt"}
_PATH_RE = re.compile(r"^/releases/([^/]+)/harvester-([^/]+)-amd64\.iso(\.sha512)?$")
_CHUNK = 64 * 1024


class SpeedSource(Protocol):
    """Anything with a ``speed`` (e.g. :class:`harvester_sim.clock.Clock`)."""

    speed: float


class FaultSource(Protocol):
    """What :class:`harvester_sim.faults.Faults` offers (``match`` consumes one-shots)."""

    def match(self, kind: str, **ctx: Any) -> dict[str, Any] | None: ...


@dataclass
class Fault:
    """A fault on one release's downloads."""

    kind: str                              # slow | corrupt | 404 | cut
    rate_bytes_per_s: float | None = None  # slow: nominal bytes per simulated second
    duration_s: float | None = None        # slow: simulated seconds for the whole ISO
    percent: float = 50.0                  # cut: share of the body sent before closing
    files: str = "iso"                     # 404: "iso" or "all" (checksum too)
    times: int | None = None               # requests affected; None = every request

    def __post_init__(self) -> None:
        self.kind = _FAULT_ALIASES.get(str(self.kind).lower(), str(self.kind).lower())
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown release fault {self.kind!r} (one of {FAULT_KINDS})")
        if self.kind == "slow" and not (self.rate_bytes_per_s or self.duration_s):
            raise ValueError("slow fault needs rate_bytes_per_s or duration_s")
        if not 0 <= float(self.percent) <= 100:
            raise ValueError("cut percent must be within 0..100")

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Fault:
        """From a scenario fault dict: ``{fault|mode: cut, percent: 40, ...}``."""
        names = {f.name for f in dataclasses.fields(cls)}
        kind = spec.get("fault") or spec.get("mode") or spec.get("type")
        params = {k: v for k, v in spec.items() if k in names and k not in ("kind", "times")}
        return cls(kind=str(kind), **params)


@dataclass
class RequestRecord:
    method: str
    path: str
    version: str | None
    status: int
    bytes_sent: int
    range: str | None
    fault: str | None
    wall_s: float


def download_seconds(nominal_bytes: int, rate_bytes_per_s: float | None) -> float:
    """Simulated seconds a download of ``nominal_bytes`` takes at ``rate_bytes_per_s``."""
    if not rate_bytes_per_s:
        return 0.0
    return nominal_bytes / float(rate_bytes_per_s)


class ReleaseServer:
    """Loopback HTTP server for release ISOs and checksums, with per-release faults."""

    def __init__(self, releases: ReleaseSet | Iterable[Release] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0, speed: float = 1.0,
                 rate_bytes_per_s: float | None = None,
                 faults: FaultSource | None = None, clock: SpeedSource | None = None) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the release server only binds loopback")
        if isinstance(releases, ReleaseSet):
            self.releases = releases
        else:
            self.releases = ReleaseSet(None, list(releases or ()))
        self.host = host
        self._port = port
        self._speed = float(speed)
        self.clock = clock                        # if set, its speed wins
        self.rate_bytes_per_s = rate_bytes_per_s  # nominal bytes per simulated second
        self.fault_source = faults
        self.log: list[RequestRecord] = []
        self._faults: dict[str, Fault] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._corrupt: dict[str, bytes] = {}

    @classmethod
    def for_world(cls, world: Any, port: int = 0) -> ReleaseServer:
        """A server wired to a :class:`harvester_sim.world.World`: releases from the
        scenario's ``releases`` section, the clock's speed, ``timings.download_mib_s`` as
        the base rate and the world's fault engine (kind ``release_download``). Not
        started."""
        timings = getattr(world, "timings", None)
        mib_s = getattr(timings, "download_mib_s", None)
        return cls(ReleaseSet.from_scenario((world.scenario or {}).get("releases")),
                   port=port, rate_bytes_per_s=mib_s * 1024 * 1024 if mib_s else None,
                   faults=getattr(world, "faults", None), clock=getattr(world, "clock", None))

    @property
    def speed(self) -> float:
        """Simulated seconds per wall second (the clock's, if the server has one)."""
        return float(self.clock.speed) if self.clock is not None else self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        if value <= 0:
            raise ValueError("speed must be > 0")
        self._speed = float(value)
        self.clock = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ReleaseServer:
        if self._httpd is not None:
            return self
        self._stop.clear()
        httpd = ThreadingHTTPServer((self.host, self._port), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._port = httpd.server_address[1]
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={
            "poll_interval": 0.1}, name="release-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ReleaseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}"

    # ------------------------------------------------------------------ releases

    def add_release(self, release: Release) -> None:
        self.releases.add(release)

    def release(self, version: str) -> Release:
        """A release by version: declared ones first, then the built-in catalog (a version
        that is neither is synthesised, but not served)."""
        return self.releases.get(version)

    def serves(self, version: str) -> bool:
        """Whether the server has this release (declared or in the built-in catalog)."""
        try:
            v = self.releases.get(version).version
        except ValueError:
            return False
        return v in self.releases or v in CATALOG

    def url_for(self, version: str) -> str:
        """The ISO URL (``Version.spec.isoURL``)."""
        r = self.release(version)
        return f"{self.base_url}/releases/{r.version}/{r.iso_name}"

    def checksum_url_for(self, version: str) -> str:
        return self.url_for(version) + ".sha512"

    def iso_bytes(self, version: str) -> bytes:
        return build_iso(self.release(version), self.releases)

    def checksum(self, version: str) -> str:
        """SHA-512 hex of the ISO (``Version.spec.isoChecksum``)."""
        return sha512(self.iso_bytes(version))

    def version_object(self, version: str, namespace: str = "harvester-system") -> dict[str, Any]:
        """The ``harvesterhci.io/v1beta1`` Version for a release, pointing at this server."""
        return self.release(version).version_object(self.url_for(version),
                                                    self.checksum(version), namespace)

    # ------------------------------------------------------------------ faults

    def set_fault(self, version: str, kind: str, **params: Any) -> Fault:
        """Switch a fault on for a release (replaces any previous one)."""
        fault = Fault(kind=kind, **params)
        with self._lock:
            self._faults[self.release(version).version] = fault
        return fault

    def clear_fault(self, version: str | None = None) -> None:
        """Remove the fault of one release, or of all releases."""
        with self._lock:
            if version is None:
                self._faults.clear()
            else:
                self._faults.pop(self.release(version).version, None)

    def fault_for(self, version: str) -> Fault | None:
        with self._lock:
            return self._faults.get(self.release(version).version)

    def _take_fault(self, version: str, file: str, consume: bool = True) -> Fault | None:
        """The fault applying to this request. A GET consumes one use of a limited fault
        and may fire one from the fault engine; a HEAD only looks at switched-on faults."""
        with self._lock:
            fault = self._faults.get(version)
            if fault is not None and file == "sha512" and not (
                    fault.kind == "404" and fault.files == "all"):
                fault = None
            if fault is not None and consume and fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.pop(version, None)
        source = self.fault_source
        if fault is None and consume and source is not None and (
                file == "iso" or getattr(source, "checksum_aware", False)):
            spec = source.match("release_download", version=version, file=file)
            if spec is not None:
                fault = Fault.from_spec(spec)
                if file == "sha512" and not (fault.kind == "404" and fault.files == "all"):
                    fault = None
        return fault

    # ------------------------------------------------------------------ time model

    def nominal_size(self, version: str) -> int:
        r = self.release(version)
        return r.iso_size or len(self.iso_bytes(version))

    def effective_rate(self, version: str, fault: Fault | None = None) -> float | None:
        """Nominal bytes per simulated second for a download (None = unthrottled)."""
        rates = [r for r in (self.rate_bytes_per_s,) if r]
        if fault is not None and fault.kind == "slow":
            if fault.rate_bytes_per_s:
                rates.append(float(fault.rate_bytes_per_s))
            elif fault.duration_s:
                rates.append(self.nominal_size(version) / float(fault.duration_s))
        return min(rates) if rates else None

    def expected_seconds(self, version: str, fault: Fault | None = None) -> float:
        """Simulated seconds a full download takes now (0 if unthrottled)."""
        return download_seconds(self.nominal_size(version), self.effective_rate(
            version, fault if fault is not None else self.fault_for(version)))

    def expected_wall_seconds(self, version: str, fault: Fault | None = None) -> float:
        return self.expected_seconds(version, fault) / self.speed

    def run_time(self) -> float:
        """The pacing time base: with a simulation clock its run time (``Clock.run_elapsed``,
        which stands still while the clock is held), else wall time."""
        run = getattr(self.clock, "run_elapsed", None)
        return float(run()) if callable(run) else Clock.monotonic()

    def wait_run_time(self, until: float) -> bool:
        """Wait until :meth:`run_time` reaches ``until``; True if the server stopped first."""
        delay = until - self.run_time()
        if delay <= 0:
            return False
        while True:
            if self._stop.wait(delay):
                return True
            delay = until - self.run_time()
            # again only while the clock was held: a microsecond short is float rounding
            if delay <= 1e-6:
                return False

    def _wall_rate(self, version: str, served_total: int, fault: Fault | None) -> float | None:
        """Served bytes per wall second that realise the model for this body."""
        rate = self.effective_rate(version, fault)
        if not rate:
            return None
        sim_s = download_seconds(self.nominal_size(version), rate)
        if sim_s <= 0:
            return None
        return served_total / (sim_s / self.speed)

    def _corrupted(self, version: str, data: bytes) -> bytes:
        with self._lock:
            got = self._corrupt.get(version)
        if got is None or len(got) != len(data):
            buf = bytearray(data)
            for k in range(1, 33):
                buf[len(buf) * k // 33] ^= 0xFF
            got = bytes(buf)
            with self._lock:
                self._corrupt[version] = got
        return got


def _parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """``(start, end_inclusive)``; None = whole body; "invalid" = 416."""
    if not header:
        return None
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
    if not m:
        return None  # multi-range or other units: serve the whole body (allowed by RFC 9110)
    first, last = m.group(1), m.group(2)
    if not first and not last:
        return "invalid"
    if not first:
        n = int(last)
        if n == 0:
            return "invalid"
        return max(0, size - n), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or end < start:
        return "invalid"
    return start, end


def _make_handler(server: ReleaseServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "harvester-sim-releases/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

        def do_HEAD(self) -> None:
            self._serve(head=True)

        def do_GET(self) -> None:
            self._serve(head=False)

        def _record(self, version: str | None, status: int, sent: int, rng: str | None,
                    fault: Fault | None, t0: float) -> None:
            server.log.append(RequestRecord(self.command, self.path, version, status, sent,
                                            rng, fault.kind if fault else None,
                                            Clock.monotonic() - t0))

        def _plain(self, status: int, text: str, head: bool) -> int:
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
                return len(body)
            return 0

        def _serve(self, head: bool) -> None:
            t0 = Clock.monotonic()
            path = self.path.split("?", 1)[0]
            m = _PATH_RE.match(path)
            if not m or m.group(1) != m.group(2):
                self._record(None, 404, self._plain(404, "404 page not found\n", head),
                             None, None, t0)
                return
            version = m.group(1)
            release = server.release(version) if server.serves(version) else None
            if release is None or release.version != version:
                self._record(version, 404, self._plain(404, "404 page not found\n", head),
                             None, None, t0)
                return
            is_sum = bool(m.group(3))
            fault = server._take_fault(version, "sha512" if is_sum else "iso", consume=not head)
            if fault is not None and fault.kind == "404":
                self._record(version, 404, self._plain(404, "404 page not found\n", head),
                             None, fault, t0)
                return
            iso = server.iso_bytes(version)
            if is_sum:
                data = checksum_file(iso, release.iso_name).encode()
                ctype = "text/plain; charset=utf-8"
            else:
                data = server._corrupted(version, iso) if fault and fault.kind == "corrupt" \
                    else iso
                ctype = "application/x-iso9660-image"
            size = len(data)
            rng_hdr = self.headers.get("Range")
            rng = _parse_range(rng_hdr, size)
            if rng == "invalid":
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                self._record(version, 416, 0, rng_hdr, fault, t0)
                return
            start, end = rng if isinstance(rng, tuple) else (0, size - 1)
            status = 206 if isinstance(rng, tuple) else 200
            body = data[start:end + 1]
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{sha512(iso)[:32]}"')
            if release.release_date:
                self.send_header("Last-Modified", email.utils.format_datetime(
                    _release_dt(release.release_date), usegmt=True))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            if not is_sum:
                self.send_header("X-Harvester-Sim-Nominal-Size",
                                 str(server.nominal_size(version)))
            self.end_headers()
            if head:
                self._record(version, status, 0, rng_hdr, fault, t0)
                return
            limit = len(body)
            if fault is not None and fault.kind == "cut":
                limit = int(len(body) * float(fault.percent) / 100.0)
            wall_rate = None if is_sum else server._wall_rate(version, size, fault)
            sent = self._send_paced(body[:limit], wall_rate)
            if limit < len(body):
                self.close_connection = True
                try:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._record(version, status, sent, rng_hdr, fault, t0)

        def _send_paced(self, body: bytes, wall_rate: float | None) -> int:
            """Write ``body``; with a rate, each chunk leaves when the model says its last
            byte has arrived (so the transfer ends at ``len(body) / wall_rate``)."""
            sent = 0
            t0 = server.run_time()
            chunk = _CHUNK if not wall_rate else max(1024, min(_CHUNK, int(wall_rate / 50)))
            try:
                while sent < len(body):
                    piece = body[sent:sent + chunk]
                    if wall_rate:
                        if server.wait_run_time(t0 + (sent + len(piece)) / wall_rate):
                            break
                    elif server._stop.is_set():
                        break
                    self.wfile.write(piece)
                    sent += len(piece)
                self.wfile.flush()
            except OSError:  # client went away (BrokenPipe, ConnectionReset, ...)
                self.close_connection = True
            return sent

    return Handler


def _release_dt(date: str) -> _dt.datetime:
    return _dt.datetime.fromisoformat(date).replace(tzinfo=_dt.timezone.utc)
