"""Where a start's seconds go (runtime/service/start_phases.py): phases relative to the process's own
start, each taken once, the first batch after the restored one."""

from __future__ import annotations

import subprocess
import sys
import time

from sparkpoint.runtime.service.start_phases import ORDER, StartPhases, process_started


def test_the_origin_is_the_process_start_not_the_recorder() -> None:
    """A child that sleeps before it asks still counts from its own start (/proc/self/stat)."""
    code = ("import time; time.sleep(0.6); from sparkpoint.runtime.service.start_phases import process_started; "
            "print(time.monotonic() - process_started())")
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 0.6 <= age < 30
    assert process_started() <= time.monotonic()


def test_phases_are_taken_once_and_reported_in_order() -> None:
    now = [100.0]
    phases = StartPhases(origin=90.0, clock=lambda: now[0])
    phases.mark("session")
    now[0] = 105.0
    phases.mark("restored")
    phases.mark("session")  # again: the first time stands
    assert phases.to_json() == {"restored": 15.0, "session": 10.0}
    assert list(phases.to_json()) == [n for n in ORDER if n in ("restored", "session")]


def test_the_first_batch_is_the_first_after_the_restored_one() -> None:
    now = [0.0]
    phases = StartPhases(origin=0.0, clock=lambda: now[0])
    phases.note_batches(planned=7, committed=7, restored=7)  # the restored batch itself: nothing new
    assert not phases.has("firstBatchPlanned")
    now[0] = 1.0
    phases.note_batches(planned=8, committed=7, restored=7)
    now[0] = 2.0
    phases.note_batches(planned=8, committed=8, restored=7)
    assert phases.to_json() == {"firstBatchPlanned": 1.0, "firstBatchCommitted": 2.0}
    fresh = StartPhases(origin=0.0, clock=lambda: 3.0)
    fresh.note_batches(planned=None, committed=0, restored=None)  # a fresh start: batch 0 counts
    assert fresh.to_json() == {"firstBatchPlanned": 3.0, "firstBatchCommitted": 3.0}
