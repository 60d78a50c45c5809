"""The operator and the plugin import without pyspark and without minio.

The operator image installs `sparkpoint[operator]`, which has no pyspark; minio is in that extra
(the operator reads s3:// stores through the runtime's client), but only opening such a store may
import it. A subprocess blocks both with a meta-path finder, then imports every module of
sparkpoint.operator and sparkpoint.plugin. Pure: no services.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("pyspark", "py4j", "minio")

SCRIPT = textwrap.dedent("""
    import importlib, pkgutil, sys

    BLOCKED = {blocked!r}

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"blocked for this test: {{name}}")
            return None

    sys.meta_path.insert(0, Block())
    import sparkpoint.operator, sparkpoint.plugin
    for package in (sparkpoint.operator, sparkpoint.plugin):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not loaded, loaded
    print("imported", len([m for m in sys.modules if m.startswith(("sparkpoint.operator.", "sparkpoint.plugin."))]))
""")


def test_operator_and_plugin_modules_import_without_pyspark_or_minio() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(blocked=BLOCKED)], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    count = int(result.stdout.split()[-1])
    assert count >= 30, result.stdout  # every module, not an early stop


def test_the_blocker_would_notice_a_pyspark_import() -> None:
    probe = SCRIPT.format(blocked=BLOCKED).replace("import sparkpoint.operator, sparkpoint.plugin",
                                                   "import pyspark.sql")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0 and "blocked for this test: pyspark" in result.stderr
