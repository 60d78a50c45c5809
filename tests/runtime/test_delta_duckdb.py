"""DuckDB as a reader of the delta sink's table, without DuckDB's `delta` extension (it downloads at
run time; extension loading is turned off here, so a test that needed one would fail).

Two paths, both from the file list delta-rs gives for the table's current version:
- a directory store: `read_parquet` on `DeltaTable.file_uris()` (local paths; DuckDB's Parquet
  reader is built in);
- an s3:// store: the URIs are s3:// ones, which DuckDB reads only through its `httpfs` extension, so
  DuckDB scans `DeltaTable.to_pyarrow_dataset()` instead (delta-rs's file list and its object store
  client, DuckDB's built-in Arrow scan).
The table holds a history with a restore to an older point, so the current version drops files
that are still in the folder: reading the folder's Parquet files would count them.
"""

from __future__ import annotations

import duckdb
import pytest
from deltalake import DeltaTable

from sparkpoint.runtime.store import DirectoryStore

from .test_delta_vacuum import DeltaGcModel


def _connect() -> duckdb.DuckDBPyConnection:
    return duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})


def test_duckdb_reads_exactly_the_current_version(store, job, tmp_path):
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    for action, arg in [("batch", 2), ("checkpoint", 0), ("batch", 2), ("checkpoint", 0), ("restore", 0),
                        ("batch", 3), ("checkpoint", 0)]:
        model.step(action, arg)  # chk-2's two rows left the table with the restore to chk-1
    loc = model.sink.location
    table = DeltaTable(loc.uri, storage_options=loc.storage_options)
    con = _connect()
    if isinstance(store, DirectoryStore):
        rel = con.read_parquet(table.file_uris())
        every_file = con.read_parquet(f"{loc.uri}/staging/**/*.parquet")
        assert every_file.count("*").fetchall() == [(7,)]  # the folder still holds the dropped files
    else:
        assert all(u.startswith("s3://") for u in table.file_uris())
        with pytest.raises(duckdb.Error, match="httpfs"):  # s3:// needs an extension DuckDB would download
            con.read_parquet(table.file_uris()).fetchall()
        rel = con.from_arrow(table.to_pyarrow_dataset())
    assert sorted(v for (v,) in rel.select("v").fetchall()) == list(range(5))
    assert con.sql("select count(*), sum(v) from rel").fetchall() == [(5, 10)]
