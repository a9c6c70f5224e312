"""Harvester's VM ``migrate`` action and its migration controller.

Sources (harvester/harvester):

* ``pkg/api/vm/handler.go`` ``migrate`` at v1.5.1, v1.6.0 and v1.7.0 (``MigrateInput``
  ``{"nodeName": ...}`` in ``pkg/api/vm/types.go``), ``pkg/api/vm/schema.go`` (the action is
  a resource action of ``kubevirt.io.virtualmachine``), ``pkg/server/router.go``
  (``/v1/harvester/{type}/{namespace}/{name}?action=...``), ``pkg/server/types.go`` (the
  server authenticates everybody as admin: access control is Rancher's, in front of it).
* ``pkg/util/virtualmachineinstance/virtualmachineinstance.go`` ``ValidateVMMigratable``,
  ``pkg/api/vm/formatter.go`` ``isReady``.
* ``pkg/controller/master/migration/vmim_controller.go`` / ``vmi_controller.go`` at v1.5.1 and
  v1.6.0: the VMI annotations ``harvesterhci.io/migrationUID`` / ``migrationState`` while a
  migration runs, and the reset when it ends.

The action, by the Harvester version the serving pod runs (its image tag):

* < v1.6.0: the VMI gets ``spec.nodeSelector[kubernetes.io/hostname] = nodeName`` and the
  annotation ``harvesterhci.io/migrationTargetNodeName`` (an update impersonating KubeVirt's
  controller), then a ``VirtualMachineInstanceMigration`` ``generateName: <vm>-`` is created;
  KubeVirt builds the target pod from the VMI, so it lands on ``nodeName``. The migration
  controller removes the selector and the annotations when the migration completes or fails.
* v1.6.x: the VMI gets the annotation only, the VM template gets the hostname selector (KubeVirt
  copies it to the VMI with vmRolloutStrategy LiveUpdate); the controller drops it from the
  VM template on every migration phase change (``syncVM``), so KubeVirt copies the removal back
  once the migration has ended. (PR #8707, the fix for issue #8670.)
* v1.7.0 and later: the annotation and ``spec.addedNodeSelector`` on the migration (PR #9096,
  issue #8703; needs KubeVirt v1.6.0).

Errors as the real handler returns them: a body that does not decode -> 422 (plain text), the
target the VM runs on -> 422, every other refusal -> 500 with the error text; success -> 204.
An unknown action -> 422 ``InvalidAction`` (rancher/apiserver ``ValidateAction``), a method
other than POST with an action -> 405.

The handler is served on the ``https`` port (8443) of the pods of Deployment
``harvester-system/harvester`` (the program ``harvester-apiserver`` of
``programs/harvester_server.py``, which routes the image download and these actions),
reached like on a real cluster through the API server's service proxy
``/api/v1/namespaces/harvester-system/services/https:harvester:8443/proxy/v1/harvester/...``,
and on the simulator's own HTTPS server under ``/v1/harvester/...`` (the path Rancher serves on
the VIP; see ``api/server.py``).
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qs

from ..api.errors import ApiError
from ..programs.base import image_repo
from ..releases.catalog import parse_version
from . import podutil as pu

log = logging.getLogger("harvester_sim.harvester_vm")

Obj = dict[str, Any]
API = "kubevirt.io/v1"
NS = "harvester-system"
PORT = 8443
HOSTNAME = "kubernetes.io/hostname"
ANN_TARGET = "harvesterhci.io/migrationTargetNodeName"
ANN_UID = "harvesterhci.io/migrationUID"
ANN_STATE = "harvesterhci.io/migrationState"
ANN_TIMESTAMP = "harvesterhci.io/timestamp"
STATE_PENDING = "Pending migration"
STATE_MIGRATING = "Migrating"
STATE_ABORTING = "Aborting migration"
MIGRATING_PHASES = ("Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running")
VM_TYPE = "kubevirt.io.virtualmachines"
RESOURCE_ACTIONS = ("start", "stop", "restart", "softreboot", "ejectCdRom", "pause", "unpause",
                    "migrate", "abortMigration", "findMigratableNodes", "backup", "snapshot",
                    "restore", "createTemplate", "addVolume", "removeVolume", "clone",
                    "forceStop", "dismissInsufficientResourceQuota",
                    "updateResourceQuota", "deleteResourceQuota")


def _version(tag: str) -> tuple[int, int, int]:
    try:
        return parse_version(tag)[:3]
    except ValueError:
        return (1, 5, 0)


def harvester_version(client: Any, world: Any) -> tuple[int, int, int]:
    """Version the Harvester controllers run: Deployment ``harvester``'s image tag, else the
    installed release."""
    dep = client.peek("apps/v1", "Deployment", "harvester", NS)
    for ctr in (((dep or {}).get("spec") or {}).get("template") or {}).get(
            "spec", {}).get("containers") or []:
        if image_repo(str(ctr.get("image", ""))).endswith("rancher/harvester"):
            return _version(str(ctr["image"]).rsplit(":", 1)[-1])
    inst = getattr(world.extras.get("releases"), "installed", None)
    return _version(str(getattr(inst, "version", "") or "v1.5.0"))


def _text(code: int, msg: str) -> tuple[int, dict[str, str], bytes]:
    return code, {"Content-Type": "text/plain; charset=utf-8"}, msg.encode()


def _api_error(code: int, kind: str, msg: str) -> tuple[int, dict[str, str], bytes]:
    body = {"type": "error", "links": {}, "code": kind, "message": msg, "status": code}
    return code, {"Content-Type": "application/json"}, json.dumps(body).encode()


class _Refused(Exception):
    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code = code


def _running(vmi: Obj) -> bool:
    return ((vmi.get("status") or {}).get("phase") or "") == "Running" and \
        not vmi["metadata"].get("deletionTimestamp")


def _ready(vmi: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (vmi.get("status") or {}).get("conditions") or [])


def validate_migratable(vmi: Obj) -> None:
    """``ValidateVMMigratable``."""
    md, spec = vmi["metadata"], vmi.get("spec") or {}
    who = f"{md.get('namespace')}/{md.get('name')}"
    if not _running(vmi):
        raise _Refused(500, f"VM {who} is not live migratable as it is not running")
    if (md.get("annotations") or {}).get(ANN_UID):
        raise _Refused(500, f"VM {who} is not live migratable as it is already in a migrating "
                            "state")
    if (spec.get("nodeSelector") or {}).get(HOSTNAME):
        raise _Refused(500, f"VM {who} is not live migratable as node selector is set")
    dev = (spec.get("domain") or {}).get("devices") or {}
    if dev.get("hostDevices"):
        raise _Refused(500, f"VM {who} is not live migratable as PCIe or USB devices are "
                            "attached")
    if dev.get("gpus"):
        raise _Refused(500, f"VM {who} is not live migratable as vGPU devices are attached")
    cdrom = any("cdrom" in d for d in dev.get("disks") or [])
    if cdrom or any("containerDisk" in v for v in spec.get("volumes") or []):
        raise _Refused(500, f"VM {who} is not live migratable as CD-ROM or container disk is "
                            "set")


def _node_selector_matches(vmi: Obj, node: Obj) -> bool:
    """``getNodeSelectorRequirementFromVMI``: the match expressions of the VMI's required node
    affinity (all terms ANDed, as the handler builds one selector)."""
    labels = node["metadata"].get("labels") or {}
    req = ((((vmi.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    return all(pu.expr_matches(e, labels) for t in req.get("nodeSelectorTerms") or []
               for e in t.get("matchExpressions") or [])


def _drained(node: Obj) -> bool:
    """``isDrained``: maintenance / drain annotations, unschedulable, unreachable taints."""
    ann = node["metadata"].get("annotations") or {}
    if "harvesterhci.io/maintain-status" in ann or "harvesterhci.io/drain-requested" in ann:
        return True
    if (node.get("spec") or {}).get("unschedulable"):
        return True
    return any(t.get("key") in ("node.kubernetes.io/unreachable",
                                "node.kubernetes.io/unschedulable")
               for t in (node.get("spec") or {}).get("taints") or [])


def migratable_nodes(client: Any, vmi: Obj) -> list[str]:
    """``findMigratableNodesByVMI`` (Harvester reads them from its informer cache: the
    stored Nodes, read-only, not copies of 100 Nodes and their image lists per action)."""
    here = (vmi.get("status") or {}).get("nodeName")
    return [n["metadata"]["name"] for n in client.list_refs("v1", "Node")
            if _node_selector_matches(vmi, n) and n["metadata"]["name"] != here
            and not _drained(n)]


def _unpin(spec: Obj) -> None:
    """``delete(spec.NodeSelector, "kubernetes.io/hostname")`` and the update that sends
    ``spec`` (harvester v1.5.1 ``pkg/controller/master/migration/vmi_controller.go``
    ``resetHarvesterMigrationStateInVMI`` on the VMI, v1.6.0 ``vmim_controller.go`` ``syncVM``
    on the VM template; both update the whole object): a map the delete leaves empty is not
    sent (the field's ``omitempty``), so the stored object has no ``nodeSelector`` any more
    (not an empty one)."""
    sel = spec.get("nodeSelector")
    if isinstance(sel, dict):
        sel.pop(HOSTNAME, None)
        if not sel:
            del spec["nodeSelector"]


def _kubevirt_ready(client: Any) -> bool:
    kv = client.peek(API, "KubeVirt", "kubevirt", NS)
    if kv is None:
        raise _Refused(500, 'kubevirts.kubevirt.io "kubevirt" not found')
    for c in (kv.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Available":
            return c.get("reason") == "AllComponentsReady" and c.get("status") == "True"
    return False


def migrate(client: Any, version: tuple[int, int, int], namespace: str, name: str,
            node_name: str) -> str:
    """The ``migrate`` action; returns the created migration's name."""
    vmi = client.try_get(API, "VirtualMachineInstance", name, namespace)
    if vmi is None:
        raise _Refused(500, f'virtualmachineinstance.kubevirt.io "{name}" not found')
    if not _running(vmi):
        raise _Refused(500, "The VM is not in running state")
    if not _ready(vmi):
        raise _Refused(500, "Can't migrate the VM, the VM is not in ready status")
    validate_migratable(vmi)
    if node_name:
        nodes = migratable_nodes(client, vmi)
        if not nodes:
            raise _Refused(500, f"can't migrate the VM to the node {node_name}: no matching "
                                "migratable nodes found")
        if node_name not in nodes:
            raise _Refused(500, "The target node is non-migratable")
    if version >= (1, 6, 0) and not _kubevirt_ready(client):
        raise _Refused(500, "KubeVirt is not ready")
    vmim: Obj = {"apiVersion": API, "kind": "VirtualMachineInstanceMigration",
                 "metadata": {"generateName": f"{name}-", "namespace": namespace},
                 "spec": {"vmiName": name}}
    if node_name:
        if node_name == (vmi.get("status") or {}).get("nodeName"):
            raise _Refused(422, "The VM is currently running on the target node")

        def pin_vmi(cur: Obj) -> Obj:
            cur["metadata"].setdefault("annotations", {})[ANN_TARGET] = node_name
            if version < (1, 6, 0):
                cur.setdefault("spec", {}).setdefault("nodeSelector", {})[HOSTNAME] = node_name
            return cur

        client.modify(API, "VirtualMachineInstance", name, pin_vmi, namespace)
        if (1, 6, 0) <= version < (1, 7, 0):
            def pin_vm(cur: Obj) -> Obj:
                tpl = cur.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
                tpl.setdefault("nodeSelector", {})[HOSTNAME] = node_name
                return cur

            try:
                client.modify(API, "VirtualMachine", name, pin_vm, namespace)
            except ApiError as exc:
                raise _Refused(500, f"failed to get virtual machine {namespace}/{name}: "
                                    f"{exc}") from exc
        elif version >= (1, 7, 0):
            vmim["spec"]["addedNodeSelector"] = {HOSTNAME: node_name}
    created = client.create(vmim)
    return str(created["metadata"]["name"])


def api_handler(world: Any, client: Any, version: tuple[int, int, int]) -> Any:
    """The Harvester API server's handler for the VM actions the simulator models."""

    def handler(method: str, path: str, query: str, headers: dict[str, str],
                body: bytes) -> tuple[int, dict[str, str], bytes]:
        parts = [p for p in path.split("?", 1)[0].split("/") if p]
        q = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        if parts[:2] != ["v1", "harvester"]:
            return _text(404, "404 page not found")
        action = q.get("action", "")
        if len(parts) != 5 or parts[2] != VM_TYPE or not action:
            return _api_error(404, "NotFound", "not found")
        if method != "POST":
            return _api_error(405, "MethodNotAllowed", f"Method {method} not supported")
        if action not in RESOURCE_ACTIONS:
            return _api_error(422, "InvalidAction", f"Invalid action: {action}")
        if action != "migrate":
            return _api_error(501, "NotImplemented",
                              f"the simulator does not model the {action} action")
        namespace, name = parts[3], parts[4]
        try:
            data = json.loads(body.decode() or "null")
            if not isinstance(data, dict) or not isinstance(data.get("nodeName", ""), str):
                raise ValueError("json: cannot unmarshal into Go value of type vm.MigrateInput")
        except (ValueError, UnicodeDecodeError) as exc:
            # the handler's message (a format string that is never formatted) + the error
            return _text(422, f"Failed to decode request body: %v {exc}")
        try:
            vmim = migrate(client, version, namespace, name, str(data.get("nodeName") or ""))
        except _Refused as exc:
            return _text(exc.code, str(exc))
        except ApiError as exc:
            return _text(500, exc.message)
        world.timeline.record("harvester_vm_migrate", vm=f"{namespace}/{name}",
                              node=str(data.get("nodeName") or ""), migration=vmim)
        return 204, {}, b""

    return handler


def image_version(image: str) -> tuple[int, int, int]:
    """The Harvester version of a ``rancher/harvester:<tag>`` image (the container that
    serves the actions: ``programs/harvester_server.py``)."""
    return _version(image.rsplit(":", 1)[-1])


class MigrationController:
    """``pkg/controller/master/migration``: annotations while a migration runs, and the
    target pinning removed when it ends."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self.c = world.client_for("harvester")
        world.runtime.on("kubevirt.io", "virtualmachineinstancemigrations", self._on_vmim)
        world.runtime.on("kubevirt.io", "virtualmachineinstances", self._on_vmi)

    def _version(self) -> tuple[int, int, int]:
        return harvester_version(self.c, self.world)

    def _update_vmi(self, ns: str, name: str, fn: Any) -> None:
        try:
            self.c.modify(API, "VirtualMachineInstance", name, fn, ns)
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    def _sync_vm(self, ns: str, name: str) -> None:
        """``syncVM``: touch the VM (UI refresh); v1.6.0+ also drop the hostname selector the
        migrate action put on its template."""
        drop = self._version() >= (1, 6, 0)
        ts = str(self.world.clock.timestamp())

        def fn(cur: Obj) -> Obj:
            cur["metadata"].setdefault("annotations", {})[ANN_TIMESTAMP] = ts
            if drop:
                _unpin(((cur.get("spec") or {}).get("template") or {}).get("spec") or {})
            return cur

        try:
            self.c.modify(API, "VirtualMachine", name, fn, ns)
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    def _set_state(self, vmi: Obj, uid: str, state: str) -> None:
        ann = vmi["metadata"].get("annotations") or {}
        if ann.get(ANN_UID) == uid and ann.get(ANN_STATE) == state:
            return
        md = vmi["metadata"]

        def fn(cur: Obj) -> Obj:
            a = cur["metadata"].setdefault("annotations", {})
            a[ANN_UID], a[ANN_STATE] = uid, state
            return cur

        self._update_vmi(md["namespace"], md["name"], fn)
        self._sync_vm(md["namespace"], md["name"])

    def _reset(self, vmi: Obj) -> None:
        """``resetHarvesterMigrationStateInVmiAndSyncVM``."""
        md = vmi["metadata"]
        unpin = self._version() < (1, 6, 0)

        def fn(cur: Obj) -> Obj:
            a = cur["metadata"].setdefault("annotations", {})
            a.pop(ANN_UID, None)
            a.pop(ANN_STATE, None)
            if a.pop(ANN_TARGET, None) and unpin:
                _unpin(cur.get("spec") or {})
            return cur

        self._update_vmi(md["namespace"], md["name"], fn)
        self._sync_vm(md["namespace"], md["name"])

    def _on_vmim(self, type_: str, obj: Obj, old: Obj | None) -> None:
        if type_ == "DELETED":
            return
        md = obj["metadata"]
        vmi = self.c.peek(API, "VirtualMachineInstance", (obj.get("spec") or {}).get(
            "vmiName", ""), md["namespace"])
        if vmi is None:
            return
        phase = (obj.get("status") or {}).get("phase") or ""
        abort = bool(md.get("deletionTimestamp"))
        uid = str(md.get("uid", ""))
        if not phase and not abort and self._version() >= (1, 6, 0):
            self._set_state(vmi, uid, STATE_PENDING)
        elif phase == "Pending" and not abort:
            self._set_state(vmi, uid, STATE_PENDING)
        elif phase != "Failed" and abort:
            self._set_state(vmi, uid, STATE_ABORTING)
        elif phase in (MIGRATING_PHASES if self._version() >= (1, 6, 0) else ("Scheduling",)):
            self._set_state(vmi, uid, STATE_MIGRATING)
        elif phase == "Failed" and (vmi["metadata"].get("annotations") or {}).get(ANN_UID) == uid:
            self._reset(vmi)

    def _on_vmi(self, type_: str, obj: Obj, old: Obj | None) -> None:
        if type_ == "DELETED" or obj["metadata"].get("deletionTimestamp"):
            return
        ann = obj["metadata"].get("annotations") or {}
        ms = (obj.get("status") or {}).get("migrationState") or {}
        if not ann or not ms:
            return
        if ann.get(ANN_UID) and ann.get(ANN_UID) == ms.get("migrationUid") and ms.get("completed"):
            self._reset(obj)


def setup(world: Any) -> MigrationController:
    return MigrationController(world)
