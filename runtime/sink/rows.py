"""Rows <-> JSON lines: the sinks' on-store format (one JSON object per line, UTF-8)."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def encode_rows(rows: list[dict[str, Any]]) -> bytes:
    """Sorted keys, one object per line: the same rows always give the same bytes."""
    return "".join(json.dumps(r, sort_keys=True, default=_default) + "\n" for r in rows).encode()


def decode_rows(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def collect_rows(df: Any) -> list[dict[str, Any]]:
    """A micro-batch's rows as plain dicts (the driver holds one batch's output at a time)."""
    return [row.asDict(recursive=True) for row in df.collect()]
