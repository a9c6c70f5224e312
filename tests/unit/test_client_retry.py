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
