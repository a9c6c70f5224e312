"""Start the VMs that were shut down for a node's upgrade (see DOCUMENTATION)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vm_restore
short_description: Restart the VMs shut down for a node once that node is upgraded
version_added: "0.1.0"
description:
  - Reads the node's entry of ConfigMap C(<plan>-restore-vm) in C(harvester-system) and, when
    the plan's C(spec.restoreVM) is true (or I(restore) forces it), starts each recorded VM
    that this collection stopped (its run strategy before the upgrade is put back), waits by
    watch for the VMs to run, and emits C(RestoreVMCompleted) (or C(RestoreVMFailed)) as
    upgrade-toolkit's restore-vm does.
  - Each VM is started once; a re-run leaves running VMs alone. Restore failures are reported
    and, unless I(fail_on_error), do not fail the upgrade (as upstream).
author:
  - harvester-upgrade developers (@harvester-upgrade)
options:
  node:
    description: Node name.
    type: str
    required: true
  plan:
    description: UpgradePlan name; default the active plan.
    type: str
  restore:
    description: Override the plan's C(spec.restoreVM).
    type: bool
  timeout:
    description: Seconds to wait for the restored VMs to run.
    type: int
    default: 900
  fail_on_error:
    description: Fail when a VM could not be restored.
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - harvester.upgrade.auth
"""

EXAMPLES = r"""
- name: Restart the VMs that were shut down for this node
  harvester.upgrade.vm_restore:
    node: "{{ inventory_hostname }}"
"""

RETURN = r"""
restored:
  description: VMs (ns/name) running again.
  returned: always
  type: list
  elements: str
failed:
  description: VMs that could not be restored, with the reason.
  returned: always
  type: list
  elements: str
recorded:
  description: The node's entry in the restore ConfigMap.
  returned: always
  type: list
  elements: str
enabled:
  description: Whether restore was enabled.
  returned: always
  type: bool
"""

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_kube,
    node_module,
    node_restore,
)


def main() -> None:
    spec = node_module.argument_spec(
        node={"type": "str", "required": True},
        restore={"type": "bool"},
        timeout={"type": "int", "default": 900},
        fail_on_error={"type": "bool", "default": False},
    )
    module = node_module.new_module(spec)
    p = module.params

    def step(kube, writer):  # type: ignore[no-untyped-def]
        res = node_restore.restore_vms(kube, writer, p["node"], timeout=p["timeout"],
                                       force=p["restore"])
        if res["failed"] and p["fail_on_error"]:
            raise node_kube.NodeLoopError("could not restore: " + "; ".join(res["failed"]))
        return res

    node_module.run(module, step)


if __name__ == "__main__":
    main()
