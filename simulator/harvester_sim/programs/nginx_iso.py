"""The upgrade repository's web server: any image whose repository ends in ``nginx``.

upgrade-toolkit's RepoCreate runs ``rancher/mirrored-library-nginx`` with the ISO's PVC
mounted and loop-mounts ``disk.img`` under ``/srv/www/htdocs/harvester-iso``. Here the
program finds the pod's PVC volume, takes the downloaded ISO bytes the image controller
stored in ``world.extras['image_blobs'][(namespace, pvcName)]``, opens them with
:class:`harvester_sim.releases.iso.IsoReader` and registers an HTTP handler for the pod's
port 80 (``world.proxies.register_pod``) serving ``/harvester-iso/<path>`` (404 for missing
files). The API server's service proxy reaches it while the pod is Ready and selected by
the Service. The handler is unregistered when the container stops (pod deleted, node
rebooted).

Readiness: the kubelet runs the container's readiness probe against the handler this program
registers (in its very first step, before any simulated time passes). Without an ISO (no blob
yet, unreadable bytes) the mount fails: the program retries for ``MOUNT_RETRY_S`` and then
exits 1, as the real container's loop mount would fail.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from .base import REGISTRY, ProgramContext, image_repo

MOUNT_RETRY_S = 30.0
SERVE_TICK_S = 3600.0
PORT = 80


def _matcher(image: str, command: list[str], args: list[str]) -> bool:
    return image_repo(image).endswith("nginx")


def _pvc_names(pod: dict[str, Any]) -> list[str]:
    out = []
    for v in (pod.get("spec") or {}).get("volumes") or []:
        claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            out.append(str(claim))
    return out


def _fallback_handler(reader: Any, prefix: str = "/harvester-iso") -> Any:
    def handler(method: str, path: str, query: str, headers: dict[str, str],
                body: bytes) -> tuple[int, dict[str, str], bytes]:
        if method not in ("GET", "HEAD"):
            return 405, {"Content-Type": "text/html"}, b"<html>405 Not Allowed</html>\n"
        p = path.split("?", 1)[0]
        if not p.startswith(prefix + "/"):
            return 404, {"Content-Type": "text/html"}, b"<html>404 Not Found</html>\n"
        rel = p[len(prefix):].strip("/")
        if not reader.exists(rel):
            return 404, {"Content-Type": "text/html"}, b"<html>404 Not Found</html>\n"
        data = reader.read(rel)
        hdrs = {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))}
        return 200, hdrs, b"" if method == "HEAD" else data

    return handler


def make_handler(iso_bytes: bytes) -> Any:
    """Open the ISO and build the HTTP handler serving it under ``/harvester-iso``."""
    from ..releases import iso as iso_mod

    reader = iso_mod.reader_for(iso_bytes) if hasattr(iso_mod, "reader_for") \
        else iso_mod.IsoReader(iso_bytes)
    if hasattr(iso_mod, "iso_http_handler"):
        return iso_mod.iso_http_handler(reader, "/harvester-iso")
    return _fallback_handler(reader)


def nginx_iso_server(ctx: ProgramContext) -> Generator[float, None, int]:
    md = ctx.pod.get("metadata") or {}
    ns, pod = str(md.get("namespace", "")), str(md.get("name", ""))
    blobs: dict[tuple[str, str], bytes] = ctx.world.extras.setdefault("image_blobs", {})
    claims = _pvc_names(ctx.pod)
    handler = None
    waited = 0.0
    while handler is None:
        data = next((blobs[(ns, c)] for c in claims if (ns, c) in blobs), None)
        if data is not None:
            try:
                handler = make_handler(data)
            except Exception as exc:  # noqa: BLE001 - a bad image: the mount fails
                ctx.log(f"mount: {claims[0] if claims else '?'}/disk.img: {exc}")
                return 1
            break
        if not claims:
            # nothing to serve: a plain nginx (default page only)
            break
        if waited >= MOUNT_RETRY_S:
            ctx.log(f"mount: no ISO image on PVC {', '.join(claims)}")
            return 1
        ctx.log(f"waiting for ISO image on PVC {', '.join(claims)}")
        yield 5.0
        waited += 5.0
    if handler is not None:
        ctx.world.proxies.register_pod(ns, pod, PORT, handler)
        ctx.world.timeline.record("repo_serving", namespace=ns, pod=pod, node=ctx.node)
        ctx.log(f"serving /harvester-iso from PVC {claims[0]} on :{PORT}")
    try:
        while True:
            yield SERVE_TICK_S
    finally:
        if handler is not None:
            ctx.world.proxies.unregister_pod(ns, pod)
            ctx.world.timeline.record("repo_stopped", namespace=ns, pod=pod, node=ctx.node)


REGISTRY.register("nginx-iso-server", _matcher, nginx_iso_server)
