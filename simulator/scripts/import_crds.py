#!/usr/bin/env python3
"""Extract the upstream CRDs the simulator serves into ``harvester_sim/crds/``.

Reads bare git clones (``git --git-dir=<mirror>/<owner>+<name>/repo show <rev>:<path>``),
keeps the kinds the simulator serves, strips description text, labels, annotations and
conversion webhooks, and writes one compact JSON file per component version:

* ``harvester/<tag>.json``      harvesterhci.io kinds from the harvester-crd chart
* ``kubevirt/<version>.json``   kubevirt.io kinds virt-operator creates, at the KubeVirt version
                                Harvester's chart pins (values.yaml ``kubevirtVersion``)
* ``longhorn/<tag>.json``       longhorn.io kinds (``chart/templates/crds.yaml``)
* ``suc/<version>.json``        upgrade.cattle.io Plan at the SUC version Rancher pins
* ``rancher/<tag>.json``        provisioning.cattle.io, rke.cattle.io, fleet.cattle.io and
                                cluster.x-k8s.io kinds Rancher installs
* ``upgrade-toolkit/<commit>.json``  management.harvesterhci.io UpgradePlan and Version

plus ``index.json`` mapping Harvester, Longhorn and Rancher versions to those files.
Identical content is stored once: a later version whose CRDs equal an earlier one's points
at the earlier file. This only extracts data; nothing is built.

Usage: ``python simulator/scripts/import_crds.py [--mirror /work/.mirror] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "harvester_sim" / "crds"



def releases() -> dict[str, dict[str, str]]:
    """The catalog's releases (harvester_sim/releases/catalog.py) and the Longhorn and
    Rancher versions it gives each: the one place those versions are written."""
    sys.path.insert(0, str(HERE.parent))
    from harvester_sim.releases.catalog import CATALOG

    return {v: {"longhorn": r.longhorn, "rancher": r.rancher} for v, r in CATALOG.items()}


TOOLKIT_COMMIT = "5ac1bbe35a6b4f61247aa09162cc6a9099dddd4f"

# The kinds the simulator serves (plural.group), per component.
HARVESTER_KINDS = ("addons", "schedulevmbackups", "settings", "upgrades", "versions",
                   "virtualmachinebackups", "virtualmachineimages")
LONGHORN_KINDS = ("volumes.longhorn.io", "replicas.longhorn.io", "engines.longhorn.io",
                  "nodes.longhorn.io", "settings.longhorn.io")
RANCHER_GENERATED = ("provisioning.cattle.io_clusters.yaml", "rke.cattle.io_custommachines.yaml")
FLEET_KINDS = ("bundles.fleet.cattle.io",)
CAPI_KINDS = ("machines.cluster.x-k8s.io",)
TOOLKIT_FILES = ("management.harvesterhci.io_upgradeplans.yaml",
                 "management.harvesterhci.io_versions.yaml")

# Before these versions the component generated the CRD at run time from its Go types
# (wrangler), so no file exists at the pinned tag; the first tag with a generated file
# stands in (see simulator/docs/crds.md).
SUC_FIRST_FILE = "v0.15.3"
RANCHER_FIRST_GENERATED = "v2.12.0"
# SUC Plan fields added after v0.13.4 (types.go v0.13.4..v0.15.2): dropped from the
# stand-in schema for Rancher versions that pin v0.13.x.
SUC_V013_ABSENT = ("window", "postCompleteDelay")


class Mirror:
    def __init__(self, root: Path) -> None:
        self.root = root

    def git_dir(self, repo: str) -> Path:
        return self.root / repo.replace("/", "+") / "repo"

    def show(self, repo: str, rev: str, path: str) -> str:
        return subprocess.run(["git", "--git-dir", str(self.git_dir(repo)), "show",
                               f"{rev}:{path}"], check=True, capture_output=True,
                              text=True).stdout

    def exists(self, repo: str, rev: str, path: str) -> bool:
        return subprocess.run(["git", "--git-dir", str(self.git_dir(repo)), "cat-file", "-e",
                               f"{rev}:{path}"], capture_output=True).returncode == 0

    def ls(self, repo: str, rev: str, path: str) -> list[str]:
        out = subprocess.run(["git", "--git-dir", str(self.git_dir(repo)), "ls-tree",
                              "--name-only", f"{rev}", path + "/"], check=True,
                             capture_output=True, text=True).stdout
        return [p.rsplit("/", 1)[-1] for p in out.split()]

    def describe_contains(self, repo: str, rev: str) -> str:
        out = subprocess.run(["git", "--git-dir", str(self.git_dir(repo)), "describe",
                              "--tags", "--contains", rev], check=True, capture_output=True,
                             text=True).stdout.strip()
        return out.split("~")[0].split("^")[0]


# ------------------------------------------------------------------ schema cleaning
def _clean_schema(node: Any) -> Any:
    """Drop ``description`` keywords (not properties named description) recursively."""
    if isinstance(node, list):
        return [_clean_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k == "description":
            continue
        if k in ("properties", "patternProperties", "definitions") and isinstance(v, dict):
            out[k] = {name: _clean_schema(sub) for name, sub in v.items()}
        elif k in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            out[k] = _clean_schema(v)
        else:
            out[k] = v
    return out


def clean_crd(doc: dict[str, Any], source: dict[str, str]) -> dict[str, Any]:
    spec = dict(doc["spec"])
    spec.pop("conversion", None)
    versions = []
    for ver in spec.get("versions") or []:
        ver = dict(ver)
        if ver.get("schema", {}).get("openAPIV3Schema") is not None:
            ver["schema"] = {"openAPIV3Schema": _clean_schema(ver["schema"]["openAPIV3Schema"])}
        if ver.get("additionalPrinterColumns"):
            ver["additionalPrinterColumns"] = [
                {k: v for k, v in c.items() if k != "description"}
                for c in ver["additionalPrinterColumns"]]
        versions.append(ver)
    spec["versions"] = versions
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": doc["metadata"]["name"],
                         "annotations": {"harvester-sim.io/source": source_ref(source)}},
            "spec": spec}


def source_ref(source: dict[str, str]) -> str:
    ref = f"github.com/{source['repo']}/{source['path']}@{source['rev']}"
    return ref + (f" ({source['note']})" if source.get("note") else "")


def crds_in(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text)
            if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]


def pick(text: str, names: tuple[str, ...], what: str) -> list[dict[str, Any]]:
    found = {d["metadata"]["name"]: d for d in crds_in(text)}
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"{what}: CRDs not found: {', '.join(missing)}")
    return [found[n] for n in names]


# ------------------------------------------------------------------ components
def harvester(m: Mirror, tag: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(harvesterhci.io CRDs, kubevirt.io CRDs, KubeVirt version) at a Harvester tag."""
    repo, base = "harvester/harvester", "deploy/charts/harvester-crd/templates"
    out = []
    for plural in HARVESTER_KINDS:
        path = f"{base}/harvesterhci.io_{plural}.yaml"
        src = {"repo": repo, "path": path, "rev": tag}
        out += [clean_crd(d, src) for d in pick(m.show(repo, tag, path),
                                                (f"{plural}.harvesterhci.io",), path)]
    # The KubeVirt CR's own CRD: the harvester-crd chart's crd-kubevirt-<v>.yaml from v1.5.1,
    # before that the kubevirt-operator dependency chart's crds/ (both ship it whole).
    kv_crd = [f for f in m.ls(repo, tag, base) if f.startswith("crd-kubevirt")]
    path = (f"{base}/{kv_crd[0]}" if kv_crd else
            "deploy/charts/harvester/dependency_charts/kubevirt-operator/crds/crd-kubevirt.yaml")
    out += [clean_crd(d, {"repo": repo, "path": path, "rev": tag})
            for d in pick(m.show(repo, tag, path), ("kubevirts.kubevirt.io",), path)]
    values = m.show(repo, tag, "deploy/charts/harvester/values.yaml")
    mm = re.search(r"&kubevirtVersion +v?(\d+\.\d+\.\d+)", values)
    if not mm:
        raise SystemExit(f"harvester {tag}: no kubevirtVersion in the harvester chart values")
    kv_version = "v" + mm.group(1)
    return out, kubevirt(m, kv_version), kv_version


