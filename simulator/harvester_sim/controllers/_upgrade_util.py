"""Helpers shared by the simulated upgrade machinery (``suc``, ``charts``, ``rancher``).

* :func:`install_crds` serves the cluster release's upstream CRDs of some groups (create if
  absent, through the API like ``kubectl apply`` would); :func:`switch_crds` replaces a
  component's CRDs by another release's, as a chart upgrade does (``harvester_sim.crds``).
* :class:`TaskRunner` runs controller work written as generators on the runtime thread: a
  task ``yield``s either a number of simulated seconds to sleep or a predicate
  ``() -> bool`` to wait for (re-checked whenever the owner calls :meth:`TaskRunner.kick`,
  e.g. on a watch event, and every ``poll_s`` as a safety net).
* condition / version helpers.

Upstream: none of its own; :func:`switch_crds` stands for a Helm upgrade of the
harvester/harvester ``deploy/charts/harvester-crd`` chart (CRDs in ``templates/``, so Helm
replaces them) and of the ``harvester`` chart's bundled kubevirt/longhorn CRDs, at the
release tag the catalog names; the CRD data are ``harvester_sim.crds``
(``simulator/docs/crds.md``).
Not modelled: Helm's three-way merge and its release Secrets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from typing import Any

from ..client import ApiError, Client

log = logging.getLogger("harvester_sim.upgrade")

Step = float | int | Callable[[], bool]
TaskGen = Generator[Step, None, None]


def crd_release(world: Any) -> Any:
    """The release whose CRDs the cluster started with (set by the scenario loader from the
    installed release; else the scenario default's)."""
    rel = world.extras.get("crd_release")
    if rel is not None:
        return rel
    from ..scenarios.loader import DEFAULT_INSTALLED

    return release_for(world, DEFAULT_INSTALLED)


def install_crds(world: Any, client: Client, *groups: str) -> None:
    """Serve the cluster release's CRDs of ``groups`` that are not served yet (create, like
    ``kubectl apply`` of a missing CRD)."""
    from .. import crds

    rel = crd_release(world)
    if rel is None:
        return
    for doc in crds.crds_for_groups(rel, groups):
        if client.try_get(doc["apiVersion"], doc["kind"], doc["metadata"]["name"]) is None:
            try:
                client.create(doc)
            except ApiError as exc:
                if exc.code != 409:
                    raise


def switch_crds(world: Any, client: Client, release: Any, step: str) -> list[str]:
    """Replace the CRDs that upgrade ``step`` (``harvester-crd``, ``harvester``, ``rancher``
    in :data:`harvester_sim.crds.CHART_COMPONENTS`) installs by those of ``release``, as a
    chart upgrade (or Rancher's start-up) applies them: create missing, update changed.
    Returns the names of the CRDs written."""
    from .. import crds

    written: list[str] = []
    for doc in crds.crds_for(release, crds.CHART_COMPONENTS[step]):
        name = doc["metadata"]["name"]
        cur = client.try_get(doc["apiVersion"], doc["kind"], name)
        if cur is None:
            client.create(doc)
            written.append(name)
        elif cur.get("spec") != doc["spec"] or crds.source_of(cur) != crds.source_of(doc):
            def fn(o: dict[str, Any], doc: dict[str, Any] = doc) -> dict[str, Any]:
                o["spec"] = doc["spec"]
                o["metadata"].setdefault("annotations", {})[crds.SOURCE_ANNOTATION] = \
                    crds.source_of(doc)
                return o

            client.modify(doc["apiVersion"], doc["kind"], name, fn)
            written.append(name)
    served = dict(world.extras.get("crd_components") or {})
    served.update({c: crds.component_files(release)[c] for c in crds.CHART_COMPONENTS[step]})
    world.extras["crd_components"] = served
    if written:
        world.timeline.record("crds_switched", step=step, release=release.version,
                              crds=len(written))
    return written


def now_ts(world: Any) -> str:
    return str(world.store.clock.timestamp())


def set_condition(obj: dict[str, Any], ctype: str, status: str, reason: str = "",
                  message: str = "", ts: str = "") -> bool:
    """Set ``status.conditions[type=ctype]``; returns True when something changed."""
    conds: list[dict[str, Any]] = obj.setdefault("status", {}).setdefault("conditions", [])
    for c in conds:
        if c.get("type") == ctype:
            if (c.get("status"), c.get("reason", ""), c.get("message", "")) == (
                    status, reason, message):
                return False
            if c.get("status") != status:
                c["lastTransitionTime"] = ts
            c.update({"status": status, "reason": reason, "message": message,
                      "lastUpdateTime": ts})
            return True
    conds.append({"type": ctype, "status": status, "reason": reason, "message": message,
                  "lastUpdateTime": ts, "lastTransitionTime": ts})
    return True


def k8s_version(v: str | None) -> str:
    """Canonical RKE2 version: ``v1.32.4-rke2r1`` and ``v1.32.4+rke2r1`` compare equal."""
    if not v:
        return ""
    v = v.strip()
    if "+" not in v and "-rke2" in v:
        v = v.replace("-rke2", "+rke2", 1)
    return v


class Task:
    __slots__ = ("data", "done", "gen", "name", "on_done", "pred", "timer")

    def __init__(self, name: str, gen: TaskGen,
                 on_done: Callable[[Task], None] | None) -> None:
        self.name = name
        self.gen = gen
        self.pred: Callable[[], bool] | None = None
        self.timer: Any = None
        self.done = False
        self.on_done = on_done
        self.data: dict[str, Any] = {}


class TaskRunner:
    """Generator tasks on the simulation runtime (call every method on the runtime thread)."""

    def __init__(self, world: Any, poll_s: float = 2.0) -> None:
        self.world = world
        self.runtime = world.runtime
        self.poll_s = poll_s
        self.tasks: dict[str, Task] = {}
        self._kick_pending = False
        self._poll_timer: Any = None

    def spawn(self, name: str, gen: TaskGen,
              on_done: Callable[[Task], None] | None = None) -> Task:
        old = self.tasks.get(name)
        if old is not None and not old.done:
            return old
        task = Task(name, gen, on_done)
        self.tasks[name] = task
        self._advance(task)
        return task

    def running(self, name: str) -> bool:
        t = self.tasks.get(name)
        return t is not None and not t.done

    def cancel(self, name: str) -> None:
        t = self.tasks.pop(name, None)
        if t is None or t.done:
            return
        t.done = True
        if t.timer is not None:
            t.timer.cancel()
        try:
            t.gen.close()
        except ValueError:   # being advanced in the runtime thread: done stops it there
            pass

    def stop(self) -> None:
        for name in list(self.tasks):
            self.cancel(name)

    def kick(self) -> None:
        if not self._kick_pending:
            self._kick_pending = True
            self.runtime.call_soon(self._check)

    # ---------------------------------------------------------------- internals
    def _finish(self, task: Task) -> None:
        task.done = True
        if self.tasks.get(task.name) is task:
            del self.tasks[task.name]
        if task.on_done is not None:
            task.on_done(task)

    def _advance(self, task: Task) -> None:
        while not task.done:
            task.pred = None
            try:
                step = next(task.gen)
            except StopIteration:
                self._finish(task)
                return
            except Exception:
                log.exception("task %s failed", task.name)
                self._finish(task)
                raise
            if callable(step):
                if self._test(task, step):
                    continue
                task.pred = step
                self._ensure_poll()
                return

            def wake(t: Task = task) -> None:
                t.timer = None
                if not t.done:
                    self._advance(t)

            task.timer = self.runtime.after(float(step), wake)
            return

    @staticmethod
    def _test(task: Task, pred: Callable[[], bool]) -> bool:
        try:
            return bool(pred())
        except ApiError as exc:
            log.debug("task %s: wait predicate error %s", task.name, exc)
            return False

    def _check(self) -> None:
        self._kick_pending = False
        for task in list(self.tasks.values()):
            if task.done or task.pred is None:
                continue
            if self._test(task, task.pred):
                self._advance(task)

    def _ensure_poll(self) -> None:
        if self._poll_timer is None:
            self._poll_timer = self.runtime.after(self.poll_s, self._poll)

    def _poll(self) -> None:
        self._poll_timer = None
        self._check()
        if any(t.pred is not None and not t.done for t in self.tasks.values()):
            self._ensure_poll()


# ------------------------------------------------------------------ releases / images
def release_for(world: Any, version: str) -> Any | None:
    """The :class:`harvester_sim.releases.catalog.Release` of ``version`` (the scenario's
    release set in ``world.extras['releases']`` first, then the catalog), or None."""
    if not version:
        return None
    rs = world.extras.get("releases")
    if rs is not None and hasattr(rs, "get"):
        try:
            rel = rs.get(version)
            if rel is not None:
                return rel
        except (KeyError, ValueError, LookupError):
            pass
    try:
        from ..releases import catalog
    except ModuleNotFoundError:
        return None
    try:
        return catalog.get_release(version)
    except (KeyError, ValueError, LookupError):
        return None


def release_images(world: Any, version: str) -> list[tuple[str, int]]:
    """``(image reference, size in bytes)`` of every image the release bundles."""
    rel = release_for(world, version)
    if rel is None:
        return []
    imgs = rel.images() if callable(getattr(rel, "images", None)) else getattr(rel, "images", [])
    out: list[tuple[str, int]] = []
    for i in imgs or []:
        if isinstance(i, (tuple, list)):
            out.append((str(i[0]), int(i[1]) if len(i) > 1 else 0))
        elif isinstance(i, dict):
            out.append((str(i.get("name") or i.get("image")), int(i.get("size") or 0)))
        else:
            out.append((str(getattr(i, "name", i)), int(getattr(i, "size", 0) or 0)))
    return out


def normalize_image(ref: str) -> str:
    """Canonical reference: ``docker.io/library/nginx:1`` == ``nginx:1``."""
    r = ref.strip()
    for p in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if r.startswith(p):
            r = r[len(p):]
            break
    r = r.removeprefix("library/")
    last = r.rsplit("/", 1)[-1]
    if "@" not in r and ":" not in last:
        r += ":latest"
    return r


def image_repository(ref: str) -> str:
    n = normalize_image(ref).split("@", 1)[0]
    return n.rsplit(":", 1)[0]
