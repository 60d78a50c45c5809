"""Pure parts of the peer benchmark's extra figures (bench/peers): the key-churn schedule and the
changed bytes between checkpoints, recovery time from progress logs, bucket bytes vs retained bytes,
MinIO's received-bytes counter, the report sections, and the harness's flag checks."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from peers import churn, merge, recovery, render, render_extras, retention, store_requests  # noqa: E402

MIB = 1024 * 1024


def test_fill_batch_loads_every_key_once_and_later_batches_rotate():
    w = churn.ChurnWorkload.of("tiny", 0.1, steady_batches=30)
    assert w.rows_per_batch == 20  # 10% of 2000 keys per interval of 10 batches
    assert w.keys_of_batch(0) == set(range(2000))
    assert w.keys_of_batch(1) == set(range(20))
    assert w.keys_of_batch(2) == set(range(20, 40))
    assert w.keys_of_batch(w.batches) == set()  # the source stops after the last batch
    assert w.row_bytes == 24 + 256 and w.state_bytes == 2000 * 280


@settings(max_examples=60, deadline=None)
@given(keys=st.integers(1, 300), churn_pct=st.integers(1, 100), per_interval=st.integers(1, 12),
       steady=st.integers(1, 40), data=st.data())
def test_changed_keys_equals_the_union_of_the_batches_keys(keys, churn_pct, per_interval, steady, data):
    w = churn.ChurnWorkload(size="x", keys=keys, payload_bytes=64, churn=churn_pct / 100,
                            batches_per_interval=per_interval, steady_batches=steady)
    after = data.draw(st.integers(-1, w.batches))
    upto = data.draw(st.integers(after, w.batches + 2))
    union = set().union(*(w.keys_of_batch(b) for b in range(after + 1, upto + 1)))
    assert w.changed_keys(after, upto) == len(union)


def test_changed_bytes_and_steady_checkpoints_skip_the_fill():
    w = churn.ChurnWorkload.of("tiny", 0.01)  # 2 keys per batch
    cps = [{"batch_id": 0, "new_bytes": 10 * MIB}, {"batch_id": 5, "new_bytes": 5600},
           {"batch_id": 5, "new_bytes": 0}, {"batch_id": 15, "new_bytes": 11200}]
    assert w.changed_bytes([c["batch_id"] for c in cps]) == [2000 * 280, 10 * 280, 0, 20 * 280]
    st_ = churn.steady(cps, w)
    assert [s["ratio"] for s in st_] == [2.0, 2.0]  # the fill and the empty interval are left out
    assert st_[0]["churn"] == pytest.approx(10 / 2000)
    assert churn.trigger(w) == "1000ms"


def test_churn_workload_rejects_bad_parameters():
    with pytest.raises(ValueError, match="churn"):
        churn.ChurnWorkload.of("tiny", 0)
    with pytest.raises(ValueError, match="unknown size"):
        churn.ChurnWorkload.of("8g", 0.1)


def test_recovery_time_is_from_restart_to_the_end_of_the_first_new_batch():
    sp = [{"msg": "query running", "ts": 100.0}, {"msg": "batch completed", "batchId": 7, "ts": 130.5},
          {"msg": "batch completed", "batchId": 8, "ts": 131.0}]
    assert recovery.seconds_to_first_new_batch(sp, 100.0, after_batch=6) == 30.5
    assert recovery.seconds_to_first_new_batch(sp, 100.0, after_batch=8) is None
    assert recovery.last_batch(sp) == 8
    # Vanilla: the progress's trigger start plus its triggerExecution, not when the harness printed it.
    van = [{"event": "started"}, {"event": "batch", "batchId": 4, "ts": 99.0,
                                  "timestamp": "1970-01-01T00:01:40.000Z", "durationMs": {"triggerExecution": 2500}}]
    assert recovery.seconds_to_first_new_batch(van, 90.0, after_batch=3) == 12.5


def test_compare_counts_missing_and_duplicate_rows():
    expected = Counter({"a": 1, "b": 1})
    assert recovery.compare(Counter({"a": 1, "b": 1}), expected)["correct"]
    got = recovery.compare(Counter({"a": 2}), expected)
    assert (got["correct"], got["missing"], got["extra_or_duplicate"], got["rows"]) == (False, 1, 1, 2)


def test_bucket_bytes_split_and_ratio_to_retained_checkpoints():
    listed = [("default/j/objects/ab/abc", 300), ("default/j/checkpoints/chk-000001.json", 10),
              ("default/j/outputs/default/part", 1000)]
    assert retention.split_bytes(listed) == {"total": 1310, "checkpoint_area": 310, "objects": 3,
                                             "checkpoint_objects": 2, "output_area": 1000, "output_objects": 1}
    # a job named "outputs" or "objects" is neither: only the area under the job's prefix counts
    named = retention.split_bytes([("default/outputs/fence.json", 5), ("default/objects/fence.json", 5)])
    assert (named["output_area"], named["checkpoint_area"], named["total"]) == (0, 0, 10)
    samples = [{"t": 0, "checkpoint_area": 100, "live_bytes": 0}, {"t": 10, "checkpoint_area": 400, "live_bytes": 100},
               {"t": 60, "checkpoint_area": 150, "live_bytes": 100}, {"t": 120, "checkpoint_area": 120, "live_bytes": 100}]
    got = retention.ratio_summary(samples)
    assert got == {"final": 1.2, "median_settled": 1.35, "max_settled": 1.5, "sample_count": 4}
    assert retention.ratio_summary([{"t": 0, "checkpoint_area": 5}])["final"] is None
    # The summary sits next to the samples in one result dict: it must not shadow them.
    assert "samples" not in got


def test_retention_report_counts_output_and_its_growth():
    samples = [{"t": t, "total": 0, "checkpoint_area": MIB, "live_bytes": MIB, "output_area": int(t / 60 * MIB),
                "output_objects": t, "output_needed": MIB // 2} for t in (0, 60, 120, 180, 240)]
    assert render_extras.output_growth(samples) == pytest.approx(1.0)  # 1 MiB a minute, settled half
    flat = [dict(s, output_area=3 * MIB) if s["t"] >= 120 else s for s in samples]
    assert render_extras.output_growth(flat) == 0.0  # bounded once GC caught up
    assert render_extras.output_growth([{"t": 0}, {"t": 10}]) is None  # rows of runs before the output columns
    row = {"setup": "sparkpoint-10s", "state_bytes": MIB, "final": 1.0, "median_settled": 1.0, "max_settled": 1.0,
           "samples": samples}
    text = "\n".join(render_extras.retention_lines({"plan": {"retention_seconds": 240}, "retention": [row]}))
    assert "| met | 4.00, 240 | 0.50 | 1.00 |" in text


def test_received_bytes_sums_servers_and_ignores_other_metrics():
    text = ('# HELP minio_s3_traffic_received_bytes x\nminio_s3_traffic_received_bytes{server="a"} 1.5e+03\n'
            'minio_s3_traffic_received_bytes{server="b"} 500\nminio_s3_traffic_sent_bytes{server="a"} 9\n')
    assert store_requests.parse_received_bytes(text) == 2000


def _raw(extras):
    return {"size": "small", "rounds": 1, "loads": ["9.0 8.0 7.0"], "command": "c", "skipped": {},
            "bucket_bytes_end": 0, "workload": {"rows_per_batch": 1, "keys": 1, "batches": 1, "payload_bytes": 0,
                                                "trigger": "1s", "warmup_batches": 0},
            "versions": {}, "limits": None, "restore": None, "results": [], "extras": extras}


def test_report_shows_recovery_churn_and_retention():
    ex = {"plan": {"retention_seconds": 90, "gc_interval": "10s", "grace": "20s", "sample_seconds": 10},
          "recovery_job": {"rows_per_batch": 10, "keys": 10, "batches": 24, "trigger": "1s", "checkpoint_interval": "5s"},
          "recovery": [{"setup": "sparkpoint", "latency_ms": 0, "correct": True, "rows": 40, "restarts": [
              {"kind": "local", "restored_from": "local", "killed_after_batch": 6, "restore_seconds": 0.1,
               "first_new_batch_s": 21.0}]},
              {"setup": "vanilla-changelog", "latency_ms": 0, "correct": False, "missing": 2, "extra_or_duplicate": 0,
               "rows": 38, "restarts": [{"kind": "remote", "killed_after_batch": 5, "first_new_batch_s": 30.0}]}],
          "churn": [{"setup": "sparkpoint-10s", "size": "tiny", "churn": 0.01, "state_bytes": 2 * MIB,
                     "steady": [{"uploaded": MIB, "changed": MIB / 2, "ratio": 2.0, "churn": 0.01}]}],
          "retention": [{"setup": "sparkpoint-10s", "state_bytes": MIB, "final": 1.2, "median_settled": 1.3,
                         "max_settled": 1.6, "samples": [{"t": 0, "total": 2 * MIB, "checkpoint_area": MIB,
                                                          "live_bytes": MIB}]}]}
    plots = []
    text = render.render(_raw(ex), lambda name, title, draw, size=None: plots.append(name) or f"![{title}]({name})")
    assert "| 0 ms | sparkpoint | local | local | 6 | 0.10 | 21.0 | correct (40 rows) |" in text
    assert "**wrong**: 2 missing, 0 extra/duplicate (38 rows)" in text
    assert "| tiny | 2.0 | 1% | 0 ms | sparkpoint-10s | 4 | 1 | 1 | 1.00% | 1.000 | 0.500 | 2.00 |" in text
    assert "| 1.20, 1.30, 1.60 | 1.00 | met on average, not at the peak |" in text
    assert render_extras.time_averaged_ratio([
        {"t": 0, "checkpoint_area": 9, "live_bytes": 1}, {"t": 10, "checkpoint_area": 3, "live_bytes": 2},
        {"t": 20, "checkpoint_area": 1, "live_bytes": 2}]) == 1.0  # the first sample is not settled
    assert "Physical limits" not in text  # skipped with --no-limits
    assert plots == ["peers-bucket-bytes", "peers-churn-upload-ratio"]
    assert render_extras.recovery_lines({}) == []


def test_harness_keeps_big_sizes_out_of_small_runs():
    import peer_bench

    with pytest.raises(SystemExit):
        peer_bench.main(["--small", "--sizes", "1g", "--no-write"])
    with pytest.raises(SystemExit):
        peer_bench.main(["--small", "--churn", "0", "--no-write"])
    with pytest.raises(SystemExit):
        peer_bench.main(["--extras", "bogus", "--no-write"])


def test_flink_restart_picks_the_newest_complete_checkpoint_and_times_records_flowing():
    keys = ["job/chk-2/_metadata", "job/chk-10/_metadata", "job/chk-11/abc", "job/shared/x", "job/taskowned/y"]
    assert recovery.latest_flink_checkpoint(keys) == "job/chk-10"  # chk-11 has no _metadata yet
    assert recovery.latest_flink_checkpoint(["job/shared/x"]) is None
    events = [{"event": "progress", "state": "INITIALIZING", "records": 0, "ts": 5.0},
              {"event": "progress", "state": "RUNNING", "records": 0, "ts": 6.0},
              {"event": "progress", "state": "RUNNING", "records": 120, "ts": 7.5}]
    assert recovery.first_flink_records(events, 1.0) == 6.5
    assert recovery.first_flink_records(events[:2], 1.0) is None


def test_vanilla_trigger_is_spelled_as_spark_parses_it():
    from peers import vanilla_job

    assert vanilla_job.spark_interval("100ms") == "100 milliseconds"
    assert vanilla_job.spark_interval("1s") == "1 seconds"
    assert vanilla_job.spark_interval("2m") == "2 minutes"
    assert vanilla_job.spark_interval("5 seconds") == "5 seconds"


def test_churn_job_is_a_valid_spec_with_the_gc_grace_asked_for():
    from peers.sparkpoint_setup import churn_job

    from sparkpoint.runtime.spec import JobSpec

    w = churn.ChurnWorkload.of("tiny", 0.1)
    spec = JobSpec.model_validate(churn_job(w, name="sp-x", interval="10s", gc_grace="20s").spec("s3://bench/p")["spec"])
    assert spec.gc.grace == "20s"
    assert (spec.job.entrypoint, spec.job.sink.kind, spec.job.trigger_interval) == ("churn_query:build", "upsert", "1000ms")
    assert spec.job.args["rows_per_batch"] == w.rows_per_batch


def test_runs_merge_into_one_report_and_the_gaps_are_named():
    rounds = _raw({"recovery": [{"setup": "sparkpoint", "latency_ms": 0, "restarts": []}], "churn": []})
    rounds["results"] = [{"setup": "floor", "latency_ms": 0, "durations": [1.0, 1.1], "active_seconds": 2}]
    later = _raw({"retention": [{"setup": "sparkpoint-10s"}], "churn": [{"setup": "sparkpoint-10s", "size": "1g"}]})
    later.update(results=[], rounds=0, loads=["1.0 1.0 1.0"], command="d", skipped={"x": "why"})
    both = merge.merge([rounds, later])
    assert both["rounds"] == 1 and len(both["results"]) == 1 and both["command"] == "c ; d"
    assert both["loads"] == ["9.0 8.0 7.0"] and both["extras_loads"] == ["1.0 1.0 1.0"]  # the rounds' own load
    assert both["skipped"] == {"x": "why"}
    assert [len(both["extras"][k]) for k in ("recovery", "churn", "retention")] == [1, 1, 1]
    gaps = render.not_measured(both)
    assert any("sizes 1g, 0 ms only" in g for g in gaps) and not any("Bucket bytes" in g for g in gaps)
    both["extras"]["churn"].append({"setup": "flink", "size": "100m", "latency_ms": 20})
    assert any("sizes 100m, 1g, 0 ms and 20 ms, Sparkpoint" in g for g in render.not_measured(both))
    assert any(g.startswith("Recovery after a kill, sparkpoint: not at 20 ms") for g in gaps)
    assert any(g.startswith("Recovery after a kill, flink: not at 0 ms and 20 ms") for g in gaps)
    assert "Rounds of the `small` workload at 20 ms." in gaps
    assert both["other_workloads"] == []


def test_rounds_of_another_workload_are_reported_apart_not_pooled():
    rounds = _raw({})
    rounds["results"] = [{"setup": "floor", "latency_ms": 0, "durations": [1.0, 1.1], "active_seconds": 2}]
    earlier = _raw({"recovery": [{"setup": "sparkpoint", "latency_ms": 0, "restarts": []}]})
    earlier.update(size="medium", workload=dict(rounds["workload"], keys=99), command="e", loads=["2.0 2.0 2.0"],
                   skipped={"(round 3 of 3)": "lost"},
                   results=[{"setup": "floor", "latency_ms": 0, "durations": [2.0], "active_seconds": 1,
                             "checkpoints": [], "requests": {}},
                            {"setup": "vanilla", "latency_ms": 0, "durations": [3.0], "active_seconds": 1,
                             "checkpoints": [], "requests": {}}])
    both = merge.merge([rounds, earlier])
    assert len(both["results"]) == 1 and both["command"] == "c" and both["loads"] == ["9.0 8.0 7.0"]
    assert len(both["extras"]["recovery"]) == 1  # its extra figures still count
    (other,) = both["other_workloads"]
    assert other["workload"]["keys"] == 99 and len(other["results"]) == 2 and other["command"] == "e"
    both["extras_loads"] = ["5.0 5.0 5.0"]
    again = merge.merge([rounds, both])  # a merged report merged again keeps its other workload once
    assert [o["command"] for o in again["other_workloads"]] == ["e"] and again["extras_loads"] == ["5.0 5.0 5.0"]
    text = "\n".join(render.other_workload_lines(other))
    assert "### The `medium` workload: an earlier run, reported on its own" in text
    assert "| 0 ms | vanilla | 1 | 1 | 3.000 |" in text and "| 1.500 [1.500, 1.500] |" in text
    assert "**(round 3 of 3)**: lost" in text and "Goals in the" not in text  # no Sparkpoint run: no goal
    other["results"].append({"setup": "sparkpoint-10s", "latency_ms": 0, "durations": [2.2], "active_seconds": 1,
                             "checkpoints": [], "requests": {}})
    text = "\n".join(render.other_workload_lines(other))
    assert "#### Goals in the `medium` run" in text
    assert "- sparkpoint-10s/floor at 0 ms: 1.100 [1.100, 1.100] over batches; goal <= 1.05: **not met**" in text
    assert "Rounds of the `small` workload at 20 ms." in render.not_measured(both)


def test_churn_total_ratio_counts_the_compaction_the_median_passes_over() -> None:
    steady = [{"uploaded": 1.0, "changed": 2.0, "ratio": 0.5, "churn": 0.1}] * 4 \
        + [{"uploaded": 30.0, "changed": 2.0, "ratio": 15.0, "churn": 0.1}]  # a compaction's checkpoint
    (row,) = render_extras.churn_rows({"churn": [{"setup": "sparkpoint-10s", "size": "100m", "churn": 0.1,
                                                  "state_bytes": 10, "steady": steady}]})
    assert row["ratio"] == 0.5
    assert row["total_ratio"] == 34.0 / 10.0
    lines = render_extras.churn_lines({"churn": [{"setup": "sparkpoint-10s", "size": "100m", "churn": 0.1,
                                                  "state_bytes": 10, "steady": steady}]})
    assert any(line.endswith("| 0.50 | 3.40 |") for line in lines)


def test_replay_counts_state_files_and_renders_the_interval_ratio():
    from peers import render_extras, replay

    files = ["state/0/0/1.changelog", "state/0/0/2.changelog", "state/0/0/2.zip", "state/0/0/SSTs/a.sst",
             "offsets/3", "commits/3", "sources/0/0"]
    assert replay.state_files(files) == {"changelog": 2, "snapshot": 1, "sst": 1}

    def row(n: int, first: float) -> dict:
        return {"setup": "sparkpoint-10s", "size": "100m", "churn": 0.1, "state_bytes": 100 * 2**20,
                "min_deltas_for_snapshot": n, "checkpoint": "chk-000005", "checkpoint_batch": 45,
                "checkpoint_files": 90, "checkpoint_bytes": 50 * 2**20,
                "state_files": {"changelog": 4, "snapshot": 4, "sst": 12}, "restore_seconds": 0.5,
                "first_new_batch_s": first}
    text = "\n".join(render_extras.replay_lines({"replay": [row(5, 10.0), row(50, 15.0), row(5, 12.0), row(50, 13.0)]}))
    assert "| 50 | chk-000005 (45) | 4 / 4 / 12 | 50.0 | 0.50 | 15.0 |" in text
    assert "11.0 s at 5, 14.0 s at 50 (1.27x, 2 run(s) each" in text
    assert render_extras.replay_lines({}) == []


def test_objects_are_counted_by_the_area_of_the_job_they_belong_to():
    keys = ["p1/default/j/objects/ab/abcd", "p1/default/j/checkpoints/chk-000001.json", "p1/default/j/fence.json",
            "p1/default/j/outputs/out/_staging/a1/batch-3/part-0.json", "p2/checkpoint/state/0/0/1.changelog",
            "p2/checkpoint/offsets/3", "p2/checkpoint/commits/3", "p3/whatever"]
    assert store_requests.objects_by_area(keys) == {
        "checkpoints": 1, "commits": 1, "fence.json": 1, "objects": 1, "offsets": 1, "other": 1, "outputs": 1, "state": 1}
    raw = {"results": [{"latency_ms": 0, "setup": "floor", "active_seconds": 1800, "durations": [1.0],
                        "objects_by_area": {"outputs": 7000, "attempts": 1}},
                       {"latency_ms": 0, "setup": "floor", "active_seconds": 1800, "durations": [1.0],
                        "objects_by_area": {"outputs": 9000}}]}
    text = "\n".join(render.area_table(raw))
    assert "| latency | setup | attempts | outputs |" in text and "| 0 ms | floor | 1 | 16000 |" in text


def test_requests_are_cut_to_the_measured_window_by_interpolating_the_scrapes():
    samples = [(100.0, {"PUT": 0}), (101.0, {"PUT": 10}), (103.0, {"PUT": 30}), (110.0, {"PUT": 500})]
    assert store_requests.at(samples, 102.0)["PUT"] == 20
    # The drain's burst after 103 s is outside a window that ends there.
    assert store_requests.in_window(samples, 100.5, 103.0)["PUT"] == 25
    with pytest.raises(ValueError):
        store_requests.at(samples, 99.0)


def test_the_request_table_prefers_the_window_and_falls_back_for_older_runs():
    runs = [{"latency_ms": 0, "setup": "floor", "durations": [1.0], "active_seconds": 36.0,
             "requests": {"PUT": 200}, "requests_window": {"PUT": 1}, "window_seconds": 36.0},
            {"latency_ms": 0, "setup": "old", "durations": [1.0], "active_seconds": 36.0,
             "requests": {"PUT": 200}}]
    text = "\n".join(render.request_table({"results": runs}))
    assert "| 0 ms | floor | 100 |" in text and "| 0 ms | old | 20000 |" in text


def test_a_sparkpoint_run_window_spans_its_measured_batches():
    from peers import sparkpoint_setup

    batches = [{"ts": 10.0, "durationSeconds": 0.5}, {"ts": 11.0, "durationSeconds": 0.4},
               {"ts": 12.5, "durationSeconds": 0.6}]
    assert sparkpoint_setup._window(batches) == [9.5, 12.5]
    assert sparkpoint_setup._window(batches[:1]) == []


def test_completed_checkpoints_are_read_from_the_runtime_log(tmp_path):
    from peers import common, replay

    def finished(status: str, batch: int | None) -> dict:
        return {"msg": "checkpoint request finished", "request": {"status": status, "batchId": batch}}
    events = [finished("completed", 3), finished("failed", 4), {"msg": "batch completed", "batchId": 5},
              finished("completed", None)]
    assert common.completed_checkpoints(events) == [{"status": "completed", "batchId": 3},
                                                    {"status": "completed", "batchId": None}]
    log = tmp_path / "run.log"
    log.write_text("\n".join(json.dumps(e) for e in events) + "\nnot json\n")
    assert replay.checkpointed_batches(log) == [3]
