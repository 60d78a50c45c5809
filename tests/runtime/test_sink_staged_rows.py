"""A batch is staged only when its part files hold the rows Spark counted (issue 42, finding 1).

With executors on other pods the batch folder is a shared volume, and a directory listing there (NFS)
may miss a part another node just wrote. The stand-in below writes every part and then hides one
from the driver for the first `misses` writes, as a stale listing would; the sinks must write the
batch again, never publish the short one, and fail the batch when it never comes out whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.sink.batch_files import StagedOutputIncomplete, part_files, part_rows
from sparkpoint.runtime.sink.delta import DeltaSink
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.transactional import TransactionalSink, read_committed
from sparkpoint.runtime.sink.upsert import UpsertSink, read_upserted

from .test_sink import FakeBatch, fake_write_files


class StaleListing:
    """fake_write_files, with the last part hidden from the driver on the first `misses` writes."""

    def __init__(self, misses: int):
        self.misses, self.writes = misses, 0

    def __call__(self, df: FakeBatch, directory: Path, fmt: str) -> int:
        rows = fake_write_files(df, directory, fmt)
        self.writes += 1
        if self.writes <= self.misses:
            part_files(directory)[-1].unlink()
        return rows


ROWS = [{"k": i, "v": i * 10} for i in range(6)]


def _transactional(store, job, tmp_path, write_files, cls=TransactionalSink, **kw):
    attempt = write_fence(store, job)
    return cls(store, job, attempt=attempt, path="default", write_files=write_files,
               journal=SinkJournal(tmp_path / "journal"), **kw)


def _publish(sink, checkpoint_id: str, up_to: int) -> None:
    extra = sink.manifest_extra(up_to)
    sink.upload_staged(extra)
    sink.publish(checkpoint_id, extra)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_transactional_sink_rewrites_a_batch_whose_listing_missed_a_part(store, job, tmp_path, fmt):
    writer = StaleListing(misses=2)
    sink = _transactional(store, job, tmp_path, writer, fmt=fmt)
    assert sink.write_batch(FakeBatch(ROWS), 0) == 6
    assert writer.writes == 3  # two short writes, then a whole one
    assert sink.short_writes == 2  # what sparkpoint_sink_short_writes_total exports
    entry = sink.journal.entry(0)
    assert entry is not None and entry["rows"] == 6
    staged = tmp_path / "journal" / f"batch-0-{entry['run']}"
    assert sum(part_rows(p, fmt) for p in part_files(staged)) == 6
    _publish(sink, "chk-000001", 0)
    assert sorted(r["k"] for r in read_committed(store, job)) == list(range(6))


def test_a_batch_that_never_comes_out_whole_fails_and_stages_nothing(store, job, tmp_path):
    writer = StaleListing(misses=99)
    sink = _transactional(store, job, tmp_path, writer)
    with pytest.raises(StagedOutputIncomplete, match="held 3 rows, Spark counted 6"):
        sink.write_batch(FakeBatch(ROWS), 0)
    assert writer.writes == 3
    assert sink.journal.entry(0) is None
    assert sink.journal.staged_bytes() == 0


def test_delta_sink_commits_every_row_after_a_missed_part(store, job, tmp_path):
    sink = _transactional(store, job, tmp_path, StaleListing(misses=1), cls=DeltaSink, incarnation="uid-1")
    assert sink.write_batch(FakeBatch(ROWS), 0) == 6
    _publish(sink, "chk-000001", 0)
    from deltalake import DeltaTable

    table = DeltaTable(sink.location.uri, storage_options=sink.location.storage_options)
    assert sorted(table.to_pyarrow_table().column("k").to_pylist()) == list(range(6))


def test_upsert_sink_stores_every_row_after_a_missed_part(store, job, tmp_path):
    writer = StaleListing(misses=1)
    sink = UpsertSink(store, job, path="agg", key_columns=["k"], staging_dir=tmp_path / "up", write_files=writer)
    assert sink.write_batch(FakeBatch(ROWS), 0) == 6
    assert writer.writes == 2 and sink.short_writes == 1
    assert sorted(row["k"] for row in read_upserted(store, job, "agg", ["k"]).values()) == list(range(6))


@pytest.mark.parametrize("kind", ["transactional", "upsert"])
def test_a_retry_writes_a_folder_of_its_own_when_the_short_one_stays(store, job, tmp_path, monkeypatch, kind):
    """On NFS the short try's folder may not go away: its delete lists the folder as stale as the check
    did, removes what it sees, and the folder, still holding the hidden part, stays. Spark never
    writes into an existing folder (fake_write_files refuses one as Spark's errorifexists does), so the
    retry must write elsewhere; before, it failed the batch on the leftover folder."""
    import sparkpoint.runtime.sink.batch_files as batch_files

    stays: list[Path] = []
    real_rmtree = batch_files.shutil.rmtree

    def stale_rmtree(path, ignore_errors=False):
        if Path(path).name.startswith((".tmp-batch-", "batch-")) and Path(path).exists() and not stays:
            stays.append(Path(path))  # the first short try's folder: its delete leaves it in place
            return
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(batch_files.shutil, "rmtree", stale_rmtree)
    writer = StaleListing(misses=1)
    if kind == "transactional":
        sink = _transactional(store, job, tmp_path, writer)
        assert sink.write_batch(FakeBatch(ROWS), 0) == 6
        _publish(sink, "chk-000001", 0)
        assert sorted(r["k"] for r in read_committed(store, job)) == list(range(6))
    else:
        up = UpsertSink(store, job, path="agg", key_columns=["k"], staging_dir=tmp_path / "up", write_files=writer)
        assert up.write_batch(FakeBatch(ROWS), 0) == 6
        assert sorted(row["k"] for row in read_upserted(store, job, "agg", ["k"]).values()) == list(range(6))
    assert writer.writes == 2 and stays


def test_the_short_writes_metric_reads_the_sinks_count():
    from sparkpoint.runtime.service.metrics import RuntimeMetrics

    metrics, counted = RuntimeMetrics(), {"n": 0}
    assert b"sparkpoint_sink_short_writes_total 0.0" in metrics.render()  # before the sink is there
    metrics.sink_short_writes.set_function(lambda: counted["n"])
    counted["n"] = 2
    assert b"sparkpoint_sink_short_writes_total 2.0" in metrics.render()


def test_the_console_sink_prints_every_row_after_a_missed_part(tmp_path):
    import io

    from sparkpoint.runtime.sink.console import ConsoleSink

    out, writer = io.StringIO(), StaleListing(misses=1)
    sink = ConsoleSink(tmp_path / "console", out=out, write_files=writer)
    assert sink.write_batch(FakeBatch(ROWS), 0) == 6
    lines = out.getvalue().splitlines()
    assert lines[0] == "# batch 0: 6 rows" and len(lines) == 1 + 6 and writer.writes == 2
