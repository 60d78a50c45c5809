"""The runtime's GET /status document (docs/design.md §8, a contract), read from the control API's
thread while the attempt runs."""

from __future__ import annotations

from typing import Any


def status_of(rt: Any) -> dict[str, Any]:
    """`rt`: a runner.JobRuntime."""
    coord = rt.coordinator
    r = rt.restore
    following = rt.standby is not None and not rt.standby.promoted  # claims no attempt (yet)
    return {
        "job": str(rt.job), "attempt": None if following else rt.attempt, "phase": rt.phase,
        "restore": r and {"source": r.source, "batchId": r.batch_id, "seconds": round(r.seconds, 3),
                          "checkpoint": r.manifest.id if r.manifest else None, "reason": r.reason,
                          "fallbacks": [f.to_json() for f in r.fallbacks]},
        "rescale": rt.rescale.to_json() if rt.rescale else None,
        "latestCommittedBatch": rt.committed_batch(),
        "lastProgress": rt.last_progress,
        "latestCheckpoint": rt.pipeline.latest if rt.pipeline else None,
        "checkpointsInFlight": coord.in_flight() if coord else 0,
        "consecutiveCheckpointFailures": coord.consecutive_failures() if coord else 0,
        "stagedOutputBytes": rt._staged_bytes(),
        "recentCheckpoints": [c.to_json() for c in coord.recent(10)] if coord else [],
        "startPhases": rt.start_phases.to_json(),
        # a standby (service/standby.py): what it holds, how far behind, what it fetched; after its
        # promotion also what the top-up reused and downloaded. None: started as a new pod.
        "standby": rt.standby.to_json() if rt.standby else None,
    }
