"""The operator's in-memory caches (operator/caches.py): expiry and bounds with a fake clock, and
which of two bodies a round decides on."""

from __future__ import annotations

import pytest

from sparkpoint.operator.caches import FactCache, SpecCache, TtlCache, fresher_body, secret_fingerprint
from sparkpoint.operator.step import spec_key
from sparkpoint.runtime.config import SpecError, parse_spec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_ttl_cache_expires_entries_and_can_be_invalidated():
    clock = Clock()
    cache: TtlCache[str] = TtlCache(ttl=10.0, size=8, clock=clock)
    cache.put("a", "1")
    clock.now += 9.9
    assert cache.get("a") == "1"
    clock.now += 0.1
    assert cache.get("a") is None  # expired: the next reader goes to the API server again
    cache.put("b", "2")
    cache.invalidate("b")
    assert cache.get("b") is None


def test_ttl_cache_drops_the_least_recently_used_beyond_its_size():
    cache: TtlCache[int] = TtlCache(ttl=60.0, size=2, clock=Clock())
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # now "b" is the least recently used
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert len(cache) == 2


def test_fact_cache_loads_each_key_once_and_stays_bounded():
    loads = []
    cache: FactCache[str] = FactCache(size=3)

    def loader(key: str):
        return lambda: loads.append(key) or key.upper()
    for key in ["a", "b", "a", "c", "d", "a"]:
        assert cache.get_or_load(key, loader(key)) == key.upper()
    assert loads == ["a", "b", "c", "d"]  # "a" stayed (recently used), "b" was dropped
    assert len(cache) == 3
    assert cache.get_or_load("b", loader("b")) == "B" and loads[-1] == "b"


def test_fact_cache_does_not_keep_a_failed_load():
    cache: FactCache[str] = FactCache(size=3)

    def broken() -> str:
        raise OSError("gone")
    for _ in range(2):
        with pytest.raises(OSError):
            cache.get_or_load("x", broken)
    assert len(cache) == 0
    assert cache.get_or_load("x", lambda: "ok") == "ok"


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
    from sparkpoint.operator.step import json_copy

    status = {"phase": "Running", "attempt": 2, "ok": True, "none": None, "ratio": 0.5,
              "checkpoints": [{"id": "c-1", "bytes": 10}], "tracking": {"restartTimes": [1.0, 2.0]}}
    copied = json_copy(status)
    assert copied == status
    copied["checkpoints"][0]["id"] = "changed"
    copied["tracking"]["restartTimes"].append(3.0)
    assert status["checkpoints"][0]["id"] == "c-1" and status["tracking"]["restartTimes"] == [1.0, 2.0]
