"""The agent's side of a restore on N executors (executor_state/materialize.py, agent.py): a state
partition fetched on demand from the restore point, verified, atomic, once; against a real store
(a directory store and the agent over loopback HTTP)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import CheckpointWriter
from sparkpoint.runtime.checkpoint.errors import CheckpointError
from sparkpoint.runtime.checkpoint.restore import RestoreError
from sparkpoint.runtime.executor_state.agent import Agent, serve
from sparkpoint.runtime.executor_state.client import AgentClient, _call
from sparkpoint.runtime.executor_state.materialize import Materializer, NoRestorePoint, RestoreSet
from sparkpoint.runtime.executor_state.restore import restore_for_executors
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.layout import object_key

JOB = JobRef("default", "materialize")
TREE = {"metadata": b"{}", "offsets/0": b"v1\n{}", "commits/0": b"v1\n{}", "state/0/_metadata/metadata": b"m",
        "state/0/0/_metadata/schema": b"sch",
        "state/0/0/1.changelog": b"a" * 100, "state/0/0/2.zip": b"z" * 50, "state/0/0/SSTs/000001-x.sst": b"s" * 70,
        "state/0/1/1.changelog": b"b" * 30, "state/0/1/left-keyToNumValues/1.delta": b"c" * 20}


@pytest.fixture
def point(tmp_path):  # type: ignore[no-untyped-def]
    frozen = tmp_path / "frozen"
    for rel, data in TREE.items():
        (frozen / rel).parent.mkdir(parents=True, exist_ok=True)
        (frozen / rel).write_bytes(data)
    store = open_store(f"file://{tmp_path}/store")
    manifest = CheckpointWriter(store, JOB, attempt=0, job_uid="u", reuse_window_seconds=0).take_checkpoint(
        frozen, batch_id=0).manifest
    return store, manifest


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_partition_is_fetched_whole_once_and_only_it(point, tmp_path):
    store, manifest = point
    m = Materializer(tmp_path / "disk", store, JOB)
    with pytest.raises(NoRestorePoint):  # never an empty partition by accident
        m.materialize(str(tmp_path / "disk/state/0/0"))
    m.set_point(RestoreSet.of(manifest))
    first = m.materialize(str(tmp_path / "disk/state/0/1"))
    assert (first.files, first.fetched_files, first.fetched_bytes) == (2, 2, 50)
    assert _tree(tmp_path / "disk") == {k: v for k, v in TREE.items() if k.startswith("state/0/1/")}
    again = m.materialize(str(tmp_path / "disk/state/0/1"))
    assert (again.files, again.fetched_files) == (2, 0)
    for bad in ("state/0", "state/0/_metadata", "offsets", "state/0/1/left-keyToNumValues"):
        with pytest.raises(ValueError):
            m.materialize(str(tmp_path / "disk" / bad))
    with pytest.raises(ValueError):
        m.materialize(str(tmp_path / "elsewhere/state/0/1"))
    assert m.materialize(str(tmp_path / "disk/state/0/7")).files == 0  # a partition the point has none of
    with pytest.raises(NoRestorePoint):  # another point after a partition was materialized
        m.set_point(RestoreSet(point="checkpoint:chk-000099"))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # the store is read only
@given(calls=st.lists(st.sampled_from(["state/0/0", "state/0/1"]), min_size=1, max_size=12))
def test_concurrent_calls_fetch_each_partition_once(point, tmp_path_factory, calls):
    store, manifest = point
    disk = tmp_path_factory.mktemp("disk")
    gets, real_get = [], store.get_file

    def counting(key, path, **kw):  # type: ignore[no-untyped-def]
        gets.append(key)
        return real_get(key, path, **kw)

    store.get_file = counting  # type: ignore[method-assign]
    try:
        m = Materializer(disk, store, JOB)
        m.set_point(RestoreSet.of(manifest))
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda d: m.materialize(str(disk / d)), calls))
    finally:
        store.get_file = real_get  # type: ignore[method-assign]
    assert sum(r.fetched_files for r in results) == len(gets)
    want = {k: v for k, v in TREE.items() if any(k.startswith(d + "/") for d in calls) and "_metadata" not in k}
    assert _tree(disk) == want
    assert len(gets) == len(want)  # each file downloaded once, whatever the interleaving


def test_a_corrupt_object_names_the_point_and_is_not_placed(point, tmp_path):
    store, manifest = point
    entry = next(e for e in manifest.files if e.path == "state/0/0/SSTs/000001-x.sst")
    store.put_bytes(object_key(JOB, entry.sha256), b"S" * entry.size)  # same size, other bytes
    m = Materializer(tmp_path / "disk", store, JOB)
    m.set_point(RestoreSet.of(manifest))
    with pytest.raises(RestoreError, match=rf"restore point checkpoint:{manifest.id}: .*{entry.sha256}.* corrupt") as exc:
        m.materialize(str(tmp_path / "disk/state/0/0"))
    assert exc.value.points == (f"checkpoint:{manifest.id}",) and exc.value.reason == "corrupt_object"
    assert not (tmp_path / "disk" / entry.path).exists()
    assert not [p for p in (tmp_path / "disk").rglob("*.tmp")]
    with pytest.raises(RestoreError):  # not remembered as done: a retry checks again
        m.materialize(str(tmp_path / "disk/state/0/0"))


def test_the_driver_restores_its_share_and_the_agent_over_http_the_rest(point, tmp_path):
    store, manifest = point
    token = "t0ken"
    srv = serve(Agent(tmp_path / "exec", tmp_path / "work", store, JOB, executor="e1", token=token), "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        body = f'{{"dir": "{tmp_path}/exec/state/0/0"}}'.encode()
        with pytest.raises(CheckpointError, match="HTTP 409"):  # before the driver set the point
            _call(url, token, 10, "POST", "/materialize", body)
        restored = restore_for_executors(store, JOB, tmp_path / "driver", [AgentClient(url, token)])
        # the driver's share: all but the stores' files (the schema file in partition 0's too)
        assert _tree(tmp_path / "driver") == {k: v for k, v in TREE.items()
                                              if not k.startswith(("state/0/0", "state/0/1")) or "_metadata" in k}
        assert restored.checkpoint_location == f"sparkpoint://{tmp_path}/driver"
        with pytest.raises(CheckpointError, match="HTTP 401"):
            _call(url, "wrong", 10, "POST", "/materialize", body)
        assert b'"fetched_files":3' in _call(url, token, 10, "POST", "/materialize", body)
        assert _tree(tmp_path / "exec") == {k: v for k, v in TREE.items() if k.startswith("state/0/0/") and "_metadata" not in k}
        entry = next(e for e in manifest.files if e.path == "state/0/1/1.changelog")
        store.delete(object_key(JOB, entry.sha256))  # a missing object
        with pytest.raises(CheckpointError, match=rf"HTTP 502 RestoreError: restore point checkpoint:{manifest.id}"):
            _call(url, token, 10, "POST", "/materialize", f'{{"dir": "{tmp_path}/exec/state/0/1"}}'.encode())
    finally:
        srv.shutdown()
        srv.server_close()
