"""Remote restore against the RocksDB snapshot interval (issue 10): what `minDeltasForSnapshot` costs
on restore. The churn query runs until a checkpoint covers batch `kill_after`, is SIGKILLed, its pod's
disk is wiped, and it restarts from the store. Killing just before the first snapshot of the longer
interval is that interval's worst case: the restore replays every changelog since the fill.
Each interval runs in a fresh process; the harness alternates them (A B A B) when asked for rounds."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from harness.runtime_job import RuntimeProcess, wait_until
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.store import JobRef, open_store

from .churn import ChurnWorkload
from .common import Context, completed_checkpoints, json_lines
from .recovery import await_new_batch, last_batch
from .sparkpoint_setup import churn_job

SNAPSHOT_CONF = "spark.sql.streaming.stateStore.minDeltasForSnapshot"


def checkpointed_batches(log: Path) -> list[int]:
    return [c["batchId"] for c in completed_checkpoints(json_lines(log)) if c.get("batchId") is not None]


def state_files(files: list[str]) -> dict[str, int]:
    """Counts of the RocksDB state files a manifest lists, by kind."""
    kinds = {"changelog": ".changelog", "snapshot": ".zip", "sst": ".sst"}
    return {k: sum(1 for f in files if f.startswith("state/") and f.endswith(ext)) for k, ext in kinds.items()}


def sparkpoint(ctx: Context, w: ChurnWorkload, tag: str, min_deltas: int, kill_after: int,
               timeout: float = 1800) -> dict[str, Any]:
    job = churn_job(w, name="sp-replay", interval="10s", run_forever=True,
                    spark_conf={SNAPSHOT_CONF: str(min_deltas)})
    store_url = f"s3://{ctx.bucket}/{tag}-{uuid.uuid4().hex[:8]}"
    job_file = job.write(ctx.base / f"{tag}.yaml", store_url)
    pod, log = ctx.base / f"{tag}-pod", ctx.base / f"{tag}-0.log"
    p = RuntimeProcess(job_file, pod, log, until_batch=None, env=ctx.env).start()
    try:
        wait_until(lambda: max(checkpointed_batches(log), default=-1) >= kill_after, timeout,
                   f"a checkpoint of batch {kill_after} or later", p)
    finally:
        p.kill()
    killed_after = last_batch(json_lines(log))
    store, ref = open_store(store_url), JobRef("default", job.name)
    latest = load_manifest(store, ref, list_checkpoint_ids(store, ref)[-1])
    shutil.rmtree(pod)  # a new pod: nothing local survives
    log = ctx.base / f"{tag}-1.log"
    restarted_at = time.time()
    p = RuntimeProcess(job_file, pod, log, until_batch=None, env=ctx.env).start()
    try:
        first = await_new_batch(log, restarted_at, killed_after, p.alive, timeout)
        info = p.restore_info() or {}
    finally:
        p.kill()
    return {"setup": "sparkpoint-10s", "size": w.size, "churn": w.churn, "state_bytes": w.state_bytes,
            "min_deltas_for_snapshot": min_deltas, "checkpoint": latest.id, "checkpoint_batch": latest.batch_id,
            "checkpoint_files": latest.totals.files, "checkpoint_bytes": latest.totals.bytes,
            "state_files": state_files([f.path for f in latest.files]), "killed_after_batch": killed_after,
            "restored_from": info.get("restore"), "restore_seconds": info.get("restore_seconds"),
            "first_new_batch_s": first,
            "command": f"python -m sparkpoint.runtime.cli run {job_file.name} (spark.conf {SNAPSHOT_CONF}="
                       f"{min_deltas}), SIGKILL after a checkpoint of batch >= {kill_after}, pod dir wiped, run again"}
