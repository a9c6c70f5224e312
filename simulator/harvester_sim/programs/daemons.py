"""Long-running system containers whose work other simulated controllers already do.

Each entry is one upstream container that serves until it is stopped and exits promptly on
SIGTERM (Go servers stop their listeners and return; ``pause`` exits on the signal). The
program only keeps the container running; what the component does to the cluster is
modelled by the controller named in the table.

* ``*/pause``, ``*/mirrored-pause`` — kubernetes/kubernetes ``build/pause/linux/pause.c``
  (exits 0 on SIGINT/SIGTERM);
* ``*/virt-launcher`` — kubevirt/kubevirt ``cmd/virt-launcher`` (v1.4); the VM itself is
  ``controllers/kubevirt.py``'s;
* ``*/virt-operator`` — kubevirt/kubevirt ``cmd/virt-operator`` (v1.4.0, v1.5.2, v1.6.3):
  ``pkg/virt-operator/application.go`` installs no signal handler, so the Go runtime's
  default ends the process on SIGTERM; the KubeVirt CR it reconciles is
  ``controllers/kubevirt.py``'s;
* ``longhornio/longhorn-instance-manager`` — longhorn/longhorn-instance-manager
  (v1.7-v1.9); replicas and engines are ``controllers/longhorn.py``'s;
* ``rancher/harvester-webhook`` — harvester/harvester ``cmd/webhook`` (v1.4-v1.6);
* ``rancher/harvester-node-manager`` — harvester/node-manager;
* ``rancher/rancher`` — rancher/rancher ``main.go`` (v2.9-v2.12); its controllers are
  ``controllers/rancher.py``'s.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from .base import REGISTRY, ProgramContext, image_repo

SERVE_TICK_S = 3600.0

DAEMONS: dict[str, tuple[str, ...]] = {
    "pause": ("pause", "mirrored-pause"),
    "virt-launcher": ("virt-launcher",),
    "virt-operator": ("virt-operator",),
    "longhorn-instance-manager": ("longhornio/longhorn-instance-manager",),
    "harvester-webhook": ("rancher/harvester-webhook",),
    "harvester-node-manager": ("rancher/harvester-node-manager",),
    "rancher": ("rancher/rancher",),
}


def _matcher(suffixes: tuple[str, ...]) -> Any:
    def match(image: str, command: list[str], args: list[str]) -> bool:
        repo = image_repo(image)
        return any(repo == s or repo.endswith("/" + s) for s in suffixes)
    return match


def serve_until_stopped(ctx: ProgramContext) -> Generator[float, None, int]:
    while True:
        yield SERVE_TICK_S


for _name, _suffixes in DAEMONS.items():
    REGISTRY.register(f"daemon-{_name}", _matcher(_suffixes), serve_until_stopped)
