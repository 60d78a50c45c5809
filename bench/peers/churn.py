"""Key-churn workload (issue 10: 1% and 10% of the keys updated per checkpoint interval, state ~100 MB,
1 GB, 4 GB): which keys each micro-batch updates, and what changed between two checkpoints. Pure;
churn_query.py builds the same thing in Spark, so the harness can compare uploaded with changed bytes.

Batch 0 loads every key once (its `rows_per_batch` rows each fan out to `fill_fanout` keys); batch
b >= 1 updates the `rows_per_batch` keys ((b-1)*R + i) % K, a window that rotates through the key space,
so n consecutive batches touch min(K, n*R) distinct keys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ROW_OVERHEAD_BYTES = 24  # key, count and sum: three longs per state row besides the payload
# name -> (keys, payload bytes per key); --sizes picks from these (never the big ones in --small).
SIZES = {
    "tiny": (2_000, 256),
    "100m": (100_000, 1024),
    "1g": (1_000_000, 1024),
    "4g": (4_000_000, 1024),
}


@dataclass(frozen=True)
class ChurnWorkload:
    size: str
    keys: int
    payload_bytes: int
    churn: float  # fraction of the keys updated per checkpoint interval (nominal)
    batches_per_interval: int = 10  # trigger = checkpoint interval / this
    steady_batches: int = 30  # measured batches after the fill
    # State partitions, the same for every setup: Spark's shuffle partitions (one RocksDB instance and
    # one changelog per batch each) and Flink's parallelism (one keyed RocksDB backend per subtask).
    # Unequal counts compare different numbers of files per checkpoint, not the two designs.
    partitions: int = 2

    def __post_init__(self) -> None:
        if self.keys < 1:
            raise ValueError(f"keys must be >= 1, not {self.keys}")
        if not 0 < self.churn <= 1:
            raise ValueError(f"churn must be in (0, 1], not {self.churn}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, not {self.partitions}")
        if self.batches_per_interval < 1:
            raise ValueError(f"batches_per_interval must be >= 1, not {self.batches_per_interval}")

    @classmethod
    def of(cls, size: str, churn: float, **kw: int) -> ChurnWorkload:
        if size not in SIZES:
            raise ValueError(f"unknown size {size!r}; choose from {sorted(SIZES)}")
        keys, payload = SIZES[size]
        return cls(size=size, keys=keys, payload_bytes=payload, churn=churn, **kw)

    @property
    def rows_per_batch(self) -> int:
        return max(1, round(self.keys * self.churn / self.batches_per_interval))

    @property
    def fill_fanout(self) -> int:
        return math.ceil(self.keys / self.rows_per_batch)

    @property
    def batches(self) -> int:
        return 1 + self.steady_batches

    @property
    def payload_chars(self) -> int:
        """The payload column is hex sha256 digests, 64 characters each (as in windowed_aggregation)."""
        return max(1, self.payload_bytes // 64) * 64 if self.payload_bytes else 0

    @property
    def row_bytes(self) -> int:
        return ROW_OVERHEAD_BYTES + self.payload_chars

    @property
    def state_bytes(self) -> int:
        return self.keys * self.row_bytes

    def keys_of_batch(self, batch: int) -> set[int]:
        r, k = self.rows_per_batch, self.keys
        if batch == 0:
            return {key for v in range(r) for key in range(v * self.fill_fanout, (v + 1) * self.fill_fanout)
                    if key < k}
        if batch >= self.batches:
            return set()
        return {((batch - 1) * r + i) % k for i in range(r)}

    def changed_keys(self, after_batch: int, up_to_batch: int) -> int:
        """Distinct keys updated by batches after_batch+1 .. up_to_batch (after_batch -1: from the start)."""
        if up_to_batch <= after_batch:
            return 0
        if after_batch < 0:
            return self.keys
        steady = min(up_to_batch, self.batches - 1) - max(after_batch, 0)
        return min(self.keys, max(0, steady) * self.rows_per_batch)

    def changed_bytes(self, checkpoint_batches: Sequence[int]) -> list[int]:
        """Logical bytes changed between consecutive checkpoints (the first one: since the start)."""
        out, prev = [], -1
        for b in checkpoint_batches:
            out.append(self.changed_keys(prev, b) * self.row_bytes)
            prev = b
        return out


CHECKPOINT_INTERVAL_S = 10  # Sparkpoint's interval in the churn runs (vanilla checkpoints every batch)


def trigger(w: ChurnWorkload) -> str:
    """Micro-batch trigger that gives `batches_per_interval` batches per checkpoint interval (when the
    batches keep up; the measured churn per checkpoint is reported next to the nominal one)."""
    return f"{max(100, CHECKPOINT_INTERVAL_S * 1000 // w.batches_per_interval)}ms"


def steady(checkpoints: list[dict], w: ChurnWorkload) -> list[dict]:
    """Per checkpoint after the first (which carries the fill): uploaded and changed bytes, measured
    churn, and the checkpoint's sync_s/async_s when it has them. `checkpoints` need batch_id and
    new_bytes, in order."""
    changed = w.changed_bytes([c["batch_id"] for c in checkpoints])
    out = []
    for c, ch in list(zip(checkpoints, changed, strict=True))[1:]:
        if ch <= 0:
            continue  # no batch since the previous checkpoint: nothing changed, nothing to compare
        out.append({"uploaded": c["new_bytes"], "changed": ch, "ratio": c["new_bytes"] / ch,
                    "churn": ch / w.row_bytes / w.keys, **{k: c[k] for k in ("sync_s", "async_s", "objects") if k in c}})
    return out
