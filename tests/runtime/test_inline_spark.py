"""Inline files (SPARKPOINT_CHECKPOINT_INLINE_MAX) end to end with real Spark: the job's small
files travel in its manifests, a new pod restores from them, and tampered inline bytes are caught
by the restore, which falls back to the previous checkpoint; the output equals the failure-free
result."""

from __future__ import annotations

import base64
import json

import pytest

from harness.runtime_job import canonical
from sparkpoint.runtime.checkpoint import inline
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store.layout import checkpoint_key
from sparkpoint.runtime.store.manifest import FORMAT_VERSION

from .test_recovery_spark import drain_at_the_last_batch, first_run, start_second_pod
from .test_runtime_spark import _get

pytestmark = [pytest.mark.spark, pytest.mark.minio, pytest.mark.timeout(900)]


def test_a_new_pod_restores_inline_files_and_refuses_tampered_ones(minio_server, tmp_path):
    run = first_run(minio_server, tmp_path, "inline", {inline.INLINE_MAX_ENV: str(inline.RECOMMENDED_MAX_FILE)})
    job, store, ref = run.job, run.store, run.ref
    newest, previous = run.newest, run.previous
    carried = [e for e in newest.files if e.inline]
    # Spark's offset and commit logs are carried (the freeze leaves Hadoop's .crc sidecars out).
    assert any(e.path.startswith("offsets/") for e in carried) and any(e.path.startswith("commits/") for e in carried)
    limit = inline.RECOMMENDED_MAX_FILE
    assert newest.format_version == FORMAT_VERSION and all(e.inline == (e.size <= limit) for e in newest.files)
    # Tamper with one inline file of the newest manifest only (same size, other bytes).
    doc = json.loads(store.get_bytes(checkpoint_key(ref, newest.id)))
    victim = next(f for f in doc["files"] if "data" in f and f["path"].startswith("offsets/")
                  and f["sha256"] not in {e.sha256 for e in previous.files})
    data = bytearray(base64.b64decode(victim["data"]))
    data[-1] ^= 0x01
    victim["data"] = base64.b64encode(bytes(data)).decode()
    store.put_bytes(checkpoint_key(ref, newest.id), json.dumps(doc).encode())

    second, pod, port = start_second_pod(run, tmp_path)
    try:
        restore = _get(port, "/status")[1]["restore"]
        assert (restore["source"], restore["checkpoint"]) == ("remote", previous.id)
        assert [f["checkpoint"] for f in restore["fallbacks"]] == [newest.id]
        assert victim["path"] in restore["fallbacks"][0]["error"]
        drain_at_the_last_batch(second, pod, job)
    finally:
        second.kill()
    # The checkpoints after the restore carry inline files again, and the output is exactly once.
    assert any(e.inline for e in load_manifest(store, ref, list_checkpoint_ids(store, ref)[-1]).files)
    assert canonical(read_committed(store, ref)) == job.expected_rows()
