"""Pure parts of the peer benchmarks (bench/peers): percentiles, ratio of medians with its bootstrap
interval, MinIO request-count parsing and the monthly cost estimate."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from peers import stats, store_requests  # noqa: E402

durations = st.lists(st.floats(min_value=0.01, max_value=100, allow_nan=False), min_size=1, max_size=30)


def test_percentile_interpolates_between_ranks():
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([5], 95) == 5
    assert stats.percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 95) == pytest.approx(10.5)
    with pytest.raises(ValueError, match="no values"):
        stats.percentile([], 50)
    with pytest.raises(ValueError, match="outside"):
        stats.percentile([1], 101)


@given(durations, durations)
@settings(max_examples=40, deadline=None)
def test_bootstrap_interval_contains_the_point_estimate(a, b):
    r = stats.bootstrap_ratio(a, b, resamples=200)
    assert r.value == pytest.approx(statistics.median(b) / statistics.median(a))
    assert r.low <= r.value * (1 + 1e-9) and r.value <= r.high * (1 + 1e-9)


def test_bootstrap_interval_narrows_with_more_samples():
    a_small, b_small = [1.0, 1.2, 0.9, 1.1], [2.0, 2.5, 1.8, 2.2]
    narrow = stats.bootstrap_ratio(a_small * 25, b_small * 25)
    wide = stats.bootstrap_ratio(a_small, b_small)
    assert narrow.half_width < wide.half_width
    assert 1.6 < narrow.low < narrow.high < 2.6


def test_identical_samples_give_ratio_one_exactly():
    r = stats.bootstrap_ratio([2.0] * 5, [2.0] * 7)
    assert (r.value, r.low, r.high) == (1.0, 1.0, 1.0)
    assert r.fmt() == "1.000 [1.000, 1.000]"


def test_bootstrap_is_reproducible_and_rejects_bad_input():
    a, b = [1.0, 2.0, 3.0], [2.0, 3.0, 5.0]
    assert stats.bootstrap_ratio(a, b, seed=3) == stats.bootstrap_ratio(a, b, seed=3)
    with pytest.raises(ValueError, match="at least one"):
        stats.bootstrap_ratio([], b)
    with pytest.raises(ValueError, match="positive"):
        stats.ratio_of_medians([0.0], b)


def test_resampling_paired_rounds_cancels_a_drift_both_sides_share():
    # Round 2 ran on a slower machine for both setups: per-batch resampling mixes the rounds and sees
    # a wide spread; resampling whole rounds keeps each round's pair together.
    a_rounds, b_rounds = [[1.0] * 10, [2.0] * 10], [[1.02] * 10, [2.04] * 10]
    paired = stats.paired_rounds_ratio(a_rounds, b_rounds)
    per_batch = stats.bootstrap_ratio([x for r in a_rounds for x in r], [x for r in b_rounds for x in r])
    assert paired.value == pytest.approx(1.02) and paired.high - paired.low < 1e-9
    assert per_batch.high - per_batch.low > 0.5
    assert stats.per_round_ratios(a_rounds, b_rounds) == pytest.approx([1.02, 1.02])


def test_resampling_rounds_shows_the_spread_between_runs_that_batches_hide():
    # Each run is steady but the runs disagree (0.9x, 1.0x, 1.1x): the pooled batches' median is
    # pinned at 1.0, the rounds' interval is not.
    a_rounds, b_rounds = [[1.0] * 50] * 3, [[0.9] * 50, [1.0] * 50, [1.1] * 50]
    per_batch = stats.bootstrap_ratio([x for r in a_rounds for x in r], [x for r in b_rounds for x in r])
    paired = stats.paired_rounds_ratio(a_rounds, b_rounds)
    assert per_batch.high - per_batch.low < 0.11
    assert paired.low == pytest.approx(0.9) and paired.high == pytest.approx(1.1)
    with pytest.raises(ValueError, match="at least one round"):
        stats.paired_rounds_ratio([[]], [[1.0]])


def test_summary_reports_rows_per_second_at_the_median():
    s = stats.summary([1.0, 2.0, 4.0], rows_per_batch=1000)
    assert (s["median_s"], s["rows_per_s"], s["batches"]) == (2.0, 500.0, 3)


METRICS = """\
# HELP minio_s3_requests_total Total number of S3 requests in the current MinIO server instance
# TYPE minio_s3_requests_total counter
minio_s3_requests_total{api="putobject",server="127.0.0.1:9000"} 7
minio_s3_requests_total{api="putobject",server="127.0.0.1:9001"} 3
minio_s3_requests_total{api="getobject",server="127.0.0.1:9000"} 1.2e+01
minio_s3_requests_total{api="listobjectsv2",server="127.0.0.1:9000"} 4
minio_s3_requests_total{api="headobject",server="127.0.0.1:9000"} 5
minio_s3_requests_total{api="deletemultipleobjects",server="127.0.0.1:9000"} 2
minio_s3_requests_total{api="putobjectpart",server="127.0.0.1:9000"} 6
minio_s3_requests_errors_total{api="getobject",server="127.0.0.1:9000"} 99
minio_s3_requests_total{api="getbucketlocation",server="127.0.0.1:9000"} 1
minio_s3_requests_total{server="127.0.0.1:9000",api="headbucket"} 2
"""


def test_parse_requests_groups_apis_by_billing_kind():
    counts = store_requests.parse_requests(METRICS)
    # Servers add up; APIs a bill does not list separately (getbucketlocation) count as OTHER.
    assert counts == {"PUT": 16, "GET": 12, "LIST": 4, "HEAD": 7, "DELETE": 2, "OTHER": 1}


def test_delta_per_hour_and_monthly_cost():
    before = {"PUT": 10, "GET": 5}
    after = {"PUT": 1010, "GET": 2005, "LIST": 100}
    d = store_requests.delta(before, after)
    assert d == {"PUT": 1000, "GET": 2000, "LIST": 100, "HEAD": 0, "DELETE": 0, "OTHER": 0}
    hourly = store_requests.per_hour(d, 1800)
    assert hourly["PUT"] == 2000
    # 2000 PUT + 200 LIST at $0.005/1000, 4000 GET at $0.0004/1000 per hour, 730 hours; 10 GB stored.
    expected = (2.2 * 0.005 + 4 * 0.0004) * 730 + 10 * 0.023
    assert store_requests.monthly_cost(hourly, stored_bytes=10e9) == pytest.approx(expected)
    with pytest.raises(ValueError, match="positive"):
        store_requests.per_hour(d, 0)


def _run(setup, latency, durations, checkpoints=(), requests=None):  # type: ignore[no-untyped-def]
    return {"setup": setup, "latency_ms": latency, "durations": list(durations), "active_seconds": 60.0,
            "checkpoints": list(checkpoints), "command": "", "note": "", "bucket_bytes": 0,
            "requests": requests or {"PUT": 60, "GET": 6, "LIST": 0, "HEAD": 0, "DELETE": 0, "OTHER": 0}}


def test_render_reports_ratios_goals_and_costs_from_raw_results():
    from peers import render

    cp = {"bytes": 4 * 1024 * 1024, "new_bytes": 1024 * 1024, "sync_s": 0.01, "async_s": 0.5}
    raw = {"size": "small", "rounds": 2, "loads": ["9.0 8.0 7.0"], "command": "python bench/peer_bench.py --small",
           "skipped": {"vanilla-v2": "RuntimeError: boom"}, "bucket_bytes_end": 0,
           "workload": {"rows_per_batch": 1000, "keys": 1000, "batches": 10, "payload_bytes": 0,
                        "trigger": "100ms", "warmup_batches": 3},
           "versions": {"pyspark": "4.3.0"},
           "limits": {"sha256_mib_s": 800, "disk_write_mib_s": 200, "store_put_mib_s": 100, "store_get_mib_s": 300},
           "restore": {"files": 8, "file_mib": 8, "burners": 2, "raw_get_mib_s": 100, "restore_mib_s": 80,
                       "fraction": 0.8, "repeats": 2},
           "results": [_run("floor", 0, [1.0] * 10), _run("sparkpoint-10s", 0, [1.02] * 10, [cp]),
                       _run("vanilla-changelog", 0, [2.0] * 10, [{"sync_s": 0.4, "async_s": 0.0}]),
                       _run("floor", 20, [1.0] * 10), _run("sparkpoint-10s", 20, [1.2] * 10, [cp]),
                       _run("vanilla-changelog", 20, [3.0] * 10)]}
    plots = []
    text = render.render(raw, lambda name, title, draw, size=None: plots.append(name) or f"![{title}]({name})")
    assert text.startswith(render.START) and text.endswith(render.END)
    assert "| 0 ms | sparkpoint-10s | 1 | 10 | 1.020 |" in text
    assert "alternating rounds: 1 at 0 ms, 1 at 20 ms" in text  # rounds are per latency
    assert "sparkpoint-10s/floor at 0 ms: 1.020 [1.020, 1.020] over batches; goal <= 1.05: **met**" in text
    assert "sparkpoint-10s/floor at 20 ms: 1.200 [1.200, 1.200] over batches; goal <= 1.05: **not met**" in text
    assert "sparkpoint-10s/vanilla-changelog at 20 ms: 0.400 [0.400, 0.400] over batches; goal <= 0.5: **met**" in text
    assert "**vanilla-v2**: RuntimeError: boom" in text
    assert "80% of raw GET" in text and "9.0 8.0 7.0" in text
    # 60 PUT + 6 GET per minute -> 3600 PUT/h, 360 GET/h.
    assert "| 0 ms | floor | 3600 | 360 | 0 | 0 | 0 |" in text
    assert plots == ["peers-batch-duration", "peers-ratio-to-floor"]


def test_goals_are_judged_by_the_rounds_interval_once_there_are_three_rounds():
    from peers import render

    raw = {"results": [], "workload": {"rows_per_batch": 100}}
    for b in ([0.9] * 20, [1.0] * 20, [1.2] * 20):  # steady runs that disagree between rounds
        raw["results"] += [_run("floor", 0, [1.0] * 20), _run("sparkpoint-10s", 0, b)]
    _, ratios = render.batch_table(raw)
    (line,) = [x for x in render._goals(raw, ratios) if x.startswith("- ")]
    # The pooled batches put the median at 1.0 (met); the rounds' interval reaches 1.2.
    assert line.startswith("- sparkpoint-10s/floor at 0 ms: 1.000 [")
    assert "resampling the 3 rounds (per round: 0.900, 1.000, 1.200)" in line
    assert line.endswith("goal <= 1.05: **not resolved (interval spans the goal)**")


def test_restore_fraction_pairs_each_repeats_downloads():
    from peers import render, restore_load

    # Repeat 2 met a fast moment for the raw GET only: pairing keeps it from setting the verdict.
    out = restore_load.summarize([100.0, 400.0, 200.0], [90.0, 100.0, 180.0], files=2, file_mib=1, burners=2)
    assert out["fraction"] == pytest.approx(0.9) and out["fractions"] == pytest.approx([0.9, 0.25, 0.9])
    assert (out["raw_get_mib_s"], out["restore_mib_s"], out["repeats"]) == (200.0, 100.0, 3)
    raw = {"size": "small", "rounds": 0, "loads": [], "command": "c", "skipped": {}, "versions": {},
           "workload": {"rows_per_batch": 1, "keys": 1, "batches": 1, "payload_bytes": 0, "trigger": "1s",
                        "warmup_batches": 0}, "limits": None, "restore": out, "results": [], "extras": {}}
    text = render.render(raw, lambda *a, **k: "")
    # Resampling three repeats can draw 25% twice: the interval spans the goal.
    assert out["fraction_ci"] == pytest.approx([0.25, 0.9])
    assert ("**90% of raw GET** [25%, 90%] resampling the repeats (goal >= 70%: **not resolved**); "
            "per repeat (downloads in rotating order): 90%, 25%, 90%.") in text


def test_restore_paragraph_states_cpu_per_kind_and_the_machines_page_reporting():
    from peers import render, restore_load

    out = restore_load.summarize([100.0, 400.0, 200.0], [90.0, 100.0, 180.0], files=2, file_mib=1, burners=2)
    out.update(raw_cpu_user_s_per_gib=0.05, raw_cpu_sys_s_per_gib=0.5, restore_cpu_user_s_per_gib=0.7,
               restore_cpu_sys_s_per_gib=0.6, page_reporting={"min_free_ms": "0"})
    text = "\n".join(render.restore_lines(out))
    assert "- plain GETs 0.05 + 0.50 s" in text and "- restore (sha256-verified) 0.70 + 0.60 s" in text
    assert "(min_free_ms=0)" in text


def test_the_restore_paragraph_shows_the_sha256_restore_as_the_before():
    from peers import render, restore_load

    raw, crc, sha = [100.0, 100.0, 100.0, 100.0], [90.0, 85.0, 80.0, 95.0], [40.0, 50.0, 44.0, 36.0]
    out = restore_load.summarize(raw, crc, files=2, file_mib=1, burners=2)
    out["before"] = restore_load.summarize(raw, sha, files=2, file_mib=1, burners=2)
    out.update(raw_cpu_user_s_per_gib=0.05, raw_cpu_sys_s_per_gib=0.5, restore_cpu_user_s_per_gib=0.2, restore_cpu_sys_s_per_gib=0.5,
               restore_sha256_cpu_user_s_per_gib=0.7, restore_sha256_cpu_sys_s_per_gib=0.5)
    text = "\n".join(render.restore_lines(out))
    assert "Sparkpoint restore (8 workers, crc32-checked, staged then renamed) 88 MiB/s = **88% of raw GET**" in text
    assert "(goal >= 70%: **met**)" in text
    assert "checked by sha256 as every restore was before format 3): 42 MiB/s = 42% of raw GET [" in text
    assert "(goal >= 70%: **not met**); per repeat: 40%, 50%, 44%, 36%." in text
    assert "- restore (crc32-checked) 0.20 + 0.50 s" in text and "- restore (sha256) 0.70 + 0.50 s" in text


def test_an_older_restore_result_keeps_its_paragraph():
    from peers import render, restore_load

    out = restore_load.summarize([100.0], [80.0], files=1, file_mib=1, burners=2)
    text = "\n".join(render.restore_lines({**out, "raw_cpu_s_per_gib": 0.6, "restore_cpu_s_per_gib": 1.4}))
    assert "per repeat (downloads in rotating order): 80%." in text
    assert "plain GETs 0.60 s, restore 1.40 s." in text


@pytest.mark.parametrize(("fractions", "verdict"), [([0.8, 0.9, 0.75, 0.85], "met"), ([0.5, 0.6, 0.65, 0.55], "not met"),
                                                    ([0.5, 0.9, 0.6, 0.8], "not resolved")])
def test_the_restore_goal_is_judged_by_the_interval_of_the_repeats(fractions, verdict):  # type: ignore[no-untyped-def]
    from peers import render, restore_load

    out = restore_load.summarize([100.0] * len(fractions), [100.0 * f for f in fractions], files=1, file_mib=1,
                                 burners=2)
    assert f"(goal >= 70%: **{verdict}**)" in render.restore_lines(out)[0]
