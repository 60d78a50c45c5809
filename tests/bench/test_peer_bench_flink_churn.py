"""Pure parts of Flink's key-churn run (bench/peers/flink.py, flink_job.py --query churn): the SQL's key
schedule against churn.ChurnWorkload, placing checkpoints in the batch schedule from sampled record
counts, the REST statistics -> result dict, and the report's Flink rows and duration comparison."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from peers import churn, flink, flink_job, render_extras  # noqa: E402

MIB = 1024 * 1024


def _sql_keys(w: churn.ChurnWorkload, batch: int) -> list[int]:
    """The keys the job's own SQL expressions give the values of one batch (sqlite evaluates them;
    the CASE ... ARRAY[...] ELSE ARRAY[0] unnest becomes `fill OR j = 0` over the same offsets)."""
    key, fill = flink_job.churn_key_sql(w.keys, w.rows_per_batch)
    r = w.rows_per_batch
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE ev (v INTEGER)")
    db.execute("CREATE TABLE offsets (j INTEGER)")
    db.executemany("INSERT INTO ev VALUES (?)", [(v,) for v in range(batch * r, (batch + 1) * r)])
    db.executemany("INSERT INTO offsets VALUES (?)", [(j,) for j in flink_job.fill_offsets(w.keys, r)])
    rows = db.execute(f"SELECT k FROM (SELECT {key} AS k FROM ev, offsets WHERE ({fill}) OR j = 0) "
                      f"WHERE k < {w.keys}").fetchall()
    return [k for (k,) in rows]


@settings(max_examples=40, deadline=None)
@given(keys=st.integers(1, 400), churn_pct=st.integers(1, 100), steady=st.integers(1, 15), data=st.data())
def test_the_flink_queries_keys_per_batch_are_churn_workloads(keys, churn_pct, steady, data):
    w = churn.ChurnWorkload(size="x", keys=keys, payload_bytes=64, churn=churn_pct / 100, steady_batches=steady)
    batch = data.draw(st.integers(0, w.batches - 1))
    got = _sql_keys(w, batch)
    assert set(got) == w.keys_of_batch(batch)
    if batch == 0:
        assert len(got) == w.keys  # the fill writes each key exactly once


def test_churn_sql_covers_the_sequence_and_rate_of_the_workload():
    w = churn.ChurnWorkload.of("tiny", 0.1, steady_batches=12)  # 20 rows per batch, fanout 100
    ddl = flink_job.churn_sql(w.keys, w.rows_per_batch, w.batches, w.payload_bytes, 1000)
    source = ddl[0]
    assert "'rows-per-second' = '20'" in source and f"'fields.v.end' = '{20 * 13 - 1}'" in source
    assert "'rows-per-second' = '40'" in flink_job.churn_sql(2000, 20, 13, 0, 500)[0]
    insert = ddl[-1]
    assert "ARRAY[0, 1, 2," in insert and ", 99] ELSE ARRAY[0]" in insert
    # payload_chars of churn.py: 256 bytes -> four 64-character digests, kept in the state (MAX)
    assert insert.count("SHA256(") == w.payload_chars // 64 == 4 and "payload STRING" in ddl[2]
    assert "payload" not in flink_job.churn_sql(10, 1, 3, 0, 1000)[2]


def test_count_at_is_the_last_sample_at_or_before():
    samples = [(11.0, 100), (10.0, 0), (12.0, 140)]
    assert flink.count_at(samples, 9.0) == 0
    assert flink.count_at(samples, 10.9) == 0  # the next burst is not seen yet: no interpolation
    assert flink.count_at(samples, 11.0) == 100
    assert flink.count_at(samples, 99.0) == 140
    assert flink.count_at([], 5.0) == 0


def test_batch_at_is_minus_one_until_the_fill_is_in_and_capped_at_the_last_batch():
    w = churn.ChurnWorkload.of("tiny", 0.1, steady_batches=12)  # 2000 keys, 20 rows per batch
    assert flink.batch_at(1999, w) == -1
    assert flink.batch_at(2000, w) == 0
    assert flink.batch_at(2000 + 5 * 20, w) == 5
    assert flink.batch_at(2000 + 5 * 20 + 11, w) == 6  # nearer the next burst: rounded
    assert flink.batch_at(10**9, w) == w.batches - 1


def _events(w: churn.ChurnWorkload) -> list[dict]:
    """flink_job.py's lines: the fill lands at t=100.5, then one batch per second from t=101.5."""
    progress = [{"event": "progress", "ts": 100.0, "records": 0}]
    for b in range(w.batches):
        t = 100.5 + b
        progress.append({"event": "progress", "ts": t + 0.2, "records": w.keys + b * w.rows_per_batch})
    progress.append({"event": "progress", "ts": 100.5 + w.batches + 20, "records": w.keys + (w.batches - 1) * w.rows_per_batch})

    def cp(i: int, trigger: float, new: int, sync: float, asyn: float) -> dict:
        return {"event": "checkpoint", "id": i, "triggerMs": trigger * 1000, "checkpointedSize": new,
                "fullSize": 700_000, "syncMs": sync * 1000, "asyncMs": asyn * 1000, "durationMs": 900}

    # chk 1 before any record, chk 2 after the fill and 3 batches, chk 3 after 10 more, chk 4 after the end
    return progress + [cp(2, 104.0, 600_000, 0.02, 0.4), cp(1, 99.0, 1000, 0.01, 0.1),
                       cp(3, 114.0, 90_000, 0.03, 0.2), cp(4, 140.0, 5000, 0.01, 0.05)]


