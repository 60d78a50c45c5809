"""The Delta Lake table of a `kind: delta` sink, through delta-rs (`deltalake`; docs/design.md §6).

The table's root is the sink's folder `<job>/outputs/<path>/` in the job's store: its log is
`_delta_log/` there and its data files are the staged Parquet files the checkpoints upload
(`staging/attempt-<A>/batch-<B>-<run>/part-<i>.parquet`, paths relative to the root), so nothing is
copied. Only this module talks to delta-rs.

`sync_table` makes the table's current version hold exactly a given set of files, in one Delta
commit (adds and removes together) or none when it already does. A checkpoint's commit carries
`Transaction(<incarnation>, <checkpoint number>)` and names the checkpoint in its commitInfo.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.runtime.store import DirectoryStore, ObjectStore

CHECKPOINT_META = "sparkpoint.checkpoint"  # commitInfo key: the checkpoint a commit published
COMPACTION_META = "sparkpoint.compaction"  # commitInfo key: the compaction records a commit applied


@dataclass(frozen=True)
class TableFile:
    path: str  # relative to the table's root
    size: int
    rows: int


@dataclass(frozen=True)
class DeltaLocation:
    uri: str
    options: dict[str, str] = field(default_factory=dict, repr=False)
    # The store's credentials provider (minio's Provider), asked on every use: temporary credentials
    # (the cloud's own identity) are refreshed before they expire, and delta-rs gets the current ones.
    credentials: Any = field(default=None, repr=False, compare=False)

    @property
    def storage_options(self) -> dict[str, str]:
        """delta-rs's options: never logged (they hold credentials)."""
        if self.credentials is None:
            return dict(self.options)
        creds = self.credentials.retrieve()
        keys = {"AWS_ACCESS_KEY_ID": creds.access_key, "AWS_SECRET_ACCESS_KEY": creds.secret_key}
        if creds.session_token:
            keys["AWS_SESSION_TOKEN"] = creds.session_token
        return {**self.options, **keys}


def delta_location(store: ObjectStore, key: str) -> DeltaLocation:
    """Where delta-rs finds the table whose root is the store key `key` (a folder, no trailing '/'),
    reached as the store is: its endpoint, region and credentials (static keys or the cloud's own
    identity's temporary ones, passed with their session token rather than left to delta-rs's own
    AWS chain, so the runtime has one identity and one STS endpoint setting)."""
    if isinstance(store, DirectoryStore):
        return DeltaLocation(str(store.root / key))
    bucket, prefix = getattr(store, "bucket", None), getattr(store, "prefix", None)
    endpoint, region = getattr(store, "endpoint", None), getattr(store, "region", None)
    if bucket is None or endpoint is None:
        raise ValueError(f"the delta sink needs an s3:// or file:// store (got {store.url})")
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": region or "us-east-1",
               "AWS_ALLOW_HTTP": "true" if endpoint.startswith("http://") else "false",
               # Commits are conditional puts (If-None-Match), which the store already requires: two
               # writers can never both create the same log version, and no lock service is needed.
               "conditional_put": "etag"}
    return DeltaLocation(f"s3://{bucket}/{f'{prefix}/' if prefix else ''}{key}", options,
                         getattr(store, "credentials", None))


def open_table(loc: DeltaLocation) -> Any | None:
    """The table's latest version, or None if no table exists there yet."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(loc.uri, storage_options=loc.storage_options):
        return None
    return DeltaTable(loc.uri, storage_options=loc.storage_options)


def table_paths(table: Any) -> set[str]:
    """The data files of the table's version (paths relative to its root)."""
    import pyarrow as pa

    return set(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())


def last_published(table: Any) -> str | None:
    """The checkpoint the table's newest commit published (None for any other commit)."""
    history = table.history(1)
    return history[0].get(CHECKPOINT_META) if history else None


def _add(f: TableFile, now_ms: int, data_change: bool = True) -> Any:
    from deltalake.transaction import AddAction

    return AddAction(f.path, f.size, {}, now_ms, data_change, json.dumps({"numRecords": f.rows}))


def sync_table(loc: DeltaLocation, want: list[TableFile], *, schema_of: Any = None,
               app: tuple[str, int] | None = None, checkpoint: str | None = None,
               only_add: bool = False, compaction: list[str] | None = None) -> bool:
    """Commit so that the table's version holds exactly `want` (with `only_add`: `want` added to what
    it holds). `schema_of()` gives the Arrow schema when the table must be created. `app`: the
    commit's (app id, version) transaction. `compaction`: the records this commit applies (its adds
    and removes then change no data: Delta readers of changes skip it). True if a commit was made."""
    from deltalake import CommitProperties, Schema, Transaction
    from deltalake.transaction import RemoveAction, create_table_with_add_actions

    meta = {CHECKPOINT_META: checkpoint} if checkpoint else {}
    if compaction:
        meta[COMPACTION_META] = ",".join(compaction)
    data_change = not compaction
    props = CommitProperties(custom_metadata=meta or None,
                             app_transactions=[Transaction(app[0], app[1])] if app else None)
    now = int(time.time() * 1000)
    table = open_table(loc)
    if table is None:
        if not want:
            return False  # no rows yet: the table (and its schema) comes with the first file
        create_table_with_add_actions(loc.uri, Schema.from_arrow(schema_of()), [_add(f, now) for f in want],
                                      mode="error", storage_options=loc.storage_options, commit_properties=props)
        return True
    held = table_paths(table)
    adds = [_add(f, now, data_change) for f in want if f.path not in held]
    wanted = {f.path for f in want}
    removes = [] if only_add else [RemoveAction(path=p, data_change=data_change, deletion_timestamp=now)
                                   for p in sorted(held - wanted)]
    if not adds and not removes and app is None:
        return False
    table.create_write_transaction([*adds, *removes], mode="append", schema=table.schema(),
                                   commit_properties=props)
    return True


def transaction_version(loc: DeltaLocation, app_id: str) -> int | None:
    table = open_table(loc)
    return None if table is None else table.transaction_version(app_id)