# ------------------------------------------------------------------ kubevirt
# virt-operator creates the VM/VMI/VMIM CRDs at run time (Harvester's charts ship only the
# KubeVirt CR's own CRD): the frame comes from crds.go (names, columns, subresources) and
# core/v1/register.go (ApiSupportedVersions), every version's schema from
# validations_generated.go, as patchValidationForAllVersions does.
KV_COMPONENTS = "pkg/virt-operator/resource/generate/components"
KV_FUNCS = {"virtualmachines.kubevirt.io": "NewVirtualMachineCrd",
            "virtualmachineinstances.kubevirt.io": "NewVirtualMachineInstanceCrd",
            "virtualmachineinstancemigrations.kubevirt.io":
                "NewVirtualMachineInstanceMigrationCrd"}


KV_KIND = {"virtualmachines.kubevirt.io": "VirtualMachine",
           "virtualmachineinstances.kubevirt.io": "VirtualMachineInstance",
           "virtualmachineinstancemigrations.kubevirt.io": "VirtualMachineInstanceMigration"}


def _go_block(src: str, start: int) -> str:
    """The text of the brace-balanced block whose opening brace is at or after ``start``."""
    i = src.index("{", start)
    depth = 0
    for j in range(i, len(src)):
        if src[j] == "{":
            depth += 1
        elif src[j] == "}":
            depth -= 1
            if depth == 0:
                return src[i:j + 1]
    raise ValueError("unbalanced braces")


