"""When a job's store facts are read (operator/store/facts.py): a routine refresh runs behind the
job's rounds, so a slow store never delays a round (its checkpoint trigger); a round that needs
the store (no facts yet, runtime unreachable, an expected savepoint missing) waits for it."""

from __future__ import annotations

import asyncio

from sparkpoint.operator.store import facts as reconcile
from sparkpoint.operator.store.facts import StoreFacts
from sparkpoint.runtime.spec import parse_spec

SPEC = parse_spec({"job": {"entrypoint": "a:b"}})


class SlowStore(StoreFacts):
    """Each store read returns the next generation of facts once the test releases it."""

    def __init__(self, clock):
        super().__init__(kube=None, clock=clock)
        self.gate, self.reads = asyncio.Event(), 0

    async def read(self, cache, namespace, name, spec) -> None:
        self.reads += 1
        read = self.reads
        await self.gate.wait()
        self.gate.clear()
        cache.checkpoints, cache.savepoints = [f"read-{read}"], []


def test_a_routine_refresh_does_not_hold_up_the_round_but_a_blind_one_does():
    now = [1000.0]

    async def scenario():
        rec = SlowStore(lambda: now[0])
        first = asyncio.create_task(rec.facts("ns", "job", SPEC, blind=False, expect=set()))
        await asyncio.sleep(0.01)
        assert not first.done()  # no facts yet: the round waits
        rec.gate.set()
        assert (await first).checkpoints == ["read-1"]

        now[0] += reconcile.STORE_REFRESH
        cache = await asyncio.wait_for(rec.facts("ns", "job", SPEC, blind=False, expect=set()), 1)
        assert cache.checkpoints == ["read-1"] and rec.reads == 2  # decided on what it had, read started
        again = await asyncio.wait_for(rec.facts("ns", "job", SPEC, blind=False, expect=set()), 1)
        assert again.checkpoints == ["read-1"] and rec.reads == 2  # one refresh at a time
        rec.gate.set()
        await asyncio.wait_for(cache.refresh, 1)
        assert cache.checkpoints == ["read-2"]

        now[0] += reconcile.STORE_REFRESH_BLIND
        blind = asyncio.create_task(rec.facts("ns", "job", SPEC, blind=True, expect=set()))
        await asyncio.sleep(0.01)
        assert not blind.done()  # the runtime cannot be asked: the store is the only source
        rec.gate.set()
        assert (await blind).checkpoints == ["read-3"]

        now[0] += reconcile.SAVEPOINT_RECHECK
        wanted = asyncio.create_task(rec.facts("ns", "job", SPEC, blind=False, expect={"sp-1"}))
        await asyncio.sleep(0.01)
        assert not wanted.done()  # a savepoint the round expects is looked for before deciding
        rec.gate.set()
        assert (await wanted).checkpoints == ["read-4"]
    asyncio.run(scenario())


def test_jobs_starting_together_read_their_shared_secret_once():
    class Kube:
        reads = 0

        async def secret_data(self, namespace, name):
            Kube.reads += 1
            await asyncio.sleep(0.01)
            return {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "SPARKPOINT_S3_ENDPOINT": "http://127.0.0.1:9"}

    spec = parse_spec({"job": {"entrypoint": "a:b"},
                       "checkpoint": {"storage": {"url": "s3://bucket/p", "secretRef": {"name": "creds"}}}})

    async def scenario():
        facts = StoreFacts(kube=Kube(), clock=lambda: 0.0)
        stores = await asyncio.gather(*(facts.open_store("ns", spec) for _ in range(50)))
        assert len({id(s) for s in stores}) == 1
    asyncio.run(scenario())
    assert Kube.reads == 1
