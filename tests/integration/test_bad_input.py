"""Bad input: each answered with a clear error naming the field, and nothing changed.

One ``three-node`` simulator serves every row (``empty:1``, not a Harvester cluster, has its
own). Each row runs ``upgrade.yml --tags preflight -e upgrade_what_if=false`` (a valid input
would create the UpgradePlan, so a missed validation shows as a change) and asserts:

* the run fails (rc != 0) and its output contains every ``expect`` string (the field or
  value at fault, or the API error);
* no object the collection writes was created or modified: the snapshot is every object
  carrying a managedFields entry of the collection's user agents (its modules send
  ``harvester-upgrade/<module>``, kubernetes.core's ``OpenAPI-Generator``), with its
  resourceVersion, before and after.

A row may carry an ``xfail`` reason (what the collection is missing); none does now.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit import PLAN_API, closed_port, install_plan_crd

pytest.importorskip("harvester_sim")

from harvester_sim import testing  # noqa: E402

# field managers: the collection's modules, and the kubernetes Python client's default
AGENT = ("harvester-upgrade", "OpenAPI-Generator")
PREFLIGHT = {"upgrade_what_if": False}

pytestmark = [pytest.mark.timeout(900)]


def collection_writes(sim: Any) -> dict[tuple[str, str, str, str], str]:
    """(group, plural, namespace, name) -> resourceVersion of every object the collection's
    client ever wrote (a managedFields entry of its manager)."""
    store = sim.world.store
    out: dict[tuple[str, str, str, str], str] = {}
    seen: set[tuple[str, str]] = set()
    with store.lock:
        for rt in list(store.registry._by_gvr.values()):
            if rt.key in seen:
                continue
            seen.add(rt.key)
            items = store.list(rt, copy_items=False)[0]
            for obj in items:
                md = obj.get("metadata") or {}
                if any(str(m.get("manager", "")).startswith(AGENT)
                       for m in md.get("managedFields") or []):
                    out[(rt.group, rt.plural, md.get("namespace", ""), md["name"])] = \
                        str(md.get("resourceVersion"))
    return out


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with testing.running("three-node", speed=200) as running:
        c = running.world.client
        # an older release, to ask for a version that is not newer
        v = copy.deepcopy(c.get("harvesterhci.io/v1beta1", "Version", "v1.6.0",
                                "harvester-system"))
        v["metadata"] = {"name": "v1.5.0", "namespace": "harvester-system"}
        c.create(v)
        base = c.get("harvesterhci.io/v1beta1", "Version", "v1.6.0", "harvester-system")
        # a release the running v1.5.1 may not skip to (its upgrade path needs v1.6.0 first)
        v = copy.deepcopy(base)
        v["metadata"] = {"name": "v1.7.0", "namespace": "harvester-system"}
        v["spec"]["minUpgradableVersion"] = "v1.6.0"
        c.create(v)
        # a Version whose ISO (plain http:// on the simulator) has no checksum to verify
        v = copy.deepcopy(base)
        v["metadata"] = {"name": "v1.6.1", "namespace": "harvester-system"}
        v["spec"].pop("isoChecksum", None)
        c.create(v)
        # a ServiceAccount without any binding: every collection call is forbidden
        running.service_account_kubeconfig("harvester-system/nobody")
        yield running


@pytest.fixture(scope="module")
def not_harvester() -> Iterator[Any]:
    """A plain Kubernetes cluster: ``empty:1`` (which has Harvester's CRDs and Setting
    server-version but no Versions) without the harvesterhci.io CRDs."""
    with testing.running("empty:1") as running:
        c = running.world.client
        for crd in c.list("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
            if crd["spec"]["group"] == "harvesterhci.io":
                c.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                         crd["metadata"]["name"])
        yield running


def _drop_plans(sim: Any) -> None:
    c = sim.world.client
    try:
        plans = c.list(PLAN_API, "UpgradePlan")
    except Exception:  # noqa: BLE001 - no CRD
        return
    for p in plans:
        name = p["metadata"]["name"]
        c.patch(PLAN_API, "UpgradePlan", name, {"metadata": {"finalizers": None}})
        c.delete(PLAN_API, "UpgradePlan", name)


def _kubeconfig(sim: Any, tmp: Path, name: str, edit: Any,
                stack: contextlib.ExitStack) -> dict[str, str]:
    kc = yaml.safe_load(sim.kubeconfig.read_text())
    edit(kc, stack)
    p = tmp / f"kubeconfig-{name}"
    p.write_text(yaml.safe_dump(kc))
    return dict(sim.env_for(p))


def _closed_port(kc: dict[str, Any], stack: contextlib.ExitStack) -> None:
    port = stack.enter_context(closed_port())   # held until the row is over
    kc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"


def _wrong_ca(kc: dict[str, Any], stack: contextlib.ExitStack) -> None:
    import base64

    from harvester_sim.api import tls

    kc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        tls.generate().ca_pem).decode()


def _wrong_token(kc: dict[str, Any], stack: contextlib.ExitStack) -> None:
    kc["users"][0]["user"]["token"] = "not-a-valid-token"


NO_FIELD = "the error does not name the field: "

# id -> (extra vars, env editor or special, expected strings, xfail reason or None)
ROWS: dict[str, tuple[dict[str, Any], Any, list[str], str | None]] = {
    "unknown version": ({"upgrade_version": "v9.9.9"}, None, ["v9.9.9"], None),
    "version not newer": ({"upgrade_version": "v1.5.0"}, None, ["v1.5.0", "v1.5.1"],
                          None),
    # upgrade_force lifts neither a downgrade nor a version skip: each has its own switch
    "downgrade with upgrade_force": (
        {"upgrade_version": "v1.5.0", "upgrade_force": True}, None,
        ["v1.5.0", "downgrade", "upgrade_allow_downgrade=true"], None),
    "version skip with upgrade_force": (
        {"upgrade_version": "v1.7.0", "upgrade_force": True}, None,
        ["v1.7.0", "minimum upgradable version v1.6.0", "upgrade_allow_version_skip=true"],
        None),
    "ISO without checksum": (
        {"upgrade_version": "v1.6.1"}, None,
        ["v1.6.1", "no spec.isoChecksum", "http://", "upgrade_allow_unverified_iso=true"], None),
    "ISO without checksum, switch not a bool": (
        {"upgrade_version": "v1.6.1", "upgrade_allow_unverified_iso": "maybe"}, None,
        ["upgrade_allow_unverified_iso"], None),
    "both version and image": (
        {"upgrade_version": "v1.6.0", "upgrade_image": "harvester-system/some-iso"}, None,
        ["version", "image"], None),
    "malformed spec: annotations not a dict": (
        {"upgrade_annotations": "not-a-dict"}, None, ["annotations"], None),
    "malformed spec: concurrency not a number": (
        {"upgrade_image_preload_concurrency": "lots"}, None, ["concurrency"], None),
    "malformed spec: pauseNodes not a list": (
        {"upgrade_pause_nodes": "node-1,node-2"}, None, ["upgrade_pause_nodes", "list"], None),
    "invalid pauseNodes name": (
        {"upgrade_pause_nodes": ["Not_A_Node!"]}, None, ["Not_A_Node!", "upgrade_pause_nodes"],
        None),
    "unknown pauseNodes node": (
        {"upgrade_pause_nodes": ["node-9"]}, None, ["node-9", "pause_nodes", "no such node"],
        None),
    "negative timeouts": (
        {"preflight_timeout": -5, "upgrade_iso_download_timeout": -1}, None,
        ["preflight_timeout", "upgrade_iso_download_timeout", "negative"], None),
    "unreachable API (closed port)": ({}, _closed_port, ["127.0.0.1", "refused"], None),
    "wrong CA": ({}, _wrong_ca, ["CERTIFICATE_VERIFY_FAILED"], None),
    # 'Unauthorized' alone; a clearer message would name the server and say token invalid
    "wrong token (401)": ({}, _wrong_token, ["Unauthorized"], None),
    # the first call (Setting server-version: is this a Harvester cluster?) is refused
    "RBAC forbidden (403)": ({}, "nobody", [
        "forbidden", "system:serviceaccount:harvester-system:nobody", "cannot get",
        "settings"], None),
}


@pytest.mark.parametrize("row", list(ROWS))
def test_bad_input(row: str, sim: Any, tmp_path: Path, playbook: Any,
                   request: pytest.FixtureRequest) -> None:
    extra, env_edit, expect, reason = ROWS[row]
    if reason:
        request.applymarker(pytest.mark.xfail(strict=False, reason=reason))
    env: dict[str, str] | None = None
    with contextlib.ExitStack() as stack:   # what an editor holds lasts for the row's run
        if env_edit == "nobody":
            env = dict(sim.env_for(sim.sa_kubeconfigs["harvester-system/nobody"]))
        elif env_edit is not None:
            env = _kubeconfig(sim, tmp_path, row.split()[0], env_edit, stack)
        before = collection_writes(sim)
        res = playbook(sim, "upgrade.yml", tags="preflight",
                       extra_vars={**PREFLIGHT, **extra}, env=env, timeout=300)
        after = collection_writes(sim)
    _drop_plans(sim)  # an accepted row must not leave a plan for the next rows to adopt
    assert res.rc != 0, f"{row}: accepted\n{res}"
    missing = [e for e in expect if e.lower() not in res.output.lower()]
    assert not missing, f"{row}: {NO_FIELD}{missing}\n{res}"
    changed = {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
    assert not changed, f"{row}: the cluster was changed: {changed}"


def test_not_a_harvester_cluster(not_harvester: Any, playbook: Any) -> None:
    """No Harvester CRDs: a clear error saying so, and no CRD installed (nothing written)."""
    before = collection_writes(not_harvester)
    res = playbook(not_harvester, "upgrade.yml", tags="preflight", extra_vars=PREFLIGHT,
                   timeout=300)
    after = collection_writes(not_harvester)
    assert res.rc != 0, res
    out = res.output.lower()
    assert "harvester" in out and ("not served" in out or "not a harvester" in out), res
    assert after == before, {k: v for k, v in after.items() if before.get(k) != v}


def test_plan_of_another_cluster(sim: Any, playbook: Any) -> None:
    """A plan recorded on another cluster (here: one whose cluster-uid annotation is not this
    cluster's kube-system uid, as a plan restored from another cluster's backup, or reached
    through the wrong kubeconfig context, is) is neither adopted nor acted on."""
    c = sim.world.client
    uid = c.get("v1", "Namespace", "kube-system")["metadata"]["uid"]
    other = "00000000-0000-4000-8000-000000000000"
    assert uid != other
    install_plan_crd(sim)
    c.create({"apiVersion": PLAN_API, "kind": "UpgradePlan",
              "metadata": {"name": "from-elsewhere", "annotations": {
                  "harvester-upgrade.harvesterhci.io/cluster-uid": other}},
              "spec": {"version": "v1.6.0"}})
    try:
        before = collection_writes(sim)
        for tags in ("preflight", "iso_download"):
            res = playbook(sim, "upgrade.yml", tags=tags,
                           extra_vars={**PREFLIGHT, "upgrade_plan_name": "from-elsewhere"},
                           timeout=300)
            assert res.rc != 0, f"{tags}: accepted\n{res}"
            out = res.output
            assert "belongs to another cluster" in out and other in out and uid in out, \
                f"{tags}\n{res}"
        after = collection_writes(sim)
        changed = {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
        assert not changed, f"the cluster was changed: {changed}"
        plan = c.get(PLAN_API, "UpgradePlan", "from-elsewhere")
        assert not plan.get("status") and not plan["metadata"].get("finalizers"), plan
    finally:
        _drop_plans(sim)


def test_new_plan_records_its_cluster(sim: Any, playbook: Any) -> None:
    """The plan a run creates carries the cluster's identity (checked by every later run)."""
    c = sim.world.client
    try:
        res = playbook(sim, "upgrade.yml", tags="preflight", extra_vars={
            **PREFLIGHT, "upgrade_version": "v1.6.0", "upgrade_plan_name": "mine"},
            timeout=300)
        plan = c.get(PLAN_API, "UpgradePlan", "mine")
        assert plan is not None, res
        uid = c.get("v1", "Namespace", "kube-system")["metadata"]["uid"]
        assert plan["metadata"]["annotations"][
            "harvester-upgrade.harvesterhci.io/cluster-uid"] == uid, plan["metadata"]
    finally:
        _drop_plans(sim)
