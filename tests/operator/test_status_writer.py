"""The job's status writer (operator/kube/status_writer.py): coalesced, ordered merge patches computed
against what the server confirmed, and a failed write dropping what was not sent."""

from __future__ import annotations

import asyncio

from sparkpoint.operator.kube.status_writer import StatusWriter


class FakeServer:
    """Applies merge patches to a status; each PATCH waits until released (a slow API server)."""

    def __init__(self, status: dict, fail: bool = False):
        self.status, self.fail = dict(status), fail
        self.patches: list[dict] = []
        self.gate = asyncio.Event()

    async def patch(self, doc: dict) -> dict:
        self.patches.append(doc)
        await self.gate.wait()
        if self.fail:
            raise OSError("API server unavailable")
        for key, value in doc.items():
            if value is None:
                self.status.pop(key, None)
            else:
                self.status[key] = value
        return {"metadata": {"resourceVersion": str(len(self.patches))}, "status": dict(self.status)}


def test_decisions_made_while_a_write_is_in_flight_are_coalesced_and_applied_in_order():
    async def scenario():
        server = FakeServer({"phase": "Running", "n": 0})
        writer = StatusWriter(server.patch)
        writer.submit(server.status, {"phase": "Running", "n": 1, "pending": "t1"})
        await asyncio.sleep(0)  # the first PATCH is in flight
        assert writer.pending and writer.current()["n"] == 1  # the next round decides on it
        writer.submit(writer.current(), {"phase": "Running", "n": 2, "pending": "t2"})
        writer.submit(writer.current(), {"phase": "Running", "n": 3})  # the trigger finished: key removed
        server.gate.set()
        assert await writer.flush()
        assert server.status == {"phase": "Running", "n": 3}
        # two PATCHes, not three; the second against what the first stored (so "pending" is nulled)
        assert server.patches == [{"n": 1, "pending": "t1"}, {"n": 3, "pending": None}]
        assert not writer.pending and writer.stored["status"] == server.status
    asyncio.run(scenario())


def test_an_unchanged_status_is_not_written():
    async def scenario():
        server = FakeServer({"phase": "Running"})
        server.gate.set()
        writer = StatusWriter(server.patch)
        writer.submit(server.status, {"phase": "Running"})
        assert await writer.flush() and server.patches == []
    asyncio.run(scenario())


def test_a_failed_write_drops_what_was_not_sent_and_reports_it():
    async def scenario():
        errors = []
        server = FakeServer({"phase": "Pending"}, fail=True)
        writer = StatusWriter(server.patch, errors.append)
        writer.submit(server.status, {"phase": "Running"})
        await asyncio.sleep(0)
        writer.submit(writer.current(), {"phase": "Running", "attempt": 2})
        server.gate.set()
        assert not await writer.flush()
        assert len(server.patches) == 1 and len(errors) == 1
        # nothing pending: the next round decides on the watched body again
        assert not writer.pending and writer.current() is None and writer.stored is None
        server.fail = False
        writer.submit(server.status, {"phase": "Running"})
        assert await writer.flush() and server.status == {"phase": "Running"}
    asyncio.run(scenario())


def test_the_object_a_patch_returned_is_kept_without_its_managed_fields():
    async def scenario():
        async def patch(doc: dict) -> dict:
            return {"metadata": {"resourceVersion": "7", "generation": 2,
                                 "managedFields": [{"manager": "sparkpoint-operator", "fieldsV1": {"f:status": {}}}]},
                    "spec": {"image": "x"}, "status": doc}
        writer = StatusWriter(patch)
        writer.submit({"phase": "Pending"}, {"phase": "Running"})
        assert await writer.flush()
        return writer.stored
    stored = asyncio.run(scenario())
    assert stored == {"metadata": {"resourceVersion": "7", "generation": 2}, "spec": {"image": "x"},
                      "status": {"phase": "Running"}}


def test_a_write_a_round_waits_for_is_urgent_and_one_it_does_not_wait_for_is_routine():
    async def scenario():
        seen: list[bool] = []
        writer: StatusWriter

        async def patch(doc: dict) -> dict:
            seen.append(writer.urgent)
            return {"status": doc}
        writer = StatusWriter(patch)
        writer.submit({"n": 0}, {"n": 1})  # a round that only triggered: nobody waits
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        writer.submit(writer.confirmed, {"n": 2})  # a round that creates a pod: waits for its status
        assert await writer.flush()
        return seen, writer.urgent
    seen, urgent_after = asyncio.run(scenario())
    assert seen == [False, True] and urgent_after is False


def _only_x(patch: dict) -> bool:
    return set(patch) == {"x"}


def test_a_lazy_change_is_kept_and_written_with_the_next_real_one():
    async def scenario():
        server = FakeServer({"phase": "Running", "x": 0})
        server.gate.set()
        writer = StatusWriter(server.patch, lazy=_only_x)
        writer.submit(server.status, {"phase": "Running", "x": 1})
        assert await writer.flush() and server.patches == []  # not written on its own
        assert writer.pending and writer.current() == {"phase": "Running", "x": 1}  # but decided on
        writer.submit(writer.current(), {"phase": "Running", "x": 2})
        assert server.patches == [] and writer.current()["x"] == 2
        writer.submit(writer.current(), {"phase": "Recovering", "x": 2})
        assert await writer.flush()
        assert server.patches == [{"phase": "Recovering", "x": 2}]  # against what the server has
        assert not writer.pending
    asyncio.run(scenario())


def test_a_lazy_change_after_a_write_in_flight_is_written_too():
    async def scenario():
        server = FakeServer({"phase": "Running", "x": 0})
        writer = StatusWriter(server.patch, lazy=_only_x)
        writer.submit(server.status, {"phase": "Recovering", "x": 0})
        await asyncio.sleep(0)
        writer.submit(writer.current(), {"phase": "Recovering", "x": 1})  # in flight: not deferred
        server.gate.set()
        assert await writer.flush()
        assert server.status == {"phase": "Recovering", "x": 1}
    asyncio.run(scenario())


def test_going_back_to_the_confirmed_status_while_a_write_is_in_flight_undoes_it():
    async def scenario():
        server = FakeServer({"phase": "Running"})
        writer = StatusWriter(server.patch)
        writer.submit(server.status, {"phase": "Recovering"})
        await asyncio.sleep(0)
        writer.submit(writer.current(), {"phase": "Running"})
        server.gate.set()
        assert await writer.flush()
        assert server.status == {"phase": "Running"}
    asyncio.run(scenario())
