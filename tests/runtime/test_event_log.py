"""Event logs in the store (issue 30), without Spark: the uploader's choice of files, the history
keys, GC of old attempts' logs and the History Server mirror, on a directory store. The same code
with real Spark and MinIO: tests/runtime/test_event_log_spark.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.checkpoint.fence import restarts_before
from sparkpoint.runtime.checkpoint.history_gc import history_gc_pass, kept_units
from sparkpoint.runtime.service.event_log import EventLogUploader, event_log_conf, plan, scan
from sparkpoint.runtime.service.history_sync import HistoryMirror, local_dir_name
from sparkpoint.runtime.service.names import app_name, history_attempt
from sparkpoint.runtime.spark.session import session_conf
from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.store import DirectoryStore, JobRef
from sparkpoint.runtime.store.layout import HistoryEntry, history_entry_of, history_key

JOB = JobRef("default", "ev")
BASE = {"image": "sparkpoint:dev", "job": {"entrypoint": "examples.windowed_aggregation:build"}}


def _app(root: Path, app: str, files: dict[str, bytes]) -> Path:
    d = root / f"eventlog_v2_{app}"
    d.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


def _keys(store: DirectoryStore) -> list[str]:
    return sorted(i.key for i in store.list("default/ev/history/"))


def test_spec_field_defaults_and_reserved_conf() -> None:
    spec = config.parse_spec(BASE)
    assert spec.spark.event_log.enabled is True and spec.spark.event_log.retain_attempts == 5
    off = config.parse_spec({**BASE, "spark": {"eventLog": {"enabled": False, "retainAttempts": 2}}})
    assert off.model_dump(by_alias=True)["spark"]["eventLog"] == {"enabled": False, "retainAttempts": 2}
    with pytest.raises(config.SpecError, match="spark.eventLog.retainAttempts"):
        config.parse_spec({**BASE, "spark": {"eventLog": {"retainAttempts": 0}}})
    with pytest.raises(config.SpecError, match=r"spark\.eventLog\.dir is set by Sparkpoint"):
        config.parse_spec({**BASE, "spark": {"conf": {"spark.eventLog.dir": "s3a://x"}}})


def test_session_conf_rolls_and_compresses_and_the_user_may_tune_it(tmp_path) -> None:
    spark = config.parse_spec({**BASE, "spark": {"conf": {"spark.eventLog.rolling.maxFileSize": "64m"}}}).spark
    conf = session_conf(spark, event_log_conf(tmp_path / "ev"))
    assert conf["spark.eventLog.enabled"] == "true" and conf["spark.eventLog.dir"] == (tmp_path / "ev").as_uri()
    assert conf["spark.eventLog.rolling.enabled"] == "true" and conf["spark.eventLog.compress"] == "true"
    assert conf["spark.eventLog.rolling.maxFileSize"] == "64m"
    assert "spark.eventLog.enabled" not in session_conf(spark)  # without the uploader: Spark's default (off)


def test_history_keys_name_the_attempt_and_the_start_and_legacy_keys_still_read() -> None:
    key = history_key(JOB, 2, 7, "eventlog_v2_local-1/events_1_local-1.zstd")
    assert key == "default/ev/history/000002/000007/eventlog_v2_local-1/events_1_local-1.zstd"
    assert history_entry_of(key, JOB) == HistoryEntry(2, 7, "eventlog_v2_local-1", "events_1_local-1.zstd")
    # Written before the attempt level: history/<start>/... reads as attempt = start.
    legacy = history_entry_of("default/ev/history/000007/eventlog_v2_local-1/appstatus_local-1", JOB)
    assert legacy == HistoryEntry(7, 7, "eventlog_v2_local-1", "appstatus_local-1", legacy=True)
    for other in ("default/ev/history/x/eventlog_v2_a/f", "default/ev/history/000001/000002/other/f",
                  "default/ev2/history/000001/000002/eventlog_v2_a/f", "default/ev/history/000001/eventlog_v2_a/"):
        assert history_entry_of(other, JOB) is None, other
    for bad in ("events_1", "eventlog_v2_a/../x", "eventlog_v2_a/.crc", "x/events_1", "eventlog_v2_a/b/c"):
        with pytest.raises(ValueError):
            history_key(JOB, 1, 1, bad)
    with pytest.raises(ValueError, match="at least 1"):
        history_key(JOB, 0, 1, "eventlog_v2_a/events_1_a")


def test_app_name_is_the_operators_attempt_and_names_in_place_restarts() -> None:
    assert app_name(JOB, 3) == "sparkpoint-default-ev-attempt-3"
    assert app_name(JOB, 3, restart=2) == "sparkpoint-default-ev-attempt-3-restart-2"
    assert history_attempt(3, start=9) == 3  # a pod: the operator's attempt (SPARKPOINT_ATTEMPT)
    assert history_attempt(None, start=9) == 9  # a local run: every start is an attempt of its own


def test_restarts_before_counts_the_same_pods_earlier_starts(tmp_path) -> None:
    store = DirectoryStore(tmp_path / "store")
    claims = [("uid-1", 1), ("uid-1", 2), ("uid-1", 2), ("uid-1", 2), ("uid-2", 1), ("uid-2", 1)]
    starts = [write_fence(store, JOB, incarnation=inc, launch=launch) for inc, launch in claims]
    assert starts == [1, 2, 3, 4, 5, 6]
    counted = [restarts_before(store, JOB, n, inc, launch) for n, (inc, launch) in zip(starts, claims, strict=True)]
    assert counted == [0, 0, 1, 2, 0, 1]  # a job created anew under its name (uid-2) starts at attempt 1 again
    assert restarts_before(store, JOB, 4, "uid-1", None) == 0  # a local run: no operator attempt
    assert restarts_before(store, JOB, 4, "uid-1", 2, limit=1) == 1


def test_scan_marks_the_live_apps_newest_file_and_inprogress_marker_open(tmp_path) -> None:
    _app(tmp_path, "A", {"events_1_A.zstd": b"1", "events_2_A.zstd": b"22", "appstatus_A.inprogress": b"",
                         ".events_1_A.zstd.crc": b"c"})
    _app(tmp_path, "B", {"events_1_B.zstd": b"1", "appstatus_B.inprogress": b""})  # an earlier, dead app
    files = {f.relative: f.closed for f in scan(tmp_path, "eventlog_v2_A")}
    assert files == {"eventlog_v2_A/events_1_A.zstd": True, "eventlog_v2_A/events_2_A.zstd": False,
                     "eventlog_v2_A/appstatus_A.inprogress": False,
                     "eventlog_v2_B/events_1_B.zstd": True, "eventlog_v2_B/appstatus_B.inprogress": True}
    order = [f.relative for f in scan(tmp_path, "eventlog_v2_A") if "_A" in f.relative]
    assert order[-1].endswith("appstatus_A.inprogress")  # the marker after the events it announces
    listed = scan(tmp_path, "eventlog_v2_A")
    assert {f.relative for f in plan(listed, {}, open_due=False)} == \
        {f.relative for f in listed if f.closed}


def test_uploader_uploads_changes_only_drops_closed_files_and_throttles_the_open_one(tmp_path) -> None:
    store = DirectoryStore(tmp_path / "store")
    now = [100.0]
    up = EventLogUploader(store, JOB, 2, 3, tmp_path / "local", interval_seconds=60, clock=lambda: now[0])
    up.set_app("A")
    d = _app(up.local_dir, "A", {"events_1_A.zstd": b"one", "appstatus_A.inprogress": b""})
    assert up.sync() == 2  # the first sync also takes the open file: a crash right after leaves a log
    prefix = "default/ev/history/000002/000003/eventlog_v2_A/"
    assert _keys(store) == [prefix + "appstatus_A.inprogress", prefix + "events_1_A.zstd"]
    (d / "events_1_A.zstd").write_bytes(b"one+more")
    now[0] += 10
    assert up.sync() == 0  # the open file changed, but it was uploaded 10 s ago
    (d / "events_2_A.zstd").write_bytes(b"two")  # Spark rolled: file 1 is closed for good
    assert up.sync() == 1 and not (d / "events_1_A.zstd").exists()  # uploaded, removed locally
    assert store.get_bytes(prefix + "events_1_A.zstd") == b"one+more"
    now[0] += 60
    assert up.sync() == 1 and store.get_bytes(prefix + "events_2_A.zstd") == b"two"
    assert up.sync() == 0  # nothing changed
    (d / "appstatus_A.inprogress").rename(d / "appstatus_A")  # SparkContext.stop()
    up.finish(None)
    assert store.exists(prefix + "appstatus_A") and up.failed is False


def test_leftovers_of_earlier_starts_are_uploaded_under_their_attempt_and_start_and_removed(tmp_path) -> None:
    store = DirectoryStore(tmp_path / "store")
    root = tmp_path / "work" / "event-log"
    _app(root / "000002.000004", "K", {"events_1_K.zstd": b"killed", "appstatus_K.inprogress": b""})
    _app(root / "000003", "L", {"events_1_L.zstd": b"older runtime"})  # named by its start alone
    up = EventLogUploader.for_attempt(store, JOB, 2, 5, tmp_path / "work")
    assert up.local_dir == root / "000002.000005" and sorted(p.name for p in root.iterdir()) == ["000002.000005"]
    assert _keys(store) == ["default/ev/history/000002/000004/eventlog_v2_K/appstatus_K.inprogress",
                            "default/ev/history/000002/000004/eventlog_v2_K/events_1_K.zstd",
                            "default/ev/history/000003/000003/eventlog_v2_L/events_1_L.zstd"]


def test_kept_units_are_the_newest_n_attempts_by_their_newest_start_and_the_current_one() -> None:
    starts = {(False, 1): {1}, (False, 2): {2, 3, 4}, (False, 3): {5}, (True, 9): {9}}
    assert kept_units(starts, 2, current=9) == {(False, 3), (True, 9)}
    assert kept_units(starts, 1, current=4) == {(True, 9), (False, 2), (False, 3)}  # never the current (or newer)
    # A job created anew under its name: its attempt 1 holds the newest start, so it is the newest.
    assert kept_units({(False, 1): {1, 7}, (False, 4): {6}}, 1, current=7) == {(False, 1)}
    with pytest.raises(ValueError):
        kept_units(starts, 0, current=1)


def _put(store: DirectoryStore, attempt: int, app: str, name: str, age: float = 3600, start: int | None = None) -> str:
    """A file of attempt `attempt` (start `start`, default the same); start=0: the legacy layout."""
    rel = f"eventlog_v2_{app}/{name}"
    key = f"{JOB.root}/history/{attempt:06d}/{rel}" if start == 0 else history_key(JOB, attempt, start or attempt, rel)
    store.put_bytes(key, b"x" * attempt)
    t = time.time() - age
    os.utime(store.root / key, (t, t))
    return key


def test_gc_deletes_old_attempts_past_retention_never_the_current_and_stale_markers(tmp_path) -> None:
    store = DirectoryStore(tmp_path / "store")
    for _ in range(5):
        write_fence(store, JOB)  # starts 1-5 claimed; 5 is current
    _put(store, 1, "a1", "events_1_a1.zstd", start=0)  # legacy layout: start 1 = attempt 1
    _put(store, 1, "a1", "appstatus_a1", start=0)
    for start in (2, 3):  # operator attempt 2, restarted in place once: one attempt, two starts
        _put(store, 2, f"s{start}", f"events_1_s{start}.zstd", start=start)
        _put(store, 2, f"s{start}", f"appstatus_s{start}", start=start)
    _put(store, 3, "a3", "events_1_a3.zstd", start=4)
    _put(store, 3, "a3", "appstatus_a3", start=4)
    stale = _put(store, 3, "a3", "appstatus_a3.inprogress", start=4)
    fresh = _put(store, 2, "s3b", "events_1_s3b.zstd", age=1, start=3)  # inside the grace
    r = history_gc_pass(store, JOB, retain_attempts=1, grace_seconds=60, dry_run=True)
    assert r.kept_attempts == [3] and r.deleted_files == 6 and len(_keys(store)) == 10  # dry run deletes nothing
    r = history_gc_pass(store, JOB, retain_attempts=1, grace_seconds=60)
    # start 5 (current) has no log yet; attempt 3 is the newest with one: kept, its stale marker removed;
    # attempt 2 keeps its fresh file this pass, the legacy attempt 1 goes whole
    assert r.kept_attempts == [3] and r.deleted_attempts == [1] and r.stale_markers == 1
    assert _keys(store) == sorted([fresh, history_key(JOB, 3, 4, "eventlog_v2_a3/appstatus_a3"),
                                   history_key(JOB, 3, 4, "eventlog_v2_a3/events_1_a3.zstd")])
    assert not store.exists(stale)
    _put(store, 4, "a4", "events_1_a4.zstd", start=5)
    r = history_gc_pass(store, JOB, retain_attempts=1, grace_seconds=0)
    assert r.kept_attempts == [4] and [k.split("/")[3:5] for k in _keys(store)] == [["000004", "000005"]]


def test_mirror_names_attempt_and_start_prefers_the_completed_marker_and_follows_gc(tmp_path) -> None:
    store = DirectoryStore(tmp_path / "store")
    _put(store, 1, "a1", "events_1_a1.zstd", start=0)  # legacy layout
    _put(store, 1, "a1", "appstatus_a1.inprogress", start=0)
    _put(store, 1, "a1", "appstatus_a1", start=0)
    _put(store, 2, "a2", "events_1_a2.zstd", start=2)
    _put(store, 2, "a2", "appstatus_a2.inprogress", start=2)
    _put(store, 2, "a3", "events_1_a3.zstd", start=3)  # attempt 2 restarted in place
    dest = tmp_path / "logs"
    mirror = HistoryMirror(store, [JOB], dest)
    r = mirror.sync()
    one, two = dest / local_dir_name(JOB, 1, 1, "eventlog_v2_a1"), dest / local_dir_name(JOB, 2, 2, "eventlog_v2_a2")
    three = dest / local_dir_name(JOB, 2, 3, "eventlog_v2_a3")
    assert three.name == "eventlog_v2_default_ev_000002_000003_a3"
    assert r.applications == 3 and r.downloaded == 5 and not r.errors
    assert sorted(p.name for p in one.iterdir()) == ["appstatus_a1", "events_1_a1.zstd"]
    assert sorted(p.name for p in two.iterdir()) == ["appstatus_a2.inprogress", "events_1_a2.zstd"]
    assert mirror.sync().downloaded == 0  # unchanged in the store: nothing downloaded again
    store.put_bytes(history_key(JOB, 2, 2, "eventlog_v2_a2/events_1_a2.zstd"), b"longer now")
    assert mirror.sync().downloaded == 1 and (two / "events_1_a2.zstd").read_bytes() == b"longer now"
    for info in list(store.list("default/ev/history/000001/")):
        store.delete(info.key)  # GC collected attempt 1
    r = mirror.sync()
    assert r.applications == 2 and not one.exists() and two.exists() and three.exists()


def test_mirror_without_job_names_finds_every_jobs_logs_and_drops_a_deleted_job(tmp_path) -> None:
    store = DirectoryStore(tmp_path / "store")
    other, quiet = JobRef("team-b", "orders"), JobRef("team-b", "no-logs")
    _put(store, 1, "a1", "events_1_a1.zstd")
    store.put_bytes(history_key(other, 2, 5, "eventlog_v2_b/events_1_b.zstd"), b"b")
    store.put_bytes(f"{quiet.root}/fence.json", b"{}")  # a job without event logs
    store.put_bytes(".sparkpoint-check/conditional-put", b"probe")  # not a namespace
    store.put_bytes("notes.txt", b"not a job")
    dest = tmp_path / "logs"
    mirror = HistoryMirror(store, None, dest)
    r = mirror.sync()
    assert r.jobs == 3 and r.applications == 2 and not r.errors
    assert sorted(p.name for p in dest.iterdir()) == [local_dir_name(JOB, 1, 1, "eventlog_v2_a1"),
                                                      local_dir_name(other, 2, 5, "eventlog_v2_b")]
    # A job deleted with gc.onDelete: delete leaves no key: its copies go at the next pass.
    store.delete(history_key(other, 2, 5, "eventlog_v2_b/events_1_b.zstd"))
    r = mirror.sync()
    assert r.jobs == 2 and r.applications == 1 and r.removed == 1
    assert [p.name for p in dest.iterdir()] == [local_dir_name(JOB, 1, 1, "eventlog_v2_a1")]


def test_history_server_command_reads_the_mirror_and_deletes_nothing(tmp_path) -> None:
    from sparkpoint.runtime.spark.history_server import MAIN, history_server_command

    argv = history_server_command(str(tmp_path / "logs"), 18081, "/jars", java="/jdk/bin/java", heap="256m")
    assert argv[:2] == ["/jdk/bin/java", "-Xmx256m"] and argv[-3:] == ["-cp", "/jars/*", MAIN]
    assert f"-Dspark.history.fs.logDirectory=file:{tmp_path / 'logs'}" in argv
    assert "-Dspark.history.ui.port=18081" in argv and "-Dspark.history.fs.cleaner.enabled=false" in argv


class _FailingPuts(DirectoryStore):
    def put_file(self, key, path):  # type: ignore[override]
        from sparkpoint.runtime.store import StoreError

        raise StoreError("store down")


def test_the_next_attempt_on_a_shared_hot_volume_uploads_an_older_attempts_log_before_removing_it(tmp_path) -> None:
    """Issue 39 case 4. Before: attempt 2's runtime removed attempt 1's work dir, and with it the end
    of attempt 1's event log that had not been uploaded yet (the minute before its crash)."""
    from sparkpoint.runtime.service.attempt_dirs import remove_older_attempt_dirs

    parent = tmp_path / "hot" / "default" / "ev" / "uid"
    _app(parent / "attempt-1" / "event-log" / "000001.000003", "C",
         {"events_1_C.zstd": b"the minute before the crash", "appstatus_C.inprogress": b""})
    current = parent / "attempt-2"
    current.mkdir()
    down = _FailingPuts(tmp_path / "store")
    assert remove_older_attempt_dirs(current, save=lambda d: EventLogUploader.save_leftovers(
        down, JOB, d / "event-log")) == []
    assert (parent / "attempt-1" / "event-log" / "000001.000003").is_dir()  # never lost: tried again later
    store = DirectoryStore(tmp_path / "store")
    assert remove_older_attempt_dirs(current, save=lambda d: EventLogUploader.save_leftovers(
        store, JOB, d / "event-log")) == ["attempt-1"]
    assert not (parent / "attempt-1").exists()
    assert _keys(store) == ["default/ev/history/000001/000003/eventlog_v2_C/appstatus_C.inprogress",
                            "default/ev/history/000001/000003/eventlog_v2_C/events_1_C.zstd"]
    assert store.get_bytes(_keys(store)[1]) == b"the minute before the crash"

