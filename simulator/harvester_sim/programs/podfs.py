"""What programs see of their pod's volumes: files on PVCs, emptyDirs and loop mounts.

Contents live in ``world.extras['volume_data']`` keyed by what backs the volume, so
everything that mounts the same storage sees the same files, as on a real node:

* ``persistentVolumeClaim`` -> the bound PV (``pv/<name>``): shared by every pod using the
  claim (an RWX Longhorn volume mounted on several nodes), kept until the PV is deleted;
* ``emptyDir`` -> ``emptydir/<pod uid>/<volume>``: shared by the pod's containers only,
  dropped with the pod (the kubelet calls :func:`drop_pod`);
* ``hostPath`` -> ``host/<node><path>``.

A loop mount (``mount -o loop,ro FILE DIR``) of an ISO puts an
:class:`harvester_sim.releases.iso.IsoReader` on the target volume: its files then shadow
the volume's own, which is how a Bidirectional mount in one container shows in the others
(upgrade-toolkit's iso-mounter and repo containers share ``share-mount`` that way).

Upstream: the kubelet's volume plugins, kubernetes/kubernetes ``v1.32.4`` (RKE2
``v1.32.4+rke2r1``, Harvester v1.5.1) and ``v1.33.3`` (RKE2 ``v1.33.3+rke2r1``, Harvester v1.6.0):
``pkg/volume/emptydir``,
``pkg/volume/hostpath``, ``pkg/volume/csi`` (a PVC's data live on its PV), and mount
propagation (``pkg/kubelet/kubelet_pods.go`` ``makeMounts``, Bidirectional); ``mount -o
loop`` as util-linux ``mount``.
Not modelled: ``subPath``, configMap/secret/projected/downwardAPI volume contents (not
checked; that a downwardAPI item's file exists, whole or through ``subPath``, is
``host_scripts.pod_file_exists``'s), ``readOnly`` enforcement, capacity limits (``sizeLimit``).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from .base import ProgramContext


@dataclass
class VolumeData:
    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    mount: Any = None          # IsoReader loop-mounted on this volume's root

    def read(self, rel: str) -> bytes | None:
        rel = rel.strip("/")
        if self.mount is not None:
            return self.mount.read(rel) if self.mount.exists(rel) else None
        return self.files.get(rel)

    def exists(self, rel: str) -> bool:
        rel = rel.strip("/")
        if self.mount is not None:
            return bool(self.mount.exists(rel) or self.mount.is_dir(rel))
        return rel in self.files or rel in self.dirs

    def write(self, rel: str, data: bytes) -> None:
        self.files[rel.strip("/")] = bytes(data)

    def remove(self, rel: str) -> None:
        self.files.pop(rel.strip("/"), None)

    def mkdir(self, rel: str) -> bool:
        """``mkdir`` without ``-p``: False when it exists (the toolkit's leader lock)."""
        rel = rel.strip("/")
        if rel in self.dirs or rel in self.files:
            return False
        self.dirs.add(rel)
        return True

    def rmdir(self, rel: str) -> None:
        self.dirs.discard(rel.strip("/"))


def _store(world: Any) -> dict[str, VolumeData]:
    out: dict[str, VolumeData] = world.extras.setdefault("volume_data", {})
    return out


def drop_pod(world: Any, uid: str) -> None:
    store = _store(world)
    for k in [k for k in store if k.startswith(f"emptydir/{uid}/")]:
        del store[k]


def drop_pv(world: Any, pv: str) -> None:
    _store(world).pop(f"pv/{pv}", None)


class PodFS:
    """The filesystem view of one container."""

    def __init__(self, ctx: ProgramContext) -> None:
        self.ctx = ctx
        self.pod = ctx.pod
        self.ns = str((ctx.pod.get("metadata") or {}).get("namespace", ""))

    def _volume(self, name: str) -> dict[str, Any] | None:
        for v in (self.pod.get("spec") or {}).get("volumes") or []:
            if v.get("name") == name:
                return dict(v)
        return None

    def backing_key(self, volume_name: str) -> str | None:
        """The storage a pod volume stands for, or None (unknown volume, unbound claim)."""
        v = self._volume(volume_name)
        if v is None:
            return None
        if v.get("persistentVolumeClaim"):
            claim = v["persistentVolumeClaim"].get("claimName", "")
            pvc = self.ctx.client.try_get("v1", "PersistentVolumeClaim", claim, self.ns)
            pv = ((pvc or {}).get("spec") or {}).get("volumeName")
            return f"pv/{pv}" if pv else None
        if "emptyDir" in v:
            uid = (self.pod.get("metadata") or {}).get("uid", "")
            return f"emptydir/{uid}/{volume_name}"
        if v.get("hostPath"):
            return f"host/{self.ctx.node}{v['hostPath'].get('path', '/')}"
        return None

    def resolve(self, path: str) -> tuple[VolumeData, str] | None:
        """The volume holding ``path`` (longest ``mountPath`` prefix) and the path in it."""
        path = posixpath.normpath("/" + path.lstrip("/"))
        best: tuple[int, str, str] | None = None
        for m in self.ctx.container.get("volumeMounts") or []:
            mp = posixpath.normpath("/" + str(m.get("mountPath", "")).lstrip("/"))
            if path == mp or path.startswith(mp.rstrip("/") + "/"):
                if best is None or len(mp) > best[0]:
                    best = (len(mp), mp, str(m.get("name", "")))
        if best is None:
            return None
        key = self.backing_key(best[2])
        if key is None:
            return None
        data = _store(self.ctx.world).setdefault(key, VolumeData())
        return data, path[len(best[1]):].lstrip("/")

    def volume_at(self, mount_path: str) -> VolumeData | None:
        hit = self.resolve(mount_path)
        return hit[0] if hit is not None else None

    def read(self, path: str) -> bytes | None:
        hit = self.resolve(path)
        return hit[0].read(hit[1]) if hit is not None else None