def _go_fields(block: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+):\s*([^,\n]+(?:\([^)]*\))?)", block))


def _go_str(v: str, consts: dict[str, str]) -> str:
    v = v.strip()
    if v.startswith('"'):
        return str(json.loads(v))
    if v.startswith("pointer."):
        return str(json.loads(v[v.index("(") + 1:v.rindex(")")]))
    return consts[v]


def _go_list(body: str, key: str) -> list[str]:
    mm = re.search(key + r":\s*\[\]string\{([^}]*)\}", body)
    return re.findall(r'"([^"]*)"', mm.group(1)) if mm else []


def kubevirt(m: Mirror, version: str) -> list[dict[str, Any]]:
    repo = "kubevirt/kubevirt"
    crds_go = m.show(repo, version, f"{KV_COMPONENTS}/crds.go")
    register = m.show(repo, version, "staging/src/kubevirt.io/api/core/v1/register.go")
    valid = m.show(repo, version, f"{KV_COMPONENTS}/validations_generated.go")
    consts = {k: json.loads(v) for k, v in re.findall(r'(\w+JSONPath)\s*=\s*("[^"]*")', crds_go)}
    vblock = _go_block(register, register.index("ApiSupportedVersions"))
    versions = []
    for entry in re.findall(r"\{([^{}]*)\}", vblock[1:-1]):
        f = _go_fields(entry)
        ver: dict[str, Any] = {"name": _go_str(f["Name"], consts),
                               "served": f["Served"].strip() == "true",
                               "storage": f["Storage"].strip() == "true"}
        if f.get("Deprecated", "").strip() == "true":
            ver["deprecated"] = True
        if "DeprecationWarning" in f:
            ver["deprecationWarning"] = _go_str(f["DeprecationWarning"], consts)
        versions.append(ver)
    out = []
    for name, func in KV_FUNCS.items():
        body = _go_block(crds_go, crds_go.index(f"func {func}()"))
        names = {"plural": re.search(r'Plural:\s*"([^"]+)"', body).group(1),  # type: ignore[union-attr]
                 "singular": re.search(r'Singular:\s*"([^"]+)"', body).group(1),  # type: ignore[union-attr]
                 "kind": KV_KIND[name], "shortNames": _go_list(body, "ShortNames"),
                 "categories": _go_list(body, "Categories")}
        if f"{names['plural']}.kubevirt.io" != name:
            raise SystemExit(f"kubevirt {version}: {func} does not define {name}")
        cols = []
        cblock = _go_block(body, body.index("[]extv1.CustomResourceColumnDefinition"))
        for entry in re.findall(r"\{([^{}]*)\}", cblock[1:-1]):
            f = _go_fields(entry)
            col: dict[str, Any] = {"name": _go_str(f["Name"], consts),
                                   "type": _go_str(f["Type"], consts),
                                   "jsonPath": _go_str(f["JSONPath"], consts)}
            if "Priority" in f:
                col["priority"] = int(f["Priority"])
            cols.append(col)
        mm = re.search(r'\n\t"' + names["singular"] + r'": `(.*?)`,\n', valid, re.S)
        if not mm:
            raise SystemExit(f"kubevirt {version}: no validation for {names['singular']}")
        schema = yaml.safe_load(mm.group(1))["openAPIV3Schema"]
        vers = []
        for v in versions:
            v = dict(v, additionalPrinterColumns=cols, schema={"openAPIV3Schema": schema})
            if "CustomResourceSubresourceStatus{}" in body:
                v["subresources"] = {"status": {}}
            vers.append(v)
        crd = {"metadata": {"name": name},
               "spec": {"group": "kubevirt.io", "names": names, "scope": "Namespaced",
                        "versions": vers}}
        src = {"repo": repo, "path": f"{KV_COMPONENTS}/validations_generated.go", "rev": version,
               "note": f"frame from {KV_COMPONENTS}/crds.go {func} and "
                       "staging/src/kubevirt.io/api/core/v1/register.go"}
        out.append(clean_crd(crd, src))
    return out


