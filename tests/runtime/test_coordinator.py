"""Checkpoint scheduling: the pure rule (properties) and the threaded coordinator with fake phases."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint.coordinator import (
    Abandoned,
    CheckpointCoordinator,
    NothingToCheckpoint,
    due_reason,
    own_timer_due,
)


@given(now=st.floats(0, 1e6), queued=st.integers(0, 3), in_flight=st.integers(0, 4),
       max_concurrent=st.integers(1, 4), interval=st.floats(0, 100),
       last_trigger=st.none() | st.floats(0, 1e6), last_end=st.none() | st.floats(0, 1e6),
       min_pause=st.floats(0, 100))
def test_due_reason_respects_limits(now, queued, in_flight, max_concurrent, interval, last_trigger,
                                    last_end, min_pause):
    reason = due_reason(now=now, queued=queued, in_flight=in_flight, max_concurrent=max_concurrent,
                        interval=interval, last_trigger=last_trigger, last_end=last_end, min_pause=min_pause)
    if reason is not None:
        assert in_flight < max_concurrent
        assert last_end is None or now - last_end >= min_pause
    if reason == "interval":
        assert queued == 0 and interval > 0 and (last_trigger is None or now - last_trigger >= interval)
    if reason is None and in_flight < max_concurrent and (last_end is None or now - last_end >= min_pause):
        assert queued == 0  # an explicit request is never starved when a slot is free


class LoopWatch:
    """A clock for the coordinator that counts the reads its loop thread makes (two per scheduling
    pass: the timeout check and `now`), so a test waits for the loop to have looked again instead
    of sleeping past its 50 ms poll."""

    def __init__(self, source=time.monotonic) -> None:  # type: ignore[no-untyped-def]
        self.source = source
        self._reads = 0
        self._cond = threading.Condition()

    def __call__(self) -> float:
        if threading.current_thread().name == "checkpoint-coordinator":
            with self._cond:
                self._reads += 1
                self._cond.notify_all()
        return self.source()

    def passes(self, n: int = 1, timeout: float = 5, wake: CheckpointCoordinator | None = None) -> None:
        """Wait until the loop has decided n times on a clock read after this call (2n reads: one of
        the first two is a pass's `now`); fails if it does not. `wake`: notify its loop (as a new
        request does) instead of waiting out its 50 ms poll; a missed notify only costs the poll."""
        with self._cond:
            target = self._reads + 2 * n
        if wake is not None:  # not under self._cond: the loop reads this clock holding its own
            with wake._cond:
                wake._cond.notify_all()
        with self._cond:
            assert self._cond.wait_for(lambda: self._reads >= target, timeout), "the coordinator loop stalled"


def _coordinator(async_phase, **kw):
    syncs = []

    def sync(req):
        syncs.append(time.monotonic())
        return req.request_id
    c = CheckpointCoordinator(sync_phase=sync, async_phase=async_phase, **kw)
    return c, syncs


def test_max_concurrent_and_requests():
    active, peak, lock = [0], [0], threading.Lock()
    two_running, gate = threading.Event(), threading.Event()

    def held_upload(req, frozen):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            if active[0] == 2:
                two_running.set()
        gate.wait(10)  # uploads hold their slot until the test has looked
        with lock:
            active[0] -= 1
        req.checkpoint_id = f"chk-{req.request_id}"
    clock = LoopWatch()
    c, _ = _coordinator(held_upload, interval=0, timeout=10, max_concurrent=2, clock=clock)
    c.start()
    reqs = [c.request() for _ in range(5)]
    assert two_running.wait(5), "two requests were queued and two slots free, but two uploads never ran"
    clock.passes(3)  # both slots full, three queued: three scheduling passes must start no third
    assert (active[0], c.in_flight()) == (2, 2)
    gate.set()
    assert c.wait_idle(10)
    c.stop()
    assert peak[0] == 2
    assert all(r.status == "completed" for r in reqs)
    assert c.find(reqs[0].checkpoint_id) is reqs[0]


def test_a_request_unless_busy_adds_nothing_while_a_checkpoint_is_queued_or_running():
    release = threading.Event()
    c, syncs = _coordinator(lambda req, f: release.wait(10), interval=0, timeout=30)
    c.start()
    first = c.request_unless_busy("sink-budget")
    assert first is not None and first.trigger == "sink-budget"
    assert c.request_unless_busy("sink-budget") is None  # queued or running: it will publish
    release.set()
    assert c.wait_idle(10)
    again = c.request_unless_busy("sink-budget")  # idle again: a new one
    assert again is not None and c.wait_idle(10)
    c.stop()
    assert first.status == again.status == "completed" and len(syncs) == 2


def test_interval_and_min_pause():
    # The upload's 50 ms is deliberate: the gaps below are measured against min pause + upload time.
    c, syncs = _coordinator(lambda req, f: time.sleep(0.05), interval=0.2, timeout=10, min_pause=0.3)
    completed = threading.Semaphore(0)
    c.on_finished = lambda req: completed.release() if req.status == "completed" else None
    c.start()
    for n in range(4):  # four interval checkpoints completed: three gaps to measure
        assert completed.acquire(timeout=5), f"only {n} interval checkpoints completed"
    c.stop()
    gaps = [b - a for a, b in zip(syncs, syncs[1:], strict=False)]
    assert len(syncs) >= 4
    assert all(g >= 0.3 + 0.05 - 0.02 for g in gaps)  # min pause after each completion wins over interval


def test_timeout_abandons_and_frees_the_slot():
    committed = []
    release = threading.Event()

    entered: list[str] = []
    entered_cond = threading.Condition()

    def hanging(req, frozen):
        with entered_cond:
            entered.append(req.request_id)
            entered_cond.notify_all()
        release.wait(5)
        req.check_not_abandoned()  # what the real pipeline does before writing the manifest
        committed.append(req.request_id)
    c, _ = _coordinator(hanging, interval=0, timeout=0.3, max_concurrent=1)
    finished = []
    c.on_finished = finished.append
    c.start()
    first = c.request()
    assert first.done.wait(3)
    assert first.status == "timed_out"
    second = c.request()  # the slot is free again: it uploads while the first still hangs
    with entered_cond:
        assert entered_cond.wait_for(lambda: second.request_id in entered, 3), "the second never started"
    assert second.status in ("uploading", "timed_out")
    release.set()
    assert c.wait_idle(5)
    c.stop()
    assert first.request_id not in committed
    assert [r.request_id for r in finished][:1] == [first.request_id]


def test_failures_and_skips_are_reported():
    def sync(req):
        if req.trigger == "api":
            raise NothingToCheckpoint("nothing new")
        raise OSError("disk gone")
    c = CheckpointCoordinator(sync_phase=sync, async_phase=lambda r, f: None, interval=0, timeout=5)
    c.start()
    skipped = c.request(trigger="api")
    failed = c.request(trigger="stop")
    assert c.wait_idle(5)
    c.stop()
    assert skipped.status == "skipped"
    assert failed.status == "failed" and "disk gone" in failed.error


def test_abandoned_exception_does_not_mark_completed():
    def upload(req, frozen):
        raise Abandoned("late")
    c, _ = _coordinator(upload, interval=0, timeout=0.0001)
    c.start()
    r = c.request()
    assert r.done.wait(3)
    c.stop()
    assert r.status in ("timed_out",)


@settings(max_examples=50, deadline=None)
@given(order=st.permutations(range(1, 7)), give_up=st.sets(st.integers(1, 6), max_size=3))
def test_id_tickets_claim_in_ticket_order_whatever_order_threads_arrive(order, give_up):
    """Six operations arrive in any order (some give up before claiming): claims follow tickets."""
    from sparkpoint.runtime.checkpoint.tickets import IdTickets

    tickets = IdTickets()
    mine = [tickets.take() for _ in range(6)]
    assert mine == [1, 2, 3, 4, 5, 6]
    claimed, lock = [], threading.Lock()
    arrived = {t: threading.Event() for t in mine}  # waiting for its turn, or done

    def operation(ticket: int) -> None:
        try:
            if ticket in give_up:
                return  # failed before claiming (e.g. timed out while hashing)
            # stop_check runs each time the ticket finds it is not its turn yet: it is waiting.
            tickets.wait_turn(ticket, lambda: arrived[ticket].set(), poll_seconds=0.01)
            with lock:
                claimed.append(ticket)
        finally:
            tickets.release(ticket)
            arrived[ticket].set()
    threads = {t: threading.Thread(target=operation, args=(t,)) for t in order}
    for ticket, thread in threads.items():  # each one arrives before the next starts: the order holds
        thread.start()
        assert arrived[ticket].wait(10), f"ticket {ticket} neither waited nor finished"
    for thread in threads.values():
        thread.join(10)
    assert claimed == sorted(set(range(1, 7)) - give_up)


def test_id_tickets_waiting_gives_up_when_told():
    from sparkpoint.runtime.checkpoint.tickets import IdTickets

    tickets = IdTickets()
    first, second = tickets.take(), tickets.take()

    def timed_out() -> None:
        raise Abandoned("timed out")
    try:
        tickets.wait_turn(second, timed_out, poll_seconds=0.01)
        raise AssertionError("wait_turn must give up")
    except Abandoned:
        tickets.release(second)
    tickets.release(first)
    tickets.wait_turn(tickets.take())  # the turn moved past both: no wait


# --- the own timer under an operator (external triggers) -------------------------------------------
# now, interval, last_trigger, external, last_external -> fires?
OWN_TIMER_TABLE = [
    (10.0, 10.0, 0.0, False, None, True),     # standalone: every interval
    (9.9, 10.0, 0.0, False, 9.0, False),      # standalone: not before the interval
    (10.0, 10.0, 0.0, True, 5.0, False),      # operator triggered 5 s ago: stay quiet
    (19.9, 10.0, 0.0, True, 0.0, False),      # silent for under two intervals: still quiet
    (20.0, 10.0, 0.0, True, 0.0, True),       # silent for two intervals: fall back
    (25.0, 10.0, 20.0, True, 0.0, False),     # in fallback: the own timer keeps the interval ...
    (30.0, 10.0, 20.0, True, 0.0, True),      # ... and fires every interval while the operator is out
    (30.0, 10.0, 20.0, True, 29.0, False),    # a request came back: fallback ends at once
    (100.0, 0.0, None, True, None, False),    # interval 0: no timer at all
]


@pytest.mark.parametrize("now,interval,last_trigger,external,last_external,fires", OWN_TIMER_TABLE)
def test_own_timer_is_a_fallback_under_external_triggers(now, interval, last_trigger, external,
                                                         last_external, fires):
    assert own_timer_due(now=now, interval=interval, last_trigger=last_trigger,
                         external_triggers=external, last_external=last_external) is fires


class FakeClock(LoopWatch):
    def __init__(self) -> None:
        super().__init__(lambda: self.now)
        self.now = 1000.0


def _run_fake_time(c: CheckpointCoordinator, clock: FakeClock, until: float, step: float,
                   on_tick=lambda t: None) -> None:
    """Advance the fake clock in steps, letting the coordinator's loop see every step."""
    start = clock.now
    while clock.now - start < until:
        clock.now += step
        on_tick(clock.now - start)
        assert c.wait_idle(5)
        clock.passes(1, wake=c)  # the loop has decided at this step's time
        assert c.wait_idle(5)


