"""The local journal of staged output: which store object holds each batch's rows.

It lives next to the hot dir (same emptyDir), so after a container restart with local recovery the
batches Spark will not re-run are still known and get published with the next checkpoint. One small
JSON file per batch, replaced atomically: a batch re-run after a crash overwrites its entry.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

_ENTRY = re.compile(r"^batch-(\d+)\.json$")


class SinkJournal:
    def __init__(self, directory: str | os.PathLike[str]):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def record(self, batch_id: int, key: str, rows: int) -> None:
        tmp = self.dir / f".batch-{batch_id}.json.tmp"
        tmp.write_text(json.dumps({"batch": batch_id, "key": key, "rows": rows}))
        os.replace(tmp, self.dir / f"batch-{batch_id}.json")

    def entries(self, after_batch: int, up_to_batch: int) -> list[dict]:
        """Entries of batches in (after_batch, up_to_batch], in batch order."""
        out = []
        for name in os.listdir(self.dir):
            m = _ENTRY.match(name)
            if m and after_batch < int(m.group(1)) <= up_to_batch:
                out.append(json.loads((self.dir / name).read_text()))
        return sorted(out, key=lambda e: e["batch"])

    def forget_through(self, batch_id: int) -> None:
        """Drop entries that a published commit already covers (keeps the journal small)."""
        for name in os.listdir(self.dir):
            m = _ENTRY.match(name)
            if m and int(m.group(1)) <= batch_id:
                (self.dir / name).unlink(missing_ok=True)

    def reset(self) -> None:
        """After a remote restore every batch past the checkpoint is re-run: start empty."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
