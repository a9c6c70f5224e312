"""plugins/plugin_utils/preload.py: armed, the next fork starts the import thread in the parent
(never in the child), every later fork waits for it first, and it starts once per process.

Each case runs in a child Python (forks and fork hooks of the test session must not change),
which loads the file under test by path and replaces :func:`import_all` with a slow stand-in
that records what happened."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

from testkit import ROOT

FILE = ROOT / "plugins" / "plugin_utils" / "preload.py"

CHILD = textwrap.dedent("""
    import importlib.util, json, os, sys, threading, time
    spec = importlib.util.spec_from_file_location("preload_under_test", {file!r})
    preload = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(preload)
    events = []

    def slow_imports():
        events.append(("import_start", threading.current_thread().name, time.monotonic()))
        time.sleep(0.3)
        events.append(("import_end", threading.current_thread().name, time.monotonic()))
        return True

    preload.import_all = slow_imports

    def fork_and_report():
        r, w = os.pipe()
        before = time.monotonic()
        pid = os.fork()
        after = time.monotonic()
        if pid == 0:   # the child: no thread of its own, and it reports what it saw
            os.close(r)
            os.write(w, json.dumps({{"running": preload.running(),
                                     "threads": threading.active_count()}}).encode())
            os._exit(0)
        os.close(w)
        seen = json.loads(os.read(r, 4096).decode())
        os.waitpid(pid, 0)
        events.append(("forked", seen, before, after))

    {body}
    preload.wait()
    print(json.dumps(events))
""")


def run_child(body: str) -> list[Any]:
    script = CHILD.format(file=str(FILE), body=body)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return [tuple(e) for e in json.loads(proc.stdout)]


def by_kind(events: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for e in events:
        out.setdefault(e[0], []).append(e)
    return out


def test_the_next_fork_starts_the_thread_and_the_one_after_waits_for_it() -> None:
    events = by_kind(run_child(textwrap.dedent("""
        events.append(("armed", preload.start_after_next_fork()))
        fork_and_report()        # the first fork: the thread starts after it, in the parent
        fork_and_report()        # the second: waits for the thread to end, then forks
    """)))
    assert events["armed"] == [("armed", True)]
    first, second = events["forked"]
    [(_, name, started)] = events["import_start"]
    [(_, _, ended)] = events["import_end"]
    assert name == "harvester-upgrade-preload"
    # no child ever has the thread: the first was made before it, the second after its end
    assert first[1] == second[1] == {"running": False, "threads": 1}
    assert started >= first[2]
    assert second[3] >= ended     # the fork waited for the thread in its before hook


def test_it_starts_once_and_never_without_being_armed() -> None:
    events = run_child(textwrap.dedent("""
        fork_and_report()                      # not armed: nothing starts
        events.append(("armed", preload.start_after_next_fork()))
        fork_and_report()
        preload.wait()
        events.append(("again", preload.start_after_next_fork()))
        fork_and_report()                      # no second thread
    """))
    kinds = by_kind(events)
    assert len(kinds["forked"]) == 3
    assert len(kinds["import_start"]) == len(kinds["import_end"]) == 1
    assert kinds["import_start"][0][2] >= kinds["forked"][1][2]   # after the armed fork
    assert kinds["again"] == [("again", False)]


def test_wait_without_a_thread_returns_at_once() -> None:
    assert run_child("preload.wait()") == []
