"""Restore on N executors against real Spark and a real MinIO (issue 42; docs/design.md §4, "Restores
on N executors").

A stateful query (RocksDB, format 2, 4 state partitions) is checkpointed to MinIO by today's
single-process path. A fresh run then starts on an empty disk: the driver restores only its share,
each agent is told the restore point, and the query runs on `sparkpoint://`, whose JVM file system has
the agent fetch a state partition when the JVM first touches it (with the executor store role). Its
committed output equals a failure-free run's; a corrupt object fails the query naming the checkpoint
and commits nothing. With two executor JVMs (local-cluster) on separate disks, each fetches only the
partitions it runs."""

from __future__ import annotations

import secrets
import shutil
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from minio import MinioAdmin
from minio.credentials import StaticProvider

from harness.state_query import outputs, run_query, state_fs_jar
from sparkpoint.runtime.checkpoint import CheckpointWriter
from sparkpoint.runtime.checkpoint.freeze import freeze, latest_committed_batch, partition_dir_of
from sparkpoint.runtime.executor_state.agent import Agent, serve
from sparkpoint.runtime.executor_state.client import AgentClient
from sparkpoint.runtime.executor_state.restore import drivers_share, restore_for_executors, spark_conf
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.access_policy import job_policy
from sparkpoint.runtime.store.layout import object_key
from sparkpoint.runtime.store.s3 import S3Store

pytestmark = [pytest.mark.spark, pytest.mark.minio, pytest.mark.slow, pytest.mark.timeout(2400)]

TEST_BUCKET = "sparkpoint-test"  # the session bucket of tests/conftest.py
JOB, CORRUPT = JobRef("default", "exec-restore"), JobRef("default", "exec-restore-corrupt")
UNTIL = 14  # the last batch every run reaches; the checkpoint is taken at about batch 8


@pytest.fixture(scope="module")
def jar() -> str:
    return state_fs_jar()


@pytest.fixture(scope="module")
def stores(minio_server) -> tuple[S3Store, S3Store]:  # type: ignore[no-untyped-def]
    """The admin's store (the driver's role here) and an executor-role store, both jobs' policies."""
    prefix = f"exec-restore-{uuid.uuid4().hex[:8]}"
    host = minio_server.endpoint.split("://", 1)[1]
    admin = MinioAdmin(endpoint=host, credentials=StaticProvider(minio_server.access_key, minio_server.secret_key),
                       secure=False)
    access, secret = f"executor{secrets.token_hex(4)}", secrets.token_urlsafe(24)
    admin.user_add(access, secret)
    statements = []  # the executor role of both jobs, in one policy (Sids kept apart)
    for i, job in enumerate((JOB, CORRUPT)):
        for statement in job_policy(TEST_BUCKET, prefix, job, "executor")["Statement"]:
            statements.append({**statement, **({"Sid": f"{statement['Sid']}{i}"} if "Sid" in statement else {})})
    admin.policy_add(prefix, policy={"Version": "2012-10-17", "Statement": statements})
    admin.policy_set(prefix, user=access)
    driver = S3Store(minio_server.endpoint, TEST_BUCKET, prefix, minio_server.access_key, minio_server.secret_key,
                     region="us-east-1")
    executor = S3Store(minio_server.endpoint, TEST_BUCKET, prefix, access, secret, region="us-east-1")
    return driver, executor


@pytest.fixture(scope="module")
def checkpointed(stores, tmp_path_factory):  # type: ignore[no-untyped-def]
    """A failure-free run's output up to UNTIL, and a run stopped at about batch 8 whose hot dir is
    checkpointed to MinIO by today's single-process path (freeze, CheckpointWriter), for both jobs."""
    driver_store, _ = stores
    base = tmp_path_factory.mktemp("exec-restore")
    code, err = run_query({"checkpoint": str(base / "truth"), "out": str(base / "truth-out"), "until": UNTIL,
                           "local_dir": str(base / "spark-tmp")})
    assert code == 0, err
    code, err = run_query({"checkpoint": str(base / "hot"), "out": str(base / "first-out"), "until": 8,
                           "local_dir": str(base / "spark-tmp")})
    assert code == 0, err
    batch = latest_committed_batch(base / "hot")
    assert batch is not None and batch < UNTIL - 2
    assert freeze(base / "hot", base / "frozen").batch_id == batch
    manifests = {job: CheckpointWriter(driver_store, job, attempt=0, job_uid="u1", reuse_window_seconds=0)
                 .take_checkpoint(base / "frozen", batch_id=batch).manifest for job in (JOB, CORRUPT)}
    shutil.rmtree(base / "spark-tmp", ignore_errors=True)
    return {"base": base, "batch": batch, "truth": outputs(base / "truth-out"), "manifests": manifests}


