"""The Harvester API server container (image ``rancher/harvester``, Deployment ``harvester``).

Upstream: harvester/harvester v1.6.0 — ``pkg/server/router.go`` (routes under
``/v1/harvester``), ``pkg/api/image/formatter.go`` (``GET .../harvesterhci.io.
virtualmachineimages/<ns>/<name>/download``) and ``pkg/image/backingimage/download.go``
(the backingimage backend: refuses images that are not imported yet, streams Longhorn's
``/v1/backingimages/<name>/download``, which is gzip-compressed, with ``Content-Disposition:
attachment; filename=<displayName>.gz``); errors are ``500`` with the error text as body.
The listener is rancher/dynamiclistener (vendored ``server/server.go``): HTTPS on port 8443
with a certificate signed by the CA kept in Secret ``kube-system/serving-ca`` (``tls.crt``;
the simulated Secret carries no ``tls.key``), created when missing and reused when present.

Modelled: the image download (what upgrade-toolkit's iso-downloader fetches) on port 8443,
HTTPS with that CA; the container keeps serving until stopped and exits at once on SIGTERM.
Not modelled: the rest of the Steve API, authentication (the toolkit's curl sends no
credentials; Harvester's image download route is reached the same way there), the ``cdi``
backend's download (answered ``500``), upload.
"""

from __future__ import annotations

import gzip
import re
import threading
from collections.abc import Generator
from typing import Any

from .base import REGISTRY, ProgramContext, image_repo

PORT = 8443
CA_SECRET = ("kube-system", "serving-ca")
SERVE_TICK_S = 3600.0
DOWNLOAD = re.compile(
    r"^/v1/harvester/harvesterhci\.io\.virtualmachineimages/([^/]+)/([^/]+)/download/?$")
HOSTS = ("harvester", "harvester.harvester-system", "harvester.harvester-system.svc",
         "harvester.harvester-system.svc.cluster.local", "localhost", "127.0.0.1")
_LOCK = threading.Lock()


def _matcher(image: str, command: list[str], args: list[str]) -> bool:
    return image_repo(image) == "rancher/harvester"


def serving_ca(world: Any, client: Any) -> bytes:
    """The CA dynamiclistener signs with: the Secret's ``tls.crt`` (created when missing)."""
    import base64

    from ..api import errors, tls

    with _LOCK:
        sec = client.try_get("v1", "Secret", CA_SECRET[1], CA_SECRET[0])
        crt = ((sec or {}).get("data") or {}).get("tls.crt")
        if crt:
            return base64.b64decode(crt)
        certs = world.extras.get("harvester_serving_certs")
        if certs is None:
            certs = world.extras["harvester_serving_certs"] = tls.generate(HOSTS)
        body = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": CA_SECRET[1], "namespace": CA_SECRET[0]},
                "data": {"tls.crt": base64.b64encode(certs.ca_pem).decode()}}
        try:
            client.create(body)
        except errors.ApiError as exc:
            if exc.code != 409:
                raise
            return serving_ca(world, client)
        return bytes(certs.ca_pem)


def download_handler(world: Any) -> Any:
    client = world.client_for("harvester")
    cache: dict[tuple[str, str, int], bytes] = {}

    def handler(method: str, path: str, query: str, headers: dict[str, str],
                body: bytes) -> tuple[int, dict[str, str], bytes]:
        text = {"Content-Type": "text/plain; charset=utf-8"}
        m = DOWNLOAD.match(path.split("?", 1)[0])
        if m is None:
            return 404, text, b"404 page not found\n"
        if method != "GET":
            return 500, text, f"Unsupported method {method}".encode()
        ns, name = m.group(1), m.group(2)
        vmi = client.try_get("harvesterhci.io/v1beta1", "VirtualMachineImage", name, ns)
        if vmi is None:
            return 500, text, (f"failed to get VMImage with name({name}), ns({ns}), error: "
                               f'virtualmachineimages.harvesterhci.io "{name}" not found'
                               ).encode()
        spec = vmi.get("spec") or {}
        if (spec.get("backend") or "backingimage") != "backingimage":
            return 500, text, b"harvester-sim: download of cdi-backed images is not modelled"
        imported = any(c.get("type") == "Imported" and c.get("status") == "True"
                       for c in (vmi.get("status") or {}).get("conditions") or [])
        if not imported:
            return 500, text, b"please wait until the image has been imported"
        blob = (world.extras.get("image_blobs") or {}).get((ns, name))
        if blob is None:
            return 500, text, (f"failed to get backing image name for VMImage {ns}/{name}, "
                               "error: backing image not found").encode()
        key = (ns, name, len(blob))
        data = cache.get(key)
        if data is None:
            data = cache[key] = gzip.compress(blob, compresslevel=1, mtime=0)
        display = spec.get("displayName") or name
        hdrs = {"Content-Type": "application/octet-stream",
                "Content-Disposition": f"attachment; filename={display}.gz",
                "Content-Length": str(len(data)),
                "X-Harvester-Sim-Nominal-Size": str(
                    int((vmi.get("status") or {}).get("size") or len(blob)))}
        return 200, hdrs, data

    return handler


def routes(world: Any, client: Any, image: str) -> Any:
    """One router for the API the container serves (pkg/server/router.go): the image download
    and the VM actions (``controllers/harvester_vm.py``, by the image's Harvester version)."""
    from ..controllers import harvester_vm

    download = download_handler(world)
    actions = harvester_vm.api_handler(world, client,
                                       harvester_vm.image_version(image))

    def handler(method: str, path: str, query: str, headers: dict[str, str],
                body: bytes) -> tuple[int, dict[str, str], bytes]:
        if DOWNLOAD.match(path.split("?", 1)[0]):
            return download(method, path, query, headers, body)
        return actions(method, path, query, headers, body)  # type: ignore[no-any-return]

    return handler


def harvester_server(ctx: ProgramContext) -> Generator[float, None, int]:
    md = ctx.pod.get("metadata") or {}
    ns, pod = str(md.get("namespace", "")), str(md.get("name", ""))
    ca = serving_ca(ctx.world, ctx.client)
    ctx.world.proxies.register_pod(ns, pod, PORT, routes(ctx.world, ctx.client, ctx.image),
                                   tls_ca=ca)
    ctx.log(f"Starting harvester API server on :{PORT}")
    try:
        while True:
            yield SERVE_TICK_S
    finally:
        ctx.world.proxies.unregister_pod(ns, pod)


REGISTRY.register("harvester-apiserver", _matcher, harvester_server)
