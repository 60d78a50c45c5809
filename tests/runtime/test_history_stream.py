"""Reading a history oldest first in bounded memory (runtime/sink/history_stream.py): `sparkpoint output
read --limit 10` over a store N and 4N checkpoints old holds the same memory and makes the same
requests, and applying compaction records a window at a time gives exactly what applying them to the
whole history gives."""

from __future__ import annotations

import json
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.cli import common as cli_common
from sparkpoint.runtime.cli import main
from sparkpoint.runtime.sink.compaction import apply_records
from sparkpoint.runtime.sink.history_stream import HistoryStream, apply_in_windows
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.reader import committed_files

from .test_history_snapshots import aged_store
from .test_output_gc import later


def _read_first_rows(store, job, capsys, monkeypatch) -> tuple[int, int, list[str]]:  # type: ignore[no-untyped-def]
    """(peak bytes traced, GETs, printed lines) of `output read --limit 10` (on the counting store),
    after a GC pass (which deletes the entries snapshots hold, as in a job's store)."""
    output_gc_pass(store, job, grace_seconds=0, clock=later)
    monkeypatch.setattr(cli_common, "open_store", lambda url, **kw: store)
    store.gets.clear()
    tracemalloc.start()
    try:
        assert main(["output", "read", "--store", store.url, "--job", str(job), "--limit", "10"]) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, len(store.gets), capsys.readouterr().out.splitlines()


def test_reading_the_first_rows_holds_a_segment_not_the_jobs_whole_history(tmp_path, capsys, monkeypatch):
    n = 400
    _read_first_rows(*aged_store(tmp_path / "warm", 30, 20), capsys, monkeypatch)  # imports are not the read's
    young = _read_first_rows(*aged_store(tmp_path / "young", n, 20), capsys, monkeypatch)
    old = _read_first_rows(*aged_store(tmp_path / "old", 4 * n, 20), capsys, monkeypatch)
    assert old[2][0].endswith(f": {4 * n} committed (batches 0..{4 * n - 1}), {4 * n} rows, head chk-{4 * n:06d}")
    assert [json.loads(x) for x in old[2][1:]] == [{"v": i} for i in range(10)]
    # before: every entry of the history held (peak 4x the young store's) and 2 GETs per segment
    assert old[0] < 1.3 * young[0], (young[0], old[0])
    assert old[1] <= young[1] + 3 * n // 20 + 1, (young[1], old[1])


def test_the_stream_reads_what_the_whole_history_reads(tmp_path):
    store, job = aged_store(tmp_path / "s", 95, 20)  # 4 snapshots and 15 entries after them
    stream = HistoryStream(store, job, "default")
    whole = committed_files(store, job, "default")
    assert [f["batch"] for f in whole] == list(range(95))
    assert (stream.summary.batches, stream.summary.rows, stream.summary.first, stream.summary.last) == (95, 95, 0, 94)
    assert len(stream.pieces) == 4 + 15 and not stream.overlap
    assert [item["keys"] for item in stream.items()] == [f["keys"] for f in whole]


@st.composite
def _history_and_records(draw):  # type: ignore[no-untyped-def]
    """Items of consecutive batches (some missing) and records made as compaction makes them: runs of
    consecutive items of the history as compacted so far (so a record may replace an earlier one's
    file), plus records of runs no history holds."""
    batches = sorted(draw(st.sets(st.integers(0, 60), min_size=1, max_size=40)))
    items = [{"batch": b, "rows": 1, "format": "parquet", "keys": [f"b{b}"]} for b in batches]
    current, records = list(items), []
    for n in range(draw(st.integers(0, 8))):
        if draw(st.booleans()) and len(current) >= 2:
            i = draw(st.integers(0, len(current) - 2))
            j = draw(st.integers(i + 2, min(len(current), i + 12)))
            run = current[i:j]
        else:  # a record of another branch's files
            run = [{"batch": b, "keys": [f"other{n}-{b}"]} for b in range(draw(st.integers(0, 50)), 55)][:3]
        record = {"id": f"cmp-000001-{n:06d}", "replaces": [it["keys"] for it in run], "key": f"c{n}",
                  "batch": run[0]["batch"], "lastBatch": run[-1].get("lastBatch", run[-1]["batch"]),
                  "batches": len(run), "rows": len(run), "size": 1}
        records.append(record)
        current = apply_records(current, [record])
    return items, records


@settings(max_examples=300, deadline=None)
@given(_history_and_records(), st.integers(1, 6))
def test_records_applied_a_window_at_a_time_are_the_whole_lists(history, window):
    items, records = history
    assert list(apply_in_windows(iter(items), records, window)) == apply_records(items, records)
