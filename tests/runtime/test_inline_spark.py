"""Inline files (SPARKPOINT_CHECKPOINT_INLINE_MAX) end to end with real Spark: the job's small
files travel in its manifests, a new pod restores from them, and tampered inline bytes are caught
by the restore, which falls back to the previous checkpoint; the output equals the failure-free
result."""

from __future__ import annotations

import base64
import json
import signal
import uuid

import pytest

from sparkpoint.runtime.checkpoint import inline
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.demo import RuntimeProcess, WindowedJob, canonical, committed, wait_until
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.layout import checkpoint_key

from .test_runtime_spark import _get

pytestmark = [pytest.mark.spark, pytest.mark.minio, pytest.mark.timeout(900)]
TEST_BUCKET = "sparkpoint-test"


def test_a_new_pod_restores_inline_files_and_refuses_tampered_ones(minio_server, tmp_path):
    job = WindowedJob(name="inline", rows_per_batch=1000, keys=300, total_batches=24, trigger="300ms",
                      checkpoint_interval="2s")
    store_url = f"s3://{TEST_BUCKET}/inl-{uuid.uuid4().hex[:10]}"
    env = {**minio_server.env(), inline.INLINE_MAX_ENV: str(inline.RECOMMENDED_MAX_FILE)}
    job_file = job.write(tmp_path / "job.yaml", store_url)
    first = RuntimeProcess(job_file, tmp_path / "pod1", tmp_path / "first.log", until_batch=14, env=env).start()
    assert first.wait(600) == 0, (tmp_path / "first.log").read_text()[-3000:]
    store, ref = open_store(store_url, env=env), JobRef("default", job.name)
    ids = list_checkpoint_ids(store, ref)
    assert len(ids) >= 2, ids
    newest, previous = load_manifest(store, ref, ids[-1]), load_manifest(store, ref, ids[-2])
    carried = [e for e in newest.files if e.inline]
    # Spark's offset and commit logs are carried (the freeze leaves Hadoop's .crc sidecars out).
    assert any(e.path.startswith("offsets/") for e in carried) and any(e.path.startswith("commits/") for e in carried)
    limit = inline.RECOMMENDED_MAX_FILE
    assert newest.format_version == 2 and all(e.inline == (e.size <= limit) for e in newest.files)
    # Tamper with one inline file of the newest manifest only (same size, other bytes).
    doc = json.loads(store.get_bytes(checkpoint_key(ref, newest.id)))
    victim = next(f for f in doc["files"] if "data" in f and f["path"].startswith("offsets/")
                  and f["sha256"] not in {e.sha256 for e in previous.files})
    data = bytearray(base64.b64decode(victim["data"]))
    data[-1] ^= 0x01
    victim["data"] = base64.b64encode(bytes(data)).decode()
    store.put_bytes(checkpoint_key(ref, newest.id), json.dumps(doc).encode())

    pod = tmp_path / "pod2"
    second = RuntimeProcess(job_file, pod, tmp_path / "second.log", until_batch=None, env=env).start()
    try:
        wait_until(lambda: (pod / "api.json").exists(), 300, "control API", second)
        port = json.loads((pod / "api.json").read_text())["port"]
        wait_until(lambda: _get(port, "/readyz")[0] == 200, 300, "readiness", second)
        restore = _get(port, "/status")[1]["restore"]
        assert (restore["source"], restore["checkpoint"]) == ("remote", previous.id)
        assert [f["checkpoint"] for f in restore["fallbacks"]] == [newest.id]
        assert victim["path"] in restore["fallbacks"][0]["error"]
        wait_until(lambda: committed(pod) >= job.until_batch, 600, "the last batch", second)
        second.proc.send_signal(signal.SIGTERM)
        assert second.wait(120) == 0
    finally:
        second.kill()
    # The checkpoints after the restore carry inline files again, and the output is exactly once.
    assert any(e.inline for e in load_manifest(store, ref, list_checkpoint_ids(store, ref)[-1]).files)
    assert canonical(read_committed(store, ref)) == job.expected_rows()