def longhorn(m: Mirror, tag: str) -> list[dict[str, Any]]:
    repo, path = "longhorn/longhorn", "chart/templates/crds.yaml"
    text = m.show(repo, tag, path)
    # Helm template bits: the chart's common labels and the webhook's namespace.
    text = re.sub(r"\{\{-? *include \"longhorn.labels\" \. \| nindent \d+ *\}\}", "", text)
    text = text.replace('{{ include "release_namespace" . }}', "longhorn-system")
    if "{{" in text:
        raise SystemExit(f"longhorn {tag}: unexpected template in {path}")
    src = {"repo": repo, "path": path, "rev": tag}
    return [clean_crd(d, src) for d in pick(text, LONGHORN_KINDS, path)]


def suc_pin(m: Mirror, rancher_tag: str) -> tuple[str, str]:
    """(commit, containing tag) of the SUC API module rancher/rancher's go.mod pins."""
    gomod = m.show("rancher/rancher", rancher_tag, "go.mod")
    mm = re.search(r"github.com/rancher/system-upgrade-controller/pkg/apis v\S*-([0-9a-f]{12})",
                   gomod)
    if not mm:
        raise SystemExit(f"rancher {rancher_tag}: no system-upgrade-controller pin in go.mod")
    commit = mm.group(1)
    return commit, m.describe_contains("rancher/system-upgrade-controller", commit)


