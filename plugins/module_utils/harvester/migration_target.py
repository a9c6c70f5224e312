# Copyright: (c) 2026, harvester-upgrade contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a live migration is sent to a chosen node, on the KubeVirt the cluster runs.

* KubeVirt v1.6.0 and later: ``VirtualMachineInstanceMigration.spec.addedNodeSelector``
  (kubevirt/kubevirt, first released in v1.6.0; Harvester v1.7.0 ships KubeVirt 1.6.3).
* Older KubeVirt (Harvester v1.5.x ships 1.4.0, v1.6.x ships 1.5.2) has no such field: the API
  server prunes it and virt-controller would not read it. There the collection asks Harvester
  itself: the VM ``migrate`` action (harvester/harvester pkg/api/vm/handler.go), which pins
  the target through the VMI's node selector (v1.5.x) or the VM's (v1.6.x) and creates the
  migration; Harvester's migration controller removes the pin when the migration ends.

The version is the one the cluster runs: the KubeVirt CR ``harvester-system/kubevirt``
``status.observedKubeVirtVersion`` (Harvester's upgrade script waits on the same field).
Without it, the served schema decides (OpenAPI v3 of ``kubevirt.io/v1`` lists
``addedNodeSelector`` or not); without either, the Harvester action, which works on every
Harvester release (v1.7.0's action itself uses ``addedNodeSelector``).

Harvester's API is reached through the same endpoint and credentials as everything else: the
API server's service proxy to the ``harvester`` Service (``https:harvester:8443``), which
needs RBAC ``create`` on ``services/proxy`` in ``harvester-system``. (Rancher also serves
``/v1/harvester`` on the cluster VIP, but the kubeconfig names the Kubernetes API endpoint,
which may be the VIP's port 6443 or Rancher's ``/k8s/clusters/local``; the service proxy works
behind both.) See docs/node-upgrade.md.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)

ADDED_NODE_SELECTOR = "addedNodeSelector"
HARVESTER_ACTION = "harvester-migrate-action"
ADDED_NODE_SELECTOR_SINCE = (1, 6, 0)
KUBEVIRT_NS = "harvester-system"
HARVESTER_PROXY = ("/api/v1/namespaces/harvester-system/services/https:harvester:8443/proxy"
                   "/v1/harvester/kubevirt.io.virtualmachines/{namespace}/{name}?action=migrate")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def parse_kubevirt_version(text: str) -> tuple[int, int, int] | None:
    """``1.4.0-150600.5.15.1`` (SUSE build) or ``v1.6.0`` -> ``(1, 4, 0)``."""
    m = _VERSION.match(str(text or "").strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _schema_has_added_node_selector(kube: Any) -> bool | None:
    try:
        status, body = kube.raw_get("/openapi/v3/apis/kubevirt.io/v1")
    except Exception:  # noqa: BLE001 - no answer: unknown
        return None
    if status != 200:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    for name, sch in ((doc.get("components") or {}).get("schemas") or {}).items():
        if name.endswith("VirtualMachineInstanceMigration"):
            spec = ((sch.get("properties") or {}).get("spec") or {})
            return ADDED_NODE_SELECTOR in (spec.get("properties") or {})
    return None


def detect(kube: Any) -> dict[str, Any]:
    """``{"mechanism", "kubevirt", "source", "why"}`` for this cluster, now."""
    kv = None
    try:
        kv = kube.get(*c.KUBEVIRT, "kubevirt", KUBEVIRT_NS)
    except Exception:  # noqa: BLE001 - not served / not allowed: try the schema
        kv = None
    st = (kv or {}).get("status") or {}
    observed = str(st.get("observedKubeVirtVersion") or "")
    version = parse_kubevirt_version(observed)
    if version is not None:
        new = version >= ADDED_NODE_SELECTOR_SINCE
        rolling = st.get("targetKubeVirtVersion") not in (None, "", observed)
        why = (f"KubeVirt {observed} (KubeVirt CR status.observedKubeVirtVersion) "
               + ("has" if new else "has no") + " VirtualMachineInstanceMigration "
               "spec.addedNodeSelector (KubeVirt v1.6.0+)")
        if rolling:
            why += f"; KubeVirt is rolling to {st.get('targetKubeVirtVersion')}"
        return {"mechanism": ADDED_NODE_SELECTOR if new else HARVESTER_ACTION,
                "kubevirt": observed, "source": "KubeVirt CR", "why": why}
    served = _schema_has_added_node_selector(kube)
    if served is not None:
        return {"mechanism": ADDED_NODE_SELECTOR if served else HARVESTER_ACTION,
                "kubevirt": "", "source": "served schema",
                "why": "the served VirtualMachineInstanceMigration schema "
                       + ("lists" if served else "does not list") + " spec.addedNodeSelector"}
    return {"mechanism": HARVESTER_ACTION, "kubevirt": "", "source": "default",
            "why": "KubeVirt version unknown (no KubeVirt CR status, no schema): Harvester's "
                   "migrate action works on every Harvester release"}


def describe(m: dict[str, Any]) -> str:
    how = ("VirtualMachineInstanceMigration spec.addedNodeSelector"
           if m["mechanism"] == ADDED_NODE_SELECTOR
           else "Harvester's VM migrate action (POST .../kubevirt.io.virtualmachines/<ns>/<vm>"
                "?action=migrate through the harvester Service)")
    return f"target-aware migrations use {how}: {m['why']}"


class ActionRefused(Exception):
    """Harvester's migrate action answered with an error (status, its text)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"Harvester's migrate action answered {status or 'no response'}: "
                         f"{message}")
        self.status = status
        self.text = message


def action_refuses(vmi: dict[str, Any] | None) -> str | None:
    """Why Harvester's migrate action refuses this VMI whatever the moment, from its spec
    alone: a CD-ROM disk or a container disk volume (``ValidateVMMigratable`` /
    ``VMContainsCDRomOrContainerDisk``, harvester/harvester pkg/util/virtualmachineinstance,
    v1.5.0 and v1.6.0); None when only the action can tell (its checks of the VMI's state and
    of the target). Such a VM is sent without a target instead of through a doomed POST."""
    spec = (vmi or {}).get("spec") or {}
    disks = ((spec.get("domain") or {}).get("devices") or {}).get("disks") or []
    if any(isinstance(d, dict) and d.get("cdrom") is not None for d in disks) or any(
            isinstance(v, dict) and v.get("containerDisk") is not None
            for v in spec.get("volumes") or []):
        return "CD-ROM or container disk is set"
    return None


def harvester_migrate(kube: Any, namespace: str, name: str, node: str) -> None:
    """POST Harvester's ``migrate`` action with ``{"nodeName": node}``; raises
    :class:`ActionRefused` unless Harvester answers 204 (it created the migration)."""
    status, body = kube.raw_post(HARVESTER_PROXY.format(namespace=namespace, name=name),
                                 {"nodeName": node})
    forget = getattr(kube, "forget", None)
    if forget is not None:   # Harvester wrote these (a step's remembered reads are stale)
        for kind in ("VirtualMachineInstanceMigration", "VirtualMachineInstance",
                     "VirtualMachine"):
            forget("kubevirt.io/v1", kind)
    if status not in (200, 204):
        raise ActionRefused(status, body.decode(errors="replace").strip()[:500])
