"""Shell scripts that upgrade Plans run against the host (``sh -c <script>``).

The simulator does not interpret shell. It recognises the few scripts the upgrade uses by
what they do and runs a model of each; any other ``sh -c`` script in the images claimed
here fails (exit 127, ``not modelled by the simulator``) instead of being accepted:

* **skip-restart drop-in** — harvester/upgrade-toolkit ``5ac1bbe35a6b4f61247aa09162cc6a9099dddd4f``
  ``package/upgrade_manifests.sh`` ``skip_restart_rancher_system_agent``: the SUC Plan
  ``<plan>-skip-restart-rancher-system-agent`` runs ``registry.suse.com/bci/bci-base:15.6``
  with ``chroot /host sh -c '...'``, which writes
  ``/run/systemd/system/rancher-system-agent.service.d/override.conf`` (``[Service]
  EnvironmentFile=-.../10-harvester-upgrade.env``) and that env file
  (``INSTALL_RKE2_SKIP_ENABLE=true``), then ``systemctl daemon-reload`` and restarts
  rancher-system-agent. Recognised by: the drop-in directory, ``INSTALL_RKE2_SKIP_ENABLE=true``
  and ``systemctl restart rancher-system-agent``.
* **image cleanup** — harvester/harvester ``v1.6.0`` ``pkg/controller/master/upgrade/
  common.go`` ``imageCleanupScript`` (the V2 ``<plan>-image-cleanup`` Plan does the same,
  reference §B.2): find the host's crictl as ``$HOST_DIR/$(readlink
  $HOST_DIR/var/lib/rancher/rke2/bin)/crictl`` and run ``crictl rmi`` on the images in env
  ``IMAGES`` (whitespace separated), either once for all of them or once per image in a
  ``for`` loop; a failing ``rmi`` followed by ``||`` is not fatal. Recognised by: that
  crictl path, ``rmi`` and ``$IMAGES``. ``crictl rmi`` is modelled on containerd's CRI:
  an image is removed from the node's store (the kubelet's :meth:`remove_images`; the Node's
  ``status.images`` is only the kubelet's report of it) **even when a running container
  uses it** (containerd does not check); a name the store does not have is an error (``no
  such image``) and the call exits 1 after trying the others. Without a kubelet module the
  node has no container runtime and no images: every ``rmi`` is ``no such image``. The
  script's exit code: 1 when an ``rmi`` without ``||`` failed under ``set -e``, else 0.
* **touch files in a shared emptyDir** — a script made only of ``touch``/``mkdir -p`` on paths
  under one of the container's ``emptyDir`` mounts (e.g. an init container that leaves
  ``/tmp/skip-<volume>``, the per-volume bypass ``upgrade_node.sh``'s
  ``wait_longhorn_engines`` tests with ``-f``). The files live as long as the pod, visible to
  every container of the pod that mounts the same volume (:func:`pod_file_exists`).
  :func:`pod_file_exists` also sees the items of a ``downwardAPI`` volume the container
  mounts (whole, or one item at a time with ``subPath``): the kubelet writes them before
  any container starts (kubernetes ``v1.32.4`` ``pkg/volume/downwardapi``,
  ``pkg/kubelet/kubelet_pods.go`` ``makeMounts``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Generator
from typing import Any

from .base import REGISTRY, ProgramContext, image_repo

Prog = Generator[float, None, int]

AGENT_DROPIN_DIR = "/run/systemd/system/rancher-system-agent.service.d"
AGENT_ENV_FILE = f"{AGENT_DROPIN_DIR}/10-harvester-upgrade.env"
SKIP_RESTART_SCRIPT = (
    f"set -x && mkdir -p {AGENT_DROPIN_DIR}"
    f" && printf '[Service]\\nEnvironmentFile=-{AGENT_ENV_FILE}\\n'"
    f" > {AGENT_DROPIN_DIR}/override.conf"
    f" && echo 'INSTALL_RKE2_SKIP_ENABLE=true' > {AGENT_ENV_FILE}"
    " && systemctl daemon-reload && systemctl restart rancher-system-agent.service")
CRICTL_PATH = re.compile(r"\$\{?HOST_DIR\}?/\$\(readlink\s+\$\{?HOST_DIR\}?/var/lib/rancher/"
                         r"rke2/bin\)/crictl|/host/\$\(readlink\s+/host/var/lib/rancher/rke2/"
                         r"bin\)/crictl")
IMAGES_VAR = re.compile(r"\$\{?IMAGES\}?")


def _shell_script(argv: list[str]) -> str | None:
    """The script of ``[chroot /host] sh|bash -c <script>``."""
    if len(argv) >= 2 and posixpath.basename(argv[0]) == "chroot":
        argv = argv[2:]
    if len(argv) >= 3 and posixpath.basename(argv[0]) in ("sh", "bash") and argv[1] == "-c":
        return argv[2]
    return None


def _is_skip_restart(script: str) -> bool:
    return (AGENT_DROPIN_DIR in script and "INSTALL_RKE2_SKIP_ENABLE=true" in script
            and re.search(r"systemctl\s+restart\s+rancher-system-agent", script) is not None)


def skip_restart(ctx: ProgramContext) -> Prog:
    files = ctx.host_files()
    files[f"{AGENT_DROPIN_DIR}/override.conf"] = \
        f"[Service]\nEnvironmentFile=-{AGENT_ENV_FILE}\n"
    files[AGENT_ENV_FILE] = "INSTALL_RKE2_SKIP_ENABLE=true\n"
    yield 1.0
    ctx.restart_agent()
    ctx.world.timeline.record("agent_dropin_written", node=ctx.node)
    return 0


def _is_image_cleanup(script: str) -> bool:
    return bool(CRICTL_PATH.search(script)) and re.search(r"\brmi\b", script) is not None \
        and bool(IMAGES_VAR.search(script))


def crictl_rmi(ctx: ProgramContext, images: list[str]) -> tuple[int, list[str]]:
    """``crictl rmi <images...>`` on containerd: (exit code, removed names)."""
    kubelet = ctx.host
    removed: list[str] = []
    failed = False
    for img in images:
        gone: list[str] = []
        if kubelet is not None and hasattr(kubelet, "remove_images"):
            gone = list(kubelet.remove_images(ctx.node, [img]))
        if gone:
            removed.extend(gone)
            ctx.log(f"Deleted: {img}")
        else:
            ctx.log(f'level=error msg="no such image {img}"')
            failed = True
    if failed:
        ctx.log('level=fatal msg="unable to remove the image(s)"')
    return (1 if failed else 0), removed


def image_cleanup(ctx: ProgramContext, script: str) -> Prog:
    images = ctx.env.get("IMAGES", "").split()
    per_image = re.search(r"\bfor\s+\w+\s+in\s+" + IMAGES_VAR.pattern, script) is not None
    rmi_line = next((ln for ln in script.splitlines() if re.search(r"\brmi\b", ln)), "")
    tolerated = "||" in rmi_line
    strict = re.search(r"(^|\n)\s*set\s+-[a-z]*e", script) is not None
    yield 0.1 * max(1, len(images))
    calls = [[i] for i in images] if per_image else ([images] if images else [])
    removed: list[str] = []
    for args in calls:
        rc, gone = crictl_rmi(ctx, args)
        removed.extend(gone)
        if rc and strict and not tolerated:
            ctx.world.timeline.record("images_cleaned", node=ctx.node, removed=len(removed))
            return 1
    if len(removed) < len(images):
        ctx.log("Fail to remove images")
    ctx.log(f"removed {len(removed)} image(s) from {ctx.node}")
    ctx.world.timeline.record("images_cleaned", node=ctx.node, removed=len(removed),
                              images=list(removed))
    return 0


def _mount_of(ctx: ProgramContext, path: str) -> tuple[str, str] | None:
    """``(volume name, path inside the volume)`` when ``path`` is under one of the
    container's mounts of an ``emptyDir`` volume."""
    vols = {v.get("name"): v for v in (ctx.pod.get("spec") or {}).get("volumes") or []}
    best: tuple[str, str] | None = None
    for m in ctx.container.get("volumeMounts") or []:
        mp = str(m.get("mountPath") or "").rstrip("/")
        if "emptyDir" not in (vols.get(m.get("name")) or {}):
            continue
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[1]):
                best = (str(m["name"]), mp)
    if best is None:
        return None
    return best[0], path[len(best[1]):].lstrip("/")


