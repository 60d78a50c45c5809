"""Executor-side state against real Spark and a real MinIO, no cluster (issue 42; docs/design.md §4,
"Executor-side state").

A real stateful query (RocksDB, 4 state partitions) runs on a local checkpoint location and stops. Its
state partitions are then split between two "executor disks" (two directories; executor b also holds a
complete copy of one of a's partitions, as a retried task leaves), the driver keeps the rest. Each
executor prepares (freeze, hash) and uploads with the executor store role; the driver merges and commits.
The merged manifest lists exactly the files, sizes and digests the single-process path (today's freeze
of the whole hot dir) commits for the same batch, and a restore of it resumes the query with the
failure-free run's output. An executor that lost a partition (a deleted directory, a missing changelog)
fails that checkpoint by name, before anything is written: the previous checkpoint stays the newest."""

from __future__ import annotations

import secrets
import shutil
import uuid
from pathlib import Path

import pytest
from minio import MinioAdmin
from minio.credentials import StaticProvider

from harness.runtime_job import wait_until
from sparkpoint.runtime.checkpoint import CheckpointWriter, latest_checkpoint, list_checkpoint_ids, restore
from sparkpoint.runtime.checkpoint.freeze import check_restartable, freeze, partition_dir_of
from sparkpoint.runtime.executor_state import (
    Prepared,
    UncoveredPartitions,
    UploadAck,
    checkpoint_with_executors,
    expected_operators,
    prepare,
    prepare_request,
    upload,
)
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.access_policy import job_policy
from sparkpoint.runtime.store.layout import objects_prefix, pending_prefix
from sparkpoint.runtime.store.s3 import S3Store

pytestmark = [pytest.mark.spark, pytest.mark.minio, pytest.mark.slow, pytest.mark.timeout(1200)]

TEST_BUCKET = "sparkpoint-test"  # the session bucket of tests/conftest.py
PARTITIONS = 4
SINGLE, EXECS = JobRef("default", "single-process"), JobRef("default", "executors")


class LocalExecutor:
    """An executor reached in-process (the transport is the next piece): its prepared report, and
    uploads through its own store client, which holds the executor role's credentials."""

    def __init__(self, prepared: Prepared, store: ObjectStore):
        self.prepared, self.store, self.acks = prepared, store, []  # type: list[UploadAck]

    @property
    def report(self):  # type: ignore[no-untyped-def]
        return self.prepared.report

    def upload(self, checkpoint: str, shas: list[str]) -> UploadAck:
        ack = upload(self.prepared, self.store, EXECS, checkpoint, shas)
        self.acks.append(ack)
        return ack


def _query(spark, checkpoint: Path, out: dict, until: int, wait_for=None) -> None:  # type: ignore[no-untyped-def]
    from sparkpoint.examples.windowed_aggregation import build

    df = build(spark, rows_per_batch=500, keys=50, window="3 seconds", watermark="1 seconds")
    q = (df.writeStream.outputMode("append").option("checkpointLocation", str(checkpoint))
         .foreachBatch(lambda d, b: out.__setitem__(b, sorted(map(str, d.collect()))))
         .trigger(processingTime="200 milliseconds").start())
    try:
        wait_until(lambda: max(out, default=-1) >= until and (wait_for is None or wait_for()), 300, f"batch {until}")
    finally:
        q.stop()
        # The state stores' maintenance (snapshots, cleanup) outlives the query: stop it, so that the
        # checkpoint location is quiet while it is copied and frozen twice (a run here copied a temp file
        # the maintenance removed meanwhile).
        spark._jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()


# Format 2 (the one the mode is to require) runs in CI; both run in the slow tier.
@pytest.fixture(scope="module", params=["1", pytest.param("2", marks=pytest.mark.ci_sample)],
                ids=["format-v1", "format-v2"])
