"""Checkpoints on top of the object store: take, restore, savepoints, fencing, garbage collection.

(`freeze.py` and `coordinator.py` in this package belong to the Spark runtime.)
"""

from sparkpoint.runtime.store.manifest import FileEntry, Manifest, ManifestError

from .catalog import latest_checkpoint, list_checkpoint_ids, list_checkpoints, load_manifest
from .errors import CheckpointError
from .fence import FencedError, read_fence, write_fence
from .gc import GcError, GcGraceError, GcPass, GcResult, gc_pass
from .hashing import HashCache, sha256_file
from .id_floor import record_id_floor
from .operation import CheckpointOperation, CheckpointResult
from .restore import RestoreError, RestoreResult, restore
from .savepoint import SavepointError, create_savepoint, delete_savepoint, list_savepoints, load_savepoint
from .verify import VerifyResult, verify
from .writer import CheckpointWriter

__all__ = [
    "CheckpointError", "CheckpointOperation", "CheckpointResult", "CheckpointWriter", "FencedError",
    "FileEntry", "GcError", "GcGraceError", "GcPass", "GcResult", "HashCache", "Manifest", "ManifestError",
    "RestoreError", "RestoreResult", "SavepointError", "VerifyResult", "create_savepoint",
    "delete_savepoint", "gc_pass", "latest_checkpoint", "list_checkpoint_ids", "list_checkpoints",
    "list_savepoints", "load_manifest", "load_savepoint", "read_fence", "record_id_floor", "restore", "sha256_file",
    "verify", "write_fence",
]
