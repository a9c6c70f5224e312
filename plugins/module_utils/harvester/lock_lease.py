"""The upgrade lock's Lease protocol: who may take Lease
``harvester-system/harvester-upgrade-lock``, and taking, renewing and releasing it.

The rules follow client-go's leader election (``tools/leaderelection``), see
docs/resilience.md and the overview in :mod:`lock`: a free lease is created, the run's own
renewed, a lease nobody holds or a stale one (:func:`lock_run.is_stale`) taken; a lease of
another run that is live by our clock is refused at once (:class:`LockHeld`); one our clock
calls expired is watched (:func:`observe`) and taken only after it stayed unchanged for its
whole ``leaseDurationSeconds`` of *our* monotonic time. Release deletes with preconditions
(uid and resourceVersion).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client import (
    ApiError,
    ConflictsExhausted,
    Kube,
    retry_on_conflict,
    unfenced,
)
from ansible_collections.harvester.upgrade.plugins.module_utils.harvester.lock_run import (
    is_stale,
)

LEASE = ("coordination.k8s.io/v1", "Lease")
NAMESPACE = "harvester-system"
NAME = "harvester-upgrade-lock"
DEFAULT_DURATION = 300
MIN_DURATION = 3
FRESH = 1 / 6   # of the duration: a lease renewed by this run more recently is not rewritten


class LockHeld(Exception):
    """Another run holds a live lease."""


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def _micro(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def duration_of(lease: dict[str, Any] | None) -> int:
    spec = (lease or {}).get("spec") or {}
    try:
        return max(1, int(spec.get("leaseDurationSeconds") or DEFAULT_DURATION))
    except (TypeError, ValueError):
        return DEFAULT_DURATION


def expires_at(lease: dict[str, Any]) -> datetime | None:
    """When the lease expires by *our* clock if its holder's clock agrees with ours (shown to
    people; never used to take a lease)."""
    spec = lease.get("spec") or {}
    renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    if renewed is None:
        return None
    return datetime.fromtimestamp(renewed.timestamp() + duration_of(lease), timezone.utc)


def holder_of(lease: dict[str, Any] | None) -> str:
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def version_of(lease: dict[str, Any] | None) -> tuple[str, str, str]:
    """What changes whenever the lease's holder renews or someone takes it."""
    spec = (lease or {}).get("spec") or {}
    return (str(((lease or {}).get("metadata") or {}).get("resourceVersion") or ""),
            str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))


def decide(lease: dict[str, Any] | None, me: str, now: datetime) -> str:
    """``create`` (no lease), ``renew`` (ours), ``take`` (nobody holds it, or its holder is
    a stale run of this machine), ``held`` (another run's, live by our clock: refused at once)
    or ``observe`` (another run's that our clock calls expired, or renewed in the future: the
    clocks may differ, so it is taken only after it stayed unchanged for its duration of our
    own monotonic time, see :func:`observe`)."""
    if lease is None:
        return "create"
    holder = holder_of(lease)
    if holder == me:
        return "renew"
    if not holder or is_stale(holder):
        return "take"
    renewed = parse_time((lease.get("spec") or {}).get("renewTime")
                         or (lease.get("spec") or {}).get("acquireTime"))
    secs = duration_of(lease)
    if renewed is not None and now - timedelta(seconds=secs) < renewed <= \
            now + timedelta(seconds=secs):
        return "held"
    return "observe"


def held_message(lease: dict[str, Any], now: datetime) -> str:
    spec = lease.get("spec") or {}
    exp = expires_at(lease)
    left = int((exp - now).total_seconds()) if exp else 0
    secs = duration_of(lease)
    return (f"another upgrade run holds the lock (Lease {NAMESPACE}/{NAME}): holder "
            f"{spec.get('holderIdentity')}, renewed {spec.get('renewTime')} (its clock), "
            f"expires {_micro(exp) if exp else '?'} (in {left}s by this machine's clock) unless "
            f"renewed. Wait for that run to end. A lease nobody renews any more is taken over "
            f"by a run that sees it unchanged for {secs}s (leaseDurationSeconds), and at once "
            f"by a re-run from the same machine once that run's ansible-playbook is gone. Do "
            f"not delete the Lease while that run may still be working: it would take it back, "
            f"or stop if another run took it first")


