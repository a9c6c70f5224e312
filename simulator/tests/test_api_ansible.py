"""kubernetes.core modules, run by ansible-playbook, against the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent

PLAYBOOK = textwrap.dedent("""
- hosts: localhost
  gather_facts: false
  vars:
    ns: "{{ test_ns }}"
  tasks:
    - name: create a configmap and a pod (present, wait)
      kubernetes.core.k8s:
        state: present
        definition:
          - {apiVersion: v1, kind: ConfigMap,
             metadata: {name: cfg, namespace: "{{ ns }}", labels: {app: demo, tier: a}},
             data: {k: v}}
          - {apiVersion: v1, kind: ConfigMap,
             metadata: {name: other, namespace: "{{ ns }}", labels: {app: demo, tier: b}}}
          - apiVersion: v1
            kind: Pod
            metadata: {name: p1, namespace: "{{ ns }}", labels: {app: drainme},
                       ownerReferences: [{apiVersion: v1, kind: ReplicationController,
                                          name: rc, uid: 00000000-0000-0000-0000-000000000001,
                                          controller: true}]}
            spec:
              nodeName: node-1
              terminationGracePeriodSeconds: 0
              containers: [{name: c, image: "busybox:1.36"}]
        wait: true
        wait_sleep: 1
        wait_timeout: 30
      register: created
    - assert: {that: [created.changed]}

    - name: same again is not a change
      kubernetes.core.k8s:
        state: present
        definition: {apiVersion: v1, kind: ConfigMap,
                     metadata: {name: cfg, namespace: "{{ ns }}",
                                labels: {app: demo, tier: a}}, data: {k: v}}
      register: again
    - assert: {that: [not again.changed]}

    - name: k8s_info with label and field selectors
      kubernetes.core.k8s_info:
        kind: ConfigMap
        namespace: "{{ ns }}"
        label_selectors: [app=demo, "tier in (a)"]
        field_selectors: [metadata.name=cfg]
      register: info
    - assert:
        that:
          - info.resources | length == 1
          - info.resources[0].data.k == 'v'

    - name: patched state
      kubernetes.core.k8s:
        state: patched
        kind: ConfigMap
        name: other
        namespace: "{{ ns }}"
        definition: {data: {added: "yes"}}
      register: patched
    - assert: {that: [patched.changed, "patched.result.data.added == 'yes'"]}

    - name: json patch
      kubernetes.core.k8s_json_patch:
        kind: ConfigMap
        namespace: "{{ ns }}"
        name: cfg
        patch:
          - {op: add, path: /data/j, value: "1"}
      register: jp
    - assert: {that: [jp.changed, "jp.result.data.j == '1'"]}

    - name: absent (wait)
      kubernetes.core.k8s:
        state: absent
        kind: ConfigMap
        name: other
        namespace: "{{ ns }}"
        wait: true
        wait_sleep: 1
        wait_timeout: 20
    - name: the pod runs (a Pending pod is evicted whatever its PDB says, as upstream)
      kubernetes.core.k8s_info:
        kind: Pod
        name: p1
        namespace: "{{ ns }}"
        wait: true
        wait_condition: {type: Ready, status: "True"}
        wait_timeout: 60
    - name: drain is refused by the PDB
      kubernetes.core.k8s_drain:
        name: node-1
        delete_options: {ignore_daemonsets: true, delete_emptydir_data: true, force: true}
        pod_selectors: [app=drainme]
      register: blocked
      ignore_errors: true
    - assert:
        that:
          - blocked.failed
          - "'disruption budget' in blocked.msg"

    - name: give the test a moment to lift the PDB
      ansible.builtin.pause: {seconds: 1}

    - name: drain goes through
      kubernetes.core.k8s_drain:
        name: node-1
        delete_options: {ignore_daemonsets: true, delete_emptydir_data: true, force: true,
                         wait_timeout: 20, wait_sleep: 1}
        pod_selectors: [app=drainme]
      register: drained
    - assert: {that: [drained.changed]}
    - kubernetes.core.k8s_drain: {name: node-1, state: uncordon}
""")


@pytest.mark.timeout(180)
def test_kubernetes_core_modules(sim: Any, ns: str, tmp_path: Path) -> None:
    c = sim.world.client
    c.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "guard", "namespace": ns},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "drainme"}}}})
    pdb = c.get("policy/v1", "PodDisruptionBudget", "guard", ns)
    pdb["status"] = {"observedGeneration": pdb["metadata"]["generation"],
                     "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                     "expectedPods": 1}
    c.update_status(pdb)
    pb = tmp_path / "pb.yml"
    pb.write_text(PLAYBOOK)
    env = dict(os.environ)
    env.update(sim.env)
    env.update({"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_LOCALHOST_WARNING": "False",
                "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
                "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
                "PATH": f"{BIN}:{env.get('PATH', '')}"})

    def counts() -> tuple[int, int]:
        stats = sim.server.stats()
        return (stats["by_verb_resource"].get("create pods/eviction", 0),
                stats["by_code"].get("429", 0))

    # the server is the session's (shared with other test files on this worker): its counters
    # already hold their evictions and 429s, so only what comes after this point counts
    evictions0, refusals0 = counts()

    def lift_pdb() -> None:
        # once the playbook saw the refusal, lift the PDB (as a scaled-up app would)
        deadline = time.time() + 120
        while time.time() < deadline:
            # the 429 is counted once it was sent: the refusal is final (counting the
            # eviction request alone raced with its evaluation under load)
            evictions, refusals = counts()
            if evictions > evictions0 and refusals > refusals0:
                c.delete("policy/v1", "PodDisruptionBudget", "guard", ns)
                return
            time.sleep(0.1)

    t = threading.Thread(target=lift_pdb, daemon=True)
    t.start()
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           str(pb), "-e", json.dumps({"test_ns": ns})], env=env,
                          capture_output=True, text=True, timeout=170)
    t.join(5)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert result["stats"]["localhost"]["failures"] == 0
    assert c.get("v1", "ConfigMap", "cfg", ns)["data"] == {"k": "v", "j": "1"}
    assert c.try_get("v1", "Pod", "p1", ns) is None
    assert c.try_get("v1", "ConfigMap", "other", ns) is None
    assert not c.get("v1", "Node", "node-1")["spec"].get("unschedulable")
    agents = sim.server.stats()["by_user_agent"]
    assert any(a.startswith("OpenAPI-Generator") for a in agents), agents
