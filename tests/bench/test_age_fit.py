"""The age bench's growth laws (bench/age_fit.py): a fitted affine law per metric, which laws count as
flat, and a year extrapolated from them and marked so."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import age_fit  # noqa: E402

AGES = [8_640, 60_480, 259_200]


def test_the_fit_recovers_an_affine_law():
    c, d = age_fit.fit(AGES, [3.0 + 0.5 * n for n in AGES])
    assert abs(c - 3.0) < 1e-6 and abs(d - 0.5) < 1e-12
    assert age_fit.fit(AGES[:1], [1.0]) is None  # one point: no law


def test_flat_laws_and_a_year_extrapolated_from_them():
    # as measured: GC GETs are the entries past the newest snapshot (N mod 1,000) and 12 more; a read's
    # are those and a snapshot per 1,000 entries, which the raw counts (658, 550, 469) hide
    metrics = ["gc_rss_mib", "gc_get", "read_get", "outside_bytes"]
    rows = [{"checkpoints": n, "sink": "delta", "since_snapshot": n % 1000, "gc_rss_mib": 45.0, "gc_get": n % 1000 + 12,
             "read_get": n % 1000 + n // 1000 + 10, "outside_bytes": 770 * n, "bytes": {"data": 1}} for n in AGES]
    laws = age_fit.laws(rows, metrics)
    assert laws["gc_rss_mib"][2] and laws["gc_get"][2] and abs(laws["gc_get"][1]) < 1e-12
    assert not laws["read_get"][2] and abs(laws["read_get"][1] - 0.001) < 1e-4
    assert not laws["outside_bytes"][2] and abs(laws["outside_bytes"][1] - 770) < 1e-6  # linear in age
    year = age_fit.extrapolated(rows, 365 * 8_640, metrics)
    assert year["extrapolated"] and "bytes" not in year and year["gc_rss_mib"] == 45.0
    assert year["gc_get"] == 3_153_600 % 1000 + 12 and abs(year["read_get"] - (600 + 3_153 + 10)) <= 10
    assert year["outside_bytes"] == 770 * 365 * 8_640
    text = age_fit.law_text("delta", rows, metrics)
    assert "outside_bytes" in text.split("growing:")[1] and "gc_rss_mib 45 + 0/1k" in text.split("growing:")[0]
