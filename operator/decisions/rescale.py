"""Rescaling state (issue 26): what the operator makes of a runtime's repartition. Pure.

Changing spark.shufflePartitions is an upgrade like any change of the spark section (step.spec_key
hashes it): the new attempt restores the point upgradeMode chose, and its runtime repartitions the
state before the query starts (runtime/spark/rescale.py). The runtime reports the repartition on
GET /status ("rescale"); the operator records it as status.lastRescale and posts a Rescaled event,
once per attempt. A repartition Spark refuses ends the runtime with exit 4: an upgrade on trial
rolls back at once (not after crash-looping through maxRestarts) to the stable spec, with its
partition count, and the restore point the upgrade started from. Outside an upgrade the job is
Failed at once (RescaleFailed): Spark's refusal is deterministic, so retrying it would only
crash-loop until maxRestarts; an edit of the spec starts a new attempt.

Some changes cannot work at all: a partition count under the HDFS state store, or another state store
for state a checkpoint holds (runtime/spec/changes.py). The API server refuses them where CEL runs;
refuse_state_change refuses them here too, before any attempt: the job keeps running the spec it ran.
"""

from __future__ import annotations

from . import checkpoints as cp
from .model import RESCALE_FAILED_EXIT, PodObs, RescaleFailure
from .status_model import Failure, RescaleRecord
from .step import Step, state_change_refused, with_stable_pod
from .upgrade import roll_back_if_late

__all__ = ["RESCALE_FAILED_EXIT", "refuse_state_change", "report_rescale", "rescale_failed", "rescale_failure_text"]


def refuse_state_change(run: Step) -> None:
    """The CR's spec changes what Spark cannot apply to the job's state, judged against the spec the
    job last ran (the CRD's transition rules judge the same against the CR before; this covers a
    cluster without CEL): the job keeps running the last stable spec (the CR's sections that need no
    new pod apply), and lastFailure and a Warning Event SpecChangeRefused say why, once per generation.
    Judged every round the CR's spec differs from the stable one, so an edit that starts without state
    (restoreFrom.fresh, upgradeMode stateless: no new spec key) is let through; never a crash loop."""
    stable = run.tr.stable_spec_doc
    if not stable or run.rolled_back:
        return
    message = state_change_refused(run.obs.spec, run.tr)
    if message is None:
        return
    run.spec, run.rolled_back, run.change_refused = with_stable_pod(run.obs.spec, stable), True, True
    text = f"spec generation {run.obs.generation} refused, the job keeps running the last stable spec: {message}"
    last = run.st.last_failure
    if last is None or (last.reason, last.message) != ("SpecChangeRefused", text):
        run.st.last_failure = Failure(reason="SpecChangeRefused", message=text, at=cp.iso(run.now))
        run.d.emit("Warning", "SpecChangeRefused", text)


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
    """Exit 4: Spark refused to repartition the restored state. The refusal is deterministic (the same
    point and partition count are refused again), so no attempt is retried for it: an upgrade on
    trial rolls back now to the stable spec; otherwise the job is Failed at once (RescaleFailed), and
    an edit of the spec starts a new attempt (machine._terminal). True if either happened."""
    if RESCALE_FAILED_EXIT not in (pod.exit_code, pod.last_exit_code):
        return False
    what = rescale_failure_text(pod.rescale_failure, run.spec.spark.shuffle_partitions)
    if run.upgrade_unproven():
        run.tr.upgrade_deadline = run.now
        if roll_back_if_late(run, None):
            stable = (run.tr.stable_spec_doc or {}).get("spark", {}).get("shufflePartitions")
            message = (f"attempt {run.attempt} could not repartition the state {what} (exit 4, see the pod's "
                       "termination message); rolled back to the last stable spec"
                       + (f" ({stable} partitions)" if stable else ""))
            run.st.last_failure = Failure(reason="RescaleFailed", message=message, at=cp.iso(run.now))
            run.d.emit("Warning", "RescaleFailed", message)
            return True
    how = ("create the job again at its state's partition count, or name a new spec.restoreFrom.fresh (under "
           "spark.stateStore hdfs the count cannot be edited)" if run.spec.spark.state_store == "hdfs" else
           "edit the spec (e.g. spark.shufflePartitions or spec.restoreFrom) to start a new attempt")
    message = (f"attempt {run.attempt} could not repartition the state {what} (exit 4, see the pod's termination "
               f"message); not retried, since Spark refuses the same repartition again: {how}")
    run.st.restarts += 1
    run.fail_for_good("RescaleFailed", message, "RescaleFailed", message)
    return True


def rescale_failure_text(failure: RescaleFailure | None, spec_partitions: int) -> str:
    """"from 4 to 2 partitions (invalid-checkpoint)", as far as the termination message says; without
    one (an older runtime, a lost message) the target is the spec's partition count."""
    source = f"from {failure.source} " if failure and failure.source is not None else ""
    target = failure.target if failure and failure.target is not None else spec_partitions
    reason = f" ({failure.reason})" if failure and failure.reason else ""
    return f"{source}to {target} partitions{reason}"
