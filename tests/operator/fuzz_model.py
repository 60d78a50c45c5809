"""Random sequences of the machine model's own rules, outside hypothesis (docs/reliability.md).

    .venv/bin/python tests/operator/fuzz_model.py SEED SECONDS > LOG
    .venv/bin/python tests/operator/shrink_model.py LOG     # not needed: violations print shrunk

Hypothesis draws every rule about equally often; this driver weights suspends, upgrades, OOM kills
and pod losses, and runs many short sequences (5-40 steps), which found cases the 100,000-step runs
had not. Each violation is printed with its steps, cut by delta debugging to a FOUND row.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_world import IMAGES  # noqa: E402
from shrink_model import ddmin, kind, replay  # noqa: E402


def draw(rng: random.Random) -> tuple[str, dict]:
    c = rng.choice
    return c([
        ("edit_upgrade_mode", {"mode": c(["stateless", "savepoint", "last-checkpoint"])}),
        ("edit_image", {"image": c(IMAGES)}), ("edit_job_args", {"n": 1}),
        ("edit_restore_from", {"kind": c(["none", "checkpoint", "savepoint", "missing", "fresh"]), "i": rng.randint(0, 9)}),
        ("suspend_or_resume", {"state": c(["suspended", "running"])}),
        ("runtime_oom_killed", {"i": rng.randint(0, 3)}), ("pod_deleted_externally", {"i": rng.randint(0, 3)}),
        ("node_lost", {"i": rng.randint(0, 3)}), ("runtime_crashes", {"i": rng.randint(0, 3), "code": c([1, 137])}),
        ("world_progresses", {"n": rng.randint(1, 8)}), ("world_goes_quiet", {}),
        ("operator_round", {}), ("operator_rounds", {"n": rng.randint(2, 6)}),
        ("drains_complete", {}), ("terminations_finish", {}), ("pod_starts", {"i": 0}), ("pod_becomes_ready", {"i": 0}),
        ("savepoint_nonce", {}), ("time_passes", {"seconds": c([2.0, 60.0, 600.0])}),
        ("newest_manifest_unreadable", {}), ("manifests_readable_again", {}),
        ("edit_storage_url", {"i": rng.randint(0, 1)}), ("status_writes_fail", {"n": rng.randint(1, 3)}),
        ("delete_job", {}), ("garbage_collector_runs", {}), ("executor_sticks_in_terminating", {}),
        ("executors_let_go", {}), ("cleanup_pod_runs", {}), ("cleanup_pod_fails", {}), ("cleanup_pod_hangs", {}),
        ("cleanup_pod_sticks_in_terminating", {"stuck": c([True, False])}),
        ("edit_state_store_or_partitions", {"store": c(["rocksdb", "hdfs"]), "partitions": c([2, 4]),
                                            "fresh": c([True, False])}),
    ])


def main(seed: int, seconds: float) -> int:
    rng, end, steps, found = random.Random(seed), time.time() + seconds, 0, 0
    while time.time() < end:
        sequence = [draw(rng) for _ in range(rng.randint(5, 40))]
        steps += len(sequence)
        got = replay(sequence)
        if got:
            found += 1
            print(f"== {got[:200]}\nFOUND[\"...\"] = {ddmin(sequence, kind(got))!r}", flush=True)
    print(f"fuzz: {steps} steps, {found} violations")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), float(sys.argv[2])))