def ran(spark, tmp_path_factory, request):  # type: ignore[no-untyped-def]
    """The stopped query's hot dir (with RocksDB snapshot zips and their SSTs), its committed batch C,
    and the failure-free output of batches C+1..C+5 (an untouched copy resumed). State checkpoint
    format 1 and 2 (uuid-named files placed by the lineage the driver ships)."""
    spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", request.param)
    spark.conf.set("spark.sql.shuffle.partitions", str(PARTITIONS))
    spark.conf.set("spark.sql.streaming.stateStore.minDeltasForSnapshot", "3")  # zips (and SSTs) soon
    base = tmp_path_factory.mktemp("exec-state")
    hot, out = base / "hot", {}
    _query(spark, hot, out, 8, wait_for=lambda: any((hot / "state").glob("0/*/*.zip")))
    truth, expected = base / "truth", {}
    shutil.copytree(hot, truth)
    from sparkpoint.runtime.checkpoint.freeze import latest_committed_batch

    batch = latest_committed_batch(hot)
    _query(spark, truth, expected, batch + 5)
    return {"base": base, "hot": hot, "batch": batch, "expected": expected, "format": request.param}


@pytest.fixture(scope="module")
def stores(minio_server, ran):  # type: ignore[no-untyped-def]
    """The admin's store (the driver's role here) and an executor-role store for EXECS, on a prefix of
    their own for each run of the query."""
    prefix = f"exec-state-{uuid.uuid4().hex[:8]}"
    host = minio_server.endpoint.split("://", 1)[1]
    admin = MinioAdmin(endpoint=host, credentials=StaticProvider(minio_server.access_key, minio_server.secret_key),
                       secure=False)
    admin.policy_add(prefix, policy=job_policy(TEST_BUCKET, prefix, EXECS, "executor"))
    access, secret = f"executor{secrets.token_hex(4)}", secrets.token_urlsafe(24)
    admin.user_add(access, secret)
    admin.policy_set(prefix, user=access)
    driver = S3Store(minio_server.endpoint, TEST_BUCKET, prefix, minio_server.access_key, minio_server.secret_key,
                     region="us-east-1")
    executor = S3Store(minio_server.endpoint, TEST_BUCKET, prefix, access, secret, region="us-east-1")
    return driver, executor


def _split(hot: Path, dest: Path, assign: dict[str, list[str]]) -> dict[str, Path]:
    """Hard-link copies of the hot dir: the driver's share (no partition directory) and each executor's
    partition directories (its own checkpoint location, holding state/<op>/<partition> only)."""
    roots = {"driver": dest / "driver"} | {name: dest / name for name in assign}
    shutil.copytree(hot, roots["driver"], copy_function=__import__("os").link,
                    ignore=lambda d, names: [n for n in names if partition_dir_of(
                        f"{Path(d).relative_to(hot).as_posix()}/{n}")])
    for name, parts in assign.items():
        for part in parts:
            shutil.copytree(hot / part, roots[name] / part, copy_function=__import__("os").link)
    # Spark's driver writes the state schema file into partition 0's _metadata, on its own disk (seen on
    # local-cluster: tests/runtime/test_executor_restore_spark.py); the executors' copies never read it.
    for meta in hot.glob("state/*/*/_metadata"):
        shutil.copytree(meta, roots["driver"] / meta.relative_to(hot), copy_function=__import__("os").link)
    return roots


def _entries(manifest):  # type: ignore[no-untyped-def]
    return [(e.path, e.size, e.sha256, e.crc32) for e in manifest.files]


def _checkpoint(roots: dict[str, Path], work: Path, batch: int, writer: CheckpointWriter, executor_store: ObjectStore,
                names: list[str]):  # type: ignore[no-untyped-def]
    frozen = freeze(roots["driver"], work / "frozen-driver", scope="driver")
    assert frozen.batch_id == batch
    request = prepare_request(roots["driver"], batch)  # with format v2, the committed uuids
    handles = [LocalExecutor(prepare(roots[n], request, work / f"frozen-{n}", executor=n), executor_store) for n in names]
    partitions, operators = expected_operators(roots["driver"], batch)
    result = checkpoint_with_executors(writer, work / "frozen-driver", handles, batch=batch, partitions=partitions,
                                       operators=operators)
    return result, handles


