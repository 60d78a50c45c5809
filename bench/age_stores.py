"""The delta sink's part of an aged store for bench/age_bench.py: the Delta log a job of 10 s checkpoints
leaves beside its commit entries (docs/design.md §6), written in Delta's documented layout.

One commit per checkpoint, `_delta_log/<version:020d>.json`: version 0 also holds the protocol and the
table's metadata; each adds that checkpoint's one Parquet part (by path relative to the table's root,
as the sink commits them in place), with the app transaction (incarnation, checkpoint number) and a
commitInfo naming the checkpoint, as DeltaSink.publish writes them. Each commit file is dated when
its checkpoint ran (10 s apart, the newest a minute ago), so the GC pass's Delta retention (168h)
holds the commits of the last week. delta-rs then writes the table's checkpoint at the last version
(what a table of that age has: delta-rs checkpoints every 100 commits by default), so loading the
table does not replay every commit.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

SCHEMA = {"type": "struct", "fields": [{"name": "v", "type": "long", "nullable": True, "metadata": {}}]}


def add_delta_log(table_root: Path, keys: list[str], job_root: str, incarnation: str = "uid") -> None:
    """Write the log of a table whose version i added the data file keys[i] (store keys under
    `job_root`/outputs/default/), then its checkpoint with delta-rs."""
    log = table_root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    now = time.time()
    prefix = f"{job_root}/outputs/default/"
    n = len(keys)
    for i, key in enumerate(keys):
        stamp = now - 60 - (n - 1 - i) * 10
        ms = int(stamp * 1000)
        actions = []
        if i == 0:
            actions += [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                        {"metaData": {"id": "00000000-0000-0000-0000-000000000001",
                                      "format": {"provider": "parquet", "options": {}},
                                      "schemaString": json.dumps(SCHEMA), "partitionColumns": [],
                                      "configuration": {}, "createdTime": ms}}]
        path = key[len(prefix):]
        size = (table_root / path).stat().st_size
        actions += [{"add": {"path": path, "partitionValues": {}, "size": size, "modificationTime": ms,
                             "dataChange": True, "stats": json.dumps({"numRecords": 1})}},
                    {"txn": {"appId": incarnation, "version": i + 1, "lastUpdated": ms}},
                    {"commitInfo": {"timestamp": ms, "operation": "WRITE",
                                    "sparkpoint.checkpoint": f"chk-{i + 1:06d}"}}]
        commit = log / f"{i:020d}.json"
        commit.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
        os.utime(commit, (stamp, stamp))
    from deltalake import DeltaTable

    DeltaTable(f"file://{table_root}").create_checkpoint()
