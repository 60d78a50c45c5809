"""The local journal of staged output: each batch's files on local disk, until a checkpoint publishes them.

It lives in the work dir next to the hot dir (same emptyDir), so a store outage never blocks a batch,
and after a container restart with local recovery the batches Spark will not re-run are still there
and get uploaded and published with the next checkpoint. Per batch B:

  batch-<B>-<run>/part-<i>.<ext>   the files Spark's executors wrote for one run of B (Parquet or JSON lines)
  batch-<B>.json                   {"batch", "run", "format", "names", "rows", "bytes"}: which run is B's

The entry is replaced atomically and is the only truth: a batch re-run after a crash writes a new
run folder and then its entry (the old folder goes), a re-run that produces no rows removes the
entry. Folders no entry names (a crash mid-write) are swept when the journal is opened. `head.json`
records the last commit entry this work dir's history published or continued from (what a local
recovery continues) and the attempts that ran here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from .keys import FORMATS

_ENTRY = re.compile(r"^batch-(\d+)\.json$")
_RUN_DIR = re.compile(r"^batch-(\d+)-([0-9a-f]+)$")
_TMP_PREFIX = ".tmp-"
_HEAD = "head.json"


class SinkJournal:
    def __init__(self, directory: str | os.PathLike[str]):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._sweep()

    def _replace(self, name: str, data: bytes) -> None:
        tmp = self.dir / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.dir / name)

    def _sweep(self) -> None:
        """Remove half-written runs and folders no entry names (one runtime per work dir: safe at open)."""
        named = {f"batch-{e['batch']}-{e['run']}" for e in self._all() if "run" in e}
        for name in os.listdir(self.dir):
            if name.startswith(_TMP_PREFIX) or (_RUN_DIR.match(name) and name not in named):
                shutil.rmtree(self.dir / name, ignore_errors=True)

    def new_run(self, batch_id: int) -> tuple[str, Path]:
        """A fresh run id and the (not yet existing) folder Spark writes the batch into."""
        run = uuid.uuid4().hex[:12]
        return run, self.dir / f"{_TMP_PREFIX}batch-{batch_id}-{run}"

    def stage(self, batch_id: int, run: str, written: Path, fmt: str, rows: int, parts: list[str]) -> int:
        """Adopt the part files Spark wrote into `written` as batch B's output; returns their bytes.
        `parts`: the names whose rows were checked (batch_files.write_checked), never a new listing.
        Spark's own names (part-<n>-<uuid>-c000...) become part-<i>.<ext>; its _SUCCESS and .crc go."""
        final = self.dir / f"batch-{batch_id}-{run}"
        names, size = [], 0
        ext = FORMATS[fmt]
        for i, name in enumerate(parts):
            new = f"part-{i:05d}{ext}"
            os.rename(written / name, written / new)
            names.append(new)
            size += (written / new).stat().st_size
        for name in os.listdir(written):
            if name not in names:
                (written / name).unlink()
        os.rename(written, final)
        old = self.entry(batch_id)
        self._replace(f"batch-{batch_id}.json", json.dumps(
            {"batch": batch_id, "run": run, "format": fmt, "names": names, "rows": rows, "bytes": size}).encode())
        if old and old.get("run") and old["run"] != run:
            shutil.rmtree(self.dir / f"batch-{batch_id}-{old['run']}", ignore_errors=True)
        return size

    def drop(self, batch_id: int) -> None:
        """A re-run of the batch produced no rows (or was published): whatever was staged is stale."""
        entry = self.entry(batch_id)
        (self.dir / f"batch-{batch_id}.json").unlink(missing_ok=True)
        if entry and entry.get("run"):
            shutil.rmtree(self.dir / f"batch-{batch_id}-{entry['run']}", ignore_errors=True)

    def entry(self, batch_id: int) -> dict[str, Any] | None:
        try:
            return json.loads((self.dir / f"batch-{batch_id}.json").read_text())
        except FileNotFoundError:
            return None

    def part_path(self, batch_id: int, run: str, name: str) -> Path | None:
        """The local file of one staged part, if batch B's current run is `run` and the file is there."""
        entry = self.entry(batch_id)
        if not entry or entry.get("run") != run or name not in entry.get("names", ()):
            return None
        path = self.dir / f"batch-{batch_id}-{run}" / name
        return path if path.exists() else None

    def _all(self) -> list[dict[str, Any]]:
        out = []
        for name in os.listdir(self.dir):
            if _ENTRY.match(name):
                try:
                    out.append(json.loads((self.dir / name).read_text()))
                except FileNotFoundError:  # published and forgotten meanwhile
                    continue
        return sorted(out, key=lambda e: e["batch"])

    def entries(self, after_batch: int, up_to_batch: int) -> list[dict[str, Any]]:
        """Entries of batches in (after_batch, up_to_batch], in batch order."""
        return [e for e in self._all() if after_batch < e["batch"] <= up_to_batch and "run" in e]

    def staged_bytes(self) -> int:
        """Local disk held by staged output not yet published (the sink's budget counts this)."""
        return sum(int(e.get("bytes", 0)) for e in self._all())

    def forget_through(self, batch_id: int) -> None:
        """Drop entries and files that a published commit already covers (frees the local disk)."""
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

