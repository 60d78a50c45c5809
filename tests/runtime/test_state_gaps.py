"""state_gaps on generated file sets (issue 42, finding 2): the freeze and local recovery refuse a
listed state set exactly when a restart from it could not replay to the committed version.

The oracle replays as a restart does: from the newest snapshot <= V (or the empty store) one
changelog at a time; a store whose next version is not listed stops short of V."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint.state_gaps import chain_gaps, state_gaps


def _replays_to(names: set[str], target: int) -> bool:
    version = max((int(n.split(".")[0]) for n in names if n.endswith(".zip") and int(n.split(".")[0]) <= target),
                  default=0)
    while version < target:
        if f"{version + 1}.changelog" not in names:
            return False
        version += 1
    return True


@st.composite
def listed_stores(draw):
    """A query's stores as Spark wrote them (changelogs 1..V+extra, some snapshots), then a listing
    that leaves some files out, and possibly whole partitions."""
    partitions = draw(st.integers(1, 4))
    committed = draw(st.integers(0, 12))
    target = committed + 1
    written: dict[str, set[str]] = {}
    for p in range(partitions):
        top = target + draw(st.integers(0, 2))  # the running batch may have written its version already
        files = {f"{v}.changelog" for v in range(1, top + 1)}
        files |= {f"{v}.zip" for v in draw(st.sets(st.integers(1, top), max_size=3))}
        written[f"state/0/{p}"] = files
    listed = {}
    for rel, files in written.items():
        if draw(st.integers(0, 9)) == 0:
            continue  # the whole partition's directory missed
        dropped = draw(st.sets(st.sampled_from(sorted(files)), max_size=3)) if draw(st.booleans()) else set()
        listed[rel] = files - dropped
    return partitions, target, listed


@settings(max_examples=300, deadline=None)
@given(listed_stores())
def test_refused_exactly_when_a_restart_could_not_replay(case):
    partitions, target, listed = case
    gaps = state_gaps(listed, target, partitions=partitions, operators=["0"], batch=target - 1)
    restartable = (all(f"state/0/{p}" in listed and listed[f"state/0/{p}"] for p in range(partitions))
                   and all(_replays_to(names, target) for names in listed.values() if names))
    assert (gaps == []) == restartable, (gaps, listed)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.sets(st.integers(1, 30), max_size=5), st.data())
def test_a_whole_listing_always_restarts_and_a_missing_needed_changelog_never_does(target, snaps, data):
    names = {f"{v}.changelog" for v in range(1, target + 1)} | {f"{v}.zip" for v in snaps}
    assert chain_gaps(names, target)[1] == []
    base = max((s for s in snaps if s <= target), default=0)
    if base < target:  # a changelog the restart replays: its absence is a gap, named
        lost = data.draw(st.integers(base + 1, target))
        assert chain_gaps(names - {f"{lost}.changelog"}, target) == (base, [lost])
    if base:  # a changelog before the snapshot is not needed
        assert chain_gaps(names - {f"{base}.changelog"}, target)[1] == []


def test_uuid_named_stores_are_left_to_the_lineage_walk_and_unknown_partition_counts_unchecked():
    v2 = {"state/0/0": ["2_0b8e5c9e-1f3a-4c1d-9a57-3d6c2f1e0a11.changelog"]}
    assert state_gaps(v2, 5) == []
    assert state_gaps({"state/0/0": ["1.changelog", "2.changelog"]}, 2, partitions=None, operators=["0"]) == []
    assert state_gaps({"state/0/0": ["1.changelog"]}, 1, partitions=2, operators=["0"], batch=0) == [
        "state/0: the offsets log of batch 0 names 2 state partitions and partitions [1] have no state files"]
    # A store with several named stores per partition (a stream-stream join): any one counts.
    assert state_gaps({"state/0/0/left": ["1.delta"], "state/0/1/left": ["1.delta"]}, 1, partitions=2,
                      operators=["0"]) == []
