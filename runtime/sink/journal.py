"""The local journal of staged output: each batch's rows on local disk, until a checkpoint publishes them.

It lives in the work dir next to the hot dir (same emptyDir), so a store outage never blocks a batch,
and after a container restart with local recovery the batches Spark will not re-run are still there
and get uploaded and published with the next checkpoint. Per batch B:

  batch-<B>.jsonl   the rows (JSON lines), written first
  batch-<B>.json    {"batch", "key", "rows", "bytes"}: `key` is where the checkpoint uploads them

Both are replaced atomically, so a batch re-run after a crash replaces its entry, and a re-run that
produces no rows removes it. `head.json` records the last commit entry this work dir's history
published or continued from (what a local recovery continues) and the attempts that ran here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

_ENTRY = re.compile(r"^batch-(\d+)\.json$")
_HEAD = "head.json"


class SinkJournal:
    def __init__(self, directory: str | os.PathLike[str]):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def _replace(self, name: str, data: bytes) -> None:
        tmp = self.dir / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.dir / name)

    def stage(self, batch_id: int, key: str, data: bytes, rows: int) -> None:
        """Keep a batch's rows locally; `key` is the store object the checkpoint will upload them to."""
        self._replace(f"batch-{batch_id}.jsonl", data)
        self._replace(f"batch-{batch_id}.json", json.dumps(
            {"batch": batch_id, "key": key, "rows": rows, "bytes": len(data)}).encode())

    def drop(self, batch_id: int) -> None:
        """A re-run of the batch produced no rows: whatever an earlier run staged is stale."""
        (self.dir / f"batch-{batch_id}.json").unlink(missing_ok=True)
        (self.dir / f"batch-{batch_id}.jsonl").unlink(missing_ok=True)

    def entry(self, batch_id: int) -> dict[str, Any] | None:
        try:
            return json.loads((self.dir / f"batch-{batch_id}.json").read_text())
        except FileNotFoundError:
            return None

    def data_path(self, batch_id: int) -> Path:
        return self.dir / f"batch-{batch_id}.jsonl"

    def _all(self) -> list[dict[str, Any]]:
        out = []
        for name in os.listdir(self.dir):
            if _ENTRY.match(name):
                try:
                    out.append(json.loads((self.dir / name).read_text()))
                except FileNotFoundError:  # published and forgotten meanwhile
                    continue
        return sorted(out, key=lambda e: e["batch"])

    def entries(self, after_batch: int, up_to_batch: int) -> list[dict]:
        """Entries of batches in (after_batch, up_to_batch], in batch order: {"batch", "key", "rows"}."""
        return [{"batch": e["batch"], "key": e["key"], "rows": e["rows"]}
                for e in self._all() if after_batch < e["batch"] <= up_to_batch]

    def staged_bytes(self) -> int:
        """Local disk held by staged output not yet published (the sink's budget counts this)."""
        return sum(int(e.get("bytes", 0)) for e in self._all())

    def forget_through(self, batch_id: int) -> None:
        """Drop entries and rows that a published commit already covers (frees the local disk)."""
        for entry in self._all():
            if entry["batch"] <= batch_id:
                self.drop(entry["batch"])

    def head(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.dir / _HEAD).read_text())
        except (OSError, ValueError):
            return None

    def set_head(self, entry_id: str | None, up_to_batch: int, attempt: int | None = None) -> None:
        """Record the history's head; `attempt` joins the attempts that ran on this work dir (their
        manifests are the only ones a local recovery may publish as its own)."""
        attempts = (self.head() or {}).get("attempts", [])
        if attempt is not None and attempt not in attempts:
            attempts = [*attempts[-99:], attempt]
        self._replace(_HEAD, json.dumps({"entry": entry_id, "upToBatch": up_to_batch,
                                         "attempts": attempts}).encode())

    def reset(self) -> None:
        """After a remote restore every batch past the checkpoint is re-run: start empty."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
