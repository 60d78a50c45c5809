"""Pure functions: key layout, job refs, path safety, hash cache keying, manifest parsing."""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import HashCache, RestoreError
from sparkpoint.runtime.checkpoint.hashing import cache_key
from sparkpoint.runtime.checkpoint.restore import safe_relative_path
from sparkpoint.runtime.store import JobRef, ManifestError
from sparkpoint.runtime.store import layout as L
from sparkpoint.runtime.store.manifest import Manifest

SHA = "ab" + "0" * 62


def test_layout_matches_the_design_contract() -> None:
    job = JobRef("prod", "orders")
    assert L.object_key(job, SHA) == f"prod/orders/objects/ab/{SHA}"
    assert L.checkpoint_key(job, L.checkpoint_id(42)) == "prod/orders/checkpoints/chk-000042.json"
    assert L.pending_key(job, "chk-000042") == "prod/orders/pending/chk-000042.json"
    assert L.savepoint_manifest_key(job, "v2") == "prod/orders/savepoints/v2/manifest.json"
    assert L.savepoint_object_key(job, "v2", SHA) == f"prod/orders/savepoints/v2/objects/ab/{SHA}"
    assert L.fence_key(job) == "prod/orders/fence.json"
    assert L.checkpoint_number("chk-1000000") == 1000000
    with pytest.raises(ValueError):
        L.checkpoint_number("chk-42")
    with pytest.raises(ValueError):
        L.object_key(job, "../../x")


@pytest.mark.parametrize("text", ["a", "a/b/c", "A/b", "a/", "/b", "a/b_c"])
def test_job_ref_rejects_non_dns_names(text: str) -> None:
    with pytest.raises(ValueError):
        JobRef.parse(text)


def test_job_ref_round_trip() -> None:
    assert str(JobRef.parse("team-a/orders-1")) == "team-a/orders-1"


@given(st.lists(st.sampled_from(["a", "b", "..", ".", "", "/", "\\", "x.sst"]), min_size=1, max_size=6))
def test_safe_relative_path_never_escapes(parts: list[str]) -> None:
    path = "/".join(parts)
    try:
        safe = safe_relative_path(path)
    except RestoreError:
        return
    resolved = os.path.normpath(os.path.join("/target", str(safe)))
    assert resolved.startswith("/target/") and not PurePosixPath(path).is_absolute()


def test_hash_cache_is_keyed_by_inode_size_and_mtime(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "f"
    f.write_bytes(b"one")
    cache = HashCache(None)
    first = cache.digests(f)
    assert first == (hashlib.sha256(b"one").hexdigest(), f"{zlib.crc32(b'one'):08x}")
    assert cache.digests(f) == first and cache.hits == 1
    tmp = tmp_path / "g"
    tmp.write_bytes(b"two")
    os.replace(tmp, f)  # new inode, as Spark's write-then-rename produces
    assert cache.digests(f).sha256 == hashlib.sha256(b"two").hexdigest() and cache.misses == 2


def test_a_hash_cache_without_crc32_is_dropped_not_trusted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "f"
    f.write_bytes(b"one")
    key = cache_key(f.stat())
    path = tmp_path / "cache.json"
    path.write_text(json.dumps({"version": 1, "entries": {key: "0" * 64}}))  # before format 3
    cache = HashCache(path)
    assert len(cache) == 0
    assert cache.digests(f).sha256 == hashlib.sha256(b"one").hexdigest()
    cache.save()
    again = HashCache(path)
    assert again.digests(f) == cache.digests(f) and again.hits == 1 and again.misses == 0


def test_manifest_parse_errors_name_the_document() -> None:
    with pytest.raises(ManifestError, match="corrupt manifest k1: "):
        Manifest.from_json(b"{not json", where="k1")
    with pytest.raises(ManifestError, match="corrupt manifest k2"):
        Manifest.from_json(b'{"id": 1}', where="k2")
