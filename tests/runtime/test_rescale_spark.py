"""Rescaling state with real Spark and MinIO (issue 26): a windowed aggregation checkpointed at 4
shuffle partitions restarts with 2 (a new pod: remote restore), then with 6 (the same pod: local
recovery, its hot dir carrying an uncommitted offset and an orphaned `.crc`, which repartition
would refuse). Each start repartitions the state before the query runs and checkpoints at once;
the committed output equals the failure-free run's, every row exactly once."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.spark.rescale import recorded_partitions
from sparkpoint.runtime.store import JobRef, open_store

from .test_recovery_spark import TEST_BUCKET, log_lines

pytestmark = [pytest.mark.spark, pytest.mark.minio, pytest.mark.slow, pytest.mark.timeout(900)]


def _write(job: WindowedJob, path: Path, store_url: str, partitions: int) -> Path:
    doc = job.spec(store_url)
    doc["spec"]["spark"]["shufflePartitions"] = partitions
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _run(job_file: Path, pod: Path, log: Path, until: int, env: dict[str, str]) -> list[dict]:
    proc = RuntimeProcess(job_file, pod, log, until_batch=until, env=env).start()
    assert proc.wait(600) == 0, log.read_text()[-4000:]
    return log_lines(log)


def _partitions(hot: Path) -> set[str]:
    return {p.name for p in (hot / "state" / "0").iterdir() if p.name.isdigit()}


def _rescaled(lines: list[dict]) -> dict:
    found = [entry for entry in lines if entry.get("msg") == "state rescaled"]
    assert len(found) == 1, [entry.get("msg") for entry in lines]
    return found[0]


def test_rescale_4_to_2_to_6_keeps_state_and_output_exactly_once(minio_server, tmp_path: Path) -> None:
    job = WindowedJob(name="rescale", rows_per_batch=500, keys=200, total_batches=24, trigger="300ms",
                      checkpoint_interval="2s")
    store_url = f"s3://{TEST_BUCKET}/rescale-{uuid.uuid4().hex[:10]}"
    env = minio_server.env()
    store, ref = open_store(store_url, env=env), JobRef("default", job.name)

    lines = _run(_write(job, tmp_path / "p4.yaml", store_url, 4), tmp_path / "pod1", tmp_path / "p4.log", 8, env)
    assert not [e for e in lines if e.get("msg") == "state rescaled"]
    assert recorded_partitions(tmp_path / "pod1" / "hot") == 4

    # 4 -> 2 on a new pod: remote restore of the drain's checkpoint, then Spark's repartition.
    lines = _run(_write(job, tmp_path / "p2.yaml", store_url, 2), tmp_path / "pod2", tmp_path / "p2.log", 16, env)
    done = _rescaled(lines)
    assert (done["from"], done["to"]) == (4, 2) and done["seconds"] > 0
    running = [e for e in lines if e.get("msg") == "query running"][0]
    assert running["restore"] == "remote"
    assert done["batch"] == running["batch"] + 1  # repartition wrote one batch without input
    hot = tmp_path / "pod2" / "hot"
    assert recorded_partitions(hot) == 2
    assert _partitions(hot) == {"0", "1"}  # the old partitions 2 and 3 are not carried on
    # The checkpoint taken at once holds the repartitioned batch.
    manifests = [load_manifest(store, ref, i) for i in list_checkpoint_ids(store, ref)]
    assert any(m.batch_id == done["batch"] for m in manifests), [m.batch_id for m in manifests]

    # 2 -> 6 on the same pod (local recovery), its hot dir as a crash may leave it: an offset past
    # the newest commit and a .crc sidecar whose file is gone.
    committed = max(int(p.name) for p in (hot / "commits").iterdir() if p.name.isdigit())
    (hot / "offsets" / str(committed + 1)).write_text((hot / "offsets" / str(committed)).read_text())
    (hot / "offsets" / f".{committed + 2}.crc").write_bytes(b"\0" * 12)
    lines = _run(_write(job, tmp_path / "p6.yaml", store_url, 6), tmp_path / "pod2", tmp_path / "p6.log",
                 job.until_batch, env)
    done = _rescaled(lines)
    assert (done["from"], done["to"]) == (2, 6)
    assert [e for e in lines if e.get("msg") == "query running"][0]["restore"] == "local"
    assert recorded_partitions(hot) == 6
    assert _partitions(hot) == {str(i) for i in range(6)}

    rows = read_committed(store, ref)
    assert canonical(rows) == job.expected_rows(), json.dumps(rows[:5])
