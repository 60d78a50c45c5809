"""The lazy state file system (jvm/) on its own, in a JVM without Spark: jvm/check's JUnit-free check
against a fake agent on loopback (partition paths, once per partition under eight concurrent first
touches, the driver's share asks nothing, statuses under the scheme below a local root, an agent's
error fails the operation and the retry asks again)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.state_query import state_fs_jar

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]


def test_the_file_system_alone(tmp_path):
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    classpath = f"{state_fs_jar()}:{jars}/*"
    source = REPO / "jvm" / "check" / "sparkpoint" / "fs" / "LazyStateFileSystemCheck.java"
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(tmp_path / "classes"), str(source)], check=True)
    (tmp_path / "scratch").mkdir()
    done = subprocess.run(["java", "-cp", f"{tmp_path / 'classes'}:{classpath}", "sparkpoint.fs.LazyStateFileSystemCheck",
                           str(tmp_path / "scratch")], capture_output=True, text=True, env={**os.environ}, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all checks passed" in done.stdout
