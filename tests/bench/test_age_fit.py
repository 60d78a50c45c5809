"""The age bench's growth laws (bench/age_fit.py): a fitted exponent per metric, which laws count as
flat, and a year extrapolated from them and marked so."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import age_fit  # noqa: E402

AGES = [8_640, 60_480, 259_200]


def test_the_fit_recovers_the_exponent_of_a_power_law():
    a, b = age_fit.fit(AGES, [3.0 * n ** 0.5 for n in AGES])
    assert abs(a - 3.0) < 1e-6 and abs(b - 0.5) < 1e-9
    assert age_fit.fit(AGES, [0, 0, 5]) is None  # one positive point: no law


def test_flat_laws_and_a_year_extrapolated_from_them():
    rows = [{"checkpoints": n, "sink": "delta", "gc_rss_mib": 45.0, "gc_get": g, "outside_bytes": 770 * n,
             "bytes": {"data": 1}} for n, g in zip(AGES, [652, 492, 212], strict=True)]
    laws = age_fit.laws(rows, ["gc_rss_mib", "gc_get", "outside_bytes"])
    assert laws["gc_rss_mib"][2] and laws["gc_get"][2]  # constant; falling (the snapshot segment's phase)
    assert not laws["outside_bytes"][2] and abs(laws["outside_bytes"][1] - 1) < 1e-9  # linear in age
    year = age_fit.extrapolated(rows, 365 * 8_640, ["gc_rss_mib", "gc_get", "outside_bytes"])
    assert year["extrapolated"] and "bytes" not in year and year["gc_rss_mib"] == 45.0
    assert year["outside_bytes"] == 770 * 365 * 8_640
    text = age_fit.law_text("delta", rows, ["gc_rss_mib", "gc_get", "outside_bytes"])
    assert "growing: outside_bytes +1.00" in text and "gc_rss_mib +0.00" in text
