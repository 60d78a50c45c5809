"""The full output GC pass's sets on disk (runtime/sink/gc_spill.py): exact ids, hashed keys, the
ordered look-ups of `_commits/`, and nothing left behind."""

from __future__ import annotations

import os

from sparkpoint.runtime.sink.gc_spill import Spill
from sparkpoint.runtime.sink.lineage import head_entry, head_of


def test_ids_are_exact_and_other_spellings_are_kept_apart(tmp_path) -> None:
    with Spill(str(tmp_path)) as spill:
        ids = spill.ids()
        ids.update(["chk-000001", "chk-1000000", "continue-a000003", "odd-id", "chk-0000007"])
        ids.add("chk-000001")
        assert len(ids) == 5
        assert "chk-000001" in ids and "chk-1000000" in ids and "continue-a000003" in ids
        assert "odd-id" in ids and "chk-0000007" in ids
        # neighbours by number or by spelling are not in: a deletion follows from "not in"
        assert "chk-000002" not in ids and "chk-000007" not in ids and "continue-a000001" not in ids
        assert "chk-100000" not in ids and "continue-a000002" not in ids and 5 not in ids
        assert spill.ids().__bool__() is False


def test_keys_are_members_after_any_number_of_buffered_inserts(tmp_path) -> None:
    with Spill(str(tmp_path)) as spill:
        keys = spill.keys()
        keys.update(f"j/outputs/default/staging/attempt-1/batch-{i:09d}/part-00000.parquet" for i in range(50_000))
        assert len(keys) == 50_000
        assert all(f"j/outputs/default/staging/attempt-1/batch-{i:09d}/part-00000.parquet" in keys
                   for i in range(0, 50_000, 997))
        assert not any(f"j/outputs/default/staging/attempt-2/batch-{i:09d}/part-00000.parquet" in keys
                       for i in range(0, 50_000, 997))


def test_commit_ids_answer_the_walks_ordered_questions_as_the_listing_does(tmp_path) -> None:
    listed = ["chk-000009", "chk-000010", "chk-999999", "chk-1000001", "continue-a000002",
              "continue-a000011", "something-else"]
    docs = {"chk-1000001": {"checkpoint": "chk-1000001", "attempt": 10},
            "continue-a000011": {"kind": "continuation", "attempt": 11, "previous": "chk-000010"}}
    with Spill(str(tmp_path)) as spill:
        commits = spill.commit_ids(listed)
        assert commits.newest_checkpoint() == "chk-1000001"
        assert commits.newest_continuation() == "continue-a000011"
        assert commits.checkpoint_before(1_000_001) == "chk-999999"
        assert commits.checkpoint_before(10) == "chk-000009"
        assert commits.checkpoint_before(9) is None
        assert list(commits.checkpoints()) == ["chk-000009", "chk-000010", "chk-999999", "chk-1000001"]
        assert commits.others() == {"something-else"}
        head = head_of(commits.newest_checkpoint(), commits.newest_continuation(), docs.get)
        assert head == head_entry(listed, docs.get) == docs["continue-a000011"]
        docs["chk-1000001"]["attempt"] = 12  # a newer attempt's checkpoint entry beats the continuation
        assert head_of(commits.newest_checkpoint(), commits.newest_continuation(), docs.get) == docs["chk-1000001"]


def test_a_spill_leaves_nothing_behind(tmp_path) -> None:
    with Spill(str(tmp_path)) as spill:
        spill.keys().update(["a", "b"])
        assert os.listdir(tmp_path)
    assert os.listdir(tmp_path) == []
