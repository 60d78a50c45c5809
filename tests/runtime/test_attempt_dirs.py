"""Older attempts' work dirs on a shared hot volume, removed by the new attempt's runtime
(runtime/service/attempt_dirs.py): real directories and files, a zombie writer racing the removal."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from sparkpoint.runtime.service.attempt_dirs import (
    attempt_number,
    older_attempt_dirs,
    remove_older_attempt_dirs,
)


def work_dir_tree(root: Path, *attempts: int) -> Path:
    """<root>/ns/job/uid/attempt-<n> with a hot dir's kind of content in each."""
    parent = root / "ns" / "job" / "uid"
    for n in attempts:
        state = parent / f"attempt-{n}" / "hot" / "state" / "0" / "1"
        state.mkdir(parents=True)
        (state / "1.changelog").write_bytes(os.urandom(64))
        (parent / f"attempt-{n}" / "owner.json").write_text(f'{{"attempt": {n}}}')
        (parent / f"attempt-{n}" / "sink-journal").mkdir()
    return parent


def test_the_attempt_number_comes_from_the_dirs_name_only():
    assert attempt_number(Path("/v/ns/job/uid/attempt-12")) == 12
    for name in ("work", "attempt-", "attempt-1x", "xattempt-1", "attempt--1", "attempt-1234567890"):
        assert attempt_number(Path("/v") / name) is None


def test_only_strictly_older_attempts_are_removed(tmp_path):
    parent = work_dir_tree(tmp_path, 1, 2, 9, 10, 11)
    (parent / "attempt-3").write_text("a file, not a directory")
    (parent / "notes").mkdir()
    current = parent / "attempt-10"
    assert [p.name for p in older_attempt_dirs(current)] == ["attempt-1", "attempt-2", "attempt-9"]
    assert remove_older_attempt_dirs(current) == ["attempt-1", "attempt-2", "attempt-9"]
    assert sorted(p.name for p in parent.iterdir()) == ["attempt-10", "attempt-11", "attempt-3", "notes"]
    # the current attempt's and the newer one's files are untouched
    for n in (10, 11):
        assert (parent / f"attempt-{n}" / "owner.json").read_text() == f'{{"attempt": {n}}}'
        assert (parent / f"attempt-{n}" / "hot" / "state" / "0" / "1" / "1.changelog").stat().st_size == 64
    assert remove_older_attempt_dirs(current) == []  # idempotent


def test_a_symlink_named_like_an_old_attempt_is_never_followed(tmp_path):
    parent = work_dir_tree(tmp_path, 4)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_text("keep")
    (parent / "attempt-2").symlink_to(elsewhere, target_is_directory=True)
    assert remove_older_attempt_dirs(parent / "attempt-4") == []
    assert (elsewhere / "precious").read_text() == "keep" and (parent / "attempt-2").is_symlink()


def test_a_work_dir_that_is_not_an_attempt_dir_removes_nothing(tmp_path):
    parent = work_dir_tree(tmp_path, 1, 2)
    (parent / "work").mkdir()
    assert remove_older_attempt_dirs(parent / "work") == []
    assert remove_older_attempt_dirs(tmp_path / "missing" / "attempt-5") == []  # no parent yet
    assert sorted(p.name for p in parent.iterdir()) == ["attempt-1", "attempt-2", "work"]


def test_a_zombie_writing_into_an_old_dir_never_fails_the_start_and_is_cleaned_later(tmp_path):
    """An executor of attempt 1 that outlived its driver keeps writing state files (creating its
    directories again, as Hadoop's mkdirs does) while attempt 2 removes attempt-1: the removal
    does not raise, attempt-2 gets none of the zombie's files, and a later attempt removes what
    the zombie left."""
    parent = work_dir_tree(tmp_path, 1, 2)
    for i in range(300):  # enough files that the removal takes a while
        (parent / "attempt-1" / "hot" / "state" / "0" / "1" / f"{i}.zip").write_bytes(b"x" * 256)
    stop = threading.Event()
    written: list[int] = []

    def zombie() -> None:
        i = 0
        while not stop.is_set():
            folder = parent / "attempt-1" / "hot" / "state" / "0" / str(i % 4)
            try:
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"{1000 + i}.delta").write_bytes(b"z")
                written.append(i)
            except OSError:  # its folder vanished between mkdir and the write: it tries again
                pass
            i += 1

    writer = threading.Thread(target=zombie)
    writer.start()
    try:
        for _ in range(20):
            remove_older_attempt_dirs(parent / "attempt-2")  # never raises, whatever the zombie does
    finally:
        stop.set()
        writer.join()
    assert written  # the zombie really wrote during the removals
    current = parent / "attempt-2"
    assert sorted(str(p.relative_to(current)) for p in current.rglob("*") if p.is_file()) == [
        "hot/state/0/1/1.changelog", "owner.json"]
    # The zombie's last write landed after the last removal; then its pod is gone, and the next
    # attempt's start removes what it left.
    (parent / "attempt-1" / "hot").mkdir(parents=True, exist_ok=True)
    (parent / "attempt-1" / "hot" / "last.delta").write_bytes(b"z")
    assert remove_older_attempt_dirs(parent / "attempt-3") == ["attempt-1", "attempt-2"]
    assert list(parent.iterdir()) == []