def _pod_files(ctx: ProgramContext, volume: str) -> set[str]:
    uid = str((ctx.pod.get("metadata") or {}).get("uid") or
              (ctx.pod.get("metadata") or {}).get("name"))
    store: dict[tuple[str, str], set[str]] = ctx.world.extras.setdefault("pod_files", {})
    return store.setdefault((uid, volume), set())


def _descending(path: Any) -> bool:
    """A path the apiserver accepts in a volume item or a subPath: relative, no ``..``."""
    return bool(path) and isinstance(path, str) and not path.startswith("/") and \
        ".." not in path.split("/")


def _downward_api_mounts(ctx: ProgramContext) -> tuple[tuple[str, str, frozenset[str]], ...]:
    """The container's mounts of ``downwardAPI`` volumes as ``(mountPath, subPath, the
    volume's item paths)``, normalized, worked out once per container (the pre-drain Job
    mounts one item per volume it lets the script skip: a hundred or more)."""
    got: tuple[tuple[str, str, frozenset[str]], ...] | None = \
        ctx.derived.get("downward_api_mounts")
    if got is not None:
        return got
    vols = {v.get("name"): v for v in (ctx.pod.get("spec") or {}).get("volumes") or []}
    items_of: dict[str, frozenset[str]] = {}
    out: list[tuple[str, str, frozenset[str]]] = []
    for m in ctx.container.get("volumeMounts") or []:
        src = (vols.get(m.get("name")) or {}).get("downwardAPI")
        if not isinstance(src, dict):
            continue
        # the apiserver refuses an absolute path or a ``..`` element in an item's path and
        # in a subPath (kubernetes pkg/apis/core/validation ``validateLocalDescendingPath``,
        # ``validateSubPath``): such a mount shows nothing here, never a file
        name = str(m.get("name"))
        if name not in items_of:
            items_of[name] = frozenset(posixpath.normpath(str(i.get("path")))
                                       for i in src.get("items") or []
                                       if _descending(i.get("path")))
        mp = str(m.get("mountPath") or "").rstrip("/")
        raw_sub = m.get("subPath") or ""
        if raw_sub and not _descending(raw_sub):
            continue
        sub = posixpath.normpath(str(raw_sub)) if raw_sub else ""
        out.append((mp, "" if sub == "." else sub, items_of[name]))
    ctx.derived["downward_api_mounts"] = got = tuple(out)
    return got


