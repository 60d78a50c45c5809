"""Development sink: print each batch's rows as JSON lines on stdout (no durability)."""

from __future__ import annotations

import sys
from typing import Any

from .rows import collect_rows, encode_rows


class ConsoleSink:
    kind = "console"

    def write_batch(self, df: Any, batch_id: int) -> int:
        rows = collect_rows(df)
        sys.stdout.write(f"# batch {batch_id}: {len(rows)} rows\n")
        sys.stdout.write(encode_rows(rows).decode())
        sys.stdout.flush()
        return len(rows)

    def manifest_extra(self, up_to_batch: int) -> dict[str, Any]:
        return {}

    def upload_staged(self, extra: dict[str, Any]) -> None:
        pass

    def publish(self, checkpoint_id: str, extra: dict[str, Any]) -> bool:
        return False

    def resume(self, checkpoint_id: str | None, extra: dict[str, Any] | None, *, local: bool = False,
               batch: int | None = None) -> None:
        pass
