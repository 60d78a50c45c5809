"""Exactly-once output on the object store, committed together with checkpoints (docs/design.md §6).

Layout under `<job>/outputs/<path>/` (keys.py):

  staging/attempt-<A>/batch-<B>-<run>/part-<i>.parquet   files of batch B, uploaded by attempt A
  _commits/<checkpoint-id>.json         a commit entry (see lineage.py for the fields)
  _commits/continue-a<A>.json           attempt A continues a history from an older point

Protocol: Spark's executors write each micro-batch as files on local disk (batch_files.py; the
journal, next to the hot dir), so a store outage never blocks or fails a batch and the driver never
holds the rows. A checkpoint covering batches up to C names the staged
files of batches (P, C] (P: the last published batch) and its predecessor entry in its manifest's
`extra.sink`; its asynchronous phase uploads those files, then writes the manifest, then the commit
entry (a conditional put). An entry names the incarnation (the StreamingJob's uid) and attempt that
took its checkpoint; a publish that finds an entry with other content under its id fails loudly
(CommitEntryConflict), since treating it as done would drop the new rows. On start the runtime
re-publishes the restored checkpoint's entry if a crash came between manifest and entry (unless
its data was deleted with the job: then output starts after it), and writes a continuation entry
when it continues from a point other than the head readers see. Readers follow the entries back
from the head (lineage.py), so they see exactly one history, the one the running job continues;
staged files no entry of it names are invisible. A fenced-off attempt never writes an entry.

Local-disk budget: staged output not yet published may hold at most `staged_budget_bytes` (default
1 GiB). A batch that would exceed it waits (backpressure on the query) until a checkpoint publishes
and frees space; nothing is dropped and nothing crashes. A single batch larger than the budget is
staged when nothing else is. The waiting batch asks for that checkpoint (`on_over_budget`, again
every BUDGET_ASK_AGAIN_S while it waits): a long checkpoint interval must not stall the job, and a
checkpoint may run while a batch is in progress (it covers the batches committed before it).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from sparkpoint.runtime.checkpoint.fence import check_fence
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError
from sparkpoint.runtime.store.layout import CHECKPOINT_ID, outputs_prefix

from .batch_files import remove_tries, write_batch_files, write_checked
from .history import SEGMENT, SegmentReader, chain_snapshot_ids, compact_forward, snapshot_key
from .journal import SinkJournal
from .keys import batch_dir_key, commit_key, commits_prefix, file_keys, sink_root
from .lineage import continuation_id, head_checkpoint
from .reader import _loader, committed_entries, current_head, read_committed

__all__ = ["CommitEntryConflict", "SinkStopped", "TransactionalSink", "commit_key", "commits_prefix",
           "committed_entries", "current_head", "read_committed", "sink_root", "staged_budget_bytes"]

log = logging.getLogger("sparkpoint.sink")

DEFAULT_STAGED_BUDGET_BYTES = 1 << 30
BUDGET_ASK_AGAIN_S = 30.0  # a batch still over budget asks for a checkpoint again (one may have failed)


BUDGET_ENV = "SPARKPOINT_SINK_STAGED_BUDGET"
_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}


def staged_budget_bytes(env: Mapping[str, str] = os.environ) -> int:
    """The local-disk budget for staged output: $SPARKPOINT_SINK_STAGED_BUDGET (e.g. 512Mi), default 1Gi."""
    text = env.get(BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_STAGED_BUDGET_BYTES
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", text)
    if not m or int(m.group(1)) <= 0:
        raise ValueError(f"{BUDGET_ENV}={text!r}: use a positive number of bytes, optionally with Ki, Mi, Gi or Ti")
    return int(m.group(1)) * _UNITS[m.group(2) or ""]


class SinkStopped(Exception):
    """The runtime is stopping while a batch waits for staging space: the batch is re-run later."""


class CommitEntryConflict(Exception):
    """A commit entry's id holds an entry this checkpoint did not write (typically an earlier job of
    the same name whose checkpoints were deleted but not its output): never treated as published."""


def _number(entry_id: str | None) -> int:
    m = CHECKPOINT_ID.match(entry_id or "")
    return int(m.group(1)) if m else -1


class TransactionalSink:
    kind = "transactional"

    def __init__(self, store: ObjectStore, job: JobRef, *, attempt: int, path: str, journal: SinkJournal,
                 staged_budget_bytes: int = DEFAULT_STAGED_BUDGET_BYTES, incarnation: str | None = None,
                 fmt: str = "parquet", write_files: Callable[[Any, Path, str], int] = write_batch_files):
        self.store, self.job, self.attempt, self.path, self.journal = store, job, attempt, path, journal
        self.fmt, self.write_files = fmt, write_files  # write_files: Spark's executors write the batch
        self.incarnation = incarnation  # the StreamingJob's uid: which job of this name writes
        self.staged_budget_bytes = staged_budget_bytes
        self.published_through = -1  # highest batch the history's head entry covers
        self.head: str | None = None  # the last entry of the history this attempt continues
        self.stopping = threading.Event()  # set on drain: a batch waiting for budget gives up
        self.on_over_budget: Callable[[], None] | None = None  # asks for a checkpoint (the runner sets it)
        self.short_writes = 0  # tries whose part files held fewer rows than Spark counted (batch_files.py)
        self._cond = threading.Condition()
        self._uploaded: dict[str, int] = {}  # staged keys in the store -> batch
        self._unsnapshotted = 0  # entries published since the history was last snapshotted (history.py)
        self._snapshot_hint: str | None = None  # a snapshot on the head's chain, named in new entries

    # --- per batch (Spark's foreachBatch thread): local disk only ------------------------------
    def write_batch(self, df: Any, batch_id: int) -> int:
        """Stage the batch's files locally (not visible to readers yet); returns the row count."""
        run, written = self.journal.new_run(batch_id)
        try:
            rows, folder, parts = write_checked(self.write_files, df, written, self.fmt, on_short=self._short_write)
            if not rows:
                self.journal.drop(batch_id)  # a re-run that emits nothing must not publish the old run's rows
                return 0
            # The files exist before the budget is checked (their size is known only now): at most
            # one batch beyond the budget sits on disk while it waits.
            self._wait_for_budget(sum(p.stat().st_size for p in parts))
            self.journal.stage(batch_id, run, folder, self.fmt, rows, [p.name for p in parts])
            return rows
        finally:
            remove_tries(written)  # left only if staging did not adopt them

    def _short_write(self) -> None:
        self.short_writes += 1

    def staged_bytes(self) -> int:
        return self.journal.staged_bytes()

    def _wait_for_budget(self, size: int) -> None:
        asked_at: float | None = None
        while True:
            with self._cond:
                staged = self.journal.staged_bytes()
                if staged == 0 or staged + size <= self.staged_budget_bytes:
                    return
                if self.stopping.is_set():
                    raise SinkStopped("stopping while staged output is over its budget; the batch re-runs")
            now = time.monotonic()
            if asked_at is None or now - asked_at >= BUDGET_ASK_AGAIN_S:
                if asked_at is None:
                    log.warning("staged output over budget; waiting for a checkpoint to publish",
                                extra={"staged_bytes": staged, "budget_bytes": self.staged_budget_bytes,
                                       "checkpoint_requested": self.on_over_budget is not None})
                asked_at = now
                if self.on_over_budget is not None:  # outside the lock: the checkpoint's sync phase takes it
                    self.on_over_budget()
            with self._cond:
                self._cond.wait(0.5)

    # --- checkpoint phases ------------------------------------------------------------------------
    def manifest_extra(self, up_to_batch: int) -> dict[str, Any]:
        """Sync phase: what a checkpoint at committed batch `up_to_batch` must publish."""
        with self._cond:
            after, previous = self.published_through, self.head
        files = [{"batch": e["batch"], "rows": e["rows"], "format": e["format"],
                  "keys": [f"{batch_dir_key(self.job, self.path, self.attempt, e['batch'], e['run'])}{n}"
                           for n in e["names"]]}
                 for e in self.journal.entries(after, up_to_batch)]
        sink = {"kind": self.kind, "path": self.path, "attempt": self.attempt, "previous": previous,
                "afterBatch": after, "upToBatch": up_to_batch, "files": files}
        if self.incarnation:
            sink["incarnation"] = self.incarnation
        if self._snapshot_hint is not None:  # on this entry's chain: readers list snapshots from it on
            sink["snapshot"] = self._snapshot_hint
        return {"sink": sink}

    def upload_staged(self, extra: dict[str, Any]) -> None:
        """Async phase, before the manifest: put the checkpoint's staged files in the store (streamed
        from disk; a checkpoint may carry gigabytes)."""
        for f in (extra.get("sink") or {}).get("files", []):
            for key in file_keys(f):
                if key in self._uploaded:
                    continue
                folder, name = key.rstrip("/").rsplit("/", 2)[-2:]
                local = self.journal.part_path(f["batch"], folder.rsplit("-", 1)[-1], name)
                if local is not None:
                    self.store.put_file(key, str(local))
                elif not self.store.exists(key):
                    raise FileNotFoundError(f"staged output of batch {f['batch']} ({key}) is neither local nor stored")
                # else: published (and forgotten) by an overlapping checkpoint, which uploaded it first
                self._uploaded[key] = f["batch"]

    def publish(self, checkpoint_id: str, extra: dict[str, Any]) -> bool:
        """Write the commit entry of a completed checkpoint; idempotent. False if it already existed
        (the same entry: a retry); CommitEntryConflict if another entry holds its id."""
        entry = extra.get("sink")
        if not entry:
            return False
        check_fence(self.store, self.job, self.attempt)  # a zombie never publishes
        # Built from the manifest alone, so a re-publish after a crash (even by a later attempt or
        # incarnation restoring it) writes the same document and is recognised as a retry.
        doc = {"checkpoint": checkpoint_id, "afterBatch": entry["afterBatch"],
               "upToBatch": entry["upToBatch"], "files": entry["files"]}
        if "previous" in entry:  # manifests from before lineage have none: readers treat them as linear
            doc.update(previous=entry["previous"], attempt=entry.get("attempt"))
        if entry.get("incarnation"):
            doc["incarnation"] = entry["incarnation"]
        if entry.get("snapshot"):
            doc["snapshot"] = entry["snapshot"]
        self._check_snapshot(entry["path"], checkpoint_id, doc)
        created = self._put_entry(commit_key(self.job, entry["path"], checkpoint_id), doc)
        up_to = int(entry["upToBatch"])
        with self._cond:
            # Overlapping checkpoints (maxConcurrent > 1) may publish out of order: keep the furthest.
            if (up_to, _number(checkpoint_id)) > (self.published_through, _number(self.head)):
                self._set_head(checkpoint_id, up_to)
            self._cond.notify_all()
        log.info("output published", extra={"checkpoint": checkpoint_id, "up_to_batch": up_to,
                                            "files": len(entry["files"]), "new_entry": created})
        self._unsnapshotted += 1
        if self._unsnapshotted >= SEGMENT:
            self._snapshot_history()
        return created

    def _snapshot_history(self) -> None:
        """Snapshot the history this attempt continues up to its head (history.py). Only a shortcut
        for readers: a failure is logged and retried after the next segment of entries."""
        with self._cond:
            head = self.head
        self._unsnapshotted = 0
        try:
            _, newest = compact_forward(self.store, self.job, self.path, head, self.attempt,
                                        _loader(self.store, self.job, self.path), segment=SEGMENT,
                                        hint=self._snapshot_hint)
            self._snapshot_hint = newest or self._snapshot_hint
        except Exception as exc:  # noqa: BLE001 - readers walk the entries instead; never fail a publish
            log.warning("history snapshot not written", extra={"path": self.path, "head": head, "error": str(exc)})

    def _check_snapshot(self, path: str, checkpoint_id: str, doc: dict[str, Any]) -> None:
        """A history snapshot at this id holds its entry (output GC may have deleted the entry itself):
        another entry under the id is the same conflict as a stored one, never a new history through it."""
        key = snapshot_key(self.job, path, checkpoint_id)
        if not self.store.exists(key):
            return
        try:
            found = (json.loads(self.store.get_bytes(key)).get("entries") or [{}])[-1]
        except (ObjectNotFoundError, ValueError):
            return  # collected meanwhile: its entry went with it
        if found != doc:
            self._conflict(key, doc, found)

    def _put_entry(self, key: str, doc: dict[str, Any]) -> bool:
        """Conditional put of a commit entry: True if created, False if the same entry was there."""
        if self.store.put_if_absent(key, json.dumps(doc, sort_keys=True).encode()):
            return True
        try:
            found = json.loads(self.store.get_bytes(key))
        except (ObjectNotFoundError, ValueError):
            found = None
        if found == doc:
            return False
        self._conflict(key, doc, found)

    def _conflict(self, key: str, doc: dict[str, Any], found: Any) -> NoReturn:
        found = found if isinstance(found, dict) else {}
        message = (f"{key} already holds a commit entry this job did not write (incarnation "
                   f"{found.get('incarnation', 'unrecorded')}, attempt {found.get('attempt')}; this is incarnation "
                   f"{doc.get('incarnation', 'unrecorded')}, attempt {doc.get('attempt')}): an earlier job of "
                   f"this name left its output behind. Not publishing; move or delete "
                   f"{outputs_prefix(self.job)} (or use another job name), then restart the job")
        log.error("commit entry conflict", extra={"key": key, "found_incarnation": found.get("incarnation"),
                                                  "found_attempt": found.get("attempt")})
        raise CommitEntryConflict(message)

    def _not_republished(self, checkpoint_id: str, restored: dict[str, Any]) -> str | None:
        """Why the restored checkpoint's missing entry is not published now, or None to publish it.
        'deleted': it would name deleted data (a savepoint outlived its job's data, gc.onDelete:
        delete). 'empty': no rows and no predecessor, so a new history after its batch reads the
        same, and the entry might collide with this job's own ids (in stores from before id_floor.py, ids
        restarted once a job was deleted)."""
        path = restored.get("path", self.path)
        try:
            found = json.loads(self.store.get_bytes(commit_key(self.job, path, checkpoint_id)))
        except ObjectNotFoundError:
            found = None
        if found is not None:
            # Another job of this name wrote an entry under the id (stores whose ids restarted after a
            # deletion, before id_floor.py): the restored point's history is gone.
            theirs, ours = found.get("incarnation"), restored.get("incarnation")
            return "deleted" if theirs and ours and theirs != ours else None
        previous, files = restored.get("previous"), restored.get("files", [])
        if not all(self.store.exists(k) for f in files for k in file_keys(f)):
            return "deleted"
        if previous is not None:
            if self.store.exists(commit_key(self.job, path, previous)):
                return None
            # GC deletes entries that history snapshots hold: such a predecessor is still there
            hint = {"checkpoint": previous, "snapshot": restored.get("snapshot")}  # on previous' chain too
            return None if SegmentReader(self.store, self.job, path, head=hint).holding(previous) else "deleted"
        return None if files else "empty"

    def _head_hint(self, checkpoint_id: str | None, restored: dict[str, Any] | None,
                   current: dict[str, Any] | None) -> str | None:
        """The snapshot the head entry names (on its chain), read from what the start already holds."""
        if self.head is None:
            return None
        if restored and checkpoint_id == self.head:
            return restored.get("snapshot")
        if current is not None and head_checkpoint(current) == self.head:
            return current.get("snapshot")
        doc = _loader(self.store, self.job, self.path)(self.head)
        return doc.get("snapshot") if doc else None

    def _history_resumed(self) -> None:
        """The history this attempt continues is chosen (self.head), before readers are pointed at it."""

    def _set_head(self, entry_id: str | None, up_to: int) -> None:
        self.head, self.published_through = entry_id, up_to
        self.journal.set_head(entry_id, up_to, self.attempt)
        self.journal.forget_through(up_to)
        self._uploaded = {k: b for k, b in self._uploaded.items() if b > up_to}

    # --- start of an attempt ----------------------------------------------------------------------
    def resume(self, checkpoint_id: str | None, extra: dict[str, Any] | None, *, local: bool = False,
               batch: int | None = None) -> None:
        """Continue the history of the restored checkpoint (or savepoint of it), or, with local
        recovery, the one this work dir's journal records; then make readers see that history."""
        restored = (extra or {}).get("sink")
        mine = self.journal.head() if local else None
        # The restored (latest) checkpoint continues this work dir's history only if one of its own
        # attempts took it (a crash between its manifest and its entry); descending from the same
        # entry is not enough: another history may have branched there.
        continues_mine = mine is not None and restored is not None and (
            checkpoint_id == mine["entry"] or (restored.get("previous") == mine["entry"]
                                               and restored.get("attempt") in mine.get("attempts", [])))
        if restored and (mine is None or continues_mine):
            assert checkpoint_id is not None and extra is not None  # `restored` is part of them
            if reason := self._not_republished(checkpoint_id, restored):
                # A new history starts after the restored batch; deleted rows stay deleted.
                log.log(logging.WARNING if reason == "deleted" else logging.INFO,
                        "output starts after the restored point", extra={
                            "checkpoint": checkpoint_id, "up_to_batch": restored["upToBatch"], "reason": reason})
                with self._cond:
                    self._set_head(None, int(restored["upToBatch"]))
            else:
                self.publish(checkpoint_id, extra)  # a crash between manifest and entry: publish it now
                with self._cond:
                    self._set_head(checkpoint_id, int(restored["upToBatch"]))
        elif mine is not None:
            with self._cond:
                self._set_head(mine["entry"], int(mine["upToBatch"]))
        current = current_head(self.store, self.job, self.path)
        if not restored and mine is None:
            if checkpoint_id is None:  # a fresh start begins a new, empty history
                head, up_to = None, -1
            else:
                # A manifest that records no output (taken outside the runtime, or under another sink
                # kind): which history it belongs to is unknown, so keep the one readers see.
                head = head_checkpoint(current)
                up_to = int(current["upToBatch"]) if current else -1
            with self._cond:
                self._set_head(head, up_to)
        self._snapshot_hint = self._head_hint(checkpoint_id, restored, current)
        self._history_resumed()
        if head_checkpoint(current) != self.head:
            check_fence(self.store, self.job, self.attempt)
            doc = {"kind": "continuation", "attempt": self.attempt, "previous": self.head,
                   "upToBatch": self.published_through}
            if self._snapshot_hint is not None:
                doc["snapshot"] = self._snapshot_hint
            if self.incarnation:
                doc["incarnation"] = self.incarnation
            self._put_entry(commit_key(self.job, self.path, continuation_id(self.attempt)), doc)
            log.info("output continues an older point", extra={
                "continues": self.head, "superseded_head": head_checkpoint(current),
                "up_to_batch": self.published_through})
        # How far the head is past the newest snapshot (by checkpoint number: a trigger, not a count):
        # a store from before snapshots is compacted forward at the first publish, off the start's path.
        ids = chain_snapshot_ids(self.store, self.job, self.path, self.head, self._snapshot_hint)
        newest = max((_number(i) for i in ids), default=0)
        self._unsnapshotted = max(0, _number(self.head) - newest)
