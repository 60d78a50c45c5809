"""The growth law of each age bench metric, and a year extrapolated from it (bench/age_bench.py).

A metric measured at ages N1 < N2 < ... (checkpoints) is fitted as y = p(N) + c + d * N by least
squares: c is what every pass or read pays, d what each checkpoint of the job's age adds (shown per
1,000 checkpoints). p is the phase part of the request counts: the entries past the newest history
snapshot, which a walk from the head reads (GET) or a listing of `_commits/` shows one by one, N mod
SEGMENT in the bench's stores (640, 480 and 200 at a day, a week and a month; at most SEGMENT at any
age; an upsert sink's: the batches past its hourly snapshot, 360), as each row measured it. Fitted raw, those counts fall with age and would hide the part that grows (a snapshot per
SEGMENT entries). A year's figure is p(N_year) + c + d * N_year, written as extrapolated (a law
with d <= 0 carries the oldest measured figure instead: a falling cost is not extrapolated). The issue
accepts a year extrapolated only where the law is flat, so `flat` says which are: d <= 0, or the
year's c + d * N within 1.2x of the youngest age's. Seconds depend on the machine's load, which
differs between the runs: their laws are shown, not trusted.
"""

from __future__ import annotations

from typing import Any

SEGMENT = 1000  # runtime/sink/history.py: entries per history snapshot
YEAR = 365 * 8_640
PHASED = {"gc_get", "gc_keys_listed", "read_get", "read_keys_listed", "resume_keys_listed"}


def phase(metric: str, row: dict[str, Any]) -> int:
    """The part of `metric` in `row` that the entries (an upsert sink: the batches) past the newest
    snapshot make, as the bench measured them (`since_snapshot`)."""
    return int(row.get("since_snapshot") or 0) if metric in PHASED else 0


def since_snapshot(rows: list[dict[str, Any]], n: int) -> int:
    """The entries past the newest snapshot at age n: N mod SEGMENT for the entries' history snapshots;
    an upsert sink's hourly snapshot leaves the same number at every age the bench builds."""
    return n % SEGMENT if rows[-1].get("sink", "transactional") in ("transactional", "delta") \
        else int(rows[-1].get("since_snapshot") or 0)


def fit(ages: list[int], values: list[float]) -> tuple[float, float] | None:
    """(c, d) of y = c + d * N by least squares; None with fewer than two points."""
    if len(ages) < 2:
        return None
    mx, my = sum(ages) / len(ages), sum(values) / len(values)
    sxx = sum((x - mx) ** 2 for x in ages)
    d = sum((x - mx) * (y - my) for x, y in zip(ages, values, strict=True)) / sxx if sxx else 0.0
    return my - d * mx, d


def laws(rows: list[dict[str, Any]], metrics: list[str]) -> dict[str, tuple[float, float, bool, bool]]:
    """metric -> (c, d, flat, phased) over one sink's rows (youngest first); phased: the phase part was
    taken off (not for a count it does not make, e.g. an upsert read's 3 GETs)."""
    out = {}
    ages = [r["checkpoints"] for r in rows]
    for m in metrics:
        if any(r.get(m) is None for r in rows):
            continue
        phased = all(float(r[m]) >= phase(m, r) for r in rows) and any(phase(m, r) for r in rows)
        values = [float(r[m]) - (phase(m, r) if phased else 0) for r in rows]
        if (cd := fit(ages, values)) is not None:
            c, d = cd
            young = c + d * ages[0]
            out[m] = (c, d, d <= 0 or (young > 0 and c + d * YEAR <= 1.2 * young), phased)
    return out


def extrapolated(rows: list[dict[str, Any]], n: int, metrics: list[str]) -> dict[str, Any]:
    """A row for age `n` from the laws of `rows`: every fitted metric, rounded as measured ones are."""
    row: dict[str, Any] = {**rows[-1], "checkpoints": n, "extrapolated": True, "first_gc_delete": 0,
                           "since_snapshot": since_snapshot(rows, n)}
    for measured_only in ("bytes", "data_bytes", "build_seconds", "first_gc_rss_mib", "carried"):
        row.pop(measured_only, None)
    for m, (c, d, _, phased) in laws(rows, metrics).items():
        here, last = (phase(m, row), phase(m, rows[-1])) if phased else (0, 0)
        # a law that does not grow (d <= 0) carries the oldest measured figure: falling is not extrapolated
        value = here + (c + d * n if d > 0 else float(rows[-1][m]) - last)
        row[m] = round(value, 2) if isinstance(rows[-1].get(m), float) else int(round(value))
    return row


def law_text(sink: str, rows: list[dict[str, Any]], metrics: list[str]) -> str:
    """One line: each metric's growth per 1,000 checkpoints, flat ones and growing ones apart."""
    found = laws(rows, metrics)

    def say(m: str, c: float, d: float) -> str:
        return f"{m} {c:,.4g} {'+' if d >= 0 else '-'} {abs(d) * 1000:,.3g}/1k"
    flats = [say(m, c, d) for m, (c, d, ok, _) in found.items() if ok]
    growing = [say(m, c, d) for m, (c, d, ok, _) in found.items() if not ok]
    ages = ", ".join(f"{r['checkpoints']:,}" for r in rows)
    return (f"{sink}: law y = p(N) + c + d * N (p: the entries past the newest snapshot, request counts only) "
            f"fitted over N = {ages} checkpoints, as c +/- d per 1,000 checkpoints; flat (a year within 1.2x of "
            f"a day): {', '.join(flats) or 'none'}; growing: {', '.join(growing) or 'none'}.")