def test_rest_checkpoint_stats_become_the_churn_result():
    w = churn.ChurnWorkload.of("tiny", 0.1, steady_batches=12)
    cps = flink.churn_checkpoints(_events(w), w)
    assert [c["id"] for c in cps] == [1, 2, 3, 4]  # in checkpoint order, whatever the REST order
    assert [c["batch_id"] for c in cps] == [-1, 3, 12, 12]
    assert cps[1] == {"id": 2, "batch_id": 3, "new_bytes": 600_000, "bytes": 700_000, "sync_s": 0.02,
                      "async_s": 0.4, "duration_s": 0.9}
    steady = flink.churn_steady(cps, w)
    # chk 1 (mid-fill) and chk 2 (carries the fill) are left out; chk 3: batches 4..12, 9 x 20 keys;
    # chk 4: nothing changed since chk 3.
    assert len(steady) == 1
    s = steady[0]
    assert s["changed"] == 9 * 20 * w.row_bytes and s["uploaded"] == 90_000
    assert s["ratio"] == pytest.approx(90_000 / (180 * 280))
    assert (s["sync_s"], s["async_s"]) == (0.03, 0.2)


def _churn_run(setup: str, sync: float, asyn: float, ratio: float = 2.0, partitions: int | None = 2) -> dict:
    return {"setup": setup, "size": "tiny", "churn": 0.1, "state_bytes": 2 * MIB,
            **({} if partitions is None else {"partitions": partitions}),
            "steady": [{"uploaded": ratio * MIB, "changed": MIB, "ratio": ratio, "churn": 0.1,
                        "sync_s": sync, "async_s": asyn},
                       {"uploaded": ratio * MIB, "changed": MIB, "ratio": ratio, "churn": 0.1,
                        "sync_s": sync, "async_s": asyn}]}


