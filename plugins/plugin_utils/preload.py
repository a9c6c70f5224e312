"""What ``in_process`` loads into ansible-playbook before its first module task (the Kubernetes
client, every module of the collection and what they import lazily), and a way to load it
while ansible-playbook only waits for a worker.

:func:`import_all` is the import set. ``in_process`` runs it when an action plugin of the
collection is first loaded, i.e. just before the first module task is forked (~0.12-0.2 s of
ansible-playbook's time, serial with the run: docs/performance.md). Before that task the run's
first worker, common's variable check, runs for ~40 ms while ansible-playbook only polls for
its result: :func:`start_after_next_fork` (called by the ``harvester_progress`` callback when
the playbook starts) makes the first fork after it start a thread in ansible-playbook that
runs :func:`import_all` meanwhile, so that by the module task most of it is done.

Forking while another thread imports is not safe (the child would inherit the import locks
that thread holds, and wait on them forever), so the thread is started only by a fork's
``after_in_parent`` hook (the child has been made) and every later fork waits for it in its
``before`` hook (:func:`wait`); ``in_process`` waits for it too before its own preload. Plain
imports only: plugin lookups stay in ``in_process``, in the main thread.
"""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
import sys
import threading

MODULES = "ansible_collections.harvester.upgrade.plugins.modules"

# ... and what our module_utils import inside functions, on first use (else every worker
# imports, and compiles, them again for each module call)
LAZY = ("ansible_collections.kubernetes.core.plugins.module_utils.k8s.client",
        "ansible_collections.kubernetes.core.plugins.module_utils.args_common",
        "kubernetes.watch", "kubernetes.dynamic.exceptions", "concurrent.futures.thread",
        "cryptography.x509")

_lock = threading.Lock()
_thread: threading.Thread | None = None
_armed = False      # a fork hook is registered and has not started the thread yet
_registered = False


def import_all() -> bool:
    """Import the Kubernetes client, every module of the collection and :data:`LAZY`; False
    when the client or the collection's modules cannot be imported (a module reports a
    missing dependency when it runs)."""
    for name in ("kubernetes.client", "kubernetes.dynamic", MODULES):
        try:
            importlib.import_module(name)
        except ImportError:
            return False
    for name in [f"{MODULES}.{info.name}"
                 for info in pkgutil.iter_modules(sys.modules[MODULES].__path__)] + list(LAZY):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - that module reports it when it runs
            continue
    return True


def _run() -> None:
    # the collector paused meanwhile, as in_process's own preload does: none of it is garbage
    enabled = gc.isenabled()
    gc.disable()
    try:
        import_all()
    except BaseException:  # noqa: BLE001 - in_process's preload in the main thread redoes it
        pass
    finally:
        if enabled:
            gc.enable()


def _start() -> None:
    """``after_in_parent`` hook: the first fork after :func:`start_after_next_fork` starts
    the thread; later forks do nothing."""
    global _armed, _thread
    with _lock:
        if not _armed:
            return
        _armed = False
        _thread = threading.Thread(target=_run, name="harvester-upgrade-preload")
        _thread.start()


def _disarm() -> None:
    """``after_in_child`` hook: a worker starts no thread of its own."""
    global _armed
    _armed = False


def wait() -> None:
    """Until the thread has finished (``before`` hook of every fork; in_process's preload):
    no fork, and no second preload, while it imports."""
    thread = _thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def start_after_next_fork() -> bool:
    """Arm the thread (once per process; True when armed now): started right after the next
    fork of this process, in the parent."""
    global _armed, _registered
    with _lock:
        if _thread is not None or _armed:
            return False
        if not _registered:
            os.register_at_fork(before=wait, after_in_parent=_start, after_in_child=_disarm)
            _registered = True
        _armed = True
        return True


def running() -> bool:
    """Whether the thread is importing now."""
    return _thread is not None and _thread.is_alive()