# --- the runtime: removal happens at start, once the attempt holds the store's fence ---------------------
def _runtime(tmp_path: Path, work_dir: Path, store_url: str):
    from sparkpoint.runtime.service.runner import JobRuntime, RunOptions
    from sparkpoint.runtime.spec import JobIdentity, parse_spec

    (tmp_path / "noop_job.py").write_text("def build(spark):\n    return None\n")
    spec = parse_spec({"job": {"entrypoint": "noop_job:build", "pythonPath": [str(tmp_path)]},
                       "checkpoint": {"storage": {"url": store_url}}})
    runtime = JobRuntime(JobIdentity(namespace="ns", name="job"), spec,
                         RunOptions(work_dir=work_dir, port=0, handle_signals=False))
    runtime.stop_event.set()  # stopped before the query: the start runs up to Spark, no JVM
    return runtime


def test_the_runtime_removes_older_attempts_dirs_after_claiming_its_fence(tmp_path):
    from sparkpoint.runtime.checkpoint import read_fence
    from sparkpoint.runtime.store import JobRef, open_store

    parent = work_dir_tree(tmp_path / "hot", 1, 2)
    store_url = f"file://{tmp_path / 'store'}"
    runtime = _runtime(tmp_path, parent / "attempt-3", store_url)
    assert runtime.run() == 0
    assert runtime.attempt == 1 and read_fence(open_store(store_url), JobRef("ns", "job")) == 1
    assert sorted(p.name for p in parent.iterdir()) == ["attempt-3"]  # its own, just created


def test_an_attempt_that_never_claimed_its_fence_removes_nothing(tmp_path, monkeypatch):
    """The store is unreachable and the start stops while waiting for it: no fence claimed, so an
    older attempt might still commit from its directory; nothing is removed."""
    monkeypatch.setenv("SPARKPOINT_S3_ENDPOINT", "http://127.0.0.1:9")  # nothing listens (discard port)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    monkeypatch.setenv("SPARKPOINT_S3_ATTEMPTS", "1")
    parent = work_dir_tree(tmp_path / "hot", 1, 2)
    runtime = _runtime(tmp_path, parent / "attempt-3", "s3://bucket/prefix")
    assert runtime.run() == 0 and runtime.attempt == 0
    assert sorted(p.name for p in parent.iterdir()) == ["attempt-1", "attempt-2"]


def test_a_standbys_dir_counts_as_its_attempts():
    """A standby works in attempt-<n>-standby (operator/kube/builders.py work_dir) and is attempt n once
    promoted: a later attempt removes it like any older attempt's, an older one never does."""
    assert attempt_number(Path("/v/ns/job/uid/attempt-7-standby")) == 7
    assert attempt_number(Path("/v/attempt-7-standbyx")) is None


def test_older_standby_dirs_are_removed_and_newer_ones_kept(tmp_path):
    parent = work_dir_tree(tmp_path, 5)
    for name in ("attempt-4-standby", "attempt-6-standby"):
        (parent / name / "standby-objects").mkdir(parents=True)
    assert [p.name for p in older_attempt_dirs(parent / "attempt-5")] == ["attempt-4-standby"]
    assert [p.name for p in older_attempt_dirs(parent / "attempt-6-standby")] == ["attempt-5", "attempt-4-standby"] \
        or [p.name for p in older_attempt_dirs(parent / "attempt-6-standby")] == ["attempt-4-standby", "attempt-5"]
