"""The ObjectStore primitives behave the same on the directory and MinIO backends."""

from __future__ import annotations

import hashlib
import threading
import zlib

import pytest

from sparkpoint.runtime.store import ObjectNotFoundError, ObjectStore
from sparkpoint.runtime.store.s3 import PART_SIZE


def test_bytes_round_trip_stat_delete(store: ObjectStore) -> None:
    store.put_bytes("a/b/c.json", b"hello")
    assert store.get_bytes("a/b/c.json") == b"hello"
    info = store.stat("a/b/c.json")
    assert info is not None and info.size == 5 and info.key == "a/b/c.json"
    store.put_bytes("a/b/c.json", b"bye")  # plain put overwrites
    assert store.get_bytes("a/b/c.json") == b"bye"
    store.delete("a/b/c.json")
    store.delete("a/b/c.json")  # idempotent
    assert store.stat("a/b/c.json") is None
    with pytest.raises(ObjectNotFoundError):
        store.get_bytes("a/b/c.json")


def test_list_is_recursive_sorted_and_prefix_exact(store: ObjectStore) -> None:
    for key in ["x/2", "x/1", "x/sub/3", "xy/4", "z"]:
        store.put_bytes(key, key.encode())
    assert [i.key for i in store.list("x/")] == ["x/1", "x/2", "x/sub/3"]
    assert [i.key for i in store.list("x")] == ["x/1", "x/2", "x/sub/3", "xy/4"]
    assert list(store.list("nothing/")) == []


def test_list_children_names_one_level_below_a_prefix(store: ObjectStore) -> None:
    for key in ["ns1/a/history/000001/000001/eventlog_v2_x/f", "ns1/a/objects/ab/cd", "ns1/b-2/fence.json",
                "ns2/c/history/f", "top.json", ".sparkpoint-check/conditional-put", "ns10/d/x"]:
        store.put_bytes(key, b"x")
    assert store.list_children("") == [".sparkpoint-check", "ns1", "ns10", "ns2"]  # not the file top.json
    assert store.list_children("ns1/") == ["a", "b-2"]
    assert store.list_children("ns1/a/") == ["history", "objects"]
    assert store.list_children("ns1/b-2/") == []  # only a file there
    assert store.list_children("nothing/") == []
    store.delete("ns2/c/history/f")
    assert "ns2" not in store.list_children("")  # no key left below it (S3 has no empty folders)


def test_put_if_absent_has_exactly_one_winner_under_contention(store: ObjectStore) -> None:
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def contend(i: int) -> None:
        barrier.wait()
        if store.put_if_absent("race/key", str(i).encode()):
            wins.append(i)
    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert store.get_bytes("race/key") == str(wins[0]).encode()
    assert store.put_if_absent("race/key", b"late") is False


def test_file_round_trip_multipart_sized(store: ObjectStore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "big.bin"
    data = bytes(range(256)) * ((PART_SIZE + 3 * 1024 * 1024) // 256)  # > one part: multipart on S3
    src.write_bytes(data)
    store.put_file("objects/big", str(src))
    dst = tmp_path / "back.bin"
    assert store.get_file("objects/big", str(dst)) == {}
    assert dst.read_bytes() == data
    assert store.get_file("objects/big", str(dst), digests=["sha256", "crc32"]) == {
        "sha256": hashlib.sha256(data).hexdigest(), "crc32": f"{zlib.crc32(data):08x}"}
    assert store.stat("objects/big").size == len(data)  # type: ignore[union-attr]


def test_server_side_copy_is_independent(store: ObjectStore) -> None:
    store.put_bytes("src/o", b"payload")
    store.copy("src/o", "dst/o")
    store.delete("src/o")
    assert store.get_bytes("dst/o") == b"payload"
    with pytest.raises(ObjectNotFoundError):
        store.copy("src/missing", "dst/x")


def test_missing_file_download_raises(store: ObjectStore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ObjectNotFoundError):
        store.get_file("nope", str(tmp_path / "x"))
