"""Checkpoint ids never repeat for a job name, across incarnations (docs/design.md §3).

A checkpoint's id also names its sink's commit entry (`_commits/<id>.json`), and a savepoint keeps
the ids of its source checkpoint and of the entry its output continues (`extra.sink.previous`). A
job deleted with `gc.onDelete: delete` loses its checkpoints and output but keeps its savepoints, so
a job created again under the name must not number its checkpoints from 1: its entries would take
the ids a kept savepoint names (output GC would follow the wrong chain, a restore of the savepoint
would meet an entry it did not write). The first id a writer claims is therefore above:

- `checkpoint-ids.json` {"highest": N}, which the operator's deletion writes before it deletes
  anything (the ids the deleted incarnation used, whether or not anything names them later);
- every savepoint's source checkpoint and the entry its output continues (stores deleted before the
  record existed);

and, as before, every checkpoint and pending marker listed (catalog.highest_checkpoint_number).
"""

from __future__ import annotations

import json

from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError
from sparkpoint.runtime.store.layout import CHECKPOINT_ID, checkpoint_ids_key, savepoints_prefix
from sparkpoint.runtime.store.manifest import Manifest, ManifestError

from .catalog import highest_checkpoint_number


def _number(entry_id: object) -> int:
    m = CHECKPOINT_ID.match(entry_id) if isinstance(entry_id, str) else None
    return int(m.group(1)) if m else 0


def savepoint_numbers(savepoints: list[Manifest]) -> int:
    """Pure: the highest checkpoint number the savepoints name (source, and their output's predecessor)."""
    numbers = [0]
    for sp in savepoints:
        sink = (sp.extra or {}).get("sink") or {}
        numbers += [_number(sp.source_checkpoint), _number(sink.get("previous"))]
    return max(numbers)


def recorded_floor(store: ObjectStore, job: JobRef) -> int:
    try:
        return int(json.loads(store.get_bytes(checkpoint_ids_key(job)))["highest"])
    except ObjectNotFoundError:
        return 0
    except (ValueError, KeyError, TypeError):  # unreadable: the savepoints and listings still bound it
        return 0


def _savepoints(store: ObjectStore, job: JobRef) -> list[Manifest]:
    """Every readable savepoint manifest (a corrupt one names no id anyone can restore)."""
    prefix, found = savepoints_prefix(job), []
    for info in store.list(prefix):
        if info.key[len(prefix):].count("/") == 1 and info.key.endswith("/manifest.json"):
            try:
                found.append(Manifest.from_json(store.get_bytes(info.key), where=info.key))
            except (ObjectNotFoundError, ManifestError):
                continue
    return found


def kept_id_floor(store: ObjectStore, job: JobRef) -> int:
    """The highest checkpoint number something kept across incarnations names (0: none): a writer's
    first id is above it (and above every listed checkpoint and marker)."""
    return max(recorded_floor(store, job), savepoint_numbers(_savepoints(store, job)))


def record_id_floor(store: ObjectStore, job: JobRef) -> int:
    """Before a deletion (gc.onDelete: delete): record the highest number used so far. Idempotent:
    the record only grows (a deletion cut short and run again keeps what the first run recorded)."""
    highest = max(kept_id_floor(store, job), highest_checkpoint_number(store, job))
    if highest > recorded_floor(store, job):
        store.put_bytes(checkpoint_ids_key(job), json.dumps({"highest": highest}).encode())
    return highest
