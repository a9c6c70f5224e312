"""Simulated Harvester VirtualMachineImage controller (``sourceType: download``).

An image is imported by downloading ``spec.url`` for real over HTTP (the release server
serves ISOs on loopback) on a worker thread, never on the simulation runtime thread. The
status follows Harvester's: ``Initialized`` then ``Imported`` (Unknown/Importing while the
bytes come, True when done), ``status.progress`` 0-100, ``status.size``/``virtualSize``,
``appliedUrl``, ``storageClassName``; on a failure (HTTP error, cut connection, SHA-512
mismatch with ``spec.checksum``) ``status.failed`` grows, ``RetryLimitExceeded`` carries
Harvester's message, and the import is retried 10 simulated seconds later until ``failed >
spec.retry``, when ``Imported=False`` with reason ``ImportFailed`` and the message.

Pacing: the release server already paces its (small) ISO to the nominal size it stands for
(``X-Harvester-Sim-Nominal-Size``); for any other server the controller paces the transfer
itself so that it lasts ``size / timings.download_mib_s`` simulated seconds (paced on
``Clock.run_elapsed``, so a held clock holds the transfer too). ``status.size`` is the
nominal size when the server gives one.

On success the bytes go to ``world.extras['image_blobs'][(namespace, name)]`` (Harvester's
download API, ``programs/harvester_server.py``, serves them). For the ``cdi`` backend a
PersistentVolumeClaim named after the image (same namespace, owned by it, the image's
``targetStorageClassName``) stands for CDI's import volume; the cluster provisions and binds
it (``controllers/volumes.py``), and a pod can mount it (the collection's repo nginx reads
the ISO from there). The ``backingimage`` backend (upgrade-toolkit's) has no claim.
Harvester's image controller labels each image ``harvesterhci.io/imageDisplayName`` with its
``spec.displayName`` (harvester v1.6.0 ``pkg/controller/master/image/vm_image_controller.go``)
and its validating webhook refuses to create an image whose displayName an image of the same
namespace already carries in that label: 409 ``A resource with the same name exists``, an
empty displayName 422 (``pkg/image/common/validator.go`` ``CheckDisplayName``, called by the
``backingimage`` and ``cdi`` validators on create; identical in v1.5.1).
The timeline gets ``image_import_started``/``image_imported``/``image_import_failed`` and a
``span`` (``what: iso_download`` for images annotated ``harvesterhci.io/os-upgrade-image``,
``image_download`` otherwise).

Upstream: harvester/harvester ``v1.5.1`` and ``v1.6.0``: ``pkg/controller/master/image/
vm_image_controller.go``, ``pkg/image/backingimage/`` (``backingimage.go``,
``backing_image_controller.go``, ``validate.go``), ``pkg/image/cdi/`` (``cdi.go``,
``validate.go``), ``pkg/image/common/``.
Not modelled: ``sourceType`` ``upload``, ``export-from-volume``, ``restore`` and
``clone`` (encryption); the Longhorn BackingImage / BackingImageDataSource the
``backingimage`` backend creates (here the controller downloads itself) and the per-image
StorageClass it creates; CDI's DataVolume and importer pod (a bare PVC stands for them);
image deletion cleanup; the mutating webhook's defaults (not checked).
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from ..api import errors
from ..api.errors import ApiError

log = logging.getLogger("harvester_sim.images")

Obj = dict[str, Any]
Key = tuple[str, str]

API = "harvesterhci.io/v1beta1"
KIND = "VirtualMachineImage"
OS_IMAGE_ANNOTATION = "harvesterhci.io/os-upgrade-image"
IMAGE_ID_ANNOTATION = "harvesterhci.io/imageId"
NOMINAL_SIZE_HEADER = "X-Harvester-Sim-Nominal-Size"
DISPLAY_NAME_LABEL = "harvesterhci.io/imageDisplayName"
WEBHOOK = 'admission webhook "validator.harvesterhci.io" denied the request: '
RETRY_DELAY_S = 10.0
CHUNK = 64 * 1024
MIB = 1024 * 1024


@dataclass
class Attempt:
    key: Key
    token: int
    url: str
    checksum: str
    started: float
    cancelled: threading.Event = field(default_factory=threading.Event)
    last_progress: int = -1


class ImageController:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.c = world.client_for("harvester-vm-image-controller")
        self.blobs: dict[Key, bytes] = world.extras.setdefault("image_blobs", {})
        self.attempts: dict[Key, Attempt] = {}
        self._tokens = 0
        self._retry_timers: dict[Key, Any] = {}
        self._stopping = threading.Event()
        world.runtime.on("harvesterhci.io", "virtualmachineimages", self._on_image)
        world.store.admission.append(self._admission)
        try:
            existing = self.c.list(API, KIND)
        except ApiError:
            existing = []
        for img in existing:
            world.runtime.call_soon(lambda img=img: self._on_image("ADDED", img, None))

    def stop(self) -> None:
        self._stopping.set()
        for a in list(self.attempts.values()):
            a.cancelled.set()

    # ------------------------------------------------------------------ webhook
    def _admission(self, op: str, rt: Any, obj: Obj, old: Obj | None,
                   subresource: str | None) -> None:
        if rt.key != ("harvesterhci.io", "virtualmachineimages") or op != "CREATE" or \
                subresource is not None:
            return
        display = str((obj.get("spec") or {}).get("displayName") or "")
        name = obj["metadata"].get("name") or obj["metadata"].get("generateName") or ""
        if not display:
            raise errors.invalid(KIND, "harvesterhci.io", name, [errors.field_required(
                "spec.displayName", "displayName is required")])
        ns = obj["metadata"].get("namespace") or "default"
        for img in self.c.list(API, KIND, ns, label_selector={DISPLAY_NAME_LABEL: display}):
            if img["metadata"].get("uid") != obj["metadata"].get("uid"):
                raise ApiError(409, "Conflict",
                               WEBHOOK + "A resource with the same name exists",
                               {"name": name, "kind": "virtualmachineimages",
                                "group": "harvesterhci.io"})

    # ------------------------------------------------------------------ events
    def _on_image(self, type_: str, obj: Obj, old: Obj | None) -> None:
        md = obj["metadata"]
        key = (md["namespace"], md["name"])
        if type_ == "DELETED" or md.get("deletionTimestamp"):
            a = self.attempts.pop(key, None)
            if a is not None:
                a.cancelled.set()
            t = self._retry_timers.pop(key, None)
            if t is not None:
                t.cancel()
            if type_ == "DELETED":
                self.blobs.pop(key, None)
            return
        if key in self.attempts or key in self._retry_timers:
            return
        cur = self.c.try_get(API, KIND, key[1], key[0])  # the event may be stale
        if cur is None or cur["metadata"].get("deletionTimestamp"):
            return
        display = str((cur.get("spec") or {}).get("displayName") or "")
        if display and (cur["metadata"].get("labels") or {}).get(DISPLAY_NAME_LABEL) != display:
            def label(o: Obj) -> Obj:
                o["metadata"].setdefault("labels", {})[DISPLAY_NAME_LABEL] = display
                return o
            try:
                self.c.modify(API, KIND, key[1], label, key[0])
            except ApiError:
                pass   # not a valid label value: Harvester's update fails the same way
        spec = cur.get("spec") or {}
        if spec.get("sourceType") != "download":
            return
        st = cur.get("status") or {}
        if _cond(st, "Imported") == "True" or _cond(st, "RetryLimitExceeded") == "True":
            return
        if key in self.blobs and st.get("appliedUrl") == spec.get("url"):
            return
        self._start(key)

    def _start(self, key: Key) -> None:
        self._retry_timers.pop(key, None)
        img = self.c.try_get(API, KIND, key[1], key[0])
        if img is None or self._stopping.is_set():
            return
        spec = img.get("spec") or {}
        url = str(spec.get("url") or "")
        self._tokens += 1
        attempt = Attempt(key, self._tokens, url, str(spec.get("checksum") or "").lower(),
                          self.world.clock.now())
        self.attempts[key] = attempt
        now = self.world.clock.timestamp()
        sc = spec.get("targetStorageClassName") or f"longhorn-{key[1]}"

        def fn(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            st["appliedUrl"] = url
            st["progress"] = 0
            st["storageClassName"] = sc
            if spec.get("targetStorageClassName"):
                st["targetStorageClassName"] = sc
            st.setdefault("failed", 0)
            _set_cond(st, "Initialized", "True", "", "", now)
            _set_cond(st, "Imported", "Unknown", "Importing", f"Importing image from {url}", now)
            return cur
        if not self._write(key, fn):
            self.attempts.pop(key, None)
            return
        self.world.timeline.record("image_import_started", image=f"{key[0]}/{key[1]}", url=url)
        threading.Thread(target=self._download, args=(attempt,), daemon=True,
                         name=f"image-{key[1]}").start()

    def _write(self, key: Key, fn: Any) -> bool:
        try:
            self.c.modify(API, KIND, key[1], fn, key[0], "status")
            return True
        except ApiError as exc:
            if exc.code in (404, 409):
                return False
            raise

    def _current(self, attempt: Attempt) -> bool:
        return self.attempts.get(attempt.key) is attempt and not attempt.cancelled.is_set()

    # ------------------------------------------------------------------ worker thread
    def _download(self, attempt: Attempt) -> None:
        try:
            data, nominal = self._fetch(attempt)
        except _Cancelled:
            return
        except Exception as exc:  # noqa: BLE001 - every failure is an import failure
            msg = _describe(exc, attempt.url)
            self.world.runtime.call_soon(lambda: self._failed(attempt, msg))
            return
        if attempt.checksum:
            got = hashlib.sha512(data).hexdigest()
            if got != attempt.checksum:
                msg = (f"checksum mismatch for {attempt.url}: expected SHA-512 "
                       f"{attempt.checksum}, got {got}")
                self.world.runtime.call_soon(lambda: self._failed(attempt, msg))
                return
        self.world.runtime.call_soon(lambda: self._succeeded(attempt, data, nominal))

    def _fetch(self, attempt: Attempt) -> tuple[bytes, int]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        req = urllib.request.Request(attempt.url, headers={
            "User-Agent": "harvester-sim/vm-image-controller"})
        clock = self.world.clock
        with opener.open(req, timeout=60) as resp:
            length = int(resp.headers.get("Content-Length") or 0)
            nominal_hdr = resp.headers.get(NOMINAL_SIZE_HEADER)
            nominal = int(nominal_hdr) if nominal_hdr else length
            paced_by_server = nominal_hdr is not None
            rate = max(1e-9, float(self.world.timings.download_mib_s)) * MIB
            wall_total = clock.sim_to_wall(nominal / rate) if nominal else 0.0
            # paced on the clock's run time, not wall time: the download lasts its simulated
            # seconds even if the runtime stalls (the clock is held) meanwhile
            t0 = clock.run_elapsed()
            buf = bytearray()
            while True:
                if attempt.cancelled.is_set() or self._stopping.is_set():
                    raise _Cancelled()
                chunk = resp.read(CHUNK)
                if not chunk:
                    break
                buf.extend(chunk)
                frac = len(buf) / length if length else 0.0
                if not paced_by_server and length:
                    self._pace(t0 + wall_total * frac, attempt)
                pct = min(99, int(frac * 100))
                if pct >= attempt.last_progress + 5:
                    attempt.last_progress = pct
                    self.world.runtime.call_soon(lambda p=pct: self._progress(attempt, p))
            if length and len(buf) < length:
                raise http.client.IncompleteRead(bytes(buf), length - len(buf))
            return bytes(buf), nominal or len(buf)

    def _pace(self, until: float, attempt: Attempt) -> None:
        """Wait until the clock's run time reaches ``until`` (cancellation ends the wait)."""
        clock = self.world.clock
        while True:
            ahead = until - clock.run_elapsed()
            if ahead <= 1e-6:
                return
            if attempt.cancelled.wait(min(ahead, 0.05)) or self._stopping.is_set():
                raise _Cancelled()

    # ------------------------------------------------------------------ runtime thread
    def _progress(self, attempt: Attempt, pct: int) -> None:
        if not self._current(attempt):
            return

        def fn(cur: Obj) -> Obj | None:
            st = cur.setdefault("status", {})
            if int(st.get("progress") or 0) >= pct:
                return None
            st["progress"] = pct
            return cur
        self._write(attempt.key, fn)

    def _succeeded(self, attempt: Attempt, data: bytes, nominal: int) -> None:
        if not self._current(attempt):
            return
        key = attempt.key
        img = self.c.try_get(API, KIND, key[1], key[0])
        if img is None:
            self.attempts.pop(key, None)
            return
        self.blobs[key] = data
        self._ensure_pvc(img, nominal)
        now = self.world.clock.timestamp()

        def fn(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            st["progress"] = 100
            st["size"] = nominal
            st["virtualSize"] = nominal
            _set_cond(st, "Imported", "True", "", "", now)
            _set_cond(st, "RetryLimitExceeded", "False", "", "", now, only_if_present=True)
            return cur
        self._write(key, fn)
        self.attempts.pop(key, None)
        ident = f"{key[0]}/{key[1]}"
        is_os = OS_IMAGE_ANNOTATION in (img["metadata"].get("annotations") or {})
        end = self.world.clock.now()
        self.world.timeline.record("image_imported", image=ident, size=nominal,
                                   duration_s=round(end - attempt.started, 3))
        self.world.timeline.record("span", what="iso_download" if is_os else "image_download",
                                   start=round(attempt.started, 3), end=round(end, 3),
                                   ok=True, image=ident)

    def _failed(self, attempt: Attempt, msg: str) -> None:
        if not self._current(attempt):
            return
        key = attempt.key
        self.attempts.pop(key, None)
        img = self.c.try_get(API, KIND, key[1], key[0])
        if img is None:
            return
        retry = int((img.get("spec") or {}).get("retry", 3))
        now = self.world.clock.timestamp()
        box: dict[str, Any] = {}

        def fn(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            failed = int(st.get("failed") or 0) + 1
            st["failed"] = failed
            st["lastFailedTime"] = now
            err = f"failed due to error: {msg}"
            if failed > 1:
                err = f"retry attempted {failed - 1}/{retry} {err}"
            if failed > retry:
                _set_cond(st, "RetryLimitExceeded", "True", "", err, now)
                _set_cond(st, "Imported", "False", "ImportFailed", err, now)
            else:
                _set_cond(st, "RetryLimitExceeded", "False", "", err, now)
            box["final"] = failed > retry
            box["failed"] = failed
            return cur
        if not self._write(key, fn):
            return
        ident = f"{key[0]}/{key[1]}"
        self.world.timeline.record("image_import_failed", image=ident, reason=msg,
                                   attempt=box.get("failed"), final=box.get("final"))
        if not box.get("final"):
            self._retry_timers[key] = self.world.runtime.after(
                RETRY_DELAY_S, lambda: self._start(key))

    def _ensure_pvc(self, img: Obj, size: int) -> None:
        """The ``cdi`` backend imports into a claim named after the image (CDI's DataVolume
        claim, provisioned and bound by the cluster: ``controllers/volumes.py``); the
        ``backingimage`` backend keeps the image in a Longhorn BackingImage, no claim."""
        md = img["metadata"]
        spec = img.get("spec") or {}
        if (spec.get("backend") or "backingimage") == "backingimage":
            return
        sc = spec.get("targetStorageClassName") or f"longhorn-{md['name']}"
        pvc = {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": md["name"], "namespace": md["namespace"],
                "annotations": {IMAGE_ID_ANNOTATION: f"{md['namespace']}/{md['name']}"},
                "ownerReferences": [{"apiVersion": API, "kind": KIND, "name": md["name"],
                                     "uid": md["uid"], "controller": True,
                                     "blockOwnerDeletion": True}],
            },
            "spec": {"accessModes": ["ReadWriteMany"], "volumeMode": "Block",
                     "storageClassName": sc,
                     "resources": {"requests": {"storage": str(size)}}},
        }
        try:
            self.c.create(pvc)
        except ApiError as exc:
            if exc.code != 409:
                raise


class _Cancelled(Exception):
    pass


def _describe(exc: BaseException, url: str) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"unable to download {url}: HTTP {exc.code} {exc.reason}"
    if isinstance(exc, http.client.IncompleteRead):
        return (f"unable to download {url}: connection closed after "
                f"{len(exc.partial)} bytes, {exc.expected} more expected")
    if isinstance(exc, urllib.error.URLError):
        return f"unable to download {url}: {exc.reason}"
    return f"unable to download {url}: {exc}"


def _cond(st: Obj, type_: str) -> str | None:
    for c in st.get("conditions") or []:
        if c.get("type") == type_:
            return str(c.get("status"))
    return None


def _set_cond(st: Obj, type_: str, status: str, reason: str, message: str, now: str,
              only_if_present: bool = False) -> None:
    conds = st.setdefault("conditions", [])
    for c in conds:
        if c.get("type") == type_:
            if c.get("status") != status:
                c["lastTransitionTime"] = now
            c.update({"status": status, "reason": reason, "message": message,
                      "lastUpdateTime": now})
            return
    if only_if_present:
        return
    conds.append({"type": type_, "status": status, "reason": reason, "message": message,
                  "lastUpdateTime": now, "lastTransitionTime": now})


def setup(world: Any) -> ImageController:
    return ImageController(world)
