"""Transitional: the names the node steps still import from here, now defined where they
belong (client, waiting, plan_writer, constants, node_states). Removed once the node steps
import them from there."""

from __future__ import annotations

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    client as client,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    constants as c,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
    node_states,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    Kube as Kube,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NodeLoopError as NodeLoopError,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.errors import (
    NotServed as NotServed,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_status import (
    now_iso as now_iso,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    NoActivePlan as NoActivePlan,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    PlanWriter as PlanWriter,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.plan_writer import (
    find_plan as find_plan,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    Source as Source,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.waiting import (
    WaitTimeout as WaitTimeout,
)

PLAN_API = c.PLAN_API_VERSION
PLAN_KIND = c.PLAN_KIND
NODE_LABEL = c.LABEL_NODE
JOB_TYPE_LABEL = c.LABEL_JOB_TYPE
UPGRADE_NS = c.UPGRADE_NS
FLEET_NS = c.FLEET_NS
state_ordinal = node_states.ordinal
