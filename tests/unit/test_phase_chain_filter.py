"""The filter harvester.upgrade.phase_chain: which phases a phase's call starts after it."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.harvester.upgrade.plugins.filter.phase_chain import phase_chain


def tags(out: list[dict[str, object]]) -> list[object]:
    return [x["phase"] for x in out]


def test_a_whole_run_starts_every_phase_after_it() -> None:
    # the list goes on; each call stops at the first phase that waits (pipeline.start_chain)
    assert tags(phase_chain("iso_download", ["all"], [])) == [
        "repo_create", "metadata_populate", "image_preload", "cluster_upgrade", "node_upgrade",
        "image_cleanup"]
    assert tags(phase_chain("image_preload", ["all"], [])) == [
        "cluster_upgrade", "node_upgrade", "image_cleanup"]
    # ClusterUpgrade's completion enters NodeUpgrade (node_gate step=enter then finds it)
    assert tags(phase_chain("cluster_upgrade", ["all"], [])) == ["node_upgrade",
                                                                 "image_cleanup"]
    assert phase_chain("cluster_upgrade", ["all"], ["node_upgrade"]) == []
    # NodeUpgrade's completion (node_gate step=finish) starts ImageCleanup
    assert tags(phase_chain("node_upgrade", ["all"], [])) == ["image_cleanup"]
    assert phase_chain("node_upgrade", ["node_upgrade"], []) == []


def test_only_what_the_tags_select_up_to_the_first_phase_left_out() -> None:
    assert tags(phase_chain("iso_download", ["iso_download", "repo_create"], [])) == [
        "repo_create"]
    assert phase_chain("iso_download", ["iso_download"], []) == []
    assert tags(phase_chain("iso_download", ["all"], ["metadata_populate"])) == [
        "repo_create"]
    assert phase_chain("iso_download", ["untagged"], []) == []
    assert phase_chain("iso_download", ["all"], ["tagged"]) == []
    assert tags(phase_chain("repo_create", ["tagged"], [])) == [
        "metadata_populate", "image_preload", "cluster_upgrade", "node_upgrade", "image_cleanup"]


def test_options_go_with_their_phase() -> None:
    out = phase_chain("metadata_populate", ["all"], [],
                      {"image_preload": {"job_deadline_seconds": 60}})
    assert out[:2] == [{"phase": "image_preload", "job_deadline_seconds": 60},
                       {"phase": "cluster_upgrade"}]


@pytest.mark.parametrize("args", [("nope", ["all"], []), ("iso_download", "all", []),
                                  ("iso_download", ["all"], [], ["not", "a", "dict"])])
def test_bad_input_is_refused(args: tuple[object, ...]) -> None:
    with pytest.raises(AnsibleFilterError):
        phase_chain(*args)   # type: ignore[arg-type]
