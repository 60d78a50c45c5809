"""The growth law of each age bench metric, and a year extrapolated from it (bench/age_bench.py).

A metric measured at ages N1 < N2 < ... (checkpoints) is fitted as y = a * N^b by least squares on
log y against log N: b is the growth exponent (0: bounded by age, 1: linear in age). A year's figure
is then a * N_year^b, written as extrapolated. The issue accepts a year extrapolated only where the
law is flat, so `flat` says which are: |b| <= FLAT (a tenth of linear) and no measured figure more
than 1.2x the first (GET counts follow the 1,000-entry snapshot segment's phase, not the age: they
may fall, which the fit shows as b < 0 and is bounded).
"""

from __future__ import annotations

import math
from typing import Any

FLAT = 0.1


def fit(ages: list[int], values: list[float]) -> tuple[float, float] | None:
    """(a, b) of y = a * N^b over the points with y > 0; None with fewer than two such points."""
    points = [(math.log(n), math.log(v)) for n, v in zip(ages, values, strict=True) if v and v > 0]
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return math.exp(my - b * mx), b


def flat(values: list[float], b: float) -> bool:
    return abs(b) <= FLAT or (b < 0 and max(values) <= 1.2 * values[0])


def laws(rows: list[dict[str, Any]], metrics: list[str]) -> dict[str, tuple[float, float, bool]]:
    """metric -> (a, b, flat) over one sink's rows (youngest first)."""
    out = {}
    ages = [r["checkpoints"] for r in rows]
    for m in metrics:
        values = [float(r.get(m) or 0) for r in rows]
        if (ab := fit(ages, values)) is not None:
            out[m] = (ab[0], ab[1], flat(values, ab[1]))
    return out


def extrapolated(rows: list[dict[str, Any]], n: int, metrics: list[str]) -> dict[str, Any]:
    """A row for age `n` from the laws of `rows`: every fitted metric, rounded as measured ones are."""
    row: dict[str, Any] = {**rows[-1], "checkpoints": n, "extrapolated": True, "first_gc_delete": 0}
    for measured_only in ("bytes", "data_bytes", "build_seconds", "first_gc_rss_mib", "carried"):
        row.pop(measured_only, None)
    for m, (a, b, _) in laws(rows, metrics).items():
        value = a * n ** b
        row[m] = round(value, 2) if isinstance(rows[-1].get(m), float) else int(round(value))
    return row


def law_text(sink: str, rows: list[dict[str, Any]], metrics: list[str]) -> str:
    """One line: each metric's exponent b, flat ones and growing ones apart."""
    found = laws(rows, metrics)
    flats = [f"{m} {b:+.2f}" for m, (_, b, ok) in found.items() if ok]
    growing = [f"{m} {b:+.2f}" for m, (_, b, ok) in found.items() if not ok]
    ages = ", ".join(f"{r['checkpoints']:,}" for r in rows)
    return (f"{sink}: growth law y = a * N^b fitted over N = {ages} checkpoints; flat (|b| <= {FLAT}, or falling "
            f"within 1.2x): {', '.join(flats) or 'none'}; growing: {', '.join(growing) or 'none'}.")
