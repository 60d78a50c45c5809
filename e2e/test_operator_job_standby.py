"""Issue 43 on the local cluster: a job with spec.standby.enabled gets a standby pod that follows its
checkpoints; when the active pod is deleted the operator promotes the standby (POST /promote) instead
of starting a new pod, a new standby follows for the next attempt, and the committed output equals the
failure-free result.

Runs against the operator of this checkout as a host process (`operator_process`): the Helm-installed
one runs the image's operator, which may predate spec.standby."""

from __future__ import annotations

import time

import pytest
from kube_helpers import wait_for
from operator_jobs import BUCKET, Jobs

from harness.runtime_job import WindowedJob, canonical
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

NAME = "spare"
INTERVAL = 5.0
ROWS, KEYS, BATCHES, WINDOW, WATERMARK = 50, 20, 60, 5, 2


def events(jobs: Jobs, name: str) -> list[tuple[str, str]]:
    found = jobs.core.list_namespaced_event(jobs.namespace, field_selector=f"involvedObject.name={name}").items
    return [(e.reason, e.message or "") for e in found]


def number(cid: str) -> int:
    return int(cid.rsplit("-", 1)[1])


@pytest.mark.slow
@pytest.mark.ci_sample  # 146 s on the local cluster's real node (load 4 on 2 cores)
def test_a_deleted_pod_is_replaced_by_its_promoted_standby(api_client, namespace, operator_process, store_env):
    operator = operator_process
    jobs = Jobs(api_client, namespace, store_env)
    args = {"rows_per_batch": ROWS, "keys": KEYS, "total_batches": BATCHES, "window": f"{WINDOW} seconds",
            "watermark": f"{WATERMARK} seconds"}
    jobs.create(NAME, **{"job.args": args, "checkpoint.interval": f"{INTERVAL:g}s", "standby.enabled": True})
    st = jobs.wait_status(NAME, "attempt 1 Running with a standby holding a checkpoint",
                          lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint")
                          and (s.get("standby") or {}).get("ready") and (s.get("standby") or {}).get("checkpoint"),
                          timeout=300, operator=operator)
    # (a loaded node may lose the first attempt before it runs: the standby is then the next attempt's)
    n = st["attempt"]
    assert st["standby"]["pod"] == f"{NAME}-{n + 1}-standby" and st["standby"]["attempt"] == n + 1, st["standby"]
    standby = jobs.core.read_namespaced_pod(f"{NAME}-{n + 1}-standby", namespace)
    assert not any(c.type == "Ready" and c.status == "True" for c in standby.status.conditions or [])
    held, restarts = st["standby"]["checkpoint"], st.get("restarts", 0)

    jobs.core.delete_namespaced_pod(st["pod"], namespace)
    deleted_at, names = time.monotonic(), set()

    def promoted_and_running():
        names.update(p.metadata.name for p in jobs.pods(NAME))
        s = jobs.status(NAME)
        return s if s.get("attempt") == n + 1 and s.get("phase") == "Running" else None

    st = wait_for(f"attempt {n + 1} Running", promoted_and_running, timeout=300, interval=0.5)
    running_after = time.monotonic() - deleted_at
    assert st["pod"] == f"{NAME}-{n + 1}-standby" and f"{NAME}-{n + 1}" not in names, names  # no cold pod
    assert st["restarts"] == restarts + 1 and st["lastFailure"]["reason"] == "PodDeleted"
    found = events(jobs, NAME)
    assert any(r == "StandbyPromoted" and f"attempt {n + 1}: standby {NAME}-{n + 1}-standby" in m
               for r, m in found), found
    assert not any(r == "StandbyNotPromoted" for r, _ in found), found
    assert number(st["restore"]["checkpoint"]) >= number(held)
    restored = st["restore"]["checkpoint"]
    st = jobs.wait_status(NAME, f"a checkpoint of attempt {n + 1}",
                          lambda s: number((s.get("latestCheckpoint") or {}).get("id", "chk-0")) > number(restored),
                          timeout=120, operator=operator)
    checkpoint_after = time.monotonic() - deleted_at
    print(f"pod deleted -> attempt {n + 1} (the promoted standby) Running: {running_after:.1f} s; "
          f"-> its first checkpoint: {checkpoint_after:.1f} s; restored {restored} (standby held {held})")
    jobs.wait_status(NAME, f"a standby for attempt {n + 2}",
                     lambda s: (s.get("standby") or {}).get("pod") == f"{NAME}-{n + 2}-standby"
                     and s["standby"].get("ready"), timeout=300, operator=operator)

    done = BATCHES + WINDOW + WATERMARK + 3
    jobs.wait_status(NAME, f"a checkpoint past batch {done}",
                     lambda s: (s.get("latestCheckpoint") or {}).get("batch", -1) >= done,
                     timeout=600, operator=operator)
    got = canonical(read_committed(open_store(f"s3://{BUCKET}/{namespace}", env=store_env), JobRef(namespace, NAME)))
    want = WindowedJob(rows_per_batch=ROWS, keys=KEYS, total_batches=BATCHES, window_seconds=WINDOW,
                       watermark_seconds=WATERMARK).expected_rows()
    assert got == want, f"missing {sum((want - got).values())}, extra {sum((got - want).values())}"
