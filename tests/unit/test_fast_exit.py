"""plugins/plugin_utils/fast_exit.py: after ``install()``, ansible-playbook's ``sys.exit`` ends
the process with Python's exit status, its exit handlers run and its output flushed, but
without the interpreter's teardown (an object's ``__del__`` that the teardown would run does
not run); any other process, thread or a live non-daemon thread keeps Python's own exit.

Each exit runs in a child Python whose ``sys.argv[0]`` is a script named ``ansible-playbook``
(the only process the module acts in), loading the file under test by path."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from testkit import ROOT

FILE = ROOT / "plugins" / "plugin_utils" / "fast_exit.py"

CHILD = textwrap.dedent("""
    import atexit, importlib.util, sys, threading
    spec = importlib.util.spec_from_file_location("fast_exit_under_test", {file!r})
    fast_exit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fast_exit)
    out = {out!r}

    class Torn:
        path = out + ".teardown"

        def __del__(self, open=open):   # runs only in the interpreter's teardown
            with open(self.path, "w") as f:
                f.write("torn down")

    keep = Torn()
    atexit.register(lambda: open(out + ".atexit", "w").write("handlers ran"))
    print("installed", fast_exit.install(), end="")   # buffered: no newline, a pipe
    {body}
""")


def run_child(tmp_path: Path, body: str, name: str = "ansible-playbook"
              ) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    script = tmp_path / name
    script.write_text(CHILD.format(file=str(FILE), out=str(out), body=body))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, check=False)
    return proc, out


@pytest.mark.parametrize(("body", "rc"), [
    ("sys.exit(0)", 0), ("sys.exit(2)", 2), ("sys.exit(None)", 0), ("sys.exit()", 0),
    ("sys.exit(4 + 256)", 4)])
def test_ansible_playbook_exits_with_pythons_status_without_teardown(
        tmp_path: Path, body: str, rc: int) -> None:
    proc, out = run_child(tmp_path, body)
    assert proc.returncode == rc, proc.stderr
    assert proc.stdout == "installed True"            # flushed before the end
    assert (out.parent / "out.atexit").read_text() == "handlers ran"
    assert not (out.parent / "out.teardown").exists()   # no teardown


def test_a_message_goes_to_stderr_and_exits_1(tmp_path: Path) -> None:
    proc, out = run_child(tmp_path, "sys.exit('ERROR! it broke')")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "ERROR! it broke"
    assert not (out.parent / "out.teardown").exists()


def test_a_live_non_daemon_thread_keeps_pythons_exit(tmp_path: Path) -> None:
    body = textwrap.dedent("""
        go = threading.Event()
        threading.Thread(target=go.wait).start()
        threading.Timer(0.2, go.set).start()
        sys.exit(3)""")
    proc, out = run_child(tmp_path, body)
    assert proc.returncode == 3
    assert (out.parent / "out.atexit").read_text() == "handlers ran"
    assert (out.parent / "out.teardown").read_text() == "torn down"   # Python's own exit


def test_another_program_is_left_alone(tmp_path: Path) -> None:
    proc, out = run_child(tmp_path, "sys.exit(5)", name="something-else")
    assert proc.returncode == 5
    assert proc.stdout == "installed False"
    assert (out.parent / "out.teardown").read_text() == "torn down"


def test_exit_status_is_pythons() -> None:
    spec_globals: dict[str, object] = {}
    exec(compile(FILE.read_text(), str(FILE), "exec"), spec_globals)  # noqa: S102
    status = spec_globals["exit_status"]
    assert callable(status)
    assert status(None) == 0
    assert status(7) == 7
    assert status(True) == 1


def test_not_usable_from_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    spec_globals: dict[str, object] = {"__name__": "fast_exit_under_test"}
    exec(compile(FILE.read_text(), str(FILE), "exec"), spec_globals)  # noqa: S102
    usable = spec_globals["usable"]
    assert callable(usable)
    monkeypatch.setattr(sys, "argv", ["/usr/bin/ansible-playbook"])
    seen: list[bool] = []
    worker = threading.Thread(target=lambda: seen.append(bool(usable())), daemon=True)
    worker.start()
    worker.join()
    assert seen == [False]
