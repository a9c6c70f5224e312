"""The containers of upgrade-toolkit's repo DaemonSet ``<plan>-repo``.

Upstream: harvester/upgrade-toolkit ``5ac1bbe35a6b4f61247aa09162cc6a9099dddd4f``,
``pkg/upgradeplan/handler.go`` (``constructDaemonSet`` and the scripts
``isoDownloaderScriptTemplate``, ``preloaderScript``, ``isoMounterScript``, ``repoScript``).
Every container runs ``sh -c <script>`` in ``starbops/harvester-upgrade-toolkit:<tag>``; each
program here is matched by that image and a line only its script has, and does what the
script does, through the same volumes (``programs/podfs.py``):

* ``iso-downloader`` (init): ``mkdir /iso/leader.lock`` elects one pod per shared volume.
  The leader curls ``https://harvester:8443/v1/harvester/harvesterhci.io.
  virtualmachineimages/$VM_IMAGE_NS/$VM_IMAGE_NAME/download`` with ``--cacert`` = ``$CA_CERT``
  (``programs/cluster_net.py``: Service DNS, EndpointSlices, TLS against the CA), gunzips it
  to ``/iso/harvester.iso`` and touches ``/iso/harvester.iso.ready``; on failure its EXIT
  trap removes the lock and the flag and exits 1. Followers poll the flag every 10 s. The
  transfer lasts ``nominal size / timings.download_mib_s``.
* ``preloader`` (init, privileged): loop-mounts the ISO, reads
  ``bundle/metadata.yaml`` ``.images.common[].archive`` and imports each archive into the
  node's containerd (the images named in the archive's ``manifest.json`` join the kubelet's
  image store, which the Node's ``status.images`` reports; duration ``size /
  timings.image_pull_mib_s`` for images the node lacks).
* ``iso-mounter``: loop-mounts ``/iso/harvester.iso`` on ``/share-mount`` (an emptyDir with
  Bidirectional propagation, so the repo container sees the ISO), sleeps; its trap unmounts
  and exits 0 on SIGTERM.
* ``repo``: ``nginx -g "daemon off;"`` serving ``/srv/www/htdocs`` (the same emptyDir) on
  port 80: files 200, directories 403 (no autoindex), others 404. Its readiness probe
  (``GET /harvester-release.yaml``) is run by the kubelet against this server.
"""

from __future__ import annotations

import gzip
import io
import json
import posixpath
import tarfile
import zlib
from collections.abc import Generator
from typing import Any

import yaml

from . import cluster_net
from .base import REGISTRY, ProgramContext, image_repo
from .podfs import PodFS

Prog = Generator[float, None, int]
MiB = 1024 * 1024
FOLLOWER_POLL_S = 10.0
MOUNTER_SLEEP_S = 30.0
SERVE_TICK_S = 3600.0
DOWNLOAD_URL = ("https://harvester:8443/v1/harvester/harvesterhci.io.virtualmachineimages/"
                "{ns}/{name}/download")


def script_of(command: list[str], args: list[str]) -> str:
    argv = list(command) + list(args)
    if len(argv) >= 3 and posixpath.basename(argv[0]) in ("sh", "bash") and argv[1] == "-c":
        return str(argv[2])
    return ""


def _matcher(*markers: str) -> Any:
    def match(image: str, command: list[str], args: list[str]) -> bool:
        if not image_repo(image).endswith("harvester-upgrade-toolkit"):
            return False
        script = script_of(command, args)
        return bool(script) and all(m in script for m in markers)
    return match


def _pod_ns(ctx: ProgramContext) -> str:
    return str((ctx.pod.get("metadata") or {}).get("namespace", ""))


