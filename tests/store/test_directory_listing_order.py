"""The directory store lists keys in S3's order (byte order of the whole key) while holding one chunk
of a folder's names at a time: names that sort around "/" and folders read in several chunks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.store import directory
from sparkpoint.runtime.store.directory import DirectoryStore

_SEGMENT = st.text(alphabet="ab-_.0/", min_size=1, max_size=4).filter(
    lambda s: all(p not in ("", ".", "..") for p in s.split("/")))


def _keys(raw: list[str]) -> set[str]:
    """Keys of which none is a folder of another (an object store's keys, as a directory can hold them)."""
    keys: set[str] = set()
    for k in sorted(raw, key=len):
        if not any(k.startswith(f"{o}/") or o.startswith(f"{k}/") for o in keys) and not k.startswith(".tmp"):
            keys.add(k)
    return keys


@settings(max_examples=60, deadline=None)
@given(raw=st.lists(_SEGMENT, min_size=1, max_size=25), held=st.integers(1, 4), cut=st.integers(0, 6))
def test_a_listing_is_in_byte_order_of_the_whole_key_with_any_chunk_of_names(tmp_path_factory, raw, held,
                                                                           cut) -> None:
    root = tmp_path_factory.mktemp("dir")
    store = DirectoryStore(root, fsync=False)
    keys = _keys(raw)
    for k in keys:
        store.put_bytes(k, b"x")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(directory, "_NAMES_HELD", held)
        for prefix in {"", *(k[:cut] for k in keys)}:
            assert [o.key for o in store.list(prefix)] == sorted(k for k in keys if k.startswith(prefix)), prefix


def test_a_folder_of_more_names_than_held_is_listed_whole_in_order(tmp_path, monkeypatch) -> None:
    store = DirectoryStore(tmp_path, fsync=False)
    keys = [f"s/staging/attempt-1/batch-{i:09d}-x/part-00000.parquet" for i in range(50)]
    keys += ["s/staging/attempt-1/batch-000000007-x-late/part-00000.parquet", "s/staging/attempt-1.json"]
    for k in keys:
        store.put_bytes(k, b"x")
    monkeypatch.setattr(directory, "_NAMES_HELD", 7)
    assert [o.key for o in store.list("s/staging/")] == sorted(keys)
    assert [o.key for o in store.list("s/staging/attempt-1/batch-00000004")] == sorted(
        k for k in keys if k.startswith("s/staging/attempt-1/batch-00000004"))
