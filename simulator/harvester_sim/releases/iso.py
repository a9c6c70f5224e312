"""Real ISO 9660 images of simulated Harvester releases, and a reader for them.

:func:`build_iso` writes, with pycdlib, a small (well under 2 MB) but genuine ISO 9660 image
with Rock Ridge and Joliet names, laid out like the Harvester ISO parts that the upgrade
reads over HTTP (reference §A.3)::

    harvester-release.yaml
    rootfs.squashfs                                     (placeholder, squashfs magic)
    bundle/metadata.yaml                                (images.{common,rke2,agent}[])
    bundle/harvester/images/harvester-images-<v>.txt    (+ .tar.zst stand-in archive)
    bundle/rancher/images/rancher-images-<rancher>.txt  (+ .tar.zst)
    bundle/rancher/images/rancher-agent-images-<rancher>.txt (+ .tar.zst)
    bundle/rke2/images/rke2-images.linux-amd64-<k8s>.txt     (+ .tar.zst)
    bundle/harvester/images-lists-archive/<v>/image_list_all.txt  (own + previous versions)

The build is deterministic (fixed timestamps taken from the release date), so a release's
ISO bytes, and therefore its SHA-512, never change. Built ISOs are cached in memory.

:class:`IsoReader` opens ISO bytes with pycdlib and serves files by path; it is what the
simulated nginx repo server mounts (see :func:`iso_http_handler`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import sys
import tarfile
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pycdlib
import yaml

from .catalog import Image, Release, ReleaseSet, archived_versions, get_release

# Same shape as harvester_sim.proxy.ProxyHandler: (method, path, query, headers, body)
Handler = Callable[[str, str, str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]

VOLUME_ID = "COS_LIVE"
_BUILD_LOCK = threading.Lock()
_CACHE: dict[str, bytes] = {}
_CACHE_LOCK = threading.Lock()


def sha512(data: bytes) -> str:
    """Lower-case hex SHA-512, the format of ``Version.spec.isoChecksum``."""
    return hashlib.sha512(data).hexdigest()


def checksum_file(data: bytes, name: str) -> str:
    """Content of a ``<iso>.sha512`` file: ``<hex>  <name>\\n`` (sha512sum format)."""
    return f"{sha512(data)}  {name}\n"


# --------------------------------------------------------------------------- contents

def _dump(obj: Any) -> bytes:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False).encode()


def _image_list(images: list[Image]) -> bytes:
    return "".join(f"{i.name}\n" for i in images).encode()


def zstd_raw_frame(payload: bytes) -> bytes:
    """A valid zstd frame storing ``payload`` in raw (uncompressed) blocks."""
    out = bytearray(b"\x28\xb5\x2f\xfd")
    n = len(payload)
    if n < 256:
        out += bytes([0x20]) + n.to_bytes(1, "little")            # single segment, FCS 1 B
    elif n < 65536 + 256:
        out += bytes([0x60]) + (n - 256).to_bytes(2, "little")    # FCS 2 B
    else:
        out += bytes([0xA0]) + n.to_bytes(4, "little")            # FCS 4 B
    max_block = 128 * 1024
    chunks = [payload[i:i + max_block] for i in range(0, n, max_block)] or [b""]
    for idx, chunk in enumerate(chunks):
        last = 1 if idx == len(chunks) - 1 else 0
        header = (len(chunk) << 3) | (0 << 1) | last               # raw block
        out += header.to_bytes(3, "little") + chunk
    return bytes(out)


def _stand_in_archive(images: list[Image], mtime: int) -> bytes:
    """A tiny ``.tar.zst``: a docker-save style ``manifest.json`` naming the images, no
    layers (the simulated nodes "import" images by name)."""
    manifest = json.dumps([{"Config": "", "RepoTags": [i.name], "Layers": [],
                            "SizeBytes": i.size} for i in images], indent=1).encode()
    note = b"harvester-sim stand-in image archive: image layers are not included.\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in (("manifest.json", manifest), ("README", note)):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return zstd_raw_frame(buf.getvalue())


def _squashfs_placeholder(release: Release) -> bytes:
    """32 KiB starting with the squashfs magic; the rest names the OS it stands for."""
    body = (f"harvester-sim placeholder rootfs for {release.os} "
            f"(kubernetes {release.kubernetes})\n").encode()
    data = b"hsqs" + body * (32 * 1024 // len(body) + 1)
    return data[:32 * 1024]


def iso_files(release: Release, releases: ReleaseSet | None = None) -> dict[str, bytes]:
    """Path -> content of every file of the release's ISO (what :func:`build_iso` writes)."""
    mtime = _epoch(release)
    lists = release.bundle_lists()
    k8s = release.kubernetes
    names = {
        "harvester": f"harvester/images/harvester-images-{release.version}",
        "rancher": f"rancher/images/rancher-images-{release.rancher}",
        "agent": f"rancher/images/rancher-agent-images-{release.rancher}",
        "rke2": f"rke2/images/rke2-images.linux-amd64-{k8s}",
    }
    files: dict[str, bytes] = {
        "harvester-release.yaml": _dump(release.release_yaml()),
        "rootfs.squashfs": _squashfs_placeholder(release),
    }
    metadata: dict[str, Any] = {"images": {"common": [], "rke2": [], "agent": []}}
    for bundle, kind in (("harvester", "common"), ("rancher", "common"), ("rke2", "rke2"),
                         ("agent", "agent")):
        base = names[bundle]
        files[f"bundle/{base}.txt"] = _image_list(lists[bundle])
        files[f"bundle/{base}.tar.zst"] = _stand_in_archive(lists[bundle], mtime)
        metadata["images"][kind].append({"list": f"{base}.txt", "archive": f"{base}.tar.zst"})
    files["bundle/metadata.yaml"] = _dump(metadata)
    for v in archived_versions(release, releases):
        rel = release if v == release.version else (
            releases.get(v) if releases is not None else get_release(v))
        files[f"bundle/harvester/images-lists-archive/{v}/image_list_all.txt"] = \
            _image_list(rel.images())
    return dict(sorted(files.items()))


