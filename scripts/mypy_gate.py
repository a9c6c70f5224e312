#!/usr/bin/env python3
"""The mypy gate of `make lint` (docs/quality-gates.md, "Types and import layers").

Runs mypy (mypy.ini: strict, on the collection's plugins and the simulator package) and
compares its errors with the recorded baseline ``mypy-baseline.txt``: the errors the code had
when the gate came, each as ``file: [code] message`` (no line number, so moving code does not
change it; one line per occurrence). The gate fails on an error the baseline does not hold,
and lists the baseline's errors that are gone, so that the baseline only shrinks.

    python scripts/mypy_gate.py [-- MYPY_ARGS...]      check
    python scripts/mypy_gate.py --update [-- ...]      rewrite the baseline from this run
Exit 0: no new error; 1: new errors; 2: mypy itself failed (configuration, crash).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "mypy-baseline.txt"
COLLECTION_PREFIX = "ansible_collections/harvester/upgrade/"
ERROR = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+)(?::\d+)?: error: (?P<msg>.*?)"
                   r"(?:  \[(?P<code>[a-z0-9-]+)\])?$")


def repo_path(file: str) -> str:
    """The file as it is in the repository: relative to it, and the collection's files by
    their own path (mypy checks them through the ansible_collections link)."""
    if file.startswith(str(ROOT) + "/"):
        file = file[len(str(ROOT)) + 1:]
    return file[len(COLLECTION_PREFIX):] if file.startswith(COLLECTION_PREFIX) else file


def key(file: str, code: str | None, msg: str) -> str:
    """How an error is recorded: file, code and message (no line number)."""
    return f"{file}: [{code or 'error'}] {msg}"


def run_mypy(extra: list[str]) -> tuple[int, list[tuple[str, str]]]:
    """mypy's exit status and its errors as (key, "file:line") pairs."""
    link = ROOT / "ansible_collections" / "harvester" / "upgrade"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("..") / "..")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file",
                           str(ROOT / "mypy.ini"), "--no-error-summary",
                           "--show-absolute-path", *extra],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    errors = []
    for line in proc.stdout.splitlines():
        m = ERROR.match(line)
        if m:
            file = repo_path(m["file"])
            errors.append((key(file, m["code"], m["msg"]), f"{file}:{m['line']}"))
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not errors):
        sys.stderr.write(proc.stdout + proc.stderr)
    return proc.returncode, errors


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true",
                        help="rewrite mypy-baseline.txt from this run")
    parser.add_argument("mypy_args", nargs="*", help="more arguments for mypy (after --)")
    args = parser.parse_args(argv)
    status, errors = run_mypy(args.mypy_args)
    if status not in (0, 1) or (status == 1 and not errors):
        print(f"mypy failed (exit {status})")
        return 2
    found = Counter(k for k, _where in errors)
    if args.update:
        BASELINE.write_text("".join(f"{k}\n" for k in sorted(found.elements())))
        print(f"mypy baseline: {sum(found.values())} errors recorded in {BASELINE.name}")
        return 0
    recorded = Counter(BASELINE.read_text().splitlines()) if BASELINE.exists() else Counter()
    new = found - recorded
    gone = recorded - found
    for k, where in errors:
        if new[k] > 0:
            new[k] -= 1
            print(f"new: {where}: {k.split(': ', 1)[1]}")
    for k in sorted(gone.elements()):
        print(f"gone (take it out of {BASELINE.name}: --update): {k}")
    added = sum((found - recorded).values())
    print(f"mypy: {sum(found.values())} errors, {sum(recorded.values())} in the baseline, "
          f"{added} new, {sum(gone.values())} gone")
    return 1 if added else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
