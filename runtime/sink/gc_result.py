"""What one output GC pass did and what it left, for the CLI's JSON and the sidecar's metrics."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sparkpoint.runtime.store import ObjectInfo


@dataclass
class OutputGcResult:
    deleted_entries: list[str] = field(default_factory=list)  # "<path>:<entry id>"
    deleted_records: int = 0  # compaction records no needed history applies
    deleted_snapshots: int = 0  # history snapshots of entries no needed history holds (history.py)
    deleted_snapshotted_entries: int = 0  # needed entries a snapshot holds, that no walk reads any more
    deleted_files: int = 0
    deleted_bytes: int = 0
    live_files: int = 0
    live_bytes: int = 0
    kept_young_or_newest: int = 0  # unreferenced, but younger than the grace or the newest attempt's
    kept_for_table: int = 0  # needed by no checkpoint or reader, only by a delta table's retention
    skipped_paths: list[str] = field(default_factory=list)  # a broken chain: nothing deleted there
    dry_run: bool = False
    # Every object under outputs/ after the pass but GC's own cursors, for the sidecar's metrics:
    # committed (entries, files and logs that readers, a kept checkpoint or a delta table need, and
    # all of a skipped path), or
    # staged (needed by nothing yet: the newest attempt's uploads ahead of their publish, garbage
    # inside the grace). `counted` is False when the pass looked at nothing (a savepoint copy).
    committed_objects: int = 0
    committed_bytes: int = 0
    staged_objects: int = 0
    staged_bytes: int = 0
    deleted_entry_bytes: int = 0
    deleted_folded_files: int = 0  # upsert files a snapshot holds, and superseded snapshots (of deleted_files)
    deleted_log_files: int = 0  # a Delta log's files older than its retention and its checkpoint (delta_log_gc.py)
    deleted_log_bytes: int = 0
    counted: bool = True

    def keep(self, info: ObjectInfo, *, committed: bool) -> None:
        if committed:
            self.committed_objects += 1
            self.committed_bytes += info.size
        else:
            self.staged_objects += 1
            self.staged_bytes += info.size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