def observe(kube: Kube, lease: dict[str, Any], sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic,
            every: float | None = None) -> dict[str, Any] | None:
    """Watch another run's lease for its ``leaseDurationSeconds`` of our monotonic time
    (client-go's ``observedTime``): the lease as last read if nothing changed meanwhile (its
    holder stopped renewing: it may be taken), None if it was deleted; :class:`LockHeld` if
    its holder renewed it or another run took it."""
    secs = duration_of(lease)
    seen, since = version_of(lease), clock()
    step = every if every is not None else min(5.0, max(0.5, secs / 10))
    while True:
        left = since + secs - clock()
        if left <= 0:
            return lease
        sleep(min(step, left))
        cur = kube.get(*LEASE, NAME, NAMESPACE)
        if cur is None:
            return None
        if version_of(cur) != seen:
            raise LockHeld(held_message(cur, now_utc()) + " (it was renewed while this run "
                           "watched it: its holder is alive, whatever its renewTime says)")


def lease_for(me: str, secs: int, now: datetime,
              old: dict[str, Any] | None) -> dict[str, Any]:
    spec = dict((old or {}).get("spec") or {})
    taken = holder_of(old) != me
    spec.update(holderIdentity=me, leaseDurationSeconds=secs, renewTime=_micro(now))
    if taken or old is None:
        spec["acquireTime"] = _micro(now)
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
            0 if old is None else 1)
    if old is None:
        return {"apiVersion": LEASE[0], "kind": LEASE[1], "metadata": {
            "name": NAME, "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "harvester.upgrade"}}, "spec": spec}
    # the lease as read (apiVersion, kind, namespace, resourceVersion: a conditional PUT)
    return {**old, "spec": spec}


def acquire(kube: Kube, me: str, duration: int | None = None, fresh: float = 0.0,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic,
            read: tuple[dict[str, Any] | None] | None = None) -> dict[str, Any]:
    """Take or renew the lease for ``me``; :class:`LockHeld` if another run holds it.
    ``fresh`` (a fraction of the lease's duration): a lease ``me`` renewed less than that long
    ago (its renewTime was written by this machine's clock) is left as it is. ``read``: the
    lease (or None) as this module read it moments ago, decided on instead of reading it
    again (a write is conditional on its resourceVersion; after a conflict it is read again)."""
    first = [read]

    def attempt() -> dict[str, Any]:
        with unfenced():
            known, first[0] = first[0], None
            lease = known[0] if known is not None else kube.get(*LEASE, NAME, NAMESPACE)
            now = now_utc()
            what = decide(lease, me, now)
            if what == "held":
                raise LockHeld(held_message(lease or {}, now))
            if what == "observe":
                lease = observe(kube, lease or {}, sleep, clock)
                now = now_utc()
            if duration:
                secs = int(duration)
            elif what == "renew":
                secs = duration_of(lease)
            else:               # created or taken: this run's duration
                secs = env_duration()
            renewed = parse_time(((lease or {}).get("spec") or {}).get("renewTime"))
            if what == "renew" and lease is not None and renewed is not None and \
                    duration is None and 0 <= (now - renewed).total_seconds() < fresh * secs:
                return lease
            new = lease_for(me, secs, now, lease)
            if lease is None:   # two runs creating it at once: one gets 409 AlreadyExists
                return kube.create(new)
            return kube.replace(new)

    try:
        return retry_on_conflict(attempt, 5, f"Lease {NAMESPACE}/{NAME}")
    except ConflictsExhausted as exc:
        raise LockHeld(f"could not take Lease {NAMESPACE}/{NAME}: too many concurrent "
                       "writers") from exc


def env_duration() -> int:
    """``HARVESTER_UPGRADE_LOCK_DURATION`` (seconds, at least :data:`MIN_DURATION`), else
    :data:`DEFAULT_DURATION`: the duration of a lease this run creates or takes."""
    raw = os.environ.get("HARVESTER_UPGRADE_LOCK_DURATION", "").strip()
    if not raw:
        return DEFAULT_DURATION
    if not raw.isdigit() or int(raw) < MIN_DURATION:
        raise ValueError(f"HARVESTER_UPGRADE_LOCK_DURATION must be a whole number of seconds, "
                         f"at least {MIN_DURATION}; got {raw!r}")
    return int(raw)


def release(kube: Kube, me: str) -> bool:
    """Delete the lease if ``me`` holds it, with preconditions (its uid and resourceVersion as
    read): a lease another run took or renewed meanwhile is left alone."""
    with unfenced():
        try:
            lease = kube.get(*LEASE, NAME, NAMESPACE)
            if lease is None or holder_of(lease) != me:
                return False
            md = lease.get("metadata") or {}
            pre = {k: str(md[f]) for k, f in (("uid", "uid"),
                                              ("resourceVersion", "resourceVersion"))
                   if md.get(f)}
            return kube.delete(*LEASE, NAME, NAMESPACE, preconditions=pre or None)
        except ApiError:
            return False
