"""History snapshots (runtime/sink/history.py): readers, starts and output GC read a sink's history in
segments, so their cost stops growing with the job's age, and what they see is exactly what walking
the entries one by one sees. Directory store (the walk is backend-agnostic)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.cli import output as cli_output
from sparkpoint.runtime.sink import history, transactional
from sparkpoint.runtime.sink.history import SegmentReader, compact_forward, snapshot_ids, snapshot_key
from sparkpoint.runtime.sink.history_stream import HistoryStream
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.keys import commit_key
from sparkpoint.runtime.sink.lineage import follow_chain, head_entry
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.reader import _entry_ids, _loader, committed_entries, read_committed
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.directory import DirectoryStore

from .test_output_gc import ACTIONS, Model, later, write_manifest
from .test_sink import FakeBatch, fake_write_files


class CountingStore(DirectoryStore):
    """A directory store that counts GETs and listed keys."""

    def __init__(self, root):  # type: ignore[no-untyped-def]
        super().__init__(root, fsync=False)
        self.gets: list[str] = []
        self.listed = 0

    def get_bytes(self, key: str) -> bytes:
        self.gets.append(key)
        return super().get_bytes(key)

    def list(self, prefix: str):  # type: ignore[no-untyped-def]
        for info in super().list(prefix):
            self.listed += 1
            yield info

    def list_after(self, prefix: str, start_after: str):  # type: ignore[no-untyped-def]
        for info in super().list_after(prefix, start_after):
            self.listed += 1
            yield info


def aged_store(root: Path, n: int, segment: int | None, page: int | None = None,
               hints: bool = True) -> tuple[CountingStore, JobRef]:
    """A transactional sink's store aged `n` checkpoints (one linear history, one file per entry, the
    last 3 checkpoints retained), snapshotted every `segment` entries (None: as before snapshots),
    each entry naming the newest snapshot before it as the runtime's do (`hints`)."""
    store, job = CountingStore(root), JobRef("default", "aged")
    write_fence(store, job)
    previous = None
    for i in range(n):
        cid = f"chk-{i + 1:06d}"
        key = f"{job.root}/outputs/default/staging/attempt-1/batch-{i:09d}-0a0a0a0a0a0a/part-00000.json"
        store.put_bytes(key, json.dumps({"v": i}).encode() + b"\n")
        files = [{"batch": i, "rows": 1, "format": "jsonl", "keys": [key]}]
        entry = {"checkpoint": cid, "attempt": 1, "previous": previous, "afterBatch": i - 1, "upToBatch": i,
                 "files": files}
        hint = {"snapshot": f"chk-{i // segment * segment:06d}"} if segment and hints and i >= segment else {}
        entry.update(hint)
        store.put_bytes(commit_key(job, "default", cid), json.dumps(entry).encode())
        if i >= n - 3:
            write_manifest(store, job, cid, 1, {"sink": {"kind": "transactional", "path": "default", "attempt": 1,
                                                         "previous": previous, "afterBatch": i - 1,
                                                         "upToBatch": i, "files": files, **hint}})
        previous = cid
    if segment:
        compact_forward(store, job, "default", previous, 1, _loader(store, job, "default"), segment=segment,
                        page=page)
    return store, job


def gc_gets(store: CountingStore, job: JobRef) -> int:
    store.gets.clear()
    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert not result.skipped_paths and result.deleted_files == 0 and not result.deleted_entries
    return len(store.gets)


def test_a_gc_pass_reads_the_history_in_segments_not_entry_by_entry(tmp_path):
    n, segment = 100, 20
    young, _ = aged_store(tmp_path / "young", n, segment)
    old, job = aged_store(tmp_path / "old", 4 * n, segment)
    young_gets, old_gets = gc_gets(young, JobRef("default", "aged")), gc_gets(old, job)
    # before snapshots: 4N + 1 GETs (the head's walk and one per retained point, every entry each time);
    # now: the fence, the 3 points' manifests, the head and the entries after its newest snapshot (at
    # most a segment), then one GET per segment: 3N / segment more at 4N
    assert old_gets - young_gets <= 3 * n // segment
    # (and the cursor the full pass leaves, gc_cursor.py: the head, the points' walks until they meet)
    assert old_gets <= 5 + segment + 4 * n // segment + 10 < 4 * n
    assert [r["v"] for r in read_committed(old, job)] == list(range(4 * n))
    # the next passes start from the cursor: the same GETs and listed keys at any age
    young.listed = old.listed = 0
    # (the fence, the attempt claim, 3 manifests, the cursors, the entries since the newest snapshot, 2 snapshots)
    assert gc_gets(young, JobRef("default", "aged")) == gc_gets(old, job) <= 6 + segment + 3
    assert young.listed == old.listed < 2 * segment


