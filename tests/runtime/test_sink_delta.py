"""The Delta sink's table (kind: delta) on both store backends, read by delta-rs and by polars.

Spark's executors are stood in for by fake_write_files (Parquet parts); the Spark runs are in
test_sink_delta_spark.py. The property at the end drives the same random histories as
test_sink_lineage.py (batches, crashes between manifest and publish, restores to any checkpoint,
local restarts) and checks after every step that the Delta table holds exactly the running history.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import FencedError, write_fence
from sparkpoint.runtime.sink.delta import DeltaSink
from sparkpoint.runtime.sink.delta_table import CHECKPOINT_META
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

from .test_sink import FakeBatch, fake_write_files
from .test_sink_lineage import Model

# test_sink_lineage's actions, weighted so that most examples publish several checkpoints and then
# restore one of them (uniform choice spends a fifth of the steps on re-creating the job).
_ARGS = {"batch": st.integers(0, 3), "checkpoint": st.booleans(), "restore": st.integers(0, 50)}
ACTIONS = st.sampled_from(["batch"] * 3 + ["checkpoint"] * 3 + ["restore"] * 2 + ["restart_local", "recreate"]).flatmap(
    lambda kind: st.tuples(st.just(kind), _ARGS.get(kind, st.just(0))))


def _sink(store, job, tmp_path: Path, attempt: int, journal: SinkJournal | None = None,
          incarnation: str = "uid-1") -> DeltaSink:
    return DeltaSink(store, job, attempt=attempt, path="default", write_files=fake_write_files,
                     journal=journal or SinkJournal(tmp_path / f"journal-{attempt}"), incarnation=incarnation)


def _checkpoint(sink: DeltaSink, checkpoint_id: str, up_to_batch: int, *, publish: bool = True) -> dict:
    extra = sink.manifest_extra(up_to_batch)
    sink.upload_staged(extra)
    if publish:
        sink.publish(checkpoint_id, extra)
    return extra


def _table(sink: DeltaSink) -> DeltaTable:
    return DeltaTable(sink.location.uri, storage_options=sink.location.storage_options)


def _values(sink: DeltaSink) -> list[int]:
    return sorted(_table(sink).to_pyarrow_table().column("v").to_pylist())


def _polars_values(sink: DeltaSink) -> list[int]:
    frame = pl.read_delta(sink.location.uri, storage_options=sink.location.storage_options or None)
    return sorted(frame["v"].to_list())


def test_each_checkpoint_is_one_delta_commit_with_its_transaction(store, job, tmp_path):
    sink = _sink(store, job, tmp_path, write_fence(store, job))
    sink.resume(None, None)
    for b in range(3):
        sink.write_batch(FakeBatch([{"v": b}, {"v": 10 + b}]), b)
    _checkpoint(sink, "chk-000001", 1)
    table = _table(sink)
    assert table.version() == 0 and table.transaction_version("uid-1") == 1  # created by the first publish
    _checkpoint(sink, "chk-000002", 2)
    table = _table(sink)
    assert table.version() == 1 and table.transaction_version("uid-1") == 2
    assert table.history(1)[0][CHECKPOINT_META] == "chk-000002"
    assert _values(sink) == _polars_values(sink) == [0, 1, 2, 10, 11, 12]
    assert sorted(r["v"] for r in read_committed(store, job)) == _values(sink)  # the entries agree


def test_republish_after_a_crash_commits_once(store, job, tmp_path):
    sink = _sink(store, job, tmp_path, write_fence(store, job))
    sink.resume(None, None)
    sink.write_batch(FakeBatch([{"v": 1}]), 0)
    extra = _checkpoint(sink, "chk-000001", 0)
    version = _table(sink).version()
    sink.publish("chk-000001", extra)  # the runtime retries the publish
    # A new attempt (crash after the Delta commit, before the runtime noted it) restores and re-publishes.
    again = _sink(store, job, tmp_path, write_fence(store, job))
    again.resume("chk-000001", extra)
    assert _table(sink).version() == version
    assert _values(sink) == [1]


def test_crash_between_entry_and_delta_commit_is_committed_on_restore(store, job, tmp_path):
    sink = _sink(store, job, tmp_path, write_fence(store, job))
    sink.resume(None, None)
    sink.write_batch(FakeBatch([{"v": 1}]), 0)
    _checkpoint(sink, "chk-000001", 0)
    sink.write_batch(FakeBatch([{"v": 2}]), 1)
    extra = _checkpoint(sink, "chk-000002", 1, publish=False)
    sink._commit_checkpoint = lambda *a: None  # type: ignore[method-assign]  # crash after the entry
    sink.publish("chk-000002", extra)
    assert _values(sink) == [1]
    fresh = _sink(store, job, tmp_path, write_fence(store, job))
    fresh.resume("chk-000002", extra)
    assert _values(fresh) == [1, 2]
    assert _table(fresh).transaction_version("uid-1") == 2


def test_restore_to_an_older_checkpoint_returns_the_table_first(store, job, tmp_path):
    sink = _sink(store, job, tmp_path, write_fence(store, job))
    sink.resume(None, None)
    sink.write_batch(FakeBatch([{"v": 0}]), 0)
    old = _checkpoint(sink, "chk-000001", 0)
    sink.write_batch(FakeBatch([{"v": 1}]), 1)
    _checkpoint(sink, "chk-000002", 1)
    assert _values(sink) == [0, 1]
    restored = _sink(store, job, tmp_path, write_fence(store, job))
    restored.resume("chk-000001", old)  # a restore to the older point
    table = _table(restored)
    assert _values(restored) == [0]
    assert table.history(1)[0][CHECKPOINT_META] == "chk-000001"  # one commit removing the later files
    restored.write_batch(FakeBatch([{"v": 100}]), 1)  # the re-run batch 1 emits other rows
    _checkpoint(restored, "chk-000003", 1)
    assert _values(restored) == _polars_values(restored) == [0, 100]
    assert sorted(r["v"] for r in read_committed(store, job)) == [0, 100]


def test_a_fenced_attempt_never_commits_to_the_table(store, job, tmp_path):
    zombie = _sink(store, job, tmp_path, write_fence(store, job))
    zombie.resume(None, None)
    zombie.write_batch(FakeBatch([{"v": 1}]), 0)
    extra = _checkpoint(zombie, "chk-000001", 0, publish=False)
    write_fence(store, job)
    with pytest.raises(FencedError):
        zombie.publish("chk-000001", extra)
    assert not DeltaTable.is_deltatable(zombie.location.uri, storage_options=zombie.location.storage_options)


class DeltaModel(Model):
    def attempt(self, journal: SinkJournal) -> DeltaSink:  # type: ignore[override]
        return DeltaSink(self.store, self.job, attempt=write_fence(self.store, self.job), path="default",
                         journal=journal, incarnation=f"uid-{self.uid}", write_files=fake_write_files)


@settings(max_examples=60, deadline=None)
@given(st.lists(ACTIONS, min_size=1, max_size=30))
def test_table_holds_exactly_the_running_history(actions):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = DeltaModel(store=open_store(f"file://{root}/store"), job=JobRef("default", "prop"), root=root)
        for action, arg in actions:
            model.step(action, arg)
            sink = model.sink
            if not DeltaTable.is_deltatable(sink.location.uri):
                seen: list[int] = []
            else:
                seen = sorted(DeltaTable(sink.location.uri).to_pyarrow_table().column("v").to_pylist())
            assert seen == list(range(model.durable)), (action, arg)


def test_spec_kind_delta_takes_parquet_only() -> None:
    from sparkpoint.runtime.spec import job as config

    job = {"entrypoint": "examples.windowed:build"}
    assert config.parse_spec({"job": {**job, "sink": {"kind": "delta"}}}).job.sink.format == "parquet"
    with pytest.raises(config.SpecError) as err:
        config.parse_spec({"job": {**job, "sink": {"kind": "delta", "format": "jsonl"}}})
    assert "spec.job.sink: format must be parquet when kind is delta" in str(err.value)


def test_delta_location_reaches_the_store_the_runtime_opened(tmp_path) -> None:
    from sparkpoint.runtime.sink.delta_table import delta_location

    env = {"SPARKPOINT_S3_ENDPOINT": "http://minio.local:9000", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    loc = delta_location(open_store("s3://bucket-a/pre/fix", env=env), "ns/job/outputs/default")
    assert loc.uri == "s3://bucket-a/pre/fix/ns/job/outputs/default"
    assert loc.storage_options["AWS_ENDPOINT_URL"] == "http://minio.local:9000"
    assert loc.storage_options["AWS_ALLOW_HTTP"] == "true" and loc.storage_options["AWS_ACCESS_KEY_ID"] == "k"
    assert "storage_options" not in repr(loc) and "AWS_SECRET" not in repr(loc)  # credentials never logged
    assert delta_location(open_store(f"file://{tmp_path}"), "ns/job/outputs/p").uri == f"{tmp_path}/ns/job/outputs/p"
