"""The order of one node's upgrade steps, written once for both node paths.

``node_upgrade_mode: node`` runs the table in one process (:func:`node_cycle.run_cycle`: one
call per step, in this order, named as here in the module's ``steps``). ``node_upgrade_mode:
steps`` runs it as one task per step: :data:`GATE` in ``roles/node_upgrade/tasks/main.yml``,
then :data:`MULTI_NODE` (``multi_node.yml``) or :data:`SINGLE_NODE` (``single_node.yml``),
each task calling ``harvester.upgrade.<module>`` with the options in ``args``.
``tests/unit/test_node_step_order.py`` fails when the role's tasks and this table diverge.

Multi-node (docs/protocol.md, NodeUpgrade rows): Rancher asks to drain the node (pre-drain),
the VMs leave it, the pre-drain Job runs and the hook is answered; Rancher drains it and asks
for the post-drain, the OS upgrade Job runs and the node reboots onto the new OS; the
post-drain is answered, Rancher uncordons the node; the VMs stopped for it start again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Step:
    """``name``: the step as :mod:`node_cycle` reports it; ``module`` and ``args``: the module
    (``harvester.upgrade.<module>``) and the options that select what it does, as the steps
    mode's task calls it; ``resume_skip``: skipped when the node is already past its
    pre-drain (a resumed run: its VMs may be back on it)."""

    name: str
    module: str
    args: dict[str, Any] = field(default_factory=dict)
    resume_skip: bool = False


# Before any step: is Rancher asking for this node, is it paused?
GATE: tuple[Step, ...] = (
    Step("gate", "node_gate", {"step": "batch"}),
    Step("pause", "node_gate", {"step": "pause"}),
)

MULTI_NODE: tuple[Step, ...] = (
    Step("await pre-drain", "drain_hook_ack", {"hook": "pre-drain", "step": "await"}),
    Step("evacuate", "vm_evacuate", resume_skip=True),
    Step("answer pre-drain", "drain_hook_ack", {"hook": "pre-drain", "step": "answer"}),
    Step("await post-drain", "drain_hook_ack", {"hook": "post-drain", "step": "await"}),
    Step("os upgrade", "node_job", {"type": "post-drain"}),
    Step("answer post-drain", "drain_hook_ack", {"hook": "post-drain", "step": "answer"}),
    Step("await release", "drain_hook_ack", {"step": "released"}),
    Step("restore", "vm_restore"),
)

# No Rancher drain: every VM is stopped, the single-node Job upgrades RKE2 and the OS.
SINGLE_NODE: tuple[Step, ...] = (
    Step("evacuate", "vm_evacuate", {"shutdown_all": True}),
    Step("os upgrade", "node_job", {"type": "single-node-upgrade"}),
    Step("restore", "vm_restore"),
)


def path(single_node: bool) -> tuple[Step, ...]:
    """The steps after :data:`GATE` for a single-node or a multi-node cluster."""
    return SINGLE_NODE if single_node else MULTI_NODE
