"""bench/recovery_bench.py's pure parts: which /status answer counts as the next attempt's first new
batch (never the faulted attempt's own, never a standby still following), and the summary rows."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import recovery_bench as rb  # noqa: E402


def doc(attempt, restored_batch, committed):
    return {"attempt": attempt, "restore": {"batchId": restored_batch}, "latestCommittedBatch": committed}


def test_the_old_attempt_and_a_following_standby_do_not_count():
    assert rb.first_new_batch(doc(3, 10, 14), old_attempt=3, same_pod=False) == (False, False)
    assert rb.first_new_batch({"attempt": None, "standby": {}}, old_attempt=3, same_pod=False) == (False, False)
    assert rb.first_new_batch(None, old_attempt=3, same_pod=False) == (False, False)


def test_a_new_attempt_counts_once_it_committed_past_its_restored_batch():
    assert rb.first_new_batch(doc(4, 10, 10), old_attempt=3, same_pod=False) == (True, False)
    assert rb.first_new_batch(doc(4, 10, None), old_attempt=3, same_pod=False) == (True, False)
    assert rb.first_new_batch(doc(4, 10, 11), old_attempt=3, same_pod=False) == (True, True)
    # a fresh start (nothing restored) counts its first batch
    assert rb.first_new_batch(doc(4, None, 0), old_attempt=3, same_pod=False) == (True, True)


def test_a_runtime_restarted_in_place_keeps_its_attempt_number():
    assert rb.first_new_batch(doc(3, 10, 11), old_attempt=3, same_pod=True) == (True, True)


def test_summary_is_median_and_range_per_fault_and_variant():
    results = [{"fault": "delete", "variant": "cold", "noticed": 1.0, "restored": 5.0, "first_batch": x}
               for x in (20.0, 30.0, 25.0)]
    results.append({"fault": "delete", "variant": "standby", "noticed": 1.0, "restored": 1.5, "first_batch": 9.0})
    rows = rb.summary(results)
    assert [(r["fault"], r["variant"], r["n"]) for r in rows] == [("delete", "cold", 3), ("delete", "standby", 1)]
    assert rows[0]["first_batch"] == (25.0, 20.0, 30.0)
    assert rows[1]["restored"] == (1.5, 1.5, 1.5)
