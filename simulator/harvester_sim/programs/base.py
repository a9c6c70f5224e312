"""What simulated containers run.

A *program* is a function ``program(ctx) -> Generator[float, None, int]``: it does its work
through ``ctx.client`` (the API, no side doors), writes log lines with ``ctx.log(...)``,
``yield``s a number of simulated seconds to wait, and ``return``s its exit code. The kubelet
drives the generator on the simulation runtime; when the pod is deleted or its node
reboots the generator is closed (``GeneratorExit``) and the program simply stops.

Programs are found by image and command: ``REGISTRY.register(name, matcher, program)`` where
``matcher(image, command, args) -> bool``. The first matching program wins. A container no
program claims is handled by the kubelet: it exits 0 after ``timings.short_program_s`` when
it is a run-to-completion container, keeps running when it is a serving one, and is
reported (``ProgramNotModelled`` event, ``Kubelet.unmodelled_programs()``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

Program = Callable[["ProgramContext"], Generator[float, None, int]]
Matcher = Callable[[str, list[str], list[str]], bool]


@dataclass
class ProgramContext:
    world: Any                      # harvester_sim.world.World
    client: Any                     # harvester_sim.client.Client (user agent: the program)
    pod: dict[str, Any]             # the pod as it was when the container started
    container: dict[str, Any]
    node: str
    env: dict[str, str]
    logs: list[str] = field(default_factory=list)
    started_at: float = 0.0         # simulated time the container started
    # what a program works out once from ``pod`` and ``container`` (they do not change)
    derived: dict[str, Any] = field(default_factory=dict)

    @property
    def image(self) -> str:
        return str(self.container.get("image", ""))

    @property
    def command(self) -> list[str]:
        return list(self.container.get("command") or [])

    @property
    def args(self) -> list[str]:
        return list(self.container.get("args") or [])

    def log(self, line: str) -> None:
        self.logs.append(line)

    # -- the node's host: only programs that get it (privileged, ``/host``, chroot) use these
    @property
    def host(self) -> Any:
        """The model of this node's host (the kubelet module: its files, images, services,
        reboot), or None in a world without a kubelet module. On a real node such a program
        shares the host with the kubelet, not just the API."""
        return self.world.controllers.get("kubelet")

    def host_files(self) -> dict[str, str]:
        """The node's files under ``/host``; a scratch dict when no kubelet models them."""
        host = self.host
        files = host.host_files(self.node) if host is not None and \
            hasattr(host, "host_files") else None
        if files is None:
            files = self.world.extras.setdefault("host_files", {}).setdefault(self.node, {})
        return files  # type: ignore[no-any-return]

    def restart_agent(self) -> None:
        """``systemctl restart rancher-system-agent`` on the node."""
        host = self.host
        if host is not None and hasattr(host, "restart_agent"):
            host.restart_agent(self.node)


def image_repo(image: str) -> str:
    """``docker.io/rancher/foo:v1`` -> ``rancher/foo`` (registry and tag stripped)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0]):
        parts = parts[1:]
    return "/".join(parts)


class ProgramRegistry:
    """Programs by matcher. A ``fallback`` program claims a whole image (its entrypoint and
    any script it was not told about): it is tried only after every specific program, so
    which one runs does not depend on the order modules were imported in."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, Matcher, Program, bool]] = []

    def register(self, name: str, matcher: Matcher, program: Program,
                 fallback: bool = False) -> None:
        self._entries = [e for e in self._entries if e[0] != name]
        self._entries.append((name, matcher, program, fallback))

    def find(self, image: str, command: list[str], args: list[str]) -> tuple[str, Program] | None:
        for want_fallback in (False, True):
            for name, matcher, program, fallback in self._entries:
                if fallback == want_fallback and matcher(image, command, args):
                    return name, program
        return None


REGISTRY = ProgramRegistry()