# ------------------------------------------------------------------------ iso-downloader
def iso_downloader(ctx: ProgramContext) -> Prog:
    fs = PodFS(ctx)
    work = fs.volume_at("/iso")
    if work is None:
        ctx.log('mkdir: can\'t create directory "/iso/leader.lock": No such file or directory')
        return 1
    pod = ctx.env.get("POD_NAME", "")
    if work.mkdir("leader.lock"):
        ctx.log(f"{pod} is the leader, start preparing the ISO image...")
        url = DOWNLOAD_URL.format(ns=ctx.env.get("VM_IMAGE_NS", ""),
                                  name=ctx.env.get("VM_IMAGE_NAME", ""))
        try:
            resp = cluster_net.request(ctx.world, url, _pod_ns(ctx),
                                       ca_pem=ctx.env.get("CA_CERT", ""))
        except cluster_net.CurlError as exc:
            ctx.log(str(exc))
            return _leader_failed(ctx, work)
        nominal = int(resp.headers.get("X-Harvester-Sim-Nominal-Size") or len(resp.body))
        yield nominal / MiB / max(ctx.world.timings.download_mib_s, 1e-9)
        ctx.log("Download completed, extracting harvester.iso...")
        try:
            iso = gzip.decompress(resp.body)
        except (OSError, EOFError, zlib.error):
            ctx.log("gzip: harvester.iso.gz: not in gzip format")
            return _leader_failed(ctx, work)
        work.write("harvester.iso", iso)
        ctx.log("harvester.iso is ready")
        work.write("harvester.iso.ready", b"")
        return 0
    ctx.log(f"{pod} is a follower, waiting for harvester.iso downloaded...")
    if work.exists("harvester.iso.ready"):
        ctx.log("harvester.iso already exists")
        return 0
    while not work.exists("harvester.iso.ready"):
        ctx.log("harvester.iso is not ready yet, waiting...")
        yield FOLLOWER_POLL_S
    ctx.log("harvester.iso is ready")
    return 0


def _leader_failed(ctx: ProgramContext, work: Any) -> int:
    work.rmdir("leader.lock")
    if work.exists("harvester.iso.ready"):
        ctx.log("removed '/iso/harvester.iso.ready'")
    work.remove("harvester.iso.ready")
    return 1


# ------------------------------------------------------------------------ loop mounts
def _loop_mount(ctx: ProgramContext, fs: PodFS, source: str, target: str) -> Any:
    """``mount -o loop,ro SOURCE TARGET``: the IsoReader, or None (logged) on failure."""
    from ..releases import iso as iso_mod

    data = fs.read(source)
    if data is None:
        ctx.log(f"mount: {target}: special device {source} does not exist.")
        return None
    try:
        return iso_mod.reader_for(data)
    except Exception:  # noqa: BLE001 - not an ISO: the loop mount fails
        ctx.log(f"mount: {target}: wrong fs type, bad option, bad superblock on /dev/loop0, "
                "missing codepage or helper program, or other error.")
        return None


# ------------------------------------------------------------------------ preloader
def zstd_decompress_raw(data: bytes) -> bytes:
    """Decode a zstd frame made of raw and RLE blocks (what the simulated ISO's stand-in
    archives are); compressed blocks are refused."""
    if data[:4] != b"\x28\xb5\x2f\xfd":
        raise ValueError("not a zstd frame")
    fhd = data[4]
    pos = 5
    single = (fhd >> 5) & 1
    if not single:
        pos += 1
    pos += (0, 1, 2, 4)[fhd & 3]
    pos += (1 if single else 0, 2, 4, 8)[fhd >> 6]
    out = bytearray()
    while True:
        if pos + 3 > len(data):
            raise ValueError("truncated zstd frame")
        h = int.from_bytes(data[pos:pos + 3], "little")
        pos += 3
        last, btype, size = h & 1, (h >> 1) & 3, h >> 3
        if btype == 0:
            out += data[pos:pos + size]
            pos += size
        elif btype == 1:
            out += bytes([data[pos]]) * size
            pos += 1
        else:
            raise ValueError("compressed zstd blocks are not supported")
        if last:
            return bytes(out)


def archive_images(archive: bytes) -> list[tuple[str, int]]:
    """``(image, size)`` of a docker-save style ``.tar.zst`` (its ``manifest.json``)."""
    raw = zstd_decompress_raw(archive)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        member = tar.extractfile("manifest.json")
        if member is None:
            return []
        manifest = json.loads(member.read())
    out = []
    for entry in manifest:
        for tag in entry.get("RepoTags") or []:
            out.append((str(tag), int(entry.get("SizeBytes") or 0)))
    return out


def preloader(ctx: ProgramContext) -> Prog:
    fs = PodFS(ctx)
    reader = _loop_mount(ctx, fs, "/iso/harvester.iso", "/mnt")
    if reader is None:
        return 32
    ctx.log("harvester.iso mounted successfully")
    ctx.log("Start preloading images to containerd...")
    try:
        meta = yaml.safe_load(reader.read("bundle/metadata.yaml")) or {}
    except KeyError:
        ctx.log("Error: open /mnt/bundle/metadata.yaml: no such file or directory")
        return 1
    archives = [str(i.get("archive")) for i in ((meta.get("images") or {}).get("common") or [])
                if i.get("archive")]
    kubelet = ctx.host
    rate = max(ctx.world.timings.image_pull_mib_s, 1e-9) * MiB
    for archive in archives:
        ctx.log(f"Importing {archive}")
        try:
            images = archive_images(reader.read(f"bundle/{archive}"))
        except (KeyError, ValueError, tarfile.TarError) as exc:
            ctx.log(f"ctr: failed to import {archive}: {exc}")
            return 1
        missing = [(i, s) for i, s in images
                   if kubelet is None or not kubelet.has_image(ctx.node, i)]
        if missing:
            yield sum(s for _, s in missing) / rate
            if kubelet is not None:
                kubelet.add_images(ctx.node, missing)
        for name, _ in images:
            ctx.log(f"unpacking {name} (sha256:...)...done")
    return 0


# ------------------------------------------------------------------------ iso-mounter
def iso_mounter(ctx: ProgramContext) -> Prog:
    fs = PodFS(ctx)
    share = fs.volume_at("/share-mount")
    reader = _loop_mount(ctx, fs, "/iso/harvester.iso", "/share-mount")
    if reader is None or share is None:
        return 32
    share.mount = reader
    ctx.log("harvester.iso mounted successfully")
    try:
        while True:
            yield MOUNTER_SLEEP_S
    finally:
        # trap "umount -v /iso/harvester.iso; exit 0" EXIT (SIGTERM ends the sleep loop)
        if share.mount is reader:
            share.mount = None
        ctx.log("umount: /share-mount (/dev/loop0) unmounted")


# ------------------------------------------------------------------------ repo (nginx)
def repo_handler(fs: PodFS) -> Any:
    def page(code: int, title: str) -> bytes:
        return (f"<html>\r\n<head><title>{code} {title}</title></head>\r\n<body>\r\n"
                f"<center><h1>{code} {title}</h1></center>\r\n<hr><center>nginx</center>\r\n"
                "</body>\r\n</html>\r\n").encode()

    def handler(method: str, path: str, query: str, headers: dict[str, str],
                body: bytes) -> tuple[int, dict[str, str], bytes]:
        html = {"Content-Type": "text/html", "Server": "nginx"}
        if method not in ("GET", "HEAD"):
            return 405, html, page(405, "Not Allowed")
        root = fs.volume_at("/srv/www/htdocs")
        rel = posixpath.normpath("/" + path.split("?", 1)[0]).lstrip("/")
        data = root.read(rel) if root is not None else None
        if data is not None:
            ctype = "text/plain" if rel.endswith((".txt", ".yaml", ".sha512")) else \
                "application/octet-stream"
            hdrs = {"Content-Type": ctype, "Content-Length": str(len(data)),
                    "Server": "nginx"}
            return 200, hdrs, b"" if method == "HEAD" else data
        if root is not None and (rel == "" or root.exists(rel)):
            return 403, html, page(403, "Forbidden")
        return 404, html, page(404, "Not Found")

    return handler


def repo_nginx(ctx: ProgramContext) -> Prog:
    md = ctx.pod.get("metadata") or {}
    ns, pod = str(md.get("namespace", "")), str(md.get("name", ""))
    ctx.log("Starting Nginx...")
    ctx.world.proxies.register_pod(ns, pod, 80, repo_handler(PodFS(ctx)))
    ctx.world.timeline.record("repo_serving", namespace=ns, pod=pod, node=ctx.node)
    try:
        while True:
            yield SERVE_TICK_S
    finally:
        ctx.world.proxies.unregister_pod(ns, pod)
        ctx.world.timeline.record("repo_stopped", namespace=ns, pod=pod, node=ctx.node)


REGISTRY.register("toolkit-repo-iso-downloader",
                  _matcher("harvester.iso.gz", "virtualmachineimages"), iso_downloader)
REGISTRY.register("toolkit-repo-preloader", _matcher("images import", "metadata.yaml"),
                  preloader)
REGISTRY.register("toolkit-repo-iso-mounter", _matcher("/share-mount", "while true"),
                  iso_mounter)
REGISTRY.register("toolkit-repo-nginx", _matcher('nginx -g "daemon off;"'), repo_nginx)
