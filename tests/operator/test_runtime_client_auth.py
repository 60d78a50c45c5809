"""The operator's client sends the job's bearer token (issue 11), against the real control API
served with a token; the Secret reads are a dict (the token cache is what is under test)."""

from __future__ import annotations

import asyncio

import pytest
from test_runtime_client import StandInRuntime

from sparkpoint.operator.kube.control_token import ControlTokens, new_token
from sparkpoint.operator.runtime_client import RuntimeApiError, RuntimeClient, base_url
from sparkpoint.runtime.service.api import ControlServer


@pytest.fixture
def served():
    rt = StandInRuntime()
    token = new_token()
    server = ControlServer(rt, "127.0.0.1", 0, token=token)
    server.start()
    yield rt, server, token
    server.stop()


class Secrets:
    def __init__(self, data: dict[tuple[str, str], dict[str, str]]):
        self.data, self.reads = data, 0

    async def read(self, namespace: str, name: str) -> dict[str, str] | None:
        self.reads += 1
        return self.data.get((namespace, name))


def _status(client: RuntimeClient, base: str):
    async def main():
        try:
            return await client.status(base)
        finally:
            await client.close()
    return asyncio.run(main())


def test_new_tokens_are_random_and_long():
    tokens = {new_token() for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) >= 40 for t in tokens)


def test_the_client_sends_the_jobs_token_and_caches_it(served):
    _, server, token = served
    secrets = Secrets({("ns", "clicks-control-token"): {"token": token}})
    tokens = ControlTokens(secrets.read)
    base = base_url("127.0.0.1", server.port, "ns", "clicks")
    assert _status(RuntimeClient(tokens=tokens), base)["phase"] == "running"
    assert _status(RuntimeClient(tokens=tokens), base)["phase"] == "running"
    assert secrets.reads == 1


def test_without_a_token_the_runtime_refuses(served):
    _, server, _ = served
    with pytest.raises(RuntimeApiError) as err:
        _status(RuntimeClient(), base_url("127.0.0.1", server.port))
    assert err.value.status == 401
    tokens = ControlTokens(Secrets({}).read)  # the Secret is not there (yet)
    with pytest.raises(RuntimeApiError) as err:
        _status(RuntimeClient(tokens=tokens), base_url("127.0.0.1", server.port, "ns", "clicks"))
    assert err.value.status == 401


def test_a_stale_cached_token_is_read_again_once(served):
    _, server, token = served
    secrets = Secrets({("ns", "clicks-control-token"): {"token": "stale-" + token}})
    tokens = ControlTokens(secrets.read)
    base = base_url("127.0.0.1", server.port, "ns", "clicks")
    with pytest.raises(RuntimeApiError) as err:
        _status(RuntimeClient(tokens=tokens), base)
    assert err.value.status == 403 and secrets.reads == 2 and token not in str(err.value)
    secrets.data[("ns", "clicks-control-token")] = {"token": token}  # the Secret was recreated
    assert _status(RuntimeClient(tokens=tokens), base)["phase"] == "running"
