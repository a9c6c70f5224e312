"""ansible-playbook's exit at the run's end without the interpreter's teardown.

When ``ansible-playbook`` returns, Python finalizes the interpreter: it clears every module
and frees, one by one, every object the run left (the playbook, ansible-core, the Kubernetes
client, the collection): 80-170 ms on the machine of docs/performance.md, after the last
line was printed and before the process is gone (the run's wall time, which the overhead
figure counts). Nothing of it is seen: the operating system takes the memory back at once.

:func:`install` (called by the ``harvester_progress`` callback when the playbook's stats are
sent, i.e. when the run is over) replaces ``sys.exit`` for the rest of the process with
:func:`exit_now`, which ansible-playbook's last statement (``sys.exit(exit_code)`` in
``CLI.cli_executor``) then calls: the exit status Python would give (:func:`exit_status`), the
exit handlers (``atexit``: logging's flush, multiprocessing's, temporary files'...) run as
Python runs them, the standard streams flushed, then ``os._exit``. Anything else keeps
Python's own exit: a process that is not ``ansible-playbook``, a call from another thread
than the main one, or a non-daemon thread still alive (Python would wait for it).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn

_ORIGINAL: Callable[..., NoReturn] = sys.exit
PROGRAM = "ansible-playbook"


def exit_status(code: Any) -> int:
    """The status Python exits with for ``sys.exit(code)``: 0 for None, an int as it is, else
    1 after writing ``code`` to stderr (as Python's handling of SystemExit does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code)
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:  # noqa: BLE001 - Python ignores a failed write there too
        pass
    return 1


def _flush(rc: int) -> int:
    """Flush stdout and stderr; a stdout that cannot be flushed makes a successful exit 120,
    as in Python's own finalization."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 - Python reports it the same way: by the status
            if stream is sys.stdout and rc == 0:
                rc = 120
    return rc


def usable() -> bool:
    """Whether :func:`exit_now` may end this process instead of Python's exit."""
    if os.path.basename(sys.argv[0] if sys.argv else "") != PROGRAM:
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is None:
        return False
    return not any(t.is_alive() and not t.daemon for t in threading.enumerate()
                   if t is not threading.main_thread())


def exit_now(code: Any = None) -> NoReturn:
    """``sys.exit(code)`` without the interpreter's teardown (see the module doc); Python's
    own ``sys.exit`` when :func:`usable` says no."""
    if not usable():
        _ORIGINAL(code)
    rc = exit_status(code)
    try:
        atexit._run_exitfuncs()  # noqa: SLF001 - what Python's exit runs; errors are printed
    finally:
        os._exit(_flush(rc) & 0xFF)


def install() -> bool:
    """Replace ``sys.exit`` with :func:`exit_now` in ansible-playbook; True when done."""
    if os.path.basename(sys.argv[0] if sys.argv else "") != PROGRAM:
        return False
    sys.exit = exit_now
    return True
