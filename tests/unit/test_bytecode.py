"""plugins/plugin_utils/bytecode.py: the collection's plain ``.py`` modules are loaded by
CPython's SourceFileLoader (cached bytecode, checked against the source) behind ansible-core's
collection finder; packages, redirected modules and other collections stay with ansible-core's
loader; a stale cache is never used; without leave to write bytecode nothing is written and
the modules load the same.

Each case runs in a child Python with ansible-core's collection finder installed over a
collection made in a temporary directory: installing that finder changes how every
``ansible_collections`` import of the process resolves, which the test session must not see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from testkit import ROOT

pytest.importorskip("ansible.utils.collection_loader")

CHILD = textwrap.dedent("""
    import json, sys
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
    _AnsibleCollectionFinder(paths=[sys.argv[1]], scan_sys_paths=False)._install()
    # the file under test, by path: the collection under test is the temporary one
    import importlib.util
    spec = importlib.util.spec_from_file_location("bytecode_under_test", sys.argv[2])
    bytecode = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bytecode)
    sys.meta_path.insert(0, bytecode.CachedSourceFinder(["ansible_collections.ns.coll."]))
    out = {}
    for name in sys.argv[3:]:
        module = importlib.import_module(name)
        out[name] = {"loader": type(module.__loader__).__name__,
                     "value": getattr(module, "VALUE", None),
                     "file": getattr(module, "__file__", None)}
    print(json.dumps(out))
""")

UTILS = "ansible_collections.ns.coll.plugins.module_utils"
OTHER = "ansible_collections.ns.other.plugins.module_utils.m"


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """Collections ns.coll (module_utils m, a redirect old -> m) and ns.other (module m)."""
    coll = tmp_path / "ansible_collections" / "ns" / "coll"
    (coll / "plugins" / "module_utils").mkdir(parents=True)
    (coll / "meta").mkdir()
    (coll / "meta" / "runtime.yml").write_text(
        f"import_redirection:\n  {UTILS}.old:\n    redirect: {UTILS}.m\n")
    (coll / "plugins" / "module_utils" / "m.py").write_text("VALUE = 'one'\n")
    other = tmp_path / "ansible_collections" / "ns" / "other" / "plugins" / "module_utils"
    other.mkdir(parents=True)
    (other / "m.py").write_text("VALUE = 'other'\n")
    return tmp_path


def load(tree: Path, *names: str, write: bool = True) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree),
         str(ROOT / "plugins" / "plugin_utils" / "bytecode.py"), *names],
        env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def cache_of(tree: Path) -> list[Path]:
    return sorted((tree / "ansible_collections" / "ns" / "coll" / "plugins" / "module_utils"
                   / "__pycache__").glob("m.*.pyc"))


def test_a_plain_module_gets_cached_bytecode_and_a_changed_source_is_compiled_anew(
        tree: Path) -> None:
    first = load(tree, f"{UTILS}.m")[f"{UTILS}.m"]
    assert first["loader"] == "SourceFileLoader" and first["value"] == "one"
    assert first["file"].endswith("module_utils/m.py")
    assert len(cache_of(tree)) == 1
    # a stale cache is refused: the source changed (size and time), the module is the new one
    source = tree / "ansible_collections/ns/coll/plugins/module_utils/m.py"
    stat = source.stat()
    source.write_text("VALUE = 'two, longer'\n")
    os.utime(source, (stat.st_atime + 5, stat.st_mtime + 5))
    assert load(tree, f"{UTILS}.m")[f"{UTILS}.m"]["value"] == "two, longer"
    # same size, other time: refused as well
    source.write_text("VALUE = 'six, longer'\n")
    os.utime(source, (stat.st_atime + 10, stat.st_mtime + 10))
    assert load(tree, f"{UTILS}.m")[f"{UTILS}.m"]["value"] == "six, longer"


def test_without_leave_to_write_bytecode_nothing_is_written_and_the_module_loads(
        tree: Path) -> None:
    got = load(tree, f"{UTILS}.m", write=False)[f"{UTILS}.m"]
    assert got["value"] == "one" and got["loader"] == "SourceFileLoader"
    assert cache_of(tree) == []


def test_a_cache_that_cannot_be_written_is_no_error(tree: Path) -> None:
    """As in a read-only install directory (a file where __pycache__ would go: no write,
    whoever runs the test, root included)."""
    blocker = tree / "ansible_collections/ns/coll/plugins/module_utils/__pycache__"
    blocker.write_text("not a directory\n")
    got = load(tree, f"{UTILS}.m")[f"{UTILS}.m"]
    assert got["value"] == "one" and got["loader"] == "SourceFileLoader"
    assert blocker.read_text() == "not a directory\n"


def test_packages_redirects_and_other_collections_stay_with_ansible_core(tree: Path) -> None:
    got = load(tree, UTILS, f"{UTILS}.old", OTHER)
    # a synthetic package (no __init__.py): ansible-core's loader
    assert got[UTILS]["loader"].startswith("_AnsibleCollection"), got
    # meta/runtime.yml's redirect is followed: the same module object as m's
    assert got[f"{UTILS}.old"]["value"] == "one", got
    # not under the finder's prefixes: ansible-core's loader, no cache written there
    assert got[OTHER]["loader"].startswith("_AnsibleCollection") and got[OTHER]["value"] == "other"
    assert not list((tree / "ansible_collections/ns/other").rglob("__pycache__"))


INSTALL = textwrap.dedent("""
    import json, sys
    from importlib.abc import MetaPathFinder
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
    import importlib.util
    spec = importlib.util.spec_from_file_location("bytecode_under_test", sys.argv[2])
    bytecode = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bytecode)
    empty = len(sys.meta_path)
    bytecode.install()                      # no collection finder yet: nothing
    nothing = len(sys.meta_path) == empty
    _AnsibleCollectionFinder(paths=[sys.argv[1]], scan_sys_paths=False)._install()
    class First(MetaPathFinder):            # as ansible-test's import check does
        def find_spec(self, *args):
            return None
    sys.meta_path.insert(0, First())
    bytecode.install()
    bytecode.install()
    print(json.dumps({"nothing": nothing,
                      "names": [type(f).__name__ for f in sys.meta_path[:3]],
                      "count": sum(isinstance(f, bytecode.CachedSourceFinder)
                                   for f in sys.meta_path)}))
""")


def test_install_puts_the_finder_just_before_ansible_cores_once(tree: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", INSTALL, str(tree),
         str(ROOT / "plugins" / "plugin_utils" / "bytecode.py")],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["nothing"] and got["count"] == 1, got
    assert got["names"] == ["First", "CachedSourceFinder", "_AnsibleCollectionFinder"], got
