"""The freeze's file selection on synthetic hot dirs (properties) and its hard-link behaviour."""

from __future__ import annotations

import json
import os
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


def _write(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _snapshot_zip(path: Path, ssts: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"sstFiles": [{"localFileName": s, "dfsSstFileName": s, "sizeBytes": 1} for s in ssts]}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("metadata", "v1\n" + json.dumps(meta))


def make_hot_dir(root: Path, committed: int, planned: int, snapshots: set[int], versions: int) -> None:
    """A Spark-like hot dir: one operator, one partition, RocksDB changelogs + snapshot zips."""
    _write(root / "metadata", '{"id":"q"}')
    for b in range(planned + 1):
        _write(root / "offsets" / str(b), "v1\n{}")
        _write(root / "offsets" / f".{b}.crc", "crc")
    for b in range(committed + 1):
        _write(root / "commits" / str(b), "v1\n{}")
    part = root / "state" / "0" / "0"
    _write(root / "state" / "0" / "_metadata" / "metadata", "v1")
    _write(part / "_metadata" / "schema", "s")
    for v in range(1, versions + 1):
        _write(part / f"{v}.changelog", f"c{v}")
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
