"""Statistics for alternating (A B A B) benchmark rounds: percentiles, ratios of medians and their
bootstrap confidence intervals. Pure functions; a seeded RNG makes reports reproducible."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q} outside [0, 100]")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass(frozen=True)
class Ratio:
    value: float  # median(b) / median(a)
    low: float  # bootstrap confidence interval
    high: float
    confidence: float

    @property
    def half_width(self) -> float:
        """Half the interval relative to the value (0.03 = resolved to about +-3%)."""
        return (self.high - self.low) / 2 / self.value if self.value else math.inf

    def fmt(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def ratio_of_medians(a: Sequence[float], b: Sequence[float]) -> float:
    ma = statistics.median(a)
    if ma <= 0:
        raise ValueError("the baseline median must be positive")
    return statistics.median(b) / ma


def bootstrap_ratio(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95,
                    resamples: int = 2000, seed: int = 0) -> Ratio:
    """median(b)/median(a) with a percentile-bootstrap interval: both samples are resampled with
    replacement, independently. Pass per-run medians (one value per round) when batches within a run
    are correlated, per-batch durations otherwise."""
    if not a or not b:
        raise ValueError("bootstrap needs at least one value on each side")

    def draw(rng: random.Random) -> tuple[list[float], list[float]]:
        return [a[rng.randrange(len(a))] for _ in a], [b[rng.randrange(len(b))] for _ in b]
    return _bootstrap(ratio_of_medians(a, b), draw, confidence, resamples, seed)


def paired_rounds_ratio(a_rounds: Sequence[Sequence[float]], b_rounds: Sequence[Sequence[float]], *,
                        confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> Ratio:
    """median(b)/median(a) over the batches of paired rounds, with an interval that resamples whole
    rounds (the same round indices on both sides), not batches. Batches within one run are correlated
    (a compaction slows several in a row) and a round's drift hits both of its runs, so this interval
    is the honest one when there are a few rounds; it is wider than the per-batch one."""
    n = min(len(a_rounds), len(b_rounds))
    pairs = [(a, b) for a, b in zip(a_rounds[:n], b_rounds[:n], strict=True) if a and b]
    if not pairs:
        raise ValueError("paired rounds need at least one round with batches on each side")

    def draw(rng: random.Random) -> tuple[list[float], list[float]]:
        picked = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        return [x for a, _ in picked for x in a], [x for _, b in picked for x in b]
    value = ratio_of_medians([x for a, _ in pairs for x in a], [x for _, b in pairs for x in b])
    return _bootstrap(value, draw, confidence, resamples, seed)


def bootstrap_median(values: Sequence[float], *, confidence: float = 0.95, resamples: int = 2000,
                     seed: int = 1) -> Ratio:
    """The median of `values` (each already a paired ratio, e.g. one per repeat) and its percentile
    interval over resamples of the values."""
    v = list(values)

    def draw(rng: random.Random) -> tuple[list[float], list[float]]:
        return [1.0], [rng.choice(v) for _ in v]
    return _bootstrap(statistics.median(v), draw, confidence, resamples, seed)


def _bootstrap(value: float, draw: Callable[[random.Random], tuple[list[float], list[float]]],
               confidence: float, resamples: int, seed: int) -> Ratio:
    """The percentile interval of median(b)/median(a) over `resamples` draws of (a, b)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} outside (0, 1)")
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        ra, rb = draw(rng)
        ma = statistics.median(ra)
        if ma > 0:
            ratios.append(statistics.median(rb) / ma)
    tail = (1 - confidence) / 2 * 100
    return Ratio(value, percentile(ratios, tail), percentile(ratios, 100 - tail), confidence)


def per_round_ratios(a_rounds: Sequence[Sequence[float]], b_rounds: Sequence[Sequence[float]]) -> list[float]:
    """median(b)/median(a) within each round: the spread a reader can judge by eye."""
    return [ratio_of_medians(a, b) for a, b in zip(a_rounds, b_rounds, strict=False) if a and b]


def summary(durations: Sequence[float], rows_per_batch: int) -> dict[str, float]:
    """Median and p95 batch duration, and rows/s sustained at the median duration."""
    med = statistics.median(durations)
    return {"median_s": med, "p95_s": percentile(durations, 95), "batches": len(durations),
            "rows_per_s": rows_per_batch / med if med > 0 else math.inf}
