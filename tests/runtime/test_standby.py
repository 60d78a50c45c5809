"""A standby's following without Spark (runtime/service/standby.py): what it fetches next (pure), that
it fetches only new objects and writes nothing to the store, and that the promotion's restore takes
its held objects only after checking them again (a corrupted one is downloaded anew)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.service.recovery import restore_on_start
from sparkpoint.runtime.service.standby import (
    ObjectCache,
    Standby,
    checkpoints_behind,
    plan_fetch,
    plan_prune,
)
from sparkpoint.runtime.store import FileEntry
from sparkpoint.runtime.store.layout import object_key

from .test_freeze import _write
from .test_restore_fallback import checkpoint_of

SHA = [f"{i:x}" * 64 for i in range(1, 6)]


def entry(path: str, sha: str, size: int = 10, data: str | None = None) -> FileEntry:
    return FileEntry(path=path, size=size, sha256=sha, data=data)


def test_plan_fetch_takes_each_missing_object_once_largest_first_and_no_inline_file():
    files = [entry("a", SHA[0], 5), entry("b", SHA[1], 50), entry("c", SHA[1], 50), entry("d", SHA[2], 7),
             entry("e", SHA[3], 4, data="AAAAAA==")]
    assert [f.sha256 for f in plan_fetch(files, have={SHA[2]})] == [SHA[1], SHA[0]]
    assert plan_fetch(files, have={SHA[0], SHA[1], SHA[2]}) == []


def test_plan_prune_drops_what_the_held_checkpoint_no_longer_references():
    files = [entry("a", SHA[0]), entry("b", SHA[1])]
    assert plan_prune(files, {SHA[0], SHA[2], SHA[3]}) == {SHA[2], SHA[3]}


def test_checkpoints_behind_counts_newer_completed_ones():
    ids = ["chk-000003", "chk-000004", "chk-000007"]
    assert checkpoints_behind(ids, None) == 3
    assert checkpoints_behind(ids, "chk-000004") == 1
    assert checkpoints_behind(ids, "chk-000007") == 0


class Recorded:
    """The store with every call counted by kind (a standby must make no write)."""

    def __init__(self, inner):  # type: ignore[no-untyped-def]
        self.inner, self.calls = inner, {}
        self._lock = threading.Lock()

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):  # type: ignore[no-untyped-def]
            with self._lock:
                self.calls[name] = self.calls.get(name, 0) + 1
            return attr(*args, **kwargs)
        return call


WRITES = {"put_bytes", "put_if_absent", "put_file", "delete", "delete_many", "copy"}


def standby_of(store, job, work: Path) -> Standby:  # type: ignore[no-untyped-def]
    s = Standby(job, work, interval=0.1, stop=threading.Event())
    s.store = store
    return s


def test_follows_new_checkpoints_fetching_only_new_objects_and_never_writing(store, job, tmp_path):
    attempt = write_fence(store, job)
    c1 = checkpoint_of(store, job, tmp_path, 3, attempt)
    rec = Recorded(store)
    standby = standby_of(rec, job, tmp_path / "standby")
    standby.follow_once()
    held1 = {f.sha256 for f in c1.files}
    assert (standby.held, standby.behind, standby.fetched_objects) == (c1.id, 0, len(held1))
    assert standby.cache.shas() == held1
    standby.follow_once()  # nothing new: one LIST, no GET
    assert standby.fetched_objects == len(held1) and standby.requests == {"list": 2, "get": 1 + len(held1)}
    c2 = checkpoint_of(store, job, tmp_path, 5, attempt)
    new = {f.sha256 for f in c2.files} - held1
    assert new and len(new) < len({f.sha256 for f in c2.files})  # the checkpoints share objects
    standby.follow_once()
    assert standby.held == c2.id and standby.fetched_objects == len(held1) + len(new)
    assert standby.cache.shas() == {f.sha256 for f in c2.files}  # c1's own objects pruned
    assert not WRITES & set(rec.calls), rec.calls
    doc = standby.to_json()
    assert (doc["checkpoint"], doc["behindCheckpoints"], doc["promoted"]) == (c2.id, 0, False)


def test_a_missing_object_is_a_retried_round_not_a_held_checkpoint(store, job, tmp_path):
    attempt = write_fence(store, job)
    c1 = checkpoint_of(store, job, tmp_path, 3, attempt)
    victim = max(c1.files, key=lambda f: f.size)
    store.delete(object_key(job, victim.sha256))
    standby = standby_of(store, job, tmp_path / "standby")
    standby.follow_once()
    assert standby.held is None and standby.last_error and standby.behind == 1
    assert not list((tmp_path / "standby" / "standby-objects").glob("*.part"))


def tree_digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_promotion_restore_reuses_held_objects_and_refetches_a_corrupted_one(store, job, tmp_path):
    attempt = write_fence(store, job)
    checkpoint_of(store, job, tmp_path, 3, attempt)
    standby = standby_of(store, job, tmp_path / "standby")
    standby.follow_once()
    c2 = checkpoint_of(store, job, tmp_path, 5, attempt)  # completed after the last round: the top-up's
    victim = max(c2.files, key=lambda f: f.size)
    if victim.sha256 not in standby.cache.shas():
        victim = next(f for f in c2.files if f.sha256 in standby.cache.shas())
    held = standby.cache.root / victim.sha256
    held.write_bytes(b"\0" * held.stat().st_size)  # same size, wrong bytes
    out = restore_on_start(store=store, job=job, store_url=store.url, work_dir=standby.work_dir,
                           hot_dir=standby.work_dir / "hot", restore_from=None, local_recovery=True,
                           attempt=write_fence(store, job), local_copy=standby.cache.place)
    assert (out.source, out.manifest.id, out.fallbacks) == ("remote", c2.id, [])
    assert standby.cache.rejected == 1 and 0 < standby.cache.placed < len(c2.files)
    assert tree_digest(standby.work_dir / "hot") == {f.path: f.sha256 for f in c2.files}
    standby.restored(out)
    assert standby.to_json()["promotion"]["downloadedFiles"] == len(c2.files) - standby.cache.placed
    assert not standby.cache.root.exists()


def test_an_interrupted_download_is_never_held(tmp_path):
    root = tmp_path / "objects"
    root.mkdir()
    _write(root / f"{SHA[0]}.part", "half")
    cache = ObjectCache(root)
    assert cache.shas() == set() and not list(root.iterdir())
    assert not cache.place(entry("a", SHA[0]), tmp_path / "a")


def test_promotion_requests():
    s = Standby.__new__(Standby)
    s.promote, s.stop, s.promoted = threading.Event(), threading.Event(), False
    assert s.request_promotion(7, 6, "standby")[0] == 409  # meant for another attempt
    assert s.request_promotion(None, 6, "standby") == (202, {"promoting": True, "phase": "standby"})
    assert s.promote.is_set() and s.request_promotion(6, 6, "standby")[0] == 202  # repeated: same answer
    s.promoted = True
    assert s.request_promotion(None, 6, "restoring")[0] == 200


def test_the_cli_reads_the_operators_env_and_a_supervised_child_stays_a_standby(monkeypatch, tmp_path):
    from sparkpoint.runtime.cli import build_parser
    from sparkpoint.runtime.cli.run import child_command

    monkeypatch.delenv("SPARKPOINT_STANDBY", raising=False)
    monkeypatch.delenv("SPARKPOINT_STANDBY_INTERVAL", raising=False)
    monkeypatch.delenv("SPARKPOINT_STANDBY_WARMUP", raising=False)
    args = build_parser().parse_args(["run", "job.yaml"])
    assert (args.standby, args.standby_interval, args.standby_warmup) == (False, 2.0, False)
    monkeypatch.setenv("SPARKPOINT_STANDBY", "true")
    monkeypatch.setenv("SPARKPOINT_STANDBY_INTERVAL", "500ms")
    args = build_parser().parse_args(["run", "job.yaml"])
    assert (args.standby, args.standby_interval) == (True, 0.5)
    args.host, args.token_file = "127.0.0.1", None
    cmd = child_command(args, tmp_path)
    assert cmd[cmd.index("--standby-interval") + 1] == "0.5" and "--standby" in cmd
    assert "--standby-warmup" not in cmd
    monkeypatch.setenv("SPARKPOINT_STANDBY_WARMUP", "true")
    args = build_parser().parse_args(["run", "job.yaml"])
    args.host, args.token_file = "127.0.0.1", None
    assert args.standby_warmup and "--standby-warmup" in child_command(args, tmp_path)


def test_a_work_dir_whose_hot_dir_an_attempt_claimed_was_promoted_already(tmp_path):
    from sparkpoint.runtime.service.hotdir import claim
    from sparkpoint.runtime.store import JobRef

    assert not Standby.already_promoted(tmp_path)
    claim(tmp_path, JobRef("default", "j"), "file:///s", attempt=3, checkpoint=None)
    assert Standby.already_promoted(tmp_path)
