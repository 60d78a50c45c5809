"""Small files carried inside the manifest (runtime/checkpoint/inline.py), on both backends."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import (
    CheckpointError,
    CheckpointWriter,
    inline,
    restore,
    verify,
    write_fence,
)
from sparkpoint.runtime.checkpoint.restore import RestoreError
from sparkpoint.runtime.checkpoint.savepoint import create_savepoint
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import checkpoint_key, objects_prefix
from sparkpoint.runtime.store.manifest import FORMAT_VERSION, Manifest, ManifestError

from .trees import tree_digest


def spark_like_tree(root: Path, batches: int) -> None:
    """State files above the inline limit, and per batch an offset and commit log with .crc sidecars."""
    for i in range(3):
        path = root / "state" / "0" / str(i) / f"{i + 1}.changelog"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(8192 + i))
    for b in range(batches):
        for log in ("offsets", "commits"):
            (root / log).mkdir(exist_ok=True)
            (root / log / str(b)).write_text(json.dumps({"batchId": b, "log": log}) + "\n" + "x" * 900)
            (root / log / f".{b}.crc").write_bytes(b"crc\x00" + hashlib.sha256(f"{log}{b}".encode()).digest()[:8])
    (root / "metadata").write_text('{"id":"q"}')


def writer(store: ObjectStore, job: JobRef, **kw) -> CheckpointWriter:  # type: ignore[no-untyped-def]
    return CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u",
                            inline_max=kw.pop("inline_max", inline.RECOMMENDED_MAX_FILE), **kw)


def object_count(store: ObjectStore, job: JobRef) -> int:
    return len(list(store.list(objects_prefix(job))))


def test_small_files_travel_in_the_manifest_and_restore_exactly(store: ObjectStore, job: JobRef, tmp_path: Path) -> None:
    hot = tmp_path / "hot"
    spark_like_tree(hot, batches=4)
    result = writer(store, job).take_checkpoint(hot, batch_id=3)
    m = result.manifest
    small = [e for e in m.files if e.size <= inline.RECOMMENDED_MAX_FILE]
    assert small and all(e.inline for e in small)
    assert not any(e.inline for e in m.files if e.size > inline.RECOMMENDED_MAX_FILE)
    # Only the three state files are objects; every small file cost no request of its own.
    assert object_count(store, job) == 3 == result.uploaded_objects == len(m.shas())
    assert m.totals.inline_bytes == sum(e.size for e in small) and m.format_version == FORMAT_VERSION
    restore(store, job, tmp_path / "restored")
    assert tree_digest(tmp_path / "restored") == tree_digest(hot)
    assert verify(store, job, m.id).ok


def test_the_next_checkpoint_carries_unchanged_small_files_and_counts_only_new_ones(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    hot = tmp_path / "hot"
    spark_like_tree(hot, batches=2)
    w = writer(store, job)
    w.take_checkpoint(hot, batch_id=1)
    spark_like_tree_more = hot / "offsets" / "2"
    spark_like_tree_more.write_text("batch 2 offsets")
    second = w.take_checkpoint(hot, batch_id=2)
    assert second.uploaded_objects == 0 and second.new_bytes == len("batch 2 offsets")
    restore(store, job, tmp_path / "restored")
    assert tree_digest(tmp_path / "restored") == tree_digest(hot)


def _tamper_inline(store: ObjectStore, job: JobRef, cid: str, *, same_size: bool) -> str:
    doc = json.loads(store.get_bytes(checkpoint_key(job, cid)))
    entry = next(f for f in doc["files"] if "data" in f)
    data = bytearray(base64.b64decode(entry["data"]))
    data[0] ^= 0xFF
    entry["data"] = base64.b64encode(bytes(data) if same_size else bytes(data) + b"!").decode()
    store.put_bytes(checkpoint_key(job, cid), json.dumps(doc).encode())
    return entry["path"]


@pytest.mark.parametrize("same_size", [True, False])
def test_corrupt_inline_data_is_refused_not_restored(store, job, tmp_path, same_size) -> None:  # type: ignore[no-untyped-def]
    hot = tmp_path / "hot"
    spark_like_tree(hot, batches=2)
    cid = writer(store, job).take_checkpoint(hot, batch_id=1).id
    path = _tamper_inline(store, job, cid, same_size=same_size)
    target = tmp_path / "restored"
    with pytest.raises(RestoreError, match=f"inline data of '{path}' does not match") as err:
        restore(store, job, target)
    assert err.value.reason == "corrupt_manifest" and not target.exists()
    problems = verify(store, job, cid, deep=False).problems
    assert len(problems) == 1 and path in problems[0]


def test_a_tampered_base_is_not_carried_into_the_next_checkpoint(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    hot = tmp_path / "hot"
    spark_like_tree(hot, batches=2)
    cid = writer(store, job).take_checkpoint(hot, batch_id=1).id
    _tamper_inline(store, job, cid, same_size=True)
    # A new writer (a restarted runtime) starts from the stored, tampered manifest as its base.
    second = writer(store, job).take_checkpoint(hot, batch_id=1)
    restore(store, job, tmp_path / "restored", checkpoint_id=second.id)
    assert tree_digest(tmp_path / "restored") == tree_digest(hot)


def test_a_savepoint_copies_the_objects_and_keeps_the_inline_files(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    hot = tmp_path / "hot"
    spark_like_tree(hot, batches=3)
    writer(store, job).take_checkpoint(hot, batch_id=2)
    sp = create_savepoint(store, job, "before-upgrade")
    assert any(e.inline for e in sp.files)
    restore(store, job, tmp_path / "restored", savepoint="before-upgrade")
    assert tree_digest(tmp_path / "restored") == tree_digest(hot)


def test_inline_off_makes_every_file_an_object(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    hot = tmp_path / "hot"
    spark_like_tree(hot, batches=2)
    m = writer(store, job, inline_max=0).take_checkpoint(hot, batch_id=1).manifest
    assert not any(e.inline for e in m.files) and len(m.shas()) == object_count(store, job)
    assert b'"data"' not in store.get_bytes(checkpoint_key(job, m.id))


def test_a_file_that_changed_after_hashing_fails_the_checkpoint(store, job, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    hot = tmp_path / "hot"
    spark_like_tree(hot, batches=1)
    w = writer(store, job)
    real = inline.choose

    def rewrite_then_choose(files, **kw):  # type: ignore[no-untyped-def]
        (hot / "commits" / "0").write_text("rewritten between hashing and reading")
        return real(files, **kw)
    monkeypatch.setattr(inline, "choose", rewrite_then_choose)
    with pytest.raises(CheckpointError, match="changed after it was hashed"):
        w.take_checkpoint(hot, batch_id=0)


# --- pure functions -------------------------------------------------------------------------

def _entry(tmp_path: Path, name: str, data: bytes) -> tuple[Path, int, str]:
    path = tmp_path / name
    path.write_bytes(data)
    return path, len(data), hashlib.sha256(data).hexdigest()


def test_choose_respects_the_file_limit_and_the_manifest_budget(tmp_path) -> None:  # type: ignore[no-untyped-def]
    files = [_entry(tmp_path, f"f{i}", bytes([i]) * 100) for i in range(10)] + [_entry(tmp_path, "big", b"b" * 300)]
    chosen = inline.choose(files, max_file=200, budget=550)
    assert set(chosen) == {sha for _, _, sha in files[:5]}  # 5 x 100 bytes fit in 550; 'big' is over 200


def test_choose_takes_known_bytes_only_when_they_hash_right(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path, size, sha = _entry(tmp_path, "f", b"hello")
    missing = (tmp_path / "gone", size, sha)  # known bytes are used without reading the file
    assert inline.choose([missing], max_file=10, known={sha: base64.b64encode(b"hello").decode()}) == \
        {sha: base64.b64encode(b"hello").decode()}
    # Wrong known bytes (a tampered base): the file is read instead.
    assert inline.choose([(path, size, sha)], max_file=10, known={sha: base64.b64encode(b"jello").decode()}) == \
        {sha: base64.b64encode(b"hello").decode()}


@pytest.mark.parametrize(("raw", "expected"), [("", 0), ("0", 0), ("512", 512)])
def test_the_inline_limit_comes_from_the_environment(raw: str, expected: int) -> None:
    assert inline.max_file_from_env({inline.INLINE_MAX_ENV: raw}) == expected


@pytest.mark.parametrize("raw", ["2k", "-1", "70000"])
def test_a_nonsense_inline_limit_names_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match=inline.INLINE_MAX_ENV):
        inline.max_file_from_env({inline.INLINE_MAX_ENV: raw})


def test_a_manifest_from_a_newer_format_is_refused_by_name_and_version_1_still_reads() -> None:
    doc = {"id": "chk-000001", "namespace": "n", "job": "j", "job_uid": "u", "attempt": 1, "batch_id": 1,
           "trigger_time": "2026-01-01T00:00:00Z", "completion_time": "2026-01-01T00:00:01Z",
           "base_checkpoint": None, "spark_version": None, "state_provider": None,
           "files": [{"path": "a", "size": 1, "sha256": "0" * 64}],
           "totals": {"files": 1, "bytes": 1, "new_bytes": 1, "reused_bytes": 0}}
    old = Manifest.from_json(json.dumps({**doc, "format_version": 1}).encode(), where="v1")
    assert old.shas() == {"0" * 64}
    with pytest.raises(ManifestError, match="written by a newer Sparkpoint"):
        Manifest.from_json(json.dumps({**doc, "format_version": FORMAT_VERSION + 1}).encode(), where="v3")


def test_by_default_every_file_is_an_object_as_the_layout_contract_says(store, job, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv(inline.INLINE_MAX_ENV, raising=False)
    hot = tmp_path / "hot"
    spark_like_tree(hot, batches=2)
    m = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u").take_checkpoint(hot, batch_id=1).manifest
    assert not any(e.inline for e in m.files)
    assert {e.sha256 for e in m.files} == m.shas()