@pytest.mark.parametrize("external", [False, True])
def test_one_checkpoint_per_interval_under_the_operator_and_fallback_after_two(external):
    """An operator-like caller requests a checkpoint every 11 s of fake time (interval 10 s plus its
    scheduling lag) until t=100, then stops (an operator outage). With external triggers each interval
    has one checkpoint (the request), not two; once the requests stop, the own timer takes over two
    intervals after the last one. Standalone, the own timer adds its checkpoints next to the requests."""
    clock = FakeClock()
    c, _ = _coordinator(lambda req, f: None, interval=10.0, timeout=60, clock=clock,
                        external_triggers=external)
    t0 = clock.now
    done: list[tuple[float, str]] = []
    c.on_finished = lambda req: done.append((clock.now - t0, req.trigger))
    c.start()

    def operator(t: float) -> None:
        if t <= 100 and t % 11 == 3:  # t = 3, 14, ..., 91
            c.request()
    _run_fake_time(c, clock, until=160, step=1.0, on_tick=operator)
    c.stop()
    during = [trig for t, trig in done if t <= 100]
    after = [(t, trig) for t, trig in done if t > 100]
    if external:
        assert during == ["api"] * 9  # one per interval: the operator's, no timer checkpoints
        assert after == [(t, "interval") for t in (111.0, 121.0, 131.0, 141.0, 151.0)]  # 91 + 2 intervals
    else:
        assert during.count("api") == 9 and during.count("interval") >= 8  # about two per interval
        assert after and after[0][0] <= 101 + 10
