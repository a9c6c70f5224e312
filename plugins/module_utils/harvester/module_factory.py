"""The one place the collection's modules build their ``AnsibleModule``.

Every module's ``main()`` calls :func:`new_module` where a module usually calls
``AnsibleModule(...)``. Run as a module (its own Python, AnsiballZ), that is
``AnsibleModule``. The controller's runner (``plugins/plugin_utils/in_process.py``) runs the
same ``main()`` inside the task's worker: it passes this factory, for that one call, a builder
of an object with the same surface (:func:`building`), so the module's code, argument spec,
checks and results are the same on both paths and nothing in a module is replaced.

What a builder must offer, as ``AnsibleModule`` does: ``params``, ``check_mode``, ``warn``,
``exit_json`` and ``fail_json`` (which do not return), and ``_name`` (the module's name, read by
``client.Kube.identify``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ansible.module_utils.basic import AnsibleModule

# the builder of the running call when it is not AnsibleModule (one module runs at a time in a
# process: a module process runs one, a worker runs its task's module calls one after another)
_builder: Callable[..., Any] | None = None


def new_module(argument_spec: dict[str, Any], **kw: Any) -> AnsibleModule:
    """``AnsibleModule(argument_spec=..., **kw)``, or the running call's builder's object."""
    build = _builder if _builder is not None else AnsibleModule
    return build(argument_spec=argument_spec, **kw)  # type: ignore[no-any-return]


@contextlib.contextmanager
def building(builder: Callable[..., Any]) -> Iterator[None]:
    """Within the block, :func:`new_module` builds with ``builder`` (same arguments as
    ``AnsibleModule``)."""
    global _builder
    previous, _builder = _builder, builder
    try:
        yield
    finally:
        _builder = previous
