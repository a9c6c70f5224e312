#!/usr/bin/env python3
"""Import-layer check (a `make lint` gate, docs/quality-gates.md).

The layers, each a rule over the import statements of a set of files:

- ``plugins/module_utils`` is the bottom of the collection: it imports no other part of it
  (no modules, action, callback, plugin_utils, inventory, filter or doc_fragments plugin);
  module_utils is shipped to the managed host with each module, where the controller-side
  plugins do not exist.
- ``plugins/modules`` import from the collection only ``plugins/module_utils``.
- the collection (``plugins/``) never imports the simulator (``harvester_sim``): the simulator
  stands in for the cluster in tests and is not part of the published collection.
- the simulator (``simulator/``) never imports the collection: it models Harvester, not its
  client, and must keep working whatever the collection does.

Every ``import``/``from ... import`` counts, at module level or inside a function (a lazy
import is still a dependency), and so does ``importlib.import_module`` or ``__import__`` with
a literal name. Relative imports are resolved against the file's package.

    python scripts/import_layers.py [ROOT]     exit 0: clean; 1: violations (one per line)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

COLLECTION = "ansible_collections.harvester.upgrade"
PLUGINS = f"{COLLECTION}.plugins"


@dataclass(frozen=True)
class Rule:
    """Files under ``under`` (a directory relative to the root) must not import a module
    that is, or lies below, any of ``forbidden``; ``allowed`` carves exceptions out of it."""

    name: str
    under: str
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()

    def breaks(self, module: str) -> bool:
        def within(prefix: str) -> bool:
            return module == prefix or module.startswith(prefix + ".")
        return any(within(p) for p in self.forbidden) and not any(
            within(p) for p in self.allowed)


RULES = (
    Rule("module_utils imports no other part of the collection", "plugins/module_utils",
         forbidden=(PLUGINS,), allowed=(f"{PLUGINS}.module_utils",)),
    Rule("modules import only module_utils from the collection", "plugins/modules",
         forbidden=(PLUGINS,), allowed=(f"{PLUGINS}.module_utils",)),
    Rule("the collection never imports the simulator", "plugins", forbidden=("harvester_sim",)),
    Rule("the simulator never imports the collection", "simulator",
         forbidden=("ansible_collections.harvester",)),
)


def module_name(root: Path, path: Path) -> str:
    """The dotted name the file is imported under (the package of a relative import)."""
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    if parts[:1] == ["plugins"]:
        return ".".join([COLLECTION, *parts])
    if parts[:1] == ["simulator"]:
        return ".".join(parts[1:])   # simulator/harvester_sim/x.py -> harvester_sim.x
    return ".".join(parts)


def _absolute(current: str, is_package: bool, level: int, target: str | None) -> str:
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def imports(root: Path, path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every module the file imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    me = module_name(root, path)
    package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = (_absolute(me, package, node.level, node.module) if node.level
                    else node.module or "")
            yield node.lineno, base
            for alias in node.names:   # `from pkg import submodule`
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = (func.attr if isinstance(func, ast.Attribute)
                    else func.id if isinstance(func, ast.Name) else "")
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant) \
                    and isinstance(arg.value, str):
                yield node.lineno, arg.value


SKIP = {".venv", ".venv-own", "ansible_collections", "__pycache__", ".git", "out", "build"}


def python_files(root: Path, under: str) -> Iterator[Path]:
    top = root / under
    if not top.is_dir():
        return
    for path in sorted(top.rglob("*.py")):
        if not SKIP.intersection(path.relative_to(root).parts):
            yield path


def check(root: Path) -> list[str]:
    problems = []
    for rule in RULES:
        for path in python_files(root, rule.under):
            seen: set[int] = set()
            for line, module in imports(root, path):
                if rule.breaks(module) and line not in seen:   # one line, one report
                    seen.add(line)
                    problems.append(f"{path.relative_to(root)}:{line}: imports {module} "
                                    f"({rule.name})")
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[1]).resolve()
    problems = check(root)
    for p in problems:
        print(p)
    files = {p for r in RULES for p in python_files(root, r.under)}
    print(f"import layers: {len(problems)} violation(s) in {len(files)} files, "
          f"{len(RULES)} rules")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