@contextmanager
def agents(store: ObjectStore, job: JobRef, roots: dict[str, Path], base: Path) -> Iterator[dict[str, AgentClient]]:
    """An agent per executor (its state root, its port in <base>/agents/<executor>/port), one token."""
    token = secrets.token_hex(16)
    (base / "token").write_text(token)
    servers, clients = [], {}
    for name, root in roots.items():
        srv = serve(Agent(root, base / "agent-work" / name, store, job, executor=name, token=token), "127.0.0.1", 0)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        (base / "agents" / name).mkdir(parents=True, exist_ok=True)
        (base / "agents" / name / "port").write_text(str(srv.server_address[1]))
        clients[name] = AgentClient(f"http://127.0.0.1:{srv.server_address[1]}", token)
    try:
        yield clients
    finally:
        for srv in servers:
            srv.shutdown()
            srv.server_close()


def _agent_conf(jar: str, base: Path, rooted: bool) -> dict[str, str]:
    """The agent's port file and token for the executors. local[2]: the driver's JVM is the executor,
    given them by Hadoop conf. local-cluster: the executors' environment, as a pod would; the driver
    has none (it fetches nothing, as in the mode's driver pod), and each JVM its own disk,
    <base>/roots/<executor>."""
    agent = {"SPARKPOINT_AGENT_PORT_FILE": f"{base}/agents/{{executor}}/port",
             "SPARKPOINT_AGENT_TOKEN_FILE": f"{base}/token"}
    if not rooted:
        return spark_conf(jar) | {"spark.hadoop.fs.sparkpoint.agent.portFile": agent["SPARKPOINT_AGENT_PORT_FILE"],
                                  "spark.hadoop.fs.sparkpoint.agent.tokenFile": agent["SPARKPOINT_AGENT_TOKEN_FILE"]}
    return spark_conf(jar) | {f"spark.executorEnv.{k}": v for k, v in agent.items()} | {
        "spark.hadoop.fs.sparkpoint.root": f"{base}/roots/{{executor}}"}


def _state_parts(manifest) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Each state partition directory of a manifest and its state store files' bytes."""
    parts: dict[str, int] = {}
    for e in manifest.files:
        if (part := partition_dir_of(e.path)) is not None and not drivers_share(e):
            parts[part] = parts.get(part, 0) + e.size
    return parts


def _check_resumed(out: Path, checkpointed) -> None:  # type: ignore[no-untyped-def]
    resumed, batch = outputs(out), checkpointed["batch"]
    assert min(resumed) == batch + 1, sorted(resumed)
    assert any(resumed[b] for b in resumed), "no window closed after the restore: the state was not exercised"
    for b in range(batch + 1, UNTIL + 1):
        assert resumed[b] == checkpointed["truth"][b], f"batch {b} differs from the failure-free run"


# Slow tier only (about 4 min of three query JVMs at load 10: over CI's budget); in CI the lazy file system's
# own check (test_state_fs_jvm.py) and the agent's materialize (test_executor_materialize.py) run.
def test_an_empty_disk_restores_through_the_agent_and_continues_exactly(checkpointed, stores, jar, tmp_path):
    driver_store, executor_store = stores
    manifest = checkpointed["manifests"][JOB]
    hot = tmp_path / "hot"
    with agents(executor_store, JOB, {"driver": hot}, tmp_path) as clients:
        restored = restore_for_executors(driver_store, JOB, hot, list(clients.values()), checkpoint_id=manifest.id)
        # The driver restored its share only, and nothing of the state was fetched before Spark asked.
        assert {p.relative_to(hot).as_posix() for p in hot.rglob("*") if p.is_file()
                and partition_dir_of(p.relative_to(hot).as_posix())} == {"state/0/0/_metadata/schema"}
        assert (hot / "state" / "0" / "_metadata").is_dir() and (hot / "offsets").is_dir()
        assert restored.files == sum(1 for e in manifest.files if drivers_share(e))
        assert clients["driver"].materialized()["partitions"] == []
        code, err = run_query({"checkpoint": restored.checkpoint_location, "out": str(tmp_path / "out"),
                               "until": UNTIL, "local_dir": str(tmp_path / "spark-tmp"),
                               "conf": _agent_conf(jar, tmp_path, rooted=False)})
        assert code == 0, err
        done = clients["driver"].materialized()
    _check_resumed(tmp_path / "out", checkpointed)
    parts = _state_parts(manifest)
    # Each partition fetched once (a second touch of a materialized partition asks nothing), whole.
    assert {p["dir"]: p["fetched_bytes"] for p in done["partitions"]} == parts
    assert done["point"] == f"checkpoint:{manifest.id}"


