"""The driver's side of a restore on N executors (docs/design.md §4, "Restores on N executors").

The driver restores only its share of the restore point into its hot dir (`metadata`, `offsets/`,
`commits/`, `sources/`, the operators' `state/<op>/_metadata`, the schema file in `state/<op>/0/_metadata/`:
everything but the state stores' files), tells every executor's agent the restore point and its partitions' files, and runs the
query on `sparkpoint://<hot dir>`: the JVM file system (jvm/) has each executor fetch a partition
through its agent when it first opens it (materialize.py). A function for the runtime to call; the
pipeline and the pods are wired later.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.runtime.checkpoint.concurrent_calls import concurrently
from sparkpoint.runtime.checkpoint.freeze import partition_dir_of
from sparkpoint.runtime.checkpoint.restore import restore
from sparkpoint.runtime.store import JobRef, Manifest, ObjectStore
from sparkpoint.runtime.store.manifest import FileEntry

from .client import AgentClient
from .materialize import RestoreSet

SCHEME = "sparkpoint"
FILE_SYSTEM_CLASS = "sparkpoint.fs.LazyStateFileSystem"


def drivers_share(entry: FileEntry) -> bool:
    """Everything of a manifest outside the state partition directories, and the state schema file
    Spark's driver keeps in partition 0's directory (`state/<op>/0/_metadata/schema`: the driver checks
    the query's schema against it, and writes it; executors never read it)."""
    return partition_dir_of(entry.path) is None or entry.path.split("/")[3:4] == ["_metadata"]


def checkpoint_location(hot_dir: str | os.PathLike[str]) -> str:
    """The hot dir under the lazy file system's scheme: the same local path in every pod."""
    return f"{SCHEME}://{Path(hot_dir).absolute().as_posix()}"


def spark_conf(jar: str | None = None) -> dict[str, str]:
    """Spark's settings for the scheme on the driver and the executors. The agent's port and token
    file come from each JVM's environment (SPARKPOINT_AGENT_PORT, SPARKPOINT_AGENT_TOKEN_FILE: an
    executor pod sets them, the driver's does not: it fetches nothing). `jar`: put it on the class
    path when the image does not ship it in Spark's jars/ (Hadoop loads file systems from there)."""
    conf = {f"spark.hadoop.fs.{SCHEME}.impl": FILE_SYSTEM_CLASS,
            # Hadoop's FileContext has no binding for the scheme: Spark's checkpoint file manager then
            # falls back to the FileSystem one (a warning per query), so name it outright.
            "spark.sql.streaming.checkpointFileManagerClass":
                "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"}
    if jar:
        conf |= {"spark.driver.extraClassPath": jar, "spark.executor.extraClassPath": jar}
    return conf


@dataclass(frozen=True)
class ExecutorRestore:
    manifest: Manifest
    restore_set: RestoreSet  # what the agents were told
    checkpoint_location: str  # for the query: sparkpoint://<hot dir>
    files: int  # restored by the driver
    bytes: int
    seconds: float


def restore_for_executors(store: ObjectStore, job: JobRef, hot_dir: str | os.PathLike[str], agents: Sequence[AgentClient], *,
                          checkpoint_id: str | None = None, savepoint: str | None = None) -> ExecutorRestore:
    """Restore the driver's share of a checkpoint (the newest when neither is named) or a savepoint into
    `hot_dir` (checkpoint/restore.py: verified, all or nothing), then tell every agent the point.
    RestoreError as a driver's restore raises it (the caller falls back to an older point)."""
    started = time.perf_counter()
    result = restore(store, job, hot_dir, checkpoint_id=checkpoint_id, savepoint=savepoint, select=drivers_share)
    restore_set = RestoreSet.of(result.manifest, savepoint)
    concurrently(*[lambda a=a: a.set_restore_point(restore_set) for a in agents])  # type: ignore[misc]
    return ExecutorRestore(manifest=result.manifest, restore_set=restore_set,
                           checkpoint_location=checkpoint_location(hot_dir), files=result.files,
                           bytes=result.bytes, seconds=round(time.perf_counter() - started, 4))


def fresh_for_executors(agents: Sequence[AgentClient]) -> None:
    """A start without state: the agents are told so (a partition then starts empty, by choice)."""
    concurrently(*[lambda a=a: a.set_restore_point(RestoreSet(point=None)) for a in agents])  # type: ignore[misc]
