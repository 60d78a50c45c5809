"""Rows <-> JSON lines: the format of output the driver once encoded (one JSON object per line, UTF-8).

No sink writes it any more (executors write every batch, batch_files.py); readers still decode the
files older runtimes left, and tests use it to build them.
"""

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

