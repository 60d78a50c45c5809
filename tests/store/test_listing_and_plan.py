"""The checkpoint's per-file costs (issue 10: a large state's checkpoint time grew with its file count):
the tree scan, the digest look-up, the S3 listing's own parser, and uploads that start while the
listing is read. Pure parts alone; the listing and the overlap on the real MinIO."""

from __future__ import annotations

import os
import threading
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

import pytest

from sparkpoint.runtime.checkpoint import CheckpointError, CheckpointWriter, restore, write_fence
from sparkpoint.runtime.checkpoint.hashing import HashCache, file_digests
from sparkpoint.runtime.checkpoint.plan import ReuseRules, early_uploads, needed_uploads
from sparkpoint.runtime.checkpoint.tree import scan_tree, tree_digests
from sparkpoint.runtime.store import ObjectInfo, ObjectStore
from sparkpoint.runtime.store.layout import object_key
from sparkpoint.runtime.store.s3 import S3Store
from sparkpoint.runtime.store.s3_listing import PAGE_KEYS, parse_page
from tests.conftest import TEST_BUCKET

from .trees import change_files, tree_digest, write_tree

NS = "http://s3.amazonaws.com/doc/2006-03-01/"


# --- the tree ------------------------------------------------------------------------------------
def test_scan_lists_every_regular_file_once_sorted_by_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 30)
    (tmp_path / "hot" / "empty-dir").mkdir()
    (tmp_path / "hot" / "a-b").write_bytes(b"x")  # '-' sorts before '/': order is by full path
    found = scan_tree(tmp_path / "hot")
    rels = [rel for rel, _, _ in found]
    assert rels == sorted(rels)
    assert set(rels) == {p.relative_to(tmp_path / "hot").as_posix() for p in paths} | {"a-b"}
    for rel, path, st in found:
        assert path == tmp_path / "hot" / rel and st.st_size == os.path.getsize(path)


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_scan_refuses_what_is_not_a_regular_file_and_names_it(tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 4)
    odd = tmp_path / "hot" / "state" / "odd"
    if kind == "symlink":
        odd.symlink_to(tmp_path / "hot" / "offsets")
    else:
        os.mkfifo(odd)
    with pytest.raises(CheckpointError, match=f"{odd}: only regular files"):
        scan_tree(tmp_path / "hot")


def test_scan_refuses_a_missing_directory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CheckpointError, match="not a directory"):
        scan_tree(tmp_path / "nowhere")


def test_digests_read_only_the_files_the_cache_does_not_know(tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 20)
    cache = HashCache(None)
    first = tree_digests(scan_tree(tmp_path / "hot"), cache, 4, lambda: None)
    assert cache.misses == 20
    change_files(paths, 3)
    files = scan_tree(tmp_path / "hot")
    again = tree_digests(files, cache, 4, lambda: None)
    assert cache.misses == 23 and cache.hits == 17
    assert again == [file_digests(path) for _, path, _ in files]
    assert sum(a != b for a, b in zip(first, again, strict=True)) == 3


def test_digests_stop_when_asked_between_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 8)
    calls = []

    def stop() -> None:
        calls.append(1)
        if len(calls) > 2:
            raise TimeoutError("abandoned")
    with pytest.raises(TimeoutError):
        tree_digests(scan_tree(tmp_path / "hot"), HashCache(None), 1, stop)


# --- the plan ------------------------------------------------------------------------------------
def _info(sha: str, size: int, age: float, now: float = 1000.0) -> ObjectInfo:
    return ObjectInfo(key=f"objects/{sha[:2]}/{sha}", size=size, last_modified=now - age)


def test_early_uploads_are_exactly_those_no_listing_could_spare() -> None:
    rules = ReuseRules(base=frozenset({"b1", "b2"}), carried=frozenset({"c1"}), reuse_window_seconds=0)
    shas = ["b1", "c1", "n1", "n2", "b2"]
    assert early_uploads(rules, shas) == ["n1", "n2"]
    # Whatever the store holds, the plan uploads them too: listing first cannot change the outcome.
    sizes = dict.fromkeys(shas, 10)
    for held in ({}, {sha: _info(sha, 10, age=0.0) for sha in shas}):
        assert set(early_uploads(rules, shas)) <= set(needed_uploads(rules, sizes, held, 1000.0))


def test_a_reuse_window_or_full_upload_changes_what_goes_early() -> None:
    windowed = ReuseRules(base=frozenset(), carried=frozenset(), reuse_window_seconds=300)
    assert early_uploads(windowed, ["n1"]) == []  # a young copy may be reused: wait for the listing
    held = {"n1": _info("n1", 10, age=10.0)}
    assert needed_uploads(windowed, {"n1": 10}, held, 1000.0) == []
    assert needed_uploads(windowed, {"n1": 10}, {"n1": _info("n1", 10, age=301.0)}, 1000.0) == ["n1"]
    full = ReuseRules(base=frozenset({"b1"}), carried=frozenset(), reuse_window_seconds=0, full_upload=True)
    assert early_uploads(full, ["b1", "n1"]) == ["b1", "n1"]
    assert needed_uploads(full, {"b1": 10}, {"b1": _info("b1", 10, 0.0)}, 1000.0) == ["b1"]


