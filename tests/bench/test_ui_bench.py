"""bench/ui_bench.py's report (issue 30): the on/off ratio, its intervals and the phase table come
from the runs given, not from constants."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import ui_bench  # noqa: E402
from peers.common import RunResult  # noqa: E402


def _run(setup: str, scale: float, add_ms: float) -> RunResult:
    durations = [scale * d for d in (0.50, 0.52, 0.48, 0.51, 0.49)]
    return RunResult(setup=setup, latency_ms=0, durations=durations, active_seconds=sum(durations),
                     phases={"addBatch": [d - 0.1 for d in durations], "walCommit": [0.01 + add_ms / 1000] * 5})


def test_report_states_the_measured_ratio_and_where_it_goes() -> None:
    results = [_run(ui_bench.OFF, 1.0, 0), _run(ui_bench.ON, 1.1, 5), _run(ui_bench.ON, 1.1, 5),
               _run(ui_bench.OFF, 1.0, 0)]
    text = ui_bench.render(results, ["1.0 1.0 1.0", "2.0 2.0 2.0"], "small", "abc1234")
    assert text.startswith(ui_bench.START) and text.endswith(ui_bench.END)
    assert "**Ratio on/off** (median batch): 1.100 [" in text and "per round: 1.100, 1.100" in text
    assert "| walCommit | 10.0 | 15.0 | +5.0 |" in text
    assert "commit `abc1234`" in text and "1.0 1.0 1.0; 2.0 2.0 2.0" in text


def test_split_runs_say_which_half_the_cost_is() -> None:
    results = [_run(ui_bench.OFF, 1.0, 0), _run(ui_bench.UI_ONLY, 1.02, 0), _run(ui_bench.EVENT_LOG, 1.3, 0),
               _run(ui_bench.ON, 1.32, 0)]
    text = ui_bench.render(results, ["1.0 1.0 1.0"], "small", "abc1234")
    assert f"- `{ui_bench.UI_ONLY}` / off: 1.020 [" in text
    assert f"- `{ui_bench.EVENT_LOG}` / off: 1.300 [" in text
    assert f"| {ui_bench.EVENT_LOG} | 1 |" in text and "**Ratio on/off** (median batch): 1.320 [" in text


def test_rounds_alternate_the_order_of_every_setup() -> None:
    setups = (ui_bench.OFF, ui_bench.UI_ONLY, ui_bench.EVENT_LOG, ui_bench.ON)
    assert ui_bench.order(setups, 0) == setups and ui_bench.order(setups, 1) == setups[::-1]
