"""The control API client against the runtime's real control API (build_app served by the real
ControlServer, with the real CheckpointCoordinator); only the Spark/store phases are stand-ins."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import pytest

from sparkpoint.operator.runtime_client import RuntimeApiError, RuntimeClient, base_url
from sparkpoint.runtime.checkpoint.coordinator import CheckpointCoordinator
from sparkpoint.runtime.service.api import ControlServer


class StandInRuntime:
    """What build_app reads of a JobRuntime, with a real coordinator whose phases are fakes."""

    def __init__(self, fail_upload: bool = False):
        self.phase = "running"
        self.stops: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.release.set()
        self._batch = 0
        self.fail_upload = fail_upload
        self.coordinator = CheckpointCoordinator(sync_phase=self._sync, async_phase=self._async,
                                                 interval=0, timeout=30)
        self.metrics = type("M", (), {"render": staticmethod(lambda: b"# none\n")})()

    def _sync(self, req: Any) -> int:
        self._batch += 1
        req.checkpoint_id, req.batch_id = f"chk-{self._batch:06d}", self._batch
        return self._batch

    def _async(self, req: Any, frozen: int) -> None:
        self.release.wait(30)
        if self.fail_upload:
            raise OSError("store down")
        req.details.update({"bytes": 100 * frozen, "newBytes": 10})

    def healthy(self) -> bool:
        return True

    def ready(self) -> bool:
        return self.phase == "running"

    def status(self) -> dict[str, Any]:
        return {"attempt": 2, "phase": self.phase, "latestCommittedBatch": self._batch}

    def request_stop(self, savepoint: Any = None, checkpoint: bool = True) -> None:
        self.stops.append({"savepoint": savepoint, "checkpoint": checkpoint})


@pytest.fixture
def runtime():
    rt = StandInRuntime()
    rt.coordinator.start()
    server = ControlServer(rt, "127.0.0.1", 0)
    server.start()
    rt.base = base_url("127.0.0.1", server.port)
    yield rt
    rt.release.set()
    server.stop()
    rt.coordinator.stop()


def run(coro_fn, timeout: float = 5.0):
    async def main():
        client = RuntimeClient(timeout=timeout)
        try:
            return await coro_fn(client)
        finally:
            await client.close()
    return asyncio.run(main())


async def wait_final(client: RuntimeClient, base: str, any_id: str) -> dict[str, Any]:
    for _ in range(200):
        doc = await client.get_checkpoint(base, any_id)
        if doc["status"] in ("completed", "failed", "timed_out", "skipped"):
            return doc
        await asyncio.sleep(0.05)
    raise AssertionError(f"{any_id} never finished")


def test_base_url():
    assert base_url("10.1.2.3") == "http://10.1.2.3:8080"
    assert base_url("fd00::5", 9000) == "http://[fd00::5]:9000"


def test_status(runtime):
    assert run(lambda c: c.status(runtime.base)) == {"attempt": 2, "phase": "running", "latestCommittedBatch": 0}


def test_trigger_checkpoint_then_follow_it_to_completion(runtime):
    async def scenario(client):
        started = await client.trigger_checkpoint(runtime.base)
        done = await wait_final(client, runtime.base, started["id"])
        by_request = await client.get_checkpoint(runtime.base, started["requestId"])
        return started, done, by_request

    started, done, by_request = run(scenario)
    assert started["id"] == "chk-000001" and started["kind"] == "checkpoint"
    assert done["status"] == "completed" and done["bytes"] == 100 and done["newBytes"] == 10
    assert by_request["id"] == "chk-000001"


def test_failed_checkpoint_is_reported_not_raised_when_followed(runtime):
    runtime.fail_upload = True
    done = run(lambda c: _trigger_and_wait(c, runtime.base))
    assert done["status"] == "failed" and "store down" in done["error"]


async def _trigger_and_wait(client, base):
    started = await client.trigger_checkpoint(base)
    return await wait_final(client, base, started["id"])


def test_busy_runtime_answers_with_the_request_id_before_our_timeout(runtime):
    runtime.release.clear()  # the first checkpoint's upload hangs; maxConcurrent is 1
    async def scenario(client):
        first = await client.trigger_checkpoint(runtime.base)
        t0 = time.monotonic()
        second = await client.trigger_checkpoint(runtime.base)
        return first, second, time.monotonic() - t0

    first, second, seconds = run(scenario, timeout=2.0)
    assert first["id"] == "chk-000001"
    assert second["id"].startswith("req-") and second["status"] == "queued"
    assert seconds < 2.0


def test_trigger_when_not_running_is_409(runtime):
    runtime.phase = "restoring"
    with pytest.raises(RuntimeApiError) as err:
        run(lambda c: c.trigger_checkpoint(runtime.base))
    assert err.value.status == 409 and "restoring" in str(err.value)


def test_unknown_checkpoint_is_404(runtime):
    with pytest.raises(RuntimeApiError) as err:
        run(lambda c: c.get_checkpoint(runtime.base, "chk-000099"))
    assert err.value.status == 404


def test_named_savepoint(runtime):
    async def scenario(client):
        started = await client.trigger_savepoint(runtime.base, "before-upgrade")
        return started, await wait_final(client, runtime.base, started["id"])

    started, done = run(scenario)
    assert started["kind"] == "savepoint" and started["savepoint"] == "before-upgrade"
    assert done["status"] == "completed"


def test_stop_passes_savepoint_and_checkpoint_flags(runtime):
    assert run(lambda c: c.stop(runtime.base, savepoint="final", checkpoint=False)) == {"stopping": True}
    run(lambda c: c.stop(runtime.base))
    assert runtime.stops == [{"savepoint": "final", "checkpoint": False}, {"savepoint": None, "checkpoint": True}]


def test_unreachable_runtime_has_no_status():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RuntimeApiError) as err:
        run(lambda c: c.status(base_url("127.0.0.1", port)))
    assert err.value.status is None and "unreachable" in str(err.value)


def test_silent_runtime_times_out_with_no_status():
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(RuntimeApiError) as err:
            run(lambda c: c.status(base_url("127.0.0.1", port)), timeout=0.5)
    assert err.value.status is None
    assert time.monotonic() - t0 < 5


def test_promote_is_idempotent_and_a_conflict_is_a_409(runtime, tmp_path):
    """POST /promote against the runtime's own control API and Standby (runtime/service/standby.py): 202
    while promoting, 200 once promoted (a repeated call is success), 409 for another attempt's number
    and for a runtime that is no standby (the operator then starts a cold pod)."""
    from sparkpoint.runtime.service.standby import Standby
    from sparkpoint.runtime.store import JobRef

    with pytest.raises(RuntimeApiError) as err:
        run(lambda c: c.promote(runtime.base, 3))
    assert err.value.status == 409 and "not a standby" in err.value.body["error"]
    runtime.phase, runtime.launch = "standby", 3
    runtime.standby = Standby(JobRef("ns", "job"), tmp_path, 2.0, threading.Event())
    with pytest.raises(RuntimeApiError) as err:
        run(lambda c: c.promote(runtime.base, 4))
    assert err.value.status == 409 and not runtime.standby.promote.is_set()
    assert run(lambda c: c.promote(runtime.base, 3))["promoting"] is True
    assert runtime.standby.promote.is_set()
    runtime.standby.promoted = True
    assert run(lambda c: c.promote(runtime.base, 3))["promoting"] is True  # 200: already promoted
