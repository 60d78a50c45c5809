"""The churn phase's rounds, latencies and checkpoint-nice A/B (bench/peers/extras.py), and how the
report pools and compares them (render_extras). The runners are replaced by recorders: these test
the schedule and the arithmetic, not Spark."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from peers import extras, render_extras, sparkpoint_setup  # noqa: E402
from peers.common import Context  # noqa: E402


def _plan(**kw):  # type: ignore[no-untyped-def]
    base = dict(phases=("churn",), sizes=("tiny",), churns=(0.1,), retention_seconds=60, sample_seconds=10,
                small=True, flink=False)
    return extras.ExtrasPlan(**{**base, **kw})


def test_nice_ab_alternates_its_variants_every_round_at_every_latency(monkeypatch, tmp_path):
    calls = []

    def fake_sp(cw, ctx, tag, *, setup, env):  # type: ignore[no-untyped-def]
        calls.append((ctx.latency_ms, setup, env["SPARKPOINT_CHECKPOINT_NICE"], tag))
        return {"setup": setup, "size": cw.size, "churn": cw.churn, "state_bytes": 1, "steady": []}

    monkeypatch.setattr(sparkpoint_setup, "run_churn", fake_sp)
    plan = _plan(churn_setups=("sparkpoint-10s",), churn_nice=(0, 10), churn_rounds=2)
    out: dict = {}
    extras.run(plan, None, lambda lat: Context(base=tmp_path, bucket="b", endpoint="e", env={}, latency_ms=lat),
               [0, 20], "", {}, out)
    assert [(lat, setup) for lat, setup, _, _ in calls] == [
        (0, "sparkpoint-10s-nice0"), (0, "sparkpoint-10s-nice10"), (20, "sparkpoint-10s-nice0"),
        (20, "sparkpoint-10s-nice10")] * 2
    assert [nice for _, _, nice, _ in calls[:2]] == ["0", "10"]
    assert len({tag for *_, tag in calls}) == 8  # every run its own logs and store prefix
    assert [(r["latency_ms"], r["round"]) for r in out["churn"]][::4] == [(0, 0), (0, 1)]


def test_without_nice_values_sparkpoint_runs_once_at_the_runtime_default(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(sparkpoint_setup, "run_churn",
                        lambda cw, ctx, tag, *, setup, env: seen.append((setup, env)) or None)
    extras.run(_plan(churn_setups=("sparkpoint-10s",)), None,
               lambda lat: Context(base=tmp_path, bucket="b", endpoint="e", env={}, latency_ms=lat), [0], "", {}, {})
    assert seen == [("sparkpoint-10s", {})]


def _run(setup, lat, rnd, total, batch):  # type: ignore[no-untyped-def]
    return {"setup": setup, "size": "100m", "churn": 0.01, "state_bytes": 100, "latency_ms": lat, "round": rnd,
            "steady": [{"uploaded": 1, "changed": 2, "ratio": 0.5, "churn": 0.01, "sync_s": 0.0, "async_s": total}],
            "batch_durations": [batch]}


def test_rounds_pool_into_one_row_and_the_nice_ab_is_stated_as_ratios():
    runs = [_run("sparkpoint-10s-nice0", 0, 0, 0.10, 0.50), _run("sparkpoint-10s-nice10", 0, 0, 0.30, 0.40),
            _run("sparkpoint-10s-nice0", 0, 1, 0.12, 0.52), _run("sparkpoint-10s-nice10", 0, 1, 0.32, 0.42),
            _run("sparkpoint-10s-nice10", 20, 0, 0.9, 0.9)]
    rows = render_extras.churn_rows({"churn": runs})
    assert [(r["setup"], r["latency_ms"], r["runs"], r["n"]) for r in rows] == [
        ("sparkpoint-10s-nice0", 0, 2, 2), ("sparkpoint-10s-nice10", 0, 2, 2), ("sparkpoint-10s-nice10", 20, 1, 1)]
    text = "\n".join(render_extras.churn_lines({"churn": runs}))
    assert "| 100m | 1% | 0 ms | sparkpoint-10s-nice0 | 4 | 2 | 0.000 | 0.110 | 0.110 | 0.110 | 0.510 |" in text
    (line,) = [x for x in text.splitlines() if x.startswith("- Checkpoint nice")]
    assert line == ("- Checkpoint nice 0 vs 10 at 100m, 1% churn, 0 ms (2 and 2 alternating runs): checkpoint total "
                    "0.110 vs 0.310 s (0.35x), median batch 0.510 vs 0.410 s (1.24x).")


def test_steady_batches_are_those_the_steady_checkpoints_ran_beside():
    events = [{"msg": "batch completed", "batchId": i, "durationSeconds": float(i)} for i in range(12)]
    events.append({"msg": "checkpoint completed", "batchId": 5})
    cps = [{"batch_id": 2}, {"batch_id": 6}, {"batch_id": 9}]
    assert sparkpoint_setup.steady_batches(events, cps) == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert sparkpoint_setup.steady_batches(events, cps[:1]) == []


def test_the_harness_rejects_nonsense_churn_options():
    import peer_bench

    for argv in (["--churn-nice", "x"], ["--churn-nice", "25"], ["--churn-rounds", "0"],
                 ["--churn-setups", "spark"], ["--churn-inline", "2k"], ["--churn-inline", "-1"],
                 ["--churn-nice", "0,10", "--churn-inline", "0,2048"]):
        with pytest.raises(SystemExit):
            peer_bench.main([*argv, "--no-write"])


def test_inline_ab_sets_the_inline_limit_per_variant(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(sparkpoint_setup, "run_churn",
                        lambda cw, ctx, tag, *, setup, env: seen.append((setup, env)) or None)
    extras.run(_plan(churn_setups=("sparkpoint-10s",), churn_inline=(0, 2048)), None,
               lambda lat: Context(base=tmp_path, bucket="b", endpoint="e", env={}, latency_ms=lat), [0], "", {}, {})
    assert seen == [("sparkpoint-10s-inline0", {"SPARKPOINT_CHECKPOINT_INLINE_MAX": "0"}),
                    ("sparkpoint-10s-inline2048", {"SPARKPOINT_CHECKPOINT_INLINE_MAX": "2048"})]


def test_the_inline_ab_states_objects_per_checkpoint():
    runs = [_run("sparkpoint-10s-inline0", 0, 0, 0.20, 0.50), _run("sparkpoint-10s-inline2048", 0, 0, 0.10, 0.40)]
    runs[0]["steady"][0]["objects"], runs[1]["steady"][0]["objects"] = 100, 40
    (line,) = [x for x in render_extras.churn_lines({"churn": runs}) if x.startswith("- Largest inline")]
    assert line == ("- Largest inline file (bytes) 0 vs 2048 at 100m, 1% churn, 0 ms (1 and 1 alternating runs): "
                    "checkpoint total 0.200 vs 0.100 s (2.00x), median batch 0.500 vs 0.400 s (1.25x), "
                    "objects uploaded per checkpoint 100 vs 40 (median).")