def _epoch(release: Release) -> int:
    date = release.release_date or "2025-01-01"
    d = _dt.datetime.fromisoformat(date).replace(tzinfo=_dt.timezone.utc)
    return int(d.timestamp())


# --------------------------------------------------------------------------- build

@contextmanager
def _frozen_time(epoch: float) -> Iterator[None]:
    """Make pycdlib's timestamps deterministic (fixed instant, UTC) while building."""
    import time as _time

    shim = types.SimpleNamespace(time=lambda: float(epoch), localtime=_time.gmtime,
                                 gmtime=_time.gmtime, strftime=_time.strftime)
    mods = [sys.modules[n] for n in ("pycdlib.pycdlib", "pycdlib.headervd", "pycdlib.dates",
                                     "pycdlib.utils") if n in sys.modules]
    saved = [(m, m.time) for m in mods if hasattr(m, "time")]
    try:
        for m, _ in saved:
            m.time = shim  # type: ignore[attr-defined]
        yield
    finally:
        for m, orig in saved:
            m.time = orig  # type: ignore[attr-defined]


def _iso_tree(paths: list[str]) -> tuple[list[str], list[str]]:
    dirs: set[str] = set()
    for p in paths:
        parts = p.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return sorted(dirs, key=lambda d: (d.count("/"), d)), paths


def build_iso_uncached(release: Release, releases: ReleaseSet | None = None) -> bytes:
    """Write the release's ISO with pycdlib and return its bytes."""
    files = iso_files(release, releases)
    dirs, paths = _iso_tree(list(files))
    with _BUILD_LOCK, _frozen_time(_epoch(release)):
        iso = pycdlib.PyCdlib()
        iso.new(interchange_level=3, vol_ident=VOLUME_ID, sys_ident="LINUX",
                app_ident_str="harvester-sim", rock_ridge="1.09", joliet=3)
        iso_name: dict[str, str] = {"": ""}
        for n, d in enumerate(dirs):
            parent, _, leaf = d.rpartition("/")
            iso_name[d] = f"{iso_name[parent]}/D{n:03d}"
            iso.add_directory(iso_name[d], rr_name=leaf, joliet_path="/" + d)
        for n, p in enumerate(paths):
            parent, _, leaf = p.rpartition("/")
            data = files[p]
            iso.add_fp(io.BytesIO(data), len(data), f"{iso_name[parent]}/F{n:04d}.;1",
                       rr_name=leaf, joliet_path="/" + p)
        out = io.BytesIO()
        iso.write_fp(out)
        iso.close()
    return out.getvalue()


def build_iso(release: Release, releases: ReleaseSet | None = None) -> bytes:
    """The release's ISO bytes, built once per distinct release content and cached."""
    key = release.fingerprint() + ":" + ",".join(
        f"{v}={(releases.get(v) if releases else get_release(v)).fingerprint()}"
        for v in archived_versions(release, releases))
    with _CACHE_LOCK:
        got = _CACHE.get(key)
    if got is not None:
        return got
    data = build_iso_uncached(release, releases)
    with _CACHE_LOCK:
        return _CACHE.setdefault(key, data)


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


# --------------------------------------------------------------------------- read