def _downward_api_file(ctx: ProgramContext, path: str) -> bool:
    """Whether ``path`` is a file of a ``downwardAPI`` volume this container mounts: the
    kubelet writes one file per item (``items[].path``, relative to the volume) before any
    container starts (kubernetes ``pkg/volume/downwardapi``); a mount with ``subPath``
    shows that path of the volume at ``mountPath`` (``pkg/kubelet/kubelet_pods.go``
    ``makeMounts``). Item contents are not modelled, only that the file is there."""
    for mp, sub, items in _downward_api_mounts(ctx):
        if path == mp:
            rel = sub
        elif path.startswith(mp + "/"):
            rel = posixpath.join(sub, path[len(mp) + 1:]) if sub else path[len(mp) + 1:]
        else:
            continue
        if rel and posixpath.normpath(rel) in items:
            return True
    return False


def pod_file_exists(ctx: ProgramContext, path: str) -> bool:
    """``[[ -f path ]]`` in this container: only files an emptyDir it mounts holds, or a
    downwardAPI volume's items (:func:`_downward_api_file`) (its own image filesystem has
    none of the files the upgrade looks for)."""
    where = _mount_of(ctx, path)
    if where is not None and where[1] in _pod_files(ctx, where[0]):
        return True
    return _downward_api_file(ctx, path)


def _touch_paths(ctx: ProgramContext, script: str) -> list[tuple[str, str]] | None:
    cmds = [c.strip() for c in re.split(r"&&|;|\n", script) if c.strip()]
    if not cmds:
        return None
    out: list[tuple[str, str]] = []
    for cmd in cmds:
        words = cmd.split()
        if words[0] == "set":
            continue
        if words[0] == "touch":
            paths = words[1:]
        elif words[:2] == ["mkdir", "-p"]:
            paths = []
            for p in words[2:]:
                if _mount_of(ctx, p) is None:
                    return None
        else:
            return None
        for p in paths:
            where = _mount_of(ctx, p.strip("'\""))
            if where is None or not where[1]:
                return None
            out.append(where)
    return out


def touch_files(ctx: ProgramContext, paths: list[tuple[str, str]]) -> Prog:
    for volume, rel in paths:
        _pod_files(ctx, volume).add(rel)
    yield 0.1
    return 0


def run_shell_script(ctx: ProgramContext, argv: list[str]) -> Prog | None:
    """The model of ``argv``'s script, or None when it is not one of the modelled scripts."""
    script = _shell_script(argv)
    if script is None:
        return None
    if _is_skip_restart(script):
        return skip_restart(ctx)
    if _is_image_cleanup(script):
        return image_cleanup(ctx, script)
    touched = _touch_paths(ctx, script)
    if touched is not None:
        return touch_files(ctx, touched)
    return None


def _bci_chroot(image: str, command: list[str], args: list[str]) -> bool:
    argv = list(command) + list(args)
    return image_repo(image) == "bci/bci-base" and bool(argv) and \
        posixpath.basename(argv[0]) == "chroot"


def bci_chroot(ctx: ProgramContext) -> Prog:
    argv = ctx.command + ctx.args
    found = run_shell_script(ctx, argv)
    if found is None:
        ctx.log(f"{argv[0]}: script not modelled by the simulator: {argv!r}")
        return 127
    return (yield from found)


REGISTRY.register("bci-chroot-host-script", _bci_chroot, bci_chroot)