def test_base_objects_missing_or_of_the_wrong_size_are_uploaded_again() -> None:
    rules = ReuseRules(base=frozenset({"b1", "b2", "b3"}), carried=frozenset(), reuse_window_seconds=0)
    held = {"b1": _info("b1", 10, 99.0), "b2": _info("b2", 9, 99.0)}
    assert needed_uploads(rules, {"b1": 10, "b2": 10, "b3": 10}, held, 1000.0) == ["b2", "b3"]


# --- the listing ---------------------------------------------------------------------------------
def _page(entries: list[tuple[str, str, str]], *, truncated: bool = False, token: str | None = None,
          encoded: bool = True) -> bytes:
    contents = "".join(f"<Contents><Key>{k}</Key><LastModified>{m}</LastModified><ETag>\"e\"</ETag>"
                       f"<Size>{s}</Size><StorageClass>STANDARD</StorageClass></Contents>" for k, s, m in entries)
    return (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="{NS}"><Name>b</Name>'
            f"<Prefix>p/</Prefix>{'<EncodingType>url</EncodingType>' if encoded else ''}"
            f"<KeyCount>{len(entries)}</KeyCount><MaxKeys>1000</MaxKeys>"
            f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
            f"{f'<NextContinuationToken>{token}</NextContinuationToken>' if token else ''}{contents}"
            "</ListBucketResult>").encode()


def test_a_page_gives_key_size_and_time_and_the_next_token() -> None:
    body = _page([("p/objects/ab/ab12", "42", "2026-11-23T09:40:12.345Z"), ("p/a%20b%2Bc", "0", "2026-11-23T09:40:13Z"),
                  ("p/folder/", "0", "2026-11-23T09:40:13Z")], truncated=True, token="tok==")
    entries, token = parse_page(body)
    assert entries == [("p/objects/ab/ab12", 42, 1795426812.345), ("p/a b+c", 0, 1795426813.0)]
    assert token == "tok=="
    assert parse_page(_page([("p/x%2By", "1", "2026-11-23T09:40:13Z")], encoded=False))[0][0][0] == "p/x%2By"
    assert parse_page(_page([])) == ([], None)


@pytest.mark.parametrize("body", [
    _page([], truncated=True),  # a truncated page must say where to go on
    _page([("p/k", "1", "2026-11-23T09:40:13Z")]).replace(b"<Size>1</Size>", b""),
    b"<html>proxy error</html",
])
def test_an_unreadable_page_is_an_error_not_a_short_listing(body: bytes) -> None:
    with pytest.raises((ValueError, ET.ParseError)):  # S3Store.list wraps both as an invalid response
        parse_page(body)


@pytest.mark.minio
def test_a_listing_longer_than_a_page_is_complete_and_in_order(minio_server) -> None:  # type: ignore[no-untyped-def]
    store = S3Store(minio_server.endpoint, TEST_BUCKET, f"t-pages-{os.getpid()}", minio_server.access_key,
                    minio_server.secret_key)
    keys = [f"objects/{i % 256:02x}/{i:06d}" for i in range(PAGE_KEYS + 37)] + ["odd/a b+c=d&e", "odd/ünï"]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: store.put_bytes(k, k.encode()), keys))
    listed = list(store.list(""))
    assert [i.key for i in listed] == sorted(keys)
    assert all(i.size == len(i.key.encode()) for i in listed)
    assert [i.key for i in store.list("objects/0")] == sorted(k for k in keys if k.startswith("objects/0"))
    assert list(store.list("nothing/")) == []


# --- the overlap ---------------------------------------------------------------------------------
class SlowListing:
    """A real store whose listing of objects/ waits until an upload has started (or 10 s)."""

    def __init__(self, inner: ObjectStore):
        self.inner, self.upload_started = inner, threading.Event()
        self.uploads_before_listing: int | None = None
        self.uploads = 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)

    def put_file(self, key: str, path: str) -> None:
        self.uploads += 1
        self.upload_started.set()
        self.inner.put_file(key, path)

    def list(self, prefix: str):  # type: ignore[no-untyped-def]
        if prefix.endswith("objects/"):
            self.upload_started.wait(10)
            self.uploads_before_listing = self.uploads
        return self.inner.list(prefix)


def test_new_files_upload_while_the_listing_is_read_and_lost_ones_still_heal(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 16)
    fence = write_fence(store, job)
    first = CheckpointWriter(store, job, attempt=fence, job_uid="u", reuse_window_seconds=0).take_checkpoint(
        tmp_path / "hot", batch_id=1)
    lost = first.manifest.files[0]
    store.delete(object_key(job, lost.sha256))
    change_files([p for p in paths if not p.as_posix().endswith(lost.path)], 4)
    slow = SlowListing(store)
    writer = CheckpointWriter(slow, job, attempt=fence, job_uid="u", reuse_window_seconds=0)  # type: ignore[arg-type]
    second = writer.take_checkpoint(tmp_path / "hot", batch_id=2)
    assert slow.uploads_before_listing and slow.uploads_before_listing >= 1, "no upload overlapped the listing"
    assert second.uploaded_objects == 5, "4 changed files and the lost one, each once"
    restore(store, job, tmp_path / "out", checkpoint_id=second.id)
    assert tree_digest(tmp_path / "out") == tree_digest(tmp_path / "hot")