def test_the_executors_merged_checkpoint_is_the_single_process_one_and_restores_exactly(ran, stores, spark, tmp_path):
    driver_store, executor_store = stores
    hot, batch = ran["hot"], ran["batch"]
    single = freeze(hot, tmp_path / "frozen-single")
    assert single.batch_id == batch
    m1 = CheckpointWriter(driver_store, SINGLE, attempt=0, job_uid="u1", reuse_window_seconds=0).take_checkpoint(
        tmp_path / "frozen-single", batch_id=batch).manifest
    ssts = [p for p, *_ in _entries(m1) if "/SSTs/" in p]
    assert ssts, "the query wrote no RocksDB snapshot: the SST path was not exercised"
    versioned = [Path(p).name for p, *_ in _entries(m1) if p.endswith((".changelog", ".zip"))]
    assert versioned and all(("_" in name) == (ran["format"] == "2") for name in versioned), versioned

    parts = sorted({partition_dir_of(p) for p, *_ in _entries(m1)} - {None})
    assert len(parts) == PARTITIONS, parts
    # b also holds a complete copy of a's first partition: a retried task's copy, the same bytes
    assign = {"a": parts[0::2], "b": parts[1::2] + parts[:1]}
    roots = _split(hot, tmp_path / "disks", assign)
    writer = CheckpointWriter(driver_store, EXECS, attempt=0, job_uid="u1", reuse_window_seconds=0)
    result, handles = _checkpoint(roots, tmp_path, batch, writer, executor_store, ["a", "b"])
    m2 = result.manifest
    assert _entries(m2) == _entries(m1)
    assert m2.batch_id == batch and m2.id == latest_checkpoint(driver_store, EXECS).id

    # Every state object came from the executors (under their role), every other from the driver.
    by_executors = {sha for h in handles for ack in h.acks for sha in ack.uploaded}
    # (a partition's _metadata, the schema file, is the driver's: Spark's driver writes it)
    drivers = {p for p, *_ in _entries(m2) if not partition_dir_of(p) or p.split("/")[3] == "_metadata"}
    state_shas = {sha for p, _, sha, _ in _entries(m2) if p not in drivers}
    assert by_executors == state_shas - {sha for p, _, sha, _ in _entries(m2) if p in drivers}
    held = {i.key.rsplit("/", 1)[-1] for i in driver_store.list(objects_prefix(EXECS))}
    assert {sha for _, _, sha, _ in _entries(m2)} <= held
    assert not list(driver_store.list(pending_prefix(EXECS)))

    restored = tmp_path / "restored"
    restore(driver_store, EXECS, restored)
    assert check_restartable(restored) == batch
    resumed: dict[int, list[str]] = {}
    _query(spark, restored, resumed, batch + 5)
    assert min(resumed) == batch + 1
    for b in range(batch + 1, batch + 6):
        assert resumed[b] == ran["expected"][b], b


def test_an_executor_that_lost_a_partition_fails_that_checkpoint_and_the_previous_stays_newest(ran, stores, tmp_path):
    driver_store, executor_store = stores
    hot, batch = ran["hot"], ran["batch"]
    job = JobRef("default", f"lost-{uuid.uuid4().hex[:6]}")
    writer = CheckpointWriter(driver_store, job, attempt=0, job_uid="u1", reuse_window_seconds=0)
    parts = [f"state/0/{p}" for p in range(PARTITIONS)]
    roots = _split(hot, tmp_path / "disks", {"a": parts[0::2], "b": parts[1::2]})
    frozen = freeze(roots["driver"], tmp_path / "frozen-driver", scope="driver")
    partitions, operators = expected_operators(roots["driver"], batch)

    def attempt(name: str):  # type: ignore[no-untyped-def]
        handles = [LocalExecutor(prepare(roots[n], prepare_request(roots["driver"], batch), tmp_path / f"{name}-{n}",
                                         executor=n), driver_store) for n in ("a", "b")]
        return checkpoint_with_executors(writer, frozen_dir, handles, batch=batch, partitions=partitions,
                                         operators=operators)

    frozen_dir = tmp_path / "frozen-driver"
    assert frozen.batch_id == batch
    first = attempt("first").manifest
    # b loses the changelog (and any snapshot) of version C+1 of one partition (a gap), then a whole
    # partition's directory
    for lost in [*(roots["b"] / parts[1]).glob(f"{batch + 1}.*"), *(roots["b"] / parts[1]).glob(f"{batch + 1}_*")]:
        lost.unlink()
    with pytest.raises(UncoveredPartitions, match=rf"{parts[1]} \(b: {parts[1]}: "):
        attempt("gap")
    shutil.rmtree(roots["b"] / parts[3])
    with pytest.raises(UncoveredPartitions, match=parts[3]):
        attempt("gone")
    assert list_checkpoint_ids(driver_store, job) == [first.id]
    assert latest_checkpoint(driver_store, job).id == first.id
    assert not list(driver_store.list(pending_prefix(job)))
