"""Produce-to-commit latency of the Kafka benchmark, read back from the store after a run: for every
commit of the output, the rows it made visible and when (the commit object's last-modified time, as
the store recorded it), minus each row's Kafka timestamp (the producer's send time; one clock, one
machine). Sparkpoint: the Delta log's versions (`_delta_log/<version>.json`, its `add` actions).
Vanilla Spark: its file sink's log (`_spark_metadata/<batch>`, compacted every 10 batches into
`<batch>.compact`, which repeats the earlier files: only files not seen before count)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC
from typing import Any
from urllib.parse import unquote, urlparse

from sparkpoint.runtime.store import ObjectStore

Commit = tuple[float, list[str]]  # (commit time, store keys of the files it made visible)


def delta_actions(text: str) -> list[str]:
    """Paths (relative to the table, URL-decoded) of the `add` actions of one Delta log entry."""
    out = []
    for line in text.splitlines():
        if line.strip():
            action = json.loads(line)
            if "add" in action:
                out.append(unquote(action["add"]["path"]))
    return out


def file_sink_paths(text: str) -> list[str]:
    """The file URIs one `_spark_metadata` entry lists (its first line is the version, e.g. `v1`)."""
    lines = [line for line in text.splitlines()[1:] if line.strip()]
    return [json.loads(line)["path"] for line in lines if json.loads(line).get("action", "add") == "add"]


def _number(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1].removesuffix(".json").removesuffix(".compact")
    return int(name) if name.isdigit() else None


def delta_commits(store: ObjectStore, table_key: str) -> list[Commit]:
    infos = sorted((i for i in store.list(f"{table_key}/_delta_log/") if i.key.endswith(".json")
                    and _number(i.key) is not None), key=lambda i: _number(i.key) or 0)
    return [(i.last_modified, [f"{table_key}/{p}" for p in delta_actions(store.get_bytes(i.key).decode())])
            for i in infos]


def file_sink_commits(store: ObjectStore, out_key: str, key_of_uri) -> list[Commit]:  # type: ignore[no-untyped-def]
    """`key_of_uri` maps a file URI (s3a://bucket/...) to its store key."""
    infos = sorted((i for i in store.list(f"{out_key}/_spark_metadata/") if _number(i.key) is not None),
                   key=lambda i: _number(i.key) or 0)
    seen: set[str] = set()
    commits = []
    for info in infos:
        keys = [key_of_uri(u) for u in file_sink_paths(store.get_bytes(info.key).decode())]
        commits.append((info.last_modified, [k for k in keys if k not in seen]))
        seen.update(keys)
    return commits


def s3a_key(prefix: str):  # type: ignore[no-untyped-def]
    """URI -> key of a store opened at s3://bucket/<prefix>."""
    def key(uri: str) -> str:
        path = urlparse(uri).path.lstrip("/")
        return path[len(prefix) + 1:] if prefix and path.startswith(prefix + "/") else path
    return key


def produced_seconds(data: bytes) -> list[float]:
    """The `produced` (Kafka timestamp) column of one Parquet file, as epoch seconds."""
    import pyarrow.parquet as pq

    column = pq.read_table(io.BytesIO(data), columns=["produced"]).column("produced")
    # Spark's INT96 timestamps come back without a zone: they are UTC
    return [(ts if ts.tzinfo else ts.replace(tzinfo=UTC)).timestamp()
            for ts in column.to_pylist() if ts is not None]


def latencies(store: ObjectStore, commits: list[Commit], since: float = 0.0) -> Iterator[float]:
    """One latency per row produced at or after `since` (earlier rows: a warm-up)."""
    for committed_at, keys in commits:
        for key in keys:
            for produced in produced_seconds(store.get_bytes(key)):
                if produced >= since:
                    yield committed_at - produced


def summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"rows": 0}
    ordered = sorted(values)

    def pct(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)
    return {"rows": len(ordered), "p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99), "max": round(ordered[-1], 3),
            "mean": round(sum(ordered) / len(ordered), 3)}
