"""The freeze's file selection on synthetic hot dirs (properties) and its hard-link behaviour."""

from __future__ import annotations

import json
import os
import struct
import uuid
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint.freeze import (
    FreezeError,
    check_restartable,
    freeze,
    latest_committed_batch,
    restart_set,
)


def _write(path: Path, text: str | bytes = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def lz4_file(payload: bytes) -> bytes:
    """An lz4-java block stream with one raw (uncompressed) block, as a Spark changelog is framed."""
    head = struct.Struct("<8sBiii")
    return (head.pack(b"LZ4Block", 0x10, len(payload), len(payload), 0) + payload
            + head.pack(b"LZ4Block", 0x10, 0, 0, 0))


OFFSETS = 'v1\n{"batchWatermarkMs":0}\n{"offset":1}'


def _snapshot_zip(path: Path, ssts: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"sstFiles": [{"localFileName": s, "dfsSstFileName": s, "sizeBytes": 1} for s in ssts]}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("metadata", "v1\n" + json.dumps(meta))


def make_hot_dir(root: Path, committed: int, planned: int, snapshots: set[int], versions: int) -> None:
    """A Spark-like hot dir: one operator, one partition, RocksDB changelogs + snapshot zips."""
    _write(root / "metadata", '{"id":"q"}')
    for b in range(planned + 1):
        _write(root / "offsets" / str(b), OFFSETS)
        _write(root / "offsets" / f".{b}.crc", "crc")
    for b in range(committed + 1):
        _write(root / "commits" / str(b), "v1\n{}")
    part = root / "state" / "0" / "0"
    _write(root / "state" / "0" / "_metadata" / "metadata", "v1")
    _write(part / "_metadata" / "schema", "s")
    for v in range(1, versions + 1):
        _write(part / f"{v}.changelog", lz4_file(f"c{v}".encode()))
        _write(part / f".{v}.changelog.crc", "crc")
        if v in snapshots:
            _snapshot_zip(part / f"{v}.zip", [f"{v:06d}-a.sst"])
            _write(part / "SSTs" / f"{v:06d}-a.sst", "sst")
    _write(part / "SSTs" / "999999-partial.sst", "being copied")  # referenced by no zip
    _write(part / ".tmp-123.changelog.tmp", "temp")


@settings(max_examples=60, deadline=None)
@given(committed=st.integers(0, 30), extra=st.integers(0, 2), data=st.data())
def test_restart_set_is_minimal_and_complete(tmp_path_factory, committed, extra, data):
    root = tmp_path_factory.mktemp("hot")
    versions = committed + 1 + extra  # state of the in-flight batch may already exist
    snapshots = set(data.draw(st.lists(st.integers(1, versions), max_size=6)))
    make_hot_dir(root, committed, committed + extra, snapshots, versions)
    files = set(restart_set(root, committed))
    max_v = committed + 1
    base = max((s for s in snapshots if s <= max_v), default=0)
    expected_state = {f"state/0/0/{v}.changelog" for v in range(base + 1, max_v + 1)}
    if base:
        expected_state |= {f"state/0/0/{base}.zip", f"state/0/0/SSTs/{base:06d}-a.sst"}
    state = {f for f in files if f.startswith("state/0/0/") and "_metadata" not in f}
    assert state == expected_state
    assert {f"commits/{b}" for b in range(committed + 1)} <= files
    assert not any(f.startswith("offsets/") and int(f.split("/")[1]) > committed for f in files)
    assert not any(Path(f).name.startswith(".") or f.endswith((".crc", ".tmp")) for f in files)
    assert "metadata" in files and "state/0/_metadata/metadata" in files


def test_freeze_links_and_survives_deletion(tmp_path):
    hot = tmp_path / "hot"
    make_hot_dir(hot, committed=7, planned=8, snapshots={5}, versions=9)
    result = freeze(hot, tmp_path / "frozen")
    assert result.batch_id == 7
    assert result.seconds < 0.5
    frozen = tmp_path / "frozen"
    for rel in result.files:
        assert os.stat(frozen / rel).st_ino == os.stat(hot / rel).st_ino  # hard link, not a copy
    (hot / "state/0/0/5.zip").unlink()  # Spark's maintenance deleting an old snapshot
    assert (frozen / "state/0/0/5.zip").is_file()
    assert check_restartable(frozen) == 7


def test_freeze_refuses_empty_and_broken_dirs(tmp_path):
    with pytest.raises(FreezeError, match="no committed batch"):
        freeze(tmp_path / "nothing", tmp_path / "f1")
    hot = tmp_path / "hot"
    make_hot_dir(hot, committed=3, planned=3, snapshots=set(), versions=4)
    (hot / "offsets" / "3").unlink()
    with pytest.raises(FreezeError, match="offsets/3"):
        freeze(hot, tmp_path / "f2")
    assert not (tmp_path / "f2").exists()  # a failed freeze leaves nothing behind
    with pytest.raises(FreezeError):
        check_restartable(hot)


def test_latest_committed_batch_ignores_noise(tmp_path):
    _write(tmp_path / "commits" / "4", "v1")
    _write(tmp_path / "commits" / "12", "v1")
    _write(tmp_path / "commits" / ".13.crc", "crc")
    _write(tmp_path / "commits" / "13.tmp", "v1")
    assert latest_committed_batch(tmp_path) == 12


def test_restart_check_parses_what_spark_reads(tmp_path):
    """Garbled offsets, commits, metadata, truncated changelogs and broken zips are caught up front."""
    def fresh(name: str) -> Path:
        hot = tmp_path / name
        make_hot_dir(hot, committed=7, planned=7, snapshots={5}, versions=8)
        assert check_restartable(hot) == 7
        return hot
    cases = {
        "offsets/7": (b"v1\n{\"batchWatermarkMs\":0,garbled\n{\"offset\":", "offsets/7"),
        "commits/7": (b"v1\n{not json", "commits/7"),
        "metadata": (b"", "metadata"),
        "state/0/0/8.changelog": (lz4_file(b"c8")[:-5], "truncated"),
        "state/0/0/7.changelog": (b"garbled, not an lz4 block stream", "lz4 block header"),
        "state/0/0/5.zip": (b"PK not a zip", "unreadable RocksDB snapshot"),
    }
    for rel, (content, message) in cases.items():
        hot = fresh(rel.replace("/", "-"))
        (hot / rel).write_bytes(content)
        with pytest.raises(FreezeError, match=message):
            check_restartable(hot)
    hot = fresh("next-offsets")  # a planned batch whose offsets entry is garbled: Spark re-runs it
    _write(hot / "offsets" / "8", "v1\n{}\n{broken")
    with pytest.raises(FreezeError, match="offsets/8"):
        check_restartable(hot)
    hot = fresh("other-codec")  # with another codec the changelog is not lz4-framed: not judged by it
    _write(hot / "offsets" / "7", 'v1\n{"conf":{"spark.sql.streaming.stateStore.compression.codec":"zstd"}}\n{}')
    (hot / "state/0/0/8.changelog").write_bytes(b"zstd bytes")
    assert check_restartable(hot) == 7


# --- checkpoint format v2: <version>_<uuid> files, lineage in commits/N ----------------------------
def make_v2_hot_dir(root: Path, committed: int, snapshots: set[int], partitions: int = 2) -> dict:
    """A hot dir as pyspark 4.3.0 writes it with stateStore.checkpointFormatVersion=2 (checked on a
    real run: commits are `v2` with stateUniqueIds {op: [[uuid] per partition]} of version N+1)."""
    _write(root / "metadata", '{"id":"q"}')
    _write(root / "state" / "0" / "_metadata" / "metadata", "v2")
    ids: dict[tuple[int, int], str] = {}
    for v in range(1, committed + 2):
        for p in range(partitions):
            ids[(p, v)] = u = str(uuid.uuid4())
            part = root / "state" / "0" / str(p)
            _write(part / f"{v}_{u}.changelog", lz4_file(f"p{p}v{v}".encode()))
            if v in snapshots:
                _snapshot_zip(part / f"{v}_{u}.zip", [f"{v:06d}-{u}.sst"])
                _write(part / "SSTs" / f"{v:06d}-{u}.sst", "sst")
    for b in range(committed + 1):
        _write(root / "offsets" / str(b), OFFSETS)
        unique = {"0": [[ids[(p, b + 1)]] for p in range(partitions)]}
        _write(root / "commits" / str(b), "v2\n" + json.dumps({"nextBatchWatermarkMs": 0, "stateUniqueIds": unique}))
    return ids


def test_v2_follows_the_committed_lineage_past_a_stray_snapshot(tmp_path):
    hot = tmp_path / "hot"
    ids = make_v2_hot_dir(hot, committed=9, snapshots={5})
    # An abandoned re-run of batch 8 (never committed) left version 9 and 10 under other uuids,
    # including a snapshot zip: by version alone it would be the newest snapshot.
    stray = str(uuid.uuid4())
    part = hot / "state/0/0"
    _snapshot_zip(part / f"9_{stray}.zip", [f"000009-{stray}.sst"])
    _write(part / "SSTs" / f"000009-{stray}.sst", "stray")
    _write(part / f"10_{stray}.changelog", lz4_file(b"stray"))
    files = set(restart_set(hot, 9))
    for p in (0, 1):
        expected = {f"state/0/{p}/5_{ids[(p, 5)]}.zip", f"state/0/{p}/SSTs/000005-{ids[(p, 5)]}.sst"}
        expected |= {f"state/0/{p}/{v}_{ids[(p, v)]}.changelog" for v in range(6, 11)}
        got = {f for f in files if f.startswith(f"state/0/{p}/")}
        assert got == expected, p
    assert not any(stray in f for f in files)
    result = freeze(hot, tmp_path / "frozen")
    assert check_restartable(tmp_path / "frozen") == result.batch_id == 9


def test_v2_without_a_snapshot_keeps_every_changelog_and_refuses_what_it_cannot_place(tmp_path):
    hot = tmp_path / "hot"
    ids = make_v2_hot_dir(hot, committed=3, snapshots=set(), partitions=1)
    assert {f for f in restart_set(hot, 3) if f.startswith("state/0/0/")} == {
        f"state/0/0/{v}_{ids[(0, v)]}.changelog" for v in range(1, 5)}
    # The changelog the commit log names for version 3 is gone: refuse instead of skipping it.
    (hot / f"state/0/0/3_{ids[(0, 3)]}.changelog").unlink()
    with pytest.raises(FreezeError, match="version 3 of the committed lineage"):
        freeze(hot, tmp_path / "f1")
    # uuid-named files but a commit log without stateUniqueIds (purged or rewritten): refuse.
    hot2 = tmp_path / "hot2"
    make_v2_hot_dir(hot2, committed=3, snapshots=set(), partitions=1)
    _write(hot2 / "commits" / "3", 'v1\n{"nextBatchWatermarkMs":0}')
    with pytest.raises(FreezeError, match="records no state unique id"):
        freeze(hot2, tmp_path / "f2")
    # A tag that is not a uuid: not a format the freeze knows.
    hot3 = tmp_path / "hot3"
    make_hot_dir(hot3, committed=2, planned=2, snapshots=set(), versions=3)
    _write(hot3 / "state/0/0/3_strange.changelog", lz4_file(b"x"))
    with pytest.raises(FreezeError, match="unknown name tag"):
        freeze(hot3, tmp_path / "f3")


# A listing that misses files (an NFS directory listing is not covered by close-to-open
# consistency; a file lost or purged) must fail the freeze, not complete a checkpoint that cannot
# restart (issue 42). The same checks guard local recovery.

def test_freeze_refuses_a_store_without_the_committed_version(tmp_path):
    hot = tmp_path / "hot"
    make_hot_dir(hot, committed=5, planned=5, snapshots={2}, versions=6)
    (hot / "state/0/0/6.changelog").unlink()  # version C+1 = 6 not seen
    with pytest.raises(FreezeError, match=r"state/0/0: state version 6 .* versions 6 are not there"):
        freeze(hot, tmp_path / "f")
    assert not (tmp_path / "f").exists()
    with pytest.raises(FreezeError, match="versions 6"):
        check_restartable(hot)


def test_freeze_refuses_a_gap_in_the_deltas_after_the_snapshot(tmp_path):
    hot = tmp_path / "hot"
    make_hot_dir(hot, committed=8, planned=8, snapshots={3}, versions=9)
    (hot / "state/0/0/5.changelog").unlink()
    (hot / "state/0/0/7.changelog").unlink()
    with pytest.raises(FreezeError, match=r"after snapshot 3, and versions 5, 7 are not"):
        freeze(hot, tmp_path / "f")
    with pytest.raises(FreezeError, match="versions 5, 7"):
        check_restartable(hot)
    # Deltas before the snapshot a restart starts from are not needed: their loss is fine.
    hot2 = tmp_path / "hot2"
    make_hot_dir(hot2, committed=8, planned=8, snapshots={3}, versions=9)
    (hot2 / "state/0/0/2.changelog").unlink()
    assert freeze(hot2, tmp_path / "f2").batch_id == 8


def test_freeze_refuses_a_partition_without_a_store(tmp_path):
    hot = tmp_path / "hot"
    make_hot_dir(hot, committed=4, planned=4, snapshots=set(), versions=5)
    offsets = 'v1\n{"batchWatermarkMs":0,"conf":{"spark.sql.shuffle.partitions":"2"}}\n{"offset":1}'
    for b in range(5):
        _write(hot / "offsets" / str(b), offsets)
    with pytest.raises(FreezeError, match=r"names 2 state partitions and partitions \[1\] have no state"):
        freeze(hot, tmp_path / "f")
    with pytest.raises(FreezeError, match="partitions \\[1\\]"):
        check_restartable(hot)
    for v in range(1, 6):  # partition 1's store appears: the set is whole
        _write(hot / "state/0/1" / f"{v}.changelog", lz4_file(f"c{v}".encode()))
    assert freeze(hot, tmp_path / "f").batch_id == 4
    assert check_restartable(tmp_path / "f") == 4
