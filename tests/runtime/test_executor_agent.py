"""The executor's agent over real HTTP on loopback (issue 42; executor_state/agent.py and client.py):
a checkpoint taken through two agents is the one taken in-process, and it restores the hot dir; the
agent refuses a caller without the token, a prepare older than its newest, and an upload of a batch it
did not prepare. Directory store; the executor role against MinIO is test_executor_state_spark.py's."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

import pytest

from sparkpoint.runtime.checkpoint import CheckpointError, CheckpointWriter, restore
from sparkpoint.runtime.checkpoint.freeze import freeze
from sparkpoint.runtime.executor_state import (
    Agent,
    AgentHandle,
    PrepareRequest,
    checkpoint_with_executors,
    expected_operators,
    prepare_request,
    serve,
)
from sparkpoint.runtime.store import DirectoryStore, JobRef

from .test_executor_state import _driver, _partition

JOB = JobRef("default", "agents")
TOKEN = "t0ken"


@pytest.fixture
def agents(tmp_path):  # type: ignore[no-untyped-def]
    """Two agents (a: partitions 0 and 1, b: partition 2) serving on loopback, and the driver's disk."""
    store = DirectoryStore(str(tmp_path / "store"))
    _driver(tmp_path / "driver", 3, partitions=3)
    for root, parts in ((tmp_path / "a", (0, 1)), (tmp_path / "b", (2,))):
        for p in parts:
            _partition(root, p, range(1, 5))
    servers = {}
    for name in ("a", "b"):
        agent = Agent(tmp_path / name, tmp_path / f"work-{name}", store, JOB, executor=name, token=TOKEN)
        server = serve(agent, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[name] = server
    yield store, {n: f"http://127.0.0.1:{s.server_address[1]}" for n, s in servers.items()}
    for server in servers.values():
        server.shutdown()
        server.server_close()


def test_a_checkpoint_through_two_agents_restores_the_hot_dir(agents, tmp_path):
    store, urls = agents
    writer = CheckpointWriter(store, JOB, attempt=0, job_uid="u", reuse_window_seconds=0)
    frozen = freeze(tmp_path / "driver", tmp_path / "frozen-driver", scope="driver")
    request = prepare_request(tmp_path / "driver", frozen.batch_id)
    handles = [AgentHandle(url, TOKEN, request) for url in urls.values()]
    partitions, operators = expected_operators(tmp_path / "driver", frozen.batch_id)
    result = checkpoint_with_executors(writer, tmp_path / "frozen-driver", handles, batch=frozen.batch_id,
                                       partitions=partitions, operators=operators)
    for h in handles:
        h.release()
    assert not any((tmp_path / f"work-{n}" / f"freeze-{frozen.batch_id}").exists() for n in urls)
    restore(store, JOB, tmp_path / "restored")
    hot = {**{p.relative_to(tmp_path / "driver").as_posix(): p.read_bytes() for p in (tmp_path / "driver").rglob("*")
              if p.is_file()},
           **{p.relative_to(tmp_path / n).as_posix(): p.read_bytes() for n in urls for p in (tmp_path / n).rglob("*")
              if p.is_file()}}
    restored = {p.relative_to(tmp_path / "restored").as_posix(): p.read_bytes()
                for p in (tmp_path / "restored").rglob("*") if p.is_file()}
    assert restored == hot and result.manifest.batch_id == 3


def test_the_agent_refuses_a_stranger_an_older_batch_and_an_unprepared_upload(agents, tmp_path):
    _, urls = agents
    request = urllib.request.Request(f"{urls['a']}/prepare", data=PrepareRequest(batch=3).to_json(), method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=30)
    assert err.value.code == 401
    with pytest.raises(CheckpointError, match="HTTP 401"):
        AgentHandle(urls["a"], "wrong", PrepareRequest(batch=3))
    AgentHandle(urls["a"], TOKEN, PrepareRequest(batch=3))
    with pytest.raises(CheckpointError, match="HTTP 409 batch 2 is older than batch 3"):
        AgentHandle(urls["a"], TOKEN, PrepareRequest(batch=2))
    late = AgentHandle(urls["b"], TOKEN, PrepareRequest(batch=3))
    late.release()
    with pytest.raises(CheckpointError, match="HTTP 404 batch 3 is not prepared here"):
        late.upload("chk-000001", [])
