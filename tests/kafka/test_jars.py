"""The pinned jar sets (jars.lock) agree with versions.env, fetch_jars reuses a complete dir and
refuses a wrong checksum, and the session puts $SPARKPOINT_SPARK_JARS_DIR's jars on spark.jars.
Pure: no download, no JVM."""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path

import pytest

from sparkpoint.runtime.spark.session import session_conf
from sparkpoint.runtime.spec import SparkSection

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fetch_jars", ROOT / "scripts" / "fetch_jars.py")
assert _spec and _spec.loader
fetch_jars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fetch_jars)
PINS = dict(re.findall(r"^(\w+)=(\S+)$", (ROOT / "versions.env").read_text(), flags=re.M))


def test_lock_sets_follow_versions_env():
    kafka_set, kafka = fetch_jars.read_lock(ROOT / "jars.lock", "kafka")
    assert kafka_set == f"kafka-{PINS['KAFKA_VERSION']}"
    assert f"org/apache/kafka/kafka_2.13/{PINS['KAFKA_VERSION']}/kafka_2.13-{PINS['KAFKA_VERSION']}.jar" in \
        {path for _, path in kafka}
    connector_set, connector = fetch_jars.read_lock(ROOT / "jars.lock", "spark-kafka")
    assert connector_set == f"spark-kafka-{PINS['SPARK_KAFKA_VERSION']}"
    names = {path.rsplit("/", 1)[1] for _, path in connector}
    assert names == {f"spark-sql-kafka-0-10_2.13-{PINS['SPARK_KAFKA_VERSION']}.jar",
                     f"spark-token-provider-kafka-0-10_2.13-{PINS['SPARK_KAFKA_TOKEN_PROVIDER_VERSION']}.jar",
                     f"kafka-clients-{PINS['SPARK_KAFKA_CLIENTS_VERSION']}.jar",
                     f"commons-pool2-{PINS['COMMONS_POOL2_VERSION']}.jar"}
    for sha, _ in kafka + connector:
        assert re.fullmatch(r"[0-9a-f]{64}", sha)


def test_fetch_reuses_a_complete_dir_and_refuses_a_wrong_checksum(tmp_path, monkeypatch):
    jar = b"not really a jar"
    good = hashlib.sha256(jar).hexdigest()
    lock = tmp_path / "jars.lock"
    lock.write_text(f"# comment\ntool-1.0 {good} org/x/tool/1.0/tool-1.0.jar\n")
    fetched = []

    def fake_download(url: str, target: Path, expected: str) -> int:
        fetched.append(url)
        if expected != hashlib.sha256(jar).hexdigest():
            raise SystemExit("sha256 mismatch")
        target.write_bytes(jar)
        return len(jar)
    monkeypatch.setattr(fetch_jars, "download", fake_download)
    dest = tmp_path / "cache" / "tool-1.0"
    (dest).mkdir(parents=True)
    (dest / "old-0.9.jar").write_bytes(b"stale")
    assert fetch_jars.ensure("tool", lock=lock, dest=dest) == dest
    assert sorted(p.name for p in dest.glob("*.jar")) == ["tool-1.0.jar"]  # the stale jar left the classpath
    fetch_jars.ensure("tool", lock=lock, dest=dest)
    assert fetched == [fetch_jars.CENTRAL + "org/x/tool/1.0/tool-1.0.jar"]  # the second call reused it
    lock.write_text(f"tool-1.0 {'0' * 64} org/x/tool/1.0/tool-1.0.jar\n")
    with pytest.raises(SystemExit, match="mismatch"):
        fetch_jars.ensure("tool", lock=lock, dest=dest)
    with pytest.raises(SystemExit, match="0 sets named nope"):
        fetch_jars.ensure("nope", lock=lock, dest=dest)


def test_session_adds_the_jar_dir_after_the_users_jars(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARKPOINT_SPARK_JARS_DIR", raising=False)
    assert "spark.jars" not in session_conf(SparkSection())
    for name in ("b.jar", "a.jar", "notes.txt"):
        (tmp_path / name).write_text("")
    monkeypatch.setenv("SPARKPOINT_SPARK_JARS_DIR", str(tmp_path))
    assert session_conf(SparkSection())["spark.jars"] == f"{tmp_path}/a.jar,{tmp_path}/b.jar"
    mine = SparkSection(conf={"spark.jars": "/opt/mine.jar"})
    assert session_conf(mine)["spark.jars"] == f"/opt/mine.jar,{tmp_path}/a.jar,{tmp_path}/b.jar"
    monkeypatch.setenv("SPARKPOINT_SPARK_JARS_DIR", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="not a directory"):
        session_conf(SparkSection())