def test_a_corrupt_object_fails_the_restore_naming_the_checkpoint(checkpointed, stores, jar, tmp_path):
    driver_store, executor_store = stores
    manifest, batch = checkpointed["manifests"][CORRUPT], checkpointed["batch"]
    victim = next(e for e in manifest.files if partition_dir_of(e.path) and e.size > 16)
    good = driver_store.get_bytes(object_key(CORRUPT, victim.sha256))
    driver_store.put_bytes(object_key(CORRUPT, victim.sha256), bytes(b ^ 0xFF for b in good))  # same size
    hot = tmp_path / "hot"
    with agents(executor_store, CORRUPT, {"driver": hot}, tmp_path) as clients:
        restored = restore_for_executors(driver_store, CORRUPT, hot, list(clients.values()), checkpoint_id=manifest.id)
        code, err = run_query({"checkpoint": restored.checkpoint_location, "out": str(tmp_path / "out"),
                               "until": UNTIL, "local_dir": str(tmp_path / "spark-tmp"), "timeout": 300,
                               "conf": _agent_conf(jar, tmp_path, rooted=False)})
    assert code == 2, err
    error = (tmp_path / "out" / "error.txt").read_text()
    assert f"restore point checkpoint:{manifest.id}" in error and "corrupt" in error, error[-3000:]
    assert victim.sha256 in error
    # Never a silent wrong state: no batch ran past the checkpoint, the corrupt bytes were not placed.
    assert latest_committed_batch(hot) == batch
    assert not outputs(tmp_path / "out")
    placed = hot / victim.path
    assert not placed.exists() or placed.read_bytes() == good


def test_two_executor_jvms_each_fetch_only_their_own_partitions(checkpointed, stores, jar, tmp_path):
    """local-cluster[2,1,1024]: two executor JVMs (ids 0 and 1), each with its own local root (its
    "disk") and its own agent, and the driver, whose share is restored into its own root (no agent)."""
    driver_store, executor_store = stores
    manifest = checkpointed["manifests"][JOB]
    roots = {name: tmp_path / "roots" / name / "hot" for name in ("driver", "0", "1")}
    driver_root = roots.pop("driver")
    with agents(executor_store, JOB, roots, tmp_path) as clients:
        restore_for_executors(driver_store, JOB, driver_root, list(clients.values()), checkpoint_id=manifest.id)
        code, err = run_query({"checkpoint": "sparkpoint:///hot", "out": str(tmp_path / "out"), "until": UNTIL,
                               "master": "local-cluster[2,1,1024]", "local_dir": str(tmp_path / "spark-tmp"),
                               "conf": _agent_conf(jar, tmp_path, rooted=True) | {"spark.executor.memory": "768m"}})
        assert code == 0, err
        done = {name: c.materialized() for name, c in clients.items()}
    _check_resumed(tmp_path / "out", checkpointed)
    fetched = {name: {p["dir"] for p in d["partitions"]} for name, d in done.items()}
    # The driver holds no state store file; of a partition directory only the schema file Spark's
    # driver keeps in partition 0's (state/0/0/_metadata/schema), restored from the checkpoint.
    held = {p.relative_to(driver_root).as_posix() for p in (driver_root / "state").rglob("*") if p.is_file()}
    assert {p for p in held if partition_dir_of(p)} == {"state/0/0/_metadata/schema"}
    assert fetched["0"] and fetched["1"], fetched
    # Each partition fetched by exactly one executor (the one Spark ran it on), all of them by someone.
    assert fetched["0"].isdisjoint(fetched["1"]) and fetched["0"] | fetched["1"] == set(_state_parts(manifest))
    for name in ("0", "1"):
        on_disk = {p.relative_to(roots[name]).as_posix() for p in (roots[name] / "state" / "0").iterdir()}
        assert on_disk == fetched[name], (name, on_disk)
