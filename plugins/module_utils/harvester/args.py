"""Argument specs shared by the modules (documented in ``plugins/doc_fragments``).

``AUTH`` is kubernetes.core's auth spec (``kubeconfig``, ``context``, ``host``, ``api_key``,
``ca_cert``, ``validate_certs``…, with its ``no_log`` settings), so the ``K8S_AUTH_*``
variables work as in kubernetes.core; ``PHASE`` holds the options of every phase module
(doc fragment ``harvester.upgrade.phase``).
"""

from __future__ import annotations

import copy
from typing import Any

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import (
        AUTH_ARG_SPEC,
    )
except ImportError:  # pragma: no cover - kubernetes.core is a declared dependency
    AUTH_ARG_SPEC = {}

PHASE: dict[str, Any] = {
    "plan": {"type": "str"},
    "force": {"type": "bool", "default": False},
    "timeout": {"type": "int", "default": 3600},
    "progress_interval": {"type": "int", "default": 30},
    "deadline": {"type": "float"},
    "then": {"type": "list", "elements": "dict", "default": []},
}


def spec(*parts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Auth options + the given parts + extra options, deep-copied."""
    out: dict[str, Any] = copy.deepcopy(AUTH_ARG_SPEC)
    for part in parts:
        out.update(copy.deepcopy(part))
    out.update(copy.deepcopy(extra))
    return out
