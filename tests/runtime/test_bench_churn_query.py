"""The peer benchmark's churn query keeps its payload in the state. Its output once left the payload
out, and Spark's column pruning then dropped the MAX(payload) aggregate: the "100 MB" state was 24
bytes a key, and uploaded-vs-changed bytes were measured against 1 KB a key that never existed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark]
PEERS = Path(__file__).resolve().parents[2] / "bench" / "peers"


def aggregates(df) -> str:
    """The optimized plan's Aggregate node(s): what the state store will hold per key."""
    # The optimizer run by hand: a streaming plan's own optimizedPlan refuses a query not started.
    session = df.sparkSession._jsparkSession
    plan = session.sessionState().optimizer().execute(df._jdf.queryExecution().analyzed()).toString()
    return "\n".join(line for line in plan.splitlines() if "Aggregate" in line)


def test_the_payload_survives_column_pruning(spark, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(PEERS))
    sys.modules.pop("churn_query", None)
    from churn_query import build

    with_payload = aggregates(build(spark, keys=100, rows_per_batch=10, total_batches=5, payload_bytes=128))
    assert "max(" in with_payload and "sha2(" in with_payload, with_payload
    without = aggregates(build(spark, keys=100, rows_per_batch=10, total_batches=5, payload_bytes=0))
    assert "max(" not in without, without
    # What pruning does to an unused payload column (the old query's shape): the MAX is gone.
    pruned = build(spark, keys=100, rows_per_batch=10, total_batches=5, payload_bytes=128).select("key", "events")
    assert "max(" not in aggregates(pruned)
