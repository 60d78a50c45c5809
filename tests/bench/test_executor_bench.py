"""bench/executor_report.py (issue 26): the order of the setups, the figures of a window and the
report's medians and ratios come from the samples given, not from constants."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import executor_report as er  # noqa: E402

METRICS = """# HELP sparkpoint_input_rows_total Rows read by the query
# TYPE sparkpoint_input_rows_total counter
sparkpoint_input_rows_total {rows}
sparkpoint_batch_duration_seconds_bucket{{le="0.5"}} 3.0
sparkpoint_batch_duration_seconds_count {count}
sparkpoint_batch_duration_seconds_sum {sum}
sparkpoint_checkpoint_duration_seconds_sum{{phase="sync"}} 0.25
"""


def _status(batch: int, seconds: float, checkpoints: list[tuple[str, float, float, float]]) -> dict:
    return {"lastProgress": {"batchId": batch, "durationSeconds": seconds, "inputRows": 1000},
            "recentCheckpoints": [{"id": i, "kind": "checkpoint", "status": "completed", "created": created,
                                   "syncSeconds": sync, "asyncSeconds": asyn} for i, created, sync, asyn in checkpoints]}


def _window(setup: str, round_: int, rows_per_s: float, batch: float, sync: float = 0.1) -> er.Window:
    return er.Window(setup, round_, 60.0, rows_per_s, batch, [batch], [sync], [sync + 1.0], (1.0, 2.0),
                     [{"role": "runtime", "cpu_request": "200m", "cpu_limit": None, "memory_limit": "2048Mi",
                       "slots": 2}])


def test_setups_alternate_per_round_so_drift_falls_on_all() -> None:
    assert er.schedule(3, 4) == [[0, 1, 2], [2, 1, 0], [0, 1, 2], [2, 1, 0]]


def test_every_setup_has_two_task_slots_and_local_gets_the_executors_memory() -> None:
    s = er.setups("512Mi")
    assert [x.slots() for x in s] == [2, 2, 2]
    assert s[0].master == "local[2]" and s[0].driver_memory == "2048Mi"
    assert s[1].executors == {"instances": 1, "cores": 2, "memory": "1024Mi"}
    assert s[2].executors == {"instances": 2, "cores": 1, "memory": "512Mi"}


def test_parse_metrics_keeps_labels_and_skips_comments() -> None:
    m = er.parse_metrics(METRICS.format(rows=5000, count=4, sum=2.0))
    assert m[er.ROWS] == 5000 and m[er.BATCH_COUNT] == 4
    assert m['sparkpoint_checkpoint_duration_seconds_sum{phase="sync"}'] == 0.25
    assert not any(k.startswith("#") for k in m)


def test_window_takes_rates_from_counter_differences_and_only_the_window_checkpoints() -> None:
    before = er.parse_metrics(METRICS.format(rows=1000, count=10, sum=5.0))
    after = er.parse_metrics(METRICS.format(rows=61000, count=40, sum=20.0))
    statuses = [_status(11, 0.4, [("chk-1", 99.0, 9.0, 9.0), ("chk-2", 101.0, 0.2, 1.0)]),
                _status(11, 0.4, [("chk-2", 101.0, 0.2, 1.0)]),  # the same batch and checkpoint seen twice
                _status(12, 0.6, [("chk-2", 101.0, 0.2, 1.0), ("chk-3", 111.0, 0.4, 2.0)])]
    w = er.window("local[2]", 1, before, after, 30.0, statuses, since=100.0, load=(1.5, 2.5))
    assert w.rows_per_s == pytest.approx(2000.0)
    assert w.batch_mean_s == pytest.approx(0.5)
    assert w.batch_s == [0.4, 0.6]
    assert w.sync_s == [0.2, 0.4] and w.total_s == pytest.approx([1.2, 2.4])  # chk-1 predates the window
    assert er.figures(w)["sync_s"] == pytest.approx(0.3)


def test_ratios_are_per_round_against_local_and_medians_over_rounds() -> None:
    ws = [_window("local[2]", 1, 1000, 0.5), _window("2 executors x 1 core", 1, 800, 0.6),
          _window("local[2]", 2, 500, 1.0), _window("2 executors x 1 core", 2, 450, 1.1),
          _window("local[2]", 3, 1000, 0.5), _window("2 executors x 1 core", 3, 700, 0.7)]
    rows = {r["setup"]: r for r in er.summary(ws, ["local[2]", "2 executors x 1 core"])}
    ex = rows["2 executors x 1 core"]
    assert ex["rows_per_s_ratios"] == pytest.approx([0.8, 0.9, 0.7])
    assert ex["rows_per_s_ratio"] == pytest.approx(0.8)  # the median of the rounds' ratios
    assert ex["rows_per_s"] == 700  # the median of its own rates
    assert rows["local[2]"]["rows_per_s_ratio"] == 1.0


def test_report_marks_a_smoke_run_and_states_the_measured_overhead() -> None:
    ws = [_window("local[2]", 1, 1000, 0.5), _window("1 executor x 2 cores", 1, 600, 0.8),
          _window("1 executor x 2 cores", 2, 610, 0.8), _window("local[2]", 2, 1000, 0.5)]
    meta = {"commit": "abc1234", "date": "2026-11-26", "node": "the node agent", "cores": 2, "rounds": 2,
            "window": "40", "workload": "windowed", "smoke": "node agent, not the real node"}
    text = er.render(ws, ["local[2]", "1 executor x 2 cores"], meta)
    assert text.startswith(er.START) and text.endswith(er.END)
    assert "**Smoke run, not figures of record**: node agent" in text
    assert "| 1 executor x 2 cores | 2 | 605 | 0.60 |" in text
    assert "| 2 | 1 executor x 2 cores | 610 | 0.61 |" in text
    assert "0.60x local[2]'s input rows/s (overhead, 40% fewer rows/s)" in text
    assert "runtime: cpu request 200m limit none, memory 2048Mi, 2 task slots" in text
    assert "| 0.80 / 0.80 | 0.100 / 1.10 | 1.0 -> 2.0 |" in text


def test_no_executor_window_no_comparison() -> None:
    assert "no comparison" in er.verdict(er.summary([_window("local[2]", 1, 1000, 0.5)], ["local[2]"]))
