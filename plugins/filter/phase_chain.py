"""Filter harvester.upgrade.phase_chain: the cluster phases that follow a phase in this run,
for a phase module's ``then`` option (doc fragment ``harvester.upgrade.phase``).

A phase module's call can start the phases after its own (create their first objects, leave
their waits to their own tasks): the work of the next phase begins as soon as the previous
one is done, instead of after ansible-playbook has finished one task and begun the next
(docs/performance.md, "Phases started by the call before"). Only phases this run will run
are started: the ones ``--tags``/``--skip-tags`` select, up to the first that is left out
(ClusterUpgrade's completion enters NodeUpgrade, whose nodes are the node play's;
NodeUpgrade's completion starts ImageCleanup). A call stops at the first phase that waits.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    phase_table,
    phases,
)

DOCUMENTATION = r"""
name: phase_chain
short_description: The cluster phases after a phase that this run runs (a then option)
version_added: 0.1.0
description:
  - Takes a phase's tag (C(iso_download)) and returns, in order, the cluster phases that
    follow it and that this run's tags select, up to the first one they leave out or that
    no other phase's call starts, as entries of the C(then) option of the phase modules,
    M(harvester.upgrade.node_gate) and M(harvester.upgrade.node_cycle).
  - A phase is selected when the run's tags include C(all), C(tagged) or its tag, and the
    skipped tags include neither C(tagged) nor its tag.
options:
  _input:
    description: The tag of the phase whose module would start the others.
    type: str
    required: true
  run_tags:
    description: The run's tags (C(ansible_run_tags)).
    type: list
    elements: str
    required: true
  skip_tags:
    description: The run's skipped tags (C(ansible_skip_tags)).
    type: list
    elements: str
    required: true
  options:
    description: Options per phase tag added to its entry (e.g. C(job_deadline_seconds) of
      C(image_preload)).
    type: dict
    default: {}
author:
  - harvester-upgrade contributors
"""

EXAMPLES = r"""
- name: "ISODownload | Download the release ISO (and start the phases after it)"
  harvester.upgrade.iso_download:
    then: "{{ 'iso_download'
      | harvester.upgrade.phase_chain(ansible_run_tags, ansible_skip_tags) }}"
"""

RETURN = r"""
_value:
  description: One mapping per phase to start, C(phase) (its tag) and its options.
  type: list
  elements: dict
"""

# the phases another phase's call may start
STARTABLE = frozenset(phases.get(name).tag for name in phase_table.TABLE)


def _selected(tag: str, run_tags: set[str], skip_tags: set[str]) -> bool:
    if tag in skip_tags or "tagged" in skip_tags:
        return False
    return bool(run_tags & {"all", "tagged", tag})


def phase_chain(tag: Any, run_tags: Any, skip_tags: Any,
                options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The entries of ``then`` for the phase tagged ``tag``."""
    try:
        phase = phases.get(str(tag))
    except KeyError:
        raise AnsibleFilterError(f"phase_chain: unknown phase {tag!r}") from None
    if not isinstance(run_tags, (list, tuple, set)) or not isinstance(
            skip_tags, (list, tuple, set)):
        raise AnsibleFilterError("phase_chain: run_tags and skip_tags must be lists")
    run, skip = {str(t) for t in run_tags}, {str(t) for t in skip_tags}
    opts = options or {}
    if not isinstance(opts, dict):
        raise AnsibleFilterError("phase_chain: options must be a mapping of phase tag to options")
    out: list[dict[str, Any]] = []
    nxt = phases.following(phase)
    while nxt is not None and nxt.tag in STARTABLE and _selected(nxt.tag, run, skip):
        out.append({"phase": nxt.tag, **(opts.get(nxt.tag) or {})})
        nxt = phases.following(nxt)
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"phase_chain": phase_chain}