def suc(m: Mirror, version: str) -> list[dict[str, Any]]:
    repo, path = "rancher/system-upgrade-controller", \
        "pkg/crds/yaml/generated/upgrade.cattle.io_plans.yaml"
    rev, note = version, ""
    drop: tuple[str, ...] = ()
    if not m.exists(repo, version, path):
        rev = SUC_FIRST_FILE
        note = (f"SUC {version} generates this CRD at run time from pkg/apis types; "
                f"{SUC_FIRST_FILE} is the first tag with the generated file")
        if version.startswith("v0.13."):
            drop = SUC_V013_ABSENT
            note += f"; spec.{', spec.'.join(drop)} dropped (added after {version})"
    src = {"repo": repo, "path": path, "rev": rev, "note": note}
    docs = pick(m.show(repo, rev, path), ("plans.upgrade.cattle.io",), path)
    for d in docs:
        for ver in d["spec"]["versions"]:
            props = ver["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            for f in drop:
                props.pop(f, None)
    return [clean_crd(d, src) for d in docs]


def rancher(m: Mirror, tag: str) -> list[dict[str, Any]]:
    repo = "rancher/rancher"
    out = []
    gen_rev, note = tag, ""
    if not m.exists(repo, tag, f"pkg/crds/yaml/generated/{RANCHER_GENERATED[0]}"):
        gen_rev = RANCHER_FIRST_GENERATED
        note = (f"Rancher {tag} generates these CRDs at run time from pkg/apis types; "
                f"{RANCHER_FIRST_GENERATED} is the first tag with generated files")
    for fn in RANCHER_GENERATED:
        path = f"pkg/crds/yaml/generated/{fn}"
        src = {"repo": repo, "path": path, "rev": gen_rev, "note": note}
        out += [clean_crd(d, src) for d in crds_in(m.show(repo, gen_rev, path))]
    path = "pkg/crds/yaml/fleet/fleet.yaml"
    src = {"repo": repo, "path": path, "rev": tag}
    out += [clean_crd(d, src) for d in pick(m.show(repo, tag, path), FLEET_KINDS, path)]
    path = "pkg/crds/provisioningv2/capi-crds.yaml"
    src = {"repo": repo, "path": path, "rev": tag}
    out += [clean_crd(d, src) for d in pick(m.show(repo, tag, path), CAPI_KINDS, path)]
    return out


def toolkit(m: Mirror, commit: str) -> list[dict[str, Any]]:
    repo = "harvester/upgrade-toolkit"
    out = []
    for fn in TOOLKIT_FILES:
        path = f"config/crd/bases/{fn}"
        src = {"repo": repo, "path": path, "rev": commit}
        out += [clean_crd(d, src) for d in crds_in(m.show(repo, commit, path))]
    return out


# ------------------------------------------------------------------ output
def _strip_source(crds: list[dict[str, Any]]) -> str:
    """Content key for de-duplication: the CRDs without their source annotation."""
    bare = [{**c, "metadata": {"name": c["metadata"]["name"]}} for c in crds]
    return json.dumps(bare, sort_keys=True)


class Writer:
    """Collects component versions, stores each distinct content once (named after the first
    version that has it; the source annotation names the other versions it stands for)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seen: dict[tuple[str, str], str] = {}
        self.pending: dict[str, tuple[str, str, list[dict[str, Any]], list[str]]] = {}

    def write(self, component: str, version: str, crds: list[dict[str, Any]]) -> str:
        key = (component, _strip_source(crds))
        if key in self.seen:
            rel = self.seen[key]
            if version != self.pending[rel][1] and version not in self.pending[rel][3]:
                self.pending[rel][3].append(version)
            return rel
        rel = f"{component}/{version}.json"
        self.seen[key] = rel
        self.pending[rel] = (component, version, crds, [])
        return rel

    def flush(self) -> set[str]:
        for rel, (component, version, crds, also) in self.pending.items():
            if also:
                for c in crds:
                    ann = c["metadata"]["annotations"]
                    ann["harvester-sim.io/source"] += (
                        f"; identical for {component} {', '.join(also)}")
            path = self.out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = [json.dumps(c, sort_keys=True, separators=(",", ":")) for c in crds]
            head = json.dumps({"component": component, "version": version, "alsoFor": also,
                               "sources": sorted({c["metadata"]["annotations"][
                                   "harvester-sim.io/source"] for c in crds})}, indent=1)
            path.write_text(head[:-2] + ',\n "crds": [\n' + ",\n".join(lines) + "\n ]\n}\n")
        return set(self.pending)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror"),
                    help="directory of bare clones named <owner>+<name>/repo")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    m = Mirror(args.mirror)
    w = Writer(args.out)
    index: dict[str, Any] = {"harvester": {}, "longhorn": {}, "rancher": {},
                             "upgrade-toolkit": {}}
    for tag, comps in releases().items():
        hv, kv, kv_version = harvester(m, tag)
        index["harvester"][tag] = {"harvester": w.write("harvester", tag, hv),
                                   "kubevirt": w.write("kubevirt", kv_version, kv),
                                   "kubevirtVersion": kv_version,
                                   "longhorn": comps["longhorn"], "rancher": comps["rancher"]}
        lh = comps["longhorn"]
        if lh not in index["longhorn"]:
            index["longhorn"][lh] = w.write("longhorn", lh, longhorn(m, lh))
        rv = comps["rancher"]
        if rv not in index["rancher"]:
            commit, suc_version = suc_pin(m, rv)
            index["rancher"][rv] = {"rancher": w.write("rancher", rv, rancher(m, rv)),
                                    "suc": w.write("suc", suc_version, suc(m, suc_version)),
                                    "sucVersion": suc_version, "sucCommit": commit}
    index["upgrade-toolkit"][TOOLKIT_COMMIT] = w.write(
        "upgrade-toolkit", TOOLKIT_COMMIT[:12], toolkit(m, TOOLKIT_COMMIT))
    files = w.flush()
    (args.out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    for comp_dir in sorted({f.split("/")[0] for f in files}):
        for old in (args.out / comp_dir).glob("*.json"):
            if f"{comp_dir}/{old.name}" not in files:
                old.unlink()
    print(f"wrote {len(files)} files and index.json under {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
