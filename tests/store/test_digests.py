"""Restores check crc32 (manifest format 3), older manifests still restore by sha256, and an audit
(verify --deep) checks both; on both backends (runtime/store/digests.py)."""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import CheckpointWriter, restore, verify, write_fence
from sparkpoint.runtime.checkpoint.restore import RestoreError, wanted_digests
from sparkpoint.runtime.store import FileEntry, JobRef, ObjectStore
from sparkpoint.runtime.store.digests import Crc32, Digests, new
from sparkpoint.runtime.store.layout import checkpoint_key, object_key
from sparkpoint.runtime.store.manifest import Manifest, format_version_for

from .trees import tree_digest

SHA = "0" * 64


def checkpoint(store: ObjectStore, job: JobRef, tmp_path: Path) -> tuple[Path, Manifest]:
    hot = tmp_path / "hot"
    for i in range(4):
        (hot / "state" / str(i)).mkdir(parents=True)
        (hot / "state" / str(i) / "1.changelog").write_bytes(os.urandom(3000 + 1000 * i))
    (hot / "metadata").write_text('{"id":"q"}')
    w = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u")
    return hot, w.take_checkpoint(hot, batch_id=0).manifest


def rewrite_manifest(store: ObjectStore, job: JobRef, m: Manifest, **changes: object) -> None:
    """What an older Sparkpoint wrote, or a manifest damaged at rest (the store's own bytes)."""
    doc = json.loads(m.to_json())
    doc.update(changes)
    store.put_bytes(checkpoint_key(job, m.id), json.dumps(doc).encode())


def flip_a_byte(store: ObjectStore, job: JobRef, sha: str, tmp_path: Path) -> None:
    key = object_key(job, sha)
    local = tmp_path / "obj"
    store.get_file(key, str(local))
    data = bytearray(local.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size: only a digest can tell
    local.write_bytes(bytes(data))
    store.put_file(key, str(local))


def test_new_checkpoints_record_each_files_crc32(store: ObjectStore, job: JobRef, tmp_path: Path) -> None:
    hot, m = checkpoint(store, job, tmp_path)
    assert m.format_version == 3
    for e in m.files:
        data = (hot / e.path).read_bytes()
        assert e.crc32 == f"{zlib.crc32(data):08x}" and e.sha256 == hashlib.sha256(data).hexdigest()
    assert Manifest.from_json(store.get_bytes(checkpoint_key(job, m.id)), where="t") == m


def test_a_restore_checks_crc32_only_and_restores_exactly(store: ObjectStore, job: JobRef, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    hot, m = checkpoint(store, job, tmp_path)
    asked: list[tuple[str, ...]] = []
    real = store.get_file
    monkeypatch.setattr(store, "get_file", lambda k, p, digests=(): asked.append(tuple(digests)) or real(k, p, digests=digests))
    restore(store, job, tmp_path / "restored")
    assert tree_digest(tmp_path / "restored") == tree_digest(hot)
    assert asked and set(asked) == {("crc32",)}  # sha256's CPU is what the restore saves


def test_a_flipped_byte_fails_the_restore_by_its_crc32(store: ObjectStore, job: JobRef, tmp_path: Path) -> None:
    _, m = checkpoint(store, job, tmp_path)
    flip_a_byte(store, job, m.files[0].sha256, tmp_path)
    with pytest.raises(RestoreError, match="its crc32 is .* manifest says") as err:
        restore(store, job, tmp_path / "restored")
    assert err.value.reason == "corrupt_object" and not (tmp_path / "restored").exists()
    assert any("crc32" in p for p in verify(store, job).problems)


def test_a_damaged_crc32_in_the_manifest_fails_restore_and_audit(store: ObjectStore, job: JobRef, tmp_path: Path) -> None:
    _, m = checkpoint(store, job, tmp_path)
    files = [e.model_dump() for e in m.files]
    files[1]["crc32"] = f"{(int(files[1]['crc32'], 16) ^ 1):08x}"
    rewrite_manifest(store, job, m, files=files)
    with pytest.raises(RestoreError, match="crc32") as err:
        restore(store, job, tmp_path / "restored")
    assert err.value.reason == "corrupt_object"
    assert len(verify(store, job).problems) == 1


@pytest.mark.parametrize("version", [1, 2])
def test_a_manifest_without_crc32_restores_by_sha256(store: ObjectStore, job: JobRef, tmp_path: Path, version: int) -> None:
    hot, m = checkpoint(store, job, tmp_path)
    rewrite_manifest(store, job, m, format_version=version,
                     files=[{k: v for k, v in e.model_dump().items() if k not in ("crc32", "data")} for e in m.files])
    restore(store, job, tmp_path / "restored")
    assert tree_digest(tmp_path / "restored") == tree_digest(hot)
    flip_a_byte(store, job, m.files[2].sha256, tmp_path)
    with pytest.raises(RestoreError, match="its sha256 is"):
        restore(store, job, tmp_path / "again")


def test_the_oldest_format_that_holds_the_entries_is_written() -> None:
    plain = FileEntry(path="a", size=1, sha256=SHA)
    inline = FileEntry.inline_file("b", b"x", hashlib.sha256(b"x").hexdigest())
    checked = FileEntry(path="c", size=1, sha256=SHA, crc32="0000abcd")
    assert format_version_for([plain]) == 1
    assert format_version_for([plain, inline]) == 2
    assert format_version_for([plain, inline, checked]) == 3
    assert b"crc32" not in plain.model_dump_json().encode()  # absent, an entry keeps the version-1 shape


@pytest.mark.parametrize("bad", ["ABCD0123", "abc", "0x0000ab", "g0000000"])
def test_a_malformed_crc32_is_refused_by_field(bad: str) -> None:
    with pytest.raises(ValueError, match="crc32"):
        FileEntry(path="a", size=1, sha256=SHA, crc32=bad)


def test_wanted_digests() -> None:
    old = FileEntry(path="a", size=1, sha256=SHA)
    new_ = FileEntry(path="a", size=1, sha256=SHA, crc32="00000000")
    assert wanted_digests(old) == ["sha256"] and wanted_digests(old, audit=True) == ["sha256"]
    assert wanted_digests(new_) == ["crc32"] and wanted_digests(new_, audit=True) == ["crc32", "sha256"]


def test_digests_match_the_reference_implementations_in_pieces() -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    d = Digests(["sha256", "crc32"])
    for i in range(0, len(data), 65536):
        d.update(memoryview(data)[i:i + 65536])
    assert d.hexdigests() == {"sha256": hashlib.sha256(data).hexdigest(), "crc32": f"{zlib.crc32(data):08x}"}
    c = Crc32()
    assert c.hexdigest() == "00000000"  # the crc32 of no bytes, zero-padded
    with pytest.raises(ValueError, match="unknown digest"):
        new("md5")
