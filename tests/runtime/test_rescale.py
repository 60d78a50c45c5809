"""The pure parts of rescaling state (runtime/spark/rescale.py): which partition count the restored
hot dir pins, what is cleaned before Spark's repartition, and how Spark's refusal is reported.
Spark itself: tests/runtime/test_rescale_spark.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkpoint.runtime.service.supervisor import NOT_RETRIED
from sparkpoint.runtime.spark.rescale import (
    RescaleError,
    clean_for_repartition,
    drop_unused_partitions,
    needed,
    recorded_partitions,
    repartition,
)


def _offsets(partitions: int) -> str:
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {"spark.sql.shuffle.partitions": str(partitions)}}
    return f"v1\n{json.dumps(meta)}\n{{\"0\":5}}"


def hot_dir(tmp_path: Path, *, offsets: dict[int, int], commits: list[int], state: bool = True) -> Path:
    hot = tmp_path / "hot"
    (hot / "offsets").mkdir(parents=True)
    (hot / "commits").mkdir()
    for batch, partitions in offsets.items():
        (hot / "offsets" / str(batch)).write_text(_offsets(partitions))
        (hot / "offsets" / f".{batch}.crc").write_bytes(b"crc")
    for batch in commits:
        (hot / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
        (hot / "commits" / f".{batch}.crc").write_bytes(b"crc")
    if state:
        (hot / "state" / "0" / "0").mkdir(parents=True)
    return hot


def test_the_newest_offset_log_entry_pins_the_partitions(tmp_path: Path) -> None:
    hot = hot_dir(tmp_path, offsets={0: 4, 1: 4, 2: 2}, commits=[0, 1, 2])
    assert recorded_partitions(hot) == 2
    assert needed(hot, 2) is None and needed(hot, 6) == 2


def test_nothing_to_rescale_without_state_or_history(tmp_path: Path) -> None:
    assert recorded_partitions(hot_dir(tmp_path / "a", offsets={0: 4}, commits=[0], state=False)) is None
    assert needed(tmp_path / "nothing", 2) is None  # a fresh start
    hot = hot_dir(tmp_path / "b", offsets={0: 4}, commits=[0])
    (hot / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0}\n{}')  # a conf-less entry (older Spark)
    assert needed(hot, 2) is None


def test_cleaning_drops_uncommitted_offsets_and_orphaned_crc_files(tmp_path: Path) -> None:
    hot = hot_dir(tmp_path, offsets={0: 4, 1: 4, 2: 4, 3: 4}, commits=[0, 1])
    (hot / "offsets" / ".7.crc").write_bytes(b"crc")  # its offset file was removed by hand
    (hot / "commits" / ".5.crc").write_bytes(b"crc")
    removed = clean_for_repartition(hot)
    assert removed == ["offsets/2", "offsets/3", "offsets/.2.crc", "offsets/.3.crc", "offsets/.7.crc",
                       "commits/.5.crc"]
    assert sorted(p.name for p in (hot / "offsets").iterdir()) == [".0.crc", ".1.crc", "0", "1"]
    assert sorted(p.name for p in (hot / "commits").iterdir()) == [".0.crc", ".1.crc", "0", "1"]
    assert clean_for_repartition(hot) == []


class _Manager:
    def __init__(self, error: str | None, hot: Path):
        self.error, self.hot, self.calls = error, hot, []

    def repartition(self, location: str, partitions: int) -> None:
        self.calls.append((location, partitions))
        if self.error:
            raise RuntimeError(self.error)
        (self.hot / "offsets" / "2").write_text(_offsets(partitions))
        (self.hot / "commits" / "2").write_text("v1\n{}")


class _Spark:
    def __init__(self, manager: _Manager):
        self._streamingCheckpointManager = manager


def test_repartition_reports_from_to_seconds_and_the_batch_it_wrote(tmp_path: Path) -> None:
    hot = hot_dir(tmp_path, offsets={0: 4, 1: 4}, commits=[0, 1])
    manager = _Manager(None, hot)
    ticks = iter([10.0, 11.5])
    (hot / "state" / "0" / "3").mkdir()  # a partition of the 4 the new count does not use
    done = repartition(_Spark(manager), hot, 4, 2, clock=lambda: next(ticks))
    assert manager.calls == [(str(hot), 2)]
    assert not (hot / "state" / "0" / "3").exists()
    assert done.to_json() == {"from": 4, "to": 2, "seconds": 1.5, "batch": 2}
    assert recorded_partitions(hot) == 2


@pytest.mark.parametrize("message, reason", [
    ("[STATE_REPARTITION_INVALID_CHECKPOINT.LAST_BATCH_FAILED] The last batch 7 failed", "last-batch-failed"),
    ("[STATE_REPARTITION_INVALID_CHECKPOINT.NO_COMMITTED_BATCH] nothing", "invalid-checkpoint"),
    ("java.io.IOException: disk full", "spark"),
])
def test_sparks_refusal_is_a_rescale_error_naming_the_reason(tmp_path: Path, message: str, reason: str) -> None:
    hot = hot_dir(tmp_path, offsets={0: 4}, commits=[0])
    with pytest.raises(RescaleError) as err:
        repartition(_Spark(_Manager(message, hot)), hot, 4, 2)
    doc = err.value.to_json()
    assert (doc["from"], doc["to"], doc["reason"]) == (4, 2, reason)
    assert "from 4 to 2 partitions failed" in doc["error"] and message in doc["error"]


def test_partitions_the_count_does_not_use_are_removed(tmp_path: Path) -> None:
    hot = hot_dir(tmp_path, offsets={0: 4}, commits=[0])
    for op, part in (("0", "1"), ("0", "2"), ("0", "3"), ("1", "0"), ("1", "3")):
        (hot / "state" / op / part).mkdir(parents=True, exist_ok=True)
        (hot / "state" / op / part / "1.changelog").write_bytes(b"x")
    (hot / "state" / "0" / "_metadata").mkdir()
    assert drop_unused_partitions(hot, 2) == ["state/0/2", "state/0/3", "state/1/3"]
    assert sorted(p.name for p in (hot / "state" / "0").iterdir()) == ["0", "1", "_metadata"]
    assert drop_unused_partitions(hot, 2) == [] and drop_unused_partitions(tmp_path / "none", 2) == []


def test_a_refused_rescale_is_not_retried_in_place() -> None:
    assert 4 in NOT_RETRIED  # exit 4: the same hot dir would be refused again
