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


def test_the_first_rows_cost_the_same_requests_at_any_age(tmp_path, capsys, monkeypatch):
    """Snapshots name the ones before them (an index, in pages) and the history's totals, and entries
    name a snapshot of their chain: `output read --limit 10` reads the newest snapshot, the first page
    and the first snapshot, and lists `_snapshots/` from the head's snapshot on, at 16x the age too
    (before: one GET per snapshot and every snapshot listed; a year of 10 s checkpoints: ~3,150 each)."""
    n, segment, page = 100, 10, 4
    _read_first_rows(*aged_store(tmp_path / "warm", 30, segment, page), capsys, monkeypatch)
    reads = {}
    for name, age in (("young", n), ("old", 16 * n)):
        store, job = aged_store(tmp_path / name, age, segment, page)
        _, gets, lines = _read_first_rows(store, job, capsys, monkeypatch)
        assert lines[0].endswith(f": {age} committed (batches 0..{age - 1}), {age} rows, head chk-{age:06d}")
        assert [json.loads(x) for x in lines[1:]] == [{"v": i} for i in range(10)]
        store.listed = 0
        monkeypatch.setattr(cli_common, "open_store", lambda url, s=store, **kw: s)
        assert main(["output", "read", "--store", store.url, "--job", str(job), "--limit", "10"]) == 0
        capsys.readouterr()
        reads[name] = (gets, store.listed)
    assert reads["old"] == reads["young"], reads
    assert reads["old"][0] == 4 + 10  # the head, its snapshot, a page, the first snapshot; 10 part files


def test_a_stream_over_snapshots_from_before_the_index_reads_the_same_and_the_next_one_carries_it(tmp_path):
    """Snapshots written before `index` existed: a reader walks them as before; the next snapshot
    computes the index once and readers then jump, reading exactly the same rows."""
    from sparkpoint.runtime.sink.history import compact_forward, snapshot_key
    from sparkpoint.runtime.sink.reader import _loader

    store, job = aged_store(tmp_path / "s", 95, 10, 3, hints=False)
    for i in range(10, 91, 10):  # as an older runtime wrote them
        key = snapshot_key(job, "default", f"chk-{i:06d}")
        doc = json.loads(store.get_bytes(key))
        store.put_bytes(key, json.dumps({k: v for k, v in doc.items() if k not in ("index", "totals")}).encode())
    whole = committed_files(store, job, "default")
    legacy = HistoryStream(store, job, "default")
    assert len(legacy.pieces) == 9 + 5 and [i["keys"] for i in legacy.items()] == [f["keys"] for f in whole]
    fresh, _ = aged_store(tmp_path / "fresh", 100, 10, 3, hints=False)
    extended, _ = aged_store(tmp_path / "ext", 100, None, hints=False)
    for i in range(10, 91, 10):  # the old snapshots again, then one written by this code
        key = snapshot_key(job, "default", f"chk-{i:06d}")
        extended.put_bytes(key, store.get_bytes(key))
    assert compact_forward(extended, job, "default", "chk-000100", 1, _loader(extended, job, "default"),
                           segment=10, page=3) == (1, "chk-000100")
    newest = snapshot_key(job, "default", "chk-000100")
    assert json.loads(extended.get_bytes(newest)) == json.loads(fresh.get_bytes(newest))
    stream = HistoryStream(extended, job, "default")
    assert (stream.summary.batches, stream.summary.first, stream.summary.last) == (100, 0, 99)
    assert len(stream.pieces) == 1 + 0 + 3  # chk-100, then the pages chk-90, chk-60, chk-30
    assert [i["keys"] for i in stream.items()] == [f["keys"] for f in committed_files(extended, job, "default")]
