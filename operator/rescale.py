"""Rescaling state (issue 26): what the operator makes of a runtime's repartition. Pure.

Changing spark.shufflePartitions is an upgrade like any change of the spark section (step.spec_key
hashes it): the new attempt restores the point upgradeMode chose, and its runtime repartitions the
state before the query starts (runtime/spark/rescale.py). The runtime reports the repartition on
GET /status ("rescale"); the operator records it as status.lastRescale and posts a Rescaled event,
once per attempt. A repartition Spark refuses ends the runtime with exit 4: an upgrade on trial
rolls back at once (not after crash-looping through maxRestarts) to the stable spec, with its
partition count, and the restore point the upgrade started from.
"""

from __future__ import annotations

from . import checkpoints as cp
from .model import PodObs
from .status_model import Failure, RescaleRecord
from .step import Step
from .upgrade import roll_back_if_late

RESCALE_FAILED_EXIT = 4  # the runtime's exit code when Spark refused to repartition the restored state


def report_rescale(run: Step) -> None:
    doc = (run.obs.runtime or {}).get("rescale")
    if not isinstance(doc, dict):
        return
    last = run.st.last_rescale
    if last is not None and last.attempt == run.attempt:
        return
    record = RescaleRecord.model_validate({"from": doc.get("from"), "to": doc.get("to"), "attempt": run.attempt,
                                           "durationSeconds": doc.get("seconds"), "batch": doc.get("batch"),
                                           "at": cp.iso(run.now)})
    run.st.last_rescale = record
    run.d.emit("Normal", "Rescaled", f"attempt {run.attempt} repartitioned the state from {record.from_partitions} "
                                     f"to {record.to} partitions in {record.duration_seconds}s")


def rescale_failed(run: Step, pod: PodObs) -> bool:
    """Exit 4 during an upgrade's trial: roll back now. True if a rollback began; otherwise the exit
    is a failed attempt like any other (the caller's rules)."""
    if RESCALE_FAILED_EXIT not in (pod.exit_code, pod.last_exit_code) or not run.upgrade_unproven():
        return False
    run.tr.upgrade_deadline = run.now
    if not roll_back_if_late(run, None):
        return False
    stable = (run.tr.stable_spec_doc or {}).get("spark", {}).get("shufflePartitions")
    message = (f"attempt {run.attempt} could not repartition the state to {run.spec.spark.shuffle_partitions} "
               f"partitions (exit 4, see the pod's termination message); rolled back to the last stable spec"
               + (f" ({stable} partitions)" if stable else ""))
    run.st.last_failure = Failure(reason="RescaleFailed", message=message, at=cp.iso(run.now))
    run.d.emit("Warning", "RescaleFailed", message)
    return True
