"""Reading Spark's own checkpoint files as Spark would, without a JVM (validation and lineage).

- `offsets/N`, `commits/N`: a version line (`v1`; commits `v2` with checkpoint format v2), then one
  JSON object, then (offsets) one line per source: a JSON offset or `-`.
- State changelogs are compressed with lz4-java's block format (`spark.sql.streaming.stateStore
  .compression.codec`, default lz4): blocks of a 21-byte header (magic `LZ4Block`, token, compressed
  and raw lengths, checksum) and their bytes, closed by an empty block. A file whose blocks do not
  chain exactly to its end is truncated or overwritten. (Garbled bytes inside a block are found only
  when Spark decompresses them; a start that fails that way falls back to the store: recovery.py.)
- RocksDB snapshot zips hold a `metadata` entry listing their SST files.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path
from typing import Any


class SparkFileError(ValueError):
    """A Spark checkpoint file a restart would read is unreadable or malformed."""


_LOG_VERSIONS = {"offsets": {1}, "commits": {1, 2}}
_LZ4_MAGIC = b"LZ4Block"
_LZ4_HEADER = struct.Struct("<8sBiii")
_LZ4_METHODS = {0x10, 0x20}  # raw, lz4


def parse_log_entry(path: Path, kind: str) -> dict[str, Any]:
    """The JSON header of an offsets/ or commits/ entry; raises SparkFileError when Spark could not
    parse it either."""
    try:
        lines = path.read_bytes().decode("utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise SparkFileError(f"cannot read {kind}/{path.name}: {exc}") from None
    head = lines[0]
    if not (head.startswith("v") and head[1:].isdigit() and int(head[1:]) in _LOG_VERSIONS[kind]):
        raise SparkFileError(f"{kind}/{path.name} has no supported version line (found {head[:20]!r})")
    try:
        meta = json.loads(lines[1]) if len(lines) > 1 else None
        if kind == "offsets":
            for line in lines[2:]:
                if line and line != "-":
                    json.loads(line)
    except ValueError as exc:
        raise SparkFileError(f"{kind}/{path.name} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise SparkFileError(f"{kind}/{path.name} has no JSON metadata line")
    if kind == "offsets" and len(lines) < 3:
        raise SparkFileError(f"offsets/{path.name} records no source offset")
    return meta


def check_lz4_blocks(path: Path) -> None:
    """Raise SparkFileError unless the file is a complete chain of lz4-java blocks."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SparkFileError(f"cannot read {path}: {exc}") from None
    pos = 0
    while True:
        if len(data) - pos < _LZ4_HEADER.size:
            raise SparkFileError(f"{path.name} is truncated at byte {pos} (no closing lz4 block)")
        magic, token, compressed, raw, _checksum = _LZ4_HEADER.unpack_from(data, pos)
        if magic != _LZ4_MAGIC or (token & 0xF0) not in _LZ4_METHODS or compressed < 0 or raw < 0:
            raise SparkFileError(f"{path.name} has no lz4 block header at byte {pos}")
        pos += _LZ4_HEADER.size
        if compressed == 0 and raw == 0:
            if pos != len(data):
                raise SparkFileError(f"{path.name} has {len(data) - pos} bytes after its closing lz4 block")
            return
        if (token & 0xF0) == 0x10 and compressed != raw:
            raise SparkFileError(f"{path.name}: raw lz4 block at byte {pos} has inconsistent lengths")
        pos += compressed
        if pos > len(data):
            raise SparkFileError(f"{path.name} is truncated inside the lz4 block ending at byte {pos}")


def check_snapshot_zip(path: Path) -> list[str]:
    """The SST file names a RocksDB snapshot zip needs; SparkFileError when it is unreadable."""
    try:
        with zipfile.ZipFile(path) as zf:
            text = zf.read("metadata").decode()
        body = text.split("\n", 1)[1] if text.startswith("v") else text  # first line is the format ("v1")
        return [f["dfsSstFileName"] for f in json.loads(body).get("sstFiles", [])]
    except (KeyError, zipfile.BadZipFile, OSError, ValueError, UnicodeDecodeError, IndexError) as exc:
        raise SparkFileError(f"unreadable RocksDB snapshot {path}: {exc}") from None


def check_state_file(path: Path, codec: str = "lz4") -> None:
    """What a restart would fail on when loading this state file (`codec`: the query's state store
    compression codec, as its offsets log records it)."""
    if path.name.endswith(".changelog") and codec == "lz4":
        check_lz4_blocks(path)
    elif path.name.endswith(".zip"):
        check_snapshot_zip(path)
    elif not path.is_file():
        raise SparkFileError(f"{path} is missing")
