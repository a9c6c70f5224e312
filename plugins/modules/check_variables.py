#!/usr/bin/python
# Copyright: harvester-upgrade contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of harvester.upgrade.check_variables (an action plugin only, as
ansible.builtin.assert is: plugins/action/check_variables.py; nothing runs on a host)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: check_variables
short_description: Check the harvester.upgrade playbook variables in one task
version_added: 0.2.0
description:
  - Checks, in one task and before anything talks to the cluster, what role
    C(harvester.upgrade.common) runs first in every play (a dependency of every phase role).
  - The cross-phase variables against role C(harvester.upgrade.common)'s argument spec (entry
    point C(variables) of its C(meta/argument_specs.yml)), with Ansible's own validator.
  - The variables of the roles in O(roles) against their C(main) argument specs, for roles
    imported with C(rolespec_validate=false) (the playbooks do, to save Ansible's check task
    per role).
  - What an argument spec cannot say, for every C(upgrade_*) variable and every role knob
    (C(preflight_*), C(node_upgrade_*), ...) - a string where a list is expected, a negative
    deadline or count, a bad node name in C(upgrade_pause_nodes).
  - Fails with C(Invalid variables) and every problem found, each naming its variable. It
    only reads variables, so it changes nothing, in check mode or not.
options:
  roles:
    description:
      - Roles of this collection (short names such as C(iso_download)) whose C(main) argument
        specs are checked too. Two roles declaring the same option are refused.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Reads variables only; the same in check mode.
    support: full
  action:
    description: Runs on the controller only (an action plugin).
    support: full
author:
  - harvester-upgrade developers (@harvester-upgrade)
"""

EXAMPLES = r"""
- name: Check the cross-phase variables and two phase roles' variables
  harvester.upgrade.check_variables:
    roles: [iso_download, repo_create]
  register: checked
"""

RETURN = r"""
checked:
  description: Names of the variables checked (those defined among the specs' options and
    the knobs checked for type and range).
  returned: always
  type: list
  elements: str
errors:
  description: One message per problem, each naming its variable (empty when all are fine).
  returned: always
  type: list
  elements: str
"""
