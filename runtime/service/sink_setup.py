"""The sink one attempt writes its batches through: the kind its spec names, resumed at the restore point.

Staged output lives under the work dir (sink-journal/, upsert-staging/, console-staging/); the
journal's batches are dropped unless the restore kept the local hot dir, since every batch after the
restored checkpoint re-runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkpoint.runtime.sink.compaction import compaction_settings
from sparkpoint.runtime.sink.console import ConsoleSink
from sparkpoint.runtime.sink.delta import DeltaSink
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.transactional import TransactionalSink, staged_budget_bytes
from sparkpoint.runtime.sink.upsert import UpsertSink
from sparkpoint.runtime.spec import SinkSpec
from sparkpoint.runtime.store import JobRef, ObjectStore

from .recovery import RestoreOutcome


def make_sink(sink_spec: SinkSpec, store: ObjectStore, job: JobRef, *, attempt: int, incarnation: str,
              work_dir: Path, restore: RestoreOutcome) -> Any:
    """`incarnation` is the job uid output entries name as their writer."""
    r = restore
    journal = SinkJournal(work_dir / "sink-journal")
    if r.source != "local":
        journal.reset()  # batches after the restored checkpoint will be re-run
    if sink_spec.kind == "console":
        return ConsoleSink(work_dir / "console-staging")
    sink: UpsertSink | TransactionalSink
    if sink_spec.kind == "upsert":
        sink = UpsertSink(store, job, attempt=attempt, path=sink_spec.path,
                          key_columns=sink_spec.key_columns, incarnation=incarnation, fmt=sink_spec.format,
                          staging_dir=work_dir / "upsert-staging",
                          compaction=compaction_settings(sink_spec.compaction))
    elif sink_spec.kind == "delta":  # also a Delta table at outputs/<path>/ (sink/delta.py)
        sink = DeltaSink(store, job, attempt=attempt, path=sink_spec.path, journal=journal,
                         staged_budget_bytes=staged_budget_bytes(), incarnation=incarnation,
                         compaction=compaction_settings(sink_spec.compaction))
    else:
        sink = TransactionalSink(store, job, attempt=attempt, path=sink_spec.path, journal=journal,
                                 staged_budget_bytes=staged_budget_bytes(), incarnation=incarnation,
                                 fmt=sink_spec.format)
    # Continue the restored point's output history (a savepoint continues its source checkpoint's).
    m = r.manifest
    if isinstance(sink, UpsertSink):  # whose history it continues: attempts branch (upsert_history.py)
        parent = attempt - 1 if r.source == "local" else (m.attempt if m is not None and r.batch_id is not None
                                                          else None)
        sink.resume((m.source_checkpoint or m.id) if m else None, m.extra if m else None,
                    local=r.source == "local", batch=r.batch_id, parent=parent)
        return sink
    sink.resume((m.source_checkpoint or m.id) if m else None, m.extra if m else None,
                local=r.source == "local", batch=r.batch_id)
    return sink
