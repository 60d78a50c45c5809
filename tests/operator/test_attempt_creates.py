"""When many jobs start attempts together (1,000 jobs applied at once), at most ATTEMPT_CREATES
create their objects at a time; the rest wait their turn and none is lost."""

from __future__ import annotations

import asyncio

from sparkpoint.operator import actions
from sparkpoint.operator.decisions.model import CreateAttempt, Decision
from sparkpoint.operator.decisions.status_model import JobStatus
from sparkpoint.operator.kube.resource import parse_job
from sparkpoint.operator.reconcile import Reconciler
from sparkpoint.runtime.spec import parse_spec

SPEC = parse_spec({"job": {"entrypoint": "m:f"}})


class SlowKube:
    def __init__(self):
        self.attempts_in_progress, self.most, self.pods = set(), 0, []

    async def _call(self, body):
        job = body["metadata"]["labels"].get("sparkpoint.dev/job") or body["metadata"]["name"]
        self.attempts_in_progress.add(job)
        self.most = max(self.most, len(self.attempts_in_progress))
        await asyncio.sleep(0.001)

    async def apply_config_map(self, body, exists=False):
        await self._call(body)

    async def create(self, body):
        await self._call(body)
        if body["kind"] == "Pod":
            self.pods.append(body["metadata"]["name"])
            self.attempts_in_progress.discard(body["metadata"]["labels"]["sparkpoint.dev/job"])
        return True


def test_attempt_creation_is_bounded_and_complete():
    kube = SlowKube()
    rec = Reconciler(kube=kube, client=None, metrics=None, post_event=None)

    async def scenario():
        jobs = [parse_job({"metadata": {"namespace": "ns", "name": f"job{i}", "uid": f"u{i}"}}, spec_of=lambda _: SPEC)
                for i in range(60)]
        await asyncio.gather(*(rec.actions.act(CreateAttempt(attempt=1), job, Decision(state=JobStatus()), None)
                               for job in jobs))
    asyncio.run(scenario())
    assert len(kube.pods) == 60
    assert 1 < kube.most <= actions.ATTEMPT_CREATES
