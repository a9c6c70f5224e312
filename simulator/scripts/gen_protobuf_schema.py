"""Generate ``harvester_sim/api/pbschema.py`` from upstream Kubernetes sources.

Reads, at a given tag, the ``generated.proto`` files (field numbers, proto types) and the Go
``types.go`` files (the ``json`` tags: JSON name, ``omitempty``, ``,inline``; pointer fields)
of k8s.io/api, k8s.io/apimachinery and k8s.io/apiextensions-apiserver from local git clones,
keeps the messages reachable from the built-in kinds the simulator decodes, and writes a
compact Python table.

    python simulator/scripts/gen_protobuf_schema.py \\
        --api /path/to/kubernetes/api.git --api-tag v0.36.3 \\
        --machinery /path/to/kubernetes/apimachinery.git --machinery-tag v0.36.3 \\
        --apiextensions /path/to/kubernetes/apiextensions-apiserver.git \\
        --apiextensions-tag v0.36.3

Only the text of those files is read (nothing is copied); the output is data.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

API_DIRS = ["core/v1", "apps/v1", "batch/v1", "policy/v1", "coordination/v1", "events/v1",
            "authentication/v1", "authorization/v1", "rbac/v1", "autoscaling/v1",
            "networking/v1", "scheduling/v1", "storage/v1", "discovery/v1"]
MACHINERY_DIRS = ["pkg/apis/meta/v1", "pkg/api/resource", "pkg/runtime", "pkg/util/intstr",
                  "pkg/runtime/schema"]
APIEXTENSIONS_DIRS = ["pkg/apis/apiextensions/v1"]
EXTENSION_PREFIXES = ("apiextensions.",)

ROOTS = {
    "core.v1": ["Namespace", "ConfigMap", "Secret", "ServiceAccount", "Service", "Pod", "Node",
                "Event", "Endpoints", "PersistentVolumeClaim", "PersistentVolume",
                "ReplicationController", "LimitRange", "ResourceQuota", "PodTemplate",
                "Binding"],
    "apps.v1": ["Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "ControllerRevision"],
    "batch.v1": ["Job", "CronJob"],
    "policy.v1": ["PodDisruptionBudget", "Eviction"],
    "coordination.v1": ["Lease"],
    "events.v1": ["Event"],
    "authentication.v1": ["TokenRequest", "TokenReview", "SelfSubjectReview"],
    "authorization.v1": ["SelfSubjectAccessReview", "SelfSubjectRulesReview",
                         "SubjectAccessReview", "LocalSubjectAccessReview"],
    "rbac.v1": ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"],
    "autoscaling.v1": ["Scale"],
    "networking.v1": ["Ingress", "NetworkPolicy", "IngressClass"],
    "scheduling.v1": ["PriorityClass"],
    "storage.v1": ["StorageClass"],
    "discovery.v1": ["EndpointSlice"],
    "apiextensions.v1": ["CustomResourceDefinition"],
    "runtime": ["Unknown"],
}
SCALARS = {"string", "bool", "bytes", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
           "double", "float", "fixed32", "fixed64", "sfixed32", "sfixed64"}
PREFIXES = ("k8s.io.api.", "k8s.io.apimachinery.pkg.apis.", "k8s.io.apimachinery.pkg.",
            "k8s.io.apiextensions_apiserver.pkg.apis.")

FIELD_RE = re.compile(r"^\s*(optional|repeated|required)\s+(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
MAP_RE = re.compile(r"^\s*map<\s*(\w+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")
STRUCT_RE = re.compile(r"^type\s+(\w+)\s+struct\s*\{")
SLICE_RE = re.compile(r"^type\s+(\w+)\s+\[\]")
TAG_RE = re.compile(r"`([^`]*)`")


def short(full: str) -> str:
    for p in PREFIXES:
        if full.startswith(p):
            return full[len(p):]
    return full


def git_show(repo: Path, tag: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), "show", f"{tag}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def git_ls(repo: Path, tag: str, d: str) -> list[str]:
    out = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "--name-only", f"{tag}",
                          d + "/"], check=True, capture_output=True, text=True).stdout
    return [p for p in out.split() if p.endswith(".go") and not p.endswith("_test.go")
            and "generated" not in p.rsplit("/", 1)[-1]]


def parse_proto(text: str) -> tuple[str, dict[str, list[tuple[int, str, str, str]]]]:
    """-> (package, {message: [(number, name, label, type)]}); label r/m/'' ."""
    pkg = re.search(r"^package\s+([\w.]+)\s*;", text, re.M)
    assert pkg
    msgs: dict[str, list[tuple[int, str, str, str]]] = {}
    cur: str | None = None
    for line in text.splitlines():
        line = line.split("//", 1)[0]
        m = re.match(r"^message\s+(\w+)\s*\{", line)
        if m:
            cur = m.group(1)
            msgs[cur] = []
            continue
        if line.startswith("}"):
            cur = None
            continue
        if cur is None:
            continue
        f = FIELD_RE.match(line)
        if f:
            msgs[cur].append((int(f.group(4)), f.group(3),
                              "r" if f.group(1) == "repeated" else "", f.group(2)))
            continue
        f = MAP_RE.match(line)
        if f:
            msgs[cur].append((int(f.group(4)), f.group(3), "m",
                              f"{f.group(1)},{f.group(2)}"))
    return pkg.group(1), msgs


def parse_go(text: str) -> tuple[dict[tuple[str, int], tuple[str, bool, bool, bool]], set[str]]:
    """-> ({(struct, field number): (json name, omitempty, inline, pointer)}, slice types)."""
    fields: dict[tuple[str, int], tuple[str, bool, bool, bool]] = {}
    slices: set[str] = set()
    cur: str | None = None
    depth = 0
    for line in text.splitlines():
        s = SLICE_RE.match(line)
        if s:
            slices.add(s.group(1))
        m = STRUCT_RE.match(line)
        if m:
            cur, depth = m.group(1), 1
            continue
        if cur is None:
            continue
        code = line.split("//", 1)[0]
        depth += code.count("{") - code.count("}")
        if depth <= 0:
            cur = None
            continue
        t = TAG_RE.search(code)
        if not t:
            continue
        tag = t.group(1)
        pb = re.search(r'protobuf:"[a-z0-9]+,(\d+),', tag)
        js = re.search(r'json:"([^"]*)"', tag)
        if not pb:
            continue
        num = int(pb.group(1))
        jparts = (js.group(1) if js else "").split(",")
        decl = code[:t.start()].split()
        gotype = decl[1] if len(decl) >= 2 else decl[0] if decl else ""
        inline = "inline" in jparts[1:]
        fields[(cur, num)] = (jparts[0], "omitempty" in jparts[1:], inline,
                              gotype.startswith("*"))
    return fields, slices


def resolve(pkg: str, typ: str) -> str:
    if typ in SCALARS:
        return typ
    if typ.startswith("."):
        return short(typ[1:])
    return short(f"{pkg}.{typ}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", type=Path, required=True)
    ap.add_argument("--api-tag", required=True)
    ap.add_argument("--machinery", type=Path, required=True)
    ap.add_argument("--machinery-tag", required=True)
    ap.add_argument("--apiextensions", type=Path, required=True)
    ap.add_argument("--apiextensions-tag", required=True)
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parents[1] / "harvester_sim" / "api"
                    / "pbschema.py")
    args = ap.parse_args()

    # message -> [(num, json name, flags, type)]
    table: dict[str, list[tuple[int, str, str, str]]] = {}
    lists: set[str] = set()
    sources = [(args.api, args.api_tag, d) for d in API_DIRS] + \
        [(args.machinery, args.machinery_tag, d) for d in MACHINERY_DIRS] + \
        [(args.apiextensions, args.apiextensions_tag, d) for d in APIEXTENSIONS_DIRS]
    for repo, tag, d in sources:
        pkg, msgs = parse_proto(git_show(repo, tag, f"{d}/generated.proto"))
        gofields: dict[tuple[str, int], tuple[str, bool, bool, bool]] = {}
        slices: set[str] = set()
        for path in git_ls(repo, tag, d):
            f, s = parse_go(git_show(repo, tag, path))
            gofields.update(f)
            slices |= s
        for name, flds in msgs.items():
            full = short(f"{pkg}.{name}")
            if name in slices and [f[1] for f in flds] == ["items"]:
                lists.add(full)
            rows = []
            for num, pname, label, typ in flds:
                jname, omit, inline, ptr = gofields.get((name, num), (pname, True, False,
                                                                      False))
                flags = label
                if inline:
                    flags += "i"
                    jname = pname
                elif omit and not ptr and label == "":
                    flags += "z"
                if label == "m":
                    k, v = typ.split(",")
                    typ = f"{resolve(pkg, k)},{resolve(pkg, v)}"
                else:
                    typ = resolve(pkg, typ)
                rows.append((num, jname or pname, flags, typ))
            table[full] = rows

    keep: set[str] = set()
    todo = [f"{p}.{k}" if p != "runtime" else f"runtime.{k}"
            for p, ks in ROOTS.items() for k in ks]
    while todo:
        m = todo.pop()
        if m in keep or m not in table:
            continue
        keep.add(m)
        for _, _, flags, typ in table[m]:
            for t in typ.split(","):
                if t not in SCALARS:
                    todo.append(t)
    missing = [f"{p}.{k}" for p, ks in ROOTS.items() for k in ks
               if f"{p}.{k}" not in table and p != "runtime"]
    assert not missing, missing

    out = [
        '"""Protobuf schema of the built-in kinds the simulator decodes (GENERATED - do not edit).',
        "",
        f"Source: k8s.io/api {args.api_tag}, k8s.io/apimachinery {args.machinery_tag} and",
        f"k8s.io/apiextensions-apiserver {args.apiextensions_tag} (generated.proto field "
        "numbers and",
        "types; types.go json tags), by simulator/scripts/gen_protobuf_schema.py.",
        "",
        "MESSAGES: message -> {field number: (json name, flags, type)}. Message names drop the",
        "``k8s.io.api.`` / ``k8s.io.apimachinery.pkg[.apis].`` /",
        "``k8s.io.apiextensions_apiserver.pkg.apis.`` prefix. Flags: ``r`` repeated,",
        "``m`` map (type is ``key,value``), ``i`` embedded inline in JSON, ``z`` omitted from",
        "JSON when zero (``omitempty`` on a non-pointer). LISTS: messages that are a named Go",
        "slice (``items`` only) and are a plain JSON array.",
        "",
        "APIEXTENSIONS: the messages of k8s.io/apiextensions-apiserver, in the same form. They",
        "are kept apart from MESSAGES because several of them (``JSON``, ``JSONSchemaPropsOr*``)",
        "have their own ``MarshalJSON``: their JSON is not their fields, which only the protobuf",
        "decoder knows; the readers of MESSAGES take every message for its Go fields.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    ext = {m for m in keep if m.startswith(EXTENSION_PREFIXES)}
    for var, group in (("MESSAGES", keep - ext), ("APIEXTENSIONS", ext)):
        out.append(f"{var}: dict[str, dict[int, tuple[str, str, str]]] = {{")
        _write_messages(out, table, group)
        out.append("}")
        out.append("")
    out.append(f"LISTS: frozenset[str] = frozenset({sorted(lists & keep)!r})")
    out.append("")
    args.out.write_text("\n".join(out))
    print(f"{len(keep)} messages -> {args.out}")


def _write_messages(out: list[str], table: dict[str, list[tuple[int, str, str, str]]],
                    group: set[str]) -> None:
    for m in sorted(group):
        out.append(f"    {m!r}: {{")
        line = "       "
        for num, jname, flags, typ in table[m]:
            item = f" {num}: ({jname!r}, {flags!r}, {typ!r}),"
            if len(line) + len(item) > 99:
                out.append(line)
                line = "       "
            if len(line) + len(item) > 99:  # too long alone: split after the flags
                out.append(f"{line} {num}: ({jname!r}, {flags!r},")
                line = f"{'':12}{typ!r}),"
                continue
            line += item
        if line.strip():
            out.append(line)
        out.append("    },")


if __name__ == "__main__":
    main()
