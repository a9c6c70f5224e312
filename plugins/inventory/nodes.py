"""Inventory plugin: the Harvester cluster's nodes in Rancher's drain order."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: nodes
short_description: Harvester cluster nodes, in the order Rancher drains them
version_added: "0.1.0"
description:
  - Reads the cluster's Nodes, CAPI Machines, machine-plan Secrets, VirtualMachineInstances
    and the active UpgradePlan through the Kubernetes API and adds one host per managed node,
    in Rancher's drain order - the etcd init node (machine label
    C(rke.cattle.io/init-node=true)) first, then the other etcd and control-plane nodes by
    machine name, then worker-only nodes by machine name - so a play with C(order=inventory)
    and C(serial=1) walks the nodes as Rancher upgrades them.
  - Host names are node names. Every host gets C(ansible_connection=local) (the play runs on
    the controller and talks to the API) and the variables C(harvester_node_name),
    C(harvester_machine), C(harvester_machine_plan_secret), C(harvester_roles),
    C(harvester_tier), C(harvester_order), C(harvester_os_image),
    C(harvester_kubelet_version), C(harvester_harvester_version), C(harvester_vm_count),
    C(harvester_ready), C(harvester_unschedulable), C(harvester_state) (from the plan's
    nodeUpgradeStatuses), C(harvester_upgraded), C(harvester_pre_drain),
    C(harvester_post_drain).
  - Groups - C(harvester_nodes) (all, in order), C(etcd), C(control_plane), C(worker),
    C(witness), C(upgraded) and C(pending).
  - Authentication options and C(K8S_AUTH_*) environment variables are those of
    kubernetes.core.
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description: Token that ensures this is a source file for this plugin.
    required: true
    choices: ['harvester.upgrade.nodes']
  plan:
    description: UpgradePlan name; default the active plan (none is fine).
    type: str
  kubeconfig:
    description: Path to a kubeconfig (or C(K8S_AUTH_KUBECONFIG), else C(~/.kube/config)).
    type: path
    env:
      - name: K8S_AUTH_KUBECONFIG
  context:
    description: Kubeconfig context.
    type: str
    env:
      - name: K8S_AUTH_CONTEXT
  host:
    description: API server URL.
    type: str
    env:
      - name: K8S_AUTH_HOST
  api_key:
    description: Bearer token.
    type: str
    env:
      - name: K8S_AUTH_API_KEY
  validate_certs:
    description: Verify the API server's certificate.
    type: bool
    aliases: [verify_ssl]
    env:
      - name: K8S_AUTH_VERIFY_SSL
  ca_cert:
    description: CA bundle for the API server.
    type: path
    aliases: [ssl_ca_cert]
    env:
      - name: K8S_AUTH_SSL_CA_CERT
  client_cert:
    description: Client certificate.
    type: path
    aliases: [cert_file]
    env:
      - name: K8S_AUTH_CERT_FILE
  client_key:
    description: Client key.
    type: path
    aliases: [key_file]
    env:
      - name: K8S_AUTH_KEY_FILE
"""

EXAMPLES = r"""
# inventories/harvester.nodes.yml - credentials from K8S_AUTH_* / KUBECONFIG
plugin: harvester.upgrade.nodes
---
# a kubeconfig file and a plan by name; extra groups by tier
plugin: harvester.upgrade.nodes
kubeconfig: out/kubeconfig
plan: hvst-upgrade-abcde
keyed_groups:
  - key: harvester_tier
    prefix: tier
"""

import os  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleParserError  # noqa: E402
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable  # noqa: E402

AUTH_OPTIONS = ("kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert",
                "client_cert", "client_key")


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "harvester.upgrade.nodes"

    def _auth_options(self) -> dict[str, Any]:
        """The connection options that are set. One whose value comes from an empty
        environment variable is not: AWX exports a credential's blank inputs as empty
        variables, and Ansible would resolve an empty path option to the current directory
        (the modules, through kubernetes.core, ignore an empty K8S_AUTH_SSL_CA_CERT too)."""
        auth: dict[str, Any] = {}
        for name in AUTH_OPTIONS:
            value, origin = self.get_option_and_origin(name)
            if value is None:
                continue
            if (isinstance(origin, str) and origin.startswith("env: ")
                    and os.environ.get(origin[len("env: "):]) == ""):
                continue
            auth[name] = value
        return auth

    def verify_file(self, path: str) -> bool:
        return super().verify_file(path) and path.endswith(
            ("harvester.nodes.yml", "harvester.nodes.yaml", ".nodes.yml", ".nodes.yaml"))

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            from ansible_collections.harvester.upgrade.plugins.module_utils.harvester import (
                node_facts,
                node_kube,
                node_order,
            )
        except ImportError as exc:
            raise AnsibleParserError(f"harvester.upgrade.nodes: {exc}") from exc
        auth = self._auth_options()
        try:
            kube = node_kube.Kube.from_options(**auth)
            try:
                plan = node_kube.find_plan(kube, self.get_option("plan"))
            except node_kube.NodeLoopError:
                if self.get_option("plan"):
                    raise
                plan = None
            facts = node_facts.cluster_facts(kube, plan)
        except Exception as exc:  # noqa: BLE001 - shown as an inventory error
            raise AnsibleParserError(f"harvester.upgrade.nodes: cannot read the cluster: "
                                     f"{exc}") from exc
        strict = self.get_option("strict")
        for group in ("harvester_nodes", "etcd", "control_plane", "worker", "witness",
                      "upgraded", "pending"):
            self.inventory.add_group(group)
        for fact in facts:
            name = fact["name"]
            self.inventory.add_host(name)
            for group in node_order.groups_for(fact):
                self.inventory.add_child(group, name)
            hvars = node_order.host_vars(fact)
            for key, value in hvars.items():
                self.inventory.set_variable(name, key, value)
            self._set_composite_vars(self.get_option("compose"), hvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hvars, name,
                                              strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hvars, name,
                                           strict=strict)