def test_a_store_from_before_snapshots_reads_the_same_and_is_compacted_forward(tmp_path):
    store, job = aged_store(tmp_path / "s", 45, None)
    before = committed_entries(store, job, "default")
    with mock.patch.object(transactional, "SEGMENT", 10):
        sink = transactional.TransactionalSink(store, job, attempt=write_fence(store, job), path="default",
                                               journal=SinkJournal(tmp_path / "journal"),
                                               write_files=fake_write_files)
        sink.resume("chk-000045", None)  # no sink section: continues the head readers see
        assert snapshot_ids(store, job, "default") == set()  # the start itself reads nothing more
        sink.write_batch(FakeBatch([{"v": 45}]), 45)
        extra = sink.manifest_extra(45)
        sink.upload_staged(extra)
        sink.publish("chk-000046", extra)  # the first publish compacts the old history forward
    assert snapshot_ids(store, job, "default") == {"chk-000010", "chk-000020", "chk-000030", "chk-000040"}
    assert committed_entries(store, job, "default") == [*before, json.loads(store.get_bytes(
        commit_key(job, "default", "chk-000046")))]
    assert [r["v"] for r in read_committed(store, job)] == list(range(46))


def test_gc_collects_the_snapshots_of_a_history_nothing_needs_and_keeps_the_rest(tmp_path):
    store, job = aged_store(tmp_path / "s", 30, 10)
    # an abandoned branch's snapshot (a history that forked off chk-000020; no entry or point leads to it)
    branch = {"checkpoint": "chk-000099", "attempt": 1, "previous": "chk-000020", "afterBatch": 19,
              "upToBatch": 20, "files": []}
    store.put_bytes(snapshot_key(job, "default", "chk-000099"),
                    json.dumps({"checkpoint": "chk-000099", "attempt": 1, "base": "chk-000020",
                                "entries": [branch]}).encode())
    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert result.deleted_snapshots == 1
    assert snapshot_ids(store, job, "default") == {"chk-000010", "chk-000020", "chk-000030"}
    assert output_gc_pass(store, job, grace_seconds=3600).deleted_snapshots == 0  # and inside the grace: none
    assert [r["v"] for r in read_committed(store, job)] == list(range(30))


def test_output_read_walks_the_history_once(tmp_path):
    store, job = aged_store(tmp_path / "s", 50, None)
    store.gets.clear()
    summary = cli_output._summary(store, job, "default")
    rows = list(cli_output.iter_committed(store, job, "default", summary["batches"]))
    entry_reads = [k for k in store.gets if "/_commits/" in k]
    assert len(rows) == 50 and summary["head"] == "chk-000050"
    assert len(entry_reads) == len(set(entry_reads)) == 50  # before: twice each, and the head once more


def _read_entry_by_entry(store, job, ever: dict[str, dict]) -> list[dict]:  # type: ignore[no-untyped-def]
    """The history from the head, walked entry by entry over every entry ever written (`ever`: GC
    deletes the entries a snapshot holds once no walk reads them)."""
    ids, load = _entry_ids(store, job, "default"), _loader(store, job, "default")
    for key in (o.key for o in store.list(f"{job.root}/outputs/default/_commits/")):
        ever.setdefault(key.rsplit("/", 1)[-1][:-5], json.loads(store.get_bytes(key)))
    return follow_chain(head_entry(ids, load), sorted(ever), ever.get)


@settings(max_examples=60, deadline=None)
@given(st.lists(ACTIONS, min_size=1, max_size=40))
def test_with_snapshots_every_two_entries_readers_and_gc_see_exactly_the_entries_history(actions):
    """The output GC property test's model (restores, savepoints, crashes, GC passes) with a snapshot
    every 2 entries: after every step the history read through snapshots is the one the entries
    name (all of them, also those GC deleted because a snapshot holds them), readers see exactly the
    durable rows, and GC keeps what a restore needs."""
    with (tempfile.TemporaryDirectory() as tmp, mock.patch.object(transactional, "SEGMENT", 2),
          mock.patch.object(history, "PAGE", 2)):
        root = Path(tmp)
        model = Model(store=open_store(f"file://{root}/store"), job=JobRef("default", "prop"), root=root)
        ever: dict[str, dict] = {}
        for action, arg in actions:
            _read_entry_by_entry(model.store, model.job, ever)  # remember the entries before a step's GC
            model.step(action, arg)
            ids, load = _entry_ids(model.store, model.job, "default"), _loader(model.store, model.job, "default")
            through = follow_chain(head_entry(ids, load), ids, load, SegmentReader(model.store, model.job, "default"))
            assert through == _read_entry_by_entry(model.store, model.job, ever), (action, arg)
            assert [r["v"] for r in read_committed(model.store, model.job)] == list(range(model.durable))
            # the stream jumps by the newest snapshot's index and totals: the same items and summary
            stream = HistoryStream(model.store, model.job, "default")
            items = [item for e in through for item in e.get("files", [])]
            assert [i["keys"] for i in stream.items()] == [i["keys"] for i in items], (action, arg)
            assert (stream.summary.batches, stream.summary.rows) == (len(items), sum(i["rows"] for i in items))
            assert (stream.summary.first, stream.summary.last) == ((items[0]["batch"], items[-1]["batch"])
                                                                   if items else (None, None))


