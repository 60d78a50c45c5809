"""Executor-side state (docs/design.md §4, "Executor-side state"; issue 42): each executor freezes,
hashes and uploads its own state partitions, and the driver merges what they report into the one
manifest it commits. A protocol of a mode the CRD does not expose yet.

The executor's side: `prepare.py` (freeze and hash one executor's partitions), `upload.py` (upload
the objects the driver's plan asks for); the documents they return: `report.py`; the driver's pure
merge: `merge.py`; the driver's checkpoint with executors: `driver.py`; the executor's agent, which
serves the two steps over HTTP, and the driver's handle on it: `agent.py`, `client.py`. The room imports only the
checkpoint and store rooms (pyproject.toml, contract "executor-state-below"): an executor's agent
runs without Spark's driver, the service or a sink.
"""

from .agent import Agent, serve
from .client import AgentHandle
from .driver import (
    ExecutorCheckpoint,
    ExecutorHandle,
    checkpoint_with_executors,
    expected_operators,
    prepare_request,
)
from .merge import ConflictingStateFile, MergedState, StateMergeError, UncoveredPartitions, merge_reports
from .prepare import Prepared, prepare
from .report import ExecutorReport, PrepareRequest, StateFile, UploadAck, UploadRequest
from .upload import upload

__all__ = [
    "Agent", "AgentHandle", "serve",
    "ConflictingStateFile", "ExecutorCheckpoint", "ExecutorHandle", "ExecutorReport", "MergedState", "PrepareRequest", "Prepared", "StateFile",
    "StateMergeError", "UncoveredPartitions", "UploadAck", "UploadRequest", "checkpoint_with_executors", "expected_operators",
    "merge_reports", "prepare", "prepare_request", "upload",
]
