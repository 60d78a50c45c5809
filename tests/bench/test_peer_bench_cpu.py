"""The peer benchmark's CPU accounting (bench/peers/proc_cpu.py): /proc parsing, which processes
count as the run's, and the cut to the measured window; with real processes burning real CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from peers import proc_cpu  # noqa: E402
from peers.render_time import cpu_table, phase_table  # noqa: E402

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_parse_stat_finds_fields_after_a_comm_with_spaces_and_parentheses():
    tick = proc_cpu.TICK
    fields = ["S", "42"] + ["0"] * 9 + [str(3 * tick), str(tick)] + ["0"] * 6 + ["777"] + ["0"] * 10
    comm, ppid, start, cpu = proc_cpu.parse_stat("123 (we (ir) d) " + " ".join(fields))
    assert (comm, ppid, start, cpu) == ("we (ir) d", 42, 777, pytest.approx(4.0))


def test_parse_stat_of_this_process_agrees_with_os_times():
    import os
    comm, ppid, _, cpu = proc_cpu.parse_stat(Path(f"/proc/{os.getpid()}/stat").read_text())
    t = os.times()
    assert ppid == os.getppid()
    assert cpu == pytest.approx(t.user + t.system, abs=0.1)


def test_descendants_follow_the_whole_tree_and_nothing_else():
    procs = {2: ("a", 1, 0, 0.0), 3: ("b", 2, 0, 0.0), 4: ("c", 3, 0, 0.0), 5: ("d", 1, 0, 0.0), 9: ("e", 8, 0, 0.0)}
    assert proc_cpu.descendants(procs, 2) == {3, 4}
    assert proc_cpu.descendants(procs, 1) == {2, 3, 4, 5}
    assert proc_cpu.descendants(procs, 7) == set()


def _burner(seconds: float, then_sleep: float) -> subprocess.Popen[str]:
    """A child that burns `seconds` of CPU, says so on stdout, then sleeps."""
    code = BURN.format(s=seconds) + f"print('burnt', flush=True)\ntime.sleep({then_sleep})\n"
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_sampler_counts_a_server_from_its_start_and_a_run_process_whole_even_after_it_exits():
    server = _burner(0.6, 60)
    try:
        assert server.stdout.readline().strip() == "burnt"  # before the sampler: none of it is the run's
        sampler = proc_cpu.CpuSampler({"minio": server.pid})
        start = sampler.sample()
        assert start["minio"] == pytest.approx(0.0, abs=0.05)
        child = _burner(0.8, 1.0)
        assert child.stdout.readline().strip() == "burnt"
        mid = sampler.sample()  # the child has burnt its CPU and still sleeps
        child.wait()
        end = sampler.sample()  # the child is gone: its last sampled value stays
    finally:
        server.kill()
        server.wait()
    assert mid["runtime"] >= 0.75
    assert end["runtime"] == pytest.approx(mid["runtime"])
    assert end["minio"] == pytest.approx(0.0, abs=0.05)
    assert end["jvm"] == 0.0 and end["toxiproxy"] == 0.0


def test_in_window_interpolates_between_samples_and_refuses_times_outside():
    samples = [(10.0, {"jvm": 0.0, "minio": 1.0}), (20.0, {"jvm": 10.0, "minio": 1.0}),
               (30.0, {"jvm": 30.0, "minio": 5.0})]
    got = proc_cpu.in_window(samples, 15.0, 25.0)
    assert got == {"jvm": 15.0, "runtime": 0.0, "minio": 2.0, "toxiproxy": 0.0}
    with pytest.raises(ValueError, match="outside"):
        proc_cpu.in_window(samples, 5.0, 25.0)


def test_cpu_table_reports_average_cores_and_cpu_per_batch():
    run = {"setup": "floor", "latency_ms": 20, "durations": [1.0] * 10, "window_seconds": 20.0,
           "cpu_window": {"jvm": 20.0, "runtime": 4.0, "minio": 2.0, "toxiproxy": 4.0}}
    old = {"setup": "sparkpoint-10s", "latency_ms": 20, "durations": [1.0], "window_seconds": 5.0}
    lines = cpu_table({"results": [run, dict(run), old]})
    rows = [x for x in lines if x.startswith("| 20 ms")]
    assert rows == ["| 20 ms | floor | 2 | 1.00 | 0.20 | 0.10 | 0.20 | 1.50 | 3.00 |"]
    assert cpu_table({"results": [old]}) == []


def test_batch_phases_are_seconds_per_batch_with_zero_for_a_missing_phase():
    from peers.common import batch_phases
    got = batch_phases([{"addBatch": 900, "walCommit": 20, "triggerExecution": 1000},
                        {"addBatch": 1500, "triggerExecution": 1600}])
    assert got == {"addBatch": [0.9, 1.5], "walCommit": [0.02, 0.0]}


def test_phase_table_reports_median_phase_per_setup_in_spark_order():
    def run(setup: str, add: list[float], wal: list[float]) -> dict:
        return {"setup": setup, "latency_ms": 0, "durations": [1.0] * len(add),
                "phases": {"walCommit": wal, "addBatch": add}}
    lines = phase_table({"results": [run("floor", [1.0, 2.0, 3.0], [0.1, 0.1, 0.2]), run("floor", [4.0], [0.3]),
                                     {"setup": "x", "latency_ms": 0, "durations": [1.0]}]})
    assert "| latency | setup | runs | addBatch | walCommit |" in lines
    assert "| 0 ms | floor | 2 | 2.500 | 0.150 |" in lines
    assert not any("| x |" in x for x in lines)  # a run without phases (recorded before) has no row
    assert phase_table({"results": [{"setup": "x", "latency_ms": 0, "durations": [1.0]}]}) == []