def test_a_readers_walk_costs_one_get_per_segment(tmp_path):
    """A reader's walk of a snapshotted history of 2,000 entries: the head, then one GET per segment."""
    store, job = aged_store(tmp_path / "s", 2000, 500)
    store.gets.clear()
    entries = committed_entries(store, job, "default")
    assert [e["checkpoint"] for e in entries] == [f"chk-{i:06d}" for i in range(1, 2001)]
    assert len(store.gets) == 1 + 2000 // 500  # before: 2,000


def test_gc_deletes_the_entries_snapshots_hold_so_starts_and_readers_list_only_the_recent_ones(tmp_path):
    store, job = aged_store(tmp_path / "s", 400, 20)
    rows = read_committed(store, job)
    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    # snapshots end at every 20th entry; a walk from the oldest kept point (chk-398: from its predecessor
    # chk-397) reads chk-397..381 one by one and takes the rest from snapshots, from chk-380 down: the
    # entries before chk-380 are in snapshots and no walk reads them from _commits/ any more
    assert result.deleted_snapshotted_entries == 379 and not result.deleted_entries and not result.deleted_files
    assert sorted(_entry_ids(store, job, "default")) == [f"chk-{i:06d}" for i in range(380, 401)]
    assert read_committed(store, job) == rows
    again = output_gc_pass(store, job, grace_seconds=0, clock=later)  # a pass reads the store it leaves
    assert not again.skipped_paths and again.deleted_snapshotted_entries == 0 and again.deleted_files == 0
    store.listed = 0
    with mock.patch.object(transactional, "SEGMENT", 20):  # a start restores the oldest kept point
        sink = transactional.TransactionalSink(store, job, attempt=write_fence(store, job), path="default",
                                               journal=SinkJournal(tmp_path / "journal"),
                                               write_files=fake_write_files)
        from sparkpoint.runtime.checkpoint.catalog import load_manifest

        sink.resume("chk-000398", load_manifest(store, job, "chk-000398").extra)
    assert store.listed < 50  # the 21 entries left and the 20 snapshots; before: every entry, 400
    assert [r["v"] for r in read_committed(store, job)] == list(range(398))


def test_an_entry_under_the_id_of_another_histories_snapshot_is_a_conflict_not_a_new_history(tmp_path):
    """An earlier job of the same name left a snapshot at chk-000002 (GC had deleted the entries it
    holds): the new job's chk-000002 must not be published as if nothing held that id, or walks
    through it would read the earlier job's rows."""
    import pytest

    store, job = aged_store(tmp_path / "s", 2, 2)  # the earlier job: a snapshot ending at chk-000002
    for cid in ("chk-000001", "chk-000002"):
        store.delete(commit_key(job, "default", cid))
    sink = transactional.TransactionalSink(store, job, attempt=write_fence(store, job), path="default",
                                           journal=SinkJournal(tmp_path / "journal"), write_files=fake_write_files)
    sink.resume(None, None)
    for cid, batch in (("chk-000001", 0), ("chk-000002", 1)):
        sink.write_batch(FakeBatch([{"v": f"new-{batch}"}]), batch)
        extra = sink.manifest_extra(batch)
        sink.upload_staged(extra)
        if cid == "chk-000002":
            with pytest.raises(transactional.CommitEntryConflict):
                sink.publish(cid, extra)
        else:
            sink.publish(cid, extra)
    assert not store.exists(commit_key(job, "default", "chk-000002"))


