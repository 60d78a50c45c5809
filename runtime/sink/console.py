"""Development sink: print each batch's rows as JSON lines on stdout (no durability).

The driver never holds a batch: Spark's executors write it as JSON lines into a local folder
(batch_files.py) and the driver copies the files to stdout line by line, then removes them. Fields
come in the output's column order (Spark's JSON writer), nulls included.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .batch_files import remove_tries, write_batch_files, write_checked


class ConsoleSink:
    kind = "console"

    def __init__(self, staging_dir: Path | None = None, *, out: IO[str] | None = None,
                 write_files: Callable[[Any, Path, str], int] = write_batch_files):
        self.staging_dir = Path(staging_dir) if staging_dir is not None else Path(tempfile.mkdtemp(prefix="console-"))
        shutil.rmtree(self.staging_dir, ignore_errors=True)  # a killed run's leftovers
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        self.out, self.write_files = out, write_files

    def write_batch(self, df: Any, batch_id: int) -> int:
        out = self.out or sys.stdout  # looked up per batch: tests and the supervisor may swap stdout
        local = self.staging_dir / f"batch-{batch_id}-{uuid.uuid4().hex[:12]}"
        try:
            # checked as the other sinks' batches: a stale listing must not print a batch short
            rows, _, parts = write_checked(self.write_files, df, local, "jsonl")
            out.write(f"# batch {batch_id}: {rows} rows\n")
            for part in parts:
                with open(part, encoding="utf-8") as f:
                    out.writelines(f)  # one line at a time: a batch may be larger than memory
            out.flush()
            return rows
        finally:
            remove_tries(local)

    def manifest_extra(self, up_to_batch: int) -> dict[str, Any]:
        return {}

    def upload_staged(self, extra: dict[str, Any]) -> None:
        pass

    def publish(self, checkpoint_id: str, extra: dict[str, Any]) -> bool:
        return False

    def resume(self, checkpoint_id: str | None, extra: dict[str, Any] | None, *, local: bool = False,
               batch: int | None = None) -> None:
        pass
