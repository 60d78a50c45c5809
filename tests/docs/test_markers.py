"""The tiers hold: markers say what a test needs, and `make test-unit` runs the pure tier with no
Java and no MinIO to be had (JAVA_HOME and SPARKPOINT_MINIO_BIN point nowhere), so a test that
needs either and lacks its marker fails there instead of slowing the edit-test loop."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT = "not spark and not minio and not tools and not slow"


def collect(tmp_path: Path, *args: str) -> tuple[list[str], dict[str, list[str]]]:
    """(the tests pytest's `-m` selects from `args`, every collected test's marker names)."""
    out = tmp_path / "collected.json"
    run = subprocess.run([sys.executable, str(ROOT / "tests/docs/collect_marks.py"), str(out),
                          "tests", "--ignore=tests/image", "--ignore=tests/docs", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 5), run.stdout[-3000:] + run.stderr[-3000:]
    found = json.loads(out.read_text())
    return found["selected"], found["marks"]


def test_fixtures_mark_their_users_and_the_pure_tier_leaves_them_out(tmp_path):
    pure, marks = collect(tmp_path, "-m", UNIT)
    everything = list(marks)

    def marked(name: str) -> list[str]:  # what `-m name` selects
        return [t for t in everything if name in marks[t]]
    assert 0 < len(pure) < len(everything)
    backend = re.compile(r"[\[-]minio[\]-]")  # the store fixture's MinIO parameter
    assert not [t for t in pure if backend.search(t)]
    assert any("test_runtime_spark.py" in t for t in marked("spark"))
    assert any("test_savepoint_store.py" in t for t in marked("minio"))
    tools = marked("tools")
    assert any(t.startswith("tests/chart/") for t in tools) and any("promtool" in t for t in tools)


def test_make_test_unit_takes_java_and_minio_away():
    recipe = subprocess.run(["make", "-n", "test-unit"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "JAVA_HOME=/nonexistent" in recipe and "SPARKPOINT_MINIO_BIN=/nonexistent" in recipe
    assert UNIT in recipe
