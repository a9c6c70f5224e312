"""The assembled simulator: store + clock + runtime + controllers + faults + timeline.

``World(scenario)`` builds everything in-process; ``start()`` loads the scenario into the
store (through the client, like any actor) and starts the controllers; the API server
(``api.server``) is started separately by the CLI or the test kit on top of ``world.store``.

Each simulated controller module in :data:`CONTROLLER_MODULES` exposes
``setup(world) -> object``; modules are set up in that order, then the invariant monitor
(:data:`MONITOR_MODULE`, which only watches: ``world.extras["invariants"]``).
``World(..., without=names)`` leaves out the controllers named (by the last part of the
module name, e.g. ``suc``), so that a real controller run beside the simulator does their
work (``harvester-sim serve --without suc`` with the real system-upgrade-controller pointed
at its kubeconfig).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from typing import Any

from .api.resources import Registry
from .api.store import Store
from .client import Client
from .clock import Clock
from .controllers.runtime import Runtime
from .faults import Faults
from .proxy import ProxyRegistry
from .timeline import Timeline
from .timings import Timings

log = logging.getLogger("harvester_sim.world")

CONTROLLER_MODULES = [
    "harvester_sim.controllers.namespaces",
    "harvester_sim.controllers.kubelet",
    "harvester_sim.controllers.scheduler",
    "harvester_sim.controllers.deployments",
    "harvester_sim.controllers.replicasets",
    "harvester_sim.controllers.daemonsets",
    "harvester_sim.controllers.statefulsets",
    "harvester_sim.controllers.jobs",
    "harvester_sim.controllers.endpoints",
    "harvester_sim.controllers.disruption",
    "harvester_sim.controllers.volumes",
    "harvester_sim.controllers.kubevirt",
    "harvester_sim.controllers.harvester_vm",
    "harvester_sim.controllers.longhorn",
    "harvester_sim.controllers.harvester_images",
    "harvester_sim.controllers.suc",
    "harvester_sim.controllers.charts",
    "harvester_sim.controllers.rancher",
]

# Not a controller: it only watches the store, and cannot be swapped for a real one.
MONITOR_MODULE = "harvester_sim.invariants"

# Names ``--without`` accepts: every simulated controller.
CONTROLLER_NAMES = tuple(m.rsplit(".", 1)[1] for m in CONTROLLER_MODULES)


def check_without(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` validated against :data:`CONTROLLER_NAMES`; ValueError names the unknown."""
    out = tuple(dict.fromkeys(n.strip() for n in names if n.strip()))
    unknown = [n for n in out if n not in CONTROLLER_NAMES]
    if unknown:
        raise ValueError(f"unknown controller(s) {', '.join(unknown)}: choose from "
                         f"{', '.join(CONTROLLER_NAMES)}")
    return out


class World:
    """Everything the simulator runs, in one process."""

    def __init__(self, scenario: dict[str, Any] | None = None, speed: float | None = None,
                 seed: int | None = None, without: Iterable[str] = ()) -> None:
        self.without = check_without(without)
        self.scenario: dict[str, Any] = scenario or {}
        sp = speed if speed is not None else float(self.scenario.get("speed", 1.0))
        self.clock = Clock(sp)
        self.timings = Timings.from_scenario(self.scenario)
        self.registry = Registry()
        self.store = Store(self.registry, self.clock)
        self.runtime = Runtime(self.store, self.clock)
        self.client = Client(self.store, "harvester-sim/loader")
        self.timeline = Timeline(self.clock)
        self.faults = Faults(self.clock, self.scenario.get("faults"),
                             seed if seed is not None else self.scenario.get("seed"))
        self.proxies = ProxyRegistry()
        self.controllers: dict[str, Any] = {}
        self.extras: dict[str, Any] = {}  # e.g. release server, programs registry
        self.started = False

    def client_for(self, component: str) -> Client:
        return Client(self.store, f"harvester-sim/{component}")

    def simulates(self, controller: str) -> bool:
        """Whether this world runs the simulated ``controller`` (a name of
        :data:`CONTROLLER_NAMES`). A controller asks this to know whether some other part
        of the cluster acts in this world (a kubelet runs pods, a scheduler binds them); it
        never calls that controller."""
        return controller in self.controllers

    def start(self) -> None:
        """Load the scenario and start the controllers."""
        loader = importlib.import_module("harvester_sim.scenarios.loader")
        loader.populate(self)
        for mod_name in CONTROLLER_MODULES:
            name = mod_name.rsplit(".", 1)[1]
            if name in self.without:
                log.warning("controller %s left out: a real one must do its work", name)
                continue
            self.controllers[name] = importlib.import_module(mod_name).setup(self)
        importlib.import_module(MONITOR_MODULE).setup(self)
        self.runtime.start()
        if hasattr(loader, "after_start"):
            loader.after_start(self)
        self.started = True

    def stop(self) -> None:
        # the runtime thread first: a controller's stop (timers cancelled, generators closed)
        # must not run while that thread is inside one of its callbacks
        self.runtime.stop()
        for ctrl in self.controllers.values():
            stop = getattr(ctrl, "stop", None)
            if callable(stop):
                stop()
        for extra in self.extras.values():
            stop = getattr(extra, "stop", None)
            if callable(stop):
                stop()


def _optional(name: str) -> Any:
    """Import a module that may be absent (the report and release server are optional
    parts of a test world); a missing dependency inside it still raises."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise
