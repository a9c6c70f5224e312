"""Kube's writes and 409 Conflict: an unconditional merge patch or delete is retried (the
apiserver retries those itself; a 409 that still reaches us is a lost race, and the same patch
applied again is what it would have done), a conditional one (resourceVersion) is not: its
caller re-reads and decides again (the fault matrix once failed Finalize on such a 409)."""

from __future__ import annotations

from typing import Any

import pytest

# conftest.py puts the repository root (the collection's ansible_collections link) on sys.path
client = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.client")
fencing = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.fencing")
retry = pytest.importorskip(
    "ansible_collections.harvester.upgrade.plugins.module_utils.harvester.retry")


class FakeResource:
    def __init__(self, conflicts: int) -> None:
        self.conflicts, self.calls = conflicts, 0

    def _answer(self) -> dict[str, Any]:
        self.calls += 1
        if self.conflicts:
            self.conflicts -= 1
            raise client.ApiError(409, "Conflict", "the object has been modified")
        return {"kind": "Thing", "metadata": {"name": "x"}}

    def patch(self, **kw: Any) -> dict[str, Any]:
        return self._answer()

    def delete(self, **kw: Any) -> dict[str, Any]:
        return self._answer()


class FakeDyn:
    def __init__(self, res: FakeResource) -> None:
        self.res = res
        self.resources = self

    def get(self, api_version: str, kind: str) -> FakeResource:
        return self.res


def test_unconditional_patch_and_delete_survive_a_409() -> None:
    res = FakeResource(conflicts=1)
    kube = client.Kube(FakeDyn(res))
    assert kube.patch("v1", "Thing", "x", {"spec": {"a": 1}})["metadata"]["name"] == "x"
    assert res.calls == 2
    res.conflicts, res.calls = 1, 0
    assert kube.delete("v1", "Thing", "x") is True
    assert res.calls == 2


def test_conditional_patch_conflict_reaches_the_caller() -> None:
    res = FakeResource(conflicts=1)
    kube = client.Kube(FakeDyn(res))
    with pytest.raises(client.ApiError) as exc:
        kube.patch("v1", "Thing", "x", {"metadata": {"resourceVersion": "5"}, "spec": {}})
    assert exc.value.status == 409 and res.calls == 1


class _Refused:
    """A request while the API server is down: urllib3's connection refused, ``down`` times."""

    def __init__(self, down: int, fence: Any = None) -> None:
        self.down, self.calls, self.fence = down, 0, fence

    def __call__(self) -> str:
        if self.fence is not None:
            self.fence()
        self.calls += 1
        if self.calls <= self.down:
            from urllib3.exceptions import MaxRetryError, NewConnectionError
            raise MaxRetryError(None, "/api", NewConnectionError(  # type: ignore[arg-type]
                None, "Failed to establish a new connection: [Errno 111] Connection refused"))
        return "answered"


def test_an_outage_without_the_lock_fails_after_the_bounded_retries() -> None:
    fn, slept = _Refused(down=50), []
    with pytest.raises(client.ApiError, match="Connection refused"):
        retry.call_with_retry(fn, sleep=slept.append)
    assert fn.calls == 6


def test_an_outage_is_retried_while_the_lock_holds_until_its_deadline() -> None:
    """Holding the upgrade lock, a refused connection is retried past the usual attempts
    (a control-plane reboot is ridden out); once the lock's fence refuses (the renew deadline
    passed), the request fails with the lock's error, not the transport's."""
    state = {"lost": False}

    def fence() -> None:
        if state["lost"]:
            raise client.ApiError(0, "LockLost", "lost the upgrade lock")

    fencing.set_fence(fence)
    try:
        fn, slept = _Refused(down=20, fence=fencing.fence), []
        assert retry.call_with_retry(fn, sleep=slept.append) == "answered"
        assert fn.calls == 21
        fn = _Refused(down=1000, fence=fencing.fence)

        def sleep(_s: float) -> None:
            if fn.calls >= 30:
                state["lost"] = True

        with pytest.raises(client.ApiError, match="lost the upgrade lock"):
            retry.call_with_retry(fn, sleep=sleep)
        assert fn.calls == 30
        with fencing.unfenced():                 # release(): no deadline guard, bounded
            fn = _Refused(down=50)
            with pytest.raises(client.ApiError, match="Connection refused"):
                retry.call_with_retry(fn, sleep=slept.append)
            assert fn.calls == 6
    finally:
        fencing.set_fence(None)
