"""Event logs in the store (issue 30), without Spark: the uploader's choice of files, the history
keys, GC of old attempts' logs and the History Server mirror, on a directory store. The same code
with real Spark and MinIO: tests/runtime/test_event_log_spark.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sparkpoint.runtime import config
from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.checkpoint.history_gc import history_gc_pass, kept_attempts
from sparkpoint.runtime.service.event_log import EventLogUploader, event_log_conf, plan, scan
from sparkpoint.runtime.service.history_sync import HistoryMirror, local_dir_name
from sparkpoint.runtime.spark.session import session_conf
from sparkpoint.runtime.store import DirectoryStore, JobRef
from sparkpoint.runtime.store.layout import history_key

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


def test_history_keys_refuse_paths_outside_an_app_dir() -> None:
    assert history_key(JOB, 7, "eventlog_v2_local-1/events_1_local-1.zstd") == \
        "default/ev/history/000007/eventlog_v2_local-1/events_1_local-1.zstd"
    for bad in ("events_1", "eventlog_v2_a/../x", "eventlog_v2_a/.crc", "x/events_1", "eventlog_v2_a/b/c"):
        with pytest.raises(ValueError):
            history_key(JOB, 1, bad)


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
    up = EventLogUploader(store, JOB, 3, tmp_path / "local", interval_seconds=60, clock=lambda: now[0])
    up.set_app("A")
    d = _app(up.local_dir, "A", {"events_1_A.zstd": b"one", "appstatus_A.inprogress": b""})
    assert up.sync() == 2  # the first sync also takes the open file: a crash right after leaves a log
    prefix = "default/ev/history/000003/eventlog_v2_A/"
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


def test_leftovers_of_an_earlier_start_are_uploaded_under_their_attempt_and_removed(tmp_path) -> None:
    store = DirectoryStore(tmp_path / "store")
    root = tmp_path / "work" / "event-log"
    _app(root / "000004", "K", {"events_1_K.zstd": b"killed", "appstatus_K.inprogress": b""})
    up = EventLogUploader.for_attempt(store, JOB, 5, tmp_path / "work")
    assert up.local_dir == root / "000005" and not (root / "000004").exists()
    assert _keys(store) == ["default/ev/history/000004/eventlog_v2_K/appstatus_K.inprogress",
                            "default/ev/history/000004/eventlog_v2_K/events_1_K.zstd"]


def test_kept_attempts_are_the_newest_n_and_the_current_one() -> None:
    assert kept_attempts({1, 2, 3, 4}, 2, current=4) == {3, 4}
    assert kept_attempts({1, 2, 3, 4}, 1, current=2) == {2, 3, 4}  # never the current (or newer)
    assert kept_attempts({1, 2}, 5, current=9) == {1, 2}


def _put(store: DirectoryStore, attempt: int, app: str, name: str, age: float = 3600) -> str:
    key = history_key(JOB, attempt, f"eventlog_v2_{app}/{name}")
    store.put_bytes(key, b"x" * attempt)
    t = time.time() - age
    os.utime(store.root / key, (t, t))
    return key


def test_gc_deletes_old_attempts_past_retention_never_the_current_and_stale_markers(tmp_path) -> None:
    store = DirectoryStore(tmp_path / "store")
    for _ in range(4):
        write_fence(store, JOB)  # attempts 1-4 claimed; 4 is current
    for a in (1, 2, 3):
        _put(store, a, f"a{a}", f"events_1_a{a}.zstd")
        _put(store, a, f"a{a}", f"appstatus_a{a}")
    stale = _put(store, 3, "a3", "appstatus_a3.inprogress")
    fresh = _put(store, 1, "a1b", "events_1_a1b.zstd", age=1)  # inside the grace: kept this pass
    r = history_gc_pass(store, JOB, retain_attempts=1, grace_seconds=60, dry_run=True)
    assert r.kept_attempts == [3] and r.deleted_files == 4 and _keys(store)  # dry run deletes nothing
    r = history_gc_pass(store, JOB, retain_attempts=1, grace_seconds=60)
    # attempt 4 (current) has no log yet; 3 is the newest with one: kept, its stale marker removed
    assert r.kept_attempts == [3] and r.deleted_attempts == [2] and r.stale_markers == 1
    assert _keys(store) == sorted([fresh, history_key(JOB, 3, "eventlog_v2_a3/appstatus_a3"),
                                   history_key(JOB, 3, "eventlog_v2_a3/events_1_a3.zstd")])
    assert not store.exists(stale)
    _put(store, 4, "a4", "events_1_a4.zstd")
    r = history_gc_pass(store, JOB, retain_attempts=1, grace_seconds=0)
    assert r.kept_attempts == [4] and [k.split("/")[3] for k in _keys(store)] == ["000004"]


def test_mirror_flattens_attempts_prefers_the_completed_marker_and_follows_gc(tmp_path) -> None:
    store = DirectoryStore(tmp_path / "store")
    _put(store, 1, "a1", "events_1_a1.zstd")
    _put(store, 1, "a1", "appstatus_a1.inprogress")
    _put(store, 1, "a1", "appstatus_a1")
    _put(store, 2, "a2", "events_1_a2.zstd")
    _put(store, 2, "a2", "appstatus_a2.inprogress")
    dest = tmp_path / "logs"
    mirror = HistoryMirror(store, [JOB], dest)
    r = mirror.sync()
    one, two = dest / local_dir_name(JOB, 1, "eventlog_v2_a1"), dest / local_dir_name(JOB, 2, "eventlog_v2_a2")
    assert r.applications == 2 and r.downloaded == 4 and not r.errors
    assert sorted(p.name for p in one.iterdir()) == ["appstatus_a1", "events_1_a1.zstd"]
    assert sorted(p.name for p in two.iterdir()) == ["appstatus_a2.inprogress", "events_1_a2.zstd"]
    assert mirror.sync().downloaded == 0  # unchanged in the store: nothing downloaded again
    store.put_bytes(history_key(JOB, 2, "eventlog_v2_a2/events_1_a2.zstd"), b"longer now")
    assert mirror.sync().downloaded == 1 and (two / "events_1_a2.zstd").read_bytes() == b"longer now"
    for info in list(store.list("default/ev/history/000001/")):
        store.delete(info.key)  # GC collected attempt 1
    r = mirror.sync()
    assert r.applications == 1 and not one.exists() and two.exists()


def test_history_server_command_reads_the_mirror_and_deletes_nothing(tmp_path) -> None:
    from sparkpoint.runtime.spark.history_server import MAIN, history_server_command

    argv = history_server_command(str(tmp_path / "logs"), 18081, "/jars", java="/jdk/bin/java", heap="256m")
    assert argv[:2] == ["/jdk/bin/java", "-Xmx256m"] and argv[-3:] == ["-cp", "/jars/*", MAIN]
    assert f"-Dspark.history.fs.logDirectory=file:{tmp_path / 'logs'}" in argv
    assert "-Dspark.history.ui.port=18081" in argv and "-Dspark.history.fs.cleaner.enabled=false" in argv
