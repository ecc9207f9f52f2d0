"""Replaying the simulator's records (coordinator_core.loader.replay) gives back its groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator_core.loader.replay import replay
from coordinator_core.loader.snapshot import new_snapshot
from pipelines.inputs.scenario_files import load_scenario, shipped_scenarios


@pytest.mark.parametrize("path", shipped_scenarios(), ids=lambda p: p.stem)
def test_replay_of_a_scenarios_records_matches_the_simulators_final_group(path: Path) -> None:
    result = load_scenario(str(path)).run()
    gid = result.scenario.expect["group"]
    group = result.sim.coordinator.groups[gid]
    records = [r for r in result.records if r.group == gid]
    snap = replay(new_snapshot(gid), records, assume_log_start=True).snapshot
    assert str(snap.state) == group.state
    assert snap.generation == group.generation
    assert snap.leader == (group.leader if group.members else None)
    assert sorted(m.member_id for m in snap.members) == sorted(group.members)
    assert {tp: v.offset for tp, v in ((tp, snap.offset(*tp)) for tp in snap.offsets) if v} == {
        tp: e[0] for tp, e in group.offsets.items()
    }
