"""The GC sidecar's output metrics (runtime/checkpoint/gc_loop.py, sink/output_gc.py): every object
under outputs/ is counted once, as committed or staged, or as collected; the sidecar serves them
with no credential, endpoint or store URL in any label or value."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from harness.minio_server import free_port
from sparkpoint.runtime.checkpoint import gc_pass
from sparkpoint.runtime.sink.gc_cursor import cursor_key
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.store import JobRef
from sparkpoint.runtime.store.layout import outputs_prefix
from tests.store.clirun import CLI

from .test_delta_vacuum import DeltaGcModel, later

# chk-1, chk-2; back to chk-1 (chk-2's file leaves the table); chk-3; an upload whose pod died before
# the manifest (an orphan of an older attempt once the next pod starts); a failed checkpoint of the
# newest attempt after its upload (staged, and the newest attempt's: kept)
HISTORY = [("batch", 2), ("checkpoint", 0), ("batch", 2), ("checkpoint", 0), ("restore", 0), ("batch", 1),
           ("checkpoint", 0), ("batch", 1), ("checkpoint", 2), ("batch", 3), ("checkpoint", 3)]


def _outputs(store, job: JobRef) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Objects and bytes under outputs/, but the GC cursors (GC's own state, which a pass rewrites)."""
    infos = [o for o in store.list(outputs_prefix(job)) if o.key != cursor_key(job)]
    return len(infos), sum(o.size for o in infos)


def test_every_output_object_is_committed_staged_or_collected(store, job, tmp_path):
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    for action, arg in HISTORY:
        model.step(action, arg)
    gc_pass(store, job, retain=1, grace_seconds=0, clock=later)
    objects, size = _outputs(store, job)
    young = output_gc_pass(store, job, grace_seconds=3600, delta_retention_seconds=0)  # all inside the grace
    assert young.deleted_files == 0 and (young.committed_objects + young.staged_objects,
                                         young.committed_bytes + young.staged_bytes) == (objects, size)
    assert young.staged_objects > 0  # the orphans, the superseded history, the failed upload
    out = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=0)
    collected = (out.deleted_files + len(out.deleted_entries), out.deleted_bytes + out.deleted_entry_bytes)
    assert collected[0] > 0 and (out.committed_objects + out.staged_objects + collected[0],
                                 out.committed_bytes + out.staged_bytes + collected[1]) == (objects, size)
    assert (out.committed_objects + out.staged_objects, out.committed_bytes + out.staged_bytes) == _outputs(store, job)
    assert out.staged_objects > 0  # the newest attempt's failed upload stays: its next checkpoint reuses it
    assert out.committed_bytes == young.committed_bytes  # what is needed did not change


def _scrape(port: int, until: str, timeout: float = 60) -> str:
    deadline, body = time.monotonic() + timeout, ""
    while time.monotonic() < deadline and until not in body:
        time.sleep(0.2)
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
        except OSError:
            continue
    return body


def test_the_sidecar_serves_output_metrics_without_credentials(minio_env, tmp_path):
    from sparkpoint.runtime.store import open_store

    store = open_store(f"s3://sparkpoint-test/t-{os.urandom(6).hex()}")
    job = JobRef("ns", "metrics-job")
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    for action, arg in HISTORY:
        model.step(action, arg)
    time.sleep(1.1)  # past a one-second grace
    port = free_port()
    proc = subprocess.Popen([*CLI, "gc", "--retain", "1", "--grace", "1s", "--delta-retention", "0s",
                             "--interval", "0.5", "--json", "--metrics-port", str(port),
                             "--store", f"s3://sparkpoint-test/{store.prefix}", "--job", "ns/metrics-job"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        body = _scrape(port, 'sparkpoint_gc_output_deleted_objects_total{job="metrics-job"')
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(body) for s in family.samples
               if s.name.startswith("sparkpoint_gc_")}
    labels = {"job": "metrics-job", "namespace": "ns"}

    def value(name: str, **extra: str) -> float:
        return samples[(name, tuple(sorted({**labels, **extra}.items())))]

    objects, size = _outputs(store, job)  # the passes after the first deleted nothing more
    assert (value("sparkpoint_gc_output_objects", state="committed") + value("sparkpoint_gc_output_objects", state="staged"),
            value("sparkpoint_gc_output_bytes", state="committed") + value("sparkpoint_gc_output_bytes", state="staged")
            ) == (objects, size)
    assert value("sparkpoint_gc_output_deleted_objects_total") > 0 and value("sparkpoint_gc_output_deleted_bytes_total") > 0
    assert {k for (_, ls) in samples for k, _ in ls} <= {"namespace", "job", "state", "reason"}
    for secret in (minio_env["AWS_ACCESS_KEY_ID"], minio_env["AWS_SECRET_ACCESS_KEY"],
                   minio_env["SPARKPOINT_S3_ENDPOINT"].split("//")[-1], store.prefix):
        assert secret not in body
