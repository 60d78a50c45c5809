"""The operator's in-memory caches (operator/kube/caches.py, cachetools' in store/facts.py): expiry and
bounds with a fake clock, and which of two bodies a round decides on."""

from __future__ import annotations

import pytest
from cachetools import TTLCache

from sparkpoint.operator.decisions.step import spec_key
from sparkpoint.operator.kube.caches import SpecCache, fresher_body, secret_fingerprint
from sparkpoint.operator.store import facts as store_facts
from sparkpoint.runtime.spec import SpecError, parse_spec
from sparkpoint.runtime.store import JobRef


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# The TTL and LRU caches are cachetools' (store/facts.py); these pin the behaviour it relies on.
def test_ttl_cache_expires_entries_at_their_ttl():
    clock = Clock()
    cache: TTLCache[str, str] = TTLCache(maxsize=8, ttl=10.0, timer=clock)
    cache["a"] = "1"
    clock.now += 9.9
    assert cache.get("a") == "1"
    clock.now += 0.1
    assert cache.get("a") is None  # expired: the next reader goes to the API server again
    cache["b"] = "2"
    assert cache.pop("b", None) == "2" and cache.pop("b", None) is None  # forget_credentials


def test_ttl_cache_drops_the_least_recently_used_beyond_its_size():
    cache: TTLCache[str, int] = TTLCache(maxsize=2, ttl=60.0, timer=Clock())
    cache["a"], cache["b"] = 1, 2
    assert cache.get("a") == 1  # now "b" is the least recently used
    cache["c"] = 3
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert len(cache) == 2


@pytest.fixture
def manifest_reads(monkeypatch):
    """StoreFacts.checkpoint_fact with a stand-in manifest read (the cache wraps it when built)."""
    loads: list[str] = []

    def read(_store, _job, cid: str) -> str:
        loads.append(cid)
        if cid.startswith("broken"):
            raise OSError("gone")
        return cid.upper()
    monkeypatch.setattr(store_facts.store_view, "checkpoint_fact", read)
    monkeypatch.setattr(store_facts, "KNOWN_MANIFESTS", 3)
    facts = store_facts.StoreFacts(None, Clock())
    yield facts.checkpoint_fact, loads
    facts._pool.shutdown()


def test_checkpoint_facts_are_read_once_per_checkpoint_and_stay_bounded(manifest_reads):
    read, loads = manifest_reads
    job = JobRef("ns", "j")
    for cid in ["a", "b", "a", "c", "d", "a"]:
        assert read(object(), job, cid) == cid.upper()  # any client of the store: keyed by job and id
    assert loads == ["a", "b", "c", "d"]  # "a" stayed (recently used), "b" was dropped
    assert len(read.cache) == 3
    assert read(None, job, "b") == "B" and loads[-1] == "b"
    assert read(None, JobRef("ns", "other"), "a") == "A" and loads[-1] == "a"  # per job


def test_a_failed_checkpoint_fact_read_is_not_kept(manifest_reads):
    read, loads = manifest_reads
    for _ in range(2):
        with pytest.raises(OSError):
            read(None, JobRef("ns", "j"), "broken-1")
    assert loads == ["broken-1", "broken-1"] and len(read.cache) == 0


def _body(rv: str | None, phase: str) -> dict:
    meta = {"name": "j"} | ({"resourceVersion": rv} if rv is not None else {})
    return {"metadata": meta, "status": {"phase": phase}}


def test_a_round_decides_on_our_own_write_until_the_watch_delivers_it():
    live, written = _body("41", "Pending"), _body("42", "Running")
    assert fresher_body(live, written) is written  # the watch lags: do not decide on the old status
    assert fresher_body(_body("42", "Running"), written)["metadata"]["resourceVersion"] == "42"
    newer = _body("50", "Running")  # someone else wrote after us (e.g. kopf's own bookkeeping)
    assert fresher_body(newer, written) is newer
    assert fresher_body(live, None) is live
    assert fresher_body(_body("abc", "Pending"), written) is written  # not numeric: our write wins


def test_the_store_client_key_differs_per_credentials_without_holding_them():
    a = secret_fingerprint({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s1"})
    b = secret_fingerprint({"AWS_SECRET_ACCESS_KEY": "s1", "AWS_ACCESS_KEY_ID": "k"})
    c = secret_fingerprint({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s2"})
    assert a == b != c
    assert "s1" not in a


SPEC = {"job": {"entrypoint": "examples.windowed:build"}}


def test_spec_cache_parses_again_only_when_the_spec_changes():
    parsed: list[dict] = []

    def parse(raw):
        parsed.append(raw)
        return parse_spec(raw)
    cache = SpecCache(parse)
    raw = {**SPEC, "checkpoint": {"interval": "10s"}}
    first = cache.get(("ns", "a"), raw)
    assert cache.get(("ns", "a"), dict(raw)) is first and len(parsed) == 1
    raw["checkpoint"]["interval"] = "20s"  # changed in place: the cache kept its own copy
    second = cache.get(("ns", "a"), raw)
    assert second.checkpoint.interval == "20s" and len(parsed) == 2
    assert cache.get(("ns", "b"), raw) is not second  # per job
    cache.forget(("ns", "a"))
    assert cache.get(("ns", "a"), raw) is not second


def test_spec_cache_never_caches_an_invalid_spec():
    cache = SpecCache(parse_spec)
    bad = {**SPEC, "checkpoint": {"retain": 0}}
    for _ in range(2):
        with pytest.raises(SpecError, match="spec.checkpoint.retain"):
            cache.get(("ns", "a"), bad)
    assert cache.get(("ns", "a"), SPEC).job.entrypoint == "examples.windowed:build"


def test_spec_key_is_remembered_per_spec_object_and_equal_for_equal_specs():
    a, b = parse_spec(SPEC), parse_spec(SPEC)
    assert spec_key(a) == spec_key(a) == spec_key(b)
    changed = parse_spec({**SPEC, "image": "other:1"})
    assert spec_key(changed) != spec_key(a)
    del a  # a freed spec's entry goes with it; a new object at the same address gets its own key
    assert spec_key(parse_spec({**SPEC, "image": "third:1"})) not in (spec_key(b), spec_key(changed))


def test_json_copy_is_a_deep_copy_of_a_status():
    from sparkpoint.operator.decisions.step import json_copy

    status = {"phase": "Running", "attempt": 2, "ok": True, "none": None, "ratio": 0.5,
              "checkpoints": [{"id": "c-1", "bytes": 10}], "tracking": {"restartTimes": [1.0, 2.0]}}
    copied = json_copy(status)
    assert copied == status
    copied["checkpoints"][0]["id"] = "changed"
    copied["tracking"]["restartTimes"].append(3.0)
    assert status["checkpoints"][0]["id"] == "c-1" and status["tracking"]["restartTimes"] == [1.0, 2.0]