def test_report_shows_the_flink_rows_and_compares_checkpoint_durations():
    ex = {"churn": [_churn_run("sparkpoint-10s", 0.1, 0.5), _churn_run("flink", 0.05, 1.0, ratio=3.0),
                    {"setup": "vanilla-changelog", "size": "tiny", "churn": 0.1, "state_bytes": 2 * MIB, "partitions": 2,
                     "steady": [{"uploaded": MIB, "changed": MIB, "ratio": 1.0, "churn": 0.1, "batches": 12}]}]}
    text = "\n".join(render_extras.churn_lines(ex))
    assert "| tiny | 2.0 | 10% | 0 ms | flink | 2 | 1 | 2 | 10.00% | 3.000 | 1.000 | 3.00 |" in text
    assert "| tiny | 10% | 0 ms | flink | 2 | 2 | 0.050 | 1.000 | 1.050 | 1.050 | n/a |" in text
    assert "| tiny | 10% | 0 ms | sparkpoint-10s | 2 | 2 | 0.100 | 0.500 | 0.600 | 0.600 | n/a |" in text
    assert "| vanilla-changelog |" not in text.split("Checkpoint durations")[1]  # no sync/async measured
    assert ("sparkpoint-10s vs Flink at tiny, 10% churn, 0 ms, 2 partitions each: sync 0.100 vs 0.050 s (2.00x), "
            "async 0.500 vs 1.000 s (0.50x), total 0.600 vs 1.050 s (0.57x), mean 0.600 vs 1.050 s (0.57x); goal (checkpoint duration no worse "
            "than Flink's) met.") in text
    slower = {"churn": [_churn_run("sparkpoint-10s", 0.1, 2.0), _churn_run("flink", 0.05, 1.0)]}
    assert "goal (checkpoint duration no worse than Flink's) not met" in "\n".join(render_extras.churn_lines(slower))
    alone = {"churn": [_churn_run("sparkpoint-10s", 0.1, 0.5)]}
    assert "vs Flink" not in "\n".join(render_extras.churn_lines(alone))
    plots = []
    render_extras.plots(ex, lambda name, title, draw, size=None: plots.append(name) or name)
    assert plots == ["peers-churn-upload-ratio"]


def test_only_equal_partition_counts_are_judged_and_runs_before_the_knob_keep_their_counts():
    """Runs recorded without a partition count (before --churn-partitions) had Sparkpoint 4, Flink 1: their
    comparison is printed but judges nothing; with equal counts present, Sparkpoint meets its own count."""
    legacy = {"churn": [_churn_run("sparkpoint-10s", 0.1, 2.0, partitions=None),
                        _churn_run("flink", 0.05, 1.0, partitions=None)]}
    text = "\n".join(render_extras.churn_lines(legacy))
    assert "| tiny | 10% | 0 ms | sparkpoint-10s | 4 | 2 |" in text and "| tiny | 10% | 0 ms | flink | 1 | 2 |" in text
    assert "0 ms, 4 partitions vs Flink's 1:" in text and "unequal partitions: no verdict" in text
    assert "goal (checkpoint duration" not in text
    mixed = {"churn": legacy["churn"] + [_churn_run("sparkpoint-10s", 0.1, 0.5, partitions=1),
                                         _churn_run("flink", 0.05, 1.0, partitions=1)]}
    lines = [x for x in render_extras.churn_lines(mixed) if x.startswith("- sparkpoint-10s vs Flink")]
    assert len(lines) == 2
    assert any("1 partitions each" in x and x.endswith("goal (checkpoint duration no worse than Flink's) met.") for x in lines)


def test_every_churn_setup_runs_with_the_same_partition_count(tmp_path):
    """The count reaches Sparkpoint's spec, the vanilla job's shuffle partitions and Flink's parallelism."""
    from peers import sparkpoint_setup, vanilla

    from sparkpoint.runtime.spec import parse_document  # the spec the bench writes is one users could apply
    w = churn.ChurnWorkload.of("tiny", 0.1, partitions=3)
    assert sparkpoint_setup.churn_job(w, name="x", interval="10s").spec("s3://bench/p")["spec"]["spark"]["shufflePartitions"] == 3
    _, spec = parse_document(sparkpoint_setup.churn_job(w, name="x", interval="10s").spec("s3://bench/p"))
    assert spec.spark.shuffle_partitions == 3
    assert vanilla.SPARKPOINT_PARTITIONS == 4
    with pytest.raises(ValueError, match="partitions must be >= 1"):
        churn.ChurnWorkload.of("tiny", 0.1, partitions=0)


def test_the_mean_counts_the_checkpoints_that_carry_a_compaction_where_the_median_passes_over_them():
    run = _churn_run("flink", 0.0, 0.1)
    run["steady"].append({**run["steady"][0], "async_s": 1.0})  # one checkpoint uploads a compaction
    text = "\n".join(render_extras.churn_lines({"churn": [run]}))
    assert "| tiny | 10% | 0 ms | flink | 2 | 3 | 0.000 | 0.100 | 0.100 | 0.400 | n/a |" in text
