"""The CLI shapes other tests and users rely on (issue #2), on both backends."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta

from harness.minio_server import free_port
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.layout import object_key

from .clirun import CLI, sparkpoint, sparkpoint_json
from .trees import change_files, tree_digest, write_tree


def test_cli_end_to_end(store_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    common = ["--store", store_url, "--job", "team-a/orders"]
    create = ["checkpoints", "create", "--from", str(tmp_path / "hot"), "--reuse-window", "0s"]  # gc --grace 0s
    paths = write_tree(tmp_path / "hot", 12)
    first = sparkpoint_json(*create, *common)
    assert {"id", "files", "bytes", "new_bytes", "reused_bytes"} <= set(first)
    assert first["id"] == "chk-000001" and first["files"] == 12 and first["reused_bytes"] == 0
    changed = change_files(paths, 3)
    second = sparkpoint_json(*create, *common)
    assert second["new_bytes"] == sum(p.stat().st_size for p in changed)
    assert second["reused_bytes"] == second["bytes"] - second["new_bytes"]

    listed = sparkpoint_json("checkpoints", "list", *common)
    assert [c["id"] for c in listed] == ["chk-000001", "chk-000002"]
    shown = sparkpoint_json("checkpoints", "show", "chk-000002", *common)
    assert shown["id"] == "chk-000002" and len(shown["files"]) == 12
    assert sparkpoint_json("checkpoints", "verify", "chk-000002", *common)["ok"] is True

    sparkpoint("restore", "--checkpoint", "chk-000002", "--to", str(tmp_path / "out"), *common)
    assert tree_digest(tmp_path / "out") == tree_digest(tmp_path / "hot")

    sp = sparkpoint_json("savepoint", "create", "keep-me", *common)
    assert sp["name"] == "keep-me" and sp["source_checkpoint"] == "chk-000002"
    assert [s["name"] for s in sparkpoint_json("savepoint", "list", *common)] == ["keep-me"]

    dry = sparkpoint_json("gc", "--retain", "1", "--grace", "0s", "--once", "--dry-run", *common)
    assert dry["deleted_objects"] == 3 and dry["dry_run"] is True
    gc = sparkpoint_json("gc", "--retain", "1", "--grace", "0s", "--once", *common)
    assert gc["deleted_objects"] == 3 and gc["deleted_bytes"] > 0
    assert [c["id"] for c in sparkpoint_json("checkpoints", "list", *common)] == ["chk-000002"]

    sparkpoint("restore", "--savepoint", "keep-me", "--to", str(tmp_path / "from-sp"), *common)
    assert tree_digest(tmp_path / "from-sp") == tree_digest(tmp_path / "hot")
    sparkpoint("savepoint", "delete", "keep-me", *common)
    assert sparkpoint_json("savepoint", "list", *common) == []

    # a corrupted object: verify exits non-zero and names it, restore refuses
    store = open_store(store_url)
    victim = shown["files"][5]["sha256"]
    store.put_bytes(object_key(JobRef("team-a", "orders"), victim), b"garbage")
    bad = sparkpoint("checkpoints", "verify", "chk-000002", *common, check=False)
    assert bad.returncode == 1 and victim in bad.stdout
    failed = sparkpoint("restore", "--to", str(tmp_path / "out2"), *common, check=False)
    assert failed.returncode == 1 and victim in failed.stderr and not (tmp_path / "out2").exists()


def test_cli_usage_errors_are_one_clear_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"file://{tmp_path}/s"
    no_job = sparkpoint("checkpoints", "list", "--store", url, check=False, env={"SPARKPOINT_JOB": ""})
    assert no_job.returncode == 1 and "--job NAMESPACE/NAME" in no_job.stderr
    bad_job = sparkpoint("checkpoints", "list", "--store", url, "--job", "nojob", check=False)
    assert bad_job.returncode == 1 and "NAMESPACE/NAME" in bad_job.stderr
    bad_url = sparkpoint("checkpoints", "list", "--store", "ftp://x", "--job", "a/b", check=False)
    assert bad_url.returncode == 1 and "unsupported store URL" in bad_url.stderr
    missing = sparkpoint("checkpoints", "show", "chk-000001", "--store", url, "--job", "a/b", check=False)
    assert missing.returncode == 1 and "not found" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    bad_grace = sparkpoint("gc", "--retain", "1", "--grace", "soon", "--store", url, "--job", "a/b", check=False)
    assert bad_grace.returncode == 2 and "invalid duration" in bad_grace.stderr


def test_gc_sidecar_loop_serves_metrics_and_stops_on_sigterm(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"file://{tmp_path}/s"
    write_tree(tmp_path / "hot", 3)
    sparkpoint("checkpoints", "create", "--from", str(tmp_path / "hot"), "--reuse-window", "0s", "--store", url,
               "--job", "ns/j")
    port = free_port()
    proc = subprocess.Popen([*CLI, "gc", "--retain", "1", "--grace", "0s", "--interval", "0.2", "--json",
                             "--metrics-port", str(port), "--store", url, "--job", "ns/j"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        deadline, body = time.monotonic() + 30, ""
        while time.monotonic() < deadline and "sparkpoint_gc_last_run_timestamp_seconds{" not in body:
            time.sleep(0.2)
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                continue
        assert 'sparkpoint_gc_live_bytes{job="j",namespace="ns"}' in body
        assert "sparkpoint_gc_deleted_objects_total" in body
        assert "AWS_SECRET" not in body
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert '"deleted_objects": 0' in out.splitlines()[0]


class _Lines:
    """A pipe read line by line on a thread, so a test can wait for a line while the process runs."""

    def __init__(self, pipe) -> None:  # type: ignore[no-untyped-def]
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe) -> None:  # type: ignore[no-untyped-def]
        for line in pipe:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait(self, what: str, check, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
        with self._cond:
            assert self._cond.wait_for(lambda: check(self.lines), timeout), f"timed out waiting for {what}"

    def text(self) -> str:
        self._thread.join(30)
        return "".join(self.lines)


def test_gc_sidecar_keeps_what_its_pins_file_names_and_follows_its_changes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The operator pins a checkpoint an attempt may restore from (spec.restoreFrom, a rollback point)
    in the job ConfigMap's gc-pins.json; the sidecar re-reads it every pass (issue 25 case 12c)."""
    common = ["--store", f"file://{tmp_path}/s", "--job", "ns/j"]
    paths = write_tree(tmp_path / "hot", 4)
    for i in range(4):
        if i:
            change_files(paths, 1)
        sparkpoint("checkpoints", "create", "--from", str(tmp_path / "hot"), "--reuse-window", "0s", *common)
    pins = tmp_path / "gc-pins.json"
    pins.write_text('["chk-000001"]')
    proc = subprocess.Popen([*CLI, "gc", "--retain", "1", "--grace", "0s", "--interval", "0.2", "--json",
                             "--pins-file", str(pins), *common],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    passes, log = _Lines(proc.stdout), _Lines(proc.stderr)  # --json: one line per pass

    def listed() -> list[str]:
        return [c["id"] for c in sparkpoint_json("checkpoints", "list", *common)]

    def settles(expected: list[str]) -> bool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and listed() != expected:
            time.sleep(0.2)
        return listed() == expected

    try:
        assert settles(["chk-000001", "chk-000004"])
        pins.write_text("{torn")  # a half-written or broken file keeps the last pins
        # Each pass reads the file first: the second warning means the first pass that read the
        # broken file has ended (deleted whatever it was going to delete).
        log.wait("two passes to read the broken pins file",
                 lambda lines: sum("gc pins file unreadable" in line for line in lines) >= 2)
        assert listed() == ["chk-000001", "chk-000004"]
        assert all("chk-000001" in json.loads(line)["kept_checkpoints"] for line in passes.lines)
        pins.write_text("[]")  # unpinned: retention applies again
        assert settles(["chk-000004"])
        restored = tmp_path / "restored"
        sparkpoint("restore", "--checkpoint", "chk-000004", "--to", str(restored), *common)
        assert tree_digest(restored) == tree_digest(tmp_path / "hot")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    err = log.text()
    assert proc.returncode == 0, err
    assert "gc pins file unreadable" in err


def test_a_missing_checkpoint_is_named_by_its_id_not_its_store_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    common = ["--store", f"file://{tmp_path}/s", "--job", "a/b"]
    write_tree(tmp_path / "hot", 2)
    sparkpoint("checkpoints", "create", "--from", str(tmp_path / "hot"), *common)
    for argv in (["checkpoints", "show", "chk-000007"], ["checkpoints", "verify", "chk-000007"],
                 ["savepoint", "create", "sp1", "--checkpoint", "chk-000007"],
                 ["restore", "--checkpoint", "chk-000007", "--to", str(tmp_path / "out")]):
        err = sparkpoint(*argv, *common, check=False).stderr
        assert "checkpoint 'chk-000007' of job a/b not found" in err, (argv, err)
        assert "checkpoints/chk-000007.json" not in err, (argv, err)


ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def test_listed_times_carry_their_zone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    common = ["--store", f"file://{tmp_path}/s", "--job", "a/b"]
    write_tree(tmp_path / "hot", 2)
    before = datetime.now(UTC).replace(microsecond=0)
    sparkpoint("checkpoints", "create", "--from", str(tmp_path / "hot"), *common)
    sparkpoint("savepoint", "create", "keep", *common)
    for argv in (["checkpoints", "list"], ["savepoint", "list"]):
        row = sparkpoint(*argv, *common).stdout.strip().splitlines()[-1]
        printed = ISO_UTC.findall(row)
        assert len(printed) == 1, row
        assert before <= datetime.fromisoformat(printed[0]) <= datetime.now(UTC)
    listed = sparkpoint_json("checkpoints", "list", *common)[0]["completion_time"]
    assert datetime.fromisoformat(listed).utcoffset() == timedelta(0)
