"""Which files of a checkpoint travel inside its manifest instead of as objects of their own.

Spark writes tiny files every micro-batch: an offset log entry (about 1.2 KiB) and a commit log
entry (tens of bytes). Uploaded one object each, they are about a fifth of a checkpoint's requests
at low churn (the rest are the state store's changelog files, one per partition per batch, 5-30 KiB
in the churn benchmark), and each request costs latency and money on S3. With SPARKPOINT_CHECKPOINT_INLINE_MAX
set (2048 recommended; off by default), a file no larger than that is carried base64-encoded in its
manifest entry instead, up to `budget` bytes per manifest (a tree
of many small files cannot grow the manifest without bound; the rest are objects as before).

The bytes are taken from the frozen file and checked against the hash the checkpoint recorded; a
file the base manifest already carries is taken from there, after the same check, so a steady tree
is not read again at every checkpoint. Restore and verify check size and sha256 of inline files
like those of objects.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from sparkpoint.runtime.store.manifest import Manifest

INLINE_MAX_ENV = "SPARKPOINT_CHECKPOINT_INLINE_MAX"
# Off unless asked for: docs/design.md section 3 (a contract) says every file's bytes are an object under
# objects/, and tools outside the runtime may rely on it. The README says how to turn it on.
DEFAULT_MAX_FILE = 0
RECOMMENDED_MAX_FILE = 2048  # bytes; Spark's offset log entries are about 1.2 KiB, .crc files smaller
DEFAULT_BUDGET = 1024 * 1024  # inline bytes per manifest (about 1.4 MB of base64)


class InlineError(Exception):
    """A file to carry inline does not hold the bytes its checkpoint hashed (the writer turns this
    into a CheckpointError)."""


def max_file_from_env(env: Mapping[str, str] | None = None) -> int:
    """SPARKPOINT_CHECKPOINT_INLINE_MAX: the largest file carried inline, in bytes; 0 turns it off."""
    raw = (os.environ if env is None else env).get(INLINE_MAX_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_FILE
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{INLINE_MAX_ENV}={raw!r} is not a whole number of bytes") from None
    if not 0 <= value <= 64 * 1024:
        raise ValueError(f"{INLINE_MAX_ENV}={value} is outside 0..65536 bytes")
    return value


def carried_by(manifest: Manifest | None) -> dict[str, str]:
    """sha256 -> base64 data of the files a manifest carries inline."""
    return {e.sha256: e.data for e in manifest.files if e.data is not None} if manifest else {}


def choose(files: Iterable[tuple[Path, int, str]], *, max_file: int, budget: int = DEFAULT_BUDGET,
           known: Mapping[str, str] | None = None) -> dict[str, str]:
    """sha256 -> base64 data for the files to carry inline, from (path, size, sha256) in tree order.

    Decided per content: every file with a chosen hash is inline. Raises InlineError if a file's
    bytes are not the ones hashed (it changed after hashing: the checkpoint must not commit)."""
    chosen: dict[str, str] = {}
    used = 0
    known = known or {}
    for path, size, sha in files:
        if sha in chosen or size > max_file or used + size > budget:
            continue
        data = _verified(known.get(sha), size, sha)
        if data is None:
            data = path.read_bytes()
            if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
                raise InlineError(f"{path} changed after it was hashed; not carrying it inline")
        chosen[sha] = base64.b64encode(data).decode()
        used += size
    return chosen


def _verified(encoded: str | None, size: int, sha: str) -> bytes | None:
    """The base manifest's bytes for `sha` if they really hash to it (a manifest read back from the
    store is checked before anything of it is carried into a new one)."""
    if encoded is None:
        return None
    try:
        data = base64.b64decode(encoded, validate=True)
    except ValueError:
        return None
    return data if len(data) == size and hashlib.sha256(data).hexdigest() == sha else None