class IsoReader:
    """Files of an ISO image, read with pycdlib by their Rock Ridge path.

    ``IsoReader(data)`` parses the image once and keeps the file contents (the simulated
    ISOs are small), so it is safe to use from several threads afterwards.
    """

    def __init__(self, data: bytes) -> None:
        self.size = len(data)
        self.checksum = sha512(data)
        self._files: dict[str, bytes] = {}
        self._dirs: set[str] = {""}
        iso = pycdlib.PyCdlib()
        try:
            iso.open_fp(io.BytesIO(data))
            if not iso.has_rock_ridge():
                raise ValueError("ISO has no Rock Ridge names")
            self.volume_id = iso.pvd.volume_identifier.decode().strip()
            for root, dirnames, filenames in iso.walk(rr_path="/"):
                base = root.strip("/")
                for d in dirnames:
                    self._dirs.add(f"{base}/{d}".strip("/"))
                for f in filenames:
                    path = f"{base}/{f}".strip("/")
                    out = io.BytesIO()
                    iso.get_file_from_iso_fp(out, rr_path="/" + path)
                    self._files[path] = out.getvalue()
        finally:
            iso.close()

    def list(self, prefix: str = "") -> list[str]:
        """Paths of all files (no leading slash), optionally under ``prefix``."""
        prefix = prefix.strip("/")
        return sorted(p for p in self._files
                      if not prefix or p == prefix or p.startswith(prefix + "/"))

    def exists(self, path: str) -> bool:
        return path.strip("/") in self._files

    def is_dir(self, path: str) -> bool:
        return path.strip("/") in self._dirs

    def read(self, path: str) -> bytes:
        """File content; ``KeyError`` if the ISO has no such file."""
        return self._files[path.strip("/")]

    def file_size(self, path: str) -> int:
        return len(self.read(path))

    def release_yaml(self) -> dict[str, Any]:
        """Parsed ``harvester-release.yaml``."""
        loaded = yaml.safe_load(self.read("harvester-release.yaml"))
        if not isinstance(loaded, dict):
            raise ValueError("harvester-release.yaml is not a mapping")
        return loaded

    def listdir(self, path: str) -> list[str]:
        """Entries directly under a directory (directories end with ``/``)."""
        base = path.strip("/")
        pre = base + "/" if base else ""
        out: set[str] = set()
        for p in [*self._files, *self._dirs]:
            if not p.startswith(pre) or p == base:
                continue
            rest = p[len(pre):]
            if "/" in rest:
                out.add(rest.split("/")[0] + "/")
            else:
                out.add(rest + "/" if p in self._dirs else rest)
        return sorted(e for e in out if e not in ("", "/"))


_READERS: dict[str, IsoReader] = {}


def reader_for(data: bytes) -> IsoReader:
    """A cached :class:`IsoReader` for ISO bytes (keyed by checksum)."""
    key = sha512(data)
    with _CACHE_LOCK:
        got = _READERS.get(key)
    if got is None:
        got = IsoReader(data)
        with _CACHE_LOCK:
            got = _READERS.setdefault(key, got)
    return got


def iso_http_handler(reader: IsoReader, prefix: str = "/harvester-iso") -> Handler:
    """A :data:`harvester_sim.proxy.ProxyHandler` serving the ISO's files the way the
    upgrade repo's nginx does: ``GET/HEAD <prefix>/<path>`` -> 200 with the file, 404 for
    anything else, 405 for other methods; directories get an autoindex-like listing."""
    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""

    def handler(method: str, path: str, query: str, headers: dict[str, str],
                body: bytes) -> tuple[int, dict[str, str], bytes]:
        if method not in ("GET", "HEAD"):
            return 405, {"Content-Type": "text/html"}, b"<html>405 Not Allowed</html>\n"
        p = path.split("?", 1)[0]
        if prefix and not (p == prefix or p.startswith(prefix + "/")):
            return 404, {"Content-Type": "text/html"}, b"<html>404 Not Found</html>\n"
        rel = p[len(prefix):].strip("/")
        if reader.exists(rel):
            data = reader.read(rel)
            ctype = ("text/plain" if rel.endswith((".txt", ".yaml", ".sha512"))
                     else "application/octet-stream")
            hdrs = {"Content-Type": ctype, "Content-Length": str(len(data)),
                    "Server": "nginx/1.24.0"}
            return 200, hdrs, b"" if method == "HEAD" else data
        if reader.is_dir(rel):
            entries = "".join(f'<a href="{e}">{e}</a>\n' for e in reader.listdir(rel))
            page = f"<html><body><h1>Index of {p}</h1><pre>{entries}</pre></body></html>\n"
            return 200, {"Content-Type": "text/html"}, b"" if method == "HEAD" else (
                page.encode())
        return 404, {"Content-Type": "text/html"}, b"<html>404 Not Found</html>\n"

    return handler