def test_a_restore_of_a_point_whose_predecessor_gc_took_into_a_snapshot_reads_its_own_history(tmp_path):
    """A kept point left retention during a GC pass (so the pass did not protect its predecessor's
    entry) and is restored anyway: the predecessor is read from the snapshot that holds it, and the
    restored history is the point's own, not a new empty one."""
    store, job = aged_store(tmp_path / "s", 400, 20)
    output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert not store.exists(commit_key(job, "default", "chk-000100"))  # held by the snapshot ending at chk-000120
    files = [{"batch": 100, "rows": 1, "format": "jsonl",
              "keys": [f"{job.root}/outputs/default/staging/attempt-1/batch-{100:09d}-0a0a0a0a0a0a/part-00000.json"]}]
    extra = {"sink": {"kind": "transactional", "path": "default", "attempt": 1, "previous": "chk-000100",
                      "afterBatch": 99, "upToBatch": 100, "files": files}}
    store.delete(commit_key(job, "default", "chk-000101"))  # its entry too (what a savepoint of it would restore)
    sink = transactional.TransactionalSink(store, job, attempt=write_fence(store, job), path="default",
                                           journal=SinkJournal(tmp_path / "journal"), write_files=fake_write_files)
    sink.resume("chk-000101", extra)
    assert [r["v"] for r in read_committed(store, job)] == list(range(101))
    write_manifest(store, job, "chk-000101", 1, extra)  # kept again (a savepoint of it, say): GC reads its history
    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert not result.skipped_paths and [r["v"] for r in read_committed(store, job)] == list(range(101))


def test_a_branched_history_read_through_index_pages_is_its_own(tmp_path):
    """The runtime's own sink, a snapshot per entry and pages of 2: 8 checkpoints, a restore of the
    third, 6 more. The restored branch's snapshots index its own chain (the first three, then its
    own), and the stream reads exactly the entries the chain names, through pages."""
    with mock.patch.object(transactional, "SEGMENT", 1), mock.patch.object(history, "PAGE", 2):
        model = Model(store=open_store(f"file://{tmp_path}/store"), job=JobRef("default", "branch"), root=tmp_path)
        for _ in range(8):
            model.step("batch", 2)
            model.step("checkpoint", 0)
        model.sink = model.attempt(SinkJournal(tmp_path / "pod-branch"))
        model.sink.resume("chk-000003", model.points["chk-000003"][1])
        model.pos, model.batch = model.points["chk-000003"][0], 2
        for _ in range(6):
            model.step("batch", 3)
            model.step("checkpoint", 0)
    store, job = model.store, model.job
    head = json.loads(store.get_bytes(snapshot_key(job, "default", "chk-000014")))
    # pages of 2: every second snapshot of the chain (1, 2, 3, 9, ..., 14) names the one before it
    assert head["index"] == {"pages": ["chk-000002", "chk-000009", "chk-000011", "chk-000013"], "since": []}
    assert head["totals"] == {"batches": 9, "rows": 3 * 2 + 6 * 3, "first": 0, "last": 8}
    stream = HistoryStream(store, job, "default")
    assert stream.pieces == [("snapshot", "chk-000014"), ("page", "chk-000013"), ("page", "chk-000011"),
                             ("page", "chk-000009"), ("page", "chk-000002")]
    through = committed_entries(store, job, "default")
    assert [e["checkpoint"] for e in through] == [f"chk-{i:06d}" for i in (1, 2, 3, *range(9, 15))]
    assert [i["keys"] for i in stream.items()] == [i["keys"] for e in through for i in e["files"]]
    assert [r["v"] for r in read_committed(store, job)] == list(range(6 + 18))


def test_a_walk_lists_the_snapshots_between_its_hint_and_its_head_across_the_width_of_ids(tmp_path):
    """Past chk-999999 ids are 7 digits wide and sort among the 6-digit ones (chk-1000000 < chk-200000):
    a listing from the hint on would take every older 6-digit snapshot with larger leading digits (at a
    year, 600). The listing is of the digits hint and head share, from the hint on: only the chain's
    recent snapshots, at any width; while head and hint differ in width, all are listed."""
    from sparkpoint.runtime.sink.history import chain_snapshot_ids

    store, job = CountingStore(tmp_path), JobRef("default", "wide")
    ids = [f"chk-{n:06d}" for n in range(1000, 1_000_000, 1000)] + [f"chk-{n}" for n in range(1_000_000, 3_152_000, 1000)]
    for cid in ids:
        store.put_bytes(snapshot_key(job, "default", cid), b"{}")
    store.listed = 0
    assert chain_snapshot_ids(store, job, "default", "chk-3150857", "chk-3150000") == {"chk-3150000"}
    assert store.listed == 1
    store.listed = 0
    assert chain_snapshot_ids(store, job, "default", "chk-3151857", "chk-3149000") == {
        "chk-3149000", "chk-3150000", "chk-3151000"}
    assert store.listed <= 3 + 10  # and the ten 6-digit chk-31x000 the prefix chk-31 holds
    assert chain_snapshot_ids(store, job, "default", "chk-1000500", "chk-999000") == set(ids)  # the crossing
    assert chain_snapshot_ids(store, job, "default", "chk-000700", None) == set(ids)  # an entry without a hint
